"""Recover tool calls a model wrote as text, and repair every call's arguments (BEHAVIOUR.md 4.1).

When a server's tool-call parser does not match the model's chat template, the call arrives as
text in `content` and the agent stops. This module finds such calls in a whole reply, in the
marker formats catalogued in research/toolcall-formats.md, and turns them into OpenAI
`tool_calls`.

Calls are split with string-aware scanners first; only then is each call's JSON parsed leniently
(proxy/arguments.py). A repair library never sees a whole message: it turns prose into `''`,
braces into lists and collapses two same-shaped calls into one. Nothing inside `<think>` is a
call. Bare JSON and fenced forms count only when no marker matched and every name is declared.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from proxy.jsontext import compact
from proxy.observe.events import TOOL_RECOVERED, Event
from proxy.toolcalls.arguments import (
    OK,
    REPAIRED,
    argument_event,
    loads_lenient,
    repair_arguments,
)

# One call as found in text: name, arguments (a dict, or text still to be repaired), and whether
# the call's own JSON needed repairing to be read.
RawCall = tuple[str, Any, bool]
Schemas = dict[str, dict[str, Any]]

RECOVERED_PREFIX = "call_recovered_"  # the ids of recovered calls: call_recovered_0, ...
_CALL_KEYS = {
    "name",
    "arguments",
    "parameters",
    "args",
    "id",
    "type",
    "function",
    "tool",
    "tool_input",
    "input",
    "tool_name",
    "tool_call_id",
}
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_NAME_KEYS = ("name", "tool", "tool_name")
_WRAPPER_KEYS = ("function", "tool_calls", "tool_call")
_THINK_CLOSE = ("</think>", "[/THINK]")
_THINK_OPEN = ("<think>", "[THINK]")


@dataclass
class Recovery:
    """What a reply's text becomes: the remaining content, the calls, and the format found."""

    content: str | None
    calls: list[dict[str, Any]]
    format: str


@dataclass(frozen=True)
class Found:
    """Calls found in a reply before their arguments are repaired."""

    content: str | None
    calls: list[RawCall]
    format: str


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    calls: list[RawCall]
    format: str


# ---------------------------------------------------------------------------------------------
# Scanning


def value_end(s: str, i: int, limit: int | None = None) -> int | None:
    """Index after the JSON-ish value opening at s[i] (`{`, `[` or `(`), or None if unclosed.

    Braces inside strings do not count. A single quote opens a string only where a value or key
    may start, so apostrophes in prose-like text do not derail the scan. The scan stops at
    `limit` (default: the end of `s`); a value still open there counts as unclosed.
    """
    depth = 0
    n = len(s) if limit is None else min(limit, len(s))
    prev = ""
    while i < n:
        c = s[i]
        if c == '"' or (c == "'" and prev in "{[(,:="):
            i = _string_end(s, i, n)
            if i < 0:
                return None
            prev = '"'
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        if not c.isspace():
            prev = c
        i += 1
    return None


def _string_end(s: str, i: int, n: int | None = None) -> int:
    quote = s[i]
    j = i + 1
    n = len(s) if n is None else n
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            if quote == '"':
                return j + 1
            rest = s[j + 1 : j + 40].lstrip()
            if not rest or rest[0] in ",}]):":
                return j + 1
        j += 1
    return -1


def _skip(s: str, i: int, chars: str = "") -> int:
    while i < len(s) and (s[i].isspace() or s[i] in chars):
        i += 1
    return i


def split_think(text: str) -> tuple[str, str, str]:
    """(head, scan, rest): only `scan` may hold calls; head ends at the last think close."""
    cut = 0
    for tag in _THINK_CLOSE:
        k = text.rfind(tag)
        if k >= 0:
            cut = max(cut, k + len(tag))
    tail = text[cut:]
    opens = [k for k in (tail.find(t) for t in _THINK_OPEN) if k >= 0]
    if opens:
        return text[:cut], tail[: min(opens)], tail[min(opens) :]
    return text[:cut], tail, ""


class _Next:
    """The first hit at or after a position, cached for positions that only grow.

    Finders ask "where is the next close tag / opener" once per candidate; without the cache an
    input made of many unclosed openers costs a scan to the end of the text per opener.
    """

    def __init__(self, find: Callable[[int], int]) -> None:
        self._find = find
        self._from = -1
        self._hit = -1

    def at(self, pos: int) -> int:
        """Index of the first hit at or after `pos`, or -1."""
        if self._from < 0 or pos < self._from or (self._hit != -1 and self._hit < pos):
            self._from, self._hit = pos, self._find(pos)
        return self._hit


class _Scan:
    """Bounded value scans over one text for one marker (the linear-time guard).

    A value opened after a marker is scanned only up to the marker's next occurrence; a value
    still open there may be rescanned to the end of the text while a budget of len(text)
    characters lasts, so a call whose string holds its own marker literally is still read, but
    a text of many unclosed openers costs linear time, not quadratic.
    """

    def __init__(self, s: str, opener: str, close: str | None) -> None:
        self.s = s
        self._opener = _Next(lambda p: s.find(opener, p))
        self._close = _Next(lambda p: s.find(close, p)) if close else None
        self._budget = len(s)

    def limit(self, i: int) -> int:
        """Where a value opened at s[i] must have closed: the marker's next occurrence."""
        nxt = self._opener.at(i + 1)
        return len(self.s) if nxt < 0 else nxt

    def value(self, i: int) -> int | None:
        """value_end bounded by the next marker (extended while the budget lasts)."""
        limit = self.limit(i)
        end = value_end(self.s, i, limit)
        if end is None and limit < len(self.s) and self._budget > 0:
            end = value_end(self.s, i)
            self._budget -= (end or len(self.s)) - i
        return end

    def close_at(self, i: int) -> int:
        """The format's close tag after s[i] and before the next marker, or -1."""
        if self._close is None:
            return -1
        c = self._close.at(i)
        return c if 0 <= c < self.limit(i) else -1


