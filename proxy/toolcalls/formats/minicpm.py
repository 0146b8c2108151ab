"""MiniCPM5 (openbmb/MiniCPM5-1B, MiniCPM5-2B): `<function name="NAME">` with one
`<param name="KEY">value</param>` block per argument and `</function>`, label `minicpm`:

    <function name="html"><param name="markup"><![CDATA[<a href="/x">hi</a>]]></param></function>

Checked against llama.cpp's tests/test-chat.cpp (test_template_output_peg_parsers for
openbmb-MiniCPM5-1B, format MINICPM5: a plain value, and a CDATA value holding `</param>`
literally, which is the parameter's text as written). Values are typed by the tool's schema
(values.typed_value; a non-finite number for a number parameter rejects the call); whitespace
between the tags is framing, and one newline after `>` and before `</param>` is the template's.

Where a plain value ends: at the first `</param>` followed by `<param name="` or `</function>`
(code may hold `</param>` literally); a CDATA value ends at its `]]>`, and `</param>` must follow.
A call whose parameters cannot be read, or that never reaches `</function>`, stays text.

The same tag with a JSON object after it (`<function name="NAME">{json}</function>`, Hermes 2 Pro
as llama.cpp's parser takes it) is read here too, label `function_tag` (formats/qwen3_coder.py's
JSON body): one finder for the one marker, so neither body's calls are another family's.
"""

from __future__ import annotations

from proxy.toolcalls.formats.qwen3_coder import json_body, trim_one, typed_args
from proxy.toolcalls.scan import Next, Scan, skip, structural_close
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import tool_props

_NAMED = '<function name="'
_PARAM = '<param name="'
_PARAM_END = "</param>"
_END = "</function>"
_CDATA, _CDATA_END = "<![CDATA[", "]]>"
_NAME_MAX = 256
_LABEL = "minicpm"


class _Next:
    """Cached searches over one reply, so many unclosed openers cost one pass."""

    def __init__(self, s: str) -> None:
        self.opener = Next(lambda p: s.find(_NAMED, p))
        self.cdata_end = Next(lambda p: s.find(_CDATA_END, p))

    def region(self, i: int, n: int) -> int:
        """Where a plain value at s[i] must end: the next call's opener (or the end)."""
        k = self.opener.at(i)
        return n if k < 0 else k


def _find(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    p = s.find(_NAMED)
    if p < 0:
        return spans
    scan = Scan(s, _NAMED, _END)
    nxt = _Next(s)
    while p >= 0:
        found = _call(s, p, ctx, scan, nxt)
        if found is not None:
            spans.append(Span(p, found[0], [found[1]], found[2]))
        p = s.find(_NAMED, found[0] if found else p + 1)
    return spans


def _call(s: str, p: int, ctx: Ctx, scan: Scan, nxt: _Next) -> tuple[int, RawCall, str] | None:
    """The call whose `<function name="` opens at s[p]: (end, call, label), or None."""
    name, i = _attribute(s, p + len(_NAMED), len(s))
    if name is None:
        return None
    i = skip(s, i)
    if s.startswith("{", i):
        return json_body(s, i, name, ctx, scan)
    params: dict[str, str] = {}
    while s.startswith(_PARAM, i):
        found = _param(s, i, nxt)
        if found is None or found[0] in params:
            return None  # unreadable, or a key given twice: which value is meant is unknown
        key, value, i = found
        params[key] = value
        i = skip(s, i)
    if not s.startswith(_END, i):
        return None
    typed = typed_args(params, tool_props(ctx.schemas, name))
    return None if typed is None else (i + len(_END), (name, typed, False), _LABEL)


def _attribute(s: str, i: int, limit: int) -> tuple[str | None, int]:
    """The quoted attribute value starting at s[i] (its tag's `">` closing it), and where the
    tag ends; None when it does not close soon or holds markup."""
    q = s.find('">', i, min(limit, i + _NAME_MAX))
    value = s[i:q] if q >= 0 else ""
    if not value or any(c in value for c in '<>"\n{'):
        return None, i
    return value, q + 2


def _param(s: str, i: int, nxt: _Next) -> tuple[str, str, int] | None:
    """(key, value, end) of the `<param name="` block at s[i], or None."""
    key, v = _attribute(s, i + len(_PARAM), len(s))
    if key is None:
        return None
    if s.startswith(_CDATA, v):
        # A CDATA value is delimited: it may quote any tag, another call's opener too.
        e = nxt.cdata_end.at(v + len(_CDATA))
        k = skip(s, e + len(_CDATA_END)) if e >= 0 else -1
        if k < 0 or not s.startswith(_PARAM_END, k):
            return None
        return key, s[v + len(_CDATA) : e], k + len(_PARAM_END)
    # A plain value never looks past the next call's opener: that keeps the scan linear.
    c = structural_close(s, _PARAM_END, v, nxt.region(v, len(s)), (_PARAM, _END))
    return None if c < 0 else (key, trim_one(s[v:c]), c + len(_PARAM_END))


FAMILY: Family = Family(_LABEL, _find, markers=(_NAMED,), closers=(_END,))
