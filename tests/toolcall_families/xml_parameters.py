"""Qwen3-Coder's XML parameters (label qwen3_coder): where a value ends (a forgotten
`</parameter>`, closing tags and `<tool_call>` written inside code), which whitespace is the
value's, and how each value is typed by the tool's schema, union types included; a value JSON
cannot hold rejects its call and only that call.

Sources: the Qwen3-Coder chat template (`<parameter=K>\\nVALUE\\n</parameter>\\n`, quoted in
research/toolcall-formats.md section 1); vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py
and its qwen3coder parser's `_convert_param_value` (null, int, float, bool, JSON, literal_eval);
llama.cpp tests/test-chat.cpp Qwen3-Coder cases (inline values, spaces between tags).
"""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import PROSE, THINK, TOOLS, Call, Case, tool

QWEN = "Qwen3-Coder chat template; vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py"

# One tool whose parameters allow several types, in different orders.
TYPED = tool("typed", {
    "si": {"type": ["string", "integer"]},
    "is_": {"type": ["integer", "string"]},
    "so": {"type": ["string", "object"]},
    "os": {"anyOf": [{"type": "object"}, {"type": "string"}]},
    "ns": {"oneOf": [{"type": "number"}, {"type": "string"}]},
    "n": {"type": "number"},
    "i": {"type": "integer"},
    "b": {"type": ["boolean", "null"]},
    "s": {"type": "string"},
    "arr": {"type": "array"},
    "e": {"enum": [1, 2, 3]},
})  # fmt: skip
_TOOLS = (*TOOLS, TYPED)


def _xml(calls: list[tuple[str, dict[str, str]]]) -> str:
    """The template's layout, values written as given (already text)."""
    def params(args: dict[str, str]) -> str:
        return "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return "\n".join(f"<tool_call>\n<function={n}>\n{params(a)}</function>\n</tool_call>"
                     for n, a in calls)


def _case(name: str, args: dict[str, str], typed: dict[str, Any], **kw: Any) -> Case:
    call: list[Call] = [("typed", typed)]
    return Case(f"xml_parameters_{name}", _xml([("typed", args)]), None, call, "qwen3_coder",
                tools=_TOOLS, source=QWEN, **kw)


_TYPING = [
    # A string fits every text, so it is tried last whatever its place in the union.
    _case("union_first_type_that_fits",
          {"si": "42", "is_": "42", "so": '{"a": 1}', "os": '{"a": 1}', "ns": "2.5"},
          {"si": 42, "is_": 42, "so": {"a": 1}, "os": {"a": 1}, "ns": 2.5}),
    _case("union_falls_through_to_string",
          {"is_": "2 dollars", "os": "not {json", "ns": "about 3", "i": "3 apples"},
          {"is_": "2 dollars", "os": "not {json", "ns": "about 3", "i": "3 apples"}),
    _case("null_true_numbers",
          {"b": "null", "n": "1e3", "i": "7", "s": "null", "arr": "[1, true, null]", "e": "2"},
          {"b": None, "n": 1000, "i": 7, "s": "null", "arr": [1, True, None], "e": 2}),
    _case("python_literals", {"b": "True", "arr": "[1, 'x', None]", "i": "None"},
          {"b": True, "arr": [1, "x", None], "i": None}),
    _case("integer_takes_integral_float_only", {"i": "3.0", "is_": "3.5"},
          {"i": 3, "is_": "3.5"}),
    # NaN is a string where the schema allows one (after the number it does not fit).
    _case("non_finite_into_union_string", {"ns": "NaN", "is_": "Infinity"},
          {"ns": "NaN", "is_": "Infinity"}),
]


def _write(content: str) -> str:
    return ("<tool_call>\n<function=write_file>\n<parameter=path>\nx\n</parameter>\n"
            f"<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>")


def _wrote(content: str) -> list[Call]:
    return [("write_file", {"path": "x", "content": content})]


_ENDS = [
    Case("xml_parameters_close_forgotten_before_next_parameter",
         "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n<parameter=content>\n"
         "print(1)\n</parameter>\n</function>\n</tool_call>",
         None, [("write_file", {"path": "a.py", "content": "print(1)"})], "qwen3_coder",
         source=QWEN),
    Case("xml_parameters_close_forgotten_before_function_end",
         "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</function>\n</tool_call>",
         None, [("get_time", {"tz": "UTC"})], "qwen3_coder", source=QWEN),
    Case("xml_parameters_inline_values_spaces",
         "<function=get_weather> <parameter=city>Paris</parameter> <parameter=days>3"
         "</parameter> </function>", None, [("get_weather", {"city": "Paris", "days": 3})],
         "qwen3_coder", source="llama.cpp tests/test-chat.cpp Qwen3-Coder"),
    # Only the template's framing newlines go: the value's own blank lines and indent stay.
    Case("xml_parameters_whitespace_kept", _write("\n\n    indented\n\t\n"), None,
         _wrote("\n\n    indented\n\t\n"), "qwen3_coder", source=QWEN),
    Case("xml_parameters_closing_tags_in_code",
         _write("a</parameter>b</function>c</tool_call>d\n</parameter>x"), None,
         _wrote("a</parameter>b</function>c</tool_call>d\n</parameter>x"), "qwen3_coder"),
    Case("xml_parameters_tool_call_tag_in_code", _write("use <tool_call> and <|im_end|>"), None,
         _wrote("use <tool_call> and <|im_end|>"), "qwen3_coder"),
    Case("xml_parameters_inline_opener_in_code", _write('x = "<parameter=path>a"'), None,
         _wrote('x = "<parameter=path>a"'), "qwen3_coder"),
    # A call's own opener inside a line of the value is the value's text, not the next call.
    Case("xml_parameters_function_tag_in_code", _write('s = "<function=x>"\nt = 1'), None,
         _wrote('s = "<function=x>"\nt = 1'), "qwen3_coder", source="issue 18"),
    Case("xml_parameters_prose_think_end_token",
         f"{THINK}\n\n{PROSE}\n\n" + _write("ok") + "<|im_end|>", f"{THINK}\n\n{PROSE}",
         _wrote("ok"), "qwen3_coder", source=QWEN),
    # A number JSON cannot hold rejects its call, which stays text; the sibling is recovered.
    Case("xml_parameters_non_finite_rejects_only_its_call",
         "<tool_call>\n<function=run>\n<parameter=ratio>\n1e999\n</parameter>\n</function>\n"
         "</tool_call>\n" + _write("ok"),
         "<tool_call>\n<function=run>\n<parameter=ratio>\n1e999\n</parameter>\n</function>\n"
         "</tool_call>", _wrote("ok"), "qwen3_coder"),
]

_NEGATIVE = [
    Case("xml_parameters_non_finite_alone",
         "<tool_call>\n<function=run>\n<parameter=ratio>\nNaN\n</parameter>\n</function>\n"
         "</tool_call>", None, [], None),
    Case("xml_parameters_non_finite_in_array", _xml([("typed", {"arr": "[1, 1e999]"})]), None,
         [], None, tools=_TOOLS),
    Case("xml_parameters_undeclared",
         "<function=delete_all>\n<parameter=force>\ntrue\n</parameter>\n</function>", None, [],
         None),
    Case("xml_parameters_cut_off_stop",
         "<tool_call>\n<function=write_file>\n<parameter=content>\nhalf a fi", None, [], None),
]

CASES: list[Case] = [*_TYPING, *_ENDS, *_NEGATIVE]
