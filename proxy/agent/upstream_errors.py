"""One upstream error answer, read once into one value every decision reads.

An upstream's error is judged several times: is it a context overflow, a refusal to latch, a
transient failure to retry, and what does the client and the log line get. Each of those used to
read the body bytes again (two readers, up to six parses of one 4xx). `parse_upstream_error`
reads the body once, on errors only (a 2xx never builds this value), into an `UpstreamError`
holding both readings the decisions need:

- the envelope's own fields (`message`, `type`, `code`, `param`), whatever envelope carried them
  (OpenAI's `{"error": {...}}`, `{"error": "<string>"}`, vLLM's top-level fields, FastAPI's
  `detail`, a Gemini array, OpenRouter's `metadata.raw`, an SSE `data:` line, plain text);
- `text`, every piece of text the error carries (BEHAVIOUR 2.2), which the refusal classifier
  matches its wordings against: a refusal's words are not always in the envelope's message.

Both readings keep the rules they had as two readers, byte for byte (tests/unit/
test_upstream_errors.py pins them): the envelope strips an SSE `data:` prefix and reads text
decoded with replacement characters, `text` reads the raw bytes as JSON or else as text.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from proxy.jsontext import compact

MAX_MESSAGE = 2000  # a message that is not JSON is cut here (an HTML page, a stack trace)


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """One upstream error answer, read once (see `parse_upstream_error`).

    `message`, `type`, `code` and `param` are the envelope's fields as strings ("" when absent;
    a number or object is kept as compact JSON). `text` is every piece of text the error carries,
    newline-joined, case kept. `body` is the body parsed as JSON, None when it is not JSON;
    `raw` the bytes as received (masked by the caller before they get here).
    """

    status: int
    message: str
    type: str
    code: str
    param: str
    text: str
    body: Any
    raw: bytes

    @property
    def is_error_object(self) -> bool:
        """Whether the body already is an OpenAI error object (`{"error": {...}}`)."""
        return isinstance(self.body, dict) and isinstance(self.body.get("error"), dict)


class _Envelope(NamedTuple):
    message: str = ""
    type: str = ""
    code: str = ""
    param: str = ""


# orjson.loads answers None for `null`: a sentinel tells "not JSON" apart from it.
_NOT_JSON: Any = object()


def _loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def parse_upstream_error(status: int, raw: bytes) -> UpstreamError:
    """Read an upstream error answer (its status and body) into one `UpstreamError`.

    Never raises, whatever the bytes: an empty body, HTML, cut-off JSON and bytes that are not
    UTF-8 all give a value (their text decoded with replacement characters).
    """
    data = _loads(raw)
    envelope = _envelope(raw, data)
    text = raw.decode("utf-8", "replace") if data is _NOT_JSON else _all_text(data)
    return UpstreamError(
        status=status,
        message=envelope.message,
        type=envelope.type,
        code=envelope.code,
        param=envelope.param,
        text=text,
        body=None if data is _NOT_JSON else data,
        raw=raw,
    )


# --------------------------------------------------------------------------------------------
# The envelope


def _envelope(raw: bytes, data: Any) -> _Envelope:
    """The envelope's fields; `data` is `raw` parsed, or _NOT_JSON."""
    text = raw.decode("utf-8", "replace").strip()
    if data is _NOT_JSON:
        # Read again as text (not given up): an error sent as an SSE event (older llama.cpp
        # streams), or JSON after bytes strict UTF-8 or JSON whitespace refuses.
        if text.startswith("data:"):
            text = text[5:].strip()
        data = _loads(text)
        if data is _NOT_JSON:
            return _Envelope(message=text[:MAX_MESSAGE])
    if isinstance(data, list):  # Gemini: [{"error": {...}}]
        data = next((item for item in data if isinstance(item, dict)), None)
    if isinstance(data, dict):
        return _from_object(data)
    return _Envelope(message=text[:MAX_MESSAGE])


def _field(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return compact(value)  # Mistral puts a dict in `message` (compact: any depth)


def _from_object(data: dict[str, Any]) -> _Envelope:
    inner = data.get("error")
    if isinstance(inner, str):  # LM Studio, Ollama native: {"error": "<string>"}
        return _Envelope(message=inner)
    source = inner if isinstance(inner, dict) else data  # vLLM <= 0.9: fields at the top level
    metadata = source.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
        # OpenRouter wraps the provider's own error as a JSON string; its outer message is
        # only "Provider returned error", so the provider's fields are the useful ones.
        nested = metadata["raw"].encode()
        wrapped = _envelope(nested, _loads(nested))
        if wrapped.message:
            return wrapped
    message = source.get("message")
    if not message:
        # FastAPI/pydantic bodies carry `detail` (a string, or a list of errors); Mistral's
        # newer envelope sends `"message": []` with the list there too.
        message = source.get("detail") or data.get("detail")
    return _Envelope(
        message=_field(message),
        type=_field(source.get("type") or source.get("status")),
        code=_field(source.get("code")),
        param=_field(source.get("param")),
    )


# --------------------------------------------------------------------------------------------
# Every piece of text (BEHAVIOUR 2.2)


def _all_text(data: Any) -> str:
    """Every piece of text a JSON error carries, joined by newlines, without repeats.

    `error.message`, a top-level `message` or `detail` (strings, or pydantic lists whose items
    are kept as compact JSON so their `loc` stays readable), `error` as a plain string, every
    element of an array body (Gemini), `metadata.raw` (OpenRouter; itself JSON), and a JSON
    string body itself. Case is kept; matchers lowercase.
    """
    parts: list[str] = []
    _collect(data, parts, depth=0)
    if not parts and isinstance(data, str):
        parts.append(data)
    return "\n".join(dict.fromkeys(part for part in parts if part))


_TEXT_KEYS = ("error", "message", "detail", "msg", "raw", "description")


def _collect(value: object, parts: list[str], depth: int) -> None:
    if depth > 8:  # a pathological body; enough text has been read by then
        return
    if isinstance(value, list):
        for item in value:
            _collect(item, parts, depth + 1)
    elif isinstance(value, dict):
        if "loc" in value:
            # pydantic echoes what it rejected in `input` (for a whole-body check, the whole
            # request, user messages included): words in it are the client's, not the
            # server's, and must not be read as a refusal.
            kept = {k: v for k, v in value.items() if k not in ("input", "ctx", "url")}
            parts.append(compact(kept))  # any depth (orjson writes 254 levels)
        for key in _TEXT_KEYS:
            _collect_value(value.get(key), parts, depth)
        for key in ("metadata", "details", "fieldViolations"):
            if key in value:
                _collect(value[key], parts, depth + 1)


def _collect_value(value: object, parts: list[str], depth: int) -> None:
    if isinstance(value, str):
        if "'input': " in value and value.lstrip()[:2] in ("[{", "{'") and len(value) < 1 << 20:
            # The Python-repr form of a pydantic error list (old vLLM): read it as the list it
            # is, so its echoed `input` is dropped like the JSON form's (ast.literal_eval reads
            # literals only; nothing is executed).
            with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                _collect(ast.literal_eval(value.strip()), parts, depth + 1)
                return
        parts.append(value)
        nested = value.strip()
        if nested[:1] in ("{", "[") and nested[-1:] in ("}", "]"):
            # A message that merely looks like JSON (a Python repr) is kept as text above.
            with contextlib.suppress(orjson.JSONDecodeError):
                _collect(orjson.loads(nested), parts, depth + 1)
    elif value is not None:
        _collect(value, parts, depth + 1)
