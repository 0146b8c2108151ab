"""Tool-call arguments: make every call's arguments one compact JSON object, or say why not.

Agents parse `function.arguments` with a strict JSON parser and give up on the first error. Models
write almost-JSON (single quotes, Python `True/False/None`, bare keys, trailing commas), servers
send objects where a string belongs, or an empty string for "no arguments". This module turns all
of that into compact JSON text (BEHAVIOUR.md 4.2) and reports an outcome the caller counts.

The repair is our own token-level rewrite, which never changes the characters inside a
double-quoted string. `json_repair` is only a fallback for what the rewrite cannot fix, and it
only ever sees one call's arguments, never a whole message, and never a truncated object: it
would happily "complete" `{"a": "lo` into a call the model never finished.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import json_repair
import orjson

from proxy.jsontext import compact
from proxy.observe.events import ARGUMENTS, Event

OK = "ok"
REPAIRED = "repaired"
UNPARSEABLE = "unparseable"
TRUNCATED = "truncated"

_CLOSERS = ",}]:"
_LITERALS = {
    "true": "true",
    "True": "true",
    "false": "false",
    "False": "false",
    "null": "null",
    "None": "null",
}


@dataclass(frozen=True, init=False)  # its own __init__: see proxy/compiled.py
class Repair:
    """The arguments to send (compact JSON object text, or the raw text) and what was done."""

    arguments: str
    outcome: str  # "ok", "repaired", "unparseable" or "truncated"

    def __init__(self, arguments: str, outcome: str) -> None:
        object.__setattr__(self, "arguments", arguments)
        object.__setattr__(self, "outcome", outcome)


class _Unfixable(ValueError):
    """The token rewrite met something it will not guess about."""


class _Incomplete(ValueError):
    """The text ends inside a string or an open bracket: a cut-off value, not almost-JSON."""


def repair_arguments(raw: object, finish_reason: str | None) -> Repair:
    """Normalise one tool call's arguments per BEHAVIOUR.md 4.2."""
    if raw is None:
        return Repair("{}", OK)
    if isinstance(raw, dict):
        # An object stays an object; only its encoding changes, which is no repair.
        return Repair(compact(raw), OK)
    if not isinstance(raw, str):
        return _failed(compact(raw), finish_reason)
    value, outcome = parse_object(raw)
    if value is None:
        return _failed(raw, finish_reason)
    if outcome == OK and raw.strip():
        return Repair(raw, OK)
    return Repair(compact(value), outcome)


def _failed(text: str, finish_reason: str | None) -> Repair:
    return Repair(text, TRUNCATED if finish_reason == "length" else UNPARSEABLE)


def parse_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """Parse arguments text leniently: (object, "ok"/"repaired"), or (None, "unparseable")."""
    if not text.strip():
        # Empty means "no arguments"; turning it into {} is normalisation, not a repair.
        return {}, OK
    parsed = loads_lenient(text)
    if parsed is None:
        return None, UNPARSEABLE
    value, repaired = parsed
    if isinstance(value, str):
        inner = loads_lenient(value)
        if inner is not None and isinstance(inner[0], dict):
            return inner[0], REPAIRED
        return None, UNPARSEABLE
    if not isinstance(value, dict):
        return None, UNPARSEABLE
    return value, REPAIRED if repaired else OK


def loads_lenient(text: str) -> tuple[Any, bool] | None:
    """Parse one JSON value, repairing almost-JSON: (value, repaired) or None.

    Never completes a truncated value, and never accepts a repair whose top-level type differs
    from what the text opens with (json_repair turns prose into '' and braces into lists). A
    non-finite number (`1e999`, `NaN`, `Infinity`) makes the text unreadable: JSON has no such
    value, and the repairs would make it null (`inf` is sent as null), the string "NaN", or
    drop the sign of `-Infinity`; the caller keeps the text as the model wrote it instead.
    """
    try:
        return orjson.loads(text), False  # orjson refuses NaN, Infinity and 1e999 itself
    except orjson.JSONDecodeError:
        pass
    stripped = text.strip()
    try:
        return orjson.loads(rewrite(stripped)), True
    except _Incomplete:
        return None
    except _Unfixable as stop:
        if stop.args and stop.args[0] in _NON_FINITE:
            return None
    except orjson.JSONDecodeError:
        pass
    repaired = _json_repair_fallback(stripped)
    return None if repaired is None else _finite(*repaired)


_NON_FINITE = frozenset({"NaN", "nan", "Infinity", "infinity", "inf", "Inf"})


