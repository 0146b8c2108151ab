"""Qwen3-Coder's XML calls: `<function=NAME>` with `<parameter=KEY>value</parameter>` blocks and
`</function>`, usually inside `<tool_call>` (formats/tagged.py reads that wrapper); values typed
by the tool's schema (values.typed_value). The same tag with a JSON object after it
(`<function=NAME>{...}</function>`) is label `function_tag`: Llama 3.1's custom tool format and
Functionary v3.1 (meetkai-functionary-medium-v3.1.jinja in llama.cpp's models/templates: one
`<function=NAME>{json}</function>` per call, the calls back to back, then `<|eom_id|>`), and
`<function name="NAME">{json}</function>` (Hermes 2 Pro, as llama.cpp's parser takes it), which
formats/minicpm.py reads with MiniCPM5's `<param>` body. research/toolcall-formats.md, sections
1 and 8.

Where a parameter's value ends (the template writes `<parameter=K>\\nVALUE\\n</parameter>\\n`):
- at the first `</parameter>` followed by a structural tag (`<parameter=`, `</function>`,
  `</tool_call>`) or by the end: code written by write_file may hold `</parameter>`,
  `</function>` or `<tool_call>` literally, and they stay in the value;
- a value whose `</parameter>` was forgotten ends at the next `<parameter=K>` on a line of its
  own (K a parameter of the tool) or at `</function>`, when no `</parameter>` comes first;
- a value never looks past the next `<function=` opening a line or following a tag (the next
  call), which keeps the scan linear; one inside a line of the value is the value's text.
A `<tool_call>` right before a `<function=` this family reads on its own (the reply's first opener
was eaten) goes with that call; a reply cut inside `</function>` (`{..}<`) loses the tag's start.

Only the template's framing newline after `>` and before `</parameter>` is removed; any other
whitespace is the value's. A value that cannot be sent as JSON (a non-finite number for a
number parameter) rejects its call: that call stays text, its siblings are still recovered.
"""

from __future__ import annotations

from typing import Any

from proxy.toolcalls.scan import Next, Scan, skip, skip_back, structural_close
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import tool_props, typed_value

_OPEN = "<parameter="
_CLOSE = "</parameter>"
_END = "</function>"
_STRUCTURAL = (_OPEN, _END, "</tool_call>")  # what a value's structural `</parameter>` precedes


def function_tag(
    s: str, p: int, ctx: Ctx, scan: Scan, bound: int = -1
) -> tuple[int, RawCall, str] | None:
    """`<function=NAME>` followed by `<parameter=..>` blocks (Qwen3-Coder) or a JSON object.

    `bound`, when given, is where a wrapper's region ends (Seed-OSS's next `<seed:tool_call>`):
    a value that never closes does not run into the next wrapper."""
    limit = scan.limit(p)
    close = s.find(">", p, limit)
    name = s[p + len("<function=") : close].strip() if close > 0 else ""
    if not name or any(c in name for c in "<\n{"):
        return None
    i = skip(s, close + 1)
    if i < len(s) and s[i] == "{":
        return json_body(s, i, name, ctx, scan)
    # The parameters' region ends at the next call's `<function=`, not at the wrapper's next
    # `<tool_call>`: a value may quote that tag.
    if (calls := scan.searches.get("next_call")) is None:
        calls = scan.searches["next_call"] = Next(lambda k: _next_call(s, k))
    region = calls.at(p + 1)
    if 0 <= bound < region:
        region = bound
    props = tool_props(ctx.schemas, name)
    found = _parameters(s, i, region, ctx.truncated, props)
    if found is None:
        return None
    params, i, closed = found
    if not params and not closed:
        return None  # `<function=foo>` in prose: a call needs parameters or `</function>`
    typed = typed_args(params, props)
    return None if typed is None else (i, (name, typed, False), "qwen3_coder")


def _next_call(s: str, start: int) -> int:
    """Where the next call's `<function=` is (len(s): none): one opening a line or following
    a tag, as the template writes calls; one inside a line of text (`s = "<function=x>"`) is
    a value's own. Cached by the caller (scan.Next): positions only grow."""
    o = s.find("<function=", start)
    while o >= 0:
        k = o
        while k > 0 and s[k - 1] in " \t\r\n":
            k -= 1
        if k == 0 or s[k - 1] == ">" or "\n" in s[k:o]:
            return o
        o = s.find("<function=", o + 1)
    return len(s)


def json_body(s: str, i: int, name: str, ctx: Ctx, scan: Scan) -> tuple[int, RawCall, str] | None:
    """`<function=NAME>` (or `<function name="NAME">`) followed by a JSON object at s[i]."""
    end = scan.value(i)
    if end is None and not (ctx.truncated and scan.limit(i) == len(s)):
        return None
    args = s[i:] if end is None else s[i:end]
    i = len(s) if end is None else skip(s, end)
    if s.startswith(_END, i):
        i += len(_END)
    elif ctx.truncated and i < len(s) and _END.startswith(s[i:].rstrip()):
        i = len(s)  # the reply was cut inside its `</function>` (`{..}<`): the tag's start
    return i, (name, args.rstrip(), False), "function_tag"


