"""DeepSeek V3.2's DSML blocks (proxy/toolcalls/formats/dsml.py): `<｜DSML｜function_calls>` of
`<｜DSML｜invoke name=..>` with `<｜DSML｜parameter name=.. string="true|false">` values, with the
fullwidth bar and the ASCII `|`; one and two calls, prose and a think block before, the
`<｜end▁of▁sentence｜>` end token, JSON and raw-string values, the edges of issue 18 and the
negatives; V4's `<｜DSML｜tool_calls>` wrapper, an invoke holding a JSON object, and a lone
`arguments` parameter wrapping the arguments."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, block_basics, tool
from tests.toolcall_case import j as _j

SOURCE = (
    "vLLM vllm/tool_parsers/deepseekv32_tool_parser.py (docstring) and "
    "tests/tool_parsers/test_deepseekv32_tool_parser.py; research/toolcall-formats.md section 6"
)
W = "｜"


def _m(bar: str) -> str:
    return f"{bar}DSML{bar}"


def param(k: str, v: Any, bar: str = W) -> str:
    # The encoder writes strings raw with string="true", anything else as JSON with "false".
    raw, flag = (v, "true") if isinstance(v, str) else (_j(v), "false")
    return f'<{_m(bar)}parameter name="{k}" string="{flag}">{raw}</{_m(bar)}parameter>\n'


def invoke(name: str, args: dict[str, Any], bar: str = W) -> str:
    body = "".join(param(k, v, bar) for k, v in args.items())
    return f'<{_m(bar)}invoke name="{name}">\n{body}</{_m(bar)}invoke>\n'


def render(calls: list[Call], bar: str = W, wrapper: str = "function_calls") -> str:
    inner = "".join(invoke(n, a, bar) for n, a in calls)
    return f"<{_m(bar)}{wrapper}>\n{inner}</{_m(bar)}{wrapper}>"


def json_invoke(name: str, body: str) -> str:
    """An invoke holding a JSON object instead of parameters (SGLang's JSON-format case)."""
    return f'<{_m(W)}invoke name="{name}">\n{body}\n</{_m(W)}invoke>\n'


def _case(name: str, text: str, content: str | None, calls: list[Call], **kw: Any) -> Case:
    return Case(f"dsml_{name}", text, content, calls, "dsml", source=SOURCE, **kw)


def _negative(name: str, text: str, **kw: Any) -> Case:
    return Case(f"dsml_{name}", text, text, [], None, source=SOURCE, **kw)


def _block(body: str) -> str:
    return f"<{_m(W)}function_calls>\n{body}</{_m(W)}function_calls>"


P, PE = f"<{_m(W)}parameter name=", f"</{_m(W)}parameter>"
INV, IE = f"<{_m(W)}invoke name=", f"</{_m(W)}invoke>"
RUN: list[Call] = [
    ("run", {"cmd": 'grep -n "a\\"b" x', "opts": {"env": {"A": "1"}, "dirs": ["a", "b"]},
             "force": True, "limit": None, "ratio": 0.25}),
]  # fmt: skip
CODE = 'if a < b:\n    print("</x>")\n\n\treturn 1\n'
PAY = (tool("pay", {"amount": {"type": ["string", "integer"]}, "note": {"type": "string"}}),)
FREE = (tool("note", {"data": {"description": "anything"}}),)

CASES: list[Case] = [
    *block_basics(_case, render),
    _case("end_token", render(TWO) + "<｜end▁of▁sentence｜>", None, TWO),
    _case("ascii_bar", render(TWO, "|"), None, TWO),
    _case("ascii_bar_prose", f"{PROSE}\n{render(ONE, '|')}", PROSE, ONE),
    _case("typed_values", render(RUN), None, RUN),
    # string="true" is the text as written, whatever the schema; "false" is JSON.
    _case("string_true_kept", _block(f'{INV}"get_weather">\n{P}"city" string="true"> Paris </'
          f'{_m(W)}parameter>\n{P}"days" string="false">3{PE}\n{IE}\n'), None,
          [("get_weather", {"city": " Paris ", "days": 3})]),
    _case("string_false_json", _block(f'{INV}"run">\n{P}"opts" string="false">{{"a": [1, {{"b": '
          f'"}}"}}]}}{PE}\n{P}"force" string="false">false{PE}\n{P}"limit" string="false">7{PE}\n'
          f"{IE}\n"), None,
          [("run", {"opts": {"a": [1, {"b": "}"}]}, "force": False, "limit": 7})]),
    _case("string_false_untyped", _block(f'{INV}"note">\n{P}"data" string="false">[1, "two"]{PE}\n'
          f"{IE}\n"), None, [("note", {"data": [1, "two"]})], tools=FREE),
    _case("no_string_attribute", _block(f'{INV}"get_weather">\n{P}"city">Paris{PE}\n{P}"days">3'
          f"{PE}\n{IE}\n"), None, ONE),
    _case("multiline_value", render([("write_file", {"path": "a.py", "content": CODE})]), None,
          [("write_file", {"path": "a.py", "content": CODE})]),
    _case("missing_close_before_parameter", _block(f'{INV}"get_weather">\n{P}"city" string="true">'
          f'Paris\n{P}"days" string="false">3{PE}\n{IE}\n'), None, ONE),
    _case("missing_close_before_invoke_end", _block(f'{INV}"get_time">\n{P}"tz" string="true">UTC\n'
          f"{IE}\n"), None, [("get_time", {"tz": "UTC"})]),
    _case("literal_close_in_value", _block(f'{INV}"write_file">\n{P}"path" string="true">d.md{PE}\n'
          f'{P}"content" string="true">End tags with {PE} and {IE} here.{PE}\n{IE}\n'), None,
          [("write_file", {"path": "d.md", "content": f"End tags with {PE} and {IE} here."})]),
    # The bad invoke's text stays; its sibling is recovered.
    _case("undeclared_sibling", _block(invoke("delete_all", {"x": "1"}) + invoke(*TWO[1])),
          invoke("delete_all", {"x": "1"}).strip(), TWO[1:]),
    _case("broken_sibling", _block(f'{INV}"get_weather"\n{P}"city" string="true">Paris{PE}\n{IE}\n'
          + invoke(*TWO[1])), f'{INV}"get_weather"\n{P}"city" string="true">Paris{PE}\n{IE}',
          TWO[1:]),
    _case("no_parameters", _block(f'{INV}"get_time">\n{IE}\n'), None, [("get_time", {})]),
    _case("union_type_text", _block(f'{INV}"pay">\n{P}"amount" string="false">2 dollars{PE}\n'
          f"{IE}\n"), None, [("pay", {"amount": "2 dollars"})], tools=PAY),
    _case("bare_invoke", f"{PROSE}\n" + invoke(*TWO[1]), PROSE, TWO[1:]),
    # DeepSeek V4 wraps the same invokes in `tool_calls`: the wrapper goes with the calls.
    _case("v4_wrapper", render(TWO, wrapper="tool_calls"), None, TWO),
    _case("v4_wrapper_think", f"{THINK}\n\n{render(ONE, wrapper='tool_calls')}", THINK, ONE),
    _case("v4_wrapper_ascii_prose", f"{PROSE}\n{render(TWO, '|', 'tool_calls')}", PROSE, TWO),
    # A JSON object as an invoke's body is its arguments, as written.
    _case("json_body", _block(json_invoke("get_weather", _j(ONE[0][1]))
          + json_invoke("get_time", '{\n  "tz": "Europe/Paris"\n}')), None, TWO),
    # A lone `arguments` the schema does not declare, holding the schema's fields, wraps them.
    _case("arguments_wrapper", _block(f'{INV}"get_weather">\n{P}"arguments" string="false">'
          f'{_j(ONE[0][1])}{PE}\n{IE}\n'), None, ONE),
    # Keys the schema does not declare: not a wrapper, the parameter is taken as written.
    _case("arguments_not_a_wrapper", _block(f'{INV}"note">\n{P}"arguments" string="false">'
          f'{{"x": 1}}{PE}\n{IE}\n'), None, [("note", {"arguments": {"x": 1}})], tools=FREE),
    _negative("marker_in_prose", f"V3.2 opens its calls with <{_m(W)}function_calls> blocks."),
    _negative("undeclared", render([("delete_all", {"path": "/"})])),
    _negative("bare_undeclared", invoke("delete_all", {"path": "/"}, "|")),
    _negative("cut_off", f"<{_m(W)}function_calls>\n{INV}\"get_weather\">\n"
              f'{P}"city" string="true">Paris{PE}\n'),
    _negative("cut_off_ascii", render(ONE, "|")[:-40]),
    _negative("v4_undeclared", render([("delete_all", {"path": "/"})], wrapper="tool_calls")),
    # An invoke whose only body is text that is no JSON object says nothing readable: `{}`
    # would be a wrong call, so it stays text.
    _negative("text_body", _block(json_invoke("get_time", "the time in Paris, please"))),
    _negative("json_body_broken", _block(json_invoke("get_weather", '{"city": "Paris", 3}'))),
    _negative("json_body_array", _block(json_invoke("get_weather", '["Paris", 3]'))),
]