@dataclass(frozen=True)
class _Ctx:
    """What every finder needs besides the text: the declared tools and whether it may be cut."""

    schemas: Schemas
    truncated: bool


# ---------------------------------------------------------------------------------------------
# Calls from parsed values


def calls_from_value(
    value: Any, repaired: bool, schemas: Schemas, strict: bool = False
) -> list[RawCall] | None:
    """The calls a parsed JSON value spells, or None when it is not (only) calls.

    `strict` is for JSON standing alone with no marker (bare and fenced forms): it then needs an
    arguments key, a `type` of "function" if any, and arguments that are not a JSON Schema, so
    config objects, API examples and an echoed tools list stay text.
    """
    if isinstance(value, dict):
        return _calls_from_obj(value, repaired, schemas, strict)
    if isinstance(value, list) and value:
        calls: list[RawCall] = []
        for item in value:
            found = (
                _calls_from_obj(item, repaired, schemas, strict) if isinstance(item, dict) else None
            )
            if not found:
                return None
            calls.extend(found)
        return calls
    return None


def _calls_from_obj(
    obj: dict[str, Any], repaired: bool, schemas: Schemas, strict: bool
) -> list[RawCall] | None:
    """The calls one JSON object stands for: a wrapper (`tool_calls`, `tool_call`,
    `function`) opened, Apertus' `{"NAME": {args}}`, or one `{name, arguments}` call."""
    if isinstance(obj.get("tool_calls"), list) and len(obj) == 1:
        return calls_from_value(obj["tool_calls"], repaired, schemas, strict)
    if isinstance(obj.get("tool_call"), dict) and len(obj) == 1:
        return _calls_from_obj(obj["tool_call"], repaired, schemas, strict)
    if strict and obj.get("type", "function") != "function":
        return None
    if isinstance(obj.get("function"), dict):
        inner = {k: v for k, v in obj.items() if k not in ("function", "type", "id")}
        return _calls_from_obj({**inner, **obj["function"]}, repaired, schemas, strict)
    if len(obj) == 1:
        ((key, val),) = obj.items()
        if key in schemas and isinstance(val, dict):  # Apertus: {"NAME": {args}}
            # Only when every key is a parameter of that tool: {"search": {"enabled": true}}
            # is configuration, not a call.
            fits = bool(val) and set(val) <= set(_props(schemas, key))
            return [(key, val, repaired)] if fits else None
    return _named_call(obj, repaired, strict)


def _named_call(obj: dict[str, Any], repaired: bool, strict: bool) -> list[RawCall] | None:
    """`{name, arguments}` (or `parameters`, `args`...) as one call; None when it is not."""
    if not set(obj) <= _CALL_KEYS:
        return None
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), "")
    if not name.strip():
        return None
    arg_key = next((k for k in _ARG_KEYS if k in obj), None)
    if strict and (arg_key is None or _is_schema(obj[arg_key])):
        return None
    args = obj[arg_key] if arg_key is not None else {}
    return [(name.strip(), {} if args is None else args, repaired)]


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "object" and "properties" in value


def json_calls(text: str, schemas: Schemas, strict: bool = False) -> list[RawCall] | None:
    """Calls in one complete JSON (or almost-JSON, or pythonic) value's text."""
    if not _may_be_call(text.strip(), schemas):
        return None
    parsed = loads_lenient(text)
    found = calls_from_value(parsed[0], parsed[1], schemas, strict) if parsed is not None else None
    if found is None and text.lstrip().startswith("["):
        return pythonic_calls(text)
    return found


def _may_be_call(text: str, schemas: Schemas) -> bool:
    """A linear look at the top-level keys before a lenient parse: the json_repair fallback
    costs seconds on a few hundred KB of brace-balanced prose, which can never be a call."""
    if text.startswith("["):
        i = _skip(text, 1)
        return i < len(text) and (
            (text[i] == "{" and _may_be_call(text[i:], schemas)) or text[i].isidentifier()
        )
    keys = _top_keys(text)
    return any(k in keys for k in (*_NAME_KEYS, *_WRAPPER_KEYS)) or any(k in schemas for k in keys)


def partial_calls(text: str, schemas: Schemas) -> list[RawCall]:
    """Calls in a value that does not close; an unclosed last call keeps raw arguments."""
    if text.startswith("["):
        calls: list[RawCall] = []
        i = _skip(text, 1, ",")
        while i < len(text) and text[i] == "{":
            end = value_end(text, i)
            if end is None:
                return calls + partial_calls(text[i:], schemas)
            calls.extend(json_calls(text[i:end], schemas) or [])
            i = _skip(text, end, ",")
        return calls
    call = _partial_object(text)
    return [call] if call is not None else []


def _partial_object(text: str) -> RawCall | None:
    """`{"name": .., "arguments": ..` without its end: name and arguments from depth-1 keys only
    (a nested "name" inside the arguments is not the call's name)."""
    keys = _top_keys(text)
    name = next((_string_at(text, keys[k]) for k in _NAME_KEYS if k in keys), None)
    arg_at = next((keys[k] for k in _ARG_KEYS if k in keys), None)
    if not name or not name.strip() or arg_at is None:
        return None
    end = value_end(text, arg_at) if text.startswith(("{", "["), arg_at) else None
    args = text[arg_at:end] if end is not None else text[arg_at:].rstrip()
    return (name.strip(), args, False)


