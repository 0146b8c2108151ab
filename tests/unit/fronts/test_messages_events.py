"""A chat stream as Anthropic Messages events (`proxy.fronts.messages.events`): the exact order of
the events, thinking in its own block before the text, tool calls as `input_json_delta`, one
block at a time, `message_start` once, the closing `message_delta` / `message_stop`, failures as
`event: error`, and nothing after a terminal event."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.fronts.messages.events import MessageWriter
from proxy.fronts.messages.output import Context

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
OVERFLOW = (
    "latchgate did not send this request: it is about 18753 tokens, over this model's "
    "8192-token context window. Shorten the messages."
)


def parse(data: bytes) -> list[dict[str, Any]]:
    """The events in `data`, each framed `event: X\\ndata: {json}\\n\\n` with X its type."""
    if not data:
        return []
    assert data.endswith(b"\n\n")
    events = []
    for block in data[:-2].split(b"\n\n"):
        lines = block.split(b"\n")
        assert len(lines) == 2, block
        assert lines[0].startswith(b"event: ") and lines[1].startswith(b"data: ")
        event = json.loads(lines[1][len(b"data: ") :])
        assert event["type"] == lines[0][len(b"event: ") :].decode()
        events.append(event)
    return events


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **kw: Any) -> dict:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **kw}


def call(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        fragment["id"] = call_id
        fragment["type"] = "function"
    if name:
        fragment["function"]["name"] = name
    return chunk({"tool_calls": [fragment]})


def run(*chunks: dict[str, Any], take_each: bool = True) -> tuple[MessageWriter, list[dict]]:
    """Feed the chunks (taking the events after each, as the stream does), then end."""
    writer = MessageWriter(Context("claude-local"))
    out = b""
    for c in chunks:
        writer.add(c)
        if take_each:
            out += writer.take()
    out += writer.done()
    return writer, parse(out)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def blocks(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(event type, block index) of the block events, in order."""
    return [(e["type"], e["index"]) for e in events if "index" in e]


def check_one_block_at_a_time(events: list[dict[str, Any]]) -> None:
    open_index: int | None = None
    expected = 0
    for event in events:
        if event["type"] == "content_block_start":
            assert open_index is None, events
            assert event["index"] == expected
            open_index = event["index"]
        elif event["type"] == "content_block_delta":
            assert event["index"] == open_index
        elif event["type"] == "content_block_stop":
            assert event["index"] == open_index
            open_index, expected = None, expected + 1
    assert open_index is None


def check_framing(events: list[dict[str, Any]]) -> None:
    types = kinds(events)
    assert types[0] == "message_start" and types.count("message_start") == 1
    assert types[-2:] == ["message_delta", "message_stop"]
    assert types.count("message_stop") == 1 and "error" not in types
    check_one_block_at_a_time(events)


# -- text ----------------------------------------------------------------------------------------


def test_text_events_in_exact_order() -> None:
    writer, events = run(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        {"choices": [], "usage": USAGE},
    )
    assert kinds(events) == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0]["message"]
    assert start["id"].startswith("msg_") and start["type"] == "message"
    assert start["role"] == "assistant" and start["model"] == "claude-local"
    assert start["content"] == [] and start["stop_reason"] is None
    assert events[1] == {"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}}  # fmt: skip
    assert [e["delta"] for e in events[2:4]] == [
        {"type": "text_delta", "text": "Hel"},
        {"type": "text_delta", "text": "lo"},
    ]
    assert events[4] == {"type": "content_block_stop", "index": 0}
    assert events[5] == {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    assert events[6] == {"type": "message_stop"}
    assert writer.completed and writer.ended
    assert writer.final is not None
    assert writer.final["content"] == [{"type": "text", "text": "Hello"}]
    assert writer.final["id"] == start["id"]


def test_text_taken_in_one_go_is_one_delta() -> None:
    _, events = run(
        chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk({}, "stop"), take_each=False
    )
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == [{"type": "text_delta", "text": "Hello"}]


def test_an_empty_stream_still_frames_a_message() -> None:
    writer = MessageWriter(Context("m"))
    events = parse(writer.done())
    assert kinds(events) == ["message_start", "message_delta", "message_stop"]
    assert events[1]["delta"]["stop_reason"] == "end_turn"
    assert writer.final is not None and writer.final["content"] == []


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "end_turn"),  # a text reply: no tool_use block, so no tool_use
        (None, "end_turn"),
    ],
)
def test_stop_reasons(finish: str | None, reason: str) -> None:
    _, events = run(chunk({"content": "x"}), chunk({}, finish))
    assert events[-2]["delta"]["stop_reason"] == reason


