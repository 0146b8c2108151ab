"""Muse Glimmer's calls: a message header ` to=NAME<|message|>` (after `<|start|>assistant` for
any message but the reply's first, whose `<|start|>assistant` the generation prompt wrote),
then `<atem:function_calls>` holding one or more `<atem:invoke name="NAME">` with
`<atem:parameter name="KEY">value</atem:parameter>` blocks and `</atem:invoke>`, then
`</atem:function_calls>`; a message ends with `<|eom|>` or `<|eot|>`. Values are typed by the
tool's schema: strings as written (the template tells the model spaces are not stripped), lists
and objects as JSON. Label `glimmer`; the shape is read by formats/invoke_xml.py.

Checked against llama.cpp's test-chat cases for the muse-glimmer template (a call after
` to=special_function<|message|>`; the same markup quoted in an answer is no call) and Ollama's
model/parsers glimmer_test.go (value types, control-token text inside a value).

The header is the call's: a block is a call only right after a ` to=NAME<|message|>` header, NAME
a declared tool, and the header (with its `<|start|>assistant`) goes with the call. A block
anywhere else, such as markup quoted in an answer, stays text. The answer's own header
` to=user<|message|>` opening a reply is the family's framing: recovery drops it from the
content, as llama.cpp does.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.blocks import wrapped_spans
from proxy.toolcalls.formats.invoke_xml import Block, Tags, past_tokens, read_block, schema_typed
from proxy.toolcalls.scan import skip
from proxy.toolcalls.spans import Ctx, Family, Span

OPEN, CLOSE = "<atem:function_calls>", "</atem:function_calls>"
END_TOKENS = ("<|eom|>", "<|eot|>", "<|end_of_text|>")
TAGS = Tags(
    "<atem:invoke name=", "</atem:invoke>", "<atem:parameter name=", "</atem:parameter>", (CLOSE,)
)
BLOCK = Block(OPEN, CLOSE, TAGS, end_tokens=END_TOKENS)
_MESSAGE = "<|message|>"
_START = "<|start|>assistant "
# A tool message's header; the recipient is checked against the declared tools.
_HEADER = re.compile(r"(?:<\|start\|>assistant )?to=([^\s<>|]{1,256})<\|message\|>")


def _glimmer(s: str, ctx: Ctx) -> list[Span]:
    if OPEN not in s:
        return []
    spans: list[Span] = []
    for m in _HEADER.finditer(s):
        if m.start() < (spans[-1].end if spans else 0) or m.group(1) not in ctx.schemas:
            continue
        p = skip(s, m.end())
        if not s.startswith(OPEN, p):
            continue
        limit = s.find(OPEN, p + 1)
        found = read_block(s, p, len(s) if limit < 0 else limit, ctx, BLOCK, schema_typed)
        if found is None:
            continue
        items, end = found
        end = past_tokens(s, end, END_TOKENS)
        spans.extend(wrapped_spans(m.start(), items, end, "glimmer", ctx))
    return spans


FAMILY: Family = Family(
    "glimmer",
    _glimmer,
    named=(_START + "to=NAME" + _MESSAGE, "to=NAME" + _MESSAGE),
    closers=(CLOSE,),
    framing=(" to=user" + _MESSAGE,),
)