def _top_keys(text: str) -> dict[str, int]:
    """Key -> index of its value, for the keys of the object opening text (depth 1 only)."""
    keys: dict[str, int] = {}
    if not text.startswith("{"):
        return keys
    depth, i, prev, n = 0, 0, "", len(text)
    while i < n:
        c = text[i]
        if c == '"' or (c == "'" and prev in "{[,:"):
            j = _string_end(text, i)
            if j < 0:
                break
            k = _skip(text, j)
            if depth == 1 and k < n and text[k] == ":":
                keys.setdefault(text[i + 1 : j - 1], _skip(text, k + 1))
            i, prev = j, '"'
            continue
        depth += 1 if c in "{[" else -1 if c in "}]" else 0
        if depth == 0:
            break
        prev = c if not c.isspace() else prev
        i += 1
    return keys


def _string_at(text: str, i: int) -> str | None:
    if i >= len(text) or text[i] not in "\"'":
        return None
    j = _string_end(text, i)
    return text[i + 1 : j - 1] if j > 0 else None


def pythonic_calls(text: str) -> list[RawCall] | None:
    """`[f(a=1), g(b='x')]` (or one bare call) -> calls; literals only, keywords only."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    nodes = tree.elts if isinstance(tree, ast.List) else [tree]
    calls: list[RawCall] = []
    for node in nodes:
        call = _pythonic_call(node)
        if call is None:
            return None
        calls.append(call)
    return calls or None


def _pythonic_call(node: ast.expr) -> RawCall | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "call" and isinstance(func.value, ast.Name):
        name = func.value.id  # Llama built-in: brave_search.call(query="...")
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        return None
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None
        try:
            args[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, TypeError):
            return None
    try:
        compact(args)
    except TypeError:
        return None
    return (name, args, False)


# ---------------------------------------------------------------------------------------------
# Typed values for the XML-parameter formats (Qwen3-Coder, GLM)


def _schema_type(prop: dict[str, Any] | None) -> tuple[str, bool]:
    if not isinstance(prop, dict):
        return "", False
    kind = prop.get("type")
    branches = prop.get("anyOf") or prop.get("oneOf") or []
    types = kind if isinstance(kind, list) else [kind] if kind else []
    types += [b.get("type") for b in branches if isinstance(b, dict)]
    names = [str(t).lower().strip() for t in types if t]
    allows_null = "null" in names
    concrete = [t for t in names if t != "null"]
    return (concrete[0] if concrete else "string"), allows_null


def typed_value(raw: str, prop: dict[str, Any] | None) -> Any:
    """A parameter's text typed by its schema the way vLLM's Qwen3-Coder parser does."""
    if prop is None:
        return raw  # a parameter the schema does not know stays text
    kind, allows_null = _schema_type(prop)
    if raw.strip().lower() in ("null", "none") and (allows_null or kind != "string"):
        return None
    if kind in ("string", "str", "text", "varchar", "char", "enum"):
        return raw
    if kind.startswith(("int", "uint", "long", "short", "unsigned")):
        return _number(raw, int)
    if kind.startswith(("num", "float")):
        return _number(raw, float)
    if kind in ("boolean", "bool", "binary"):
        low = raw.strip().lower()
        return True if low == "true" else False if low == "false" else raw
    parsed = loads_lenient(raw)
    if parsed is not None:
        return parsed[0]
    try:
        return ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _number(raw: str, kind: type) -> Any:
    try:
        value = kind(raw.strip())
    except ValueError:
        return raw
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _props(schemas: Schemas, name: str) -> dict[str, Any]:
    params = schemas.get(name) or {}
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


# ---------------------------------------------------------------------------------------------
# Formats. Each finder returns the spans of one format family in the scanned text.


def _function_tag(s: str, p: int, ctx: _Ctx, scan: _Scan) -> tuple[int, RawCall, str] | None:
    """`<function=NAME>` followed by `<parameter=..>` blocks (Qwen3-Coder) or a JSON object."""
    limit = scan.limit(p)
    close = s.find(">", p, limit)
    name = s[p + len("<function=") : close].strip() if close > 0 else ""
    if not name or any(c in name for c in "<\n{"):
        return None
    i = _skip(s, close + 1)
    if i < len(s) and s[i] == "{":
        end = scan.value(i)
        if end is None and not (ctx.truncated and limit == len(s)):
            return None
        args: Any = s[i:] if end is None else s[i:end]
        i = len(s) if end is None else _skip(s, end)
        if s.startswith("</function>", i):
            i += len("</function>")
        return i, (name, args.rstrip(), False), "function_tag"
    found = _parameters(s, i, limit, ctx.truncated)
    if found is None:
        return None
    params, i, closed = found
    if not params and not closed:
        return None  # `<function=foo>` in prose: a call needs parameters or `</function>`
    props = _props(ctx.schemas, name)
    typed = {k: typed_value(v, props.get(k)) for k, v in params.items()}
    return i, (name, typed, False), "qwen3_coder"


def _parameters(
    s: str, i: int, limit: int, truncated: bool
) -> tuple[dict[str, str], int, bool] | None:
    """(parameters, end, closed by `</function>`), or None when a value never ends."""
    params: dict[str, str] = {}
    structural = _Next(lambda p: _structural_close(s, p, limit))
    opens = _Next(lambda p: s.find("<parameter=", p, limit))
    ends = _Next(lambda p: s.find("</function>", p, limit))
    while True:
        i = _skip(s, i)
        if s.startswith("</function>", i):
            return params, i + len("</function>"), True
        if not s.startswith("<parameter=", i):
            return params, i, False
        close = s.find(">", i, limit)
        if close < 0:
            return (params, limit, False) if truncated else None
        key = s[i + len("<parameter=") : close].strip()
        found = _parameter_value(s, close + 1, limit, (structural, opens, ends))
        if found is None and not truncated:
            return None
        value, i = found if found is not None else (_trim_one(s[close + 1 : limit]), limit)
        params[key] = value


def _structural_close(s: str, start: int, limit: int) -> int:
    # `</parameter>` is structural only when a structural tag follows it: code may contain it.
    q = s.find("</parameter>", start, limit)
    while q >= 0:
        after = _skip(s, q + len("</parameter>"))
        if after >= limit or s.startswith(("<parameter=", "</function>", "</tool_call>"), after):
            return q
        q = s.find("</parameter>", q + 1, limit)
    return -1


def _parameter_value(
    s: str, start: int, limit: int, finders: tuple[_Next, _Next, _Next]
) -> tuple[str, int] | None:
    """A parameter's text and where it ends; None when it runs to the end of the text."""
    structural, opens, ends = finders
    q = structural.at(start)
    if q >= 0:
        return _trim_one(s[start:q]), q + len("</parameter>")
    bound = min((k for k in (opens.at(start), ends.at(start)) if k >= 0), default=limit)
    # No `</parameter>` is followed by a tag: the value ends at its last `</parameter>` and the
    # text after it is the model's prose again, rather than part of the value.
    q = s.rfind("</parameter>", start, bound)
    if q >= 0:
        return _trim_one(s[start:q]), q + len("</parameter>")
    if bound == len(s):
        return None
    return _trim_one(s[start:bound]), bound


