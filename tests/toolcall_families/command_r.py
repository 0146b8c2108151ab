"""Cohere Command R7B / Command A cases (`command_r`, proxy/toolcalls/formats/command_r.py)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, TWO, Call, Case, j

TEMPLATE = "llama.cpp models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"
OLLAMA = "Ollama model/parsers/cohere_test.go (TestCohereParseMalformedActions)"
PARSER = "vLLM tests/tool_parsers/test_cohere_command_tool_parser.py"
PLAN = "<|START_THINKING|>I will look up the weather, then the time.<|END_THINKING|>"


def item(k: int, name: str, args: dict[str, Any]) -> str:
    return j({"tool_call_id": str(k), "tool_name": name, "parameters": args})


def action(calls: list[Call]) -> str:
    items = ",\n    ".join(item(k, n, a) for k, (n, a) in enumerate(calls))
    return f"<|START_ACTION|>[\n    {items}\n]<|END_ACTION|>"


NESTED: Call = ("write_file", {"path": 'notes/a "b".md',
                               "content": '# T\n\n```json\n{"k": [1, {"x": null}]}\n```\n'})
BAD = '{"tool_call_id": "1", "tool_name": "get_time", "parameters": {"tz": "UTC"} "x": }'

CASES: list[Case] = [
    Case("command_r_one", f"{PLAN}{action(ONE)}<|END_OF_TURN_TOKEN|>", PLAN, ONE, "command_r",
         source=TEMPLATE),
    Case("command_r_two", action(TWO), None, TWO, "command_r", source=PARSER),
    Case("command_r_think", f"{PLAN}{action(TWO)}", PLAN, TWO, "command_r", source=PARSER),
    Case("command_r_prose", f"{PROSE}\n{action(TWO)}<|END_OF_TURN_TOKEN|>", PROSE, TWO,
         "command_r", source=TEMPLATE),
    Case("command_r_parser_layout",
         "<|START_THINKING|> i will call it<|END_THINKING|><|START_ACTION|>\n[\n    "
         '{"tool_call_id": "0", "tool_name": "search", "parameters": {"query": "query1"}}\n]\n'
         "<|END_ACTION|>", "<|START_THINKING|> i will call it<|END_THINKING|>",
         [("search", {"query": "query1"})], "command_r", source=PARSER),
    Case("command_r_single_object",
         "<|START_ACTION|>" + item(0, *ONE[0]) + "<|END_ACTION|>", None, ONE, "command_r"),
    Case("command_r_nested_args", action([NESTED]), None, [NESTED], "command_r"),
    Case("command_r_end_marker_inside_string",
         action([("write_file", {"path": "x", "content": "]<|END_ACTION|>"})]), None,
         [("write_file", {"path": "x", "content": "]<|END_ACTION|>"})], "command_r"),
    Case("command_r_undeclared_sibling_stays_text",
         action([ONE[0], ("delete_all", {"force": True}), TWO[1]]),
         item(1, "delete_all", {"force": True}), TWO, "command_r", source=PARSER),
    Case("command_r_broken_sibling_stays_text",
         "<|START_ACTION|>[" + item(0, *ONE[0]) + ", " + BAD + "]<|END_ACTION|>",
         BAD, ONE, "command_r"),
    Case("command_r_response_after_action_unwrapped",
         action(ONE) + "<|START_RESPONSE|>Checking now.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
         "Checking now.", ONE, "command_r", source=PARSER + " (cmd3-citations_no_tool_calls)"),
    # A comma left out between two items: both are calls (Ollama's Cohere cases).
    Case("command_r_missing_comma",
         "<|START_ACTION|>[" + item(0, *ONE[0]) + item(1, *TWO[1]) + "]<|END_ACTION|>", None,
         TWO, "command_r", source=OLLAMA),
    # Negatives
    Case("command_r_missing_comma_undeclared_only",
         "<|START_ACTION|>[" + item(0, "delete_all", {}) + item(1, "drop", {}) + "]<|END_ACTION|>",
         None, [], None, source=OLLAMA),
    Case("command_r_marker_in_prose",
         "Command R writes <|START_ACTION|> and then a list of calls.", None, [], None),
    Case("command_r_undeclared_only", action([("delete_all", {"force": True})]), None, [], None),
    Case("command_r_cut_off_stop",
         '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "write_file", '
         '"parameters": {"path": "a", "content": "lo', None, [], None),
    Case("command_r_response_only", "<|START_RESPONSE|>Paris is sunny.<|END_RESPONSE|>", None,
         [], None),
]

# Command R+ (c4ai-command-r-plus tool_use template; llama.cpp test-chat COMMAND_R_PLUS):
# `Action:` and a ```json fence around the list go with the calls.
PLUS = "c4ai-command-r-plus tool_use template, llama.cpp tests/test-chat.cpp"


def plus(calls: list[Call], sep: str = "\n") -> str:
    items = ",\n    ".join(j({"tool_name": n, "parameters": a}) for n, a in calls)
    return f"Action:{sep}```json\n[\n    {items}\n]\n```"


CASES += [
    Case("command_r_plus_one", plus(ONE), None, ONE, "command_r", source=PLUS),
    Case("command_r_plus_two_after_prose", f"{PROSE}\n{plus(TWO, ' ')}", PROSE, TWO, "command_r",
         source=PLUS),
    # The header with no fenced list, or a fence holding more than the list, is prose.
    Case("command_r_plus_header_in_prose", "Action:\n```json\nnot yet\n```",
         "Action:\n```json\nnot yet\n```", [], None, source=PLUS),
    Case("command_r_plus_fence_with_more", plus(ONE)[:-4] + "// then wait\n```",
         plus(ONE)[:-4] + "// then wait\n```", [], None, source=PLUS),
]
