"""What a template leaves next to a call when the server parses none of it (issue 18): stray
closing tags whose opening tag the server stripped, doubled closers, and end-of-message tokens
after the text that follows the last call. None of it is left in the content."""

from __future__ import annotations

from tests.toolcall_case import Case

_TIME = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
_UTC = [("get_time", {"tz": "UTC"})]

CASES = [
    Case("left_over_qwen3_coder_without_opening_tool_call",
         "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>",
         None, _UTC, "qwen3_coder",
         source="vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py: no <tool_call> start"),
    Case("left_over_doubled_close_tag", f"Sure.\n{_TIME}</tool_call>", "Sure.", _UTC, "hermes",
         source="Qwen2.5 on llama.cpp: a doubled </tool_call>"),
    Case("left_over_text_then_close_and_end_token",
         f"Sure.\n{_TIME}\nDone.</tool_call><|im_end|>", "Sure.\nDone.", _UTC, "hermes",
         source="ChatML <|im_end|> left by a server that does not strip special tokens"),
    Case("left_over_lfm2_close_after_call",
         '<|tool_call_start|>[get_time(tz="UTC")]<|tool_call_end|><|tool_call_end|><|im_end|>',
         None, _UTC, "lfm2", source="LFM2 chat template: <|tool_call_start|>...<|tool_call_end|>"),
    Case("left_over_gemma_close_twice",
         "<start_function_call>call:get_time{tz:<escape>UTC<escape>}<end_function_call>"
         "<end_function_call><end_of_turn>",
         None, _UTC, "functiongemma", source="FunctionGemma chat template"),
    Case("left_over_mistral_closer_after_list",
         '[TOOL_CALLS] [{"name": "get_time", "arguments": {"tz": "UTC"}}][/TOOL_CALLS]',
         None, _UTC, "mistral", source="Ollama model/parsers tools tests: [/TOOL_CALLS] closer"),
    Case("left_over_gemma4_tool_response_after_call",
         '<|tool_call>call:get_time{tz:<|"|>UTC<|"|>}<tool_call|><|tool_response>Done.',
         "Done.", _UTC, "functiongemma",
         source="Ollama gemma4 TestGemma4Parser_IgnoresToolResponseBoundaryAfterToolCall"),
    # The reply's first `<tool_call>` was eaten: the second call's opener goes with it.
    Case("left_over_qwen3_coder_later_opener_without_first",
         "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>\n"
         "<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n</parameter>\n</function>\n"
         "</tool_call>", None, [*_UTC, ("get_time", {"tz": "CET"})], "qwen3_coder",
         source="llama.cpp tests/test-chat.cpp Qwen3-Coder: no open tag, parallel calls"),
    # A closing tag in prose with no call anywhere is the reply's own text.
    Case("left_over_closer_in_prose_without_call", "Close the block with </tool_call> then stop.",
         None, [], None, source="BEHAVIOUR.md 4.1: prose stays text"),
]
