"""Pure helpers on the chunks and events of an answer: what they carry, and turning shapes.

Shared by the stream relay, the whole relay and the raw relay, so each question about an answer
("does this delta carry content?", "does this run of events finish a choice?", "what status does
an in-stream error stand for?") has one answer in one place.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from proxy.agent.upstream_errors import UpstreamError
from proxy.errors import error_body
from proxy.path.answers import error_status

_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
DONE_EVENT = b"data: [DONE]\n\n"
# The end of a plain stream: a `[DONE]` event or a finish reason (completions streams carry one).
RAW_END = re.compile(rb'(?:^|\n)data: ?\[DONE\]\n|"finish_reason"\s*:\s*"')
# A passthrough Responses stream has no [DONE]: it ends with its terminal event.
RESPONSES_END = re.compile(rb'"type"\s*:\s*"response\.(?:completed|incomplete|failed)"')


def loads(raw: bytes) -> Any:
    """The JSON of `raw`, or None when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def finishes(region: bytes, start: int, end: int) -> bool:
    """Whether the run of whole events `region[start:end]` finishes a choice. Its last event is
    searched first, where a finish nearly always is; the rest only when that one does not."""
    last = region.rfind(b"\n\ndata: ", start, end - 2)
    last = start if last < 0 else last + 2
    return (
        _FINISHED.search(region, last, end) is not None
        or _FINISHED.search(region, start, last) is not None
    )


def has_content(delta: Any) -> bool:
    """Whether a delta carries any part of the answer: anything but the role, non-empty."""
    if type(delta) is not dict:
        return False
    for key, value in delta.items():  # noqa: SIM110 (a loop, not any(<genexpr>): run per event)
        if value and key != "role":
            return True
    return False


def only_delta(chunk: Any) -> dict[str, Any] | None:
    """The delta of a chunk's one choice (index 0 or none), when nothing else is in play: no
    finish reason, no usage report."""
    if type(chunk) is not dict or chunk.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("index", 0) != 0 or choice.get("finish_reason") is not None:
        return None
    return delta if type(delta) is dict else None


def adds_nothing(chunk: dict[str, Any]) -> bool:
    """Whether a chunk adds nothing to the answer: its one choice's `only_delta` holds the role
    alone or empty values (how servers open a stream)."""
    delta = only_delta(chunk)
    return delta is not None and not has_content(delta)


def only_end(chunk: dict[str, Any]) -> bool:
    """Whether a chunk only ends the answer: its one choice (index 0 or none) has a finish
    reason and a delta that adds nothing (how servers end a stream; a usage report aside)."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return False
    choice = choices[0]
    finish = choice.get("finish_reason")
    return (
        choice.get("index", 0) == 0
        and bool(finish)
        and isinstance(finish, str)
        and not has_content(choice.get("delta"))
    )


def finish_reason(chunk: dict[str, Any]) -> str | None:
    """The finish reason of a chunk's first choice (None: none, or no readable choice)."""
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None
    finish = choices[0].get("finish_reason")
    return finish if isinstance(finish, str) else None


def chunk_has_content(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and has_content(c.get("delta")) for c in choices
    )


def event_status(chunk: dict[str, Any]) -> int:
    """The HTTP status an in-stream error stands for (its `code`, when that is one)."""
    return error_status(chunk.get("error"), 500, keys=("code",))


def upstream_error_body(error: UpstreamError) -> bytes:
    """The upstream's error as an OpenAI error object: kept as it is when it already is one."""
    if error.is_error_object:
        return error.raw
    status = error.status
    message = error.message or f"The upstream answered HTTP {status} with no message."
    return orjson.dumps(error_body(status, message, type=None, code=str(status)))


def compact_error(error: UpstreamError) -> bytes:
    """An error body as one line of JSON, in OpenAI's shape (for an SSE event)."""
    if error.is_error_object:
        return orjson.dumps(error.body)
    return upstream_error_body(error)


def completion_to_chunks(body: dict[str, Any], *, usage: bool) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks a stream of it would have carried."""
    keep = ("id", "created", "model", "system_fingerprint")
    base: dict[str, Any] = {k: body[k] for k in keep if k in body}
    base["object"] = "chat.completion.chunk"
    chunks: list[dict[str, Any]] = []
    finals: list[dict[str, Any]] = []
    for n, choice in enumerate(body.get("choices") or []):
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", n)
        message = choice.get("message")
        delta = {k: v for k, v in (message or {}).items() if v is not None}
        if isinstance(delta.get("tool_calls"), list):
            delta["tool_calls"] = [
                {"index": i, **call}
                for i, call in enumerate(delta["tool_calls"])
                if isinstance(call, dict)
            ]
        chunks.append(
            {**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}
        )
        finish = choice.get("finish_reason") or "stop"
        finals.append({**base, "choices": [{"index": index, "delta": {}, "finish_reason": finish}]})
    chunks += finals
    if usage and isinstance(body.get("usage"), dict):
        chunks.append({**base, "choices": [], "usage": body["usage"]})
    return chunks
