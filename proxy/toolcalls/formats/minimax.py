"""MiniMax M2's calls (M2.1 and M2.5 write the same): `<minimax:tool_call>` holding one or more
`<invoke name="NAME">` with `<parameter name="KEY">value</parameter>` blocks and `</invoke>`,
then `</minimax:tool_call>`; values typed by the tool's schema; reasoning in `<think>`; a turn
ends with `[e~[`. Checked against MiniMax-AI's tool_calling_guide.md (M2, M2.5: its system
prompt shows the block without its close, so an invoke ended by `</invoke>` is a call even
when `</minimax:tool_call>` never comes), vLLM's minimax_m2_tool_parser.py and SGLang's
minimax-m2 streaming cases; research/toolcall-formats.md, section 8.

A server that strips the block's special tokens leaves the bare invokes: those count only as
`<invoke name="NAME">` for a declared NAME, since `<invoke` is common enough elsewhere.
Label `minimax`. The shape is read by formats/invoke_xml.py. MiniMax M3 writes another markup
(`]<]minimax[>[`-namespaced tags named by each argument): formats/minimax_m3.py reads it; an M3
invoke's `<invoke name="NAME">` holds no `<parameter>`, so it is no M2 call (its only body is
text, invoke_xml's `_ended`).
"""

from __future__ import annotations

from proxy.toolcalls.formats.invoke_xml import Bare, Block, Tags, find_spans, schema_typed
from proxy.toolcalls.spans import Ctx, Family, Span

OPEN, CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
END_TOKENS = ("[e~[",)
# MiniMax's own parser (tool_calling_guide.md) removes a newline after and before each value.
TAGS = Tags("<invoke name=", "</invoke>", "<parameter name=", "</parameter>", (CLOSE,), frame=True)
BLOCK = Block(OPEN, CLOSE, TAGS, end_tokens=END_TOKENS)
BARE_NAMED = '<invoke name="NAME">'
BARE = Bare(TAGS, exact=BARE_NAMED, end_tokens=END_TOKENS)


def _minimax(s: str, ctx: Ctx) -> list[Span]:
    return find_spans(s, ctx, "minimax", [BLOCK], [BARE], schema_typed)


FAMILY: Family = Family("minimax", _minimax, markers=(OPEN,), named=(BARE_NAMED,))
