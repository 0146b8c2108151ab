"""vLLM's own tool-parser tests (vllm-project/vllm tests/tool_parsers/, the successor of
tests/entrypoints/openai/tool_parsers/ and tests/tool_use/), transcribed as data: the model's
text, the tools the test declared (or, where it declared none, the tools its expected calls
name, typed from their values), and the calls and content vLLM's parser is expected to give.
Where a test leaves the content unasserted, the content is what the text holds besides the
calls. Streaming tests are transcribed as their whole text and final calls."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import Call, tool
from tests.toolcall_peers import PeerCase

_REPO = "vllm-project/vllm tests/tool_parsers/"
S = {"type": "string"}
INT = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}
A = {"type": "array"}
OBJ = {"type": "object"}


def _type(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return B
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return N
    if isinstance(value, str):
        return S
    if isinstance(value, list):
        return A
    if isinstance(value, dict):
        return OBJ
    return {}


def _infer(calls: list[Call]) -> tuple[dict[str, Any], ...]:
    """The tools the expected calls name, each argument typed from its value."""
    props: dict[str, dict[str, Any]] = {}
    for name, args in calls:
        slot = props.setdefault(name, {})
        for key, value in args.items():
            slot.setdefault(key, _type(value))
    return tuple(tool(name, p) for name, p in props.items())


def _case(
    name: str,
    text: str,
    calls: list[Call],
    content: str | None,
    src: str,
    family: str,
    tools: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
    **kw: Any,
) -> PeerCase:
    """`src` is "file.py::test": the file is under tests/tool_parsers/."""
    declared = tuple(tools) or _infer(calls) or (tool("get_weather", {"city": S}),)
    return PeerCase(f"vllm-{name}", text, calls, content, declared, _REPO + src, family, **kw)


def _neg(name: str, text: str, src: str, family: str, **kw: Any) -> PeerCase:
    """No call expected: the text comes back unchanged."""
    return _case(name, text, [], text, src, family, **kw)


# Shared by the ToolParserTestConfig suites (tests/tool_parsers/common_tests.py).
VARIOUS: dict[str, Any] = {
    "string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True,
    "null_field": None, "array_field": ["a", "b", "c"], "object_field": {"nested": "value"},
    "empty_array": [], "empty_object": {},
}  # fmt: skip
VARIOUS_TOOL = tool("test_function", {
    "string_field": S, "int_field": INT, "float_field": N, "bool_field": B,
    "null_field": {"type": "null"}, "array_field": A, "object_field": OBJ, "empty_array": A,
    "empty_object": OBJ,
})  # fmt: skip
ESCAPED: dict[str, Any] = {
    "quoted": 'He said "hello"', "path": "C:\\\\Users\\\\file.txt", "newline": "line1\nline2",
    "unicode": "emoji: 🎉",
}  # fmt: skip
TOKYO: list[Call] = [("get_weather", {"city": "Tokyo"})]
TOKYO2: list[Call] = [*TOKYO, ("get_time", {"timezone": "Asia/Tokyo"})]
PLAIN = "This is a regular response without any tool calls."

# --- hermes (test_hermes_tool_parser.py) -------------------------------------------------

_H = "test_hermes_tool_parser.py::"
FINAL: list[Call] = [("final_answer", {"trigger": True})]
FINAL_TOOL = (tool("final_answer", {"trigger": B}),)
HERMES = [
    _neg("hermes-just-forward-text",
         "This is some prior text that has nothing to do with tool calling.",
         _H + "test_hermes_parser_streaming_just_forward_text", "hermes"),
    _case("hermes-bug-19056",
          '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>',
          FINAL, None, _H + "test_hermes_parser_streaming_failure_case_bug_19056", "hermes"),
    _case("hermes-streaming-location",
          '<tool_call>{"name": "get_current_temperature","arguments": {"location":'
          '"San Francisco, California, United States", "unit": "celsius"}}</tool_call>',
          [("get_current_temperature",
            {"location": "San Francisco, California, United States", "unit": "celsius"})],
          None, _H + "test_hermes_parser_streaming", "hermes"),
    _case("hermes-content-then-call",
          'Sure, let me check the weather.<tool_call>{"name": "get_weather", '
          '"arguments": {"city": "NYC"}}</tool_call>',
          [("get_weather", {"city": "NYC"})], "Sure, let me check the weather.",
          _H + "test_hermes_streaming_content_then_tool_call_with_stream_interval", "hermes"),
    _case("hermes-two-calls-same-tool",
          '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
          '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
          [("search", {"q": "cats"}), ("search", {"q": "dogs"})], None,
          _H + "test_hermes_streaming_multiple_tool_calls_with_stream_interval", "hermes"),
    _neg("hermes-no-tool-call", "This is not a tool call.",
         _H + "test_hermes_parser_non_streaming_no_tool_call", "hermes", tools=FINAL_TOOL),
    _case("hermes-until-eos",
          '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
          FINAL, None, _H + "test_hermes_parser_non_streaming_tool_call_until_eos", "hermes"),
    _neg("hermes-invalid-json",
         '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}',
         _H + "test_hermes_parser_non_streaming_tool_call_invalid_json", "hermes",
         tools=FINAL_TOOL),
    _case("hermes-serialized-arguments",
          '<tool_call>\n{"name": "get_db_config", '
          '"arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
          [("get_db_config", {"param": "max_connections"})], None,
          _H + "test_hermes_parser_non_streaming_serialized_arguments", "hermes"),
    _case("hermes-bare-string-arguments",
          '<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>',
          [("do_thing", {"<unparseable>": '"hello"'})], None,
          _H + "test_hermes_parser_non_streaming_bare_string_arguments", "hermes",
          tools=(tool("do_thing", {}),),
          differs=("Arguments that are a JSON string not holding an object are passed through "
                   "unchanged and flagged, not re-encoded as a JSON string (BEHAVIOUR.md 4.2).")),
    _case("hermes-content-and-call-one-chunk",
          'Hi!<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>',
          [("f", {"x": 1})], "Hi!",
          _H + "test_hermes_streaming_content_and_tool_call_in_single_chunk", "hermes"),
]

# --- mistral (test_mistral_tool_parser.py) -----------------------------------------------

_M = "test_mistral_tool_parser.py::"
SF = {"city": "San Francisco", "state": "CA", "unit": "celsius"}
ADD: list[Call] = [("add", {"a": 3.5, "b": 4})]
WEATHER_SF: list[Call] = [("get_current_weather", SF)]
BASH = {"command": "print(\"hello world!\")\nre.compile(r'{}')"}
MISTRAL = [
    _neg("mistral-no-tools", "This is a test", _M + "test_extract_tool_calls_no_tools",
         "mistral", tools=_infer(ADD)),
    _case("mistral-pre-v11-single-add",
          '[TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}]', ADD, None,
          _M + "test_extract_tool_calls_pre_v11_tokenizer[single_tool_add]", "mistral"),
    _case("mistral-pre-v11-argument-before-name",
          '[TOOL_CALLS] [{"arguments":{"city": "San Francisco", "state": "CA", '
          '"unit": "celsius"}, "name": "get_current_weather"}]', WEATHER_SF, None,
          _M + "test_extract_tool_calls_pre_v11_tokenizer[argument_before_name]", "mistral"),
    _case("mistral-pre-v11-name-in-argument",
          '[TOOL_CALLS] [{"arguments":{"name": "John Doe"}, "name": "get_age"}]',
          [("get_age", {"name": "John Doe"})], None,
          _M + "test_extract_tool_calls_pre_v11_tokenizer"
          "[argument_before_name_and_name_in_argument]", "mistral"),
    _case("mistral-pre-v11-multiple",
          '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": '
          '"get_current_weather", "arguments":{"city": "San Francisco", "state": "CA", '
          '"unit": "celsius"}}]', ADD + WEATHER_SF, None,
          _M + "test_extract_tool_calls_pre_v11_tokenizer[multiple_tools]", "mistral"),
    _case("mistral-pre-v11-content-before",
          'Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]',
          [("add", {"a": 1, "b": 2})], "Hello",
          _M + "test_extract_tool_calls_pre_v11_tokenizer[content_before_tool]", "mistral"),
    _case("mistral-pre-v11-trailing-data",
          '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", '
          '"state": "TX", "unit": "fahrenheit"}}]\nextra trailing data',
          [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
          "\nextra trailing data",
          _M + "test_extract_tool_calls_streaming_pre_v11_tokenizer[trailing_data_after_json]",
          "mistral"),
    _case("mistral-pre-v11-trailing-data-dropped",
          '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", '
          '"state": "TX", "unit": "fahrenheit"}}]\nextra trailing data',
          [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
          None, _M + "test_extract_tool_calls_pre_v11_tokenizer[trailing_data_after_json]",
          "mistral",
          differs=("Text after the recovered calls stays as content; vLLM's non-streaming path "
                   "drops it while its streaming path keeps it (BEHAVIOUR.md 4.1).")),
    _case("mistral-pre-v11-regex-fallback",
          '[TOOL_CALLS]  junk [{"name": "add", "arguments":{"a": 1, "b": 2}}] trail',
          [("add", {"a": 1, "b": 2})], "junk  trail",
          _M + "test_extract_tool_calls_pre_v11_regex_fallback", "mistral",
          differs=("A marker's calls start at the marker (BEHAVIOUR.md 4.1: a string-aware scan "
                   "from the marker, no search for a list anywhere after it): words between "
                   "them make the reply text; vLLM's fallback regex finds the list further on.")),
    _case("mistral-pre-v11-not-json", "[TOOL_CALLS] not json at all", [], "not json at all",
          _M + "test_extract_tool_calls_pre_v11_regex_fallback_fails", "mistral",
          tools=_infer(ADD),
          differs=("Nothing is recovered, so the reply is left untouched, marker included; vLLM "
                   "strips the marker (BEHAVIOUR.md 4.1).")),
    _case("mistral-v11-single-add", '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}',
          [("add_this_and_that", {"a": 3.5, "b": 4})], None,
          _M + "test_extract_tool_calls[single_tool_add]", "mistral"),
    _case("mistral-v11-single-weather",
          '[TOOL_CALLS]get_current_weather{"city": "San Francisco", "state": "CA", '
          '"unit": "celsius"}', WEATHER_SF, None,
          _M + "test_extract_tool_calls[single_tool_weather]", "mistral"),
    _case("mistral-v11-multiple",
          '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}',
          [*ADD, ("multiply", {"a": 3, "b": 6})], None,
          _M + "test_extract_tool_calls[multiple_tool_calls]", "mistral"),
    _case("mistral-v11-complex-truncated",
          'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"',
          [("bash", {"<unparseable>":
                     '{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')'})],
          "hi{hi", _M + "test_extract_tool_calls[complex]", "mistral",
          tools=(tool("bash", {"command": S}),),
          differs=("A call whose JSON never closes, with finish_reason stop, stays as text like a "
                   "broken sibling (BEHAVIOUR.md 4.1; tests/toolcall_families/kimi.py "
                   "kimi_k2_broken_json_sibling_stays_text); vLLM emits the broken arguments.")),
    _case("mistral-v11-braces-in-string",
          'hi{hi[TOOL_CALLS]bash{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"}',
          [("bash", BASH)], "hi{hi", _M + "test_extract_tool_calls[wrong_json]", "mistral"),
    _case("mistral-v11-without-args", "[TOOL_CALLS]toolname_no_args", [], None,
          _M + "test_extract_tool_calls_v11_without_args_skipped", "mistral",
          tools=(tool("toolname_no_args", {}),),
          differs=("Nothing is recovered, so the reply is left untouched; vLLM swallows the "
                   "marker and the bare name (BEHAVIOUR.md 4.1).")),
    _case("mistral-pre-v11-spaced-json",
          '[TOOL_CALLS]  [ {"name":"add" , "arguments" : {"a": 3, "b": 4} } ]',
          [("add", {"a": 3, "b": 4})], None,
          _M + "test_extract_tool_calls_streaming_pre_v11_tokenizer[single_tool_add]",
          "mistral"),
    _case("mistral-pre-v11-string-args",
          '[TOOL_CALLS] [{"name": "add", "arguments":{"a": "3", "b": "4"}}]',
          [("add", {"a": "3", "b": "4"})], None,
          _M + "test_extract_tool_calls_streaming_pre_v11_tokenizer[single_tool_add_strings]",
          "mistral"),
    _case("mistral-v11-content-before", 'bla[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}',
          [("add_this_and_that", {"a": 3.5, "b": 4})], "bla",
          _M + "test_extract_tool_calls_streaming_one_chunk[v11-content_before_tool]",
          "mistral"),
]

# --- llama3_json (test_llama3_json_tool_parser.py) ---------------------------------------

_L = "test_llama3_json_tool_parser.py::"
SEARCH1: Call = ("searchTool", {"query": "test1"})
INCIDENTS: Call = ("getOpenIncidentsTool", {})
SEARCH2: Call = ("searchTool", {"query": "test2"})
THREE = [SEARCH1, INCIDENTS, SEARCH2]
LLAMA_TOOLS = (tool("searchTool", {"query": S, "limit": INT, "nested": OBJ}),
               tool("getOpenIncidentsTool", {}))
NESTED = {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}
POOL = {"config": {"database": {"connection": {"pool": {"size": 10}}}}}


def _llama(name: str, text: str, calls: list[Call], test: str, content: str | None = None,
           **kw: Any) -> PeerCase:
    return _case(f"llama3-{name}", text, calls, content, _L + test, "llama3",
                 **({"tools": LLAMA_TOOLS} | kw))


_INLINE = ("A bare call must open and end a line (formats/bare.py; the corpus negative "
           "bare_call_followed_by_prose): inside a sentence it reads as an example, and stays "
           "text; vLLM's llama3_json parser takes JSON anywhere in prose.")

LLAMA3 = [
    _llama("prose-around",
           'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} '
           "Would you like to know more?", [INCIDENTS], "test_extract_tool_calls_simple",
          differs=_INLINE),
    _llama("parameters",
           '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
           [("searchTool", {"query": "test query", "limit": 10})],
           "test_extract_tool_calls_with_arguments"),
    _case("llama3-no-json", "This is just some text without any tool calls", [],
          "This is just some text without any tool calls",
          _L + "test_extract_tool_calls_no_json", "llama3", tools=LLAMA_TOOLS),
    _case("llama3-invalid-json", '{"name": "invalidTool", "parameters": {invalid json}', [],
          '{"name": "invalidTool", "parameters": {invalid json}',
          _L + "test_extract_tool_calls_invalid_json", "llama3",
          tools=(tool("invalidTool", {}),)),
    _llama("arguments-key", '{"name": "searchTool", "arguments": {"query": "test"}}',
           [("searchTool", {"query": "test"})], "test_extract_tool_calls_with_arguments_key"),
    _llama("semicolons",
           '{"name": "searchTool", "parameters": {"query": "test1"}}; '
           '{"name": "getOpenIncidentsTool", "parameters": {}}; '
           '{"name": "searchTool", "parameters": {"query": "test2"}}', THREE,
           "test_extract_tool_calls_multiple_json"),
    _llama("semicolons-spaced",
           '{"name": "searchTool", "parameters": {"query": "test1"}} ; '
           '{"name": "getOpenIncidentsTool", "parameters": {}} ; '
           '{"name": "searchTool", "parameters": {"query": "test2"}}', THREE,
           "test_extract_tool_calls_multiple_json_with_whitespace"),
    _llama("semicolons-prose-around",
           'Here are the results: {"name": "searchTool", "parameters": {"query": "test1"}}; '
           '{"name": "getOpenIncidentsTool", "parameters": {}}; '
           '{"name": "searchTool", "parameters": {"query": "test2"}} '
           "Would you like to know more?", THREE,
           "test_extract_tool_calls_multiple_json_with_surrounding_text",
           content="Here are the results:  Would you like to know more?",
          differs=_INLINE),
    _llama("deeply-nested",
           '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": '
           '{"level4": {"value": "deep"}}}}}}', [("complexTool", NESTED)],
           "test_extract_tool_calls_deeply_nested_json", tools=_infer([("complexTool", NESTED)])),
    _llama("multiple-deep-nesting",
           '{"name": "simpleTool", "parameters": {"value": "test"}}; '
           '{"name": "complexTool", "parameters": '
           '{"config": {"database": {"connection": {"pool": {"size": 10}}}}}}',
           [("simpleTool", {"value": "test"}), ("complexTool", POOL)],
           "test_extract_tool_calls_multiple_with_deep_nesting",
           tools=_infer([("simpleTool", {"value": "test"}), ("complexTool", POOL)])),
    _llama("brackets-in-string",
           '{"name": "searchTool", "parameters": {"query": "test {value} [complex]",'
           '"nested": {"inner": "more {brackets}"}}}',
           [("searchTool", {"query": "test {value} [complex]",
                            "nested": {"inner": "more {brackets}"}})],
           "test_extract_tool_calls_with_quotes_and_brackets_in_string"),
    _llama("escaped-quotes",
           '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
           [("parserTool", {"text": 'He said "Hello {world}"'})],
           "test_extract_tool_calls_with_escaped_quotes_in_nested_json",
           tools=(tool("parserTool", {"text": S}),)),
    _case("llama3-missing-name", '{"parameters": {}}', [], '{"parameters": {}}',
          _L + "test_extract_tool_calls_missing_name_key", "llama3", tools=LLAMA_TOOLS),
    _case("llama3-missing-parameters", '{"name": "toolWithoutParams"}', [],
          '{"name": "toolWithoutParams"}',
          _L + "test_extract_tool_calls_missing_parameters_and_arguments_key", "llama3",
          tools=(tool("toolWithoutParams", {}),)),
    _llama("brace-in-trailing-text",
           '{"name": "searchTool", "parameters": {"query": "test"}} '
           "I used {searchTool} for this.", [("searchTool", {"query": "test"})],
           "test_extract_tool_calls_brace_in_trailing_text",
           content="I used {searchTool} for this.",
          differs=_INLINE),
    _llama("json-fragment-in-trailing-text",
           '{"name": "searchTool", "parameters": {"query": "test"}} '
           'The arguments I passed were {"query": "test"}', [("searchTool", {"query": "test"})],
           "test_extract_tool_calls_json_fragment_in_trailing_text",
           content='The arguments I passed were {"query": "test"}',
          differs=_INLINE),
    *(
        _llama(f"separator-{label}",
               '{"name": "searchTool", "parameters": {"query": "test1"}}' + sep
               + '{"name": "getOpenIncidentsTool", "parameters": {}}', [SEARCH1, INCIDENTS],
               f"test_extract_tool_calls_streaming_parallel_separators[{sep!r}]")
        for label, sep in (("semicolon-space", "; "), ("semicolon", ";"),
                           ("semicolon-newline", ";\n"), ("newline", "\n"))
    ),
]

# --- pythonic and llama4_pythonic --------------------------------------------------------

_P = "test_pythonic_tool_parser.py::"
_P4 = "test_llama4_pythonic_tool_parser.py::"
SIMPLE_PY = "get_weather(city='San Francisco', metric='celsius')"
SIMPLE_CALL: Call = ("get_weather", {"city": "San Francisco", "metric": "celsius"})
MORE_PY = ("register_user(name='John Doe', age=37, address={'city': 'San Francisco', "
           "'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])")
MORE_CALL: Call = ("register_user", {
    "name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"},
    "role": None, "passed_test": True, "aliases": ["John", "Johnny"]})  # fmt: skip
PY_TOOLS = (
    tool("get_weather", {"city": S, "metric": S}),
    tool("register_user", {"name": S, "age": INT, "address": OBJ,
                           "role": {"type": ["string", "null"]}, "passed_test": B, "aliases": A}),
    tool("do_something_cool", {"additional_data": OBJ, "steps": A}),
)  # fmt: skip
LA: Call = ("get_weather", {"city": "LA", "metric": "C"})
DOE: Call = ("register_user", {"name": "Doe", "age": 9})


def _py(name: str, text: str, calls: list[Call], test: str, content: str | None = None,
        family: str = "pythonic", src: str = _P, **kw: Any) -> PeerCase:
    return _case(name, text, calls, content, src + test, family, tools=PY_TOOLS, **kw)


def _py4(name: str, text: str, calls: list[Call], test: str,
         content: str | None = None) -> PeerCase:
    return _py(f"llama4-pythonic-{name}", text, calls, test, content, "llama3", _P4)


PYTHONIC = [
    _neg("pythonic-no-tool-call", "How can I help you today?", _P + "test_no_tool_call",
         "pythonic", tools=PY_TOOLS),
    _py("pythonic-simple", f"[{SIMPLE_PY}]", [SIMPLE_CALL], "test_tool_call[simple_nonstreaming]"),
    _py("pythonic-more-types", f"[{MORE_PY}]", [MORE_CALL],
        "test_tool_call[more_types_nonstreaming]"),
    _py("pythonic-parameterless", "[get_weather()]", [("get_weather", {})],
        "test_tool_call[parameterless_nonstreaming]"),
    _py("pythonic-empty-dict", "[do_something_cool(additional_data={})]",
        [("do_something_cool", {"additional_data": {}})],
        "test_tool_call[empty_dict_nonstreaming]"),
    _py("pythonic-empty-list", "[do_something_cool(steps=[])]",
        [("do_something_cool", {"steps": []})], "test_tool_call[empty_list_nonstreaming]"),
    _py("pythonic-escaped-string",
        r"[get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')]",
        [("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'})],
        "test_tool_call[escaped_string_nonstreaming]"),
    _py("pythonic-parallel", f"[{SIMPLE_PY}, {MORE_PY}]", [SIMPLE_CALL, MORE_CALL],
        "test_tool_call[parallel_calls_nonstreaming]"),
    _py("pythonic-large-steps",
        "[get_weather(city='San Francisco', metric='celsius'), get_weather(), "
        "do_something_cool(steps=[])]",
        [SIMPLE_CALL, ("get_weather", {}), ("do_something_cool", {"steps": []})],
        "test_streaming_tool_call_with_large_steps"),
    _py("pythonic-bad-sibling-bytes", f"[bad(x=b'z'), {SIMPLE_PY}]", [SIMPLE_CALL],
        "test_bad_sibling_call_does_not_drop_good_calls",
          differs=("Without a marker a list holding an unreadable call is not a list of calls and "
                   "stays text (BEHAVIOUR.md 4.1; tests/toolcall_families/pythonic_edges.py "
                   "pythonic_edges_bare_bad_sibling).")),
    _py("pythonic-non-finite-argument", f"[calc(x=1e999), {SIMPLE_PY}]", [SIMPLE_CALL],
        "test_non_finite_argument_rejected",
          differs=("Without a marker a list holding an unreadable call (1e999) is not a list of "
                   "calls and stays text (BEHAVIOUR.md 4.1; pythonic_edges_bare_bad_sibling).")),
    _py("pythonic-unparsable-sibling", f"[{SIMPLE_PY}, f(a='x 'y', b='z')]", [SIMPLE_CALL],
        "test_good_call_survives_unparsable_sibling",
          differs=("Without a marker a list holding an unparsable call is not a list of calls and "
                   "stays text (BEHAVIOUR.md 4.1; pythonic_edges_bare_bad_sibling).")),
    _neg("pythonic-unrecoverable-block", "[f(a='x 'y' 'z), g(b='p 'q' 'r)]",
         _P + "test_unrecoverable_block_still_reports_no_tool_call", "pythonic",
         tools=(*PY_TOOLS, tool("f", {"a": S}), tool("g", {"b": S}))),
    _neg("pythonic-mismatched-brackets", "[foo(x=1])]",
         _P + "test_streaming_mismatched_brackets_reported_once", "pythonic",
         tools=(tool("foo", {"x": INT}),)),
    _neg("llama4-pythonic-no-tool-call", "How can I help you today?", _P4 + "test_no_tool_call",
         "llama3", tools=PY_TOOLS),
    _py4("simple", "[get_weather(city='LA', metric='C')]", [LA],
         "test_tool_call[simple_nonstreaming]"),
    _py4("more-types",
         "[register_user(name='Doe', age=9, address={'city': 'LA', 'state': 'CA'}, role=None, "
         "passed_test=True, aliases=['John', 'Johnny'])]",
         [("register_user", {"name": "Doe", "age": 9, "address": {"city": "LA", "state": "CA"},
                             "role": None, "passed_test": True, "aliases": ["John", "Johnny"]})],
         "test_tool_call[more_types_nonstreaming]"),
    _py4("parallel-no-spaces",
         "[get_weather(city='LA',metric='C'),register_user(name='Doe',age=9)]", [LA, DOE],
         "test_tool_call[parallel_calls_nonstreaming]"),
    _py4("python-tag", "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|>",
         [LA], "test_tool_call[python_tag_nonstreaming]"),
    _py4("python-tag-unclosed",
         "<|python_start|>[get_weather(city='LA', metric='C'),register_user(name='Doe', age=9)]",
         [LA, DOE], "test_tool_call[parallel_calls_streaming]"),
    _py4("python-tag-large-steps",
         "<|python_start|>[get_weather(city='LA', metric='C'), get_weather(), "
         "do_something_cool(steps=[])]<|python_end|>",
         [LA, ("get_weather", {}), ("do_something_cool", {"steps": []})],
         "test_streaming_tool_call_with_large_steps"),
    _py4("bad-sibling-bytes",
         "<|python_start|>[bad(x=b'z'), get_weather(city='LA', metric='C')]<|python_end|>", [LA],
         "test_bad_sibling_call_does_not_drop_good_calls"),
    _py4("non-finite-argument",
         "<|python_start|>[calc(x=1e999), get_weather(city='LA', metric='C')]<|python_end|>",
         [LA], "test_non_finite_argument_rejected"),
    _neg("llama4-pythonic-mismatched-brackets", "<|python_start|>[foo(x=1])]<|python_end|>",
         _P4 + "test_streaming_mismatched_brackets_reported_once", "llama3",
         tools=(tool("foo", {"x": INT}),)),
]

# --- the ToolParserTestConfig suites: granite, granite-20b-fc, internlm, deepseek_v3 ------

ESC_TOOL = tool("test_function", {"quoted": S, "path": S, "newline": S, "unicode": S})
TOKYO_TOOLS = (tool("get_weather", {"city": S, "unit": S}), tool("get_time", {"timezone": S}),
               tool("refresh", {}))


def _suite(prefix: str, src: str, family: str, outputs: dict[str, tuple[str, list[Call]]],
           contents: dict[str, str] | None = None) -> list[PeerCase]:
    """One common_tests.py suite: `outputs` maps the config field to (text, calls)."""
    out = [_neg(f"{prefix}-no-tool-calls", PLAIN, src + "::test_no_tool_calls", family,
                tools=TOKYO_TOOLS)]
    for field_name, (text, calls) in outputs.items():
        extra = ESC_TOOL if field_name.startswith("escaped") else VARIOUS_TOOL
        test = "test_" + field_name.removesuffix("_output")
        out.append(_case(f"{prefix}-{test[5:].replace('_', '-')}", text, calls,
                         (contents or {}).get(field_name), f"{src}::{test}", family,
                         tools=_extra((*TOKYO_TOOLS, extra), calls)))
    return out


def _extra(tools: tuple[dict[str, Any], ...], calls: list[Call]) -> tuple[dict[str, Any], ...]:
    """The suite's tools plus any its expected calls name that are not among them."""
    have = {t["function"]["name"] for t in tools}
    return tools + _infer([c for c in calls if c[0] not in have])


