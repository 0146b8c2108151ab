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
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.arguments import (
    OK,
    REPAIRED,
    argument_event,
    compact,
    loads_lenient,
    repair_arguments,
)
from proxy.events import TOOL_RECOVERED, Event

# One call as found in text: name, arguments (a dict, or text still to be repaired), and whether
# the call's own JSON needed repairing to be read.
RawCall = tuple[str, Any, bool]
Schemas = dict[str, dict[str, Any]]

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
    "tool_name",
    "tool_call_id",
}
_ARG_KEYS = ("arguments", "parameters", "args", "tool_input")
_NAME_KEYS = ("name", "tool", "tool_name")
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


def value_end(s: str, i: int) -> int | None:
    """Index after the JSON-ish value opening at s[i] (`{`, `[` or `(`), or None if unclosed.

    Braces inside strings do not count. A single quote opens a string only where a value or key
    may start, so apostrophes in prose-like text do not derail the scan.
    """
    depth = 0
    n = len(s)
    prev = ""
    while i < n:
        c = s[i]
        if c == '"' or (c == "'" and prev in "{[(,:="):
            i = _string_end(s, i)
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


def _string_end(s: str, i: int) -> int:
    quote = s[i]
    j = i + 1
    n = len(s)
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


# ---------------------------------------------------------------------------------------------
# Calls from parsed values


def calls_from_value(value: Any, repaired: bool, schemas: Schemas) -> list[RawCall] | None:
    """The calls a parsed JSON value spells, or None when it is not (only) calls."""
    if isinstance(value, dict):
        return _calls_from_obj(value, repaired, schemas)
    if isinstance(value, list) and value:
        calls: list[RawCall] = []
        for item in value:
            found = _calls_from_obj(item, repaired, schemas) if isinstance(item, dict) else None
            if not found:
                return None
            calls.extend(found)
        return calls
    return None


def _calls_from_obj(obj: dict[str, Any], repaired: bool, schemas: Schemas) -> list[RawCall] | None:
    if isinstance(obj.get("tool_calls"), list) and len(obj) == 1:
        return calls_from_value(obj["tool_calls"], repaired, schemas)
    if isinstance(obj.get("tool_call"), dict) and len(obj) == 1:
        return _calls_from_obj(obj["tool_call"], repaired, schemas)
    if isinstance(obj.get("function"), dict):
        inner = {k: v for k, v in obj.items() if k not in ("function", "type", "id")}
        return _calls_from_obj({**inner, **obj["function"]}, repaired, schemas)
    if len(obj) == 1:
        ((key, val),) = obj.items()
        if key in schemas and isinstance(val, dict):  # Apertus: {"NAME": {args}}
            return [(key, val, repaired)]
    if not set(obj) <= _CALL_KEYS:
        return None
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), "")
    if not name.strip():
        return None
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    return [(name.strip(), {} if args is None else args, repaired)]


def json_calls(text: str, schemas: Schemas) -> list[RawCall] | None:
    """Calls in one complete JSON (or almost-JSON, or pythonic) value's text."""
    parsed = loads_lenient(text)
    found = calls_from_value(parsed[0], parsed[1], schemas) if parsed is not None else None
    if found is None and text.lstrip().startswith("["):
        return pythonic_calls(text)
    return found


def partial_calls(text: str, schemas: Schemas) -> list[RawCall]:
    """Calls in a value cut off at the end of the reply; the last one keeps raw arguments."""
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
    name = re.search(r'"(?:name|tool|tool_name)"\s*:\s*"([^"]+)"', text)
    args = re.search(r'"(?:arguments|parameters|args|tool_input)"\s*:\s*', text)
    if name is None or args is None:
        return []
    return [(name.group(1), text[args.end() :].rstrip(), False)]


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


def _function_tag(s: str, p: int, schemas: Schemas) -> tuple[int, RawCall, str] | None:
    """`<function=NAME>` followed by `<parameter=..>` blocks (Qwen3-Coder) or a JSON object."""
    close = s.find(">", p)
    name = s[p + len("<function=") : close].strip() if close > 0 else ""
    if not name or any(c in name for c in "<\n{"):
        return None
    i = _skip(s, close + 1)
    if i < len(s) and s[i] == "{":
        end = value_end(s, i)
        args: Any = s[i:] if end is None else s[i:end]
        i = len(s) if end is None else _skip(s, end)
        if s.startswith("</function>", i):
            i += len("</function>")
        return i, (name, args.rstrip(), False), "function_tag"
    params, i = _parameters(s, i)
    props = _props(schemas, name)
    typed = {k: typed_value(v, props.get(k)) for k, v in params.items()}
    return i, (name, typed, False), "qwen3_coder"


