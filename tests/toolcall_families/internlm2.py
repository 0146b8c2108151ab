"""InternLM2 / 2.5 (internlm/internlm2_5-7b-chat): `<|action_start|><|plugin|>` then one JSON
`{"name", "parameters"}` object, then `<|action_end|>` (label `internlm2`, a line of
proxy/toolcalls/formats/tagged.py)."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, j

SRC = "vLLM internlm2_tool_parser.py (`parameters`, then `arguments`)"
SGLANG = "SGLang test/registered/unit/function_call/test_internlm_detector.py"
TEMPLATE = "InternLM2.5 chat template (<|im_end|> ends the turn)"


def internlm2(calls: list[Call]) -> str:
    return "".join(f"<|action_start|><|plugin|>\n{j({'name': n, 'parameters': a})}<|action_end|>"
                   for n, a in calls)


_CODE = 'def f(x):\n    return "<" + x\n'

CASES: list[Case] = [
    Case("internlm2_one", internlm2(ONE), None, ONE, "internlm2", source=SRC),
    Case("internlm2_two", internlm2(TWO), None, TWO, "internlm2", source=SRC),
    Case("internlm2_prose", f"{PROSE}{internlm2(ONE)}", PROSE, ONE, "internlm2", source=SRC),
    Case("internlm2_think", f"{THINK}\n{internlm2(TWO)}", THINK, TWO, "internlm2", source=SRC),
    Case("internlm2_im_end", internlm2(ONE) + "<|im_end|>", None, ONE, "internlm2",
         source=TEMPLATE),
    Case("internlm2_arguments_key",
         '<|action_start|><|plugin|>\n{"name": "get_time", "arguments": {"tz": "UTC"}}'
         "<|action_end|>", None, [("get_time", {"tz": "UTC"})], "internlm2", source=SRC),
    Case("internlm2_nested_quotes_newlines",
         internlm2([("write_file", {"path": "a.py", "content": _CODE}),
                    ("run", {"cmd": 'echo "}"', "opts": {"a": [1, {"b": None}]}})]),
         None, [("write_file", {"path": "a.py", "content": _CODE}),
                ("run", {"cmd": 'echo "}"', "opts": {"a": [1, {"b": None}]}})],
         "internlm2", source=SRC),
    Case("internlm2_prose_after", internlm2(ONE) + "\nLet me know.", "Let me know.", ONE,
         "internlm2", source=SRC),
    Case("internlm2_undeclared_keeps_sibling",
         internlm2([("book_flight", {"to": "NYC"}), *TWO[1:]]),
         '<|action_start|><|plugin|>\n{"name": "book_flight", "parameters": {"to": "NYC"}}'
         "<|action_end|>", TWO[1:], "internlm2", source=SRC),
    # Whitespace between the two tokens (SGLang's InternLM detector cases).
    Case("internlm2_space_between_tokens",
         '<|action_start|> <|plugin|>\n{"name": "get_time", "parameters": {"tz": "UTC"}}'
         "<|action_end|>", None, [("get_time", {"tz": "UTC"})], "internlm2", source=SGLANG),
    Case("internlm2_newline_between_tokens",
         f"{PROSE}<|action_start|>\n<|plugin|>\n"
         + j({"name": "get_time", "parameters": {"tz": "UTC"}}) + "<|action_end|>", PROSE,
         [("get_time", {"tz": "UTC"})], "internlm2", source=SGLANG),
    # Negatives: the text stays as it was.
    Case("internlm2_space_between_tokens_no_json",
         "hi <|action_start|> <|plugin|>get_weather('paris')", None, [], None, source=SGLANG),
    Case("internlm2_marker_in_prose",
         "InternLM marks a plugin call with <|action_start|><|plugin|> and a JSON object.",
         "InternLM marks a plugin call with <|action_start|><|plugin|> and a JSON object.",
         [], None, source=SRC),
    Case("internlm2_undeclared", internlm2([("book_flight", {"to": "NYC"})]),
         internlm2([("book_flight", {"to": "NYC"})]), [], None, source=SRC),
    Case("internlm2_cut_off",
         '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Par',
         '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Par',
         [], None, source=SRC),
    Case("internlm2_interpreter_is_not_a_call",
         "<|action_start|><|interpreter|>\n```python\nprint(1)\n```<|action_end|>",
         "<|action_start|><|interpreter|>\n```python\nprint(1)\n```<|action_end|>", [], None,
         source="InternLM2 chat format: <|interpreter|> actions are code, not tool calls"),
]
