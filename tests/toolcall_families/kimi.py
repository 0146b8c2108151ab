"""Kimi K2 / K2-Thinking / K2.5 (`kimi_k2`) and Kimi K3 XTML (`kimi_k3`) cases
(proxy/toolcalls/formats/kimi.py)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, j

K2_TEMPLATE = "llama.cpp models/templates/moonshotai-Kimi-K2.jinja, Kimi-K2-Thinking.jinja"
K2_PARSER = ("vLLM vllm/tool_parsers/kimi_k2_tool_parser.py, "
             "tests/tool_parsers/test_kimi_k2_tool_parser.py")
K3 = "llama.cpp models/templates/Kimi-K3.jinja; vLLM vllm/tool_parsers/kimi_k3_tool_parser.py"

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def call(name: str, args: dict[str, Any] | str, idx: int = 0, prefix: str = "functions.") -> str:
    body = args if isinstance(args, str) else j(args)
    return (f"<|tool_call_begin|>{prefix}{name}:{idx}<|tool_call_argument_begin|>{body}"
            "<|tool_call_end|>")


def k2(calls: list[Call]) -> str:
    return BEGIN + "".join(call(n, a, k) for k, (n, a) in enumerate(calls)) + END


def k3_arg(key: str, value: Any) -> str:
    kind = {str: "string", int: "number", float: "number", bool: "boolean", dict: "object",
            list: "array"}[type(value)]
    text = value if isinstance(value, str) else j(value)
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{text}<|close|>argument<|sep|>'


def k3_call(name: str, args: dict[str, Any], idx: int = 1) -> str:
    body = "".join(k3_arg(k, v) for k, v in args.items())
    return f'<|open|>call tool="{name}" index="{idx}"<|sep|>{body}<|close|>call<|sep|>'


def k3(calls: list[Call], response: str = "") -> str:
    body = "".join(k3_call(n, a, k + 1) for k, (n, a) in enumerate(calls))
    return (f"{response}<|close|>response<|sep|><|open|>tools<|sep|>{body}<|close|>tools<|sep|>"
            "<|close|>message<|sep|><|end_of_msg|>")


NESTED: Call = ("run", {"cmd": 'echo "hi"\nls -la', "opts": {"env": {"A": "1"}, "n": [1, 2]},
                        "force": True})
CUT = (BEGIN + "<|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>"
       '{"path": "a", "content": "lo')

CASES: list[Case] = [
    Case("kimi_k2_one", k2(ONE) + "<|im_end|>", None, ONE, "kimi_k2", source=K2_TEMPLATE),
    Case("kimi_k2_two", k2(TWO), None, TWO, "kimi_k2", source=K2_TEMPLATE),
    Case("kimi_k2_prose", f"{PROSE} {k2(TWO)}", PROSE, TWO, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_think", f"{THINK}{k2(TWO)}<|im_end|>", THINK, TWO, "kimi_k2",
         source=K2_TEMPLATE),
    Case("kimi_k2_bare_calls_no_section", PROSE + "\n" + call(*ONE[0]) + call(*TWO[1], 1),
         PROSE, TWO, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_name_idx_without_prefix", BEGIN + call(*ONE[0], prefix="") + END,
         None, ONE, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_plain_name",
         BEGIN + '<|tool_call_begin|>get_time<|tool_call_argument_begin|>{"tz": "UTC"}'
         "<|tool_call_end|>" + END, None, [("get_time", {"tz": "UTC"})], "kimi_k2",
         source="llama.cpp common/chat-parsers kimi_k2 (function_name form)"),
    Case("kimi_k2_singular_section",
         "<|tool_call_section_begin|>" + call(*ONE[0]) + "<|tool_call_section_end|>",
         None, ONE, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_mixed_spacing",
         f"{PROSE} {BEGIN} <|tool_call_begin|>\nfunctions.get_weather:0 "
         '<|tool_call_argument_begin|> {"city": "Paris", "days": 3} <|tool_call_end|> '
         '<|tool_call_begin|> functions.get_time:1 <|tool_call_argument_begin|>{"tz": '
         f'"Europe/Paris"}}<|tool_call_end|> {END}', PROSE, TWO, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_nested_args", k2([NESTED]) + "<|im_end|>", None, [NESTED], "kimi_k2",
         source=K2_PARSER),
    Case("kimi_k2_formatted_json",
         BEGIN + call("write_file", '{\n  "path": "a.txt",\n  "content": "x"\n}') + END,
         None, [("write_file", {"path": "a.txt", "content": "x"})], "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_end_marker_inside_string",
         k2([("write_file", {"path": "k.txt", "content": "a<|tool_call_end|>b" + END})]),
         None, [("write_file", {"path": "k.txt", "content": "a<|tool_call_end|>b" + END})],
         "kimi_k2"),
    Case("kimi_k2_undeclared_sibling_stays_text",
         BEGIN + call("delete_all", {"force": True}) + call(*ONE[0], 1) + END,
         call("delete_all", {"force": True}), ONE, "kimi_k2", source=K2_PARSER),
    Case("kimi_k2_broken_json_sibling_stays_text",
         BEGIN + call("get_time", '{"tz": "UTC"') + call(*ONE[0], 1) + END,
         call("get_time", '{"tz": "UTC"'), ONE, "kimi_k2",
         source=K2_PARSER + " (test_extract_tool_calls_invalid_json)"),
    Case("kimi_k2_not_deepseek_sep",
         '<|tool_call_begin|>get_time<|tool_sep|>{"tz": "UTC"}<|tool_call_end|>',
         None, [("get_time", {"tz": "UTC"})], "deepseek"),
    # Negatives
    Case("kimi_k2_marker_in_prose",
         "Kimi writes <|tool_call_begin|> before each call and <|tool_call_end|> after.",
         None, [], None),
    Case("kimi_k2_section_marker_in_prose", f"The section opens with {BEGIN} and closes.",
         None, [], None),
    Case("kimi_k2_undeclared_only", k2([("delete_all", {"force": True})]), None, [], None),
    Case("kimi_k2_cut_off_stop", CUT, None, [], None),
    # K3
    Case("kimi_k3_one", k3(ONE), None, ONE, "kimi_k3", source=K3),
    Case("kimi_k3_two_prose", k3(TWO, PROSE), PROSE, TWO, "kimi_k3", source=K3),
    # The template's empty response section before a reply of calls only goes with them.
    Case("kimi_k3_empty_response_section", "<|open|>response<|sep|>" + k3(TWO), None, TWO,
         "kimi_k3", source=K3 + "; llama.cpp tests/test-chat.cpp Kimi-K3"),
    Case("kimi_k3_think_then_empty_response_section",
         f"{THINK}<|open|>response<|sep|>" + k3(ONE), THINK, ONE, "kimi_k3", source=K3),
    # A response section with words keeps its opener: a stream relayed it before the tools
    # began (formats/kimi.py's docstring).
    Case("kimi_k3_response_with_words_keeps_its_opener", "<|open|>response<|sep|>" + k3(ONE, PROSE),
         "<|open|>response<|sep|>" + PROSE, ONE, "kimi_k3", source=K3),
    Case("kimi_k3_think_closed", f"{THINK}\n{k3(TWO)}", THINK, TWO, "kimi_k3", source=K3),
    Case("kimi_k3_nested_args", k3([NESTED]), None, [NESTED], "kimi_k3", source=K3),
    Case("kimi_k3_json_block",
         '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
         '<|open|>json type="object"<|sep|>{"city": "Paris", "days": 3}<|close|>json<|sep|>'
         "<|close|>call<|sep|><|close|>tools<|sep|>", None, ONE, "kimi_k3", source=K3),
    Case("kimi_k3_quotes_and_tags_in_string",
         '<|open|>tools<|sep|><|open|>call tool="search" index="1"<|sep|>'
         '<|open|>argument key="query" type="string"<|sep|>say "hi" & <b>bye</b>'
         "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
         None, [("search", {"query": 'say "hi" & <b>bye</b>'})], "kimi_k3", source=K3),
    Case("kimi_k3_undeclared_sibling_stays_text",
         k3([("delete_all", {"force": True}), *ONE]),
         k3_call("delete_all", {"force": True}), ONE, "kimi_k3", source=K3),
    Case("kimi_k3_marker_in_prose", "K3 opens its calls with <|open|>tools<|sep|> in text.",
         None, [], None),
    Case("kimi_k3_undeclared_only", k3([("delete_all", {})]), None, [], None),
    Case("kimi_k3_cut_off_stop",
         '<|open|>tools<|sep|><|open|>call tool="write_file" index="1"<|sep|>'
         '<|open|>argument key="path" type="string"<|sep|>a', None, [], None),
    # K2-Thinking may go from reasoning to its calls without closing the block (THINK_ENDERS).
    Case("kimi_k2_thinking_calls_in_an_unclosed_think", f"<think>I need the weather.\n{k2(ONE)}",
         "<think>I need the weather.\n", ONE, "kimi_k2",
         source="vLLM kimi_k2 reasoning parser: <|tool_calls_section_begin|> ends reasoning"),
    # llama.cpp's Kimi K2 parser reads calls with no `<|tool_call_end|>` (and no section), and
    # ends an open think block at a bare `<|tool_call_begin|>` (scan.THINK_ENDERS).
    Case("kimi_k2_calls_without_end_markers",
         PROSE + "\n" + call(*TWO[0]).removesuffix("<|tool_call_end|>")
         + call(*TWO[1], 1).removesuffix("<|tool_call_end|>"), PROSE, TWO, "kimi_k2",
         source="llama.cpp tests/test-chat.cpp Kimi-K2-Thinking (execute_command, no end)"),
    Case("kimi_k2_bare_call_ends_an_open_think",
         "<think>I need the weather." + call(*ONE[0]).removesuffix("<|tool_call_end|>"),
         "<think>I need the weather.", ONE, "kimi_k2",
         source="llama.cpp tests/test-chat.cpp Kimi-K2-Thinking (inside think, no section)"),
    Case("kimi_k3_think_block_then_calls",
         f"<|open|>think<|sep|>Maybe {k3_call(*ONE[0])}?<|close|>think<|sep|>{k3(ONE)}",
         f"<|open|>think<|sep|>Maybe {k3_call(*ONE[0])}?<|close|>think<|sep|>", ONE, "kimi_k3",
         source=K3),
]
