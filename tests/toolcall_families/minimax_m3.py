"""MiniMax M3's `]<]minimax[>[`-namespaced markup (proxy/toolcalls/formats/minimax_m3.py): one and
two calls, prose and a think block before, the `[e~[` end token, values typed by the schema,
nested objects, `<item>` arrays and empty elements, a closing tag without its namespace, an
invalid invoke among valid ones, and the negatives (a block cut off, an element that never
closes, text beside elements, elements where the schema wants a scalar, a name given twice)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, Call, Case, block_basics, tool
from tests.toolcall_case import j as _j

SOURCE = (
    "vLLM vllm/tool_parsers/minimax_m3_tool_parser.py; llama.cpp tests/test-chat.cpp "
    "MiniMax-M3 cases"
)
NS = "]<]minimax[>["
OPEN, CLOSE = f"{NS}<tool_call>\n", f"{NS}</tool_call>"


def element(key: str, value: Any) -> str:
    """One argument as the template writes it: objects as child elements, lists as `<item>`s,
    strings as they are and other scalars as JSON."""
    if isinstance(value, dict):
        inner = "".join(element(k, v) for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(element("item", v) for v in value)
    else:
        inner = value if isinstance(value, str) else _j(value)
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def invoke(name: str, body: str) -> str:
    return f'{NS}<invoke name="{name}">{body}{NS}</invoke>\n'


def render(calls: list[Call]) -> str:
    inv = "".join(invoke(n, "".join(element(k, v) for k, v in a.items())) for n, a in calls)
    return OPEN + inv + CLOSE


def _case(name: str, text: str, content: str | None, calls: list[Call], **kw: Any) -> Case:
    return Case(f"minimax_m3_{name}", text, content, calls, "minimax_m3", source=SOURCE, **kw)


def _negative(name: str, text: str, **kw: Any) -> Case:
    return Case(f"minimax_m3_{name}", text, text, [], None, source=SOURCE, **kw)


OBJ = {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {
    "type": "array", "items": {"type": "string"}}}}  # fmt: skip
NEST = (tool("order", {"user": {"type": "integer"}, "items": {"type": "array", "items": OBJ},
                       "meta": OBJ, "free": {"description": "anything"}}),)  # fmt: skip
ITEMS = [{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}]
ORDER: list[Call] = [
    ("order", {"user": 42, "items": ITEMS, "meta": {"id": 7, "tags": ["x"]}, "free": {"k": "v"}}),
]
RUN: list[Call] = [
    ("run", {"cmd": "ls -la", "opts": {"env": {"A": "1"}}, "force": True, "limit": None,
             "ratio": 0.5}),
]  # fmt: skip
UTC: list[Call] = [("get_time", {"tz": "UTC"})]
CODE = 'def f(x):\n    if x < 1:\n        return "<b>"\n'

CASES: list[Case] = [
    *block_basics(_case, render),
    _case("end_token", render(ONE) + "[e~[", None, ONE),
    _case("typed_values", render(RUN), None, RUN),
    _case("multiline_value", render([("write_file", {"path": "f.py", "content": CODE})]), None,
          [("write_file", {"path": "f.py", "content": CODE})]),
    # Objects nest, lists are `<item>`s (of objects too), an empty list is an empty element.
    _case("nested", render(ORDER), None, ORDER, tools=NEST),
    # The hosted model sometimes leaves the namespace off a closing tag.
    _case("bare_close", f'{OPEN}{NS}<invoke name="get_time">{NS}<tz>UTC</tz>{NS}</invoke>\n'
          f"{CLOSE}", None, UTC),
    # One undeclared or broken invoke does not take its valid siblings with it.
    _case("undeclared_sibling", OPEN + invoke("delete_all", element("x", "1"))
          + invoke("get_time", element("tz", "UTC")) + CLOSE,
          invoke("delete_all", element("x", "1")).strip(), UTC),
    _case("broken_sibling", OPEN + invoke("get_weather", f"{NS}<city>Paris")
          + invoke("get_time", element("tz", "UTC")) + CLOSE,
          invoke("get_weather", f"{NS}<city>Paris").strip(), UTC),
    _negative("marker_in_prose", f"M3 opens its calls with {NS}<tool_call> tags."),
    _negative("undeclared", render([("delete_all", {"path": "/"})])),
    _negative("cut_off", render(ONE)[: -len(CLOSE)]),
    _negative("unclosed_element", OPEN + invoke("get_weather", f"{NS}<city>Paris"
              + element("days", 3)) + CLOSE),
    _negative("text_beside_elements", OPEN + invoke("order", element("user", 1)
              + f"{NS}<meta>note{element('id', 7)}{NS}</meta>") + CLOSE, tools=NEST),
    _negative("elements_for_a_scalar", OPEN + invoke("get_weather", f"{NS}<city>"
              + element("name", "Paris") + f"{NS}</city>") + CLOSE),
    _negative("name_twice", OPEN + invoke("get_time", element("tz", "UTC")
              + element("tz", "CET")) + CLOSE),
]
