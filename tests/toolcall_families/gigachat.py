"""GigaChat 3 and 3.1 cases: a `{"name", "arguments"}` object after GigaChat 3's
`<|message_sep|>\\n\\nfunction call<|role_sep|>\\n` header or GigaChat 3.1's `<|function_call|>`
(label `gigachat`, proxy/toolcalls/formats/gigachat.py)."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, Call, Case, j

SGLANG = "SGLang python/sglang/srt/function_call/gigachat3_detector.py and its tests"
LLAMA = "llama.cpp tests/test-chat.cpp, GigaChat3-10B-A1.8B and GigaChat3.1-10B-A1.8B"
HEADER = "<|message_sep|>\n\nfunction call<|role_sep|>\n"
V31 = "<|function_call|>"


def call(calls: list[Call]) -> str:
    ((name, args),) = calls
    return j({"name": name, "arguments": args})


TIME: list[Call] = [("get_time", {})]
QUOTED: list[Call] = [("write_file", {"path": "a.md", "content": f"{V31} and {HEADER}"})]
BAD_ARGS = '{"name": "get_weather", "arguments": {invalid json}}'

CASES: list[Case] = [
    Case("gigachat3_call", HEADER + call(ONE), None, ONE, "gigachat", source=SGLANG),
    Case("gigachat3_prose_before", PROSE + HEADER + call(ONE), PROSE, ONE, "gigachat",
         source=SGLANG),
    Case("gigachat3_eos_after", HEADER + call(ONE) + "</s>", None, ONE, "gigachat",
         source=SGLANG),
    Case("gigachat3_empty_arguments", HEADER + call(TIME), None, TIME, "gigachat", source=SGLANG),
    Case("gigachat3_header_without_separator", "function call<|role_sep|>\n" + call(ONE), None,
         ONE, "gigachat"),
    Case("gigachat3_after_think", f"{THINK}\n{HEADER}{call(ONE)}", THINK, ONE, "gigachat"),
    Case("gigachat3_markers_inside_string", HEADER + call(QUOTED), None, QUOTED, "gigachat"),
    Case("gigachat31_call", V31 + call(ONE), None, ONE, "gigachat", source=LLAMA),
    Case("gigachat31_prose_before", "Hello, world!\nWhat's up?" + V31 + call(ONE),
         "Hello, world!\nWhat's up?", ONE, "gigachat", source=LLAMA),
    Case("gigachat31_space_after_token", f"{PROSE}\n{V31}\n{call(ONE)}", PROSE, ONE, "gigachat"),
    # Negatives
    Case("gigachat3_invalid_json", HEADER + BAD_ARGS, None, [], None, source=SGLANG),
    Case("gigachat31_invalid_json", V31 + BAD_ARGS, None, [], None),
    Case("gigachat3_undeclared", HEADER + call([("delete_all", {"force": True})]), None, [],
         None),
    Case("gigachat3_header_then_prose", HEADER + "I cannot call a tool for that.", None, [],
         None),
    Case("gigachat_separator_in_prose", "GigaChat ends messages with <|message_sep|> tokens.",
         None, [], None),
    Case("gigachat31_cut_off_stop",
         V31 + '{"name": "get_weather", "arguments": {"city": "Pa', None, [], None),
    Case("gigachat31_object_not_a_call", V31 + j({"city": "Paris"}), None, [], None),
]
