"""GLM 4.5-4.7's calls: `<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...
</tool_call>`, read inside the `<tool_call>` wrapper by formats/tagged.py (so no marker of its
own here). research/toolcall-formats.md, section 8.

The variants, from the templates (llama.cpp models/templates glm_4_5.jinja, GLM-4.6.jinja,
GLM-4.7-Flash.jinja) and vLLM's glm4_moe / glm47_moe parser tests:
- GLM-4.5/4.6 put a newline after the name and after each tag
  (`<tool_call>NAME\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>`);
- GLM-4.7 writes none (`<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`);
- a call without arguments is `<tool_call>NAME</tool_call>` (4.7) or `<tool_call>NAME\\n
  </tool_call>` (4.5/4.6);
- strings are written as they are, other values as JSON (`v | tojson`); GLM-4.5's template
  writes `raw_arguments` for arguments it got as text.
The template frames no value with newlines, so a string value is kept exactly as written; other
types are typed by the schema (values.typed_value). A value ends at the first `</arg_value>`
followed by `<arg_key>`, `</tool_call>` or the end (code may hold `</arg_value>` literally); one
whose `</arg_value>` was forgotten ends at the next `<arg_key>K</arg_key>` (K a parameter of the
tool) or `</tool_call>`, when no `</arg_value>` comes first; one whose `<arg_value>` was forgotten
runs from the key to a `</arg_value>` with no tag between. A value that cannot be sent as JSON
(a non-finite number for a number parameter) rejects its call, which stays text.

Poolside Laguna writes the same wrapper with the name on its first line and the arguments as
one JSON object after it (`<tool_call>NAME\\n{...}</tool_call>`, Ollama's laguna parser tests).
"""

from __future__ import annotations

import re
from typing import Any

from proxy.toolcalls.arguments import loads_lenient
from proxy.toolcalls.formats.qwen3_coder import typed_args
from proxy.toolcalls.scan import Next, skip, structural_close, value_end
from proxy.toolcalls.spans import Ctx, RawCall
from proxy.toolcalls.values import tool_props

# Between tags: whitespace, or the two characters `\\n` of a call written JSON-escaped (the
# whole call as the body of a string, SGLang's glm4_moe tests).
_GAP = re.compile(r"(?:\s|\\n)*")
_GLM_NAME = re.compile(r"\s*([\w.\-]+)(?:\s|\\n)*(?=<arg_key>|</tool_call>)")
_NAME_LINE = re.compile(r"\s*([\w.\-]+)[ \t]*\n\s*(?=\{)")
_KEY, _KEY_END = "<arg_key>", "</arg_key>"
_VALUE, _VALUE_END = "<arg_value>", "</arg_value>"
_CALL_END = "</tool_call>"
_STRUCTURAL = (_KEY, _CALL_END, "<tool_call>")  # what a value's structural `</arg_value>` precedes


class _Ends:
    """Where values end in one call (before `limit`): cached searches, one pass a call."""

    def __init__(self, s: str, limit: int, props: dict[str, Any]) -> None:
        self.s, self.limit = s, limit
        self.structural = Next(
            lambda p: structural_close(s, _VALUE_END, p, limit, _STRUCTURAL, end=len(s), gap=_gap)
        )
        self.closes = Next(lambda p: s.find(_VALUE_END, p, limit))
        self.keys = Next(lambda p: _declared_key(s, p, limit, props))
        self.call_end = Next(lambda p: s.find(_CALL_END, p, limit))


def glm_call(s: str, i: int, ctx: Ctx, limit: int) -> tuple[int, RawCall] | None:
    """The GLM call whose name starts at s[i] (after `<tool_call>`), and where it ends."""
    m = _GLM_NAME.match(s, i, limit)
    if m is None:
        return _name_line_json(s, i, ctx, limit)
    name, i = m.group(1), m.end()
    props = tool_props(ctx.schemas, name)
    ends = _Ends(s, limit, props)
    raw: dict[str, str] = {}
    while s.startswith(_KEY, i := _gap(s, i)):
        pair = _pair(s, i, ends, ctx.truncated)
        if pair is None:
            return None
        key, value, i = pair
        raw[key] = value
    # Without an argument pair only an explicit close makes it a call: "<tool_call> and
    # </tool_call>" in prose names no tool.
    if not raw and not s.startswith(_CALL_END, i):
        return None
    args = typed_args(raw, props)
    return None if args is None else (i, (name, args, False))


