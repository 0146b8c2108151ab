"""DeepSeek V3.2's DSML calls: `<｜DSML｜function_calls>` holding one or more
`<｜DSML｜invoke name="NAME">` with `<｜DSML｜parameter name="KEY" string="true|false">value
</｜DSML｜parameter>` blocks and `</｜DSML｜invoke>`, then `</｜DSML｜function_calls>`. A
parameter with `string="true"` is the raw string; `string="false"` is JSON, typed by the tool's
schema when it gives a type (vLLM's `_convert_params_with_schema`). The bar is the fullwidth
`｜` of DeepSeek's tokens; an ASCII `|` is read too (`<|DSML|function_calls>`), as is a bare
`<｜DSML｜invoke` without its block. Reasoning in `<think>`; a turn ends with
`<｜end▁of▁sentence｜>` (scan.END_TOKENS). Checked against vLLM's deepseekv32_tool_parser.py and
research/toolcall-formats.md, section 6 (V3.2). Label `dsml`; read by formats/invoke_xml.py.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.toolcalls.formats.invoke_xml import Bare, Block, Param, Tags, find_spans
from proxy.toolcalls.spans import Ctx, Family, Span
from proxy.toolcalls.values import tool_props, typed_value


def _dialect(bar: str) -> tuple[Block, Bare]:
    m = f"{bar}DSML{bar}"
    close = f"</{m}function_calls>"
    tags = Tags(f"<{m}invoke name=", f"</{m}invoke>", f"<{m}parameter name=", f"</{m}parameter>",
                (close,))  # fmt: skip
    return Block(f"<{m}function_calls>", close, tags), Bare(tags)


WIDE, ASCII = _dialect("｜"), _dialect("|")
BLOCKS, BARES = (WIDE[0], ASCII[0]), (WIDE[1], ASCII[1])


def dsml_typed(name: str, params: dict[str, Param], ctx: Ctx) -> dict[str, Any]:
    """`string="true"`: the text as written; otherwise typed by the schema, and a JSON value
    (`string="false"`) the schema gives no type for is parsed as JSON."""
    props = tool_props(ctx.schemas, name)
    out: dict[str, Any] = {}
    for key, param in params.items():
        flag = param.attrs.get("string", "").strip().lower()
        prop = props.get(key)
        if flag == "true":
            out[key] = param.text
        elif flag == "false" and not _declares_type(prop):
            out[key] = _json(param.text)
        else:
            out[key] = typed_value(param.text, prop)
    return out


def _declares_type(prop: Any) -> bool:
    return isinstance(prop, dict) and any(k in prop for k in ("type", "anyOf", "oneOf"))


def _json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _dsml(s: str, ctx: Ctx) -> list[Span]:
    return find_spans(s, ctx, "dsml", BLOCKS, BARES, dsml_typed)


FAMILY = Family("dsml", _dsml, markers=(*(b.open for b in BLOCKS), *(b.tags.invoke for b in BARES)))
