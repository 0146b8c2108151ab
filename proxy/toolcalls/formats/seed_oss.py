"""Seed-OSS (ByteDance-Seed/Seed-OSS-36B-Instruct): Qwen3-Coder's XML calls inside the
`<seed:tool_call>` wrapper, label `seed_oss`:

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    </function>
    </seed:tool_call>

Checked against the Seed-OSS chat template (llama.cpp `models/templates/ByteDance-Seed-OSS.jinja`:
one wrapper a call, values written with `| string`, the turn ended by `<seed:eos>`) and vLLM's
`seed_oss_tool_parser.py` (several `<function=` in one wrapper; parameters typed by the schema,
as for Qwen3-Coder). Reasoning is `<seed:think>`, a think block in scan.py. The parameters are
read by formats/qwen3_coder.py's `function_tag`; `<seed:eos>`, which scan.END_TOKENS does not
list, is taken by the span.

A bare `<function=` without the wrapper stays Qwen3-Coder's (label `qwen3_coder`). Each function
is its own span (formats/blocks.py): one naming an undeclared tool stays text, its siblings do not.
"""

from __future__ import annotations

from proxy.toolcalls.formats.blocks import Item, past_tokens, wrapped_spans
from proxy.toolcalls.formats.qwen3_coder import function_tag
from proxy.toolcalls.scan import Next, Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

OPEN, CLOSE = "<seed:tool_call>", "</seed:tool_call>"
FUNCTION = "<function="
END_TOKENS = ("<seed:eos>",)


def _find(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    p = s.find(OPEN)
    if p < 0:
        return spans
    scan = _Bounded(s)
    while p >= 0:
        found, end = _block(s, p, ctx, scan)
        spans.extend(found)
        p = s.find(OPEN, max(end, p + len(OPEN)))
    return spans


def _block(s: str, p: int, ctx: Ctx, scan: _Bounded) -> tuple[list[Span], int]:
    """The spans of the wrapper opening at s[p], and where it ends."""
    i = skip(s, p + len(OPEN))
    items: list[Item] = []
    while s.startswith(FUNCTION, i):
        found = function_tag(s, i, ctx, scan, scan.wrapper(i))
        if found is None:
            break  # a value that never ends, or `<function=` in prose: nothing more to read
        end, call, _ = found
        items.append(Item(i, end, [call]))
        i = skip(s, end)
    if not items:
        return [], i
    if s.startswith(CLOSE, i):
        i += len(CLOSE)
    end = past_tokens(s, i, END_TOKENS)
    return wrapped_spans(p, items, end, "seed_oss", ctx), end


class _Bounded(Scan):
    """A function's scans end at the next `<function=` (as qwen3_coder's own finder's do, which
    keeps them linear) or at the next wrapper, whichever comes first: a parameter that never
    closes does not take the next `<seed:tool_call>` into its value."""

    def __init__(self, s: str) -> None:
        super().__init__(s, FUNCTION, "</function>")
        self._wrapper = Next(lambda p: s.find(OPEN, p))

    def wrapper(self, i: int) -> int:
        """Where the next wrapper opens after s[i], or -1."""
        return self._wrapper.at(i + 1)

    def limit(self, i: int) -> int:
        nxt = self._wrapper.at(i + 1)
        return super().limit(i) if nxt < 0 else min(super().limit(i), nxt)


FAMILY = Family("seed_oss", _find, markers=(OPEN,))
