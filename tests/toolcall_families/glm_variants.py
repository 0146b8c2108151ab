"""GLM 4.5-4.7's `<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>`
variants (label glm): the 4.5/4.6 layout with newlines, 4.7's without, calls without arguments,
4.7's reply that opens inside the think block (its generation prompt ends with `<think>`), and
the edges of where a value ends and how it is typed.

Sources: llama.cpp models/templates glm_4_5.jinja, GLM-4.6.jinja, GLM-4.7-Flash.jinja; vLLM
tests/tool_parsers/test_glm47_moe_tool_parser.py (zero_arg_inline, zero_arg_newline,
args_same_line, content_before, multiple) and test_glm4_moe_tool_parser.py.
"""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case

T46 = "llama.cpp models/templates/GLM-4.6.jinja"
T47 = "llama.cpp models/templates/GLM-4.7-Flash.jinja"
VLLM47 = "vLLM tests/tool_parsers/test_glm47_moe_tool_parser.py"


def _glm46(calls: list[Call]) -> str:
    # The template's layout: '\n<tool_call>' + name, then "\n<arg_key>k</arg_key>\n<arg_value>v
    # </arg_value>" per argument, then "\n</tool_call>".
    def pairs(args: dict[str, object]) -> str:
        return "".join(f"\n<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>"
                       for k, v in args.items())
    return "".join(f"\n<tool_call>{n}{pairs(a)}\n</tool_call>" for n, a in calls)


def _glm47(calls: list[Call]) -> str:
    return "".join(
        f"<tool_call>{n}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
                                   for k, v in a.items()) + "</tool_call>"
        for n, a in calls)


_CODE = "def f():\n    return '</arg_value>'\n\n"
_WRITE = [("write_file", {"path": "a.py", "content": _CODE})]

_POSITIVE = [
    Case("glm_variants_46_layout_two", _glm46(TWO), None, TWO, "glm", source=T46),
    Case("glm_variants_46_prose", PROSE + _glm46(TWO), PROSE, TWO, "glm", source=T46),
    Case("glm_variants_47_prose_no_space", "Checking." + _glm47(ONE), "Checking.", ONE, "glm",
         source=VLLM47),
    Case("glm_variants_zero_args_inline", "<tool_call>get_time</tool_call>", None,
         [("get_time", {})], "glm", source=VLLM47),
    Case("glm_variants_zero_args_newline", "<tool_call>get_time\n</tool_call>", None,
         [("get_time", {})], "glm", source=VLLM47),
    Case("glm_variants_zero_args_then_call", "<tool_call>get_time</tool_call>" + _glm47(ONE),
         None, [("get_time", {}), *ONE], "glm", source=T47),
    Case("glm_variants_whitespace_then_call", "  \n  <tool_call>get_time</tool_call>", None,
         [("get_time", {})], "glm", source=VLLM47),
    # GLM-4.7's generation prompt ends with `<think>`: the reply opens inside it.
    Case("glm_variants_47_think_without_opener",
         "The user wants the weather.</think>" + _glm47(ONE),
         "The user wants the weather.</think>", ONE, "glm", source=T47),
    Case("glm_variants_think_46", f"{THINK}{_glm46(ONE)}", THINK, ONE, "glm", source=T46),
    Case("glm_variants_observation", _glm47(TWO) + "<|observation|>", None, TWO, "glm",
         source=T47),
    Case("glm_variants_mixed_layouts", _glm46(ONE) + _glm47(TWO[1:]), None, TWO, "glm"),
    # Non-string values are written `v | tojson`; strings as they are, whitespace and all.
    Case("glm_variants_typed_values",
         _glm47([("run", {"cmd": " ls -la ", "opts": '{"a": {"b": [1, "x"]}}', "force": "true",
                          "limit": "null", "ratio": "0.5"})]),
         None, [("run", {"cmd": " ls -la ", "opts": {"a": {"b": [1, "x"]}}, "force": True,
                         "limit": None, "ratio": 0.5})], "glm", source=T47),
    Case("glm_variants_multiline_code_kept", _glm47(_WRITE), None, _WRITE, "glm", source=T47),
    # Closing tags inside a value (code) stay in it: only a close followed by a tag is one.
    Case("glm_variants_literal_tags_in_value",
         _glm47([("write_file", {"path": "x.md", "content": "a</arg_value>b </tool_call> c"})]),
         None, [("write_file", {"path": "x.md", "content": "a</arg_value>b </tool_call> c"})],
         "glm"),
    Case("glm_variants_value_close_forgotten",
         "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris<arg_key>days</arg_key>"
         "<arg_value>3</arg_value></tool_call>", None, ONE, "glm"),
    Case("glm_variants_value_close_forgotten_at_end",
         "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</tool_call>", None,
         [("get_time", {"tz": "UTC"})], "glm"),
    # A number JSON cannot hold rejects its call, which stays text; its sibling is recovered.
    Case("glm_variants_non_finite_rejects_only_its_call",
         "<tool_call>run<arg_key>ratio</arg_key><arg_value>NaN</arg_value></tool_call>"
         + _glm47(ONE),
         "<tool_call>run<arg_key>ratio</arg_key><arg_value>NaN</arg_value></tool_call>", ONE,
         "glm"),
    # A forgotten `<arg_value>` (Ollama's GLM-4.6 parser mends it), and an object value written
    # JSON-escaped (SGLang's glm4_moe tests).
    Case("glm_variants_46_unopened_value",
         "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis</arg_value>\n"
         "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", None, ONE, "glm",
         source="Ollama model/parsers/glm46_test.go: unopened arg_value after arg_key"),
    Case("glm_variants_47_escaped_json_value",
         '<tool_call>run<arg_key>opts</arg_key><arg_value>{\\"dir\\": \\"C:\\\\\\\\tmp\\"}'
         "</arg_value></tool_call>", None, [("run", {"opts": {"dir": "C:\\tmp"}})], "glm",
         source="SGLang test/registered/function_call glm47 array escaped JSON"),
    # The whole call written JSON-escaped: `\n` as two characters between the tags.
    Case("glm_variants_escaped_newlines_between_tags",
         "<tool_call>get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>\\n"
         "<arg_key>days</arg_key>\\n<arg_value>3</arg_value>\\n</tool_call>", None, ONE, "glm",
         source="SGLang test/registered/function_call glm45 array escaped JSON literal newline"),
    # The name on the wrapper's first line, the arguments one JSON object (Poolside Laguna).
    Case("glm_variants_name_line_json_arguments",
         'Checking.\n<tool_call>get_weather\n{"city": "Paris", "days": 3}\n</tool_call>',
         "Checking.", ONE, "glm",
         source="Ollama model/parsers/laguna_test.go: name line then JSON arguments"),
]

_NEGATIVE = [
    Case("glm_variants_undeclared", "<tool_call>delete_all</tool_call>", None, [], None,
         source=VLLM47),
    Case("glm_variants_cut_off_stop",
         "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UT", None, [], None),
    Case("glm_variants_name_line_json_undeclared",
         '<tool_call>delete_all\n{"force": true}</tool_call>', None, [], None),
    Case("glm_variants_marker_in_prose", "Wrap calls as <tool_call>NAME</tool_call> tags.", None,
         [], None),
    Case("glm_variants_non_finite_alone",
         "<tool_call>run<arg_key>ratio</arg_key><arg_value>1e999</arg_value></tool_call>", None,
         [], None),
    Case("glm_variants_inside_think",
         "<think>maybe <tool_call>get_time</tool_call></think>No tool needed.", None, [], None),
]

CASES: list[Case] = [*_POSITIVE, *_NEGATIVE]
