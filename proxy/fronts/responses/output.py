"""A chat answer as a Response object: its output items, status, usage and echoed settings.

Shared by the whole answer (`from_completion`) and the stream (`proxy.fronts.responses.events`,
which builds the same items one by one), so a streamed response and a whole one always agree.
Order in `output`: reasoning, then the message's text, then the calls, as chat gave them; a
message's text is kept when there are calls too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.fronts.ids import new_id
from proxy.fronts.responses.items import reasoning_token
from proxy.fronts.responses.tools import CUSTOM_PARAMETER, Tools
from proxy.toolcalls.recovery import RECOVERED_PREFIX


@dataclass(slots=True)
class Context:
    """What every answer to one Responses request shares."""

    model: str
    echo: dict[str, Any]
    tools: Tools
    encrypted_reasoning: bool = False
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    _call_ids: dict[str, str] = field(default_factory=dict)

    def call_id(self, chat_id: object) -> str:
        """The call id a client sees for a chat call's id. Ids latchgate gave recovered calls
        (`call_recovered_0`) repeat from one answer to the next, and Codex pairs a whole
        conversation's calls and outputs by call id: those (and missing ones) get fresh ids,
        the same one for every appearance of the call in this response."""
        if isinstance(chat_id, str) and chat_id and not chat_id.startswith(RECOVERED_PREFIX):
            return chat_id
        key = chat_id if isinstance(chat_id, str) and chat_id else f"#{len(self._call_ids)}"
        if key not in self._call_ids:
            self._call_ids[key] = new_id("call")
        return self._call_ids[key]


def response_object(
    ctx: Context,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    *,
    error: dict[str, Any] | None = None,
    incomplete: str | None = None,
) -> dict[str, Any]:
    """The Response object, as OpenAI returns it (every field the SDKs read is present)."""
    return {
        "id": ctx.id,
        "object": "response",
        "created_at": ctx.created_at,
        "completed_at": int(time.time()) if status == "completed" else None,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": ctx.model,
        "output": output,
        "usage": usage,
        **ctx.echo,
    }


def status_of(finish: object) -> tuple[str, str | None]:
    """The Response status (and incomplete reason) for a chat finish reason."""
    if finish == "length":
        return "incomplete", "max_output_tokens"
    if finish == "content_filter":
        return "incomplete", "content_filter"
    return "completed", None


def usage_of(usage: object) -> dict[str, Any] | None:
    """Responses usage from chat usage; None unless the counts are all there (Codex reads
    usage strictly: a partial object fails its parse, `null` does not)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    if not _count(prompt) or not _count(completion):
        return None
    total = usage.get("total_tokens")
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": _detail(usage, "prompt_tokens_details", "cached_tokens"),
            "cache_write_tokens": 0,
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": _detail(usage, "completion_tokens_details", "reasoning_tokens")
        },
        "total_tokens": total if _count(total) else prompt + completion,
    }


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _detail(usage: dict[str, Any], group: str, key: str) -> int:
    details = usage.get(group)
    value = details.get(key) if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- items ---------------------------------------------------------------------------------


def text_part(text: str, logprobs: list[Any] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def message_item(item_id: str, parts: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": parts,
    }


def reasoning_item(ctx: Context, item_id: str, text: str, status: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "status": status,
        "summary": [],  # required by Codex's parser, even empty
        "content": [{"type": "reasoning_text", "text": text}],
    }
    if ctx.encrypted_reasoning:
        item["encrypted_content"] = reasoning_token(text)
    return item


def call_item(
    ctx: Context, call_id: str, chat_name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    """The output item for a chat tool call: a function, custom or local shell call."""
    origin = ctx.tools.origin(chat_name)
    item: dict[str, Any]
    if origin.kind == "custom":
        item = {
            "id": new_id("ctc"),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": origin.name,
            "input": custom_input(arguments),
        }
    elif origin.kind == "local_shell":
        item = {
            "id": new_id("lsh"),
            "type": "local_shell_call",
            "status": status,
            "call_id": call_id,
            "action": _shell_action(arguments),
        }
    else:
        item = {
            "id": new_id("fc"),
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": origin.name,
            "arguments": arguments,
        }
    if origin.namespace is not None:
        item["namespace"] = origin.namespace
    return item


def custom_input(arguments: str) -> str:
    """A custom tool's raw input from its wrapper's arguments (`{"input": "..."}`); arguments
    that are not that object are taken as the input themselves."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_PARAMETER), str):
        return str(value[CUSTOM_PARAMETER])
    return arguments


def _shell_action(arguments: str) -> dict[str, Any]:
    try:
        args = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        args = {}
    args = args if isinstance(args, dict) else {}
    command = args.get("command")
    if isinstance(command, str):
        command = [command]
    return {
        "type": "exec",
        "command": command if isinstance(command, list) else [],
        "env": {},
        "working_directory": args.get("workdir"),
        "timeout_ms": args.get("timeout_ms"),
        "user": None,
    }


# -- a whole answer ----------------------------------------------------------------------------


def from_completion(ctx: Context, completion: dict[str, Any]) -> dict[str, Any]:
    """The Response object for a whole chat completion."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    message = choice.get("message") if isinstance(choice, dict) else None
    message = message if isinstance(message, dict) else {}
    status, incomplete = status_of(
        choice.get("finish_reason") if isinstance(choice, dict) else None
    )
    items = output_items(ctx, message, choice.get("logprobs") if isinstance(choice, dict) else None)
    if incomplete and items:
        items[-1]["status"] = "incomplete"
    return response_object(
        ctx, status, items, usage_of(completion.get("usage")), incomplete=incomplete
    )


def output_items(
    ctx: Context, message: dict[str, Any], logprobs: object = None
) -> list[dict[str, Any]]:
    """The output items of one chat message, in order."""
    items: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        items.append(reasoning_item(ctx, new_id("rs"), reasoning, "completed"))
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
        parts.append(text_part(content, tokens if isinstance(tokens, list) else None))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    if parts:
        items.append(message_item(new_id("msg"), parts, "completed"))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        items.append(
            call_item(
                ctx,
                ctx.call_id(call.get("id")),
                function["name"],
                arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode(),
            )
        )
    return items
