"""GigaChat 3 and 3.1 (ai-sage/GigaChat3-10B-A1.8B, GigaChat3-702B-A36B, GigaChat3.1): one JSON
object `{"name": NAME, "arguments": {...}}` after a header, label `gigachat`:

    <|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name": "f", "arguments": {"a": 1}}</s>
    <|function_call|>{"name": "f", "arguments": {"a": 1}}

GigaChat 3 starts a function-call message with the `<|message_sep|>` separator and the role
`function call` (SGLang python/sglang/srt/function_call/gigachat3_detector.py: the content is the
text before `<|message_sep|>`, the call the JSON after `function call<|role_sep|>\\n`, and its
test/registered/function_call tests: prose before, a trailing `</s>`, invalid JSON that stays
text); GigaChat 3.1 writes the special token `<|function_call|>` before the object (llama.cpp
tests/test-chat.cpp, test_template_output_peg_parsers for GigaChat3-10B-A1.8B and
GigaChat3.1-10B-A1.8B, formats GIGACHAT_V3 and GIGACHAT_V3_1).

The header goes with the call (it is the template's, not the model's words); the header without
its `<|message_sep|>` (a server that dropped the token) is read too. Arguments that cannot be read
leave the call, header and all, as text (formats/pieces.py); an object cut off by the end of the
reply is a call only when the reply was truncated.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.pieces import Piece, json_list, spans_of
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

_SEP = "<|message_sep|>"
_HEADER = "function call<|role_sep|>"
_V31 = "<|function_call|>"
_OPENER = re.compile(
    r"<\|message_sep\|>\s*function call<\|role_sep\|>|function call<\|role_sep\|>"
    r"|<\|function_call\|>"
)
_LABEL = "gigachat"


def _find(s: str, ctx: Ctx) -> list[Span]:
    if _V31 not in s and _HEADER not in s:
        return []
    spans: list[Span] = []
    scan = Scan(s, _OPENER, None)
    m = _OPENER.search(s)
    while m is not None:
        i = skip(s, m.end())
        end = m.end()
        if s.startswith("{", i):
            pieces: list[Piece] = []
            end = json_list(s, m.start(), i, ctx, scan, pieces)
            spans.extend(spans_of(s, pieces, ctx.schemas, _LABEL))
        m = _OPENER.search(s, max(end, m.end()))
    return spans


FAMILY: Family = Family("gigachat", _find, markers=(_SEP, _HEADER, _V31))
