"""DeepSeek V3.2's and V4's DSML calls: `<｜DSML｜function_calls>` holding one or more
`<｜DSML｜invoke name="NAME">` with `<｜DSML｜parameter name="KEY" string="true|false">value
</｜DSML｜parameter>` blocks and `</｜DSML｜invoke>`, then `</｜DSML｜function_calls>`. A
parameter with `string="true"` is the raw string; `string="false"` is JSON, typed by the tool's
schema when it gives a type (vLLM's `_convert_params_with_schema`). The bar is the fullwidth
`｜` of DeepSeek's tokens; an ASCII `|` is read too (`<|DSML|function_calls>`), as is a bare
`<｜DSML｜invoke` without its block. Reasoning in `<think>`; a turn ends with
`<｜end▁of▁sentence｜>` (scan.END_TOKENS). V4 wraps the same invokes in `<｜DSML｜tool_calls>` ...
`</｜DSML｜tool_calls>` (llama.cpp's test-chat.cpp DeepSeek-V4 cases, SGLang's
test_deepseekv32_detector.py): the wrapper goes with its calls like V3.2's.

Two repairs peers make are made here too. An invoke may hold one JSON object instead of
parameters (SGLang's DeepSeekV32Detector, test_detect_and_parse_json_format): the object is the
arguments; any other text as an invoke's only body leaves it text (invoke_xml.Tags.json_body).
A lone parameter named `arguments`, not `string="true"`, holding a JSON object all of whose keys
the schema declares, when the schema has no `arguments` of its own, is that object (vLLM's
test_arguments_wrapper_repaired). Checked against vLLM's deepseekv32_tool_parser.py and
research/toolcall-formats.md, section 6 (V3.2). Label `dsml`; read by formats/invoke_xml.py.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.toolcalls.formats.invoke_xml import Bare, Block, Param, Tags, find_spans
from proxy.toolcalls.spans import Ctx, Family, Span
from proxy.toolcalls.values import tool_props, typed_value

# V3.2's wrapper, then V4's.
WRAPPERS = ("function_calls", "tool_calls")


def _dialect(bar: str) -> tuple[tuple[Block, ...], Bare]:
    m = f"{bar}DSML{bar}"
    closes = tuple(f"</{m}{w}>" for w in WRAPPERS)
    tags = Tags(f"<{m}invoke name=", f"</{m}invoke>", f"<{m}parameter name=", f"</{m}parameter>",
                closes, json_body=True)  # fmt: skip
    blocks = tuple(Block(f"<{m}{w}>", f"</{m}{w}>", tags) for w in WRAPPERS)
    return blocks, Bare(tags)


WIDE, ASCII = _dialect("｜"), _dialect("|")
BLOCKS, BARES = (*WIDE[0], *ASCII[0]), (WIDE[1], ASCII[1])


def dsml_typed(name: str, params: dict[str, Param], ctx: Ctx) -> dict[str, Any]:
    """`string="true"`: the text as written; otherwise typed by the schema, and a JSON value
    (`string="false"`) the schema gives no type for is parsed as JSON."""
    props = tool_props(ctx.schemas, name)
    wrapped = _unwrapped(params, props)
    if wrapped is not None:
        return wrapped
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


def _unwrapped(params: dict[str, Param], props: dict[str, Any]) -> dict[str, Any] | None:
    """The object a lone `arguments` parameter wraps the arguments in, when the schema has no
    `arguments` and declares every key of the object; else None (the parameters are read as
    they are). A raw string (`string="true"`) is never unwrapped: the model said it is text."""
    param = params.get("arguments")
    if len(params) != 1 or param is None or "arguments" in props or not props:
        return None
    if param.attrs.get("string", "").strip().lower() == "true":
        return None
    value = _json(param.text)
    if not isinstance(value, dict) or not value or not set(value) <= set(props):
        return None
    return value


def _declares_type(prop: Any) -> bool:
    return isinstance(prop, dict) and any(k in prop for k in ("type", "anyOf", "oneOf"))


def _json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _dsml(s: str, ctx: Ctx) -> list[Span]:
    return find_spans(s, ctx, "dsml", BLOCKS, BARES, dsml_typed)


FAMILY: Family = Family(
    "dsml", _dsml, markers=(*(b.open for b in BLOCKS), *(b.tags.invoke for b in BARES))
)
