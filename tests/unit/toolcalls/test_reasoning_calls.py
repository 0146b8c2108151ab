"""A call written in the reasoning while the content stays empty (issue 18: Qwen3.5 on vLLM):
recovered whole and streamed alike, and a reasoning reply without one ends as it came."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.toolcalls.recovery import process_response
from proxy.toolcalls.stream import StreamToolProcessor
from tests.toolcall_case import TOOLS
from tests.unit.toolcalls.test_stream import chunk, client_view

CALL = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
THOUGHT = "The user wants the time. "


def _stream(
    reasoning: list[str], content: str = "", key: str = "reasoning_content", **kw: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    upstream = [chunk({"role": "assistant", "content": None})]
    upstream += [chunk({key: r}) for r in reasoning]
    if content:
        upstream.append(chunk({"content": content}))
    upstream.append(chunk({}, "stop"))
    proc = StreamToolProcessor(TOOLS, **kw)
    out = [c for u in upstream for c in proc.feed(u)] + proc.finish()
    return upstream, out


def _whole(message: dict[str, Any]) -> dict[str, Any]:
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    new, _ = process_response(body, TOOLS)
    return (new or body)["choices"][0]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_whole_and_stream_recover_the_call(key: str) -> None:
    choice = _whole({"role": "assistant", "content": "", key: THOUGHT + CALL})
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"][key] == THOUGHT + CALL  # the reasoning is left as it was
    assert choice["message"]["content"] == ""
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_time", "arguments": '{"tz":"UTC"}'}

    text = THOUGHT + CALL
    _, out = _stream([text[k : k + 5] for k in range(0, len(text), 5)], key=key)
    assert client_view(out) == (
        None,
        [("call_recovered_0", "get_time", '{"tz":"UTC"}')],
        "tool_calls",
    )


def test_a_reasoning_reply_without_a_call_goes_out_as_it_came() -> None:
    upstream, out = _stream([THOUGHT, "No tool needed."], content="Noon.")
    assert all(a is b for a, b in zip(out, upstream, strict=True))
    upstream, out = _stream([THOUGHT, "Nothing to call."])
    assert all(a is b for a, b in zip(out, upstream, strict=True))


def test_content_after_the_reasoning_means_the_reasoning_is_not_read() -> None:
    assert "tool_calls" not in _whole({"content": "Noon.", "reasoning": CALL})["message"]
    _, out = _stream([CALL], content="Noon.")
    assert client_view(out) == ("Noon.", [], "stop")


def test_reasoning_past_the_hold_back_limit_is_not_read() -> None:
    _, out = _stream(["x" * 600, CALL], holdback_limit=512)
    assert client_view(out)[1:] == ([], "stop")
