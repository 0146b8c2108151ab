"""Checks on the client's request body before anything is sent upstream.

Only what latchgate itself relies on is checked (the fields it reads or changes), each failure
naming the field and what it should be. Everything else passes through for the upstream to judge,
so a server's own extensions keep working.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import ProxyError

MessagesT = list[dict[str, Any]]


def _bad(param: str, message: str) -> ProxyError:
    return ProxyError(400, message, param=param, code="invalid_value")


def _check_model(body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None:
        raise ProxyError(
            400,
            "Missing required field 'model': name the model to use.",
            param="model",
            code="missing_required_parameter",
        )
    if not isinstance(model, str) or not model.strip():
        raise _bad("model", "'model' must be a non-empty string naming the model to use.")


def _check_optional(body: dict[str, Any], name: str, types: tuple[type, ...], what: str) -> None:
    if name not in body or body[name] is None:
        return
    value = body[name]
    if isinstance(value, bool) and bool not in types:
        raise _bad(name, f"'{name}' must be {what}, not a boolean.")
    if not isinstance(value, types):
        raise _bad(name, f"'{name}' must be {what}, got {type(value).__name__}.")


def _json_kind(value: object) -> str:
    """The JSON name of a value's type, for messages: clients think in JSON, not Python."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _check_message(message: object, i: int) -> None:
    """One message: the parts latchgate reads (role, content, tool_calls) have their shapes.

    latchgate appends to a system message's content, measures every message's parts, and
    hands the conversation to servers that index `content` and `tool_calls` without checking.
    What it does not read (names, ids, a part's own fields) is left to the upstream.
    """
    if type(message) is not dict:
        raise _bad(f"messages[{i}]", f"messages[{i}] must be an object with 'role' and 'content'.")
    if type(message.get("role")) is not str:
        raise _bad(f"messages[{i}].role", f'messages[{i}].role must be a string such as "user".')
    content = message.get("content")
    # A string (the usual case) or null (an assistant turn that only calls tools) is fine.
    if content is not None and type(content) is not str:
        _check_parts(content, f"messages[{i}].content")
    calls = message.get("tool_calls")
    if calls is not None:
        _check_tool_calls(calls, f"messages[{i}].tool_calls")


def _check_parts(content: object, param: str) -> None:
    if type(content) is not list:
        raise _bad(
            param,
            f"{param} must be a string, null, or a list of content parts, "
            f"not {_json_kind(content)}.",
        )
    for j, part in enumerate(content):
        # A plain string is taken as a text part by vLLM and others; any `type` is passed on
        # (text, image_url, input_audio, file, server-specific kinds), and so is a part without
        # one (vLLM infers `{"image_url": "..."}`). Only a `type` that is not a name is wrong.
        if type(part) is str:
            continue
        if type(part) is not dict:
            raise _bad(
                f"{param}[{j}]",
                f'{param}[{j}] must be a content part object such as {{"type": "text", '
                f'"text": "..."}}, not {_json_kind(part)}.',
            )
        kind = part.get("type")
        if kind is not None and type(kind) is not str:
            raise _bad(
                f"{param}[{j}].type",
                f'{param}[{j}].type must be a string naming the kind of part, such as "text" '
                f'or "image_url", not {_json_kind(kind)}.',
            )


def _check_tool_calls(calls: object, param: str) -> None:
    if type(calls) is not list:
        raise _bad(param, f"{param} must be a list of tool call objects, not {_json_kind(calls)}.")
    for j, call in enumerate(calls):
        if type(call) is not dict:
            raise _bad(
                f"{param}[{j}]",
                f'{param}[{j}] must be a tool call object ({{"id", "type": "function", '
                f'"function": {{"name", "arguments"}}}}), not {_json_kind(call)}.',
            )


# The chat fields latchgate reads or changes, with the types they must have (None is allowed).
_CHAT_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "stream": ((bool,), "true or false"),
    "max_tokens": ((int,), "a whole number"),
    "max_completion_tokens": ((int,), "a whole number"),
    "temperature": ((int, float), "a number"),
    "n": ((int,), "a whole number"),
    "stream_options": ((dict,), "an object"),
    "response_format": ((dict,), "an object"),
    "reasoning_effort": ((str,), "a string"),
}


_CHAT_EXACT = {name: frozenset((*types, type(None))) for name, (types, _) in _CHAT_TYPES.items()}


def check_chat(body: dict[str, Any]) -> None:
    """Validate a chat completion request body (already known to be a JSON object)."""
    _check_model(body)
    messages = body.get("messages")
    if messages is None:
        raise ProxyError(
            400,
            "Missing required field 'messages': send the conversation as a list.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list) or not messages:
        raise _bad("messages", "'messages' must be a non-empty list of message objects.")
    for i, message in enumerate(messages):
        _check_message(message, i)
    # Walk the body's own keys (a few) rather than every typed name, in the client's order. A
    # value of exactly an allowed type (what JSON parsing gives) needs no closer look.
    for name in body:
        exact = _CHAT_EXACT.get(name)
        if exact is not None and type(body[name]) not in exact:
            _check_optional(body, name, *_CHAT_TYPES[name])
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if type(value) is int and value < 0:
            raise _bad(name, f"'{name}' must be 0 or more.")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "'tools' must be a list of tool objects.")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise _bad(f"tools[{i}]", f"tools[{i}] must be an object.")
            fn = tool.get("function")
            if (
                tool.get("type", "function") == "function"
                and fn is not None
                and (not isinstance(fn, dict) or not isinstance(fn.get("name"), str))
            ):
                raise _bad(
                    f"tools[{i}].function", f"tools[{i}].function must be an object with a 'name'."
                )


def check_completion(body: dict[str, Any]) -> None:
    _check_model(body)
    if "prompt" not in body:
        raise ProxyError(
            400,
            "Missing required field 'prompt'.",
            param="prompt",
            code="missing_required_parameter",
        )
    _check_optional(body, "stream", (bool,), "true or false")


def check_embeddings(body: dict[str, Any]) -> None:
    _check_model(body)
    if "input" not in body:
        raise ProxyError(
            400,
            "Missing required field 'input': the text to embed.",
            param="input",
            code="missing_required_parameter",
        )


def check_front_body(body: dict[str, Any]) -> None:
    """A front's body (Responses, Messages): only the model here; the front checks every
    field it translates."""
    _check_model(body)
