"""Errors in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`.

Everything on the chat path (and the HTTP layer) says what went wrong in OpenAI's shape; on the
Messages front each error is rewritten once, here, with the type the Anthropic SDK maps its
status to. A context overflow is worded as Anthropic words it (`prompt is too long: N tokens >
W maximum`), which Claude Code recognises and shows, followed by latchgate's own advice.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    417: "invalid_request_error",
    429: "rate_limit_error",
    431: "request_too_large",
    503: "overloaded_error",
    529: "overloaded_error",
}
# llama.cpp: "request (18753 tokens) exceeds the available context size (8192 tokens)";
# OpenAI and vLLM: "maximum context length is 8192 tokens. However, ... resulted in 18753 tokens".
_LLAMA = re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens")
_OPENAI = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+)", re.S
)
_SIZES = re.compile(
    r"about (\d+) tokens(?: plus (\d+) reserved for the reply)?, over this model's (\d+)-token"
)


def error_type(status: int) -> str:
    """The Anthropic error type for an HTTP status (its SDK picks the exception by status)."""
    return _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error(status: int, error: object) -> dict[str, Any]:
    """The Anthropic error body for an OpenAI error object (or any text)."""
    if isinstance(error, dict):
        message = str(error["message"]) if isinstance(error.get("message"), str) else ""
        code = error.get("code")
    else:
        message, code = str(error), None
    if code == "context_length_exceeded":
        message = overflow_message(message)
    return {"type": "error", "error": {"type": error_type(status), "message": message or "Error"}}


def _upstream_sizes(message: str) -> tuple[str, str] | None:
    """(prompt, window) as the common server wordings state them, if they do."""
    found = _LLAMA.search(message)
    if found is not None:
        return found.group(1), found.group(2)
    found = _OPENAI.search(message)
    if found is not None:
        return found.group(2), found.group(1)
    return None


def overflow_message(message: str) -> str:
    """An overflow in Anthropic's words, with latchgate's message (and its advice) after."""
    sizes = _upstream_sizes(message)
    if sizes is not None:
        return f"prompt is too long: {sizes[0]} tokens > {sizes[1]} maximum. {message}"
    found = _SIZES.search(message)
    if found is not None:
        prompt, reply, window = found.groups()
        if reply is not None and int(prompt) < int(window):
            head = (
                f"input length and `max_tokens` exceed context limit: {prompt} + {reply} > "
                f"{window}, decrease input length or `max_tokens` and try again"
            )
        else:
            head = f"prompt is too long: {prompt} tokens > {window} maximum"
        return f"{head}. {message}"
    return f"prompt is too long for the model's context window. {message}"


def shaped_body(status: int, raw: bytes) -> bytes:
    """An OpenAI-shaped error body (as latchgate answers it) rewritten in Anthropic's shape."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(parsed, dict) and parsed.get("type") == "error":
        return raw  # already Anthropic's (a passthrough upstream's own)
    return orjson.dumps(
        anthropic_error(status, error if error is not None else raw.decode("utf-8", "replace"))
    )
