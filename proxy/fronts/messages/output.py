"""A chat answer as an Anthropic Message: content blocks, stop reason and usage.

Shared by the whole answer (`from_completion`) and the stream (`proxy.fronts.messages.events`),
so both give the same blocks: `thinking` from the reasoning, then the `text`, then a `tool_use`
per call. A call's id is `toolu_` and the chat call id, which the request side maps back
(`request.chat_call_id`); ids latchgate gave recovered calls repeat from one answer to the next,
so those get fresh ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.fronts.ids import new_id
from proxy.fronts.messages.request import TOOL_ID_PREFIX
from proxy.toolcalls.recovery import RECOVERED_PREFIX

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


@dataclass(slots=True)
class Context:
    """What every answer to one Messages request shares."""

    model: str
    stop_sequences: tuple[str, ...] = ()  # the request's, to tell which one stopped the reply
    id: str = field(default_factory=lambda: new_id("msg"))
    created: float = field(default_factory=time.time)

    def tool_id(self, chat_id: object) -> str:
        if isinstance(chat_id, str) and chat_id and not chat_id.startswith(RECOVERED_PREFIX):
            return TOOL_ID_PREFIX + chat_id
        return new_id(TOOL_ID_PREFIX.rstrip("_"))


def stop_reason(finish: object) -> str | None:
    return STOP_REASONS.get(finish, "end_turn") if isinstance(finish, str) else None


def stop_of(finish: object, content: list[dict[str, Any]]) -> str:
    """The stop reason of a message holding `content`: `tool_use` exactly when a tool_use
    block is in it, whatever the server's finish reason said (`tool_calls` with no call, or
    `stop` with calls: clients run the calls on `tool_use`, and wait for one on it)."""
    stop = stop_reason(finish) or "end_turn"
    uses = any(block["type"] == "tool_use" for block in content)
    if stop == "end_turn" and uses:
        return "tool_use"
    if stop == "tool_use" and not uses:
        return "end_turn"
    return stop


def matched_stop(ctx: Context, choice: dict[str, Any]) -> str | None:
    """The stop sequence that ended the reply, where the server says which (vLLM's
    `stop_reason`; llama.cpp and OpenAI say only "stop", which is then `end_turn`)."""
    said = choice.get("stop_reason")
    return said if isinstance(said, str) and said in ctx.stop_sequences else None


def usage_of(usage: object) -> dict[str, int]:
    """Anthropic usage from chat usage: input tokens without those read from the cache."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    out = {
        "input_tokens": max(prompt - cached, 0),
        "output_tokens": _count(usage.get("completion_tokens")),
    }
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def tool_input(arguments: object) -> dict[str, Any]:
    """A call's arguments as the object `tool_use.input` must be (repaired JSON from the chat
    path; anything else, which no tool can take, becomes an empty object)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def message_object(
    ctx: Context,
    content: list[dict[str, Any]],
    stop: str | None,
    usage: dict[str, int],
    sequence: str | None = None,
) -> dict[str, Any]:
    return {
        "id": ctx.id,
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": sequence,
        "usage": usage,
    }


def from_completion(ctx: Context, completion: dict[str, Any]) -> dict[str, Any]:
    """The Message for a whole chat completion."""
    choices = completion.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    choice: dict[str, Any] = first if isinstance(first, dict) else {}
    found = choice.get("message")
    message: dict[str, Any] = found if isinstance(found, dict) else {}
    blocks: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    content = message.get("content")
    if isinstance(content, str) and content:
        blocks.append({"type": "text", "text": content})
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": ctx.tool_id(call.get("id")),
                    "name": function["name"],
                    "input": tool_input(function.get("arguments")),
                }
            )
    stop = stop_of(choice.get("finish_reason"), blocks)
    sequence = matched_stop(ctx, choice)
    if sequence is not None:
        stop = "stop_sequence"
    return message_object(ctx, blocks, stop, usage_of(completion.get("usage")), sequence)
