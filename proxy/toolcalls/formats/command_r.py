"""Cohere Command R7B and Command A calls (label `command_r`): `<|START_ACTION|>` then a JSON
list of `{"tool_call_id": "0", "tool_name": NAME, "parameters": {...}}`, then `<|END_ACTION|>`
and the turn's `<|END_OF_TURN_TOKEN|>` (llama.cpp models/templates/
CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja and its Command R7B parser; vLLM
cohere_command_tool_parser.py and tests/tool_parsers/test_cohere_command_tool_parser.py).
Command R+ writes `Action:` and a ```` ```json ```` fence around the same list (its tool_use
template; llama.cpp's test-chat COMMAND_R_PLUS case): header and fence go with the calls.

The plan before the action is `<|START_THINKING|>...<|END_THINKING|>`, a think block to
toolcalls.scan. A final answer is `<|START_RESPONSE|>...<|END_RESPONSE|>`; vLLM and llama.cpp
unwrap it. After an action (text the stream still holds) the response markers go with the
calls; a response written before the action has been relayed by the time the action shows, so
its markers stay, as they do in a reply with no call.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.blocks import each_block
from proxy.toolcalls.formats.pieces import Piece, json_list, spans_of, wrapper
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

_ACTION = "<|START_ACTION|>"
_ACTION_END = "<|END_ACTION|>"
_RESPONSE_RE = re.compile(r"<\|(?:START|END)_RESPONSE\|>")


def _command_r(s: str, ctx: Ctx) -> list[Span]:
    def read(p: int, scan: Scan) -> tuple[list[Span], int]:
        pieces: list[Piece] = []
        end = _action(s, p, ctx, scan, pieces)
        return spans_of(s, pieces, ctx.schemas, "command_r"), end

    spans = each_block(s, _ACTION, _ACTION_END, read)
    if spans:
        spans = _unwrap_responses(s, spans)
    return spans


def _action(s: str, p: int, ctx: Ctx, scan: Scan, pieces: list[Piece]) -> int:
    i = skip(s, p + len(_ACTION))
    if i >= len(s) or s[i] not in "[{":
        return i
    end = json_list(s, p, i, ctx, scan, pieces)
    k = skip(s, end)
    if s.startswith(_ACTION_END, k):
        pieces.append(wrapper(end, k + len(_ACTION_END)))
        return k + len(_ACTION_END)
    return end


def _unwrap_responses(s: str, spans: list[Span]) -> list[Span]:
    """Empty spans over the response markers after the first call: the answer's text stays
    content, the template's markers around it go."""
    out: list[Span] = []
    k = 0  # spans before k end before the marker looked at (both lists are in text order)
    for m in _RESPONSE_RE.finditer(s, spans[0].end):
        while k < len(spans) and spans[k].end <= m.start():
            out.append(spans[k])
            k += 1
        if k == len(spans) or m.end() <= spans[k].start:
            out.append(Span(m.start(), m.end(), [], "command_r"))
    return out + spans[k:]


# Command R+ (c4ai-command-r-plus tool_use template): "Action:" then a ```json fence holding the
# list of {"tool_name", "parameters"}. The header and fence are the markers: the word "Action:"
# alone is prose; with the fence right after it the header goes with the calls.
_PLUS = ("Action:\n```json", "Action: ```json")
_FENCE = "```"


def _command_r_plus(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    for marker in _PLUS:

        def read(p: int, scan: Scan, marker: str = marker) -> tuple[list[Span], int]:
            pieces: list[Piece] = []
            i = skip(s, p + len(marker))
            if i >= len(s) or s[i] not in "[{":
                return [], i
            end = json_list(s, p, i, ctx, scan, pieces)
            k = skip(s, end)
            if not s.startswith(_FENCE, k):
                return [], end  # a fence that holds more than the calls: an example
            pieces.append(wrapper(end, k + len(_FENCE)))
            return spans_of(s, pieces, ctx.schemas, "command_r"), k + len(_FENCE)

        spans += each_block(s, marker, _FENCE, read)
    return sorted(spans, key=lambda sp: sp.start)


FAMILY: Family = Family("command_r", _command_r, markers=(_ACTION,))
FAMILY_PLUS: Family = Family("command_r", _command_r_plus, markers=_PLUS)
