"""Ling 3.0 / Ring 2.6 (inclusionAI, Bailing MoE V3): GLM-4.5/4.7's XML calls,
`<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`, so label `glm`
(proxy/toolcalls/formats/glm.py). Documented by vLLM `vllm/parser/ling3.py` ("Ling3 uses the same
XML tool-call format as GLM-4.7"), SGLang `ling3_detector.py` (a newline after the name, the first
`<arg_key>` right after it, or no arguments at all), SGLang PR #25366 (Ring-2.6-1T reuses GLM's
format) and Ollama `model/parsers/bailing.go` and its tests. The earlier Ling-lite / Ling-plus /
Ling 2.0 output format was not found documented in any peer; no case claims it."""

from __future__ import annotations

from tests.toolcall_case import PROSE, Case

SRC = "vLLM vllm/parser/ling3.py; SGLang ling3_detector.py"
OLLAMA = "Ollama model/parsers/bailing_test.go"
WEATHER = [("get_weather", {"city": "Tokyo"})]

CASES: list[Case] = [
    Case("ling_one",
         "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo</arg_value>\n"
         "</tool_call>", None, WEATHER, "glm", source=SRC),
    Case("ling_think_prose",
         "<think>plan</think>I'll check.\n<tool_call>get_weather<arg_key>city</arg_key>\n"
         "<arg_value>Tokyo</arg_value>\n</tool_call>",
         "<think>plan</think>I'll check.", WEATHER, "glm", source=OLLAMA),
    Case("ling_two_first_key_glued",
         "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Tokyo</arg_value>"
         "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"
         "<tool_call>get_time</tool_call>",
         None, [("get_weather", {"city": "Tokyo", "days": 2}), ("get_time", {})], "glm",
         source="SGLang ling3_detector.py: first <arg_key> right after the name; no arguments"),
    Case("ling_prose", f"{PROSE}\n<tool_call>get_time\n<arg_key>tz</arg_key>\n"
         "<arg_value>UTC</arg_value>\n</tool_call>", PROSE, [("get_time", {"tz": "UTC"})], "glm",
         source=SRC),
    Case("ling_undeclared",
         "<tool_call>book_flight\n<arg_key>to</arg_key>\n<arg_value>NYC</arg_value>\n"
         "</tool_call>",
         "<tool_call>book_flight\n<arg_key>to</arg_key>\n<arg_value>NYC</arg_value>\n"
         "</tool_call>", [], None, source=SRC),
    Case("ling_role_end_after_call",
         "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"
         "<|role_end|>", None, [("get_time", {"tz": "UTC"})], "glm",
         source="Ling 3.0 chat template: a turn ends with <|role_end|>"),
]