def test_usage_with_cache_reads_in_message_delta() -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 4,
             "prompt_tokens_details": {"cached_tokens": 90}}  # fmt: skip
    _, events = run(chunk({"content": "x"}), chunk({}, "stop", usage=usage))
    assert events[-2]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 4,
        "cache_read_input_tokens": 90,
    }


# -- thinking ----------------------------------------------------------------------------------


def test_thinking_is_its_own_block_before_the_text() -> None:
    writer, events = run(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Need "}),
        chunk({"reasoning_content": "to think."}),
        chunk({"content": "Paris."}),
        chunk({}, "stop"),
    )
    check_framing(events)
    assert events[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    }
    thinking = [e["delta"] for e in events if e.get("index") == 0 and "delta" in e]
    assert thinking == [
        {"type": "thinking_delta", "thinking": "Need "},
        {"type": "thinking_delta", "thinking": "to think."},
        {"type": "signature_delta", "signature": ""},
    ]
    text = [e for e in events if e.get("index") == 1]
    assert text[0]["content_block"] == {"type": "text", "text": ""}
    assert text[1]["delta"] == {"type": "text_delta", "text": "Paris."}
    assert blocks(events) == [
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_delta", 0),
        ("content_block_delta", 0), ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1), ("content_block_stop", 1),
    ]  # fmt: skip
    assert writer.final is not None
    assert writer.final["content"] == [
        {"type": "thinking", "thinking": "Need to think.", "signature": ""},
        {"type": "text", "text": "Paris."},
    ]


def test_reasoning_alias_is_thinking_too() -> None:
    _, events = run(chunk({"reasoning": "Hmm."}), chunk({"content": "Yes."}), chunk({}, "stop"))
    assert events[1]["content_block"]["type"] == "thinking"


# -- tool calls -------------------------------------------------------------------------------


def test_a_tool_call_streams_input_json_deltas() -> None:
    writer, events = run(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Checking."}),
        call(0, "call_w", "get_weather", ""),
        call(0, "", "", '{"city":'),
        call(0, "", "", ' "Paris"}'),
        chunk({}, "tool_calls"),
        {"choices": [], "usage": USAGE},
    )
    check_framing(events)
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert starts[1] == {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_call_w", "name": "get_weather",
                          "input": {}},
    }  # fmt: skip
    partial = [e["delta"] for e in events if e.get("index") == 1 and "delta" in e]
    assert all(d["type"] == "input_json_delta" for d in partial)
    assert json.loads("".join(d["partial_json"] for d in partial)) == {"city": "Paris"}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert writer.final is not None
    assert writer.final["content"][1] == {
        "type": "tool_use", "id": "toolu_call_w", "name": "get_weather",
        "input": {"city": "Paris"},
    }  # fmt: skip


def test_arguments_before_the_name_are_not_lost() -> None:
    _, events = run(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": '{"a"'}}]}),
        call(0, "", "f", ": 1}"),
        chunk({}, "tool_calls"),
    )
    check_framing(events)
    partial = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert json.loads("".join(partial)) == {"a": 1}


def test_two_parallel_calls_are_sequential_blocks() -> None:
    writer, events = run(
        call(0, "call_1", "get_weather", '{"city":'),
        call(1, "call_2", "get_time", '{"tz":'),
        call(0, "", "", '"Paris"}'),
        call(1, "", "", '"CET"}'),
        chunk({}, "tool_calls"),
    )
    check_framing(events)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [(s["id"], s["name"]) for s in starts] == [
        ("toolu_call_1", "get_weather"),
        ("toolu_call_2", "get_time"),
    ]
    for index, args in ((0, {"city": "Paris"}), (1, {"tz": "CET"})):
        partial = [e["delta"]["partial_json"] for e in events
                   if e["type"] == "content_block_delta" and e["index"] == index]  # fmt: skip
        assert json.loads("".join(partial)) == args
    assert writer.final is not None
    assert [b["input"] for b in writer.final["content"]] == [{"city": "Paris"}, {"tz": "CET"}]


