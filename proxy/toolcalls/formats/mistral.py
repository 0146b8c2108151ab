"""Mistral's calls: `[TOOL_CALLS]` followed by a JSON list (v3 tokenizer: Mistral 7B v0.3,
Mixtral, Nemo), or by `NAME[ARGS]{...}` / `NAME[CALL_ID]id[ARGS]{...}` (v11 and later: Mistral
Small 3.2, Magistral, Devstral), several calls one after another. A `[/TOOL_CALLS]` after the
list (Ollama's model/parsers tools tests write one) is a closer: it goes with the calls. Checked
against vLLM's mistral_tool_parser.py and its tests, and llama.cpp's common/chat.cpp Mistral
handlers; research/toolcall-formats.md, section 1.
"""

from __future__ import annotations

import re

from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import json_seq

_MISTRAL_NAME = re.compile(r"([\w.\-]+)((?:\[CALL_ID\]\w+)?(?:\[ARGS\])?)(\s*)")


def _mistral(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    tag = "[TOOL_CALLS]"
    scan = Scan(s, tag, None)
    p = s.find(tag)
    while p >= 0:
        i = skip(s, p + len(tag))
        calls: list[RawCall] = []
        if i < len(s) and s[i] in "{[":
            i = json_seq(s, i, ctx, calls, scan)
        elif (named := _mistral_named(s, i, ctx, scan)) is not None:
            call, i = named
            calls.append(call)
        if i >= 0 and calls:
            spans.append(Span(p, i, calls, "mistral"))
        p = s.find(tag, max(i, p + 1))
    return spans


def _mistral_named(s: str, i: int, ctx: Ctx, scan: Scan) -> tuple[RawCall, int] | None:
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


FAMILY: Family = Family("mistral", _mistral, markers=("[TOOL_CALLS]",), closers=("[/TOOL_CALLS]",))
