"""Functionary v3.2's framing (formats/functionary.py): a reply that opens with `all\n` (or
`>>>all\n`) and holds no call loses that framing and nothing else changes: no tool_calls, no
event, the finish reason as the upstream sent it, whole and streamed at any chunking. And the
opening `NAME\n{` is judged at the reply's start only: prose is not held for it elsewhere.
"""

from __future__ import annotations

import pytest

from proxy.observe.events import TOOL_RECOVERED
from proxy.toolcalls.recovery import process_response, recover
from proxy.toolcalls.stream import StreamToolProcessor
from tests.toolcall_case import THINK, TOOLS
from tests.unit.toolcalls.test_stream import chunk, client_view, run, split_random

# (reply, the content the client gets)
FRAMED = [
    ("all\nHello, world!\nWhat's up?", "Hello, world!\nWhat's up?"),
    (">>>all\nHi there.", "Hi there."),
    ("  all\nIndented start.", "  Indented start."),
    (f"{THINK}\nall\nThe weather is fine.", f"{THINK}\nThe weather is fine."),
    ("all\n", None),
    ("all\nall\nonce only", "all\nonce only"),
    # Before a think block too, as the stream drops it at the reply's opening.
    (f"all\n{THINK}\nThe weather is fine.", f"{THINK}\nThe weather is fine."),
]


def _whole(text: str, finish: str = "stop") -> tuple[dict[str, object], str, list[str]]:
    body = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ]
    }
    new, events = process_response(body, TOOLS)
    choice = (new or body)["choices"][0]
    return choice["message"], choice["finish_reason"], [e.kind for e in events]


@pytest.mark.parametrize(("text", "content"), FRAMED)
def test_framing_is_dropped_whole(text: str, content: str | None) -> None:
    message, finish, events = _whole(text)
    assert message.get("content") == content
    assert "tool_calls" not in message and finish == "stop" and events == []
    rec = recover(text, TOOLS)
    assert rec is not None and (rec.content, rec.calls, rec.format) == (content, [], "functionary")


@pytest.mark.parametrize(("text", "content"), FRAMED)
def test_framing_is_dropped_streamed(text: str, content: str | None) -> None:
    chunkings = [[text], list(text), *(split_random(text, seed) for seed in range(40))]
    chunkings += [[text[:cut], text[cut:]] for cut in range(1, len(text))]
    for pieces in chunkings:
        out, proc = run(pieces)
        assert client_view(out) == (content, [], "stop"), pieces
        assert TOOL_RECOVERED not in [e.kind for e in proc.events]


def test_framing_keeps_the_finish_reason() -> None:
    assert _whole("all\nLong answer", "length")[1] == "length"
    out, _ = run(list("all\nLong answer"), finish="length")
    assert client_view(out) == ("Long answer", [], "length")


def test_no_framing_no_change() -> None:
    for text in ("all good", "Fine.\nall\nof it", "allowed\n"):
        assert _whole(text)[0]["content"] == text and recover(text, TOOLS) is None


def _held_after(text: str) -> int:
    proc = StreamToolProcessor(TOOLS)
    for ch in text:
        proc.feed(chunk({"content": ch}))
    return proc.held()


def test_the_opening_is_held_only_while_it_may_still_be_one() -> None:
    assert _held_after("get_wea") == 7  # may become `get_weather\n{`
    assert _held_after("al") == 2  # may become `all\n`
    assert _held_after("get it.") == 0 and _held_after("alright.") == 0
    assert _held_after('get_weather\n{"ci') == 16  # a call: held to the end
    # Mid-reply, a tool's name is prose: nothing is held for it.
    assert _held_after("Use get_wea") < len("get_wea")  # a marker's first letter at most
    assert _held_after("Sure.\nget_weather\n") == 1  # the trailing newline only


def test_the_opening_is_not_read_mid_reply() -> None:
    text = 'I would run\nsearch\n{"query": "x"}'
    assert _whole(text)[0]["content"] == text


# Functionary v3.1 cut off at the reply ceiling inside its `</function>`: the tag's start goes
# with the call (llama.cpp test-chat functionary v3.1 "cut close"); a complete reply keeps it.
# The call's arguments closed, so it is whole: the finish reason is tool_calls.


@pytest.mark.parametrize("cut", ["<", "</", "</fun", "</function"])
def test_a_cut_off_function_close_goes_with_the_call(cut: str) -> None:
    text = '<function=get_time>{"tz": "UTC"}' + cut
    message, finish, _ = _whole(text, "length")
    assert message["content"] is None and finish == "tool_calls"
    assert '"get_time"' in str(message["tool_calls"]).replace("'", '"')
    for pieces in ([text], list(text), split_random(text, 3)):
        out, _ = run(pieces, finish="length")
        content, calls, _ = client_view(out)
        assert content is None and [c[1] for c in calls] == ["get_time"], pieces


def test_a_function_close_start_is_text_when_the_reply_was_not_cut() -> None:
    message, _, _ = _whole('<function=get_time>{"tz": "UTC"}<', "stop")
    assert message["content"] == "<"
