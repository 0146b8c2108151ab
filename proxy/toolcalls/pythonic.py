"""Calls written as Python (`[get_weather(city="Paris")]`): Llama 3.2 and 4, OLMo 3, LFM2,
Llama's `<|python_tag|>ns.tool.call(...)`. research/toolcall-formats.md, section 1.

Read with Python's own parser (`ast`), keyword arguments with literal values only, after mending
what a model writes that Python refuses (raw newlines in a string, an unescaped apostrophe, a
keyword as an argument's name). Apart from the JSON calls (`values`) because its literals are
walked by recursion over the parsed tree, which the parser bounds (Python refuses expressions
nested past about 200 levels), and compiled code must not recurse (proxy/compiled.py): this
module runs as its source.
"""

from __future__ import annotations

import ast
import keyword
import re
import warnings
from typing import Any

from proxy.toolcalls.scan import skip, string_end, value_end
from proxy.toolcalls.spans import RawCall, Schemas


def pythonic_calls(
    text: str, schemas: Schemas | None = None, strict: bool = False
) -> list[RawCall] | None:
    """`[f(a=1), g(b='x')]`, one bare call, or calls one after another (OLMo 3 writes one a
    line) -> calls: keyword arguments with literal values only.

    Each call is read on its own. Python's literals, and JSON's `true`/`false`/`null` (OLMo 3,
    vLLM reads them too); dotted names (`ns.tool(...)`, as vLLM reads them); raw newlines and
    unescaped apostrophes inside a string, which Python refuses but a model writes. Not a call:
    positional arguments, non-finite numbers (`1e999`), bytes, sets, expressions, and integers
    with leading zeros (`007`): Python refuses them, and so do vLLM's and SGLang's pythonic
    parsers (the call stays text, vLLM drops it from its list); guessing 7 or "007" would change
    what the model wrote. With `strict` (no marker) every element must be a readable call;
    without, a marker vouches for the list and an unreadable call is dropped, its siblings kept.
    """
    parts = _py_elements(text.strip())
    if parts is None:
        return None
    calls: list[RawCall] = []
    for part in parts:
        call = _py_call_text(part, schemas)
        if call is None:
            if strict:
                return None
            continue
        calls.append(call)
    return calls or None


def _py_elements(text: str) -> list[str] | None:
    """The calls' texts of `[f(..), g(..)]`, or of `f(..)` and `g(..)` one after another (on
    lines of their own, or `;` between), split string-aware; None when an element is not
    `name(...)` (`[1, 2]`, `[sunny]`)."""
    listed = text.startswith("[")
    i = skip(text, 1) if listed else 0
    parts: list[str] = []
    while i < len(text):
        if listed and text[i] == "]":
            return parts if skip(text, i + 1) == len(text) else None
        j = _name_end(text, i)
        k = skip(text, j)
        if j == i or k >= len(text) or text[k] != "(":
            return None
        end = value_end(text, k)
        if end is None:
            return None
        parts.append(text[i:end])
        i = skip(text, end, "," if listed else ";")
    return None if listed else parts


def _name_end(text: str, i: int) -> int:
    """Where a dotted Python name starting at text[i] ends (i when none starts there)."""
    if i >= len(text) or not (text[i].isalpha() or text[i] == "_"):
        return i
    j = i + 1
    while j < len(text) and (text[j].isalnum() or text[j] in "_."):
        j += 1
    return j


def _py_call_text(text: str, schemas: Schemas | None) -> RawCall | None:
    """One call's text read as Python; only text Python refuses is mended (`_py_source`), so
    `cmd='ls' + ' -la'` stays an expression, not one string."""
    for source in (text, None):
        try:
            with warnings.catch_warnings():
                # `'\d'` is kept as written; Python warns (Deprecation- before 3.12, then Syntax-)
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", SyntaxWarning)
                node = ast.parse(_py_source(text) if source is None else source, mode="eval")
            return _pythonic_call(node.body, schemas)
        except SyntaxError:
            continue
        except (ValueError, TypeError, MemoryError, RecursionError):
            return None
    return None