VAR_JSON = ('{\n  "name": "test_function",\n  "arguments": {\n    "string_field": "hello",\n'
            '    "int_field": 42,\n    "float_field": 3.14,\n    "bool_field": true,\n'
            '    "null_field": null,\n    "array_field": ["a", "b", "c"],\n'
            '    "object_field": {"nested": "value"},\n    "empty_array": [],\n'
            '    "empty_object": {}\n  }\n}')
ESC_JSON = ('{\n  "name": "test_function",\n  "arguments": {\n'
            '    "quoted": "He said \\"hello\\"",\n    "path": "C:\\\\\\\\Users\\\\\\\\file.txt",\n'
            '    "newline": "line1\\nline2",\n    "unicode": "emoji: 🎉"\n  }\n}')
VAR_CALL: list[Call] = [("test_function", VARIOUS)]
ESC_CALL: list[Call] = [("test_function", ESCAPED)]
REFRESH: list[Call] = [("refresh", {})]

GRANITE = [*_suite("granite", "test_granite_tool_parser.py", "granite", {
    "single_tool_call_output": (
        '<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]', TOKYO),
    "parallel_tool_calls_output": (
        '<|tool_call|> [\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n'
        '  {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n]', TOKYO2),
    "various_data_types_output": (f"<tool_call> [{VAR_JSON}]", VAR_CALL),
    "empty_arguments_output": ('<|tool_call|> [{"name": "refresh", "arguments": {}}]', REFRESH),
    "escaped_strings_output": (f"<tool_call> [{ESC_JSON}]", ESC_CALL),
}),
    _case("granite-string-prefix",
          '<tool_call> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]', TOKYO, None,
          "test_granite_tool_parser.py::TestGraniteToolParser::"
          "test_granite_string_prefix_format", "granite"),
    _case("granite-arguments-before-name",
          '<|tool_call|> [{"arguments": {"city": "Tokyo"}, "name": "get_weather"}, '
          '{"arguments": {"timezone": "Asia/Tokyo"}, "name": "get_time"}]', TOKYO2, None,
          "test_granite_tool_parser.py::test_streaming_parallel_calls_batched_deltas",
          "granite"),
    _case("granite-parallel-no-space",
          '<|tool_call|>[{"name": "get_weather", "arguments": {"x": 42}}, '
          '{"name": "b", "arguments": {"y": 7}}]',
          [("get_weather", {"x": 42}), ("b", {"y": 7})], None,
          "test_granite_tool_parser.py::test_streaming_parallel_calls_single_delta", "granite"),
]

