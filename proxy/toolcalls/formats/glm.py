"""GLM 4.5-4.7's calls: `<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...
</tool_call>`, values typed by the schema (strings kept as written). Read inside the
`<tool_call>` wrapper by formats/tagged.py, so it adds no marker of its own.
research/toolcall-formats.md, section 1.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.toolcalls.scan import skip
from proxy.toolcalls.spans import Ctx, RawCall
from proxy.toolcalls.values import schema_type, tool_props, typed_value

_GLM_NAME = re.compile(r"\s*([\w.\-]+)\s*(?=<arg_key>|</tool_call>)")
_GLM_PAIR = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def glm_call(s: str, i: int, ctx: Ctx, limit: int) -> tuple[int, RawCall] | None:
    m = _GLM_NAME.match(s, i, limit)
    if m is None:
        return None
    name, i = m.group(1), m.end()
    props = tool_props(ctx.schemas, name)
    args: dict[str, Any] = {}
    while (pm := _GLM_PAIR.match(s, i, limit)) is not None:
        key, raw = pm.group(1).strip(), pm.group(2).strip()
        kind = schema_type(props.get(key))[0] if key in props else "string"
        args[key] = raw if kind == "string" else typed_value(raw, props.get(key))
        i = pm.end()
    # Without an argument pair only an explicit close makes it a call: "<tool_call> and
    # </tool_call>" in prose names no tool.
    if not args and not s.startswith("</tool_call>", skip(s, i)):
        return None
    return i, (name, args, False)
