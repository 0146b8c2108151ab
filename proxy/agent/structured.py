"""Structured output for models that refuse `response_format`: ask in words, extract on return.

When a model has latched `structured_output` off (BEHAVIOUR 9), the request goes out without
`response_format` and with an instruction in the system prompt; the reply's JSON is then cut out
of whatever prose or code fence the model wrapped it in and leniently repaired, so the client
still receives a content string that parses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import json_repair
import orjson

from proxy.jsontext import compact

Schema = dict[str, Any]

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_THINK_END = "</think>"


def instruction(response_format: object, sanitise: Callable[[Schema], Schema] | None) -> str:
    """The sentence(s) appended to the system prompt for this `response_format`."""
    base = "Reply with a single JSON value and nothing else: no prose before or after it"
    schema = _schema_of(response_format)
    if schema is None:
        return base + ", no code fence. The value must be a JSON object."
    if sanitise is not None:
        schema = sanitise(schema)
    text = orjson.dumps(schema).decode()
    return base + f", no code fence. The value must match this JSON schema: {text}"


def _schema_of(response_format: object) -> Schema | None:
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def ask_in_words(
    body: dict[str, Any], sanitise: Callable[[Schema], Schema] | None = None
) -> dict[str, Any]:
    """A new body without `response_format`, asking for JSON in the system prompt instead.

    The instruction is appended to the first system (or developer) message, or a system message
    is put first when there is none. `sanitise`, when given, is applied to the schema first
    (the schemas module's sanitiser; kept as a parameter so this module does not depend on it).
    """
    text = instruction(body.get("response_format"), sanitise)
    out = {key: value for key, value in body.items() if key != "response_format"}
    messages = body.get("messages")
    out["messages"] = with_instruction(messages if isinstance(messages, list) else [], text)
    return out


def with_instruction(messages: list[Any], text: str) -> list[Any]:
    """New messages with `text` appended to the first system (or developer) message, or a system
    message holding it put first; shared with tool emulation (proxy/agent/emulation.py)."""
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            updated = {**message, "content": append_text(message.get("content"), text)}
            return [*messages[:index], updated, *messages[index + 1 :]]
    return [{"role": "system", "content": text}, *messages]


def append_text(content: object, text: str) -> object:
    """A message's content with `text` after it: a new text part of a list of parts, a new
    paragraph of a string, or the text alone when there was none."""
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    if isinstance(content, str) and content.strip():
        return f"{content}\n\n{text}"
    return text


def extract_json(text: str) -> str | None:
    """The JSON a reply carries, as compact JSON; None when there is none.

    The answer is looked for after the last `</think>` (the thinking may hold drafts), unless
    that `</think>` sits inside the JSON's own strings. Candidates are the fenced blocks, last
    first (an example usually comes before the answer), then the span from the first `{`/`[`
    to the last `}`/`]` (to the end when the reply was cut off). Every candidate is tried
    strictly before any is repaired, and only a candidate span is ever repaired, never the
    prose around it (a repair library run over prose turns it into `""`).
    """
    whole = text.strip()
    tail = text.rsplit(_THINK_END, 1)[-1].strip()
    exact = _strict(whole)
    if exact is not None:
        return exact
    if tail != whole:
        span = _span(whole)
        found = _strict(span) if span is not None and _THINK_END in span else None
        if found is not None:
            return found  # the `</think>` was inside the JSON, not the end of a think block
    sources = [tail] if tail == whole else [tail, whole]
    candidates = [span for source in sources for span in _candidates(source)]
    for parse in (_strict, _repaired):
        for span in candidates:
            found = parse(span)
            if found is not None:
                return found
    return None


def _candidates(text: str) -> list[str]:
    fenced = [_span(block) for block in reversed(_FENCE.findall(text))]
    return [span for span in [*fenced, _span(text)] if span is not None]


def _span(text: str) -> str | None:
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = max(text.rfind("}"), text.rfind("]"))
    return text[start : end + 1] if end > start else text[start:]


def _strict(span: str) -> str | None:
    try:
        return compact(orjson.loads(span))  # compact: any depth (orjson writes 254 levels)
    except orjson.JSONDecodeError:
        return None


def _repaired(span: str) -> str | None:
    try:
        value = json_repair.loads(span)
    except (ValueError, RecursionError):
        return None  # nested past what its recursive parser takes
    # json_repair answers "" (or a bare scalar) when it found no structure; that is no JSON.
    if not isinstance(value, dict | list):
        return None
    return compact(value)


class JsonInWordsStream:
    """Holds a streamed reply's content and sends it once, as the JSON extracted from it.

    Used when `response_format` was asked for in words (section 9): the client asked for JSON
    and must get a content string that parses, which cannot be judged before the reply is whole.
    """

    def __init__(self) -> None:
        self._text: dict[int, list[str]] = {}  # per choice index
        self._finish: dict[int, str] = {}
        self._last: dict[str, Any] | None = None
        self._usage: Any = None

    def pass_texts(self, texts: list[str]) -> int:
        return 0  # every piece of content is held for the end: each chunk is fed

    def hold_texts(self, texts: list[str]) -> int:
        return 0

    def refuses_texts(self) -> bool:
        return True  # neither of the two above takes any

    def add_arguments(self, call: int, texts: list[str]) -> int:
        return 0

    def pass_inert(self) -> bool:
        return False  # every chunk is fed: the last one's fields make the answer's chunks

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        return False  # the end is fed: the answer's JSON goes out with it

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return [chunk]
        self._last = chunk
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]  # rides on the last chunk: it goes out with the end
        out: list[dict[str, Any]] = []
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0) if isinstance(choice.get("index"), int) else 0
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            if isinstance(delta.get("content"), str):
                self._text.setdefault(index, []).append(delta["content"])
            if choice.get("finish_reason"):
                self._finish[index] = choice["finish_reason"]
            # Everything but the content (role, reasoning...) goes on as it comes.
            rest = {k: v for k, v in delta.items() if k != "content"}
            if rest:
                base = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
                out.append(
                    {**base, "choices": [{"index": index, "delta": rest, "finish_reason": None}]}
                )
        return out

    def finish(self) -> list[dict[str, Any]]:
        if self._last is None:
            return []
        base = {k: v for k, v in self._last.items() if k not in ("choices", "usage")}
        out: list[dict[str, Any]] = []
        for index in sorted(set(self._text) | set(self._finish)):
            text = "".join(self._text.get(index, []))
            content = extract_json(text) or text
            out.append(
                {
                    **base,
                    "choices": [
                        {"index": index, "delta": {"content": content}, "finish_reason": None}
                    ],
                }
            )
            out.append(
                {
                    **base,
                    "choices": [
                        {
                            "index": index,
                            "delta": {},
                            "finish_reason": self._finish.get(index, "stop"),
                        }
                    ],
                }
            )
        if out and self._usage is not None:
            out[-1]["usage"] = self._usage
        return out


def json_from_words(body: dict[str, Any]) -> dict[str, Any] | None:
    """A whole answer whose content strings hold the JSON extracted from them (None when
    nothing changes)."""
    choices = body.get("choices")
    if not isinstance(choices, list):
        return None
    new_choices = []
    changed = False
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(content, str):
            extracted = extract_json(content)
            if extracted is not None and extracted != content:
                choice = {**choice, "message": {**message, "content": extracted}}
                changed = True
        new_choices.append(choice)
    return {**body, "choices": new_choices} if changed else None