def _finite(value: Any, repaired: bool) -> tuple[Any, bool] | None:
    """(value, repaired), or None when a float in it is not finite (json_repair reads 1e999 as
    inf; orjson never returns one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and item - item != 0:  # inf - inf and nan are nan
            return None
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value, repaired


# json_repair is pure Python and slow on large broken input (about 0.9 s for 200 KB): past this
# size the arguments are passed on unrepaired rather than stall the event loop.
_REPAIR_LIMIT = 64 * 1024


def _json_repair_fallback(text: str) -> tuple[Any, bool] | None:
    pairs = {"{": "}", "[": "]"}
    if not text or text[0] not in pairs or not text.endswith(pairs[text[0]]):
        return None
    if len(text) > _REPAIR_LIMIT:
        return None
    try:
        value = json_repair.loads(text, skip_json_loads=True)
    except (ValueError, RecursionError):
        return None  # nested past what its recursive parser takes: left as the model wrote it
    expected = dict if text[0] == "{" else list
    if not isinstance(value, expected) or not _keeps_everything(text, value):
        return None
    return value, True


_WORD = re.compile(r"\w+")


def _keeps_everything(text: str, value: Any) -> bool:
    """Whether json_repair's `value` lost nothing of `text`: every word of the text is in it,
    and as many objects and lists open in it as in the text. It drops what it cannot place
    (`{"time": 15:30}` became `{"time": 15}`) and turns an object it cannot read into a list
    (`{invalid json}`): a call with those arguments would not be the call the model wrote, so
    the text stays unparseable and is passed on as it came, flagged (BEHAVIOUR.md 4.2)."""
    out = compact(value)  # any depth: orjson writes 254 levels
    if out.count("{") < text.count("{") or out.count("[") < text.count("["):
        return False
    words = set(_WORD.findall(out))
    return all(_LITERALS.get(w, w) in words for w in set(_WORD.findall(text)))


def rewrite(text: str) -> str:
    """Rewrite almost-JSON into JSON token by token; strings' characters are kept as they are.

    Raises `_Incomplete` when the text stops inside a string or bracket and `_Unfixable` for
    anything it will not guess about (a bare word as a value, a stray character).
    """
    out: list[str] = []
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == '"':
            i = _double_string(text, i, out)
        elif c == "'":
            i = _single_string(text, i, out)
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
            out.append(c)
            i += 1
        elif c in "}]":
            if not stack or stack.pop() != c:
                raise _Unfixable(c)
            if out and out[-1] == ",":
                out.pop()  # trailing comma
            out.append(c)
            i += 1
            if not stack and text[i:].strip():
                raise _Unfixable("text after the value")
        elif c in ",:":
            out.append(c)
            i += 1
        elif c == "-" or c.isdigit():
            i = _number(text, i, out)
        elif c.isalpha() or c in "_$":
            i = _word(text, i, out)
        else:
            raise _Unfixable(c)
    if stack:
        raise _Incomplete("open bracket")
    return "".join(out)


def _double_string(text: str, i: int, out: list[str]) -> int:
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            # Raw control characters are the one thing fixed inside a string: JSON forbids them.
            body = text[i + 1 : j]
            out.append(
                '"' + body.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'
            )
            return j + 1
        j += 1
    raise _Incomplete("unterminated string")


def _single_string(text: str, i: int, out: list[str]) -> int:
    chars: list[str] = []
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\" and j + 1 < n:
            nxt = text[j + 1]
            chars.append("'" if nxt == "'" else c + nxt)
            j += 2
            continue
        # An apostrophe closes the string only where a token boundary follows: `'It's'`.
        if c == "'" and _closes(text, j + 1):
            body = "".join(chars)
            out.append('"' + body.replace("\n", "\\n").replace("\t", "\\t") + '"')
            return j + 1
        chars.append('\\"' if c == '"' else c)
        j += 1
    raise _Incomplete("unterminated string")


def _closes(text: str, j: int) -> bool:
    rest = text[j:].lstrip()
    return not rest or rest[0] in _CLOSERS


def _number(text: str, i: int, out: list[str]) -> int:
    j = i + 1
    while j < len(text) and (text[j].isdigit() or text[j] in ".eE+-"):
        j += 1
    out.append(text[i:j])
    return j


def _word(text: str, i: int, out: list[str]) -> int:
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] in "_$-"):
        j += 1
    word = text[i:j]
    rest = text[j:].lstrip()
    if rest.startswith(":"):
        out.append(compact(word))  # bare key
    elif word in _LITERALS:
        out.append(_LITERALS[word])
    else:
        raise _Unfixable(word)
    return j


def argument_event(name: str, outcome: str) -> Event | None:
    """The ARGUMENTS event for one call's outcome (None for "ok")."""
    if outcome == REPAIRED:
        notice = f"Repaired the almost-JSON arguments of tool call '{name}' into valid JSON."
    elif outcome == TRUNCATED:
        notice = (
            f"The tool call '{name}' was cut off at the reply ceiling (finish_reason "
            "length); its arguments are incomplete. Raise max_tokens."
        )
    elif outcome == UNPARSEABLE:
        notice = (
            f"The model produced invalid arguments for tool call '{name}'; they are "
            "passed through unchanged."
        )
    else:
        return None
    return Event(ARGUMENTS, notice, {"outcome": outcome})
