"""Think blocks around calls (BEHAVIOUR.md 4.1: nothing inside a think block is a call): the
block tags of each family, a think tag written inside a call's arguments, and reasoning whose
open tag was in the prompt. Read forwards, as a stream arrives (proxy/toolcalls/scan.py)."""

from __future__ import annotations

from tests.toolcall_case import Case, j

_FILE = {"path": "t.md", "content": "Close it with </think> and open with <think>."}
_WRITE = f'<tool_call>\n{{"name": "write_file", "arguments": {j(_FILE)}}}\n</tool_call>'
_TIME = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'

CASES = [
    Case("think_literal_close_inside_arguments", f"<think>\nA file.\n</think>\n\n{_WRITE}",
         "<think>\nA file.\n</think>", [("write_file", _FILE)], "hermes",
         source="issue 18: literal </think> inside argument values"),
    Case("think_literal_tags_inside_arguments_no_block", f"Writing it.\n{_WRITE}",
         "Writing it.", [("write_file", _FILE)], "hermes",
         source="issue 18: literal </think> inside argument values"),
    Case("think_call_inside_block_is_not_a_call", f"<think>\nMaybe {_TIME}\n</think>\nNo call.",
         None, [], None, source="BEHAVIOUR.md 4.1"),
    Case("think_open_tag_in_prompt", f"The user wants the time.\n</think>\n\n{_TIME}",
         "The user wants the time.\n</think>", [("get_time", {"tz": "UTC"})], "hermes",
         source="DeepSeek R1 / Qwen3 templates: <think> is in the generation prompt"),
    Case("think_seed_oss_block", f"<seed:think>Use {_TIME}?</seed:think>\n{_TIME}",
         f"<seed:think>Use {_TIME}?</seed:think>", [("get_time", {"tz": "UTC"})], "hermes",
         source="Seed-OSS chat_template.jinja: <seed:think>...</seed:think>"),
    Case("think_command_r_block",
         f"<|START_THINKING|>I need the time.<|END_THINKING|>{_TIME}",
         "<|START_THINKING|>I need the time.<|END_THINKING|>", [("get_time", {"tz": "UTC"})],
         "hermes", source="Command R7B template: <|START_THINKING|>...<|END_THINKING|>"),
    Case("think_unclosed_block_holds_no_call", f"<think>\nI will call {_TIME}", None, [], None,
         source="BEHAVIOUR.md 4.1"),
    # The open tag in the prompt and a call written while thinking: the `</think>` after it,
    # outside every call, still ends the block (llama.cpp test-chat.cpp, Reka Edge).
    Case("think_open_tag_in_prompt_call_inside_block",
         f"Maybe {_TIME} first?\n</think>\n\n{_WRITE}", f"Maybe {_TIME} first?\n</think>",
         [("write_file", _FILE)], "hermes",
         source="llama.cpp tests/test-chat.cpp Reka Edge: a fake call in the thinking"),
]
