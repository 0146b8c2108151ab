"""Calls that open an emulated reply: a call line is a call even when the model goes on after it.

Recovery (BEHAVIOUR 4.1) takes bare JSON as calls only when the whole reply is calls: a model
that was never asked for a call and writes one inside its prose is showing an example. With
tools emulated (`proxy.agent.emulation`) latchgate itself told the model to answer with calls,
and small models then write the call as a bare JSON line and go on inventing its result
(`{"name": "get_weather", "arguments": {...}}` then `{"temperature": 22, ...}`): on the test
model that was nearly every miss of a follow-up turn (bench/RESULTS.md, tool emulation). So for
emulated replies only, the calls on the reply's first lines are taken, and what follows them is
kept as the reply's text, as with any text after a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.jsontext import compact

_DECODER = json.JSONDecoder()  # raw_decode: where one JSON value ends (orjson reads whole texts)
_MAX = 256 * 1024  # a reply longer than this is not scanned


@dataclass(frozen=True, slots=True)
class Leading:
    """The calls a reply opens with, as chat tool calls, and the text after them (None: none)."""

    calls: list[dict[str, Any]]
    rest: str | None


def leading_calls(text: str, names: set[str]) -> Leading | None:
    """The calls to the declared `names` on the first lines of `text`, each a JSON object with
    `name` and `arguments` (or `parameters`) ending its line; None when the reply does not open
    with one."""
    if len(text) > _MAX:
        return None
    pos = len(text) - len(text.lstrip())
    calls: list[dict[str, Any]] = []
    while text.startswith("{", pos):
        found = _call_at(text, pos, names)
        if found is None:
            break
        call, end = found
        calls.append(_chat_call(call, len(calls)))
        pos = end + len(text[end:]) - len(text[end:].lstrip())
    if not calls:
        return None
    rest = text[pos:].strip()
    return Leading(calls, rest or None)


def _call_at(text: str, pos: int, names: set[str]) -> tuple[dict[str, Any], int] | None:
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except ValueError:
        return None
    line_end = text.find("\n", end)
    if text[end : line_end if line_end >= 0 else len(text)].strip():
        return None  # something after the object on its line: not a call line
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return {"name": value["name"], "arguments": arguments}, end


def _chat_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "id": f"call_recovered_{index}",
        "type": "function",
        # compact: arguments nested past what orjson writes (254 levels) are written all the same
        "function": {"name": call["name"], "arguments": compact(call["arguments"])},
    }


def in_answer(body: dict[str, Any], names: set[str]) -> tuple[dict[str, Any], int] | None:
    """A whole answer whose one message opens with calls, with them as `tool_calls` (and the
    count); None when it has calls already or does not open with one."""
    choices = body.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    message = choice.get("message")
    if type(message) is not dict or message.get("tool_calls"):
        return None
    content = message.get("content")
    found = leading_calls(content, names) if isinstance(content, str) else None
    if found is None:
        return None
    new_message = {**message, "content": found.rest, "tool_calls": found.calls}
    finish = choice.get("finish_reason")
    new_choice = {
        **choice,
        "message": new_message,
        "finish_reason": "tool_calls" if finish in (None, "stop") else finish,
    }
    return {**body, "choices": [new_choice]}, len(found.calls)
