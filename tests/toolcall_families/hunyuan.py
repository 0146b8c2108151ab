"""Hunyuan-A13B cases: `<tool_calls>[...]</tool_calls>` in `<answer>` (label `tool_calls_tag`,
proxy/toolcalls/formats/hunyuan.py)."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, j

PARSER = "vLLM tests/tool_parsers/test_hunyuan_a13b_tool_parser.py"
SOURCE = "vLLM vllm/tool_parsers/hunyuan_a13b_tool_parser.py and its reasoning parser"


def tags(calls: list[Call]) -> str:
    return "<tool_calls>" + j([{"name": n, "arguments": a} for n, a in calls]) + "</tool_calls>"


def answer(calls: list[Call]) -> str:
    return f"<answer>\n{tags(calls)}\n</answer>"


HUNYUAN_THINK = "<think>\nThe user wants the weather.\n</think>"
NESTED: Call = ("run", {"cmd": "printf 'a\\tb'\n", "opts": {"level1": {"level2": {"v": 123}}},
                        "limit": None, "ratio": 0.5})
UNDECLARED = {"name": "delete_all", "arguments": {"force": True}}

CASES: list[Case] = [
    Case("hunyuan_one", tags(ONE), None, ONE, "tool_calls_tag", source=PARSER),
    Case("hunyuan_two", tags(TWO), None, TWO, "tool_calls_tag", source=PARSER),
    Case("hunyuan_prose", f"{PROSE} {tags(TWO)}", PROSE, TWO, "tool_calls_tag", source=PARSER),
    Case("hunyuan_think", f"{THINK}\n{tags(TWO)}", THINK, TWO, "tool_calls_tag", source=PARSER),
    Case("hunyuan_answer_wrapper", f"{HUNYUAN_THINK}\n{answer(TWO)}", HUNYUAN_THINK, TWO,
         "tool_calls_tag", source=SOURCE),
    Case("hunyuan_answer_wrapper_no_newline",
         "<answer>" + tags(ONE) + "</answer>", None, ONE, "tool_calls_tag", source=SOURCE),
    Case("hunyuan_answer_then_im_end", answer(ONE) + "<|im_end|>", None, ONE, "tool_calls_tag"),
    Case("hunyuan_nested_args", tags([NESTED]), None, [NESTED], "tool_calls_tag", source=PARSER),
    Case("hunyuan_close_tag_inside_string",
         tags([("write_file", {"path": "x.html", "content": "</tool_calls></answer>"})]), None,
         [("write_file", {"path": "x.html", "content": "</tool_calls></answer>"})],
         "tool_calls_tag"),
    Case("hunyuan_undeclared_sibling_stays_text",
         "<tool_calls>[" + j({"name": ONE[0][0], "arguments": ONE[0][1]}) + ", "
         + j(UNDECLARED) + "]</tool_calls>", j(UNDECLARED), ONE, "tool_calls_tag"),
    # Negatives
    Case("hunyuan_marker_in_prose", "Hunyuan wraps its calls in <tool_calls> tags.", None, [],
         None),
    Case("hunyuan_undeclared_only", tags([("delete_all", {"force": True})]), None, [], None),
    Case("hunyuan_cut_off_stop",
         '<answer>\n<tool_calls>[{"name": "write_file", "arguments": {"path": "a", "content": "lo',
         None, [], None),
    Case("hunyuan_answer_without_call", "<answer>\nParis is sunny.\n</answer>", None, [], None),
]