def test_calls_one_after_the_other_open_in_turn() -> None:
    _, events = run(
        call(0, "call_1", "f", "{}"),
        call(1, "call_2", "g", "{}"),
        chunk({}, "tool_calls"),
    )
    check_framing(events)
    assert [e["content_block"]["name"] for e in events if e["type"] == "content_block_start"] == [
        "f",
        "g",
    ]


def test_recovered_call_ids_are_fresh() -> None:
    _, events = run(call(0, "call_recovered_0", "f", "{}"), chunk({}, "tool_calls"))
    (start,) = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert start["id"].startswith("toolu_") and "recovered" not in start["id"]


def test_a_call_with_finish_stop_is_still_tool_use() -> None:
    _, events = run(call(0, "c", "f", "{}"), chunk({}, "stop"))
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


# -- framing, failure, the end --------------------------------------------------------------


def test_message_start_exactly_once_over_many_takes() -> None:
    writer = MessageWriter(Context("m"))
    out = b""
    for piece in ("a", "b", "c"):
        writer.add(chunk({"content": piece}))
        out += writer.take()
        out += writer.take()  # nothing new: nothing written
    out += writer.done()
    events = parse(out)
    check_framing(events)
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == (
        "abc"
    )


def test_other_choices_are_ignored() -> None:
    _, events = run(
        {"choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": None}]},
        chunk({"content": "mine"}),
        chunk({}, "stop"),
    )
    text = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert text == ["mine"]


def test_failed_after_content_closes_with_an_error_event() -> None:
    writer = MessageWriter(Context("m"))
    writer.add(chunk({"content": "Partial"}))
    out = writer.take()
    out += writer.failed({"code": "upstream_disconnected", "type": "server_error",
                          "message": "The upstream closed the connection."})  # fmt: skip
    events = parse(out)
    assert kinds(events)[0] == "message_start" and kinds(events)[-1] == "error"
    assert "message_stop" not in kinds(events) and "message_delta" not in kinds(events)
    assert events[-1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "The upstream closed the connection."},
    }
    assert writer.ended and not writer.completed
    assert writer.done() == b"" and writer.failed({"message": "again"}) == b""
    writer.add(chunk({"content": "more"}))
    assert writer.take() == b""


def test_failed_first_still_starts_the_message() -> None:
    writer = MessageWriter(Context("m"))
    events = parse(writer.failed({"type": "rate_limit_error", "message": "slow down"}))
    assert kinds(events) == ["message_start", "error"]
    assert events[1]["error"] == {"type": "rate_limit_error", "message": "slow down"}


def test_an_overflow_is_said_in_anthropic_words() -> None:
    writer = MessageWriter(Context("m"))
    events = parse(
        writer.failed(
            {
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "message": OVERFLOW,
            }
        )
    )
    error = events[-1]["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long: 18753 tokens > 8192 maximum")
    assert OVERFLOW in error["message"]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "invalid_request_error", "message": "x"}, "invalid_request_error"),
        ({"type": "authentication_error", "message": "x"}, "authentication_error"),
        ({"type": "service_unavailable", "message": "x"}, "overloaded_error"),
        ({"type": "server_error", "message": "x"}, "api_error"),
        ({"code": "proxy_shutting_down", "message": "x"}, "overloaded_error"),
        ({"message": 5}, "api_error"),
    ],
)
def test_failure_types(error: dict[str, Any], kind: str) -> None:
    (_, event) = parse(MessageWriter(Context("m")).failed(error))
    assert event["error"]["type"] == kind
    assert isinstance(event["error"]["message"], str) and event["error"]["message"]


def test_nothing_after_done() -> None:
    writer, _ = run(chunk({"content": "x"}), chunk({}, "stop"))
    assert writer.done() == b""
    assert writer.failed({"message": "late"}) == b""
    writer.add(chunk({"content": "late"}))
    assert writer.take() == b""
    assert writer.completed


def test_the_pending_text_goes_out_before_the_error() -> None:
    writer = MessageWriter(Context("m"))
    writer.add(chunk({"content": "Partial"}))  # not yet taken
    events = parse(writer.failed({"message": "cut"}))
    assert kinds(events) == ["message_start", "content_block_start", "content_block_delta",
                             "error"]  # fmt: skip
    assert events[2]["delta"]["text"] == "Partial"