def _parameters(s: str, i: int) -> tuple[dict[str, str], int]:
    params: dict[str, str] = {}
    while True:
        i = _skip(s, i)
        if s.startswith("</function>", i):
            return params, i + len("</function>")
        if not s.startswith("<parameter=", i):
            return params, i
        close = s.find(">", i)
        if close < 0:
            return params, len(s)
        key = s[i + len("<parameter=") : close].strip()
        value, i = _parameter_value(s, close + 1)
        params[key] = value


def _parameter_value(s: str, start: int) -> tuple[str, int]:
    # `</parameter>` is structural only when a structural tag follows it: code may contain it.
    q = s.find("</parameter>", start)
    while q >= 0:
        after = q + len("</parameter>")
        rest = s[_skip(s, after) :]
        if not rest or rest.startswith(("<parameter=", "</function>", "</tool_call>")):
            return _trim_one(s[start:q]), after
        q = s.find("</parameter>", after)
    ends = [k for k in (s.find("<parameter=", start), s.find("</function>", start)) if k >= 0]
    end = min(ends) if ends else len(s)
    return _trim_one(s[start:end]), end


def _trim_one(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _glm(s: str, i: int, schemas: Schemas) -> tuple[int, RawCall] | None:
    m = re.compile(r"\s*([\w.\-]+)\s*(?=<arg_key>|</tool_call>|$)").match(s, i)
    if m is None:
        return None
    name, i = m.group(1), m.end()
    props = _props(schemas, name)
    args: dict[str, Any] = {}
    pair = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)
    while (pm := pair.match(s, i)) is not None:
        key, raw = pm.group(1).strip(), pm.group(2).strip()
        kind = _schema_type(props.get(key))[0] if key in props else "string"
        args[key] = raw if kind == "string" else typed_value(raw, props.get(key))
        i = pm.end()
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
    ("functools", None, "functools"),
]


def _tagged(s: str, schemas: Schemas, open_: str, close: str | None, fmt: str) -> list[_Span]:
    spans: list[_Span] = []
    p = s.find(open_)
    while p >= 0:
        span = _tagged_at(s, p, schemas, open_, close, fmt)
        if span is not None:
            spans.append(span)
        p = s.find(open_, span.end if span else p + len(open_))
    return spans


def _tagged_at(
    s: str, p: int, schemas: Schemas, open_: str, close: str | None, fmt: str
) -> _Span | None:
    i = _skip(s, p + len(open_))
    if open_ == "functools" and not s.startswith("[", i):
        return None
    calls: list[RawCall] = []
    if s.startswith("<function=", i):
        found = _function_tag(s, i, schemas)
        if found is None:
            return None
        i, call, fmt = found
        calls.append(call)
    elif i < len(s) and s[i] in "{[":
        i = _json_seq(s, i, schemas, calls)
        if i < 0:
            return None
    elif open_ == "<tool_call>" and (glm := _glm(s, i, schemas)) is not None:
        i, call = glm
        calls.append(call)
        fmt = "glm"
    elif open_ == "<|python_tag|>" and (m := re.match(r"[\w.]+\.call\(", s[i:])):
        end = value_end(s, i + m.end() - 1)
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


def _json_seq(s: str, i: int, schemas: Schemas, calls: list[RawCall]) -> int:
    """Read `;`/space-separated JSON calls from s[i]; -1 when the first value is not a call."""
    first, start = True, i
    while i < len(s) and s[i] in "{[":
        end = value_end(s, i)
        found = (
            partial_calls(s[i:].rstrip(), schemas) if end is None else json_calls(s[i:end], schemas)
        )
        if not found:
            return -1 if first else start
        calls.extend(found)
        if end is None:
            return len(s)
        first, start = False, end
        i = _skip(s, end, ";,")
    return i


def _functions(s: str, schemas: Schemas) -> list[_Span]:
    spans: list[_Span] = []
    p = s.find("<function=")
    while p >= 0:
        found = _function_tag(s, p, schemas)
        if found is not None:
            end, call, fmt = found
            spans.append(_Span(p, end, [call], fmt))
            p = s.find("<function=", end)
        else:
            p = s.find("<function=", p + 1)
    return spans


