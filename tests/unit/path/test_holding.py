"""proxy.path.holding: a tools stream's calls held until the reply is judged."""

from __future__ import annotations

from typing import Any

from proxy.path.holding import HoldingStream
from tests.unit.path.fakes import FakeUpstream, make_job


def text(piece: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}


def call(name: str) -> dict[str, Any]:
    fragment = {"index": 0, "id": "c1", "type": "function",
                "function": {"name": name, "arguments": "{}"}}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]}


def end(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


class Echo:
    """A stream processor that sends every chunk as it came and passes all text unread."""

    def __init__(self) -> None:
        self.tail: list[dict[str, Any]] = []
        self.events: list[Any] = []

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        return [chunk]

    def pass_texts(self, texts: list[str]) -> int:
        return len(texts)

    def hold_texts(self, texts: list[str]) -> int:
        return 0

    def refuses_texts(self) -> bool:
        return False  # it passes every text

    def add_arguments(self, call: int, texts: list[str]) -> int:
        return 0

    def pass_inert(self) -> bool:
        return True

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        return False  # ends go through `feed`, as an echo has nothing held to judge by

    def finish(self) -> list[dict[str, Any]]:
        return self.tail


def holder(*, hold_all: bool = False, limit: int = 1000) -> HoldingStream:
    return HoldingStream(Echo(), make_job(FakeUpstream(), stream=True),
                         hold_all=hold_all, limit=limit, forces=hold_all)


def test_text_flows_and_everything_from_the_first_call_is_held() -> None:
    held = holder()
    first = text("Hi ")
    assert held.feed(first) == [first]
    assert held.pass_texts(["there"]) == 1
    assert held.feed(call("ls")) == []
    assert held.pass_texts(["late"]) == 0  # held now: through feed
    assert held.feed(text("late")) == []
    assert held.feed(end("tool_calls")) == []
    tail = held.finish()
    assert tail == [call("ls"), text("late"), end("tool_calls")]
    assert held.message() == {
        "role": "assistant", "content": "Hi therelate",
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "ls", "arguments": "{}"}}],
    }
    assert held.finish_reason == "tool_calls" and held.may_heal


def test_text_that_reached_the_client_is_not_part_of_the_message() -> None:
    held = holder()
    held.job.relayed = True
    held.feed(text("Hi"))
    held.feed(call("ls"))
    held.finish()
    assert held.message()["content"] is None
    assert not held.may_heal


def test_a_forced_choice_holds_the_text_up_to_the_limit() -> None:
    held = holder(hold_all=True, limit=10)
    assert held.pass_texts(["abc"]) == 0
    assert held.feed(text("abcdef")) == []
    released = held.feed(text("ghijkl"))  # past 10 bytes: let go, no re-ask possible
    assert released == [text("abcdef"), text("ghijkl")]
    assert held.gave_up and not held.may_heal
    assert held.pass_texts(["more"]) == 1  # flows again
    assert held.feed(call("ls")) == []  # the call is still held, to be judged


def test_the_processor_tail_joins_what_was_held() -> None:
    held = holder()
    inner = held.inner
    assert isinstance(inner, Echo)
    inner.tail = [call("ls"), end("length")]
    held.feed(text("x"))
    assert held.finish() == [call("ls"), end("length")]
    assert held.finish_reason == "length"


def test_a_chunk_that_adds_nothing_goes_unfed_only_while_nothing_is_held() -> None:
    assert holder().pass_inert()
    # A forced call holds the text, and a call or a finish holds everything after it: a role
    # chunk among them must wait with them, not go out ahead.
    assert not holder(hold_all=True).pass_inert()
    held = holder()
    held.feed(call("ls"))
    assert not held.pass_inert()
