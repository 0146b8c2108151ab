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
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

OPEN, CLOSE = "<seed:tool_call>", "</seed:tool_call>"
FUNCTION = "<function="
END_TOKENS = ("<seed:eos>",)


def _find(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    p = s.find(OPEN)
    if p < 0:
        return spans
    # A function's scans end at the next `<function=` (as qwen3_coder's own finder's do, which
    # keeps them linear) or at the next wrapper, whichever comes first.
    scan = Scan(s, FUNCTION, "</function>", stop=OPEN)
    while p >= 0:
        found, end = _block(s, p, ctx, scan)
        spans.extend(found)
        p = s.find(OPEN, max(end, p + len(OPEN)))
    return spans


def _block(s: str, p: int, ctx: Ctx, scan: Scan) -> tuple[list[Span], int]:
    """The spans of the wrapper opening at s[p], and where it ends."""
    i = skip(s, p + len(OPEN))
    items: list[Item] = []
    while s.startswith(FUNCTION, i):
        found = function_tag(s, i, ctx, scan, scan.stop_after(i))
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


FAMILY: Family = Family("seed_oss", _find, markers=(OPEN,))