def _mistral(s: str, schemas: Schemas) -> list[_Span]:
    spans: list[_Span] = []
    tag = "[TOOL_CALLS]"
    p = s.find(tag)
    while p >= 0:
        i = _skip(s, p + len(tag))
        calls: list[RawCall] = []
        if i < len(s) and s[i] in "{[":
            i = _json_seq(s, i, schemas, calls)
        else:
            m = re.compile(r"([\w.\-]+)(?:\[CALL_ID\]\w+)?(?:\[ARGS\])?\s*").match(s, i)
            if m and s.startswith("{", m.end()):
                end = value_end(s, m.end())
                args = s[m.end() :].rstrip() if end is None else s[m.end() : end]
                calls.append((m.group(1), args, False))
                i = end or len(s)
            elif m and s.startswith("null", m.end()):
                calls.append((m.group(1), {}, False))
                i = m.end() + 4
        if i >= 0 and calls:
            spans.append(_Span(p, i, calls, "mistral"))
        p = s.find(tag, max(i, p + 1))
    return spans


_DS = r"(?:▁|_|\\_| )"
_DS_CALLS_BEGIN = re.compile(rf"<｜tool{_DS}calls(?:{_DS}begin)?｜>")
_DS_CALLS_END = re.compile(rf"\s*<｜tool{_DS}calls{_DS}end｜>(?:\s*<｜end{_DS}of{_DS}sentence｜>)?")
_DS_CALL = re.compile(
    rf"\s*<｜tool{_DS}call{_DS}begin｜>(?:(function)<｜tool{_DS}sep｜>([^\n]+)\n```(?:json)?\s*"
    rf"|([^<\n]+?)<｜tool{_DS}sep｜>\s*)"
)
_DS_CALL_END = re.compile(rf"\s*(?:```)?\s*<｜tool{_DS}call{_DS}end｜>")


def _deepseek(s: str, schemas: Schemas) -> list[_Span]:
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
_HARMONY_BEFORE = re.compile(
    r"(?:<\|start\|>(?:assistant)?)?(?:<\|channel\|>)?(?:commentary|analysis)?\s*\Z"
)


def _harmony(s: str, schemas: Schemas) -> list[_Span]:
    spans: list[_Span] = []
    for m in _HARMONY_TO.finditer(s):
        name = m.group(1)
        if name not in schemas or (spans and m.start() < spans[-1].end):
            continue
        i = _HARMONY_MID.match(s, m.end()).end()  # type: ignore[union-attr]
        if not s.startswith("{", i):
            continue
        end = value_end(s, i)
        args = s[i:].rstrip() if end is None else s[i:end]
        i = len(s) if end is None else _skip(s, end)
        if s.startswith("<|call|>", i):
            i += len("<|call|>")
        before = _HARMONY_BEFORE.search(s, 0, m.start())
        start = before.start() if before else m.start()
        spans.append(_Span(start, i, [(name, args, False)], "harmony"))
    return spans


_GEMMA = [("<start_function_call>", "<end_function_call>"), ("<|tool_call>", "<tool_call|>")]
_GEMMA_STR = ("<escape>", '<|"|>')


def _gemma(s: str, schemas: Schemas) -> list[_Span]:
    spans: list[_Span] = []
    for open_, close in [*_GEMMA, ("", "")]:
        lead = re.escape(open_) + r"\s*" if open_ else ""
        for m in re.finditer(lead + r"call:([\w.\-]+)\{", s):
            name = m.group(1)
            if not open_ and name not in schemas:
                continue  # the stripped residue counts only for declared tools
            if any(sp.start <= m.start() < sp.end for sp in spans):
                continue
            found = _gemma_args(s, m.end() - 1)
            if found is None:
                continue
            args, i = found
            i = _skip(s, i)
            if close and s.startswith(close, i):
                i += len(close)
            spans.append(_Span(m.start(), i, [(name, args, False)], "functiongemma"))
    return sorted(spans, key=lambda sp: sp.start)