GRANITE_20B = _suite("granite-20b-fc", "test_granite_20b_fc_tool_parser.py", "granite", {
    "single_tool_call_output": (
        '<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}', TOKYO),
    "parallel_tool_calls_output": (
        '<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}\n'
        '<function_call> {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}', TOKYO2),
    "various_data_types_output": (f"<function_call> {VAR_JSON}", VAR_CALL),
    "empty_arguments_output": ('<function_call> {"name": "refresh", "arguments": {}}', REFRESH),
    "surrounding_text_output": (
        "Let me check the weather for you.\n"
        '<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}', TOKYO),
    "escaped_strings_output": (f"<function_call> {ESC_JSON}", ESC_CALL),
}, {"surrounding_text_output": "Let me check the weather for you."})

_IL = '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}'
INTERNLM2 = [*_suite("internlm2", "test_internlm2_tool_parser.py", "internlm2", {
    "single_tool_call_output": (_IL + "<|action_end|>", TOKYO),
    "various_data_types_output": (
        "<|action_start|><|plugin|>" + VAR_JSON.replace('"arguments"', '"parameters"')
        + "<|action_end|>", VAR_CALL),
    "empty_arguments_output": (
        '<|action_start|><|plugin|>{"name": "refresh", "parameters": {}}<|action_end|>',
        REFRESH),
    "surrounding_text_output": (
        "Let me check the weather for you. " + _IL + "<|action_end|>", TOKYO),
    "escaped_strings_output": (
        "<|action_start|><|plugin|>" + ESC_JSON.replace('"arguments"', '"parameters"')
        + "<|action_end|>", ESC_CALL),
}, {"surrounding_text_output": "Let me check the weather for you."}),
    _neg("internlm2-unknown-tool",
         '<|action_start|><|plugin|>{"name": "delete_everything", '
         '"parameters": {"city": "Tokyo"}}<|action_end|>',
         "test_internlm2_tool_parser.py::test_extract_unknown_tool_name_not_emitted",
         "internlm2", tools=(tool("get_weather", {"city": S}),)),
]

_DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
_DE = "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
_DN = "\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
DEEPSEEK_V3 = _suite("deepseek-v3", "test_deepseekv3_tool_parser.py", "deepseek", {
    "single_tool_call_output": (
        _DS + 'get_weather\n```json\n{"city": "Tokyo", "unit": "celsius"}' + _DE,
        [("get_weather", {"city": "Tokyo", "unit": "celsius"})]),
    "parallel_tool_calls_output": (
        _DS + 'get_weather\n```json\n{"city": "Tokyo", "unit": "celsius"}' + _DN
        + 'search_hotels\n```json\n{"location": "Tokyo", "check_in": "2025-01-15"}' + _DE,
        [("get_weather", {"city": "Tokyo", "unit": "celsius"}),
         ("search_hotels", {"location": "Tokyo", "check_in": "2025-01-15"})]),
    "various_data_types_output": (
        _DS + 'test_function\n```json\n{"string_field": "hello", "int_field": 42, '
        '"float_field": 3.14, "bool_field": true, "null_field": null, '
        '"array_field": ["a", "b", "c"], "object_field": {"nested": "value"}, '
        '"empty_array": [], "empty_object": {}}' + _DE, VAR_CALL),
    "empty_arguments_output": (_DS + "get_current_time\n```json\n{}" + _DE,
                               [("get_current_time", {})]),
    "surrounding_text_output": (
        "Let me check the weather for you." + _DS + 'get_weather\n```json\n{"city": "Paris"}'
        + _DE, [("get_weather", {"city": "Paris"})]),
    "escaped_strings_output": (
        _DS + 'send_message\n```json\n{"text": "He said \\"hello\\"", '
        '"path": "C:\\\\\\\\Users\\\\\\\\file", "newline": "line1\\nline2"}' + _DE,
        [("send_message", {"text": 'He said "hello"', "path": "C:\\\\Users\\\\file",
                           "newline": "line1\nline2"})]),
}, {"surrounding_text_output": "Let me check the weather for you."})

# --- deepseek_v31 (test_deepseekv31_tool_parser.py) ---------------------------------------

_D31 = "test_deepseekv31_tool_parser.py::"
_CB, _CE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
FOO: Call = ("foo", {"x": 1})
DEEPSEEK_V31 = [
    _case("deepseek-v31-with-tool",
          f"normal text{_CB}"
          f'<｜tool▁call▁begin｜>foo<｜tool▁sep｜>{{"x":1}}<｜tool▁call▁end｜>{_CE}',
          [FOO], "normal text", _D31 + "test_extract_tool_calls_with_tool", "deepseek"),
    _case("deepseek-v31-multiple-suffix-dropped",
          f'some prefix text{_CB}<｜tool▁call▁begin｜>foo<｜tool▁sep｜>{{"x":1}}<｜tool▁call▁end｜>'
          '<｜tool▁call▁begin｜>bar<｜tool▁sep｜>{"y":2}<｜tool▁call▁end｜>'
          f"{_CE} some suffix text", [FOO, ("bar", {"y": 2})], "some prefix text",
          _D31 + "test_extract_tool_calls_with_multiple_tools", "deepseek",
          differs="Text after the calls stays as content; vLLM drops it (BEHAVIOUR.md 4.1)."),
    _neg("deepseek-v31-cut-off", f"Let me look that up.{_CB}get_weather",
         _D31 + "test_extract_tool_calls_unparsable_block", "deepseek",
         tools=(tool("get_weather", {"city": S}),)),
    _neg("deepseek-v31-no-call-markers", f'{_CB}foo<｜tool▁sep｜>{{"x":1}}{_CE}',
         _D31 + "test_extract_tool_calls_unparsable_block", "deepseek", tools=_infer([FOO])),
]

# --- kimi_k2 (test_kimi_k2_tool_parser.py) ------------------------------------------------

_K = "test_kimi_k2_tool_parser.py::"
_KS, _KE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def _kt(tool_id: str, args: str) -> str:
    return f"<|tool_call_begin|>{tool_id} <|tool_call_argument_begin|>{args}<|tool_call_end|>"


def _kw(*calls: str) -> str:
    return _KS + "".join(calls) + _KE


KIMI_WEATHER = tool("get_weather", {"city": S, "unit": S})
KIMI_READ = tool("read_file", {"path": S})
KIMI_K2 = [
    _neg("kimi-k2-no-tools", "This is a test", _K + "TestExtractToolCalls::test_no_tools",
         "kimi_k2", tools=(KIMI_WEATHER,)),
    _case("kimi-k2-single",
          "I'll check. " + _kw(_kt("functions.get_weather:0", '{"city": "Beijing"}')),
          [("get_weather", {"city": "Beijing"})], "I'll check.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[single_tool_call]", "kimi_k2"),
    _case("kimi-k2-parallel",
          "Compare weather. " + _kw(_kt("functions.get_weather:0", '{"city": "Beijing"}'),
                                    _kt("functions.get_weather:1", '{"city": "Shanghai"}')),
          [("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Shanghai"})],
          "Compare weather.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[parallel_tool_calls]", "kimi_k2"),
    _case("kimi-k2-three",
          "Multiple tasks. " + _kw(
              _kt("functions.get_weather:0", '{"city": "New York"}'),
              _kt("functions.get_news:1", '{"topic": "technology"}'),
              _kt("functions.send_email:2",
                  '{"to": "user@example.com", "subject": "Daily Update"}')),
          [("get_weather", {"city": "New York"}), ("get_news", {"topic": "technology"}),
           ("send_email", {"to": "user@example.com", "subject": "Daily Update"})],
          "Multiple tasks.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[three_tool_calls]", "kimi_k2"),
    _case("kimi-k2-angle-brackets",
          "Process HTML. " + _kw(_kt("functions.process_html:0",
                                     '{"html": "<div>content</div>"}')),
          [("process_html", {"html": "<div>content</div>"})], "Process HTML.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[angle_brackets_in_json]",
          "kimi_k2"),
    _case("kimi-k2-multiline-json",
          "Formatted. " + _kw(_kt("functions.process_data:0",
                                  '{\n  "name": "test",\n  "value": 123\n}')),
          [("process_data", {"name": "test", "value": 123})], "Formatted.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[multiline_json]", "kimi_k2"),
    _case("kimi-k2-no-functions-prefix",
          "No prefix. " + _kw(_kt("get_weather:0", '{"city": "Tokyo"}')), TOKYO, "No prefix.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[no_functions_prefix]", "kimi_k2"),
    _case("kimi-k2-empty-arguments", "Empty args. " + _kw(_kt("functions.test:0", "{}")),
          [("test", {})], "Empty args.",
          _K + "TestExtractToolCalls::test_extract_tool_calls[empty_arguments]", "kimi_k2"),
    _case("kimi-k2-invalid-json-kept",
          "Help. " + _kw(_kt("functions.bad:0", '{"city": "Beijing"'),
                         _kt("functions.good:1", '{"city": "Shanghai"}')),
          [("bad", {"<unparseable>": '{"city": "Beijing"'}), ("good", {"city": "Shanghai"})],
          "Help.", _K + "TestExtractToolCalls::test_invalid_json_still_extracted", "kimi_k2",
          tools=(tool("bad", {"city": S}), tool("good", {"city": S})),
          differs=("A call with broken JSON among good ones stays as text (BEHAVIOUR.md 4.1; "
                   "tests/toolcall_families/kimi.py kimi_k2_broken_json_sibling_stays_text); vLLM "
                   "emits it with raw arguments.")),
    _case("kimi-k2-invalid-id-skipped",
          "Help. " + _kw(_kt("functions.invalid.0", '{"city": "Beijing"}'),
                         _kt("functions.valid:1", '{"city": "Shanghai"}')),
          [("valid", {"city": "Shanghai"})], "Help.",
          _K + "TestExtractToolCalls::test_invalid_funcall_id_skipped", "kimi_k2",
          tools=(tool("invalid", {"city": S}), tool("valid", {"city": S})),
          differs=("A call latchgate cannot read stays as text rather than being dropped "
                   "(BEHAVIOUR.md 4.1); vLLM deletes it.")),
    _case("kimi-k2-bare-counter",
          "Let me check. " + _kw(_kt("0", '{"city": "Tokyo", "unit": "celsius"}')),
          [("get_weather", {"city": "Tokyo", "unit": "celsius"})], "Let me check.",
          _K + "TestExtractToolCalls::test_bare_counter", "kimi_k2", tools=(KIMI_WEATHER,),
          differs=("The call names no function, only a counter id; latchgate does not guess the "
                   "tool from the declared list (BEHAVIOUR.md 4.1 recovers calls to the tools "
                   "they name).")),
    _case("kimi-k2-bare-counter-infers-by-args",
          "Let me check. " + _kw(_kt("0", '{"city": "Tokyo", "unit": "celsius"}')),
          [("get_weather", {"city": "Tokyo", "unit": "celsius"})], "Let me check.",
          _K + "TestExtractToolCalls::test_bare_counter_multiple_tools_infers_by_args",
          "kimi_k2", tools=(KIMI_READ, KIMI_WEATHER),
          differs=("The call names no function; latchgate does not guess the tool from the "
                   "argument keys (BEHAVIOUR.md 4.1 recovers calls to the tools they name).")),
    _case("kimi-k2-streamed-spaces",
          "I'll help. " + _KS + "<|tool_call_begin|>functions.get_weather:0 "
          '<|tool_call_argument_begin|>{"city": "Beijing"} <|tool_call_end|>' + _KE,
          [("get_weather", {"city": "Beijing"})], "I'll help.",
          _K + "TestStreamingHappyPath::test_single_tool_call", "kimi_k2"),
]

