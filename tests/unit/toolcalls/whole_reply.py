"""Whole-response recovery as the client sees it, over three declared tools (shared by the
recovery tests that check what is a call, where a value ends, and the scan's linear time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.toolcalls.recovery import process_response, recover


def _tool(name: str, props: dict[str, Any]) -> dict[str, Any]:
    params = {"type": "object", "properties": props}
    return {"type": "function", "function": {"name": name, "parameters": params}}


S = {"type": "string"}
TOOLS = [
    _tool("search", {"query": S}),
    _tool("get_time", {"tz": S}),
    _tool("get_weather", {"city": S}),
]

Result = tuple[str | None, list[tuple[str, str]], str]


def run(text: str, finish: str = "stop") -> Result:
    """(content, [(name, arguments)], finish_reason) as the client sees the whole response."""
    message = {"role": "assistant", "content": text}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    new, _ = process_response(body, TOOLS)
    choice = (new or body)["choices"][0]
    calls = [
        (c["function"]["name"], c["function"]["arguments"])
        for c in choice["message"].get("tool_calls") or []
    ]
    return choice["message"]["content"], calls, choice["finish_reason"]


def stays_text(text: str, finish: str = "stop") -> None:
    assert run(text, finish) == (text, [], finish)
    assert recover(text, TOOLS, finish) is None


def repeated(
    unit: str, finish: str = "stop", head: str = ""
) -> Callable[[int], Callable[[], object]]:
    """For tests.steps.growth: a reply of `head` and `unit` repeated to a size, run whole."""

    def make(size: int) -> Callable[[], object]:
        text = head + unit * (size // len(unit) + 1)
        return lambda: run(text, finish)

    return make