def _trim_one(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


_GLM_NAME = re.compile(r"\s*([\w.\-]+)\s*(?=<arg_key>|</tool_call>)")
_GLM_PAIR = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def _glm(s: str, i: int, ctx: _Ctx, limit: int) -> tuple[int, RawCall] | None:
    m = _GLM_NAME.match(s, i, limit)
    if m is None:
        return None
    name, i = m.group(1), m.end()
    props = _props(ctx.schemas, name)
    args: dict[str, Any] = {}
    while (pm := _GLM_PAIR.match(s, i, limit)) is not None:
        key, raw = pm.group(1).strip(), pm.group(2).strip()
        kind = _schema_type(props.get(key))[0] if key in props else "string"
        args[key] = raw if kind == "string" else typed_value(raw, props.get(key))
        i = pm.end()
    # Without an argument pair only an explicit close makes it a call: "<tool_call> and
    # </tool_call>" in prose names no tool.
    if not args and not s.startswith("</tool_call>", _skip(s, i)):
        return None
    return i, (name, args, False)


_TAGGED: list[tuple[str, str | None, str]] = [
    ("<tool_call>", "</tool_call>", "hermes"),
    ("<tools>", "</tools>", "hermes"),
    ("<function_call>", None, "granite"),
    ("<|tool_call|>", None, "granite"),
    ("<tool_calls>", "</tool_calls>", "tool_calls_tag"),
    ("<TOOLCALL>", "</TOOLCALL>", "nemotron"),
    ("<|tool_call_start|>", "<|tool_call_end|>", "lfm2"),
    ("[TOOL_REQUEST]", "[END_TOOL_REQUEST]", "lmstudio"),
    ("[TOOL_CALL]", "[/TOOL_CALL]", "tool_call_tag"),
    ("<|python_tag|>", None, "llama3"),
    ("<|python_start|>", "<|python_end|>", "llama3"),
    # The `[` is part of the marker: the word "functools" alone is prose about Python.
    ("functools[", None, "functools"),
]


def _tagged(s: str, ctx: _Ctx, open_: str, close: str | None, fmt: str) -> list[_Span]:
    spans: list[_Span] = []
    p = s.find(open_)
    if p < 0:
        return spans  # the usual case for all but one format: no scan set up
    scan = _Scan(s, open_, close)
    while p >= 0:
        span = _tagged_at(s, p, ctx, scan, (open_, close, fmt))
        if span is not None:
            spans.append(span)
        p = s.find(open_, span.end if span else p + len(open_))
    return spans


def _tagged_at(
    s: str, p: int, ctx: _Ctx, scan: _Scan, marker: tuple[str, str | None, str]
) -> _Span | None:
    open_, close, fmt = marker
    # functools' `[` belongs to the value that follows it.
    i = p + len(open_) - 1 if open_.endswith("[") else _skip(s, p + len(open_))
    calls: list[RawCall] = []
    if s.startswith("<function=", i):
        found = _function_tag(s, i, ctx, scan)
        if found is None:
            return None
        i, call, fmt = found
        calls.append(call)
    elif i < len(s) and s[i] in "{[":
        i = _json_seq(s, i, ctx, calls, scan)
        if i < 0:
            return None
    elif open_ == "<tool_call>" and (glm := _glm(s, i, ctx, scan.limit(p))) is not None:
        i, call = glm
        calls.append(call)
        fmt = "glm"
    elif open_ == "<|python_tag|>" and (m := re.compile(r"[\w.]+\.call\(").match(s, i)):
        end = scan.value(m.end() - 1)
        found_py = pythonic_calls(s[i:end]) if end else None
        if not found_py:
            return None
        calls.extend(found_py)
        i = end or len(s)
    else:
        return None
    i = _skip(s, i)
    if close and s.startswith(close, i):
        i += len(close)
    return _Span(p, i, calls, fmt) if calls else None


def _json_seq(s: str, i: int, ctx: _Ctx, calls: list[RawCall], scan: _Scan) -> int:
    """Read `;`/space-separated JSON calls from s[i]; -1 when the first value is not a call."""
    first, start = True, i
    while i < len(s) and s[i] in "{[":
        end = scan.value(i)
        if end is None:
            found, end = _unclosed(s, i, ctx, scan)
        else:
            found = json_calls(s[i:end], ctx.schemas)
        if not found or end is None:
            return -1 if first else start
        calls.extend(found)
        first, start = False, end
        i = _skip(s, end, ";,")
    return i


def _unclosed(s: str, i: int, ctx: _Ctx, scan: _Scan) -> tuple[list[RawCall] | None, int | None]:
    """Calls in a value that does not close, and where they end; (None, None) to give up.

    The value ends at the format's close tag when there is one before the next marker; it runs
    to the end of the text only when the reply was cut off and no marker follows. Anything
    else is a brace in prose, and taking the rest of the reply as arguments would lose it.
    """
    c = scan.close_at(i)
    if c >= 0:
        body = s[i:c].rstrip()
        found = json_calls(body, ctx.schemas) or partial_calls(body, ctx.schemas)
        return (found, c) if found else (None, None)
    if ctx.truncated and scan.limit(i) == len(s):
        return partial_calls(s[i:].rstrip(), ctx.schemas) or None, len(s)
    return None, None


def _functions(s: str, ctx: _Ctx) -> list[_Span]:
    spans: list[_Span] = []
    scan = _Scan(s, "<function=", "</function>")
    p = s.find("<function=")
    while p >= 0:
        found = _function_tag(s, p, ctx, scan)
        if found is not None:
            end, call, fmt = found
            spans.append(_Span(p, end, [call], fmt))
            p = s.find("<function=", end)
        else:
            p = s.find("<function=", p + 1)
    return spans


_MISTRAL_NAME = re.compile(r"([\w.\-]+)((?:\[CALL_ID\]\w+)?(?:\[ARGS\])?)(\s*)")


def _mistral(s: str, ctx: _Ctx) -> list[_Span]:
    spans: list[_Span] = []
    tag = "[TOOL_CALLS]"
    scan = _Scan(s, tag, None)
    p = s.find(tag)
    while p >= 0:
        i = _skip(s, p + len(tag))
        calls: list[RawCall] = []
        if i < len(s) and s[i] in "{[":
            i = _json_seq(s, i, ctx, calls, scan)
        elif (named := _mistral_named(s, i, ctx, scan)) is not None:
            call, i = named
            calls.append(call)
        if i >= 0 and calls:
            spans.append(_Span(p, i, calls, "mistral"))
        p = s.find(tag, max(i, p + 1))
    return spans


def _mistral_named(s: str, i: int, ctx: _Ctx, scan: _Scan) -> tuple[RawCall, int] | None:
    """`NAME[ARGS]{..}`, `NAME{..}` or `NAME null` after `[TOOL_CALLS]`, for a declared NAME."""
    m = _MISTRAL_NAME.match(s, i)
    # Prose such as "[TOOL_CALLS] then {" has a space before the brace; the template never does
    # unless [ARGS]/[CALL_ID] separates name and arguments.
    if m is None or m.group(1) not in ctx.schemas or (m.group(3) and not m.group(2)):
        return None
    j = m.end()
    if s.startswith("null", j):
        return (m.group(1), {}, False), j + 4
    if not s.startswith("{", j):
        return None
    end = scan.value(j)
    if end is None and not (ctx.truncated and scan.limit(j) == len(s)):
        return None
    args = s[j:].rstrip() if end is None else s[j:end]
    return (m.group(1), args, False), end or len(s)


_DS = r"(?:▁|_|\\_| )"
_DS_CALLS_BEGIN = re.compile(rf"<｜tool{_DS}calls(?:{_DS}begin)?｜>")
_DS_CALLS_END = re.compile(rf"\s*<｜tool{_DS}calls{_DS}end｜>(?:\s*<｜end{_DS}of{_DS}sentence｜>)?")
_DS_CALL = re.compile(
    rf"\s*<｜tool{_DS}call{_DS}begin｜>(?:(function)<｜tool{_DS}sep｜>([^\n]+)\n```(?:json)?\s*"
    rf"|([^<\n]+?)<｜tool{_DS}sep｜>\s*)"
)
_DS_CALL_END = re.compile(rf"\s*(?:```)?\s*<｜tool{_DS}call{_DS}end｜>")


def _deepseek(s: str, ctx: _Ctx) -> list[_Span]:
    begin = _DS_CALLS_BEGIN.search(s)
    first = _DS_CALL.search(s)
    if first is None:
        return []
    start = begin.start() if begin and begin.start() < first.start() else first.start()
    i = begin.end() if begin and begin.start() < first.start() else first.start()
    calls: list[RawCall] = []
    while (m := _DS_CALL.match(s, i)) is not None:
        name = (m.group(2) or m.group(3) or "").strip()
        j = m.end()
        end = value_end(s, j) if j < len(s) and s[j] in "{[" else None
        if end is None:
            if ctx.truncated:
                calls.append((name, s[j:].rstrip(), False))
                i = len(s)
            break
        calls.append((name, s[j:end], False))
        i = end
        if (ce := _DS_CALL_END.match(s, i)) is not None:
            i = ce.end()
    if (e := _DS_CALLS_END.match(s, i)) is not None:
        i = e.end()
    return [_Span(start, i, calls, "deepseek")] if calls else []


_HARMONY_TO = re.compile(r"to=functions\.([\w.\-]+)")
_HARMONY_MID = re.compile(
    r"(?:\s|<\|channel\|>|commentary|analysis|<\|constrain\|>|json|<\|message\|>)*"
)


def _harmony(s: str, ctx: _Ctx) -> list[_Span]:
    spans: list[_Span] = []
    scan = _Scan(s, "to=functions.", "<|call|>")
    for m in _HARMONY_TO.finditer(s):
        name = m.group(1)
        if name not in ctx.schemas or (spans and m.start() < spans[-1].end):
            continue
        i = _HARMONY_MID.match(s, m.end()).end()  # type: ignore[union-attr]
        if not s.startswith("{", i):
            continue
        end = scan.value(i)
        if end is None and not (ctx.truncated and scan.limit(i) == len(s)):
            continue
        args = s[i:].rstrip() if end is None else s[i:end]
        i = len(s) if end is None else _skip(s, end)
        if s.startswith("<|call|>", i):
            i += len("<|call|>")
        spans.append(_Span(_harmony_start(s, m.start()), i, [(name, args, False)], "harmony"))
    return spans


def _harmony_start(s: str, k: int) -> int:
    """Where the header before `to=functions.` begins: `<|start|>assistant<|channel|>commentary`.

    Walked backwards by hand: a regex anchored at `k` and searched from 0 retries every start
    position, which is quadratic over many headers.
    """
    j = k
    while j > 0 and s[j - 1].isspace():
        j -= 1
    for word in ("commentary", "analysis"):
        if s.endswith(word, 0, j):
            j -= len(word)
            break
    if s.endswith("<|channel|>", 0, j):
        j -= len("<|channel|>")
    for head in ("<|start|>assistant", "<|start|>"):
        if s.endswith(head, 0, j):
            return j - len(head)
    return j


_GEMMA = [("<start_function_call>", "<end_function_call>"), ("<|tool_call>", "<tool_call|>")]
_GEMMA_STR = ("<escape>", '<|"|>')


def _gemma(s: str, ctx: _Ctx) -> list[_Span]:
    found: list[tuple[int, int, str, str]] = []  # (start, brace, name, close)
    for open_, close in [*_GEMMA, ("", "")]:
        lead = re.escape(open_) + r"\s*" if open_ else ""
        for m in re.finditer(lead + r"call:([\w.\-]+)\{", s):
            if open_ or m.group(1) in ctx.schemas:  # the stripped residue: declared tools only
                found.append((m.start(), m.end() - 1, m.group(1), close))
    found.sort()
    starts = [start for start, _, _, _ in found]
    spans: list[_Span] = []
    for start, brace, name, close in found:
        if spans and start < spans[-1].end:
            continue  # the residue match inside a tagged call, or a call inside arguments
        nxt = bisect.bisect_right(starts, brace)
        limit = starts[nxt] if nxt < len(starts) else len(s)
        args, i, closed = _gemma_args(s, brace, limit)
        if not closed and not (ctx.truncated and limit == len(s)):
            continue
        i = _skip(s, i)
        if close and s.startswith(close, i):
            i += len(close)
        spans.append(_Span(start, i, [(name, args, False)], "functiongemma"))
    return spans


def _gemma_args(s: str, i: int, limit: int) -> tuple[Any, int, bool]:
    """`{key:<escape>text<escape>,n:3}` -> (JSON-ish text with escaped strings quoted, end, closed).

    A value still open at `limit` (the next call) is returned as it stands, not closed.
    """
    out: list[str] = []
    depth = 0
    while i < limit:
        delim = next((d for d in _GEMMA_STR if s.startswith(d, i)), None)
        if delim is not None:
            close = s.find(delim, i + len(delim), limit)
            if close < 0:
                return "".join(out) + s[i:limit], limit, False
            out.append(compact(s[i + len(delim) : close]))
            i = close + len(delim)
            continue
        c = s[i]
        if c == '"':
            j = _string_end(s, i, limit)
            if j < 0:
                return "".join(out) + s[i:limit], limit, False
            out.append(s[i:j])
            i = j
            continue
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
        out.append(c)
        i += 1
        if depth == 0:
            return "".join(out), i, True
    return "".join(out), limit, False


def _bare(s: str, schemas: Schemas) -> list[_Span]:
    """The whole reply is calls, or it holds exactly one fenced block that is only calls."""
    start = _skip(s, 0)
    body = s[start:]
    # The whole reply as calls first: their arguments may hold fences of their own (a README
    # written by write_file), which do not make the reply a fenced one.
    calls = bare_calls(body, schemas) if body[:1] in ("{", "[") else None
    if calls:
        fmt = "pythonic" if body.startswith("[") and "(" in body.split('"')[0] else "bare_json"
        return [_Span(start, len(s), calls, fmt)]
    return _fenced(s, schemas) if FENCE in body else []


FENCE = "```"
# A fence's info string (`json`, `tool_call`, none): a longer first line is prose that happens to
# contain three backticks, and the stream must not hold a line without end waiting for it.
FENCE_INFO_MAX = 64


def _fenced(s: str, schemas: Schemas) -> list[_Span]:
    """One fenced block of calls anywhere in the reply: Llama 3.2 on Ollama writes "I'll check
    the weather." and then the call in a ```json fence. Prose before and after it stays content;
    a second block makes every block an example, not a call."""
    if s.count(FENCE) != 2:
        return []
    start = s.find(FENCE)
    nl = s.find("\n", start)
    close = s.find(FENCE, start + len(FENCE))
    if nl < 0 or close < nl or nl - start - len(FENCE) > FENCE_INFO_MAX:
        return []
    calls = bare_calls(s[nl + 1 : close], schemas)
    if not calls:
        return []
    return [_Span(start, close + len(FENCE), calls, "fenced_json")]


# Tokens that end a turn or a message, one family each (research/toolcall-formats.md and the
# families' chat templates): a server that does not strip special tokens leaves them after the
# call it failed to parse. Llama 3.x ends a tool turn with <|eom_id|> (built-in tools) or
# <|eot_id|>, Llama 4 with <|eom|>/<|eot|>; Mistral </s>; ChatML (Qwen, Hermes, Kimi, LFM2)
# <|im_end|>; harmony <|end|>, <|return|>, <|call|>; DeepSeek <｜end▁of▁sentence｜>; Gemma
# <end_of_turn>, FunctionGemma <start_function_response>; GLM <|observation|>; Granite and
# Llama <|end_of_text|>, Qwen <|endoftext|>; Command R <|END_OF_TURN_TOKEN|>.
END_TOKENS = (
    "<|eom_id|>", "<|eot_id|>", "<|eom|>", "<|eot|>", "</s>", "<|im_end|>", "<|end|>",
    "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>", "<end_of_turn>",
    "<start_function_response>", "<|observation|>", "<|end_of_text|>", "<|endoftext|>",
    "<|END_OF_TURN_TOKEN|>",
)  # fmt: skip
_END_RUN = re.compile(r"(?:\s*(?:" + "|".join(re.escape(t) for t in END_TOKENS) + "))+")
_END_RUN_AT_END = re.compile(_END_RUN.pattern + r"\s*\Z")


def past_end_tokens(s: str, i: int, limit: int | None = None) -> int:
    """Where a run of end-of-turn tokens (and the whitespace between) starting at s[i] ends,
    looking no further than `limit`."""
    m = _END_RUN.match(s, i, len(s) if limit is None else limit)
    return m.end() if m else i


def bare_calls(text: str, schemas: Schemas) -> list[RawCall] | None:
    """Calls when `text` is nothing but complete calls to declared tools, else None.

    With no marker to vouch for them, the calls must be complete shapes (strict
    `calls_from_value`): a name alone, or a schema-like `parameters`, is data, not a call.
    """
    calls: list[RawCall] = []
    i = _skip(text, 0)
    while i < len(text):
        if text.startswith("</tool_call>", i):
            i = _skip(text, i + len("</tool_call>"), ";")
            continue
        if (after := past_end_tokens(text, i)) > i:
            i = _skip(text, after)
            continue
        if text[i] not in "{[":
            return None
        end = value_end(text, i)
        found = json_calls(text[i:end], schemas, strict=True) if end else None
        if not found or any(name not in schemas for name, _, _ in found):
            return None
        calls.extend(found)
        i = _skip(text, end or len(text), ";")
    return calls or None


_Finder = Callable[[str, _Ctx], list[_Span]]
_FINDERS: list[_Finder] = [
    *[(lambda s, cx, o=o, c=c, f=f: _tagged(s, cx, o, c, f)) for o, c, f in _TAGGED],
    _functions,
    _mistral,
    _deepseek,
    _harmony,
    _gemma,
]


def triggers(names: Iterable[str]) -> list[str]:
    """Literal strings at which a call span can start (the stream holds text from them on), for
    tools named `names` (a Schemas dict will do)."""
    fixed = [o for o, _, _ in _TAGGED] + [o for o, _ in _GEMMA]
    fixed += ["<function=", "[TOOL_CALLS]", "<｜tool", "<|start|>", "<|channel|>"]
    for name in names:
        fixed += [
            f"call:{name}{{",
            f"to=functions.{name}",
            f"commentary to=functions.{name}",
            f"analysis to=functions.{name}",
        ]
    return fixed


# ---------------------------------------------------------------------------------------------
# Public API


def tool_schemas(tools: list[dict[str, Any]] | None) -> Schemas:
    """Declared tool name -> its parameters schema."""
    out: Schemas = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


@lru_cache(maxsize=256)
def _call_starts(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, triggers(names))))