# --- deepseek_v32 DSML (test_deepseekv32_tool_parser.py) ---------------------------------

_V32 = "test_deepseekv32_tool_parser.py::TestExtractToolCalls::"
_FS, _FE = "<｜DSML｜function_calls>", "</｜DSML｜function_calls>"
_IE = "</｜DSML｜invoke>"


def _inv(name: str) -> str:
    return f'<｜DSML｜invoke name="{name}">\n'


def _par(key: str, value: str, string: str = "true") -> str:
    return f'<｜DSML｜parameter name="{key}" string="{string}">{value}</｜DSML｜parameter>'


def _dsml(name: str, params: dict[str, str]) -> str:
    body = "".join(_par(k, v) for k, v in params.items())
    return f"{_FS}\n{_inv(name)}{body}\n{_IE}\n{_FE}"


LOC = (tool("get_weather", {"location": S, "date": S}),)
DSML = [
    _neg("deepseek-v32-no-tool-call", "just some text", _V32 + "test_no_tool_call", "dsml",
         tools=LOC),
    _case("deepseek-v32-no-params", f"{_FS}\n{_inv('get_time')}{_IE}\n{_FE}",
          [("get_time", {})], None, _V32 + "test_single_tool_no_params", "dsml"),
    _case("deepseek-v32-with-params",
          _dsml("get_weather", {"location": "SF", "date": "2024-01-16"}),
          [("get_weather", {"location": "SF", "date": "2024-01-16"})], None,
          _V32 + "test_single_tool_with_params", "dsml", tools=LOC),
    _case("deepseek-v32-content-before",
          "Sure, let me check! " + _dsml("get_weather", {"location": "NYC"}),
          [("get_weather", {"location": "NYC"})], "Sure, let me check!",
          _V32 + "test_content_before_tool_call", "dsml", tools=LOC),
    _case("deepseek-v32-multiple",
          f"{_FS}\n{_inv('get_weather')}{_par('location', 'SF')}\n{_IE}\n"
          f"{_inv('get_weather')}{_par('location', 'NYC')}\n{_IE}\n{_FE}",
          [("get_weather", {"location": "SF"}), ("get_weather", {"location": "NYC"})], None,
          _V32 + "test_multiple_tools", "dsml", tools=LOC),
    _case("deepseek-v32-typed-string-false",
          f"{_FS}\n{_inv('toggle')}{_par('enabled', 'true', 'false')}\n"
          f"{_par('count', '42', 'false')}\n{_IE}\n{_FE}",
          [("toggle", {"enabled": True, "count": 42})], None,
          _V32 + "test_type_conversion_in_non_streaming", "dsml",
          tools=(tool("toggle", {"enabled": B, "count": INT}),)),
    _case("deepseek-v32-string-true-coerced",
          f"{_FS}\n{_inv('score')}{_par('value', '42')}\n{_IE}\n{_FE}",
          [("score", {"value": 42})], None, _V32 + "test_string_attr_true_coerced_by_schema",
          "dsml", tools=(tool("score", {"value": INT}),),
          differs=("string=\"true\" marks the value as text as written, whatever the schema "
                   "(tests/toolcall_families/dsml.py string_true_kept; BEHAVIOUR.md 4.1); vLLM "
                   "re-types it by schema.")),
    _case("deepseek-v32-composed-schema",
          f"{_FS}\n{_inv('set_timer')}"
          + _par("wait", '{"type":"for","minutes":2880}', "false") + "\n"
          + _par("patches", '[{"op":"replace","path":"/schedule","value":"quiet"}]', "false")
          + f"\n{_IE}\n{_FE}",
          [("set_timer", {"wait": {"type": "for", "minutes": 2880},
                          "patches": [{"op": "replace", "path": "/schedule", "value": "quiet"}]})],
          None, _V32 + "test_composed_schema_converts_object_and_array_params", "dsml",
          tools=(tool("set_timer", {
              "wait": {"anyOf": [{"type": "object", "properties": {
                  "type": {"const": "until"}, "date": S}}, {"type": "object", "properties": {
                      "type": {"const": "for"}, "minutes": N}}]},
              "patches": {"oneOf": [{"type": "array", "items": OBJ}, {"type": "null"}]}}),)),
    _case("deepseek-v32-string-true-composed",
          f"{_FS}\n{_inv('set_timer')}" + _par("wait", '{"type":"for","minutes":2880}')
          + f"\n{_IE}\n{_FE}", [("set_timer", {"wait": {"type": "for", "minutes": 2880}})], None,
          _V32 + "test_string_attr_true_coerced_by_composed_schema", "dsml",
          tools=(tool("set_timer", {"wait": {"anyOf": [OBJ, {"type": "null"}]}}),),
          differs=("string=\"true\" marks the value as text as written, whatever the schema "
                   "(tests/toolcall_families/dsml.py string_true_kept); vLLM re-types it by "
                   "schema.")),
    _case("deepseek-v32-arguments-wrapper",
          f"{_FS}\n{_inv('get_weather')}" + _par("arguments", '{"location":"Beijing"}', "false")
          + f"\n{_IE}\n{_FE}", [("get_weather", {"location": "Beijing"})], None,
          _V32 + "test_arguments_wrapper_repaired", "dsml",
          tools=(tool("get_weather", {"location": S}),)),
    _case("deepseek-v32-object-and-array",
          f"{_FS}\n{_inv('update')}" + _par("tags", '["a", "b"]', "false") + "\n"
          + _par("meta", '{"k": 1}', "false") + f"\n{_IE}\n{_FE}",
          [("update", {"tags": ["a", "b"], "meta": {"k": 1}})], None,
          _V32 + "test_object_and_array_params", "dsml",
          tools=(tool("update", {"tags": A, "meta": OBJ}),)),
]

# --- glm45 (test_glm4_moe_tool_parser.py) ------------------------------------------------

_G = "test_glm4_moe_tool_parser.py::"
GLM_TOOLS = (tool("get_weather", {"city": S}),)


def _glm(name: str, pairs: list[tuple[str, str]], indent: str = "") -> str:
    body = "".join(f"{indent}<arg_key>{k}</arg_key>\n{indent}<arg_value>{v}</arg_value>\n"
                   for k, v in pairs)
    return f"<tool_call>{name}\n{body}{indent}</tool_call>"


