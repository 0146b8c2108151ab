"""SGLang's own function-call parser tests (sgl-project/sglang test/registered/function_call/),
transcribed as data: each detector test's model output, the tools it declared and the calls and
normal text it expects. Streaming tests are the concatenated text and the final calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.toolcall_case import Call, tool
from tests.toolcall_peers import PeerCase

REPO = "sgl-project/sglang "
MAIN = "test/registered/function_call/test_function_call_parser.py"
S = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
B = {"type": "boolean"}
A = {"type": "array"}
OBJ = {"type": "object"}
STR_OR_NULL = {"anyOf": [{"type": "string"}, {"type": "null"}]}


def _case(name: str, family: str, path: str, test: str, tools: tuple[dict[str, Any], ...],
          text: str, calls: list[Call], content: str | None, **kw: Any) -> PeerCase:
    return PeerCase(name=f"sglang-{name}", text=text, calls=calls, content=content, tools=tools,
                    source=f"{REPO}{path}::{test}", family=family, **kw)


def _neg(name: str, family: str, path: str, test: str, tools: tuple[dict[str, Any], ...],
         text: str, **kw: Any) -> PeerCase:
    return _case(name, family, path, test, tools, text, [], text, **kw)


# ---- Pythonic (TestPythonicDetector) -------------------------------------------------------
PY_TOOLS = (tool("get_weather", {"location": S, "unit": S}), tool("search", {"query": S}))
PY = "TestPythonicDetector."


def _py(name: str, test: str, text: str, calls: list[Call], content: str | None,
        family: str = "pythonic", **kw: Any) -> PeerCase:
    return _case(name, family, MAIN, PY + test, PY_TOOLS, text, calls, content, **kw)


PYTHONIC = [
    _neg("pythonic-no-brackets", "pythonic", MAIN, PY + "test_parse_streaming_no_brackets",
         PY_TOOLS, "This is just normal text without any tool calls."),
    _py("pythonic-complete", "test_parse_streaming_complete_tool_call",
        "Here's a tool call: [get_weather(location='New York', unit='celsius')]",
        [("get_weather", {"location": "New York", "unit": "celsius"})], "Here's a tool call:"),
    _py("pythonic-text-before", "test_parse_streaming_text_before_tool_call",
        "This is some text before [get_weather(location='London')]",
        [("get_weather", {"location": "London"})], "This is some text before"),
    _py("pythonic-partial", "test_parse_streaming_partial_tool_call",
        "Let me check the weather: [get_weather(location='Paris')]",
        [("get_weather", {"location": "Paris"})], "Let me check the weather:"),
    _py("pythonic-at-start", "test_parse_streaming_bracket_without_text_before",
        "[search(query='python programming')]",
        [("search", {"query": "python programming"})], None),
    _py("pythonic-text-after", "test_parse_streaming_text_after_tool_call",
        "[get_weather(location='Tokyo')] Here's the forecast:",
        [("get_weather", {"location": "Tokyo"})], "Here's the forecast:"),
    _py("pythonic-two-lists", "test_parse_streaming_multiple_tool_calls",
        "[get_weather(location='Berlin')] and [search(query='restaurants')]",
        [("get_weather", {"location": "Berlin"}), ("search", {"query": "restaurants"})], "and"),
    _neg("pythonic-open-bracket-only", "pythonic", MAIN,
         PY + "test_parse_streaming_opening_bracket_only", PY_TOOLS, "Let's try this: ["),
    _py("pythonic-nested-list", "test_parse_streaming_nested_brackets",
        "[get_weather(location='New York', unit='celsius', data=[1, 2, 3])]",
        [("get_weather", {"location": "New York", "unit": "celsius", "data": [1, 2, 3]})], None),
    _py("pythonic-nested-dict", "test_parse_streaming_nested_brackets_dict",
        "[search(query='test', config={'options': [1, 2], 'nested': {'key': 'value'}})]",
        [("search", {"query": "test", "config": {"options": [1, 2], "nested": {"key": "value"}}})],
        None),
    _py("pythonic-parallel-nested", "test_parse_streaming_multiple_tools_with_nested_brackets",
        "[get_weather(location='Paris', data=[10, 20]), search(query='test', filters=['a', 'b'])]",
        [("get_weather", {"location": "Paris", "data": [10, 20]}),
         ("search", {"query": "test", "filters": ["a", "b"]})], None),
    _py("pythonic-partial-nested", "test_parse_streaming_partial_nested_brackets",
        "Here's a call: [get_weather(location='Tokyo', data=[1, 2, 3])]",
        [("get_weather", {"location": "Tokyo", "data": [1, 2, 3]})], "Here's a call:"),
    _py("pythonic-python-start-end", "test_parse_streaming_with_python_start_and_end_token",
        "Here's a call: <|python_start|>[get_weather(location='Tokyo', data=[1, 2, 3])]"
        "<|python_end|>",
        [("get_weather", {"location": "Tokyo", "data": [1, 2, 3]})], "Here's a call:",
        family="llama3"),
    _py("pythonic-python-start-prose-after",
        "test_detect_and_parse_with_python_start_and_end_token",
        "User wants to get the weather in Mars. <|python_start|>[get_weather(location='Mars', "
        "unit='celsius')]<|python_end|> In this way we will get the weather in Mars.",
        [("get_weather", {"location": "Mars", "unit": "celsius"})],
        "User wants to get the weather in Mars.  In this way we will get the weather in Mars.",
        family="llama3"),
]

# ---- Mistral (TestMistralDetector) ---------------------------------------------------------
MI_TOOLS = (tool("make_next_step_decision", {"decision": S, "content": S}),)
MI = "TestMistralDetector."
NESTED_CONTENT = (
    "```\nTOOL: Access a weather API or service\nOBSERVATION: Retrieve the current weather data "
    "for the top 5 populated cities in the US\nANSWER: The weather in the top 5 populated cities "
    "in the US is as follows: [City Name] - [Weather Conditions] - [Temperature]\n```"
)
MISTRAL = [
    _case("mistral-nested-brackets-in-content", "mistral", MAIN,
          MI + "test_detect_and_parse_with_nested_brackets_in_content", MI_TOOLS,
          '[TOOL_CALLS] [{"name":"make_next_step_decision", "arguments":{"decision":"",'
          '"content":"```\\nTOOL: Access a weather API or service\\nOBSERVATION: Retrieve the '
          "current weather data for the top 5 populated cities in the US\\nANSWER: The weather "
          "in the top 5 populated cities in the US is as follows: [City Name] - [Weather "
          'Conditions] - [Temperature]\\n```"}}]',
          [("make_next_step_decision", {"decision": "", "content": NESTED_CONTENT})], None),
    _case("mistral-simple", "mistral", MAIN, MI + "test_detect_and_parse_simple_case", MI_TOOLS,
          '[TOOL_CALLS] [{"name":"make_next_step_decision", "arguments":{"decision":"TOOL", '
          '"content":"Use weather API"}}]',
          [("make_next_step_decision", {"decision": "TOOL", "content": "Use weather API"})], None),
    _neg("mistral-no-tool-calls", "mistral", MAIN, MI + "test_detect_and_parse_no_tool_calls",
         MI_TOOLS, "This is just normal text without any tool calls."),
    _case("mistral-text-before", "mistral", MAIN,
          MI + "test_detect_and_parse_with_text_before_tool_call", MI_TOOLS,
          'Here is some text before the tool call: [TOOL_CALLS] [{"name":"make_next_step_decision"'
          ', "arguments":{"decision":"ANSWER", "content":"The answer is 42"}}]',
          [("make_next_step_decision", {"decision": "ANSWER", "content": "The answer is 42"})],
          "Here is some text before the tool call:"),
    _case("mistral-compact-args", "mistral", MAIN, MI + "test_detect_and_parse_compact_args_format",
          MI_TOOLS,
          '[TOOL_CALLS]make_next_step_decision[ARGS]{"decision":"TOOL", "content":"Use weather '
          'API"}',
          [("make_next_step_decision", {"decision": "TOOL", "content": "Use weather API"})], None),
]

# ---- <tool_call> JSON base detector (TestBaseFormatDetector) -------------------------------
WT = (tool("get_weather", {"city": S}), tool("get_tourist_attractions", {"city": S}))
BF = "TestBaseFormatDetector."
PARIS_LONDON: list[Call] = [("get_weather", {"city": "Paris"}),
                            ("get_tourist_attractions", {"city": "London"})]
BASE = [
    _case("base-two-in-one-tag", "hermes", MAIN, BF + "test_sequential_tool_index_assignment", WT,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": '
          '"get_tourist_attractions", "arguments": {"city": "London"}}</tool_call>',
          PARIS_LONDON, None),
    _case("base-two-in-one-tag-space-close", "hermes", MAIN,
          BF + "test_buffer_content_preservation", WT,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": '
          '"get_tourist_attractions", "arguments": {"city": "London"}} </tool_call>',
          PARIS_LONDON, None),
    _neg("base-invalid-tool-unclosed", "hermes", MAIN, BF + "test_buffer_reset_on_invalid_tool",
         WT, '<tool_call>{"name": "invalid_tool", '),
    _case("base-chinese", "hermes", MAIN, BF + "test_chinese_characters_not_double_escaped", WT,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "杭州"}}</tool_call>',
          [("get_weather", {"city": "杭州"})], None),
    _case("base-chinese-two", "hermes", MAIN, BF + "test_multiple_chinese_parameters", WT,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "北京"}}, {"name": '
          '"get_tourist_attractions", "arguments": {"city": "上海"}}</tool_call>',
          [("get_weather", {"city": "北京"}), ("get_tourist_attractions", {"city": "上海"})], None),
]

# ---- Llama 3.2 JSON (TestLlama32Detector) --------------------------------------------------
LL = "TestLlama32Detector."
LLAMA = [
    _case("llama32-single-bare-json", "bare_json", MAIN, LL + "test_single_json", WT,
          '{"name": "get_weather", "parameters": {"city": "Paris"}}',
          [("get_weather", {"city": "Paris"})], None),
    _case("llama32-semicolon", "llama3", MAIN, LL + "test_multiple_json_with_separator", WT,
          '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}};'
          '{"name": "get_tourist_attractions", "parameters": {"city": "Paris"}}',
          [("get_weather", {"city": "Paris"}), ("get_tourist_attractions", {"city": "Paris"})],
          None),
    _case("llama32-python-tag-twice", "llama3", MAIN,
          LL + "test_multiple_json_with_separator_customized", WT,
          '<|python_tag|>{"name": "get_weather", "parameters": {}}'
          '<|python_tag|>{"name": "get_tourist_attractions", "parameters": {}}',
          [("get_weather", {}), ("get_tourist_attractions", {})], None),
    _case("llama32-trailing-text", "bare_json", MAIN, LL + "test_json_with_trailing_text", WT,
          '{"name": "get_weather", "parameters": {}} Some follow-up text',
          [("get_weather", {})], "Some follow-up text"),
    _case("llama32-invalid-then-valid", "bare_json", MAIN, LL + "test_invalid_then_valid_json", WT,
          '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {}}',
          [("get_weather", {})], None),
    _neg("llama32-plain-text", "llama3", MAIN, LL + "test_plain_text_only", WT,
         "This is just plain explanation text."),
    _case("llama32-python-tag-prose", "llama3", MAIN, LL + "test_with_python_tag_prefix", WT,
          'Some intro. <|python_tag|>{"name": "get_weather", "parameters": {}}',
          [("get_weather", {})], "Some intro."),
]

# ---- Kimi K2 (TestKimiK2Detector, test_kimik2_detector.py) ---------------------------------
KI = "TestKimiK2Detector."
K2 = "test/registered/function_call/test_kimik2_detector.py"
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def _k2(name: str, index: int, args: str) -> str:
    return f"{CB}functions.{name}:{index}{AB}{args}{CE}"


RF = tool("ReadFile", {"path": S})
K2_TOOLS = (RF, tool("get_weather", {"city": S, "unit": S}))
K2_E2E = (RF, tool("get_weather", {"city": S}))
LONDON = [("get_weather", {"city": "London"})]
KIMI = [
    _case("kimik2-single", "kimi_k2", MAIN, KI + "test_single_tool_call", WT,
          SB + _k2("get_weather", 0, '{"city": "Paris"}') + SE,
          [("get_weather", {"city": "Paris"})], None),
    _case("kimik2-two", "kimi_k2", MAIN, KI + "test_multiple_tool_calls", WT,
          SB + _k2("get_weather", 0, '{"city": "Paris"}')
          + _k2("get_tourist_attractions", 1, '{"city": "London"}') + SE, PARIS_LONDON, None),
    _neg("kimik2-invalid-no-begin", "kimi_k2", MAIN, KI + "test_invalid_tool_call", WT,
         'invalid_tool:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
         "<|tool_calls_section_end|>"),
    _case("kimik2-readfile", "kimi_k2", K2, "TestKimiK2DetectorBasic.test_single_tool_call",
          K2_TOOLS, SB + _k2("ReadFile", 0, '{"path": "/test.py"}') + SE,
          [("ReadFile", {"path": "/test.py"})], None),
    _case("kimik2-two-readfile-weather", "kimi_k2", K2,
          "TestKimiK2DetectorBasic.test_multiple_tool_calls", K2_TOOLS,
          SB + _k2("ReadFile", 0, '{"path": "/a.py"}') + _k2("get_weather", 1, '{"city": "Tokyo"}')
          + SE, [("ReadFile", {"path": "/a.py"}), ("get_weather", {"city": "Tokyo"})], None),
    _case("kimik2-conversation-indices", "kimi_k2", K2,
          "TestKimiK2DetectorBasic.test_non_streaming_tool_index_is_local", K2_TOOLS,
          SB + _k2("ReadFile", 5, '{"path": "/a.py"}') + _k2("get_weather", 6, '{"city": "Tokyo"}')
          + SE, [("ReadFile", {"path": "/a.py"}), ("get_weather", {"city": "Tokyo"})], None),
    _case("kimik2-text-before", "kimi_k2", K2,
          "TestKimiK2DetectorBasic.test_normal_text_before_tool_call", K2_TOOLS,
          "Let me check the file." + SB + _k2("ReadFile", 0, '{"path": "/test.py"}') + SE,
          [("ReadFile", {"path": "/test.py"})], "Let me check the file."),
    _neg("kimik2-no-call", "kimi_k2", K2, "TestKimiK2DetectorBasic.test_no_tool_call", K2_TOOLS,
         "Just a normal response."),
    _case("kimik2-hyphenated-name", "kimi_k2", K2,
          "TestKimiK2DetectorHyphenatedNames.test_hyphenated_name_non_streaming",
          (tool("mcp__portal__search-documents", {"path": S}), tool("list-files", {"path": S})),
          SB + _k2("mcp__portal__search-documents", 0, '{"path": "/docs"}') + SE,
          [("mcp__portal__search-documents", {"path": "/docs"})], None),
    _case("kimik2-hyphenated-name-streamed", "kimi_k2", K2,
          "TestKimiK2DetectorHyphenatedNames.test_hyphenated_name_streaming",
          (tool("mcp__portal__search-documents", {"path": S}), tool("list-files", {"path": S})),
          SB + _k2("list-files", 0, '{"path": "/home"}') + SE,
          [("list-files", {"path": "/home"})], None),
    _case("kimik2-streamed-two", "kimi_k2", K2,
          "TestKimiK2DetectorStreaming.test_streaming_multiple_tool_calls", K2_E2E,
          SB + _k2("ReadFile", 0, '{"path": "/a.py"}') + _k2("get_weather", 1, '{"city": "Paris"}')
          + SE, [("ReadFile", {"path": "/a.py"}), ("get_weather", {"city": "Paris"})], None),
    _neg("kimik2-trailing-angle", "kimi_k2", K2,
         "TestKimiK2DetectorStreaming.test_streaming_trailing_literal_left_angle_is_not_dropped",
         K2_E2E, "normal text <"),
    _case("kimik2-think-unclosed-then-call", "kimi_k2", K2,
          "TestKimiK2EndToEnd.test_e2e_non_streaming_reasoning_to_tool_call", K2_E2E,
          "<think>Let me check this file." + SB + _k2("ReadFile", 0, '{"path": "/src/main.py"}')
          + SE, [("ReadFile", {"path": "/src/main.py"})], None),
    _case("kimik2-reasoning-split-then-call", "kimi_k2", K2,
          "TestKimiK2EndToEnd.test_e2e_normal_think_close_then_tool_call", K2_E2E,
          SB + _k2("get_weather", 0, '{"city": "London"}') + SE, LONDON, None,
          reasoning="Thinking about it..."),
    _case("kimik2-reasoning-split-content-then-call", "kimi_k2", K2,
          "TestKimiK2EndToEnd.test_e2e_normal_think_close_then_content_overlap_tool_call", K2_E2E,
          "This is a content:" + SB + _k2("get_weather", 0, '{"city": "London"}') + SE, LONDON,
          "This is a content:", reasoning="Thinking about it..."),
    _case("kimik2-think-in-text-content-then-call", "kimi_k2", K2,
          "TestKimiK2EndToEnd.test_e2e_normal_think_close_then_content_overlap_tool_call", K2_E2E,
          "<think>Thinking about it...</think>This is a content:" + SB
          + _k2("get_weather", 0, '{"city": "London"}') + SE, LONDON, "This is a content:"),
    _case("kimik2-two-sections", "kimi_k2", K2,
          "TestKimiK2EndToEnd.test_e2e_normal_think_close_then_content_overlap_tool_call_multi_"
          "token_multi_calls", K2_E2E,
          "This is a content:" + SB + _k2("get_weather", 0, '{"city": "London"}') + SE + SB
          + _k2("get_weather", 1, '{"city": "Delhi"}') + SE,
          [*LONDON, ("get_weather", {"city": "Delhi"})], "This is a content:",
          reasoning="Thinking about it..."),
]

# ---- DeepSeek V3 / V3.1 --------------------------------------------------------------------
D_SB, D_SE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
D_CB, D_CE, D_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
V31 = "test/registered/function_call/test_deepseekv31_detector.py"
W1 = (tool("get_weather", {"city": S}),)
TOKYO_PARIS: list[Call] = [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"})]
DEEPSEEK = [
    _case("deepseekv3-two-mtp-chunks", "deepseek", MAIN,
          "TestDeepSeekV3Detector.test_parse_streaming_multiple_tool_calls_with_multi_token_chunk",
          WT, D_SB + D_CB + "function" + D_SEP + 'get_weather\n```json\n{"city":"Shanghai"}\n```'
          + D_CE + "\n" + D_CB + "function" + D_SEP
          + 'get_tourist_attractions\n```json\n{"city": "Beijing"}\n```' + D_CE + D_SE,
          [("get_weather", {"city": "Shanghai"}), ("get_tourist_attractions", {"city": "Beijing"})],
          None),
    _case("deepseekv31-two", "deepseek", V31,
          "TestDeepSeekV31Streaming.test_one_shot_parse_unchanged", W1,
          D_SB + D_CB + "get_weather" + D_SEP + '{"city": "Tokyo"}' + D_CE + D_CB + "get_weather"
          + D_SEP + '{"city": "Paris"}' + D_CE + D_SE, TOKYO_PARIS, None),
    _case("deepseekv31-one", "deepseek", V31,
          "TestDeepSeekV31Streaming.test_complete_call_in_single_delta_streams_arguments", W1,
          D_SB + D_CB + "get_weather" + D_SEP + '{"city": "Tokyo"}' + D_CE + D_SE,
          [("get_weather", {"city": "Tokyo"})], None),
]

# ---- DeepSeek V3.2 DSML (TestDeepSeekV32Detector, test_deepseekv32_detector.py) ------------
DS = "TestDeepSeekV32Detector."
V32 = "test/registered/function_call/test_deepseekv32_detector.py"
DS_TOOLS = (tool("search", {"query": S, "topn": INT, "source": S}),
            tool("get_favorite_tourist_spot", {"city": S}))
DS_DATE = (*DS_TOOLS, tool("get_date", {}))
NOTE = (tool("write_note", {"payload": OBJ}),)
HELP = ("I'll help you with information about San Francisco and get its favorite tourist spot "
        "for you.")
SF_WEBNAV: list[Call] = [
    ("get_favorite_tourist_spot", {"city": "San Francisco"}),
    ("search", {"query": "WebNav benchmark", "topn": 10, "source": "web"}),
]
RU = ['<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_note">\n',
      '<｜DSML｜parameter name="payload" string="false">Здра', "вствуйте, мир", "! Это тест",
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"]
DSML = [
    _case("deepseekv32-xml", "dsml", MAIN, DS + "test_detect_and_parse_xml_format", DS_TOOLS,
          """I'll help you with information about San Francisco and get its favorite tourist spot for you.\n\n
        <｜DSML｜function_calls>\n
            <｜DSML｜invoke name="get_favorite_tourist_spot">\n
                <｜DSML｜parameter name="city" string="true">San Francisco</｜DSML｜parameter>\n
            </｜DSML｜invoke>\n
            <｜DSML｜invoke name="search">
                <｜DSML｜parameter name="query" string="true">WebNav benchmark</｜DSML｜parameter>
                <｜DSML｜parameter name="topn" string="false">10</｜DSML｜parameter>
                <｜DSML｜parameter name="source" string="true">web</｜DSML｜parameter>
            </｜DSML｜invoke>
        </｜DSML｜function_calls>
        """, SF_WEBNAV, HELP),  # noqa: E501
    _case("deepseekv32-json-in-invoke", "dsml", MAIN, DS + "test_detect_and_parse_json_format",
          DS_TOOLS, """I'll help you with information about San Francisco and get its favorite tourist spot for you.

        <｜DSML｜function_calls>
            <｜DSML｜invoke name="get_favorite_tourist_spot">
            {
                "city": "San Francisco"
            }
        </｜DSML｜invoke>
            <｜DSML｜invoke name="search">
            {
                "query": "WebNav benchmark",
                "topn": 10,
                "source": "web"
            }
        </｜DSML｜invoke>
        </｜DSML｜function_calls>
        """, SF_WEBNAV, HELP),  # noqa: E501
    _case("deepseekv32-undeclared-params-typed-by-attr", "dsml", MAIN,
          DS + "test_streaming_xml_format", DS_TOOLS, """<｜DSML｜function_calls>
            <｜DSML｜invoke name="get_favorite_tourist_spot">
                <｜DSML｜parameter name="city" string="true">San Francisco</｜DSML｜parameter>
                <｜DSML｜parameter name="another_city" string="true">London</｜DSML｜parameter>
                <｜DSML｜parameter name="topn" string="false">10</｜DSML｜parameter>
                <｜DSML｜parameter name="obj" string="false">{"name": "John", "age": 30}</｜DSML｜parameter>
            </｜DSML｜invoke>
        </｜DSML｜function_calls>""",  # noqa: E501
          [("get_favorite_tourist_spot", {"city": "San Francisco", "another_city": "London",
                                          "topn": 10, "obj": {"name": "John", "age": 30}})], None),
    _case("deepseekv32-streamed-json", "dsml", MAIN, DS + "test_streaming_json_format", DS_TOOLS,
          """<｜DSML｜function_calls>
            <｜DSML｜invoke name="get_favorite_tourist_spot">
            {
                "city": "San Francisco"
            }
            </｜DSML｜invoke>
        </｜DSML｜function_calls>""", [("get_favorite_tourist_spot", {"city": "San Francisco"})],
          None),
    _case("deepseekv32-no-params-prose", "dsml", MAIN, DS + "test_detect_and_parse_no_parameters",
          DS_DATE, "Let me get the current date for you.\n\n<｜DSML｜function_calls>\n"
          '<｜DSML｜invoke name="get_date">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
          [("get_date", {})], "Let me get the current date for you."),
    _case("deepseekv32-no-params", "dsml", MAIN, DS + "test_streaming_no_parameters", DS_DATE,
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_date">\n</｜DSML｜invoke>\n'
          "</｜DSML｜function_calls>", [("get_date", {})], None),
    _case("deepseekv32-no-params-blank-line", "dsml", MAIN,
          DS + "test_streaming_no_parameters_with_whitespace", DS_DATE,
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_date">\n\n</｜DSML｜invoke>\n'
          "</｜DSML｜function_calls>", [("get_date", {})], None),
    _case("deepseekv32-nonjson-object-param", "dsml", V32,
          "TestNonJsonObjectParamStreaming.test_no_parser_error_and_no_dsml_leak", NOTE,
          "".join(RU), [("write_note", {"payload": "Здравствуйте, мир! Это тест"})], None),
    _case("deepseekv4-tool-calls-wrapper", "dsml", V32,
          "TestNonJsonObjectParamStreaming.test_v4_tool_calls_tokens", NOTE,
          "".join(RU).replace("function_calls", "tool_calls"),
          [("write_note", {"payload": "Здравствуйте, мир! Это тест"})], None),
    _case("deepseekv32-json-object-param", "dsml", V32,
          "TestJsonParamStreamingUnchanged.test_json_object_param_still_streams", NOTE,
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_note">\n'
          '<｜DSML｜parameter name="payload" string="false">{"city": "San Francisco"}'
          "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
          [("write_note", {"payload": {"city": "San Francisco"}})], None),
]

# ---- Qwen3-Coder XML (TestQwen3CoderDetector, test_qwen3_coder_detector/test_cases.py) -----
QC = "TestQwen3CoderDetector."
QCC = "test/registered/function_call/test_qwen3_coder_detector/test_cases.py"
QC_TOOLS = (tool("get_current_weather", {"location": S, "unit": S, "days": INT}),
            tool("sql_interpreter", {"query": S, "dry_run": B}),
            tool("TodoWrite", {"todos": {"type": "array", "items": {
                "type": "object", "properties": {"content": S, "status": S}}}}))
BOSTON: list[Call] = [("get_current_weather", {"location": "Boston", "unit": "celsius", "days": 3})]
BOSTON_XML = ("<function=get_current_weather>\n<parameter=location>Boston</parameter>\n"
              "<parameter=unit>celsius</parameter>\n<parameter=days>3</parameter>\n</function>")
NY_SQL: list[Call] = [("get_current_weather", {"location": "New York"}),
                      ("sql_interpreter", {"query": "SELECT * FROM users", "dry_run": True})]
NY_SQL_XML = ("<function=get_current_weather>\n<parameter=location>New York</parameter>\n"
              "</function>\n{sep}<function=sql_interpreter>\n<parameter=query>SELECT * FROM users"
              "</parameter>\n<parameter=dry_run>True</parameter>\n</function>")


def _qc(name: str, test: str, text: str, calls: list[Call], content: str | None,
        path: str = MAIN) -> PeerCase:
    return _case(name, "qwen3_coder", path, (QC if path == MAIN else "") + test, QC_TOOLS, text,
                 calls, content)


def _tc(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


QWEN3_CODER = [
    _neg("qwen3coder-plain", "qwen3_coder", MAIN, QC + "test_plain_text_only", QC_TOOLS,
         "This is plain text without any tool calls."),
    _qc("qwen3coder-single", "test_single_tool_call", _tc(BOSTON_XML), BOSTON, None),
    _qc("qwen3coder-text-prefix", "test_single_tool_call_with_text_prefix",
        "Let me check the weather for you.\n\n" + _tc(
            "<function=get_current_weather>\n<parameter=location>New York</parameter>\n"
            "</function>"),
        [("get_current_weather", {"location": "New York"})], "Let me check the weather for you."),
    _qc("qwen3coder-two", "test_multiple_tool_calls",
        NY_SQL_XML.replace("</function>\n{sep}", "</function>\n</tool_call>\n<tool_call>\n")
        .join(["<tool_call>\n", "\n</tool_call>"]), NY_SQL, None),
    _qc("qwen3coder-streamed-text", "test_streaming_with_text_and_tool",
        "Let me help you.\n\n<tool_call><function=get_current_weather><parameter=location>Paris"
        "</parameter></function></tool_call>",
        [("get_current_weather", {"location": "Paris"})], "Let me help you."),
    _qc("qwen3coder-streamed-atomic-tags", "test_streaming_single_tool_call",
        "<tool_call><function=get_current_weather><parameter=location>Boston</parameter>"
        "<parameter=unit>celsius</parameter></function></tool_call>",
        [("get_current_weather", {"location": "Boston", "unit": "celsius"})], None),
    _qc("qwen3coder-integer", "test_integer_parameter_conversion",
        _tc("<function=get_current_weather>\n<parameter=location>Tokyo</parameter>\n"
            "<parameter=days>5</parameter>\n</function>"),
        [("get_current_weather", {"location": "Tokyo", "days": 5})], None),
    _qc("qwen3coder-boolean-capital", "test_boolean_parameter_conversion",
        _tc("<function=sql_interpreter>\n<parameter=query>SELECT 1</parameter>\n"
            "<parameter=dry_run>True</parameter>\n</function>"),
        [("sql_interpreter", {"query": "SELECT 1", "dry_run": True})], None),
    _qc("qwen3coder-array-of-objects", "test_complex_array_parameter",
        _tc('<function=TodoWrite>\n<parameter=todos>\n[\n  {"content": "Buy groceries", "status":'
            ' "pending"},\n  {"content": "Finish report", "status": "completed"}\n]\n</parameter>'
            "\n</function>"),
        [("TodoWrite", {"todos": [{"content": "Buy groceries", "status": "pending"},
                                  {"content": "Finish report", "status": "completed"}]})], None),
    _qc("qwen3coder-empty-value", "test_empty_parameter_value",
        _tc("<function=get_current_weather>\n<parameter=location></parameter>\n</function>"),
        [("get_current_weather", {"location": ""})], None),
    _qc("qwen3coder-quotes-in-value", "test_parameter_with_special_characters",
        _tc("<function=sql_interpreter>\n<parameter=query>SELECT * FROM users WHERE name = 'John "
            "\"Doe\"'</parameter>\n</function>"),
        [("sql_interpreter", {"query": "SELECT * FROM users WHERE name = 'John \"Doe\"'"})], None),
    _neg("qwen3coder-cases-plain", "qwen3_coder", QCC, "test_plain_text", QC_TOOLS,
         "This is plain text test"),
    _qc("qwen3coder-bare-function", "test_single_tool_call", BOSTON_XML, BOSTON, None, QCC),
    _qc("qwen3coder-bare-function-prose", "test_single_tool_call_with_text",
        "Text prefix + tool call test\n\n" + BOSTON_XML, BOSTON, "Text prefix + tool call test",
        QCC),
    _qc("qwen3coder-bare-two", "test_double_tool_call",
        "Text prefix + double tool call test\n\n" + NY_SQL_XML.format(sep="") + "\n", NY_SQL,
        "Text prefix + double tool call test", QCC),
    _qc("qwen3coder-bare-fragmented", "test_random_fragmentation_stress_test",
        "Text prefix + random fragmentation stress test\n\n<function=get_current_weather>\n"
        "<parameter=location>San Francisco</parameter>\n</function>",
        [("get_current_weather", {"location": "San Francisco"})],
        "Text prefix + random fragmentation stress test", QCC),
    _qc("qwen3coder-implicit-param-close", "test_implicit_parameter_close",
        "Text prefix + implicit parameter close test\n\n<function=get_current_weather>\n"
        "<parameter=location>Paris\n<parameter=unit>celsius\n<parameter=days>3\n</function>",
        [("get_current_weather", {"location": "Paris", "unit": "celsius", "days": 3})],
        "Text prefix + implicit parameter close test", QCC),
    _qc("qwen3coder-single-quoted-json-value", "test_complex_schema_toolcall",
        "Text prefix + complex schema tool call test\n\n<function=TodoWrite>\n<parameter=todos>\n"
        '[\n {"content": "Buy a new car", "status": \'pending\'},\n {"content": "Buy a new house",'
        ' "status": "completed"}\n]\n</parameter>\n</function>\n\n',
        [("TodoWrite", {"todos": [{"content": "Buy a new car", "status": "pending"},
                                  {"content": "Buy a new house", "status": "completed"}]})],
        "Text prefix + complex schema tool call test", QCC),
]

# ---- GLM-4.5/4.6 and GLM-4.7 <arg_key>/<arg_value> -----------------------------------------
G4, G47 = "TestGlm4MoeDetector.", "TestGlm47MoeDetector."
G47F = "test/registered/function_call/test_glm47_moe_detector.py"
GLM_TOOLS = (tool("get_weather", {"city": S, "date": S}),)
TODO = (tool("todo_write", {"todos": A}),)
BJ: list[Call] = [("get_weather", {"city": "Beijing", "date": "2024-06-27"})]
BJ_SH: list[Call] = [*BJ, ("get_weather", {"city": "Shanghai", "date": "2024-06-28"})]
TASKS = [("1", "Check for hard-coded issues in the backend code", "in_progress"),
         ("2", "Check for hard-coded issues in the frontend code", "pending"),
         ("3", "Check for code violating the Single Responsibility Principle", "pending"),
         ("4", "Generate a rectification proposal report", "pending")]
TODOS: list[Call] = [("todo_write", {"todos": [{"id": i, "task": t, "status": s}
                                               for i, t, s in TASKS]})]
TODOS_JSON = ", ".join(f'{{"id": "{i}", "task": "{t}", "status": "{s}"}}' for i, t, s in TASKS)
TODOS_ESCAPED = TODOS_JSON.replace('"', '\\"')
WIN_TASK = "Check file at C:\\Users\\test.txt"
WIN: list[Call] = [("todo_write", {"todos": [{"id": "1", "task": WIN_TASK, "status": "pending"}]})]
WIN_ARG = '[{"id": "1", "task": "Check file at C:\\\\Users\\\\test.txt", "status": "pending"}]'
NL: list[Call] = [("todo_write", {"todos": [{"id": "1", "task": "Print \\n to see newline",
                                             "status": "pending"}]})]
NL_ARG = '[{"id": "1", "task": "Print \\\\n to see newline","status": "pending"}]'


def _g4(city: str, date: str) -> str:
    return (f"<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{city}</arg_value>\n"
            f"<arg_key>date</arg_key>\n<arg_value>{date}</arg_value>\n</tool_call>")


def _g47(name: str, *kv: tuple[str, str]) -> str:
    args = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in kv)
    return f"<tool_call>{name}{args}</tool_call>"


BJ47 = _g47("get_weather", ("city", "Beijing"), ("date", "2024-06-27"))
SH47 = _g47("get_weather", ("city", "Shanghai"), ("date", "2024-06-28"))
ESC = "test_array_argument_with_escaped_json"
GLM = [
    _case("glm45-single", "glm", MAIN, G4 + "test_single_tool_call", GLM_TOOLS,
          _g4("Beijing", "2024-06-27"), BJ, None),
    _case("glm45-two", "glm", MAIN, G4 + "test_multiple_tool_calls", GLM_TOOLS,
          _g4("Beijing", "2024-06-27") + _g4("Shanghai", "2024-06-28"), BJ_SH, None),
    _neg("glm45-undeclared", "glm", MAIN, G4 + "test_invalid_tool_call", GLM_TOOLS,
         "<tool_call>invalid_func\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
         "</tool_call>"),
    _case("glm45-array-json", "glm", MAIN, G4 + ESC, TODO,
          f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[{TODOS_JSON}]</arg_value>"
          "\n</tool_call>", TODOS, None),
    _case("glm45-array-escaped-json-literal-newline", "glm", MAIN, G4 + ESC, TODO,
          f"<tool_call>todo_write\\n<arg_key>todos</arg_key>\\n<arg_value>[{TODOS_ESCAPED}]"
          "</arg_value>\n</tool_call>", TODOS, None),
    _case("glm45-array-windows-path", "glm", MAIN, G4 + ESC, TODO,
          f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>{WIN_ARG}</arg_value>"
          "</tool_call>", WIN, None),
    _case("glm45-array-escaped-windows-path", "glm", MAIN, G4 + ESC, TODO,
          "<tool_call>todo_write\\n<arg_key>todos</arg_key>\\n<arg_value>"
          + WIN_ARG.replace('"', '\\"').replace("\\\\U", "\\\\\\\\U").replace("\\\\t", "\\\\\\\\t")
          + "</arg_value></tool_call>", WIN, None),
    _case("glm45-array-literal-backslash-n", "glm", MAIN, G4 + ESC, TODO,
          f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>{NL_ARG}</arg_value>"
          "</tool_call>", NL, None),
    _case("glm47-single", "glm", MAIN, G47 + "test_single_tool_call", GLM_TOOLS, BJ47, BJ, None),
    _case("glm47-two", "glm", MAIN, G47 + "test_multiple_tool_calls", GLM_TOOLS, BJ47 + SH47,
          BJ_SH, None),
    _neg("glm47-undeclared", "glm", MAIN, G47 + "test_invalid_tool_call", GLM_TOOLS,
         _g47("invalid_func", ("city", "Beijing"))),
    _case("glm47-array-json", "glm", G47F, G47 + ESC, TODO,
          f"<tool_call>todo_write<arg_key>todos</arg_key><arg_value>[{TODOS_JSON}]</arg_value>\n"
          "</tool_call>", TODOS, None),
    _case("glm47-array-escaped-json", "glm", G47F, G47 + ESC, TODO,
          f"<tool_call>todo_write<arg_key>todos</arg_key><arg_value>[{TODOS_ESCAPED}]</arg_value>"
          "\n</tool_call>", TODOS, None),
    _case("glm47-array-windows-path", "glm", G47F, G47 + ESC, TODO,
          _g47("todo_write", ("todos", WIN_ARG)), WIN, None),
    _case("glm47-array-literal-backslash-n", "glm", G47F, G47 + ESC, TODO,
          _g47("todo_write", ("todos", NL_ARG)), NL, None),
    _case("glm47-no-args", "glm", G47F, G47 + "test_no_arg_function_non_streaming",
          (tool("list_filenames", {}),), "<tool_call>list_filenames</tool_call>",
          [("list_filenames", {})], None),
    _case("glm47-split-prose-before", "glm", G47F, G47 + "test_mtp_func_and_string_split",
          (tool("create_task", {"title": S, "location": S}),),
          "I'll create a task." + _g47("create_task", ("title", "Go to Beijing"),
                                       ("location", "San Francisco")),
          [("create_task", {"title": "Go to Beijing", "location": "San Francisco"})],
          "I'll create a task."),
    _case("glm47-noarg-then-call", "glm", G47F, G47 + "test_mtp_noarg_and_multiple_calls",
          (tool("list_files", {}), tool("get_weather", {"city": S})),
          "<tool_call>list_files</tool_call>" + _g47("get_weather", ("city", "Beijing")),
          [("list_files", {}), ("get_weather", {"city": "Beijing"})], None),
    _case("glm47-number-and-array", "glm", G47F, G47 + "test_mtp_number_and_complex_json",
          (tool("create_todos", {"priority": NUM, "count": INT, "items": A}),),
          _g47("create_todos", ("priority", "5.5"), ("count", "10"),
               ("items", '[{"description": "TestTodo 1"}, {"description": "TestTodo 2"}]')),
          [("create_todos", {"priority": 5.5, "count": 10, "items": [
              {"description": "TestTodo 1"}, {"description": "TestTodo 2"}]})], None),
    _case("glm47-streamed-two", "glm", G47F, G47 + "test_streaming_multiple_tool_calls",
          GLM_TOOLS, BJ47 + SH47, BJ_SH, None),
    _case("glm47-empty-value", "glm", G47F, G47 + "test_boundary_empty_param_value",
          (tool("create_note", {"title": S, "content": S}),),
          _g47("create_note", ("title", "Test"), ("content", "")),
          [("create_note", {"title": "Test", "content": ""})], None),
    _case("glm47-char-split", "glm", G47F, G47 + "test_boundary_param_value_extreme_split",
          (tool("search", {"query": S}),), _g47("search", ("query", "New York")),
          [("search", {"query": "New York"})], None),
    _case("glm47-single-quotes-value", "glm", G47F,
          G47 + "test_boundary_param_value_with_special_chars",
          (tool("execute_command", {"command": S}),),
          _g47("execute_command", ("command", "echo 'Hello World'")),
          [("execute_command", {"command": "echo 'Hello World'"})], None),
    _case("glm47-ampersand-value", "glm", G47F,
          G47 + "test_boundary_param_value_with_special_chars",
          (tool("execute_command", {"command": S}),),
          _g47("execute_command", ("command", "echo Hello & World")),
          [("execute_command", {"command": "echo Hello & World"})], None),
    _case("glm47-deep-object", "glm", G47F, G47 + "test_boundary_json_deeply_nested",
          (tool("process_data", {"data": OBJ}),),
          _g47("process_data", ("data", '{"level1": {"level2": {"level3": {"level4": '
                                        '{"value": "deep"}}}}}')),
          [("process_data", {"data": {"level1": {"level2": {"level3": {"level4": {
              "value": "deep"}}}}}})], None),
    _case("glm47-empty-structures", "glm", G47F, G47 + "test_boundary_json_empty_structures",
          (tool("create_structure", {"empty_obj": OBJ, "empty_arr": A}),),
          _g47("create_structure", ("empty_obj", "{}"), ("empty_arr", "[]")),
          [("create_structure", {"empty_obj": {}, "empty_arr": []})], None),
]

# ---- LFM2 (TestLfm2Detector) ---------------------------------------------------------------
LF = "TestLfm2Detector."
LFM_TOOLS = (tool("get_weather", {"city": S, "unit": S}), tool("search", {"query": S}),
             tool("calculator", {"expression": S}))
LS, LE = "<|tool_call_start|>", "<|tool_call_end|>"


def _lf(name: str, test: str, body: str, calls: list[Call], content: str | None = None,
        pre: str = "", tools: tuple[dict[str, Any], ...] = LFM_TOOLS) -> PeerCase:
    return _case(name, "lfm2", MAIN, LF + test, tools, f"{pre}{LS}{body}{LE}", calls, content)


LFM2 = [
    _lf("lfm2-pythonic", "test_detect_and_parse_pythonic_simple", '[get_weather(city="Paris")]',
        [("get_weather", {"city": "Paris"})]),
    _lf("lfm2-pythonic-two-args", "test_detect_and_parse_pythonic_multiple_args",
        '[get_weather(city="London", unit="celsius")]',
        [("get_weather", {"city": "London", "unit": "celsius"})]),
    _lf("lfm2-pythonic-no-args", "test_detect_and_parse_pythonic_no_args", "[get_time()]",
        [("get_time", {})], tools=(*LFM_TOOLS, tool("get_time", {}))),
    _lf("lfm2-pythonic-two", "test_detect_and_parse_pythonic_multiple_calls",
        '[get_weather(city="Paris"), search(query="restaurants")]',
        [("get_weather", {"city": "Paris"}), ("search", {"query": "restaurants"})]),
    _lf("lfm2-prose-before", "test_detect_and_parse_with_normal_text_before",
        '[get_weather(city="Tokyo")]', [("get_weather", {"city": "Tokyo"})],
        "Let me check the weather for you.", pre="Let me check the weather for you. "),
    _lf("lfm2-apostrophe-in-value", "test_detect_and_parse_special_characters_in_value",
        "[search(query=\"what's the weather?\")]", [("search", {"query": "what's the weather?"})]),
    _lf("lfm2-calculator", "test_detect_and_parse_numeric_values",
        '[calculator(expression="5 * 7")]', [("calculator", {"expression": "5 * 7"})]),
    _lf("lfm2-json", "test_detect_and_parse_json_simple",
        '[{"name": "get_weather", "arguments": {"city": "Berlin"}}]',
        [("get_weather", {"city": "Berlin"})]),
    _lf("lfm2-json-two", "test_detect_and_parse_json_multiple_calls",
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "search", '
        '"arguments": {"query": "hotels"}}]',
        [("get_weather", {"city": "Paris"}), ("search", {"query": "hotels"})]),
    _lf("lfm2-json-parameters-key", "test_detect_and_parse_json_with_parameters_key",
        '[{"name": "get_weather", "parameters": {"city": "Madrid"}}]',
        [("get_weather", {"city": "Madrid"})]),
    _neg("lfm2-no-call", "lfm2", MAIN, LF + "test_detect_and_parse_no_tool_call", LFM_TOOLS,
         "This is just regular text without any tool calls."),
    _neg("lfm2-undeclared", "lfm2", MAIN, LF + "test_detect_and_parse_unknown_function",
         LFM_TOOLS, f'{LS}[unknown_function(arg="value")]{LE}'),
    _neg("lfm2-empty-block", "lfm2", MAIN, LF + "test_detect_and_parse_empty_content", LFM_TOOLS,
         f"{LS}{LE}"),
    _case("lfm2-two-blocks-text-between", "lfm2", MAIN,
          LF + "test_detect_and_parse_multiple_blocks", LFM_TOOLS,
          f'{LS}[get_weather(city="Paris")]{LE} Some text {LS}[search(query="food")]{LE}',
          [("get_weather", {"city": "Paris"}), ("search", {"query": "food"})], "Some text"),
    _lf("lfm2-json-object-no-list", "test_streaming_json_complete_in_one_chunk",
        '{"name": "get_weather", "arguments": {"city": "Rome"}}',
        [("get_weather", {"city": "Rome"})]),
    _lf("lfm2-json-object-split", "test_streaming_json_split_across_chunks",
        '{"name": "get_weather", "arguments": {"city": "Vienna"}}',
        [("get_weather", {"city": "Vienna"})]),
    _lf("lfm2-json-object-prose-before", "test_streaming_json_normal_text_before_tool_call",
        '{"name": "get_weather", "arguments": {"city": "Amsterdam"}}',
        [("get_weather", {"city": "Amsterdam"})], "I'll check the weather.",
        pre="I'll check the weather. "),
    _lf("lfm2-pythonic-split", "test_streaming_pythonic_split_across_chunks",
        '[get_weather(city="Munich")]', [("get_weather", {"city": "Munich"})]),
    _lf("lfm2-pythonic-two-streamed", "test_streaming_pythonic_multiple_calls",
        '[get_weather(city="Paris"), search(query="hotels")]',
        [("get_weather", {"city": "Paris"}), ("search", {"query": "hotels"})]),
]

# ---- GigaChat3 (TestGigaChat3Detector) -----------------------------------------------------
GC = "TestGigaChat3Detector."
GC_TOOLS = (tool("manage_user_memory", {"content": STR_OR_NULL, "action": S, "id": {"anyOf": [
    {"type": "string", "format": "uuid"}, {"type": "null"}]}}),
    tool("get_weather", {"city": S, "unit": S}))
GCM = "<|message_sep|>\n\nfunction call<|role_sep|>\n"
MEMO = '{"name": "manage_user_memory", "arguments": {"action": "create", "id": "preferences"}}'
MEMO_CALL: list[Call] = [("manage_user_memory", {"action": "create", "id": "preferences"})]


def _gc(name: str, test: str, text: str, calls: list[Call], content: str | None) -> PeerCase:
    return _case(name, "gigachat3", MAIN, GC + test, GC_TOOLS, text, calls, content)


GIGACHAT = [
    _neg("gigachat3-no-call", "gigachat3", MAIN, GC + "test_detect_and_parse_no_tool_call",
         GC_TOOLS, "How can I help you today?"),
    _gc("gigachat3-simple", "test_detect_and_parse_simple_tool_call", GCM + MEMO, MEMO_CALL, None),
    _gc("gigachat3-empty-args", "test_detect_and_parse_parameterless_tool_call",
        GCM + '{"name": "manage_user_memory", "arguments": {}}', [("manage_user_memory", {})],
        None),
    _gc("gigachat3-prose-before", "test_detect_and_parse_with_content_before",
        "I'll check that for you." + GCM + MEMO, MEMO_CALL, "I'll check that for you."),
    _gc("gigachat3-eos", "test_detect_and_parse_with_eos_token", GCM + MEMO + "</s>", MEMO_CALL,
        None),
    _neg("gigachat3-invalid-json", "gigachat3", MAIN, GC + "test_detect_and_parse_invalid_json",
         GC_TOOLS, GCM + '{"name": "manage_user_memory", "arguments": {invalid json}}'),
    _gc("gigachat3-streamed-prose-before", "test_streaming_with_content_before",
        "I'll help you." + GCM + '{"name": "get_weather", "arguments": {"city": "Tokyo"}}',
        [("get_weather", {"city": "Tokyo"})], "I'll help you."),
]

# ---- gpt-oss harmony (test_gpt_oss_detector.py) --------------------------------------------
GO = "test/registered/function_call/test_gpt_oss_detector.py"
GO_TOOLS = (tool("read_file", {"files": A}),)
HARMONY = [
    _case("gptoss-final-after-call-dropped", "harmony", GO,
          "TestGptOssDetector.test_detect_and_parse_truncate_normal", GO_TOOLS,
          "<|channel|>analysis<|message|>Reasoning...<|end|><|start|>assistant<|channel|>commentary"
          ' to=functions.read_file <|constrain|>json<|message|>{\n  "files": []\n}<|call|>'
          "<|start|>assistant<|channel|>final<|message|>This text should be truncated.",
          [("read_file", {"files": []})], None),
    _case("gptoss-text-after-call-dropped", "harmony", GO,
          "TestGptOssDetector.test_parse_streaming_fast_path_fix", GO_TOOLS,
          "<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
          "<|message|>{}<|call|>This is normal text that should be ignored.",
          [("read_file", {})], None),
]

# ---- MiniMax M2 (test_minimax_m2_detector.py) ----------------------------------------------
MM = "test/registered/function_call/test_minimax_m2_detector.py"
MMT = "TestMinimaxM2DetectorBugs."
MO, MC = "<minimax:tool_call>", "</minimax:tool_call>"
UNION = (tool("the_tool", {"args": STR_OR_NULL}),)
CTX = (tool("context_info", {"metadata_only": B}),)


def _mm(name: str, param: str, value: str) -> str:
    return f'<invoke name="{name}"><parameter name="{param}">{value}</parameter></invoke>'


MINIMAX = [
    _case("minimax-m2-union-keeps-string", "minimax", MM,
          MMT + "test_anyof_with_null_should_preserve_string_value", UNION,
          MO + _mm("the_tool", "args", "hi") + MC, [("the_tool", {"args": "hi"})], None),
    _case("minimax-m2-union-null", "minimax", MM,
          MMT + "test_anyof_with_null_should_allow_explicit_null", UNION,
          MO + _mm("the_tool", "args", "null") + MC, [("the_tool", {"args": None})], None),
    _case("minimax-m2-no-block-close", "minimax", MM,
          MMT + "test_incomplete_tool_call_should_not_leak_to_normal_text", CTX,
          "[Pasted ~4 lines]" + MO + _mm("context_info", "metadata_only", "false"),
          [("context_info", {"metadata_only": False})], "[Pasted ~4 lines]"),
    _case("minimax-m2-text-around", "minimax", MM,
          MMT + "test_complete_tool_call_should_not_leak_end_marker", CTX,
          "Here is some text." + MO + _mm("context_info", "metadata_only", "true") + MC
          + "More text after.", [("context_info", {"metadata_only": True})],
          "Here is some text.\nMore text after."),
    _case("minimax-m2-closing-tag-in-value", "minimax", MM,
          MMT + "test_parameter_value_with_closing_tag_substring",
          (tool("test_func", {"content": S}),),
          MO + _mm("test_func", "content", "This text contains </parameter> in it") + MC,
          [("test_func", {"content": "This text contains </parameter> in it"})], None),
    _case("minimax-m2-html-value", "minimax", MM, MMT + "test_parameter_value_with_xml_content",
          (tool("process_html", {"html": S}),),
          MO + _mm("process_html", "html", "<div>Hello</div>") + MC,
          [("process_html", {"html": "<div>Hello</div>"})], None),
    _case("minimax-m2-cut-before-invoke-close", "minimax", MM,
          MMT + "test_streaming_incomplete_tool_call_should_buffer", CTX,
          "Normal text before" + MO + '<invoke name="context_info">'
          '<parameter name="metadata_only">false</parameter>', [], "Normal text before"),
    _case("minimax-m2-streamed-text-around", "minimax", MM,
          MMT + "test_streaming_complete_tool_call_emits_properly", CTX,
          "Text before " + MO + _mm("context_info", "metadata_only", "true") + MC + " Text after",
          [("context_info", {"metadata_only": True})], "Text before\nText after"),
    _case("minimax-m2-union-object", "minimax", MM, MMT + "test_complex_anyof_with_object_and_null",
          (tool("complex_func", {"data": {"anyOf": [
              {"type": "object", "properties": {"key": S}}, {"type": "null"}]}}),),
          MO + _mm("complex_func", "data", '{"key": "value"}') + MC,
          [("complex_func", {"data": {"key": "value"}})], None),
    _case("minimax-m2-array", "minimax", MM, MMT + "test_array_type_in_parameters",
          (tool("array_func", {"items": A}),),
          MO + _mm("array_func", "items", '[1, 2, 3, "four"]') + MC,
          [("array_func", {"items": [1, 2, 3, "four"]})], None),
]

# ---- JSON array (TestJsonArrayParser) ------------------------------------------------------
JA = "TestJsonArrayParser."
JSON_ARRAY = [
    _case("jsonarray-three", "bare_json", MAIN,
          JA + "test_three_tool_calls_separate_chunks_with_commas", PY_TOOLS,
          '[{"name": "get_weather", "parameters": {"location": "Tokyo"}},{"name": "search", '
          '"parameters": {"query": "restaurants"}},{"name": "get_weather", "parameters": '
          '{"location": "Paris"}}]',
          [("get_weather", {"location": "Tokyo"}), ("search", {"query": "restaurants"}),
           ("get_weather", {"location": "Paris"})], None),
    _case("jsonarray-brace-in-string", "bare_json", MAIN, JA + "test_braces_in_strings", PY_TOOLS,
          '[{"name": "get_weather", "parameters": {"location": "has } inside"}}]',
          [("get_weather", {"location": "has } inside"})], None),
    _case("jsonarray-leading-whitespace", "bare_json", MAIN,
          JA + "test_parse_streaming_increment_whitespace_handling", PY_TOOLS,
          '  [{"name": "get_weather", "parameters": {"location": "Tokyo"}}]  ',
          [("get_weather", {"location": "Tokyo"})], None),
    _case("jsonarray-extra-nested-arg", "bare_json", MAIN,
          JA + "test_parse_streaming_increment_nested_objects", PY_TOOLS,
          '[{"name": "get_weather", "parameters": {"location": "Tokyo", "nested": {"key": '
          '"value"}}}]',
          [("get_weather", {"location": "Tokyo", "nested": {"key": "value"}})], None),
    _case("jsonarray-two", "bare_json", MAIN, JA + "test_json_parsing_with_commas", PY_TOOLS,
          '[{"name": "get_weather", "parameters": {"location": "Tokyo"}},{"name": "get_weather", '
          '"parameters": {"location": "Paris"}}]',
          [("get_weather", {"location": "Tokyo"}), ("get_weather", {"location": "Paris"})], None),
]

# ---- Qwen 2.5 / Hermes <tool_call> (unit/function_call/test_qwen25_detector.py) ------------
Q25 = "test/registered/unit/function_call/test_qwen25_detector.py"
Q25T = "TestQwen25Detector."
Q25_TOOLS = (tool("get_weather", {"city": S, "unit": S}), tool("search", {"query": S}))
BEIJING = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>'
QWEN25 = [
    _case("qwen25-single", "hermes", Q25, Q25T + "test_single_tool_call", Q25_TOOLS, BEIJING,
          [("get_weather", {"city": "Beijing"})], None),
    _case("qwen25-two", "hermes", Q25, Q25T + "test_multiple_tool_calls", Q25_TOOLS,
          BEIJING + '\n<tool_call>\n{"name": "search", "arguments": {"query": "restaurants"}}\n'
          "</tool_call>",
          [("get_weather", {"city": "Beijing"}), ("search", {"query": "restaurants"})], None),
    _case("qwen25-prose-before", "hermes", Q25, Q25T + "test_tool_call_with_preceding_text",
          Q25_TOOLS, 'Let me check the weather.\n<tool_call>\n{"name": "get_weather", "arguments": '
          '{"city": "Shanghai"}}\n</tool_call>', [("get_weather", {"city": "Shanghai"})],
          "Let me check the weather."),
    _neg("qwen25-no-call", "hermes", Q25, Q25T + "test_no_tool_call", Q25_TOOLS,
         "Hello, how can I help you today?"),
    _neg("qwen25-malformed-json", "hermes", Q25, Q25T + "test_malformed_json", Q25_TOOLS,
         "<tool_call>\n{invalid json}\n</tool_call>"),
    _case("qwen25-extra-whitespace", "hermes", Q25, Q25T + "test_tool_call_with_extra_whitespace",
          Q25_TOOLS, '<tool_call>\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}}  \n'
          "</tool_call>", [("get_weather", {"city": "Tokyo"})], None),
]

# ---- InternLM (unit/function_call/test_internlm_detector.py) -------------------------------
ILM = "test/registered/unit/function_call/test_internlm_detector.py"
ILMT = "TestInternlmDetectorFinishFlush."
INTERNLM = [
    _neg("internlm-cut-off-call-flushed", "internlm2", ILM,
         ILMT + "test_partial_tool_call_at_end_is_flushed", W1,
         "hi <|action_start|> <|plugin|>get_weather('par"),
    _case("internlm-complete", "internlm2", ILM,
          ILMT + "test_complete_call_not_duplicated_at_finish", W1,
          '<|action_start|> <|plugin|>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
          "<|action_end|>", [("get_weather", {"city": "Paris"})], None),
]

# ---- Step3 (unit/function_call/test_step3_detector*.py) ------------------------------------
ST3 = "test/registered/unit/function_call/test_step3_detector.py"
ST3V = "test/registered/unit/function_call/test_step3_detector_param_values.py"
RUN_CODE = (tool("run_code", {"code": S, "lang": S}),)
LOOKUP = (tool("lookup", {"user_id": S, "order_id": S, "count": NUM, "index": INT}),)


def _st3(name: str, *kv: tuple[str, str]) -> str:
    inner = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in kv)
    return ("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
            f'<steptml:invoke name="{name}">{inner}</steptml:invoke>'
            "<｜tool_call_end｜><｜tool_calls_end｜>")


STEP3 = [
    _case("step3-lt-in-value", "step3", ST3V,
          "TestStep3DetectorParamValuesWithLt.test_detect_and_parse_value_containing_lt", RUN_CODE,
          _st3("run_code", ("code", "if a < b: print(a)"), ("lang", "python")),
          [("run_code", {"code": "if a < b: print(a)", "lang": "python"})], None),
    _case("step3-multiline-lt", "step3", ST3V,
          "TestStep3DetectorParamValuesWithLt.test_detect_and_parse_multiline_value_with_lt",
          RUN_CODE, _st3("run_code", ("code", "x = 1\nif x < 2:\n    print(x)")),
          [("run_code", {"code": "x = 1\nif x < 2:\n    print(x)"})], None),
    _case("step3-two-params", "step3", ST3V,
          "TestStep3DetectorParamValuesWithLt.test_detect_and_parse_multi_param_pairing_unchanged",
          RUN_CODE, _st3("run_code", ("code", "print(1)"), ("lang", "python")),
          [("run_code", {"code": "print(1)", "lang": "python"})], None),
    _case("step3-numeric-string-ids", "step3", ST3,
          "TestStep3Detector.test_string_typed_numeric_ids_preserved", LOOKUP,
          _st3("lookup", ("user_id", "007"), ("order_id", "12345678901234567890")),
          [("lookup", {"user_id": "007", "order_id": "12345678901234567890"})], None),
    _case("step3-number-typed", "step3", ST3, "TestStep3Detector.test_number_typed_still_parses",
          LOOKUP, _st3("lookup", ("user_id", "abc"), ("count", "42"), ("index", "5")),
          [("lookup", {"user_id": "abc", "count": 42, "index": 5})], None),
    _case("step3-streamed-ids-and-index", "step3", ST3,
          "TestStep3Detector.test_streaming_preserves_numeric_string_ids", LOOKUP,
          _st3("lookup", ("user_id", "007"), ("order_id", "12345678901234567890"), ("index", "5")),
          [("lookup", {"user_id": "007", "order_id": "12345678901234567890", "index": 5})], None),
]

# ---- Kimi K3 XTML (test_kimik3_detector.py) ------------------------------------------------
K3 = "test/registered/function_call/test_kimik3_detector.py"
K3_TOOLS = (tool("python", {"code": S}),)
R_OPEN, R_CLOSE = "<|open|>response<|sep|>", "<|close|>response<|sep|>"
T_OPEN, T_CLOSE = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"


def _k3(name: str, index: int, *args: tuple[str, str, str]) -> str:
    body = "".join(f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>'
                   for k, t, v in args)
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{body}<|close|>call<|sep|>'


KIMI_K3 = [
    _case("kimik3-single-typed", "kimi_k3", K3, "test_detect_and_parse_single_call", K3_TOOLS,
          f"{R_OPEN}Let me run it.{R_CLOSE}{T_OPEN}"
          + _k3("python", 1, ("code", "string", "print(1)"), ("opts", "object", '{"a": 1}'))
          + T_CLOSE, [("python", {"code": "print(1)", "opts": {"a": 1}})], "Let me run it."),
    _case("kimik3-no-tools-channel", "kimi_k3", K3, "test_detect_and_parse_no_tools_channel",
          K3_TOOLS, f"{R_OPEN}hi there{R_CLOSE}<|close|>message<|sep|>", [], "hi there"),
    _case("kimik3-two", "kimi_k3", K3, "test_detect_and_parse_multiple_calls", K3_TOOLS,
          T_OPEN + _k3("python", 1, ("code", "string", "a")) + _k3("python", 2, (
              "code", "string", "b")) + T_CLOSE,
          [("python", {"code": "a"}), ("python", {"code": "b"})], None),
    _case("kimik3-unclosed-section", "kimi_k3", K3, "test_detect_and_parse_unclosed_tools_section",
          K3_TOOLS, T_OPEN + _k3("python", 1, ("code", "string", "x")),
          [("python", {"code": "x"})], None),
    _case("kimik3-typed-and-bad-json", "kimi_k3", K3, "test_non_string_arg_json_decoding",
          K3_TOOLS, T_OPEN + _k3("python", 1, ("n", "number", "42"), ("flag", "boolean", "true"),
                                 ("bad", "object", "{not json")) + T_CLOSE,
          [("python", {"n": 42, "flag": True, "bad": "{not json"})], None),
    _case("kimik3-streamed-response-then-call", "kimi_k3", K3, "test_streaming_split_markers",
          K3_TOOLS, f"{R_OPEN}Hello!{R_CLOSE}{T_OPEN}"
          + _k3("python", 1, ("code", "string", "print(2)")) + T_CLOSE,
          [("python", {"code": "print(2)"})], "Hello!"),
    _neg("kimik3-plain", "kimi_k3", K3, "test_streaming_plain_text_only", K3_TOOLS,
         "just a plain reply"),
]


_BARE_PY = ("A bare call must open and end a line (formats/bare.py; the corpus negative "
            "bare_call_followed_by_prose): inside a sentence it reads as an example, and stays "
            "text; SGLang's pythonic detector takes a list anywhere in prose.")
_BARE_JSON = ("A bare call must open and end a line (formats/bare.py; the corpus negative "
              "bare_call_followed_by_prose): followed by words on its line it reads as an "
              "example, and stays text; SGLang's llama32 detector takes it.")
_THINK = ("BEHAVIOUR.md 4.1: latchgate has no reasoning parser and keeps the text before the call "
          "(and before `</think>`) as it was; SGLang's reasoning parser moves it to reasoning.")
_K3_WRAP = ("Kimi K3's `<|open|>response<|sep|>` has been relayed before the tools start and stays "
            "(proxy/toolcalls/formats/kimi.py, BEHAVIOUR.md 4.1 remaining text kept); SGLang "
            "strips the template wrappers.")
MARKS: dict[str, dict[str, str]] = {
    **{f"sglang-pythonic-{n}": {"differs": _BARE_PY} for n in (
        "complete", "text-before", "partial", "text-after", "two-lists", "partial-nested")},
    "sglang-pythonic-python-start-prose-after": {"differs": (
        "BEHAVIOUR.md 4.1 keeps the remaining text trimmed; latchgate joins the text either side "
        "of a removed call with a newline where SGLang keeps both spaces.")},
    "sglang-llama32-trailing-text": {"differs": _BARE_JSON},
    "sglang-llama32-invalid-then-valid": {"differs": _BARE_JSON},
    "sglang-kimik2-think-unclosed-then-call": {"differs": _THINK},
    "sglang-kimik2-think-in-text-content-then-call": {"differs": _THINK},
    "sglang-gptoss-text-after-call-dropped": {"differs": (
        "BEHAVIOUR.md 4.1: the remaining text stays as content; SGLang's gpt-oss detector drops "
        "all text after a call.")},
    "sglang-minimax-m2-cut-before-invoke-close": {"differs": (
        "BEHAVIOUR.md 4.1: a call cut off before `</invoke>` is no call and the reply is left "
        "unchanged; SGLang swallows the partial markup.")},
    "sglang-kimik3-single-typed": {"differs": _K3_WRAP},
    "sglang-kimik3-streamed-response-then-call": {"differs": _K3_WRAP},
    "sglang-kimik3-no-tools-channel": {"differs": (
        "BEHAVIOUR.md 4.1: a reply with no call is left untouched; SGLang strips Kimi K3's "
        "response/message wrappers from plain text.")},
    "sglang-gptoss-final-after-call-dropped": {"differs": (
        "SGLang drops the analysis channel before the call and the final text after it; "
        "latchgate keeps text before a call as it was and the final text as content (BEHAVIOUR.md "
        "4.1), only the final message's header goes.")},
}

CASES: list[PeerCase] = [replace(c, **MARKS.get(c.name, {})) for c in [
    *PYTHONIC, *MISTRAL, *BASE, *LLAMA, *KIMI, *DEEPSEEK, *DSML, *QWEN3_CODER, *GLM, *LFM2,
    *GIGACHAT, *HARMONY, *MINIMAX, *JSON_ARRAY, *QWEN25, *INTERNLM, *STEP3, *KIMI_K3,
]]
assert not set(MARKS) - {c.name for c in CASES}