def _may_hold_calls(scan: str, schemas: Schemas) -> bool:
    """Whether a finder could find anything in `scan`: every marker form starts at a trigger
    (the same list the stream holds text at, so a stream and a whole reply agree), and bare
    calls need a reply that opens with `{` or `[`, or a fence."""
    return (
        scan[_skip(scan, 0) :][:1] in ("{", "[")
        or FENCE in scan
        or _call_starts(tuple(schemas)).search(scan) is not None
    )


def find_calls(text: str, schemas: Schemas, truncated: bool = True) -> Found | None:
    """Find the calls written in a reply's text, with the content that remains.

    `truncated` says the reply may have been cut off (finish_reason "length"): only then may a
    call that never closes run to the end of the text. It defaults to True for callers that do
    not know yet; whole replies pass what the upstream said. Every recovered call names a
    declared tool: a marker form naming anything else is left as text.
    """
    head, scan, rest = split_think(text)
    if not _may_hold_calls(scan, schemas):
        return None  # the usual reply: prose, decided in one scan instead of every finder's
    ctx = _Ctx(schemas, truncated)
    best: list[_Span] = []
    for finder in _FINDERS:
        spans = [sp for sp in finder(scan, ctx) if all(c[0] in schemas for c in sp.calls)]
        if spans and (not best or spans[0].start < best[0].start):
            best = spans
    if not best:
        best = _bare(scan, schemas)
    if not best:
        return None
    best = _with_end_tokens(scan, best)
    return Found(
        _remaining(head, scan, rest, best), [c for sp in best for c in sp.calls], best[0].format
    )


