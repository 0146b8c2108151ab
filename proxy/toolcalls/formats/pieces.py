"""Spans from the pieces of one block of calls, so that one bad call does not sink its siblings.

A block (Kimi's tool-calls section, Command R's action list, DeepSeek's calls, `<tool_calls>[..]`)
is cut into consecutive pieces: wrapper text (the block's own markers, list brackets and commas),
and one piece per call. A call piece naming an undeclared tool, or whose arguments cannot be
read, stays text; the other calls are still recovered, and the wrappers go with them. A block
with no good call gives no span at all (it stays text whole).

recovery.find_calls drops any span naming an undeclared tool, so a block that were one span
would lose every call for one stray name; here each run of good pieces is its own span.
"""

from __future__ import annotations

from proxy.toolcalls.arguments import REPAIRED, parse_object
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, RawCall, Schemas, Span
from proxy.toolcalls.values import json_calls, partial_calls

# (start, end, calls): calls None for a piece that stays text, [] for a wrapper.
Piece = tuple[int, int, list[RawCall] | None]


def wrapper(start: int, end: int) -> Piece:
    """A piece of the block's own markup: it goes with the calls around it."""
    return (start, end, [])


def call_piece(start: int, end: int, name: str, args_text: str) -> Piece:
    """One call whose arguments are JSON text that closed: a call when the text reads as an
    object (repaired if need be), else a piece that stays text."""
    value, outcome = parse_object(args_text)
    if value is None:
        return (start, end, None)
    return (start, end, [(name, value, outcome == REPAIRED)])


def spans_of(s: str, pieces: list[Piece], schemas: Schemas, fmt: str) -> list[Span]:
    """The spans of a block's pieces: runs of good pieces (whitespace between pieces counts as
    touching) become one span each; pieces naming an undeclared tool stay text."""
    good = [_declared(p, schemas) for p in pieces]
    if not any(calls for _, _, calls in good):
        return []
    spans: list[Span] = []
    joined = False  # whether the last piece was kept (a run may continue)
    for start, end, calls in good:
        if calls is None:
            joined = False
            continue
        last = spans[-1] if spans else None
        if joined and last is not None and _blank(s, last.end, start):
            spans[-1] = Span(last.start, end, [*last.calls, *calls], fmt)
        else:
            spans.append(Span(start, end, list(calls), fmt))
        joined = True
    return spans


def _declared(piece: Piece, schemas: Schemas) -> Piece:
    start, end, calls = piece
    if calls and not all(name in schemas for name, _, _ in calls):
        return (start, end, None)
    return piece


def _blank(s: str, i: int, j: int) -> bool:
    return i >= j or s[i:j].isspace()


def json_list(s: str, start: int, i: int, ctx: Ctx, scan: Scan, pieces: list[Piece]) -> int:
    """Pieces of a list of call objects at s[i] (`[{..}, {..}]`, or one `{..}`; a comma left
    out between two objects is no end), the wrapper from `start` (the block's marker) on;
    where the list ends.

    Each object is its own piece, split by a string-aware scan bounded by the block's next
    marker. An object that does not close ends the list: it is a call only when the reply was
    cut off and runs to its end; otherwise it and the rest stay text.
    """
    if s[i] == "{":
        pieces.append(wrapper(start, i))
        end = _item(s, i, ctx, scan, pieces)
        return i if end < 0 else end
    j = skip(s, i + 1)
    pieces.append(wrapper(start, j))
    while j < len(s) and s[j] == "{":
        end = _item(s, j, ctx, scan, pieces)
        if end < 0:
            return j
        if end == len(s):
            return end
        k = skip(s, end)
        # A missing comma between two objects (Ollama's Cohere cases): the next is still one.
        j = skip(s, k + 1) if s.startswith(",", k) else k
        if j == k and not s.startswith("{", k):
            break
        pieces.append(wrapper(end, j))
    if s.startswith("]", j):
        pieces.append(wrapper(j, j + 1))
        return j + 1
    return j


def _item(s: str, j: int, ctx: Ctx, scan: Scan, pieces: list[Piece]) -> int:
    end = scan.value(j)
    if end is None:
        if not (ctx.truncated and scan.limit(j) == len(s)):
            return -1
        pieces.append((j, len(s), partial_calls(s[j:].rstrip(), ctx.schemas) or None))
        return len(s)
    pieces.append((j, end, json_calls(s[j:end], ctx.schemas)))
    return end
