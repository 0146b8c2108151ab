"""DeepSeek's markers with an ASCII `|` for the fullwidth `｜` (and `_` for `▁`), label
`deepseek` (proxy/toolcalls/formats/deepseek.py), and its one-bad-call-among-several cases."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, j

SOURCE = "llama.cpp common/chat.cpp DeepSeek R1/V3.1 (marker variants); research section 1"


def v31(calls: list[Call], bar: str = "|", sep: str = "▁") -> str:
    def tok(name: str) -> str:
        return f"<{bar}{name.replace(' ', sep)}{bar}>"

    body = "".join(f"{tok('tool call begin')}{n}{tok('tool sep')}{j(a)}{tok('tool call end')}"
                   for n, a in calls)
    return f"{tok('tool calls begin')}{body}{tok('tool calls end')}"


def v3(calls: list[Call]) -> str:
    body = "\n".join(f"<|tool▁call▁begin|>function<|tool▁sep|>{n}\n```json\n{j(a)}\n```"
                     "<|tool▁call▁end|>" for n, a in calls)
    return f"<|tool▁calls▁begin|>{body}<|tool▁calls▁end|>"


def call(name: str, args: str) -> str:
    return f"<|tool▁call▁begin|>{name}<|tool▁sep|>{args}<|tool▁call▁end|>"


CASES: list[Case] = [
    Case("deepseek_ascii_v31_one", v31(ONE), None, ONE, "deepseek", source=SOURCE),
    Case("deepseek_ascii_v31_two", v31(TWO), None, TWO, "deepseek", source=SOURCE),
    Case("deepseek_ascii_v3_two", v3(TWO), None, TWO, "deepseek", source=SOURCE),
    Case("deepseek_ascii_prose", f"{PROSE}\n\n{v31(TWO)}", PROSE, TWO, "deepseek"),
    Case("deepseek_ascii_think", f"{THINK}{v31(TWO)}", THINK, TWO, "deepseek", source=SOURCE),
    Case("deepseek_ascii_underscores", v31(TWO, sep="_"), None, TWO, "deepseek", source=SOURCE),
    Case("deepseek_ascii_escaped_underscores", v31(ONE, sep="\\_"), None, ONE, "deepseek",
         source=SOURCE),
    Case("deepseek_ascii_spaces", v31(ONE, sep=" "), None, ONE, "deepseek", source=SOURCE),
    Case("deepseek_ascii_end_of_sentence", v31(ONE) + "<|end▁of▁sentence|>", None, ONE,
         "deepseek"),
    Case("deepseek_ascii_fullwidth_end_of_sentence", v31(ONE) + "<｜end▁of▁sentence｜>", None,
         ONE, "deepseek"),
    Case("deepseek_ascii_calls_without_block",
         call("get_time", j({"tz": "UTC"})), None, [("get_time", {"tz": "UTC"})], "deepseek"),
    Case("deepseek_ascii_nested_args",
         v31([("run", {"cmd": 'grep -n "x" a\nb', "opts": {"a": [1, {"b": None}]}})]), None,
         [("run", {"cmd": 'grep -n "x" a\nb', "opts": {"a": [1, {"b": None}]}})], "deepseek"),
    Case("deepseek_ascii_end_marker_inside_string",
         v31([("write_file", {"path": "p", "content": "<|tool▁call▁end|><|tool▁calls▁end|>"})]),
         None, [("write_file", {"path": "p", "content": "<|tool▁call▁end|><|tool▁calls▁end|>"})],
         "deepseek"),
    Case("deepseek_ascii_undeclared_sibling_stays_text",
         "<|tool▁calls▁begin|>" + call("delete_all", "{}") + call("get_time", j({"tz": "UTC"}))
         + "<|tool▁calls▁end|>", call("delete_all", "{}"), [("get_time", {"tz": "UTC"})],
         "deepseek"),
    Case("deepseek_fullwidth_undeclared_sibling_stays_text",
         v31([ONE[0], ("delete_all", {})], bar="｜"),
         "<｜tool▁call▁begin｜>delete_all<｜tool▁sep｜>{}<｜tool▁call▁end｜>", ONE, "deepseek"),
    Case("deepseek_ascii_broken_sibling_stays_text",
         "<|tool▁calls▁begin|>" + call("get_time", '{"tz": "UTC"') + v31(ONE)[20:],
         call("get_time", '{"tz": "UTC"'), ONE, "deepseek"),
    Case("deepseek_r1_short_block_marker_first_call_unmarked",
         "Checking.<｜tool▁calls｜>function<｜tool▁sep｜>get_time\n```json\n"
         '{"tz": "UTC"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
         "Checking.", [("get_time", {"tz": "UTC"})], "deepseek",
         source="llama.cpp tests/test-chat.cpp DeepSeek R1 (distilled) parses"),
    # Negatives
    Case("deepseek_ascii_marker_in_prose",
         "DeepSeek opens its calls with <|tool▁calls▁begin|> and a call marker.", None, [], None),
    Case("deepseek_ascii_undeclared_only", v31([("delete_all", {"force": True})]), None, [],
         None),
    Case("deepseek_ascii_cut_off_stop",
         '<|tool▁calls▁begin|><|tool▁call▁begin|>write_file<|tool▁sep|>{"path": "a", "con',
         None, [], None),
]
