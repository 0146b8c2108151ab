"""Raw model outputs for tool-call recovery, as data: every format of BEHAVIOUR.md 4.1 with one and
two calls, leading prose and a think block; the real failure outputs quoted in
research/toolcall-formats.md; the parser traps; and negatives that must stay text.

Each case: name, text, the declared tools, the content expected after recovery, the calls
expected as (name, arguments dict), and the format label (None when nothing is recovered, in which
case the content is the text unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case
from tests.toolcall_case import j as _j
from tests.toolcall_families import family_cases


def _hermes(calls: list[Call]) -> str:
    return "\n".join(f'<tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</tool_call>'
                     for n, a in calls)


def _qwen_xml(calls: list[Call]) -> str:
    def params(args: dict[str, Any]) -> str:
        return "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return "\n".join(f"<tool_call>\n<function={n}>\n{params(a)}</function>\n</tool_call>"
                     for n, a in calls)


def _mistral_v13(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{_j(a)}" for n, a in calls)


def _mistral_array(calls: list[Call]) -> str:
    return "[TOOL_CALLS] " + _j([{"name": n, "arguments": a} for n, a in calls])


def _llama3(calls: list[Call]) -> str:
    return "<|python_tag|>" + "; ".join(_j({"name": n, "parameters": a}) for n, a in calls)


def _pythonic(calls: list[Call]) -> str:
    def kw(args: dict[str, Any]) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return "[" + ", ".join(f"{n}({kw(a)})" for n, a in calls) + "]"


def _deepseek_v3(calls: list[Call]) -> str:
    body = "\n".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}\n```<｜tool▁call▁end｜>"
        for n, a in calls)
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def _deepseek_v31(calls: list[Call]) -> str:
    body = "".join(f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>"
                   for n, a in calls)
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def _harmony(calls: list[Call]) -> str:
    return "".join(f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json"
                   f"<|message|>{_j(a)}<|call|>" for n, a in calls)


def _glm(calls: list[Call]) -> str:
    def pairs(args: dict[str, Any]) -> str:
        return "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
                       for k, v in args.items())
    return "".join(f"<tool_call>{n}\n{pairs(a)}</tool_call>" for n, a in calls)


def _glm47(calls: list[Call]) -> str:
    return "".join(
        f"<tool_call>{n}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
                                   for k, v in a.items()) + "</tool_call>"
        for n, a in calls)


def _granite(calls: list[Call]) -> str:
    return "<|tool_call|>" + _j([{"name": n, "arguments": a} for n, a in calls])


def _functools(calls: list[Call]) -> str:
    return "functools" + _j([{"name": n, "arguments": a} for n, a in calls])


def _gemma(calls: list[Call]) -> str:
    def args(a: dict[str, Any]) -> str:
        return ",".join(f"{k}:<escape>{v}<escape>" if isinstance(v, str) else f"{k}:{v}"
                        for k, v in a.items())
    return "".join(f"<start_function_call>call:{n}{{{args(a)}}}<end_function_call>"
                   for n, a in calls)


def _bare(calls: list[Call]) -> str:
    objs = [{"name": n, "arguments": a} for n, a in calls]
    return _j(objs[0] if len(objs) == 1 else objs)


def _fenced(calls: list[Call]) -> str:
    return "```json\n" + _bare(calls) + "\n```"


Renderer = Callable[[list[Call]], str]
# format label, renderer, whether prose may precede the calls (bare forms must be the whole reply)
FORMATS: list[tuple[str, str, Renderer, bool]] = [
    ("hermes", "hermes", _hermes, True),
    ("qwen3_coder", "qwen3_coder", _qwen_xml, True),
    ("mistral_v13", "mistral", _mistral_v13, True),
    ("mistral_array", "mistral", _mistral_array, True),
    ("llama3", "llama3", _llama3, True),
    ("pythonic", "pythonic", _pythonic, False),
    ("deepseek_v3", "deepseek", _deepseek_v3, True),
    ("deepseek_v31", "deepseek", _deepseek_v31, True),
    ("harmony", "harmony", _harmony, True),
    ("glm45", "glm", _glm, True),
    ("glm47", "glm", _glm47, True),
    ("granite", "granite", _granite, True),
    ("functools", "functools", _functools, True),
    ("functiongemma", "functiongemma", _gemma, True),
    ("bare_json", "bare_json", _bare, False),
    # One fenced block of calls may follow prose (issue 13, item 24); bare JSON may not.
    ("fenced_json", "fenced_json", _fenced, True),
]


def _generated() -> list[Case]:
    cases: list[Case] = []
    for label, fmt, render, prose_ok in FORMATS:
        for tag, calls in (("one", ONE), ("two", TWO)):
            cases.append(Case(f"{label}_{tag}", render(calls), None, calls, fmt))
        cases.append(Case(f"{label}_think", f"{THINK}\n\n{render(TWO)}", THINK, TWO, fmt))
        if prose_ok:
            cases.append(Case(f"{label}_prose", f"{PROSE}\n\n{render(TWO)}", PROSE, TWO, fmt))
    return cases


_REAL = [
    Case(
        "vllm22975_qwen3coder_in_content",
        "Let me check if there might be a base.py file that's not showing up. Since we know it's "
        "being imported, let me try to grep for the implementation of BaseService.\n\n<tool_call>\n"
        "<function=GrepTool>\n<parameter=pattern>\nclass BaseService\\(\n</parameter>\n"
        "<parameter=path>\n.\n</parameter>\n</function>\n</tool_call>",
        "Let me check if there might be a base.py file that's not showing up. Since we know it's "
        "being imported, let me try to grep for the implementation of BaseService.",
        [("GrepTool", {"pattern": "class BaseService\\(", "path": "."})], "qwen3_coder"),
    Case(
        "qwen3coder_multiline_code_value",
        "I'll write it.\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/a.py\n"
        "</parameter>\n<parameter=content>\ndef f():\n    return 1 < 2\n\n</parameter>\n"
        "</function>\n</tool_call>",
        "I'll write it.",
        [("write_file", {"path": "src/a.py", "content": "def f():\n    return 1 < 2\n"})],
        "qwen3_coder"),
    Case(
        "llamacpp_qwen3coder_spaces",
        " <tool_call>\n<function=get_time> <parameter=tz>UTC\n</parameter>\n</function> "
        "</tool_call>",
        None, [("get_time", {"tz": "UTC"})], "qwen3_coder"),
    Case("hermes742_open_tag_missing",
         '<think>plan</think>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>',
         "<think>plan</think>", [("get_time", {"tz": "UTC"})], "bare_json"),
    Case("hermes5867_bare_ollama",
         '{"name": "search", "arguments": {"query": "北京今天的天气"}}',
         None, [("search", {"query": "北京今天的天气"})], "bare_json"),
    Case("ollama13519_fenced_parameters",
         '```json\n{"name": "query_web_search", "parameters": {"query": "install ollama models"}}'
         "\n```",
         None, [("query_web_search", {"query": "install ollama models"})], "fenced_json"),
    Case("vllm11786_llama_wrapped_function",
         '{"type": "function", "function": {"name": "get_current_traffic", "parameters": '
         '{"location": "Sydney"}}}',
         None, [("get_current_traffic", {"location": "Sydney"})], "bare_json"),
    Case("lmstudio1979_lfm_pythonic",
         '<|tool_call_start|>[list_directory(path="desktop")]<|tool_call_end|>',
         None, [("list_directory", {"path": "desktop"})], "lfm2"),
    Case("lmstudio1528_glm47_parallel",
         "<tool_call>get_file_info<arg_key>path</arg_key><arg_value>file1.jpg</arg_value>"
         "</tool_call><tool_call>get_file_info<arg_key>path</arg_key><arg_value>file2.jpg"
         "</arg_value></tool_call>",
         None, [("get_file_info", {"path": "file1.jpg"}), ("get_file_info", {"path": "file2.jpg"})],
         "glm"),
    Case("rapidmlx480_harmony_stripped",
         'commentary to=functions.get_weather json{"city":"Paris"}',
         None, [("get_weather", {"city": "Paris"})], "harmony"),
    Case("harmony_spec_preamble",
         "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant"
         '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
         '{"city":"San Francisco"}<|call|>',
         "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>",
         [("get_weather", {"city": "San Francisco"})], "harmony"),
    Case("harmony_role_header",
         "<|channel|>analysis<|message|>Time.<|end|><|start|>assistant to=functions.get_time"
         '<|channel|>commentary json<|message|>{"tz": "Europe/Paris"}<|call|>',
         "<|channel|>analysis<|message|>Time.<|end|>",
         [("get_time", {"tz": "Europe/Paris"})], "harmony"),
    Case("lmstudio873_harmony_multiline",
         '<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{\n"path": '
         '"a.js",\n"content": "let x = {a: 1};"\n}',
         None, [("write_file", {"path": "a.js", "content": "let x = {a: 1};"})], "harmony"),
    Case("mistral_v03_single_quotes",
         "[TOOL_CALLS] [{'name': 'get_time', 'arguments': {'tz': 'UTC'}}]",
         None, [("get_time", {"tz": "UTC"})], "mistral"),
    Case("gemma4_ascii_quotes_22786",
         '<|tool_call>call:write_file{path: "notes.txt", content: "The user\'s name is John."}'
         "<tool_call|>",
         None, [("write_file", {"path": "notes.txt", "content": "The user's name is John."})],
         "functiongemma"),
    Case("llama_builtin_call",
         '<|python_tag|>search.call(query="weather in Paris")',
         None, [("search", {"query": "weather in Paris"})], "llama3"),
    Case("lmstudio_tool_request",
         '[TOOL_REQUEST]{"name": "get_weather", "arguments": {"city": "Leeds"}}[END_TOOL_REQUEST]',
         None, [("get_weather", {"city": "Leeds"})], "lmstudio"),
    Case("function_tag_json_35129",
         'Checking.\n<function=get_time>{"tz": "UTC"}</function>',
         "Checking.", [("get_time", {"tz": "UTC"})], "function_tag"),
    Case("bare_function_no_wrapper_17353",
         "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>",
         None, [("get_time", {"tz": "UTC"})], "qwen3_coder"),
    Case("deepseek_multiline_json",
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
         '{\n  "city": "Beijing",\n  "days": 2\n}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
         None, [("get_weather", {"city": "Beijing", "days": 2})], "deepseek"),
    # llama.cpp's "Generic" format for templates it does not know (toolcall-formats.md section 8)
    Case("llamacpp_generic_tool_call",
         '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}',
         None, ONE, "bare_json"),
    Case("llamacpp_generic_tool_calls",
         '{"tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}, "id": "0"}]}',
         None, [("get_time", {"tz": "UTC"})], "bare_json"),
    Case("functiongemma_stripped_residue",
         "call:get_weather{city:<escape>Paris<escape>,days:3}",
         None, [("get_weather", {"city": "Paris", "days": 3})], "functiongemma"),
]

# End-of-turn tokens a server left after the call it did not parse, one per format family
# (research/toolcall-formats.md: Llama 3.x <|eom_id|> after a built-in call and <|eot_id|> after
# a JSON one, Mistral </s>, DeepSeek <｜end▁of▁sentence｜>, harmony <|return|>/<|end|>; the
# families' templates for ChatML <|im_end|>, GLM <|observation|>, Gemma <end_of_turn>, Granite
# <|end_of_text|>, Llama 4 <|eom|>), and prose before one fenced call (issue 13, item 24).
END_OF_TURN = [
    Case("llama_builtin_call_eom",
         '<|python_tag|>search.call(query="weather in Paris")<|eom_id|>',
         None, [("search", {"query": "weather in Paris"})], "llama3"),
    Case("llama3_python_tag_json_eom",
         '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}'
         "<|eom_id|>",
         None, ONE, "llama3"),
    Case("llama3_python_tag_json_eot_then_prose",
         'Checking.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", '
         '"days": 3}}<|eot_id|>',
         "Checking.", ONE, "llama3"),
    Case("llama3_bare_json_eot",
         '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|eot_id|>',
         None, ONE, "bare_json"),
    Case("llama3_two_calls_semicolon_eot",
         '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}; '
         '{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}<|eot_id|>',
         None, TWO, "bare_json"),
    Case("llama4_pythonic_eom",
         '<|python_start|>[get_time(tz="UTC")]<|python_end|><|eom|>',
         None, [("get_time", {"tz": "UTC"})], "llama3"),
    Case("mistral_array_eos",
         '[TOOL_CALLS] [{"name": "get_time", "arguments": {"tz": "UTC"}}]</s>',
         None, [("get_time", {"tz": "UTC"})], "mistral"),
    Case("hermes_im_end",
         'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
         "<|im_end|>",
         "Sure.", [("get_time", {"tz": "UTC"})], "hermes"),
    Case("hermes_text_after_then_im_end",
         'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\nDone.'
         "<|im_end|>",
         "Sure.\nDone.", [("get_time", {})], "hermes"),
    Case("deepseek_v31_end_of_sentence",
         '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"tz": "UTC"}'
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
         None, [("get_time", {"tz": "UTC"})], "deepseek"),
    Case("harmony_call_then_return",
         '<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json'
         '<|message|>{"tz": "UTC"}<|call|><|return|>',
         None, [("get_time", {"tz": "UTC"})], "harmony"),
    Case("glm_observation",
         "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"
         "<|observation|>",
         None, [("get_time", {"tz": "UTC"})], "glm"),
    Case("functiongemma_end_of_turn",
         "<start_function_call>call:get_time{tz:<escape>UTC<escape>}<end_function_call>"
         "<start_function_response><end_of_turn>",
         None, [("get_time", {"tz": "UTC"})], "functiongemma"),
    Case("granite_end_of_text",
         '<|tool_call|>[{"name": "get_time", "arguments": {"tz": "UTC"}}]<|end_of_text|>',
         None, [("get_time", {"tz": "UTC"})], "granite"),
    Case("ollama13519_prose_then_fenced_parameters",
         "I'll check the weather.\n```json\n"
         '{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
         "I'll check the weather.", [("get_weather", {"city": "Paris"})], "fenced_json"),
    Case("prose_fenced_call_prose",
         'Checking.\n```json\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```\n'
         "I'll report back.",
         "Checking.\nI'll report back.", [("get_time", {"tz": "UTC"})], "fenced_json"),
    Case("prose_fenced_call_eot",
         'Checking: ```\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```<|eot_id|>',
         "Checking:", [("get_time", {"tz": "UTC"})], "fenced_json"),
    # Fences inside a bare call's arguments do not make the reply a fenced one.
    Case("bare_call_with_fences_in_its_arguments",
         '{"name": "write_file", "arguments": {"path": "a.md", "content": '
         '"```python\\nprint(1)\\n```"}}<|eot_id|>',
         None, [("write_file", {"path": "a.md", "content": "```python\nprint(1)\n```"})],
         "bare_json"),
    Case("prose_fenced_list_of_calls",
         "Both at once.\n\n```json\n"
         '[{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}, '
         '{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}]\n```',
         "Both at once.", TWO, "fenced_json"),
]

_TRAPS = [
    Case("literal_close_tag_in_string",
         '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.md", "content": '
         '"use </tool_call> to end"}}\n</tool_call>',
         None, [("write_file", {"path": "a.md", "content": "use </tool_call> to end"})],
         "hermes"),
    Case("multiline_json",
         '<tool_call>\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris",\n'
         '    "days": 3\n  }\n}\n</tool_call>',
         None, ONE, "hermes"),
    Case("nested_braces",
         '<tool_call>{"name": "run", "arguments": {"cmd": "x", "opts": {"a": {"b": [1, {"c": '
         '"}"}]}}}}</tool_call>',
         None, [("run", {"cmd": "x", "opts": {"a": {"b": [1, {"c": "}"}]}}})], "hermes"),
    Case("bracket_in_args_functools",
         'functools[{"name": "run", "arguments": {"cmd": "echo ]]"}}]',
         None, [("run", {"cmd": "echo ]]"})], "functools"),
    Case("same_tool_back_to_back_nothing",
         '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
         '{"name": "get_weather", "parameters": {"city": "Rome"}}',
         None, [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})], "llama3"),
    Case("same_tool_back_to_back_semicolon",
         '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
         '{"name": "get_weather", "parameters": {"city": "Rome"}}',
         None, [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})], "llama3"),
    Case("same_tool_back_to_back_newline_bare",
         '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
         '{"name": "get_weather", "arguments": {"city": "Rome"}}',
         None, [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})],
         "bare_json"),
    Case("two_objects_in_one_block",
         '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n'
         '{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>',
         None, [("get_time", {"tz": "UTC"}), ("get_time", {"tz": "CET"})], "hermes"),
    Case("arguments_as_json_string",
         '<tool_call>{"name": "get_time", "arguments": "{\\"tz\\": \\"UTC\\"}"}</tool_call>',
         None, [("get_time", {"tz": "UTC"})], "hermes"),
    Case("python_literals",
         "<tool_call>{'name': 'run', 'arguments': {'cmd': 'ls', 'force': True, 'limit': None}}"
         "</tool_call>",
         None, [("run", {"cmd": "ls", "force": True, "limit": None})], "hermes"),
    Case("pythonic_python_literals",
         "[run(cmd='x', opts={'a': [1, 2.5, \"b\"], 'c': False})]",
         None, [("run", {"cmd": "x", "opts": {"a": [1, 2.5, "b"], "c": False}})], "pythonic"),
    Case("qwen_typed_values",
         "<tool_call>\n<function=run>\n<parameter=cmd>\n42\n</parameter>\n<parameter=force>\n"
         "True\n</parameter>\n<parameter=limit>\nNone\n</parameter>\n<parameter=ratio>\n2.0\n"
         "</parameter>\n<parameter=opts>\n{\"a\": 1}\n</parameter>\n</function>\n</tool_call>",
         None, [("run", {"cmd": "42", "force": True, "limit": None, "ratio": 2,
                         "opts": {"a": 1}})], "qwen3_coder"),
    Case("qwen_literal_close_parameter_in_code",
         "<tool_call>\n<function=write_file>\n<parameter=path>\nx.xml\n</parameter>\n"
         "<parameter=content>\na</parameter>b\n</parameter>\n</function>\n</tool_call>",
         None, [("write_file", {"path": "x.xml", "content": "a</parameter>b"})], "qwen3_coder"),
    Case("text_after_calls_kept",
         'Checking.\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\nDone.',
         "Checking.\nDone.", [("get_time", {})], "hermes"),
    Case("empty_arguments_missing",
         '<tool_call>{"name": "get_time"}</tool_call>', None, [("get_time", {})], "hermes"),
    Case("args_alias", '<tool_call>{"name": "get_time", "args": {"tz": "UTC"}}</tool_call>',
         None, [("get_time", {"tz": "UTC"})], "hermes"),
    Case("hermes_arguments_first",
         '<tool_call>\n{"arguments": {"tz": "UTC"}, "name": "get_time"}\n</tool_call>',
         None, [("get_time", {"tz": "UTC"})], "hermes"),
    Case("deepseek_variant_underscores",
         '<｜tool_calls_begin｜><｜tool_call_begin｜>get_time<｜tool_sep｜>{"tz": "UTC"}'
         "<｜tool_call_end｜><｜tool_calls_end｜>",
         None, [("get_time", {"tz": "UTC"})], "deepseek"),
    Case("mistral_call_id_two",
         'Sure.[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{"tz": "UTC"}'
         '[TOOL_CALLS]get_time[CALL_ID]f5g6h7i8j[ARGS]{"tz": "CET"}',
         "Sure.", [("get_time", {"tz": "UTC"}), ("get_time", {"tz": "CET"})], "mistral"),
    Case("prose_mentions_brace_then_call",
         'Use {braces} carefully.\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
         "Use {braces} carefully.", [("get_time", {})], "hermes"),
]

# Truncated final call: the call is relayed with its raw, unparseable arguments (flagged).
TRUNCATED = Case(
    "truncated_final_call",
    '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "a", "content": "lo',
    None, [("get_time", {"tz": "UTC"})], "hermes")
TRUNCATED_RAW_ARGS = '{"path": "a", "content": "lo'

_NEGATIVES = [
    Case("prose_with_braces", "The answer is {mostly} sunny; use {x: 1} style.", None, [], None),
    Case("code_block_not_call",
         "Here is code:\n```python\ndef f(x):\n    return {'a': x}\n```\nDone.", None, [], None),
    Case("json_code_block_not_call",
         '```json\n{"users": [{"name": "Ann", "age": 3}]}\n```', None, [], None),
    Case("call_inside_think",
         '<think>maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>'
         "No tool needed.", None, [], None),
    Case("call_inside_unclosed_think",
         '<think>I could write <tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
         None, [], None),
    Case("bare_undeclared_tool", '{"name": "delete_all", "arguments": {"force": true}}',
         None, [], None),
    Case("pythonic_undeclared", "[delete_all(force=True)]", None, [], None),
    Case("numbers_list", "[1, 2, 3] are the numbers", None, [], None),
    Case("bracket_word", "[sunny] is the forecast.", None, [], None),
    Case("json_object_not_call", '{"city": "Paris", "days": 3}', None, [], None),
    Case("bare_call_followed_by_prose",
         '{"name": "get_time", "arguments": {}} is how you would call it.', None, [], None),
    Case("marker_mentioned_in_prose",
         "Models write <tool_call> tags when the parser is missing.", None, [], None),
    Case("plain_text", "Paris is sunny today, 21 degrees.\nEnjoy!", None, [], None),
    Case("two_fenced_blocks",
         '```json\n{"name": "get_time", "arguments": {}}\n```\nor\n```json\n'
         '{"name": "get_time", "arguments": {}}\n```', None, [], None),
    Case("stripped_residue_undeclared",
         "Then call:delete_all{force:true} as before.", None, [], None),
    Case("prose_fenced_json_not_a_call",
         'Here is the data:\n```json\n{"city": "Paris", "days": 3}\n```', None, [], None),
    Case("prose_fenced_undeclared_tool",
         'Calling it.\n```json\n{"name": "delete_all", "parameters": {"force": true}}\n```',
         None, [], None),
    Case("prose_two_fenced_calls",
         'Either\n```json\n{"name": "get_time", "arguments": {}}\n```\nor\n```json\n'
         '{"name": "get_time", "arguments": {}}\n```', None, [], None),
    Case("prose_inline_fence_then_fenced_call",
         'Wrap code in ``` fences.\n```json\n{"name": "get_time", "arguments": {}}\n```',
         None, [], None),
    Case("prose_fenced_code_then_prose",
         "Run this:\n```bash\nls -la\n```\nThen tell me.", None, [], None),
    Case("prose_fenced_call_shape_with_schema",
         'The tool is:\n```json\n{"name": "search", "parameters": {"type": "object", '
         '"properties": {"query": {"type": "string"}}}}\n```', None, [], None),
]

CASES: list[Case] = [*_generated(), *_REAL, *END_OF_TURN, *_TRAPS, *_NEGATIVES, *family_cases()]


def by_format() -> dict[str, int]:
    """Corpus size by expected format (None counted as "negative")."""
    counts: dict[str, int] = {}
    for case in [*CASES, TRUNCATED]:
        key = case.format or "negative"
        counts[key] = counts.get(key, 0) + 1
    return counts