def typed_args(params: dict[str, str], props: dict[str, Any]) -> dict[str, Any] | None:
    """Parameters typed by the tool's schema; None when one cannot be sent as JSON (a
    non-finite number where the schema takes no string), which rejects the call."""
    try:
        return {k: typed_value(v, props.get(k), strict=True) for k, v in params.items()}
    except ValueError:
        return None


class _Ends:
    """Where values end in one call's region: cached searches, so a call costs one pass."""

    def __init__(self, s: str, region: int, props: dict[str, Any]) -> None:
        self.structural = Next(
            lambda p: structural_close(s, _CLOSE, p, region, _STRUCTURAL, end=region)
        )
        self.closes = Next(lambda p: s.find(_CLOSE, p, region))
        self.opens = Next(lambda p: _line_opener(s, p, region, props))
        self.ends = Next(lambda p: s.find(_END, p, region))


def _parameters(
    s: str, i: int, region: int, truncated: bool, props: dict[str, Any]
) -> tuple[dict[str, str], int, bool] | None:
    """(parameters, end, closed by `</function>`), or None when a value never ends."""
    params: dict[str, str] = {}
    ends = _Ends(s, region, props)
    while True:
        i = skip(s, i)
        if s.startswith(_END, i):
            return params, i + len(_END), True
        if not s.startswith(_OPEN, i):
            return params, i, False
        close = s.find(">", i, region)
        if close < 0:
            return (params, region, False) if truncated else None
        key = s[i + len(_OPEN) : close].strip()
        found = _parameter_value(s, close + 1, region, ends)
        if found is None and not truncated:
            return None
        value, i = found if found is not None else (trim_one(s[close + 1 : region]), region)
        params[key] = value


def _line_opener(s: str, start: int, limit: int, props: dict[str, Any]) -> int:
    """The next `<parameter=K>` that can end a value whose `</parameter>` was forgotten: on a
    line of its own (as the template writes it), K a parameter of the tool (any K when the
    schema names none). Inline openers, or other keys, are the value's own text."""
    o = s.find(_OPEN, start, limit)
    while o >= 0:
        k = o
        while k > start and s[k - 1] in " \t":
            k -= 1
        gt = s.find(">", o, limit)
        key = s[o + len(_OPEN) : gt].strip() if gt >= 0 else None
        if (k == start or s[k - 1] == "\n") and key is not None and (not props or key in props):
            return o
        o = s.find(_OPEN, o + 1, limit)
    return -1


def _parameter_value(s: str, start: int, region: int, ends: _Ends) -> tuple[str, int] | None:
    """A parameter's text and where it ends; None when it runs to the end of the text."""
    opener = ends.opens.at(start)
    first_close = ends.closes.at(start)
    if opener >= 0 and (first_close < 0 or opener < first_close):
        return trim_one(s[start:opener]), opener  # the close was forgotten
    q = ends.structural.at(start)
    if q >= 0:
        return trim_one(s[start:q]), q + len(_CLOSE)
    bound = min((k for k in (opener, ends.ends.at(start)) if k >= 0), default=region)
    # No `</parameter>` is followed by a tag: the value ends at its last `</parameter>` and the
    # text after it is the model's prose again, rather than part of the value.
    q = s.rfind(_CLOSE, start, bound)
    if q >= 0:
        return trim_one(s[start:q]), q + len(_CLOSE)
    if bound == len(s):
        return None
    return trim_one(s[start:bound]), bound


def trim_one(value: str) -> str:
    """The value without the template's framing: one newline after `>`, one before the close."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _functions(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    scan = Scan(s, "<function=", _END)
    p = s.find("<function=")
    while p >= 0:
        found = function_tag(s, p, ctx, scan)
        if found is not None:
            end, call, fmt = found
            start = _opened_at(s, p, spans[-1].end if spans else 0)
            spans.append(Span(start, end, [call], fmt))
            p = s.find("<function=", end)
        else:
            p = s.find("<function=", p + 1)
    return spans


def _opened_at(s: str, p: int, floor: int) -> int:
    """Where the call at s[p] starts: at a `<tool_call>` right before it (whitespace between),
    not before `floor`. The family is read first when a reply's first `<tool_call>` was eaten
    (`<function=..>..</function></tool_call>\n<tool_call>\n<function=..>`): the later calls'
    openers are then framing next to a call of this family, not the model's words."""
    at = skip_back(s, p, floor) - len("<tool_call>")
    return at if at >= floor and s.startswith("<tool_call>", at) else p


FAMILY: Family = Family(
    "qwen3_coder", _functions, markers=("<function=",), closers=("</function>", "</tool_call>")
)