def _gemma_args(s: str, i: int) -> tuple[Any, int] | None:
    """`{key:<escape>text<escape>,n:3}` -> JSON-ish text with the escaped strings quoted."""
    out: list[str] = []
    depth = 0
    n = len(s)
    while i < n:
        delim = next((d for d in _GEMMA_STR if s.startswith(d, i)), None)
        if delim is not None:
            close = s.find(delim, i + len(delim))
            if close < 0:
                return s[i:], n
            out.append(compact(s[i + len(delim) : close]))
            i = close + len(delim)
            continue
        c = s[i]
        if c == '"':
            j = _string_end(s, i)
            if j < 0:
                return "".join(out) + s[i:], n
            out.append(s[i:j])
            i = j
            continue
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
        out.append(c)
        i += 1
        if depth == 0:
            return "".join(out), i
    return "".join(out), n


def _bare(s: str, schemas: Schemas) -> list[_Span]:
    """The whole reply is calls, or it opens with one fenced block that is only calls."""
    start = _skip(s, 0)
    body = s[start:]
    if body.startswith("```"):
        if s.count("```") != 2:
            return []
        nl = body.find("\n")
        close = body.find("```", 3)
        if nl < 0 or close < nl:
            return []
        calls = bare_calls(body[nl + 1 : close], schemas)
        fmt = "fenced_json"
        end = start + close + 3
    else:
        calls = bare_calls(body, schemas)
        fmt = "pythonic" if body.startswith("[") and "(" in body.split('"')[0] else "bare_json"
        end = len(s)
    if not calls:
        return []
    return [_Span(start, end, calls, fmt)]


def bare_calls(text: str, schemas: Schemas) -> list[RawCall] | None:
    """Calls when `text` is nothing but complete calls to declared tools, else None."""
    calls: list[RawCall] = []
    i = _skip(text, 0)
    while i < len(text):
        if text.startswith("</tool_call>", i):
            i = _skip(text, i + len("</tool_call>"), ";")
            continue
        if text[i] not in "{[":
            return None
        end = value_end(text, i)
        found = json_calls(text[i:end], schemas) if end else None
        if not found or any(name not in schemas for name, _, _ in found):
            return None
        calls.extend(found)
        i = _skip(text, end or len(text), ";")
    return calls or None


_Finder = Callable[[str, Schemas], list[_Span]]
_FINDERS: list[_Finder] = [
    *[(lambda s, sc, o=o, c=c, f=f: _tagged(s, sc, o, c, f)) for o, c, f in _TAGGED],
    _functions,
    _mistral,
    _deepseek,
    _harmony,
    _gemma,
]


def triggers(schemas: Schemas) -> list[str]:
    """Literal strings at which a call span can start (the stream holds text from them on)."""
    fixed = [o for o, _, _ in _TAGGED] + [o for o, _ in _GEMMA]
    fixed += ["<function=", "[TOOL_CALLS]", "<｜tool", "<|start|>", "<|channel|>"]
    for name in schemas:
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


def find_calls(text: str, schemas: Schemas) -> Found | None:
    """Find the calls written in a reply's text, with the content that remains."""
    head, scan, rest = split_think(text)
    best: list[_Span] = []
    for finder in _FINDERS:
        spans = finder(scan, schemas)
        if spans and (not best or spans[0].start < best[0].start):
            best = spans
    if not best:
        best = _bare(scan, schemas)
    if not best:
        return None
    return Found(
        _remaining(head, scan, rest, best), [c for sp in best for c in sp.calls], best[0].format
    )


def _remaining(head: str, scan: str, rest: str, spans: list[_Span]) -> str | None:
    edges = [0] + [x for sp in spans for x in (sp.start, sp.end)] + [len(scan)]
    segments = [scan[edges[k] : edges[k + 1]] for k in range(0, len(edges), 2)]
    # Whitespace next to a call goes with it; text further away is kept as it was.
    parts = [segments[0].rstrip()] + [seg.strip() for seg in segments[1:-1]]
    parts.append(segments[-1].lstrip())
    body = "\n".join(p for p in parts if p)
    content = head + body + rest
    return content if content.strip() else None


def recover(text: str, tools: list[dict[str, Any]]) -> Recovery | None:
    """Recover the tool calls written as text in a whole reply, or None when there are none."""
    found = find_calls(text, tool_schemas(tools))
    if found is None:
        return None
    calls, _ = build_calls(found.calls, None)
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
                "id": f"call_recovered_{n}",
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
    found = find_calls(content, schemas)
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
