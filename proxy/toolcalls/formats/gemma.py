"""FunctionGemma's and Gemma 4's calls: `<start_function_call>call:NAME{key:<escape>text<escape>}
<end_function_call>` and `<|tool_call>call:NAME{...}<tool_call|>`, and the `call:NAME{` residue a
server leaves when it strips the tags (declared tools only). research/toolcall-formats.md,
section 1.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from proxy.jsontext import compact
from proxy.toolcalls.scan import skip, string_end
from proxy.toolcalls.spans import Ctx, Family, Span

_GEMMA = [("<start_function_call>", "<end_function_call>"), ("<|tool_call>", "<tool_call|>")]
_GEMMA_STR = ("<escape>", '<|"|>')


def _gemma(s: str, ctx: Ctx) -> list[Span]:
    found: list[tuple[int, int, str, str]] = []  # (start, brace, name, close)
    for open_, close in [*_GEMMA, ("", "")]:
        lead = re.escape(open_) + r"\s*" if open_ else ""
        for m in re.finditer(lead + r"call:([\w.\-]+)\{", s):
            if open_ or m.group(1) in ctx.schemas:  # the stripped residue: declared tools only
                found.append((m.start(), m.end() - 1, m.group(1), close))
    found.sort()
    starts = [start for start, _, _, _ in found]
    spans: list[Span] = []
    for start, brace, name, close in found:
        if spans and start < spans[-1].end:
            continue  # the residue match inside a tagged call, or a call inside arguments
        nxt = bisect.bisect_right(starts, brace)
        limit = starts[nxt] if nxt < len(starts) else len(s)
        args, i, closed = _gemma_args(s, brace, limit)
        if not closed and not (ctx.truncated and limit == len(s)):
            continue
        i = skip(s, i)
        if close and s.startswith(close, i):
            i += len(close)
        spans.append(Span(start, i, [(name, args, False)], "functiongemma"))
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
            j = string_end(s, i, limit)
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


FAMILY = Family(
    "functiongemma",
    _gemma,
    markers=tuple(o for o, _ in _GEMMA),
    named=("call:NAME{",),
    closers=tuple(c for _, c in _GEMMA),
)