DALLAS = [("city", "Dallas"), ("state", "TX"), ("unit", "fahrenheit")]
DALLAS_CALL: Call = ("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})
BEIJING = [("city", "Beijing"), ("date", "2025-08-01")]
GLM = [
    _neg("glm45-no-tools", "This is a test", _G + "test_extract_tool_calls_no_tools", "glm",
         tools=GLM_TOOLS),
    _case("glm45-single-indented", _glm("get_current_weather", DALLAS, "    "), [DALLAS_CALL],
          None, _G + "test_extract_tool_calls[single_tool_call]", "glm",
          tools=GLM_TOOLS + _infer([DALLAS_CALL])),
    _case("glm45-multiple-indented",
          _glm("get_current_weather", DALLAS, "    ") + "\n    "
          + _glm("get_current_weather",
                 [("city", "Orlando"), ("state", "FL"), ("unit", "fahrenheit")], "    "),
          [DALLAS_CALL, ("get_current_weather",
                         {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})], None,
          _G + "test_extract_tool_calls[multiple_tool_calls]", "glm",
          tools=GLM_TOOLS + _infer([DALLAS_CALL])),
    _case("glm45-content-before",
          "I'll help you check the weather. " + _glm(
              "get_current_weather", [("city", "Seattle"), ("state", "WA"), ("unit", "celsius")],
              "    "),
          [("get_current_weather", {"city": "Seattle", "state": "WA", "unit": "celsius"})],
          "I'll help you check the weather.",
          _G + "test_extract_tool_calls[tool_call_with_content_before]", "glm",
          tools=GLM_TOOLS + _infer([DALLAS_CALL])),
    _case("glm45-undeclared-param",
          "I will help you get the weather." + _glm("get_weather", BEIJING, "    "),
          [("get_weather", {"city": "Beijing", "date": "2025-08-01"})],
          "I will help you get the weather.",
          _G + "test_extract_tool_calls[tool_call_with_chinese_content]", "glm", tools=GLM_TOOLS),
    _case("glm45-think-then-call",
          "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n"
          + _glm("get_weather", BEIJING), [("get_weather", dict(BEIJING))],
          "<think>I want to get the weather.</think>\n\nI will help you get the weather.",
          _G + "test_extract_tool_calls_with_thinking_tags", "glm", tools=GLM_TOOLS),
    _case("glm45-empty-arguments", "<tool_call>get_current_time\n</tool_call>",
          [("get_current_time", {})], None, _G + "test_extract_tool_calls_empty_arguments", "glm",
          tools=(*GLM_TOOLS, tool("get_current_time", {}))),
    _case("glm45-mixed-content",
          "I will help you get the weather info.\n\n" + _glm("get_weather", BEIJING)
          + "\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n"
          + _glm("get_weather", [("city", "Shanghai"), ("date", "2025-08-01")]),
          [("get_weather", dict(BEIJING)), ("get_weather", {"city": "Shanghai",
                                                           "date": "2025-08-01"})],
          "I will help you get the weather info.",
          _G + "test_extract_tool_calls_mixed_content", "glm", tools=GLM_TOOLS,
          differs=("Text between and after calls stays as content (BEHAVIOUR.md 4.1); vLLM keeps "
                   "only the text before the first call.")),
    _case("glm45-special-characters",
          _glm("send_message", [("recipient", "Amy"), ("message", "It is a nice day"),
                                ("priority", "high")]),
          [("send_message", {"recipient": "Amy", "message": "It is a nice day",
                             "priority": "high"})], None,
          _G + "test_extract_tool_calls_special_characters", "glm"),
    _neg("glm45-incomplete-call",
         "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
         "<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>",
         _G + "test_extract_tool_calls_incomplete_tool_call", "glm", tools=GLM_TOOLS,
          differs=("A call cut before its closing tag at the end of the reply is recovered, as "
                   "vLLM's own hermes parser does "
                   "(test_hermes_parser_non_streaming_tool_call_until_eos); vLLM's GLM parser "
                   "leaves it as text (BEHAVIOUR.md 4.1).")),
]

# --- qwen3_coder (test_qwen3coder_tool_parser.py) ----------------------------------------

_Q = "test_qwen3coder_tool_parser.py::"
QWEN_TOOLS = (
    tool("get_current_weather", {"city": S, "state": S,
                                 "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]}}),
    tool("calculate_area", {"shape": S, "dimensions": OBJ, "precision": INT}),
)


def _qp(key: str, value: str) -> str:
    return f"<parameter={key}>\n{value}\n</parameter>\n"


def _qf(name: str, params: list[tuple[str, str]]) -> str:
    return f"<tool_call>\n<function={name}>\n{''.join(_qp(k, v) for k, v in params)}" \
           "</function>\n</tool_call>"


ORLANDO_CALL: Call = ("get_current_weather",
                      {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})
QWEN3_CODER = [
    _neg("qwen3coder-no-tools", "This is a test response without any tool calls",
         _Q + "test_extract_tool_calls_no_tools", "qwen3_coder", tools=QWEN_TOOLS),
    _case("qwen3coder-single", _qf("get_current_weather", DALLAS), [DALLAS_CALL], None,
          _Q + "test_extract_tool_calls[single_tool]", "qwen3_coder", tools=QWEN_TOOLS),
    _case("qwen3coder-content-before",
          "Sure! Let me check the weather for you." + _qf("get_current_weather", DALLAS),
          [DALLAS_CALL], "Sure! Let me check the weather for you.",
          _Q + "test_extract_tool_calls[single_tool_with_content]", "qwen3_coder",
          tools=QWEN_TOOLS),
    _case("qwen3coder-multiline-object",
          _qf("calculate_area", [("shape", "rectangle"),
                                 ("dimensions", '{"width": 10, \n "height": 20}'),
                                 ("precision", "2")]),
          [("calculate_area", {"shape": "rectangle", "dimensions": {"width": 10, "height": 20},
                               "precision": 2})], None,
          _Q + "test_extract_tool_calls[single_tool_multiline_param]", "qwen3_coder",
          tools=QWEN_TOOLS),
    _case("qwen3coder-parallel",
          _qf("get_current_weather", DALLAS) + "\n"
          + _qf("get_current_weather", [("city", "Orlando"), ("state", "FL"),
                                        ("unit", "fahrenheit")]),
          [DALLAS_CALL, ORLANDO_CALL], None, _Q + "test_extract_tool_calls[parallel_tools]",
          "qwen3_coder", tools=QWEN_TOOLS),
    _case("qwen3coder-typed-params",
          "Let me calculate that area for you." + _qf(
              "calculate_area", [("shape", "circle"), ("dimensions", '{"radius": 15.5}'),
                                 ("precision", "3")]),
          [("calculate_area", {"shape": "circle", "dimensions": {"radius": 15.5},
                               "precision": 3})], "Let me calculate that area for you.",
          _Q + "test_extract_tool_calls[tool_with_typed_params]", "qwen3_coder",
          tools=QWEN_TOOLS),
    _case("qwen3coder-no-tool-call-tags",
          "<function=get_current_weather>\n" + _qp("city", "Dallas") + _qp("state", "TX")
          + "</function>", [("get_current_weather", {"city": "Dallas", "state": "TX"})], None,
          _Q + "test_extract_tool_calls_fallback_no_tags", "qwen3_coder", tools=QWEN_TOOLS),
    _case("qwen3coder-type-conversion",
          _qf("test_types", [("int_param", "42"), ("float_param", "3.14"),
                             ("bool_param", "true"), ("str_param", "hello world"),
                             ("obj_param", '{"key": "value"}')]),
          [("test_types", {"int_param": 42, "float_param": 3.14, "bool_param": True,
                           "str_param": "hello world", "obj_param": {"key": "value"}})], None,
          _Q + "test_extract_tool_calls_type_conversion", "qwen3_coder",
          tools=(tool("test_types", {"int_param": INT, "float_param": {"type": "float"},
                                     "bool_param": B, "str_param": S, "obj_param": OBJ}),)),
    _case("qwen3coder-anyof-types",
          _qf("test_anyof", [("anyof_int", "5"), ("anyof_str", "hello"),
                             ("anyof_array", '["a", "b", "c"]'),
                             ("anyof_obj", '{"key": "value"}'), ("type_as_array", "42"),
                             ("multi_non_null", "some text")]),
          [("test_anyof", {"anyof_int": 5, "anyof_str": "hello", "anyof_array": ["a", "b", "c"],
                           "anyof_obj": {"key": "value"}, "type_as_array": 42,
                           "multi_non_null": "some text"})], None,
          _Q + "test_extract_tool_calls_anyof_type_conversion", "qwen3_coder",
          tools=(tool("test_anyof", {
              "anyof_int": {"anyOf": [INT, {"type": "null"}], "default": 5},
              "anyof_str": {"anyOf": [S, {"type": "null"}]},
              "anyof_array": {"anyOf": [{"type": "array", "items": S}, {"type": "null"}]},
              "anyof_obj": {"anyOf": [OBJ, {"type": "null"}]},
              "type_as_array": {"type": ["integer", "null"]},
              "multi_non_null": {"anyOf": [S, INT, {"type": "null"}]}}),)),
    _case("qwen3coder-anyof-streaming",
          _qf("search_web", [("query", "vllm tool parser"), ("count", "10"),
                             ("verbose", "true")]),
          [("search_web", {"query": "vllm tool parser", "count": 10, "verbose": True})], None,
          _Q + "test_extract_tool_calls_anyof_type_conversion_streaming", "qwen3_coder",
          tools=(tool("search_web", {"query": {"anyOf": [S, {"type": "null"}]},
                                     "count": {"anyOf": [INT, {"type": "null"}], "default": 5},
                                     "verbose": {"anyOf": [B, {"type": "null"}]}}),)),
    _case("qwen3coder-missing-parameter-close",
          "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n"
          "<parameter=city>\nDallas\n" + _qp("state", "TX") + _qp("unit", "fahrenheit")
          + "</function>\n</tool_call>", [DALLAS_CALL], "Let me check the weather for you:",
          _Q + "test_extract_tool_calls_missing_closing_parameter_tag", "qwen3_coder",
          tools=QWEN_TOOLS),
]

# --- minimax_m2 (test_minimax_m2_tool_parser.py) ------------------------------------------

_MM = "test_minimax_m2_tool_parser.py::"


def _mm(*invokes: tuple[str, dict[str, str]]) -> str:
    body = "".join(f'<invoke name="{n}">'
                   + "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in p.items())
                   + "</invoke>" for n, p in invokes)
    return f"<minimax:tool_call>{body}</minimax:tool_call>"


MINIMAX = [
    _neg("minimax-m2-plain", "Hello world", _MM + "TestContentStreaming::test_plain_content",
         "minimax", tools=(tool("get_weather", {"city": S}),)),
    _case("minimax-m2-content-before",
          "Let me check. " + _mm(("get_weather", {"city": "Seattle"})),
          [("get_weather", {"city": "Seattle"})], "Let me check.",
          _MM + "TestContentStreaming::test_content_before_tool_call", "minimax"),
    _case("minimax-m2-untyped-number", _mm(("get_weather", {"city": "Seattle", "days": "5"})),
          [("get_weather", {"city": "Seattle", "days": "5"})], None,
          _MM + "TestSingleInvoke::test_multiple_params", "minimax"),
    _case("minimax-m2-two-invokes",
          _mm(("search_web", {"query": "OpenAI"}), ("search_web", {"query": "Gemini"})),
          [("search_web", {"query": "OpenAI"}), ("search_web", {"query": "Gemini"})], None,
          _MM + "TestMultipleInvokes::test_two_invokes_incremental", "minimax"),
    _case("minimax-m2-different-functions",
          _mm(("get_weather", {"city": "NYC"}), ("get_stock", {"ticker": "AAPL"})),
          [("get_weather", {"city": "NYC"}), ("get_stock", {"ticker": "AAPL"})], None,
          _MM + "TestMultipleInvokes::test_different_functions", "minimax"),
    _case("minimax-m2-two-in-one-delta", _mm(("fn_a", {"x": "1"}), ("fn_b", {"y": "2"})),
          [("fn_a", {"x": "1"}), ("fn_b", {"y": "2"})], None,
          _MM + "TestMultipleInvokes::test_two_invokes_in_single_delta", "minimax"),
]

# --- seed_oss (test_seed_oss_tool_parser.py) ----------------------------------------------

_SO = "test_seed_oss_tool_parser.py::"
SEED_TOOLS = (tool("get_weather", {"location": S, "unit": S}),)
BARCELONA: list[Call] = [("get_weather", {"location": "Barcelona, Spain"})]
_SEED_CALL = ("<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain"
              "</parameter>\n</function>\n</seed:tool_call>")
_SEED_THINK_0 = ("<seed:think>\n</seed:cot_budget_reflect>\n</seed:cot_budget_reflect>\n"
                 "The current thinking budget is 0, so I will directly start answering the "
                 "question.\n</seed:think>\n")
_SEED_THINK_U = (
    "<seed:think>\nGot it, let's see. The user asked for the weather in Barcelona, Spain. The "
    "format is <seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, "
    "Spain</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>. "
    "Let me go with that.</seed:think>")
SEED_OSS = [
    _neg("seed-oss-no-tools", "This is a test response without any tool calls",
         _SO + "test_extract_tool_calls_no_tools", "seed_oss", tools=SEED_TOOLS),
    _case("seed-oss-no-think", _SEED_CALL, BARCELONA, None,
          _SO + "test_extract_tool_calls[tool_call_0_thinking_budget]", "seed_oss",
          tools=SEED_TOOLS),
    _case("seed-oss-think-budget-0", _SEED_THINK_0 + _SEED_CALL, BARCELONA, _SEED_THINK_0,
          _SO + "test_streaming_tool_calls[tool_call_0_thinking_budget]", "seed_oss",
          tools=SEED_TOOLS),
    # Shortened: the think block quotes a whole call, which is not a call.
    _case("seed-oss-call-quoted-in-think",
          _SEED_THINK_U + "<seed:tool_call>\n<function=get_weather>\n<parameter=location>"
          "Barcelona, Spain</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n"
          "</seed:tool_call>",
          [("get_weather", {"location": "Barcelona, Spain", "unit": "celsius"})], _SEED_THINK_U,
          _SO + "test_extract_tool_calls[tool_call_unlimited_thinking_budget]", "seed_oss",
          tools=SEED_TOOLS),
]

# --- openai / harmony (test_openai_tool_parser.py) ---------------------------------------

_OA = "test_openai_tool_parser.py::"
# The analysis channel is reasoning (vLLM's harmony parser splits it off before tool parsing).
_ANALYSIS = 'User asks: "What is the weather in Tokyo?" We need to use get_current_weather tool.'



def _harmony(name: str, args: str, ctype: str = " <|constrain|>json", first: bool = False) -> str:
    start = "" if first else "<|start|>assistant"
    return f"{start}<|channel|>commentary to=functions.{name}{ctype}<|message|>{args}<|call|>"


OA_TOOLS = (tool("get_current_weather", {"location": S}), tool("get_user_location",
                                                                {"location": S}))
HARMONY = [
    _case("openai-single", _harmony("get_current_weather", '{"location": "Tokyo"}', first=True),
          [("get_current_weather", {"location": "Tokyo"})], None,
          _OA + "test_extract_tool_calls_single_tool", "harmony", tools=OA_TOOLS,
          reasoning=_ANALYSIS),
    _case("openai-single-multiline-args",
          _harmony("get_current_weather", '{\n"location": "Tokyo"\n}', first=True),
          [("get_current_weather", {"location": "Tokyo"})], None,
          _OA + "test_extract_tool_calls_single_tool", "harmony", tools=OA_TOOLS,
          reasoning=_ANALYSIS),
    _case("openai-multiple",
          _harmony("get_current_weather", '{"location": "Tokyo"}', first=True)
          + _harmony("get_user_location", '{"location": "Tokyo"}')
          + _harmony("no_content_type", '{"location": "Tokyo"}', "")
          + _harmony("empty_args", "{}"),
          [("get_current_weather", {"location": "Tokyo"}),
           ("get_user_location", {"location": "Tokyo"}),
           ("no_content_type", {"location": "Tokyo"}), ("empty_args", {})], None,
          _OA + "test_extract_tool_calls_multiple_tools", "harmony",
          tools=(*OA_TOOLS, tool("no_content_type", {"location": S}), tool("empty_args", {})),
          reasoning=_ANALYSIS),
    _case("openai-with-final-content",
          _harmony("get_current_weather", '{"location": "Tokyo"}', first=True)
          + "<|start|>assistant<|channel|>final<|message|>This tool call will get the weather."
          "<|return|>",
          [("get_current_weather", {"location": "Tokyo"})],
          "This tool call will get the weather.", _OA + "test_extract_tool_calls_with_content",
          "harmony", tools=OA_TOOLS,
          reasoning=_ANALYSIS),
]

# --- olmo3 (test_olmo3_tool_parser.py) -----------------------------------------------------

_O3 = "test_olmo3_tool_parser.py::"
MORE_JSON_LITERALS = MORE_PY.replace("None", "null").replace("True", "true")


def _o3(name: str, body: str, calls: list[Call], test: str, **kw: Any) -> PeerCase:
    return _case(f"olmo3-{name}", f"<function_calls>{body}</function_calls>", calls, None,
                 _O3 + test, "olmo3", tools=PY_TOOLS, **kw)


OLMO3 = [
    _neg("olmo3-no-tool-call", "How can I help you today?", _O3 + "test_no_tool_call", "olmo3",
         tools=PY_TOOLS),
    _o3("simple", SIMPLE_PY, [SIMPLE_CALL], "test_tool_call[simple_nonstreaming]"),
    _o3("more-types", MORE_PY, [MORE_CALL], "test_tool_call[more_types_nonstreaming]"),
    _o3("json-literals", MORE_JSON_LITERALS, [MORE_CALL],
        "test_tool_call[more_types_nonstreaming_json_literals]"),
    _o3("parameterless", "get_weather()", [("get_weather", {})],
        "test_tool_call[parameterless_nonstreaming]"),
    _o3("escaped-string", r"get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')",
        [("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'})],
        "test_tool_call[escaped_string_nonstreaming]"),
    _o3("parallel-newline", f"{SIMPLE_PY}\n{MORE_PY}", [SIMPLE_CALL, MORE_CALL],
        "test_tool_call[parallel_calls_nonstreaming]"),
    _o3("three-newline", f"{SIMPLE_PY}\nget_weather()\ndo_something_cool(steps=[])",
        [SIMPLE_CALL, ("get_weather", {}), ("do_something_cool", {"steps": []})],
        "test_streaming_tool_call_with_large_steps"),
    _o3("bad-sibling-bytes", f"bad(x=b'z')\n{SIMPLE_PY}", [SIMPLE_CALL],
        "test_bad_sibling_call_does_not_drop_good_calls",
          differs=("An unreadable line inside <function_calls> stays as content while its "
                   "siblings are recovered (tests/toolcall_families/olmo3.py "
                   "olmo3_invalid_line_keeps_siblings); vLLM drops it.")),
    _o3("non-finite-argument", f"calc(x=1e999)\n{SIMPLE_PY}", [SIMPLE_CALL],
        "test_non_finite_argument_rejected",
          differs=("An unreadable line inside <function_calls> stays as content while its "
                   "siblings are recovered (olmo3_invalid_line_keeps_siblings); vLLM drops it.")),
    _neg("olmo3-mismatched-brackets", "<function_calls>foo(x=1])</function_calls>",
         _O3 + "test_streaming_mismatched_brackets_reported_once", "olmo3",
         tools=(tool("foo", {"x": INT}),)),
]

# --- step3 (test_step3_tool_parser.py) -----------------------------------------------------

_S3 = "test_step3_tool_parser.py::"
_S3B = "<｜tool_calls_begin｜><｜tool_call_begin｜>"
_S3E = "<｜tool_call_end｜><｜tool_calls_end｜>"


def _s3(name: str, params: dict[str, str]) -> str:
    body = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>'
                   for k, v in params.items())
    return f'<steptml:invoke name="{name}">{body}</steptml:invoke>'


STEP3_EDIT = (tool("edit_file", {"old_string": S, "indent": INT, "enabled": B}),)
STEP3 = [
    _neg("step3-no-tool-calls", PLAIN, _S3 + "TestStep3ToolParser::test_no_tool_calls", "step3",
         tools=TOKYO_TOOLS),
    _case("step3-single", _S3B + _s3("get_weather", {"city": "Tokyo"}) + _S3E, TOKYO, None,
          _S3 + "TestStep3ToolParser::test_single_tool_call_simple_args", "step3",
          tools=TOKYO_TOOLS),
    _case("step3-empty-arguments",
          _S3B + '<steptml:invoke name="refresh"></steptml:invoke>' + _S3E, REFRESH, None,
          _S3 + "TestStep3ToolParser::test_empty_arguments", "step3", tools=TOKYO_TOOLS),
    _case("step3-surrounding-text",
          "Let me check the weather for you.\n\n" + _S3B + _s3("get_weather", {"city": "Tokyo"})
          + _S3E + "\n\nI'll get that information.", TOKYO,
          "Let me check the weather for you.\n\nI'll get that information.",
          _S3 + "TestStep3ToolParser::test_surrounding_text", "step3", tools=TOKYO_TOOLS,
          differs=("The text either side of a removed call is joined with one newline (README, "
                   "recovery._remaining, every family alike); vLLM keeps both blank lines.")),
    _case("step3-escaped-strings",
          _S3B + _s3("test_function", {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt",
                                       "newline": "line1\nline2"}) + _S3E,
          [("test_function", {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt",
                              "newline": "line1\nline2"})], None,
          _S3 + "TestStep3ToolParser::test_escaped_strings", "step3", tools=(ESC_TOOL,)),
    *(
        _case(f"step3-whitespace-kept-{i}",
              _S3B + "function<｜tool_sep｜>edit_file\n"
              + _s3("edit_file", {"old_string": value, "indent": " 4 ", "enabled": " true "})
              + _S3E, [("edit_file", {"old_string": value, "indent": 4, "enabled": True})], None,
              _S3 + f"TestStep3ParameterWhitespace::test_string_value_preserved[{value!r}]",
              "step3", tools=STEP3_EDIT)
        for i, value in enumerate(["    if x:", "return 1\n", "    if x:\n        return 1\n",
                                   "hello ", "hello\u00a0"])
    ),
]

# --- hunyuan_a13b (test_hunyuan_a13b_tool_parser.py) ---------------------------------------

_HY = "test_hunyuan_a13b_tool_parser.py::"
COMPLEX = {"level1": {"level2": {"level3": {"value": 123}}}}
HUNYUAN = [
    _neg("hunyuan-no-tool-call", "How can I help you today?",
         _HY + "test_hunyuan_a13b_tool_parser_extract", "hunyuan", tools=PY_TOOLS),
    _case("hunyuan-single",
          '<tool_calls>[{"name": "get_weather", "arguments": {"city": "San Francisco", '
          '"metric": "celsius"}}]</tool_calls>', [SIMPLE_CALL], None,
          _HY + "test_hunyuan_a13b_tool_parser_extract", "hunyuan", tools=PY_TOOLS),
    _case("hunyuan-multiple",
          '<tool_calls>[{"name": "get_weather", "arguments": {"city": "San Francisco", '
          '"metric": "celsius"}}, {"name": "register_user", "arguments": {"name": "John Doe", '
          '"age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": null, '
          '"passed_test": true, "aliases": ["John", "Johnny"]}}]</tool_calls>',
          [SIMPLE_CALL, MORE_CALL], None, _HY + "test_hunyuan_a13b_tool_parser_extract",
          "hunyuan", tools=PY_TOOLS),
    _case("hunyuan-content-before",
          'I will call the tool now. <tool_calls>[{"name": "get_weather", "arguments": '
          '{"city": "Boston"}}]</tool_calls>', [("get_weather", {"city": "Boston"})],
          "I will call the tool now.", _HY + "test_hunyuan_a13b_tool_parser_extract", "hunyuan",
          tools=PY_TOOLS),
    _case("hunyuan-content-after-stripped",
          '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Seattle"}}]</tool_calls>'
          "\nThank you!", [("get_weather", {"city": "Seattle"})], None,
          _HY + "test_hunyuan_a13b_tool_parser_extract", "hunyuan", tools=PY_TOOLS,
          differs="Text after the calls stays as content; vLLM strips it (BEHAVIOUR.md 4.1)."),
    _case("hunyuan-nested",
          '<tool_calls>[{"name": "complex_tool", "arguments": {"level1": {"level2": {"level3": '
          '{"value": 123}}}}}]</tool_calls>', [("complex_tool", COMPLEX)], None,
          _HY + "test_hunyuan_a13b_tool_parser_extract", "hunyuan"),
    _case("hunyuan-non-ascii",
          '<tool_calls>[{"name": "get_weather", "arguments": {"city": "北京"}}]</tool_calls>',
          [("get_weather", {"city": "北京"})], None,
          _HY + "test_hunyuan_a13b_tool_parser_non_ascii", "hunyuan", tools=PY_TOOLS),
    _case("hunyuan-empty-args-first",
          '<tool_calls>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 42}}]'
          "</tool_calls>", [("a", {}), ("b", {"x": 42})], None,
          _HY + "test_hunyuan_a13b_tool_parser_streaming_one_empty_args_tool", "hunyuan"),
    _case("hunyuan-empty-args-last",
          '<tool_calls>[{"name": "a", "arguments": {"x": 42}}, {"name": "b", "arguments": {}}]'
          "</tool_calls>", [("a", {"x": 42}), ("b", {})], None,
          _HY + "test_hunyuan_a13b_tool_parser_streaming_one_empty_args_tool", "hunyuan",
          tools=(tool("a", {"x": INT}), tool("b", {}))),
]

# --- functiongemma (test_functiongemma_tool_parser.py) -------------------------------------

_FG = "test_functiongemma_tool_parser.py::"
_FGS, _FGE = "<start_function_call>call:", "<end_function_call>"
FG_TOOLS = (tool("get_weather", {"location": S, "unit": S, "city": S}),
            tool("get_time", {"timezone": S}))
FUNCTIONGEMMA = [
    _neg("functiongemma-no-tool-calls", "Hello, how can I help you today?",
         _FG + "TestExtractToolCalls::test_no_tool_calls", "functiongemma", tools=FG_TOOLS),
    _case("functiongemma-single", _FGS + "get_weather{location:<escape>London<escape>}" + _FGE,
          [("get_weather", {"location": "London"})], None,
          _FG + "TestExtractToolCalls::test_single_tool_call", "functiongemma", tools=FG_TOOLS),
    _case("functiongemma-multiple-arguments",
          _FGS + "get_weather{location:<escape>San Francisco<escape>,unit:<escape>celsius"
          "<escape>}" + _FGE, [("get_weather", {"location": "San Francisco", "unit": "celsius"})],
          None, _FG + "TestExtractToolCalls::test_multiple_arguments", "functiongemma",
          tools=FG_TOOLS),
    _case("functiongemma-text-before",
          "Let me check the weather for you. " + _FGS
          + "get_weather{location:<escape>Paris<escape>}" + _FGE,
          [("get_weather", {"location": "Paris"})], "Let me check the weather for you.",
          _FG + "TestExtractToolCalls::test_text_before_tool_call", "functiongemma",
          tools=FG_TOOLS),
    _case("functiongemma-multiple-calls",
          _FGS + "get_weather{location:<escape>London<escape>}" + _FGE + _FGS
          + "get_time{timezone:<escape>UTC<escape>}" + _FGE,
          [("get_weather", {"location": "London"}), ("get_time", {"timezone": "UTC"})], None,
          _FG + "TestExtractToolCalls::test_multiple_tool_calls", "functiongemma",
          tools=FG_TOOLS),
    _case("functiongemma-no-comma-between-keys",
          _FGS + "get_weather{city:<escape>NYC<escape>unit:<escape>celsius<escape>}" + _FGE,
          [("get_weather", {"city": "NYC", "unit": "celsius"})], None,
          _FG + "TestExtractToolCallsStreaming::"
          "test_streamed_arguments_form_valid_json_with_two_keys", "functiongemma",
          tools=FG_TOOLS),
    _case("functiongemma-three-keys-typed",
          _FGS + "search{query:<escape>python<escape>limit:<escape>10<escape>"
          "sort:<escape>relevance<escape>}" + _FGE,
          [("search", {"query": "python", "limit": 10, "sort": "relevance"})], None,
          _FG + "TestExtractToolCallsStreaming::"
          "test_streamed_arguments_form_valid_json_with_three_keys", "functiongemma",
          differs=("An <escape>-quoted value is a string as written, as with DSML string=\"true\" "
                   "(tests/toolcall_families/dsml.py string_true_kept); vLLM turns \"10\" into "
                   "10.")),
]

# --- jamba, xlam, granite4 -----------------------------------------------------------------

_J = "test_jamba_tool_parser.py::"
DALLAS_TX = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}
ORLANDO_FL = {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}
_JD = '{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", ' \
      '"unit": "fahrenheit"}}'
_JO = '{"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", ' \
      '"unit": "fahrenheit"}}'
JAMBA = [
    _neg("jamba-no-tools", "This is a test", _J + "test_extract_tool_calls_no_tools",
         "tool_calls_tag", tools=_infer([("get_current_weather", DALLAS_TX)])),
    _case("jamba-single", f" <tool_calls>[\n    {_JD}\n]</tool_calls>",
          [("get_current_weather", DALLAS_TX)], None,
          _J + "test_extract_tool_calls[single_tool]", "tool_calls_tag"),
    _case("jamba-content-before",
          f" Sure! let me call the tool for you.<tool_calls>[\n    {_JD}\n]</tool_calls>",
          [("get_current_weather", DALLAS_TX)], "Sure! let me call the tool for you.",
          _J + "test_extract_tool_calls[single_tool_with_content]", "tool_calls_tag"),
    _case("jamba-parallel", f" <tool_calls>[\n    {_JD},\n    {_JO}\n]</tool_calls>",
          [("get_current_weather", DALLAS_TX), ("get_current_weather", ORLANDO_FL)], None,
          _J + "test_extract_tool_calls[parallel_tools]", "tool_calls_tag"),
    _case("jamba-arguments-one-delta",
          '<tool_calls>[{"name": "get_current_weather", "arguments": {"city": "Dallas", '
          '"state": "TX"}}]</tool_calls>',
          [("get_current_weather", {"city": "Dallas", "state": "TX"})], None,
          _J + "test_extract_tool_calls_streaming_arguments_in_single_delta", "tool_calls_tag",
          tools=_infer([("get_current_weather", DALLAS_TX)])),
]

_X = "test_xlam_tool_parser.py::"
_XW = {"tools": _infer([("get_current_weather", DALLAS_TX)])}
XLAM = [
    _neg("xlam-no-tools", "This is a test", _X + "test_extract_tool_calls_no_tools", "xlam", **_XW),
    _case("xlam-parallel-bare-list", f"[{_JD}, {_JO}]",
          [("get_current_weather", DALLAS_TX), ("get_current_weather", ORLANDO_FL)], None,
          _X + "test_extract_tool_calls[parallel_tool_calls]", "xlam", **_XW),
    _case("xlam-think-then-list", f"<think>I'll help you with that.</think>[{_JD}]",
          [("get_current_weather", DALLAS_TX)], "<think>I'll help you with that.</think>",
          _X + "test_extract_tool_calls[single_tool_with_think_tag]", "xlam", **_XW),
    _case("xlam-json-code-block", f"I'll help you with that.\n```json\n[{_JD}]\n```",
          [("get_current_weather", DALLAS_TX)], "I'll help you with that.",
          _X + "test_extract_tool_calls[single_tool_with_json_code_block]", "xlam", **_XW),
    _case("xlam-tool-calls-marker", f"I'll check the weather for you.[TOOL_CALLS][{_JD}]",
          [("get_current_weather", DALLAS_TX)], "I'll check the weather for you.",
          _X + "test_extract_tool_calls[single_tool_with_tool_calls_tag]", "xlam", **_XW),
    _case("xlam-tool-call-tags-list",
          f"I'll help you check the weather.<tool_call>[{_JD}]</tool_call>",
          [("get_current_weather", DALLAS_TX)], "I'll help you check the weather.",
          _X + "test_extract_tool_calls[single_tool_with_tool_call_xml_tags]", "xlam", **_XW),
]

_G4 = "test_granite4_tool_parser.py::"
BBOX = {"coordinates": [[23.54, 43.1], [-12.2, 54.3], [4, 5]], "coordinate_type": "latlong"}
STOCK = {"symbol": "AAPL", "start_date": "2021-01-01", "end_date": "2021-12-31"}
_BBOX_STR = ('{"name": "find_bbox", "arguments": "{\\"coordinates\\": [[23.54, 43.1], '
             '[-12.2, 54.3], [4, 5]], \\"coordinate_type\\": \\"latlong\\"}"}')
_STOCK = ('{"name": "get_stock_price", "arguments": {"symbol": "AAPL", "start_date": '
          '"2021-01-01", "end_date": "2021-12-31"}}')
GRANITE4 = [
    _case("granite4-prose-between-calls",
          f"Here goes the bbox call: \n<tool_call> {_BBOX_STR} </tool_call> Now the stock price "
          f"call: \n <tool_call> {_STOCK} </tool_call> Now another bbox call: \n "
          f"<tool_call> {_BBOX_STR} </tool_call> See? I'm a helpful assistant.",
          [("find_bbox", BBOX), ("get_stock_price", STOCK), ("find_bbox", BBOX)],
          "Here goes the bbox call: \n Now the stock price call: \n  Now another bbox call: \n"
          "  See? I'm a helpful assistant.", _G4 + "test_tool_call_parser_complex", "hermes",
          differs=("The text left between calls is trimmed piece by piece and joined with "
                   "newlines (BEHAVIOUR.md 4.1 remaining text trimmed); vLLM concatenates it byte "
                   "for byte.")),
    _case("granite4-content-between",
          '<tool_call> {"name": "find_bbox", "arguments": {}} </tool_call>some explanation '
          '<tool_call> {"name": "get_stock_price", "arguments": {}} </tool_call>',
          [("find_bbox", {}), ("get_stock_price", {})], "some explanation",
          _G4 + "test_streaming_preserves_content_between_complete_tool_calls", "hermes"),
]

CASES: list[PeerCase] = [
    *HERMES, *MISTRAL, *LLAMA3, *PYTHONIC, *GRANITE, *GRANITE_20B, *INTERNLM2, *DEEPSEEK_V3,
    *DEEPSEEK_V31, *KIMI_K2, *DSML, *GLM, *QWEN3_CODER, *MINIMAX, *SEED_OSS, *HARMONY, *OLMO3,
    *STEP3, *HUNYUAN, *FUNCTIONGEMMA, *JAMBA, *XLAM, *GRANITE4,
]