def _gap(s: str, i: int) -> int:
    m = _GAP.match(s, i)
    return m.end() if m else i


def _name_line_json(s: str, i: int, ctx: Ctx, limit: int) -> tuple[int, RawCall] | None:
    """`NAME` on the wrapper's first line and a JSON object of its arguments after it, closed
    by `</tool_call>` (Poolside Laguna in Ollama's laguna parser tests); None when it is not."""
    m = _NAME_LINE.match(s, i, limit)
    if m is None or m.group(1) not in ctx.schemas:
        return None
    end = value_end(s, m.end(), limit)
    if end is None or not s.startswith(_CALL_END, skip(s, end)):
        return None
    parsed = loads_lenient(s[m.end() : end])
    if parsed is None or not isinstance(parsed[0], dict):
        return None
    return end, (m.group(1), parsed[0], parsed[1])


def _pair(s: str, i: int, ends: _Ends, truncated: bool) -> tuple[str, str, int] | None:
    """One `<arg_key>K</arg_key><arg_value>V</arg_value>` from s[i]: (K, V, end), or None when
    it is not one (a value running to the end counts only when the reply was cut off)."""
    key_end = s.find(_KEY_END, i, ends.limit)
    if key_end < 0:
        return None
    key = s[i + len(_KEY) : key_end].strip()
    v = _gap(s, key_end + len(_KEY_END))
    if not s.startswith(_VALUE, v):
        return _unopened(s, key, v, ends)
    found = _value(s, v + len(_VALUE), ends)
    if found is None:
        cut = truncated and ends.limit == len(s)
        return (key, s[v + len(_VALUE) :], len(s)) if cut else None
    return key, *found


def _unopened(s: str, key: str, v: int, ends: _Ends) -> tuple[str, str, int] | None:
    """A value whose `<arg_value>` was forgotten (`<arg_key>k</arg_key>\\nv</arg_value>`, as
    Ollama's GLM-4.6 parser mends it): it runs from after the key's whitespace to a
    `</arg_value>` that comes before any other tag of the call; None when there is none."""
    close = ends.closes.at(v)
    if close < 0 or s.find("<", v, close) >= 0:
        return None
    return key, s[v:close], close + len(_VALUE_END)


def _value(s: str, start: int, ends: _Ends) -> tuple[str, int] | None:
    """An argument's text and where it ends; None when it runs to the end of the text (or,
    unclosed, to the next `<tool_call>`: a value must not be read as far as the next call)."""
    key = ends.keys.at(start)
    first_close = ends.closes.at(start)
    if key >= 0 and (first_close < 0 or key < first_close):
        return s[start:key], key  # the close was forgotten
    q = ends.structural.at(start)
    if q >= 0:
        return s[start:q], q + len(_VALUE_END)
    call_end = ends.call_end.at(start)
    bound = min((k for k in (key, call_end) if k >= 0), default=-1)
    if bound < 0:
        return None
    q = s.rfind(_VALUE_END, start, bound)
    return (s[start:q], q + len(_VALUE_END)) if q >= 0 else (s[start:bound], bound)


def _declared_key(s: str, start: int, limit: int, props: dict[str, Any]) -> int:
    """The next `<arg_key>K</arg_key>` that can end a value whose `</arg_value>` was forgotten:
    K a parameter of the tool (any K when the schema names none)."""
    o = s.find(_KEY, start, limit)
    while o >= 0:
        close = s.find(_KEY_END, o, limit)
        if close >= 0 and (not props or s[o + len(_KEY) : close].strip() in props):
            return o
        o = s.find(_KEY, o + 1, limit)
    return -1
