"""Qwen3-Coder's XML calls: `<function=NAME>` with `<parameter=KEY>value</parameter>` blocks and
`</function>`, usually inside `<tool_call>` (formats/tagged.py reads that wrapper); values typed
by the tool's schema the way vLLM's qwen3_coder parser does. The same tag with a JSON object
after it (`<function=NAME>{...}</function>`, Llama 3.1's custom format and Functionary v3.1) is
label `function_tag`. research/toolcall-formats.md, section 1.
"""

from __future__ import annotations

from typing import Any

from proxy.toolcalls.scan import Next, Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import tool_props, typed_value


def function_tag(s: str, p: int, ctx: Ctx, scan: Scan) -> tuple[int, RawCall, str] | None:
    """`<function=NAME>` followed by `<parameter=..>` blocks (Qwen3-Coder) or a JSON object."""
    limit = scan.limit(p)
    close = s.find(">", p, limit)
    name = s[p + len("<function=") : close].strip() if close > 0 else ""
    if not name or any(c in name for c in "<\n{"):
        return None
    i = skip(s, close + 1)
    if i < len(s) and s[i] == "{":
        end = scan.value(i)
        if end is None and not (ctx.truncated and limit == len(s)):
            return None
        args: Any = s[i:] if end is None else s[i:end]
        i = len(s) if end is None else skip(s, end)
        if s.startswith("</function>", i):
            i += len("</function>")
        return i, (name, args.rstrip(), False), "function_tag"
    found = _parameters(s, i, limit, ctx.truncated)
    if found is None:
        return None
    params, i, closed = found
    if not params and not closed:
        return None  # `<function=foo>` in prose: a call needs parameters or `</function>`
    props = tool_props(ctx.schemas, name)
    typed = {k: typed_value(v, props.get(k)) for k, v in params.items()}
    return i, (name, typed, False), "qwen3_coder"


def _parameters(
    s: str, i: int, limit: int, truncated: bool
) -> tuple[dict[str, str], int, bool] | None:
    """(parameters, end, closed by `</function>`), or None when a value never ends."""
    params: dict[str, str] = {}
    structural = Next(lambda p: _structural_close(s, p, limit))
    opens = Next(lambda p: s.find("<parameter=", p, limit))
    ends = Next(lambda p: s.find("</function>", p, limit))
    while True:
        i = skip(s, i)
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
        after = skip(s, q + len("</parameter>"))
        if after >= limit or s.startswith(("<parameter=", "</function>", "</tool_call>"), after):
            return q
        q = s.find("</parameter>", q + 1, limit)
    return -1


def _parameter_value(
    s: str, start: int, limit: int, finders: tuple[Next, Next, Next]
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


def _functions(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    scan = Scan(s, "<function=", "</function>")
    p = s.find("<function=")
    while p >= 0:
        found = function_tag(s, p, ctx, scan)
        if found is not None:
            end, call, fmt = found
            spans.append(Span(p, end, [call], fmt))
            p = s.find("<function=", end)
        else:
            p = s.find("<function=", p + 1)
    return spans


FAMILY = Family(
    "qwen3_coder", _functions, markers=("<function=",), closers=("</function>", "</tool_call>")
)
