"""StepFun Step3's calls: `<｜tool_calls_begin｜>`, then for each call
`<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME">` with
`<steptml:parameter name="KEY">value</steptml:parameter>` blocks, `</steptml:invoke>`,
`<｜tool_call_end｜>`; at last `<｜tool_calls_end｜>`;
values typed by the tool's schema. The tokens have the fullwidth bar `｜` in vLLM's
step3_tool_parser.py and SGLang's Step3Detector; Step3's own chat template (stepfun-ai/step3
chat_template.json) describes the format to the model with ASCII bars (`<|tool_calls_begin|>`)
and a newline after `<|tool_call_begin|>`, so both are read. A turn ends with `<|EOT|>`. A
server that strips the special tokens leaves `function<steptml:invoke ...>...</steptml:invoke>`:
a bare invoke counts, with that `function`. vLLM's step3 tests write the call token straight
before the invoke (`<｜tool_call_begin｜><steptml:invoke`), or the name again after the separator
on a line of its own (`function<｜tool_sep｜>NAME\n<steptml:invoke`): both are read as calls of
the block, so its frame goes with them (`Block.call_lead`). Label `step3`; read by
formats/invoke_xml.py.

`<｜tool_calls_begin｜>` is also a spelling formats/deepseek.py accepts for DeepSeek V3's
`<｜tool▁calls▁begin｜>` (`▁` as `_`). Neither finder reads the other's calls: this one needs a
`<steptml:invoke` in the call, DeepSeek's a name and JSON after the separator. (One
overlap is left: a reply cut off while a tool named `function` is declared gives DeepSeek's
finder a call at the same place, and it is registered first.) Step 3.5 writes Qwen3-Coder's
`<function=NAME>` calls instead (formats/qwen3_coder.py).
"""

from __future__ import annotations

from proxy.toolcalls.formats.invoke_xml import Bare, Block, Tags, find_spans, schema_typed
from proxy.toolcalls.spans import Ctx, Family, Span

END_TOKENS = ("<|EOT|>",)
TAGS_OUTER = ("<｜tool_call_end｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
              "<|tool_call_end|>", "<|tool_calls_end|>", "<|tool_call_begin|>")  # fmt: skip
TAGS = Tags(
    "<steptml:invoke name=", "</steptml:invoke>", "<steptml:parameter name=",
    "</steptml:parameter>", TAGS_OUTER,
)  # fmt: skip


def _block(bar: str) -> Block:
    def tok(name: str) -> str:
        return f"<{bar}{name}{bar}>"

    return Block(
        tok("tool_calls_begin"), tok("tool_calls_end"), TAGS,
        call_open=(tok("tool_call_begin"),), call_lead=("function", tok("tool_sep")),
        call_close=tok("tool_call_end"), end_tokens=END_TOKENS,
    )  # fmt: skip


BLOCKS = (_block("｜"), _block("|"))
BARE = Bare(TAGS, lead="function", end_tokens=END_TOKENS)


def _step3(s: str, ctx: Ctx) -> list[Span]:
    return find_spans(s, ctx, "step3", BLOCKS, [BARE], schema_typed)


FAMILY: Family = Family(
    "step3", _step3, markers=(*(b.open for b in BLOCKS), "function" + TAGS.invoke, TAGS.invoke)
)
