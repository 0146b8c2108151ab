"""The client's stream on a front (`proxy.fronts.chatstream.ChatStream`): the runs of plain text
events it takes in unread give the same events, byte for byte, as reading every event.

The oracle is the same stream with the shape never learnt (every event parsed, as before the
texts were taken in unread), fed the same writes of the same chat stream: text runs with quotes,
escapes and non-ASCII, empty texts, reasoning, calls, logprobs, notices as comments, usage, with
or without `[DONE]`, cut into writes anywhere.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.fronts import ids
from proxy.fronts.chatstream import ChatStream, Writer
from proxy.fronts.messages import output as messages_output
from proxy.fronts.messages.events import MessageWriter
from proxy.fronts.responses import output as responses_output
from proxy.fronts.responses.events import EventWriter
from proxy.fronts.responses.tools import translate_tools

_TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


def _responses() -> Writer:
    tools = translate_tools([_TOOL], [])
    ctx = responses_output.Context("m", {"tools": [], "store": False}, tools, id="resp_1")
    ctx.created_at = 1
    return EventWriter(ctx)


def _messages() -> Writer:
    return MessageWriter(messages_output.Context("claude-local"))


WRITERS = {"responses": _responses, "messages": _messages}


def chunk(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    """A chunk as llama-server writes it (its key order), as an SSE event."""
    body = {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta, **choice}],
        "created": 1796011305,
        "id": "chatcmpl-1",
        "model": "m",
        "object": "chat.completion.chunk",
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def translated(make: Any, stream: bytes, cuts: list[int], *, learn: bool) -> bytes:
    """What the client gets for `stream` written in pieces at `cuts`."""
    ids._COUNTER = itertools.count()  # the same ids in both runs
    out = ChatStream(make())
    out._unlearnt = not learn
    got = [
        out.translate(stream[a:b]) for a, b in itertools.pairwise([0, *sorted(cuts), len(stream)])
    ]
    writer = out.events
    if not writer.ended:
        got.append(writer.failed({"code": "server_error", "message": "ended"}))
    return b"".join(got)


TEXTS = st.lists(
    st.one_of(
        st.sampled_from(["The", " quick", " fox.", "", ' "quoted"', " back\\slash", "\n", " é✓"]),
        st.text(max_size=6),
    ),
    min_size=1,
    max_size=12,
)
SEGMENTS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), TEXTS),
        st.tuples(st.just("reasoning"), st.text(min_size=1, max_size=5)),
        st.tuples(st.just("call"), st.integers(0, 1)),
        st.tuples(
            st.just("comment"), st.sampled_from([b": latchgate notice\n\n", b": keepalive\n\n"])
        ),
        st.tuples(st.just("logprobs"), st.text(min_size=1, max_size=4)),
    ),
    max_size=6,
)


def build(segments: list[tuple[str, Any]], done: bool) -> bytes:
    events = [chunk({"role": "assistant", "content": None})]
    for kind, value in segments:
        if kind == "text":
            events += [chunk({"content": text}) for text in value]
        elif kind == "reasoning":
            events.append(chunk({"reasoning_content": value}))
        elif kind == "call":
            function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
            fragment = {
                "index": value,
                "id": f"call_{value}",
                "type": "function",
                "function": function,
            }
            events.append(chunk({"tool_calls": [fragment]}))
        elif kind == "comment":
            events.append(value)
        else:
            logprobs = {"content": [{"token": value, "logprob": -0.5, "bytes": None}]}
            events.append(chunk({"content": value}, logprobs=logprobs))
    events.append(chunk({}, "stop"))
    if done:
        events.append(b"data: [DONE]\n\n")
    return b"".join(events)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(responses_output.time, "time", lambda: 1796011305.0)


@pytest.mark.parametrize("front", WRITERS)
@settings(max_examples=150, deadline=None)
@given(segments=SEGMENTS, done=st.booleans(), cuts=st.lists(st.integers(0, 4000), max_size=4))
def test_texts_taken_in_unread_give_the_same_events(
    front: str, segments: list[tuple[str, Any]], done: bool, cuts: list[int]
) -> None:
    stream = build(segments, done)
    cuts = [c for c in cuts if c < len(stream)]
    expected = translated(WRITERS[front], stream, cuts, learn=False)
    assert translated(WRITERS[front], stream, cuts, learn=True) == expected


@pytest.mark.parametrize("front", WRITERS)
def test_a_plain_answer_is_read_by_its_text_shape(front: str) -> None:
    # The bench's answer: a role chunk, then texts. The first text teaches the shape, and the
    # rest are taken in unread, as one delta, the same bytes as reading them all.
    texts = ["The", " quick", ' "brown"', " fox", " jumps."]
    stream = build([("text", texts)], done=True)
    ids._COUNTER = itertools.count()
    out = ChatStream(WRITERS[front]())
    got = out.translate(stream)
    assert out._shape is not None and out.events.ended
    assert got == translated(WRITERS[front], stream, [], learn=False)
    assert "".join(texts).encode() in got.replace(b'\\"', b'"')


def test_a_stream_that_is_not_plain_text_first_is_read_as_before() -> None:
    # The first event that may teach the shape is a text with logprobs: learning stops, and
    # every event is parsed (the events are the same either way).
    logprobs = {"content": [{"token": "a", "logprob": -0.1, "bytes": None}]}
    stream = (
        chunk({"content": "a"}, logprobs=logprobs) + chunk({"content": "b"}) + chunk({}, "stop")
    )
    out = ChatStream(_responses())
    out.translate(stream)
    assert out._shape is None and out._unlearnt
