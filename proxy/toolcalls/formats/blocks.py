"""Spans for a wrapper that holds several calls (OLMo 3's `<function_calls>`, Apertus'
`<|tools_prefix|>`, Seed-OSS's `<seed:tool_call>`): one span per call, so one invalid call, or one
naming an undeclared tool, stays text without dropping its valid siblings.

The wrapper's own tokens go with the call next to them; when that call is not recovered they are
an empty span of their own, so no marker is left in the content. A wrapper none of whose calls is
recovered gives no span at all: its text stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, RawCall, Span


@dataclass(frozen=True)
class Item:
    """One value's text in a wrapper, s[start:end], and the calls it reads as (none: not a
    call, and the text stays)."""

    start: int
    end: int
    calls: list[RawCall]

    def recovered(self, ctx: Ctx) -> bool:
        return bool(self.calls) and all(c[0] in ctx.schemas for c in self.calls)


def past_tokens(s: str, i: int, tokens: tuple[str, ...]) -> int:
    """Where a run of `tokens` (and the whitespace between them) starting at s[i] ends; tokens a
    family's template ends a turn with that scan.END_TOKENS does not know."""
    while True:
        j = skip(s, i)
        tok = next((t for t in tokens if s.startswith(t, j)), None)
        if tok is None:
            return i
        i = j + len(tok)


def wrapped_spans(p: int, items: list[Item], end: int, fmt: str, ctx: Ctx) -> list[Span]:
    """Spans for a wrapper from s[p] (its opener) to s[end] (after its closer), whose calls are
    `items` in order: a call is recovered only when it was read and names a declared tool."""
    good = [k for k, it in enumerate(items) if it.recovered(ctx)]
    if not good:
        return []
    spans: list[Span] = []
    for k in good:
        it = items[k]
        start = p if k == 0 else it.start
        stop = end if k == len(items) - 1 else it.end
        spans.append(Span(start, stop, it.calls, fmt))
    if good[0] != 0:
        spans.insert(0, Span(p, items[0].start, [], fmt))
    if good[-1] != len(items) - 1:
        spans.append(Span(items[-1].end, end, [], fmt))
    return spans


def each_block(
    s: str, opener: str, close: str | None, read: Callable[[int, Scan], tuple[list[Span], int]]
) -> list[Span]:
    """The spans of every block that opens with `opener` in `s`: `read(p, scan)` gives the
    spans of the block at s[p] and where it ends, and the next block is looked for after it.
    One bounded scan (`Scan`, up to the next opener) serves all the blocks of a reply."""
    spans: list[Span] = []
    p = s.find(opener)
    if p < 0:
        return spans  # the usual reply: no scan set up
    scan = Scan(s, opener, close)
    while p >= 0:
        found, end = read(p, scan)
        spans.extend(found)
        p = s.find(opener, max(end, p + len(opener)))
    return spans
