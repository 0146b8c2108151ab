"""DeepSeek's calls: V3's `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`
and a fenced JSON (R1's distilled models may write the block's marker as `<｜tool▁calls｜>`
and drop the first call's), and V3.1's `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}`, each call
closed by `<｜tool▁call▁end｜>`, the block by `<｜tool▁calls▁end｜>` and the turn's
`<｜end▁of▁sentence｜>`. research/toolcall-formats.md, section 1.

The `｜` is U+FF5C and the `▁` U+2581; after a server's detokenising (or in a distilled model's
own spelling, llama.cpp's comment on R1-Distill-Qwen) the `▁` may come as `_`, an escaped `\\_`
or a space, and the `｜` as an ASCII `|`: `<|tool▁calls▁begin|>`, `<|tool_call_begin|>`,
`<|tool_sep|>`. ASCII `<|tool_call_begin|>` is also Kimi K2's call marker; a DeepSeek call needs
its `<|tool_sep|>` after the name and a Kimi one `<|tool_call_argument_begin|>`, so each finder
reads only its own (formats/kimi.py). DSML (`｜DSML｜`, V3.2) is another module's.

Each call is its own piece (formats/pieces.py): an undeclared or unreadable call stays text and
its siblings are recovered.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.pieces import Piece, call_piece, spans_of, wrapper
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

_DS = r"(?:▁|_|\\_| )"
_BAR = "[｜|]"
_CALLS_BEGIN = re.compile(rf"<{_BAR}tool{_DS}calls(?:{_DS}begin)?{_BAR}>")
_CALLS_END = re.compile(
    rf"\s*<{_BAR}tool{_DS}calls{_DS}end{_BAR}>(?:\s*<{_BAR}end{_DS}of{_DS}sentence{_BAR}>)?"
)
_SEP = rf"<{_BAR}tool{_DS}sep{_BAR}>"
_MARK_MAX = 40  # longer than any block marker, `<|tool\\_calls\\_begin|>` included
_CALL = re.compile(
    rf"<{_BAR}tool{_DS}call{_DS}begin{_BAR}>(?:(function){_SEP}([^\n]+)\n```(?:json)?\s*"
    rf"|([^<\n]+?){_SEP}\s*)"
)
# R1's distilled models may drop the first call's own marker after the block's short one
# (`<｜tool▁calls｜>function<｜tool▁sep｜>NAME`, llama.cpp test-chat.cpp's DeepSeek R1 cases).
_FIRST_UNMARKED = re.compile(rf"(function){_SEP}([^\n]+)\n```(?:json)?\s*")
_CALL_END = re.compile(rf"\s*(?:```)?\s*<{_BAR}tool{_DS}call{_DS}end{_BAR}>")
# Where a block starts: the calls marker, or a first call's own.
_START = re.compile(rf"<{_BAR}tool{_DS}call(?:s(?:{_DS}begin)?|{_DS}begin){_BAR}>")


def _deepseek(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    bounded = Scan(s, _START, None)
    pos = 0
    while (m := _START.search(s, pos)) is not None:
        pieces: list[Piece] = []
        end = _block(s, m.start(), ctx, bounded, pieces)
        spans.extend(spans_of(s, pieces, ctx.schemas, "deepseek"))
        pos = max(end, m.start() + 1)
    return spans


def _block(s: str, p: int, ctx: Ctx, bounded: Scan, pieces: list[Piece]) -> int:
    i = p
    # Every match is bounded: a marker is short, and a call's header ends before the next one.
    if (b := _CALLS_BEGIN.match(s, p, p + _MARK_MAX)) is not None:
        i = skip(s, b.end())
        pieces.append(wrapper(p, i))
    first = _FIRST_UNMARKED.match(s, i, bounded.limit(i)) if b is not None else None
    while (c := first or _CALL.match(s, i, bounded.limit(i))) is not None:
        first = None
        piece = _call(s, c, ctx, bounded)
        if piece is None:
            break
        pieces.append(piece)
        i = skip(s, piece[1])
    e = _CALLS_END.match(s, i, i + 3 * _MARK_MAX)
    if e is not None and len(pieces) > (b is not None):
        pieces.append(wrapper(i, e.end()))
        i = e.end()
    return i


def _call(s: str, c: re.Match[str], ctx: Ctx, bounded: Scan) -> Piece | None:
    """One call from its marker; None when it does not close (a call only when cut off)."""
    name = (c.group(2) or c.group(3) or "").strip()
    j = c.end()
    end = bounded.value(j) if j < len(s) and s[j] in "{[" else None
    if end is not None:
        ce = _CALL_END.match(s, end, bounded.limit(end))
        return call_piece(c.start(), ce.end() if ce else end, name, s[j:end])
    limit = bounded.limit(j)
    # Arguments that are not one value closed by the call's end marker: the piece ends there
    # and stays text, so that the calls after it are still read.
    ce = _CALL_END.search(s, j, limit)
    if ce is not None:
        return call_piece(c.start(), ce.end(), name, s[j : ce.start()])
    if ctx.truncated and limit == len(s):
        return (c.start(), len(s), [(name, s[j:].rstrip(), False)])
    return None


FAMILY: Family = Family(
    "deepseek",
    _deepseek,
    # Every marker form starts with one of these: the fullwidth bar, or an ASCII bar and a
    # `tool` + separator + `call` long enough not to be prose.
    markers=("<｜tool", "<|tool▁call", "<|tool_call", "<|tool\\_call", "<|tool call"),
)