# What may follow a backslash in a Python string; any other backslash is the model's own
# (`C:\users`), doubled so that Python neither warns nor fails (`\us` is no `\uXXXX` escape).
_PY_ESCAPES = frozenset("\\'\"abfnrtv01234567\n")
_PY_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX = frozenset("0123456789abcdefABCDEF")


def _py_source(text: str) -> str:
    """One call's text with its plain strings made valid Python: raw newlines escaped, an
    apostrophe inside '...' escaped (it closes the string only before `,)]}:`, as in
    toolcalls.scan), unknown escapes kept literally. Prefixed and triple-quoted strings are
    copied as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c not in "'\"":
            if (m := _KEYWORD_ARG.match(text, i)) is not None and m.group(1) in _KEYWORDS:
                out.append(_KEYWORD_PREFIX + m.group(1))  # `from=`: a Python keyword as name
                i = m.end(1)
                continue
            out.append(c)
            i += 1
            continue
        triple = text.startswith(c * 3, i)
        end = text.find(c * 3, i + 3) + 3 if triple else string_end(text, i)
        if end < (3 if triple else 1):
            out.append(text[i:])
            break
        prefixed = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        body = text[i + 1 : end - 1]
        out.append(text[i:end] if triple or prefixed else c + _py_body(body, c) + c)
        i = end
    return "".join(out)


# An argument named like a Python keyword (`book_flight(from="SFO")`, OLMo 3 in Ollama's tests)
# is renamed for the parse and named back (`_pythonic_call`).
_KEYWORDS = frozenset(keyword.kwlist)
_KEYWORD_ARG = re.compile(r"(?<=[(,])\s*([A-Za-z_]\w*)(?=\s*=(?!=))")
_KEYWORD_PREFIX = "_latchgate_keyword_"


def _py_body(body: str, quote: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(c + nxt if _py_escape(body, i + 1) else "\\\\" + nxt)
            i += 2
            continue
        out.append("\\n" if c == "\n" else "\\r" if c == "\r" else "\\" + c if c == quote else c)
        i += 1
    return "".join(out)


def _py_escape(body: str, i: int) -> bool:
    """Whether the backslash before body[i] starts a valid Python escape."""
    c = body[i]
    if c in _PY_HEX_ESCAPES:
        digits = body[i + 1 : i + 1 + _PY_HEX_ESCAPES[c]]
        return len(digits) == _PY_HEX_ESCAPES[c] and set(digits) <= _HEX
    if c == "N":
        return body.startswith("{", i + 1)
    return c in _PY_ESCAPES


def _pythonic_call(node: ast.expr, schemas: Schemas | None = None) -> RawCall | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _dotted_name(node.func)
    if name is None:
        return None
    if name.endswith(".call") and not (schemas and name in schemas):
        name = name[: -len(".call")]  # Llama built-in: brave_search.call(query="...")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None  # **kwargs
        key = kw.arg.removeprefix(_KEYWORD_PREFIX)
        try:
            args[key] = _py_value(kw.value)
        except _NotLiteral:
            return None
    return (name, args, False)


def _dotted_name(func: ast.expr) -> str | None:
    """`tool` or `ns.tool` (vLLM keeps the dots); None for anything else (`f()()`, `a[0]`)."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    return ".".join([func.id, *reversed(parts)])


class _NotLiteral(ValueError):
    """A pythonic argument that is no JSON value."""


_JSON_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}


def _py_value(node: ast.expr) -> Any:
    """A literal argument as its JSON value; raises _NotLiteral for anything JSON cannot hold."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (str, bool, int)):
            return value
        if isinstance(value, float) and value - value == 0:  # inf - inf and nan are nan
            return value
        raise _NotLiteral(repr(value))  # bytes, complex, Ellipsis, inf, nan
    if isinstance(node, ast.Name) and node.id in _JSON_WORDS:
        return _JSON_WORDS[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_py_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            k = _py_value(key) if key is not None else None  # None: `**mapping`
            if not isinstance(k, str):
                raise _NotLiteral("key")
            out[k] = _py_value(item)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _py_value(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise _NotLiteral(type(node).__name__)
