"""Hunyuan-A13B's calls: `<tool_calls>[{"name": NAME, "arguments": {...}}, ...]</tool_calls>`
in the answer, which the template wraps as `<think>\n...\n</think>\n<answer>\n...\n</answer>`
(vLLM hunyuan_a13b_tool_parser.py and tests/tool_parsers/test_hunyuan_a13b_tool_parser.py,
whose stream ends `</tool_calls>\n</answer>`; vLLM's hunyuan_a13b reasoning parser). Jamba 1.5
and Apriel 1.5 write the same tag pair, hence the label `tool_calls_tag`, shared with
formats/tagged.py's reading of the tag.

This finder reads the list form only, call by call (formats/pieces.py): one undeclared or
unreadable call stays text and its siblings are recovered, where tagged.py's one span would be
dropped whole. It comes first in the registry, so it wins the tie with tagged.py's span at the
same place. An `<answer>` right before the tag, and the `</answer>` right after, go with the
calls (the marker `<answer>\n<tool_calls>` lets the stream hold the opening tag that long).
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.blocks import each_block
from proxy.toolcalls.formats.pieces import Piece, json_list, spans_of, wrapper
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

_OPEN = "<tool_calls>"
_CLOSE = "</tool_calls>"
_ANSWER = re.compile(r"<answer>\n?\Z")
_ANSWER_END = "</answer>"
_LABEL = "tool_calls_tag"


def _hunyuan(s: str, ctx: Ctx) -> list[Span]:
    def read(p: int, scan: Scan) -> tuple[list[Span], int]:
        pieces: list[Piece] = []
        end = _block(s, p, ctx, scan, pieces)
        return spans_of(s, pieces, ctx.schemas, _LABEL), end

    return each_block(s, _OPEN, _CLOSE, read)


def _block(s: str, p: int, ctx: Ctx, scan: Scan, pieces: list[Piece]) -> int:
    i = skip(s, p + len(_OPEN))
    if not s.startswith("[", i):
        return i  # an object or another body: tagged.py's
    # `<answer>` at most 9 characters back: a bounded look, not a search.
    answer = _ANSWER.search(s, max(0, p - 9), p)
    end = json_list(s, answer.start() if answer else p, i, ctx, scan, pieces)
    k = skip(s, end)
    if s.startswith(_CLOSE, k):
        k += len(_CLOSE)
        if answer and s.startswith(_ANSWER_END, e := skip(s, k)):
            k = e + len(_ANSWER_END)
        pieces.append(wrapper(end, k))
        return k
    return end


FAMILY: Family = Family(
    "hunyuan", _hunyuan, markers=(_OPEN, "<answer>" + _OPEN, "<answer>\n" + _OPEN)
)