def _with_end_tokens(scan: str, spans: list[_Span]) -> list[_Span]:
    """Spans widened over the end-of-turn tokens right after each, and over those ending the
    reply: they are the template's, not the model's words, and a client shows them as text."""
    out: list[_Span] = []
    for k, sp in enumerate(spans):
        limit = spans[k + 1].start if k + 1 < len(spans) else len(scan)
        end = past_end_tokens(scan, sp.end, limit)
        out.append(_Span(sp.start, end, sp.calls, sp.format) if end != sp.end else sp)
    k = len(scan)
    while k > out[-1].end and scan[k - 1].isspace():
        k -= 1
    if not scan.endswith(END_TOKENS, out[-1].end, k):
        return out  # the common case, decided without a regex search over the tail
    tail = _END_RUN_AT_END.search(scan, out[-1].end)
    if tail is not None and tail.start() > out[-1].end:
        # Text after the last call, then the tokens: an empty span eats them.
        out.append(_Span(tail.start(), len(scan), [], out[-1].format))
    return out


def _remaining(head: str, scan: str, rest: str, spans: list[_Span]) -> str | None:
    edges = [0] + [x for sp in spans for x in (sp.start, sp.end)] + [len(scan)]
    segments = [scan[edges[k] : edges[k + 1]] for k in range(0, len(edges), 2)]
    # Whitespace next to a call goes with it; text further away is kept as it was.
    parts = [segments[0].rstrip()] + [seg.strip() for seg in segments[1:-1]]
    parts.append(segments[-1].lstrip())
    body = "\n".join(p for p in parts if p)
    content = head + body + rest
    return content if content.strip() else None


