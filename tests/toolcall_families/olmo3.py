"""OLMo 3 (allenai/Olmo-3-*): Python-style calls, one a line, in `<function_calls>` (label
`olmo3`, proxy/toolcalls/formats/olmo3.py)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TOOLS, TWO, Call, Case, tool

SRC = "vLLM olmo3_tool_parser.py; Ollama model/parsers/olmo3_test.go; OLMo 3 chat template"
TEMPLATE = "OLMo 3 chat template (<|im_start|>/<|im_end|>, <|endoftext|> eos)"


def _kw(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def olmo3(calls: list[Call]) -> str:
    return "<function_calls>" + "\n".join(f"{n}({_kw(a)})" for n, a in calls) + "</function_calls>"


_CODE = 'def f(x):\n    return "<" + x\n'

_S = {"type": "string"}

CASES: list[Case] = [
    Case("olmo3_one", olmo3(ONE), None, ONE, "olmo3", source=SRC),
    Case("olmo3_two", olmo3(TWO), None, TWO, "olmo3", source=SRC),
    Case("olmo3_prose", f"{PROSE}\n\n{olmo3(TWO)}", PROSE, TWO, "olmo3", source=SRC),
    Case("olmo3_prose_glued", 'Let me check the weather.<function_calls>get_weather(city="NYC")'
         "</function_calls>", "Let me check the weather.", [("get_weather", {"city": "NYC"})],
         "olmo3", source="Ollama olmo3_test.go: content then tool call"),
    Case("olmo3_think", f"{THINK}\n\n{olmo3(TWO)}", THINK, TWO, "olmo3", source=SRC),
    Case("olmo3_prose_after", f"{olmo3(ONE)}\nI'll report back.", "I'll report back.", ONE,
         "olmo3", source=SRC),
    Case("olmo3_im_end", olmo3(ONE) + "<|im_end|>", None, ONE, "olmo3", source=TEMPLATE),
    Case("olmo3_endoftext", olmo3(ONE) + "\n<|endoftext|>", None, ONE, "olmo3", source=TEMPLATE),
    Case("olmo3_lines_in_own_lines",
         '<function_calls>\nget_weather(city="Paris", days=3)\nget_time(tz="Europe/Paris")\n'
         "</function_calls>", None, TWO, "olmo3", source=SRC),
    Case("olmo3_nested_quotes_newlines",
         f"<function_calls>write_file(path='src/a.py', content={_CODE!r})\n"
         "run(cmd='echo \"hi\"', opts={'env': {'A': '1'}, 'args': [1, 2.5]}, ratio=0.5)"
         "</function_calls>",
         None, [("write_file", {"path": "src/a.py", "content": _CODE}),
                ("run", {"cmd": 'echo "hi"', "opts": {"env": {"A": "1"}, "args": [1, 2.5]},
                         "ratio": 0.5})], "olmo3", source=SRC),
    Case("olmo3_dict_argument_over_lines",
         '<function_calls>run(cmd="ls",\n    opts={"all": True,\n          "depth": 2})\n'
         "</function_calls>",
         None, [("run", {"cmd": "ls", "opts": {"all": True, "depth": 2}})], "olmo3",
         source="Ollama olmo3_test.go: dict and nested dict arguments"),
    Case("olmo3_no_arguments", "<function_calls>get_time()</function_calls>", None,
         [("get_time", {})], "olmo3", source="Ollama olmo3_test.go: no arguments"),
    Case("olmo3_json_list", '<function_calls>[{"name": "get_time", "arguments": {"tz": "UTC"}}]'
         "</function_calls>", None, [("get_time", {"tz": "UTC"})], "olmo3",
         source="OLMo 3 research prompts: <function_calls>[{name, arguments}]</function_calls>"),
    Case("olmo3_invalid_line_keeps_siblings",
         '<function_calls>\nget_weather(city=Paris)\nget_time(tz="UTC")\n</function_calls>',
         "get_weather(city=Paris)", [("get_time", {"tz": "UTC"})], "olmo3", source=SRC),
    Case("olmo3_undeclared_line_keeps_siblings",
         '<function_calls>\nbook_flight(to="NYC")\nget_time(tz="UTC")\n</function_calls>',
         'book_flight(to="NYC")', [("get_time", {"tz": "UTC"})], "olmo3", source=SRC),
    Case("olmo3_two_wrappers", f"{olmo3(ONE)}\nThen the time.\n{olmo3(TWO[1:])}",
         "Then the time.", TWO, "olmo3", source=SRC),
    Case("olmo3_python_keyword_as_argument_name",
         '<function_calls>book_flight(from="SFO", to="NYC")</function_calls>', None,
         [("book_flight", {"from": "SFO", "to": "NYC"})], "olmo3",
         tools=(*TOOLS, tool("book_flight", {"from": _S, "to": _S})),
         source="Ollama model/parsers/olmo3_test.go: tool call with multiple arguments"),
    # Negatives: the text stays as it was.
    Case("olmo3_marker_in_prose",
         "OLMo wraps its calls in <function_calls></function_calls> tags, one call a line.",
         "OLMo wraps its calls in <function_calls></function_calls> tags, one call a line.",
         [], None, source=SRC),
    Case("olmo3_not_a_call", "<function_calls>not a function call</function_calls>",
         "<function_calls>not a function call</function_calls>", [], None,
         source="Ollama olmo3_test.go: malformed tool call"),
    Case("olmo3_undeclared", '<function_calls>book_flight(to="NYC")</function_calls>',
         '<function_calls>book_flight(to="NYC")</function_calls>', [], None, source=SRC),
    Case("olmo3_cut_off", '<function_calls>get_weather(city="San Fra',
         '<function_calls>get_weather(city="San Fra', [], None,
         source="Ollama olmo3_test.go: incomplete tool call"),
]