def recover(
    text: str, tools: list[dict[str, Any]], finish_reason: str | None = None
) -> Recovery | None:
    """Recover the tool calls written as text in a whole reply, or None when there are none."""
    found = find_calls(text, tool_schemas(tools), finish_reason == "length")
    if found is None:
        return None
    calls, _ = build_calls(found.calls, finish_reason)
    return Recovery(found.content, calls, found.format)


def build_calls(
    raw: list[RawCall], finish_reason: str | None
) -> tuple[list[dict[str, Any]], list[Event]]:
    """OpenAI tool_call dicts for recovered calls, ids call_recovered_N, arguments repaired."""
    calls: list[dict[str, Any]] = []
    events: list[Event] = []
    for n, (name, args, repaired) in enumerate(raw):
        arguments, outcome = _recovered_arguments(args, repaired, finish_reason)
        event = argument_event(name, outcome)
        if event is not None:
            events.append(event)
        calls.append(
            {
                "id": f"{RECOVERED_PREFIX}{n}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
    return calls, events


def _recovered_arguments(args: Any, repaired: bool, finish_reason: str | None) -> tuple[str, str]:
    if isinstance(args, dict):
        return compact(args), REPAIRED if repaired else OK
    result = repair_arguments(args, finish_reason)
    if result.outcome == OK:
        # Recovered calls are sent compact; "ok" keeps the model's own spacing otherwise.
        return compact(orjson.loads(result.arguments)), REPAIRED if repaired else OK
    return result.arguments, result.outcome


def recovered_event(count: int, fmt: str) -> Event:
    """The TOOL_RECOVERED event for one reply."""
    notice = (
        f"Recovered {count} tool call{'s' if count != 1 else ''} written as text "
        f"({fmt}); the server's tool-call parser does not match the model's chat template."
    )
    return Event(TOOL_RECOVERED, notice, {"format": fmt}, count)


def process_response(
    body: dict[str, Any], tools: list[dict[str, Any]] | None, *, recover: bool = True
) -> tuple[dict[str, Any] | None, list[Event]]:
    """Recover and repair tool calls in a whole chat.completion body; never mutates `body`."""
    choices = body.get("choices")
    if not isinstance(choices, list):
        return None, []
    schemas = tool_schemas(tools) if recover else {}
    events: list[Event] = []
    new_choices = [_process_choice(c, schemas, recover and bool(schemas), events) for c in choices]
    if all(new is old for new, old in zip(new_choices, choices, strict=True)):
        return None, events
    return {**body, "choices": new_choices}, events


def _process_choice(choice: Any, schemas: Schemas, recover: bool, events: list[Event]) -> Any:
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return choice
    finish = choice.get("finish_reason")
    native = message.get("tool_calls")
    if isinstance(native, list) and native:
        calls = [_repair_native(call, finish, events) for call in native]
        if all(new is old for new, old in zip(calls, native, strict=True)):
            return choice
        return {**choice, "message": {**message, "tool_calls": calls}}
    content = message.get("content")
    if not recover or not isinstance(content, str):
        return choice
    found = find_calls(content, schemas, finish == "length")
    if found is None:
        return choice
    calls, arg_events = build_calls(found.calls, finish)
    events.append(recovered_event(len(calls), found.format))
    events.extend(arg_events)
    new_message = {**message, "content": found.content, "tool_calls": calls}
    return {**choice, "message": new_message, "finish_reason": "tool_calls"}


def _repair_native(call: Any, finish: str | None, events: list[Event]) -> Any:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return call
    result = repair_arguments(fn.get("arguments"), finish)
    event = argument_event(str(fn.get("name", "")), result.outcome)
    if event is not None:
        events.append(event)
    if result.arguments == fn.get("arguments"):
        return call
    return {**call, "function": {**fn, "arguments": result.arguments}}
