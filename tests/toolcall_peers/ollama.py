"""Ollama's own tool-call parser tests (github.com/ollama/ollama, model/parsers/*_test.go,
tools/tools_test.go, harmony/harmonyparser_test.go, x/models/glm4_moe_lite/parser_test.go),
transcribed as data at commit fb30760996871fa9460115c753afd2c60d4ab0f7.

Where a test hands a parser's inner function only the text between a format's tags (Qwen3-Coder's
`parseToolCall`, GLM's `parseGLM46ToolCall`, DeepSeek's `parseToolCallContent`, LFM2's
`parseToolCallsContent`, Olmo3's `parseOlmo3FunctionCalls`), the case's text puts the tags back
around it, as the model writes them. Where a test declares no tools, the case declares the tools
its expected calls name, typed as the expected values are (latchgate recovers calls to declared
tools only, BEHAVIOUR.md 4.1).

Ollama splits reasoning out of the text (thinking before `</think>`, Ministral's `[/THINK]`,
Gemma 4's `<channel|>`, Cohere's `<|END_THINKING|>`); latchgate keeps everything before a call as
content unchanged (BEHAVIOUR.md 4.1), so those cases expect that text as content. Streaming tests
are transcribed as their chunks joined, with the calls expected at the end.
"""

from __future__ import annotations

import re
from typing import Any

from tests.toolcall_case import Call, tool
from tests.toolcall_peers import PeerCase

REPO = "ollama/ollama"
P = "model/parsers/"


def _t(tool_name: str, /, **types: Any) -> dict[str, Any]:
    """A tool whose parameters have the given JSON-schema types (a str or a list of them)."""
    return tool(tool_name, {k: {"type": v} for k, v in types.items()})


def _slug(desc: str) -> str:
    """A case name's part from a test's description: lower case, runs of other characters `-`."""
    return re.sub(r"[^0-9a-z\u0080-\uffff]+", "-", desc.lower()).strip("-")


def _case(
    name: str,
    path: str,
    test: str,
    family: str,
    text: str,
    calls: list[Call],
    content: str | None,
    tools: list[dict[str, Any]],
    **kw: Any,
) -> PeerCase:
    return PeerCase(
        name=f"ollama-{name}",
        text=text,
        calls=calls,
        content=content,
        tools=tuple(tools),
        source=f"{REPO} {path}::{test}",
        family=family,
        **kw,
    )


def _neg(
    name: str, path: str, test: str, family: str, text: str, tools: list[dict[str, Any]], **kw: Any
) -> PeerCase:
    """No call expected: the text stays as it is."""
    return _case(name, path, test, family, text, [], text, tools, **kw)


S, INT, N, B, A, OBJ = "string", "integer", "number", "boolean", "array", "object"

# ---------------------------------------------------------------------------------------------
# Qwen3-Coder XML (model/parsers/qwen3coder_test.go); family qwen3_coder.

QC = P + "qwen3coder_test.go"


def _qc(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def _qc_value(desc: str, typ: Any, raw: str, want: Any, **kw: Any) -> PeerCase:
    """TestQwenToolCallValueParsing: one parameter `v` of type `typ` holding `raw`."""
    return _case(f"qwen3coder-value-{_slug(desc)}", QC, f"TestQwenToolCallValueParsing/{desc}",
                 "qwen3_coder", _qc(f"<function=f>\n<parameter=v>{raw}</parameter>\n</function>"),
                 [("f", {"v": want})], None, [tool("f", {"v": {"type": typ} if typ else {}})],
                 **kw)  # fmt: skip


QWEN3CODER: list[PeerCase] = [
    _case("qwen3coder-simple", QC, "TestQwenToolParser/simple tool call", "qwen3_coder",
          _qc("<function=get_current_temperature>\n<parameter=location>\nSan Francisco\n"
              "</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>"),
          [("get_current_temperature", {"location": "San Francisco", "unit": "celsius"})], None,
          [_t("get_current_temperature", location=S, unit=S)]),
    _case("qwen3coder-names-with-spaces", QC, "TestQwenToolParser/names with spaces",
          "qwen3_coder",
          _qc("<function=get current temperature>\n<parameter=location with spaces>\n"
              "San Francisco\n</parameter>\n<parameter=unit with spaces>\ncelsius\n</parameter>\n"
              "</function>"),
          [("get current temperature",
            {"location with spaces": "San Francisco", "unit with spaces": "celsius"})], None,
          [tool("get current temperature", {"location with spaces": {"type": S},
                                            "unit with spaces": {"type": S}})]),
    _case("qwen3coder-names-with-quotes", QC, "TestQwenToolParser/names with quotes",
          "qwen3_coder",
          _qc('<function="get current temperature">\n<parameter="location with spaces">\n'
              'San Francisco\n</parameter>\n<parameter="unit with spaces">\n"celsius"\n'
              "</parameter>\n</function>"),
          [('"get current temperature"',
            {'"location with spaces"': "San Francisco", '"unit with spaces"': '"celsius"'})],
          None,
          [tool('"get current temperature"', {'"location with spaces"': {"type": S},
                                              '"unit with spaces"': {"type": S}})]),
    _case("qwen3coder-typed-parameters", QC, "TestQwenToolParser/tool call with typed parameters",
          "qwen3_coder",
          _qc("<function=calculate>\n<parameter=x>\n3.14\n</parameter>\n<parameter=y>\n42\n"
              "</parameter>\n<parameter=enabled>\ntrue\n</parameter>\n<parameter=items>\n"
              '["a", "b", "c"]\n</parameter>\n</function>'),
          [("calculate", {"x": 3.14, "y": 42, "enabled": True, "items": ["a", "b", "c"]})], None,
          [_t("calculate", x=N, y=INT, enabled=B, items=A)]),
    _case("qwen3coder-ampersands", QC, "TestQwenToolParser/ampersands in parameter values",
          "qwen3_coder",
          _qc('<function=exec>\n<parameter=command>\nls && echo "done"\n</parameter>\n'
              "</function>"),
          [("exec", {"command": 'ls && echo "done"'})], None, [_t("exec", command=S)]),
    _case("qwen3coder-unicode", QC, "TestQwenToolParser/unicode in function names and parameters",
          "qwen3_coder",
          _qc("<function=获取天气>\n<parameter=城市>\n北京\n</parameter>\n<parameter=message>\n"
              "Hello! 你好! 🌟 مرحبا\n</parameter>\n</function>"),
          [("获取天气", {"城市": "北京", "message": "Hello! 你好! 🌟 مرحبا"})], None,
          [_t("获取天气", 城市=S, message=S)]),
    _case("qwen3coder-indexing", QC, "TestQwen3CoderParserToolCallIndexing", "qwen3_coder",
          "<tool_call><function=first><parameter=a>1</parameter></function></tool_call>\n"
          "<tool_call><function=second><parameter=b>2</parameter></function></tool_call>\n"
          "<tool_call><function=third><parameter=c>3</parameter></function></tool_call>",
          [("first", {"a": "1"}), ("second", {"b": "2"}), ("third", {"c": "3"})], None,
          [_t("first", a=S), _t("second", b=S), _t("third", c=S)]),
    _neg("qwen3coder-partial-open-fakeout", QC,
         "TestQwenParserStreaming/partial tool open tag fakeout", "qwen3_coder",
         "abc\n<tool_call fakeout", [_t("get_weather", city=S)]),
    _neg("qwen3coder-ideographic-space-fakeout", QC,
         "TestQwenParserStreaming/ideographic space before partial tool fakeout", "qwen3_coder",
         "Hello\u3000<toolfakeout>abc", [_t("get_weather", city=S)]),
    _qc_value("trim a single leading and trailing newline", None, "\nsome-string\n",
              "some-string"),
    _qc_value("trim at most one leading and trailing newline", None, "\n\nsome-string\n\n",
              "\nsome-string\n"),
    _qc_value("integer with leading zeros", INT, "007", 7),
    _qc_value("boolean case insensitive true", B, "True", True),
    _qc_value("null value lowercase", S, "null", None,
        differs=("BEHAVIOUR.md 4.1 types Qwen3-Coder values from the tool's schema: a "
                 "`string` parameter keeps the text `null`; Ollama reads `null` as null "
                 "whatever the type.")),
    _qc_value("invalid integer falls back to string", INT, "not-a-number", "not-a-number"),
    _qc_value("invalid boolean falls back to false", B, "yes", False,
        differs=("BEHAVIOUR.md 4.1 types values from the schema and keeps text that is no "
                 "boolean as written; Ollama makes any other text of a boolean parameter "
                 "false.")),
    _qc_value("string with JSON-like content", S, '{"this": "is", "just": "a string"}',
              '{"this": "is", "just": "a string"}'),
    _qc_value("string or number union - valid number", [S, N], "42.5", 42.5),
    _qc_value("integer or null union - null value", [INT, "null"], "null", None),
    _qc_value("anyOf array or string - with plain string", [A, S], "Error: could not load data",
              "Error: could not load data"),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Qwen3 / Qwen3-VL JSON in <tool_call> (qwen3vl_*_test.go, qwen3_test.go); family hermes.

VL = P + "qwen3vl_nonthinking_test.go"
Q3 = P + "qwen3_test.go"


def _h(obj: str) -> str:
    return f"<tool_call>{obj}</tool_call>"


QWEN3: list[PeerCase] = [
    _case("qwen3vl-sequential-indices", VL,
          "TestQwen3VLNonThinkingAssignsSequentialToolCallIndices", "hermes",
          _h('{"name":"first","arguments":{"a":"1"}}')
          + _h('{"name":"second","arguments":{"b":"2"}}'),
          [("first", {"a": "1"}), ("second", {"b": "2"})], None,
          [_t("first", a=S), _t("second", b=S)]),
    _case("qwen3vl-simple", VL, "TestQwen3VLNonThinkingToolParser/simple tool call", "hermes",
          _h('{"name": "get-current-weather", "arguments": {"location": "San Francisco, CA", '
             '"unit": "fahrenheit"}}'),
          [("get-current-weather", {"location": "San Francisco, CA", "unit": "fahrenheit"})], None,
          [_t("get-current-weather", location=S, unit=S)]),
    _case("qwen3vl-names-with-quotes", VL, "TestQwen3VLNonThinkingToolParser/names with quotes",
          "hermes",
          _h('{"name": "\\"get current temperature\\"", "arguments": '
             '{"\\"location with spaces\\"": "San Francisco", '
             '"\\"unit with spaces\\"": "\\"celsius\\""}}'),
          [('"get current temperature"',
            {'"location with spaces"': "San Francisco", '"unit with spaces"': '"celsius"'})], None,
          [tool('"get current temperature"', {})]),
    _case("qwen3vl-json-types", VL,
          "TestQwen3VLNonThinkingToolParser/tool call with typed parameters (json types)", "hermes",
          _h('{"name": "calculate", "arguments": {"x": 3.14, "y": 42, "enabled": true, '
             '"items": ["a", "b", "c"]}}'),
          [("calculate", {"x": 3.14, "y": 42, "enabled": True, "items": ["a", "b", "c"]})], None,
          [tool("calculate", {})]),
    _case("qwen3vl-ampersands", VL,
          "TestQwen3VLNonThinkingToolParser/ampersands in parameter values", "hermes",
          _h('{"name": "exec", "arguments": {"command": "ls && echo \\"done\\""}}'),
          [("exec", {"command": 'ls && echo "done"'})], None, [_t("exec", command=S)]),
    _case("qwen3vl-unicode", VL,
          "TestQwen3VLNonThinkingToolParser/unicode in function names and parameters", "hermes",
          _h('{"name": "获取天气", "arguments": {"城市": "北京", '
             '"message": "Hello! 你好! 🌟 مرحبا"}}'),
          [("获取天气", {"城市": "北京", "message": "Hello! 你好! 🌟 مرحبا"})], None,
          [_t("获取天气", 城市=S, message=S)]),
    _neg("qwen3vl-partial-open-fakeout", VL,
         "TestQwen3VLNonThinkingParserStreaming/emit unambiguous before partial tool open "
         "(trailing ws)", "hermes", "abc\u00a0\n<tool_call fakeout", [_t("get_weather", city=S)]),
    _case("qwen3-tool-call", Q3, "TestQwen3ParserToolCall", "hermes",
          _h('{"name":"get_weather","arguments":{"location":"San Francisco","unit":"celsius"}}'),
          [("get_weather", {"location": "San Francisco", "unit": "celsius"})], None,
          [_t("get_weather", location=S, unit=S)]),
    # Ollama: thinking "Let me think", content "".
    _case("qwen3-tool-call-before-think-close", Q3,
          "TestQwen3ParserThinkingWithToolCallBeforeThinkingClose", "hermes",
          "Let me think"
          + _h('{"name":"get_weather","arguments":{"location":"San Francisco","unit":"celsius"}}'),
          [("get_weather", {"location": "San Francisco", "unit": "celsius"})], "Let me think",
          [_t("get_weather", location=S, unit=S)]),
    _case("qwen3-indexing", Q3, "TestQwen3ParserToolCallIndexing", "hermes",
          _h('{"name":"first","arguments":{"a":"1"}}') + "\n"
          + _h('{"name":"second","arguments":{"b":"2"}}') + "\n"
          + _h('{"name":"third","arguments":{"c":"3"}}'),
          [("first", {"a": "1"}), ("second", {"b": "2"}), ("third", {"c": "3"})], None,
          [_t("first", a=S), _t("second", b=S), _t("third", c=S)]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Qwen3.5 / Qwen3.8 XML (qwen35_test.go, qwen38_test.go) and Nemotron 3 Nano, which delegates to
# the Qwen3-Coder parser (nemotron3nano_test.go); family qwen3_coder.

Q35 = P + "qwen35_test.go"
Q38 = P + "qwen38_test.go"
NEM = P + "nemotron3nano_test.go"
_WX = (
    "<tool_call><function=get_weather><parameter=location>\nSF\n</parameter></function></tool_call>"
)
_NEM_WX = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)
Q38_TEXT = """<think>
Need weather and UV for Montréal.
</think>

I'll check both.

<tool_call>
<function=get_weather>
<parameter=city>
Montréal
</parameter>
</function>
</tool_call>
<tool_call>
<function=set_uv_threshold>
<parameter=index>
5
</parameter>
</function>
</tool_call>"""

QWEN35: list[PeerCase] = [
    _case("qwen35-xml-tool-call", Q35, "TestQwen35ParserXMLToolCall", "qwen3_coder",
          "<tool_call><function=get_weather><parameter=location>\nSan Francisco\n</parameter>"
          "<parameter=days>\n3\n</parameter></function></tool_call>",
          [("get_weather", {"location": "San Francisco", "days": 3})], None,
          [_t("get_weather", location=S, days=INT)]),
    # Ollama: thinking "Need weather lookup", content "".
    _case("qwen35-tool-call-in-thinking", Q35, "TestQwen35ParserToolCallEmittedInThinkingIsParsed",
          "qwen3_coder", "Need weather lookup" + _WX, [("get_weather", {"location": "SF"})],
          "Need weather lookup", [_t("get_weather", location=S)]),
    _case("qwen35-tool-call-after-think-close", Q35,
          "TestQwen35ParserToolCallAfterThinkingCloseIsParsed", "qwen3_coder",
          "Need weather lookup</think>" + _WX, [("get_weather", {"location": "SF"})],
          "Need weather lookup</think>", [_t("get_weather", location=S)]),
    # Ollama: thinking "Need weather lookup<tool_c", content "", no call.
    _neg("qwen35-fakeout-partial-then-think-close", Q35,
         "TestQwen35ParserFakeoutPartialToolCallThenThinkCloseAcrossChunks", "qwen3_coder",
         "Need weather lookup<tool_c</think>", [_t("get_weather", location=S)]),
    # Ollama: thinking "Need weather and UV for Montréal.", content "I'll check both.".
    _case("qwen38-reference-continuation", Q38,
          "TestQwen38ParserReferenceContinuationAtEverySplit", "qwen3_coder", Q38_TEXT,
          [("get_weather", {"city": "Montréal"}), ("set_uv_threshold", {"index": 5})],
          "<think>\nNeed weather and UV for Montréal.\n</think>\n\nI'll check both.",
          [_t("get_weather", city=S), _t("set_uv_threshold", index=INT)]),
    _neg("qwen38-control-like-text", Q38,
         "TestQwen38ParserMalformedAndControlLikeContent/ordinary control-like text",
         "qwen3_coder", "Plan</think>ordinary <tool_calling> marker.",
         [_t("get_weather", city=S)]),
    _case("qwen38-truncated-tool-call", Q38,
          "TestQwen38ParserMalformedAndControlLikeContent/truncated tool call", "qwen3_coder",
          "Plan</think>Before<tool_call><function=get_weather>", [], "Plan</think>Before",
          [_t("get_weather", city=S)],
        differs=("BEHAVIOUR.md 4.1: a reply in which no call is recovered keeps its text "
                 "unchanged; Ollama drops the unfinished "
                 "`<tool_call><function=get_weather>`.")),
    # Ollama: thinking "I should check the weather...".
    _case("nemotron-thinking-then-tool-call", NEM,
          "TestNemotron3NanoParser/thinking then tool call", "qwen3_coder",
          "I should check the weather...</think>\n" + _NEM_WX,
          [("get_weather", {"city": "Paris"})], "I should check the weather...</think>",
          [_t("get_weather", city=S)]),
    _case("nemotron-thinking-content-then-tool-call", NEM,
          "TestNemotron3NanoParser/thinking content then tool call", "qwen3_coder",
          "Let me think...</think>\nI'll check for you.\n<tool_call>\n<function=search>\n"
          "<parameter=query>\ntest\n</parameter>\n</function>\n</tool_call>",
          [("search", {"query": "test"})], "Let me think...</think>\nI'll check for you.",
          [_t("search", query=S)]),
    _case("nemotron-streaming-content-then-tool-call", NEM,
          "TestNemotron3NanoParser_Streaming/thinking then content then tool call - streaming",
          "qwen3_coder",
          "Analyzing your request...</think>\nI'll check that for you.\n<tool_call>\n"
          "<function=search>\n<parameter=query>\ntest query\n</parameter>\n</function>\n"
          "</tool_call>",
          [("search", {"query": "test query"})],
          "Analyzing your request...</think>\nI'll check that for you.", [_t("search", query=S)]),
    _case("nemotron-tool-call-no-params", NEM,
          "TestNemotron3NanoParser_Streaming/tool call immediately after think close - no content",
          "qwen3_coder",
          "Analyzing...</think>\n<tool_call>\n<function=test>\n</function>\n</tool_call>",
          [("test", {})], "Analyzing...</think>", [tool("test", {})]),
    _neg("nemotron-partial-tool-tag-in-thinking", NEM,
         "TestNemotron3NanoParser_Streaming/partial tool call tag fakeout while thinking preserves "
         "whitespace", "qwen3_coder", "reasoning ending with <tool_call fakeout</think>Done.",
         [_t("get_weather", city=S)]),
    # Ollama: thinking "Let me analyze this." (thinking on, no </think>), content "".
    _case("nemotron-tool-call-without-think-close", NEM,
          "TestNemotron3NanoParser_ToolCallWithoutThinkClose", "qwen3_coder",
          "Let me analyze this.\n<tool_call>\n<function=get_weather>\n<parameter=city>Paris"
          "</parameter>\n</function>\n</tool_call>",
          [("get_weather", {"city": "Paris"})], "Let me analyze this.",
          [_t("get_weather", city=S)]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# GLM-4.6 / 4.7 `<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value>` (glm46_test.go,
# glm47_test.go, x/models/glm4_moe_lite/parser_test.go); family glm.

G46 = P + "glm46_test.go"
G47 = P + "glm47_test.go"
GLITE = "x/models/glm4_moe_lite/parser_test.go"


def _required(t: dict[str, Any], *names: str) -> dict[str, Any]:
    t["function"]["parameters"]["required"] = list(names)
    return t


_GLM_TOOLS = [
    _required(_t("grep", pattern=S, path=S), "pattern", "path"),
    _required(_t("write", path=S, content=S), "path", "content"),
]
_GREP = (
    "grep\n<arg_key>pattern</arg_key>\n<arg_value>needle</arg_value>\n"
    "<arg_key>path</arg_key>\n<arg_value>.</arg_value>"
)


def _g(raw: str) -> str:
    return f"<tool_call>{raw}</tool_call>"


def _glm(
    desc: str, raw: str, name: str, args: dict[str, Any], tools: list[dict[str, Any]], **kw: Any
) -> PeerCase:
    """TestGLM46ToolCallParsing: the raw call between `<tool_call>` and `</tool_call>`."""
    return _case(
        f"glm46-{_slug(desc)}",
        G46,
        f"TestGLM46ToolCallParsing/{desc}",
        "glm",
        _g(raw),
        [(name, args)],
        None,
        tools,
        **kw,
    )


def _ts(name: str, *keys: str) -> list[dict[str, Any]]:
    return [_t(name, **dict.fromkeys(keys, S))]


GLM: list[PeerCase] = [
    _glm("simple tool call",
         "get-current-weather\n<arg_key>location</arg_key>\n<arg_value>New York, NY</arg_value>\n"
         "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>",
         "get-current-weather", {"location": "New York, NY", "unit": "celsius"},
         _ts("get-current-weather", "location", "unit")),
    _glm("tool call with typed parameters",
         "calculate\n<arg_key>x</arg_key>\n<arg_value>3.14</arg_value>\n<arg_key>y</arg_key>\n"
         "<arg_value>42</arg_value>\n<arg_key>enabled</arg_key>\n<arg_value>true</arg_value>\n"
         '<arg_key>items</arg_key>\n<arg_value>["a", "b", "c"]</arg_value>',
         "calculate", {"enabled": True, "items": ["a", "b", "c"], "x": 3.14, "y": 42},
         [_t("calculate", x=N, y=INT, enabled=B, items=A)]),
    _glm("values with special characters",
         'execute-command\n<arg_key>command</arg_key>\n<arg_value>ls && echo "done"</arg_value>\n'
         "<arg_key>message</arg_key>\n<arg_value>a < b and c > d</arg_value>",
         "execute-command", {"command": 'ls && echo "done"', "message": "a < b and c > d"},
         _ts("execute-command", "command", "message")),
    _glm("special chars in arg_key names",
         "test-function\n<arg_key>param<1></arg_key>\n<arg_value>value1</arg_value>\n"
         "<arg_key>a&b</arg_key>\n<arg_value>value2</arg_value>\n<arg_key>x>y</arg_key>\n"
         "<arg_value>value3</arg_value>",
         "test-function", {"a&b": "value2", "param<1>": "value1", "x>y": "value3"},
         _ts("test-function", "param<1>", "a&b", "x>y")),
    _glm("all special XML entities",
         "test-function\n<arg_key>entities</arg_key>\n<arg_value>&lt;&gt;&amp;&apos;&quot;"
         "</arg_value>",
         "test-function", {"entities": "&lt;&gt;&amp;&apos;&quot;"},
         _ts("test-function", "entities")),
    _glm("order preservation with identical key names but different positions",
         "test-function\n<arg_key>param</arg_key>\n<arg_value>first occurrence</arg_value>\n"
         "<arg_key>other</arg_key>\n<arg_value>middle</arg_value>\n<arg_key>param</arg_key>\n"
         "<arg_value>second occurrence</arg_value>",
         "test-function", {"other": "middle", "param": "second occurrence"},
         _ts("test-function", "param", "other")),
    _glm("anyOf array or string - with array of objects",
         'TodoWrite\n<arg_key>todos</arg_key>\n<arg_value>[{"content": "task 1", "status": '
         '"pending", "priority": "high", "id": "1"}, {"content": "task 2", "status": '
         '"completed", "priority": "low", "id": "2"}]</arg_value>',
         "TodoWrite",
         {"todos": [{"content": "task 1", "id": "1", "priority": "high", "status": "pending"},
                    {"content": "task 2", "id": "2", "priority": "low", "status": "completed"}]},
         [tool("TodoWrite", {"todos": {"anyOf": [{"type": A}, {"type": S}]}})]),
    _glm("anyOf array or string - with plain string",
         "TodoWrite\n<arg_key>todos</arg_key>\n<arg_value>Error: could not load todos</arg_value>",
         "TodoWrite", {"todos": "Error: could not load todos"}, [_t("TodoWrite", todos=[A, S])]),
    _glm("unclosed arg_value at end",
         "get-weather\n<arg_key>city</arg_key>\n<arg_value>Paris",
         "get-weather", {"city": "Paris"}, _ts("get-weather", "city")),
    _glm("unclosed arg_value before next arg_key",
         "get-weather\n<arg_key>city</arg_key>\n<arg_value>Paris<arg_key>unit</arg_key>\n"
         "<arg_value>celsius</arg_value>",
         "get-weather", {"city": "Paris", "unit": "celsius"}, _ts("get-weather", "city", "unit")),
    _glm("unopened arg_value after arg_key",
         "get-weather\n<arg_key>city</arg_key>\nNew York</arg_value>\n<arg_key>unit</arg_key>\n"
         "celsius</arg_value>",
         "get-weather", {"city": "New York", "unit": "celsius"},
         _ts("get-weather", "city", "unit")),
    _glm("mixed unopened and valid arg_values",
         "get-weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
         "<arg_key>unit</arg_key>\ncelsius</arg_value>",
         "get-weather", {"city": "Paris", "unit": "celsius"}, _ts("get-weather", "city", "unit")),
    _case("glm46-finalize-empty-final-chunk", G46,
          "TestGLM46ParserFinalizesCompleteToolCallOnDone/empty final chunk", "glm",
          "<tool_call>" + _GREP, [("grep", {"pattern": "needle", "path": "."})], None, _GLM_TOOLS),
    _case("glm46-finalize-partial-outer-close", G46,
          "TestGLM46ParserFinalizesCompleteToolCallOnDone/partial outer close in final chunk",
          "glm",
          "<tool_call>" + _GREP + "</tool_", [("grep", {"pattern": "needle", "path": "."})], None,
          _GLM_TOOLS,
        differs=("A reply ending inside a closing tag (`</tool_`) was cut off: with "
                 "finish_reason stop latchgate leaves the half tag and its call as text "
                 "(BEHAVIOUR.md 4.1, a cut-off call is no call), where Ollama completes the tag; "
                 "GLM's own call without any closing tag is read, as the template allows.")),
    _neg("glm46-reject-incomplete-value", G46,
         "TestGLM46ParserRejectsIncompleteToolCallOnDone/incomplete argument value", "glm",
         "<tool_call>write\n<arg_key>path</arg_key>\n<arg_value>out.txt</arg_value>\n"
         "<arg_key>content</arg_key>\n<arg_value>partial", _GLM_TOOLS),
    _neg("glm46-reject-undeclared", G46,
         "TestGLM46ParserRejectsIncompleteToolCallOnDone/undeclared tool", "glm",
         "<tool_call>shell\n<arg_key>command</arg_key>\n<arg_value>echo unsafe</arg_value>",
         _GLM_TOOLS),
    _neg("glm46-reject-missing-required", G46,
         "TestGLM46ParserRejectsIncompleteToolCallOnDone/missing required argument", "glm",
         "<tool_call>write\n<arg_key>path</arg_key>\n<arg_value>out.txt</arg_value>", _GLM_TOOLS,
        differs=("BEHAVIOUR.md 4.1 recovers a call as written and 4.2 repairs only its "
                 "syntax: `required` is not checked, so `write` without `content` is a call;"
                 " Ollama rejects it.")),
    _neg("glm46-partial-open-fakeout", G46,
         "TestGLM46ParserStreaming/partial tool open tag fakeout", "glm",
         "<think></think>content\n<tool fakeout", _GLM_TOOLS),
    # Ollama: thinking "plan", content "Answer".
    _case("glm47-add", G47, "TestGLM47ParserAdd", "glm",
          "plan</think>Answer<tool_call>calculate<arg_key>count</arg_key><arg_value>3</arg_value>"
          "<arg_key>enabled</arg_key><arg_value>true</arg_value></tool_call>",
          [("calculate", {"count": 3, "enabled": True})], "plan</think>Answer",
          [_t("calculate", count=INT, enabled=B)]),
    _case("glm47-escaping", G47, "TestGLM47ParserToolCallEscaping", "glm",
          _g("exec\n<arg_key>expr</arg_key>\n<arg_value>a < b && c > d</arg_value>"),
          [("exec", {"expr": "a < b && c > d"})], None, _ts("exec", "expr")),
    _case("glm47-indexing", G47, "TestGLM47ParserToolCallIndexing", "glm",
          "plan</think>\n<tool_call>first<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>\n"
          "<tool_call>second<arg_key>b</arg_key><arg_value>2</arg_value></tool_call>\n"
          "<tool_call>third<arg_key>c</arg_key><arg_value>3</arg_value></tool_call>",
          [("first", {"a": "1"}), ("second", {"b": "2"}), ("third", {"c": "3"})], "plan</think>",
          [_t("first", a=S), _t("second", b=S), _t("third", c=S)]),
    _case("glm4-moe-lite-tool-call", GLITE, "TestParserToolCall", "glm",
          "<tool_call>get_weather<arg_key>location</arg_key><arg_value>San Francisco</arg_value>"
          "<arg_key>unit</arg_key><arg_value>celsius</arg_value></tool_call>",
          [("get_weather", {"location": "San Francisco", "unit": "celsius"})], None,
          [_t("get_weather", location=S, unit=S)]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# DeepSeek V3 / V3.1 markers (deepseek3_test.go) and Cogito, which writes V3's fenced form
# (cogito_test.go); family deepseek.

DS = P + "deepseek3_test.go"
COG = P + "cogito_test.go"
BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, CE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def _ds(*calls: str) -> str:
    """A V3.1 block: each call `NAME<｜tool▁sep｜>{...}`."""
    return BEGIN + "".join(CB + c + CE for c in calls) + END


def _cog(name: str, args: str) -> str:
    """One V3 call: `function<｜tool▁sep｜>NAME` and a fenced JSON."""
    return f"{CB}function{SEP}{name}\n```json\n{args}\n```{CE}"


_WP = [_t("get_weather", location=S)]
PARIS: list[Call] = [("get_weather", {"location": "Paris"})]

DEEPSEEK: list[PeerCase] = [
    _case("deepseek-tool-call-simple", DS, "TestDeepSeekParser/tool_call_simple", "deepseek",
          "I'll check the weather." + _ds(f'get_weather{SEP}{{"location":"Paris"}}'), PARIS,
          "I'll check the weather.", _WP),
    _case("deepseek-multiple-tool-calls", DS, "TestDeepSeekParser/multiple_tool_calls", "deepseek",
          "Getting weather for both cities."
          + _ds(f'get_weather{SEP}{{"location":"Paris"}}',
                f'get_weather{SEP}{{"location":"London"}}'),
          [*PARIS, ("get_weather", {"location": "London"})], "Getting weather for both cities.",
          _WP),
    _case("deepseek-complex-arguments", DS, "TestDeepSeekParser/complex_tool_arguments", "deepseek",
          "Processing data." + _ds(f'process_data{SEP}{{"items":["item1","item2"],'
                                   '"config":{"enabled":true,"threshold":0.95}}'),
          [("process_data", {"items": ["item1", "item2"],
                             "config": {"enabled": True, "threshold": 0.95}})],
          "Processing data.", [_t("process_data", items=A, config=OBJ)]),
    # Ollama: thinking "Let me check the weather...", content "I'll get that for you.".
    _case("deepseek-thinking-with-tool-call", DS, "TestDeepSeekParser/thinking_with_tool_call",
          "deepseek",
          "Let me check the weather...</think>I'll get that for you."
          + _ds(f'get_weather{SEP}{{"location":"Paris"}}'),
          PARIS, "Let me check the weather...</think>I'll get that for you.", _WP),
    _case("deepseek-emoji-after-tool-call", DS, "TestDeepSeekParser/emoji_after_tool_call",
          "deepseek", "I'll help you." + _ds(f'get_weather{SEP}{{"location":"Tokyo"}}') + "完成 ✅",
          [("get_weather", {"location": "Tokyo"})], "I'll help you.完成 ✅", _WP,
        differs=("latchgate puts a line break where a recovered call stood between two "
                 "pieces of text (BEHAVIOUR.md 4.1, the remaining text is the content); "
                 "Ollama joins them directly.")),
    _case("deepseek-empty-args", DS, "TestDeepSeekParser/empty_tool_call_args", "deepseek",
          "Pinging server." + _ds(f"ping{SEP}{{}}"), [("ping", {})], "Pinging server.",
          [tool("ping", {})]),
    _case("deepseek-tool-output", DS, "TestDeepSeekParser/tool_output", "deepseek",
          "Here's the weather: <｜tool▁output▁begin｜>Temperature: 22°C, Sunny<｜tool▁output▁end｜>"
          " Hope that helps!", [], "Here's the weather: Temperature: 22°C, Sunny Hope that helps!",
          _WP,
        differs=("BEHAVIOUR.md 4.1: with no call recovered the text stays as it was; Ollama "
                 "strips DeepSeek's tool-output markers from the content.")),
    _case("deepseek-streaming-split-tags", DS,
          "TestDeepSeekParser_Streaming/streaming_with_split_tags", "deepseek",
          "Content before " + _ds(f"test{SEP}{{}}") + " after", [("test", {})],
          "Content before  after", [tool("test", {})],
        differs=("latchgate puts a line break where a recovered call stood between two "
                 "pieces of text (BEHAVIOUR.md 4.1, the remaining text is the content); "
                 "Ollama joins them directly.")),
    _neg("deepseek-no-separator", DS,
         "TestDeepSeek3Parser_parseToolCallContent/invalid_format_no_separator", "deepseek",
         _ds('get_weather{"location":"Paris"}'), _WP),
    _neg("deepseek-invalid-json", DS, "TestDeepSeek3Parser_parseToolCallContent/invalid_json",
         "deepseek", _ds(f"get_weather{SEP}{{invalid json}}"), _WP),
    _neg("deepseek-missing-json", DS, "TestDeepSeek3Parser_parseToolCallContent/missing_json_part",
         "deepseek", _ds(f"tool_name{SEP}"), [tool("tool_name", {})],
        differs=("BEHAVIOUR.md 4.2: missing arguments become `{}`, so "
                 "`tool_name<｜tool▁sep｜>` with nothing after it is a call without arguments;"
                 " Ollama rejects it.")),
    _case("deepseek-malformed-missing-sep", DS,
          "TestDeepSeekParser_EdgeCases/malformed_tool_call_missing_sep", "deepseek",
          "Testing." + _ds('bad_tool{"arg":"value"}'), [], "Testing.", [_t("bad_tool", arg=S)],
        differs=("BEHAVIOUR.md 4.1: a call that cannot be read stays in the content as text;"
                 " Ollama drops the whole block.")),
    _case("deepseek-malformed-invalid-json", DS,
          "TestDeepSeekParser_EdgeCases/malformed_tool_call_invalid_json", "deepseek",
          "Testing." + _ds(f"bad_tool{SEP}{{invalid json}}"), [], "Testing.",
          [_t("bad_tool", arg=S)],
        differs=("BEHAVIOUR.md 4.1: a call that cannot be read stays in the content as text;"
                 " Ollama drops the whole block.")),
    _case("cogito-tool-call-simple", COG, "TestCogitoParser/tool_call_simple", "deepseek",
          BEGIN + _cog("get_weather", '{"location":"Paris"}') + END, PARIS, None, _WP),
    _case("cogito-thinking-with-tool-call", COG, "TestCogitoParser/thinking_with_tool_call",
          "deepseek",
          "I need to check the weather.</think>" + BEGIN
          + _cog("get_weather", '{"location":"Paris"}') + END,
          PARIS, "I need to check the weather.</think>", _WP),
    _case("cogito-multiple-tool-calls", COG, "TestCogitoParser/multiple_tool_calls", "deepseek",
          BEGIN + _cog("get_weather", '{"location":"Paris"}') + "\n"
          + _cog("get_weather", '{"location":"London"}') + END,
          [*PARIS, ("get_weather", {"location": "London"})], None, _WP),
    _case("cogito-complex-arguments", COG, "TestCogitoParser/complex_tool_arguments", "deepseek",
          BEGIN + _cog("process_data", '{"items":["item1","item2"],"config":{"enabled":true,'
                       '"threshold":0.95},"count":42}') + END,
          [("process_data", {"items": ["item1", "item2"],
                             "config": {"enabled": True, "threshold": 0.95}, "count": 42})],
          None, [_t("process_data", items=A, config=OBJ, count=N)]),
    # Ollama: thinking "This is thinking content.", content "This is content.".
    _case("cogito-streaming", COG, "TestCogitoParser_Streaming", "deepseek",
          "This is thinking content.</think>This is content."
          + BEGIN + _cog("test_tool", '{"arg":"value"}') + END,
          [("test_tool", {"arg": "value"})], "This is thinking content.</think>This is content.",
          [_t("test_tool", arg=S)]),
    _neg("cogito-undeclared-tool", COG,
         "TestCogitoParser_StreamingEdgeCases/split_tool_calls_begin_tag_conservative_parsing",
         "deepseek", "Content before" + BEGIN + _cog("test", "{}") + END, _WP),
    _case("cogito-empty-args", COG,
          "TestCogitoParser_parseToolCallContent/valid_tool_call_empty_args", "deepseek",
          BEGIN + _cog("no_args_tool", "{}") + END, [("no_args_tool", {})], None,
          [tool("no_args_tool", {})]),
    _neg("cogito-missing-separator", COG,
         "TestCogitoParser_parseToolCallContent/missing_separator", "deepseek",
         BEGIN + CB + 'functionget_weather```json\n{"location":"Paris"}\n```' + CE + END, _WP),
    _neg("cogito-invalid-json", COG, "TestCogitoParser_parseToolCallContent/invalid_json",
         "deepseek",
         BEGIN + CB + f"function{SEP}get_weather```json\n{{location:Paris}}\n```" + CE + END, _WP),
    _case("cogito-spaces-in-name", COG,
          "TestCogitoParser_parseToolCallContent/tool_with_spaces_in_name", "deepseek",
          BEGIN + CB + f'function{SEP}  get_weather  \n```json\n{{"location":"Paris"}}\n```' + CE
          + END, PARIS, None, _WP),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# LFM2 `<|tool_call_start|>[f(a=1)]<|tool_call_end|>` (lfm2_test.go); family lfm2.

LF = P + "lfm2_test.go"


def _lf(calls: str) -> str:
    return f"<|tool_call_start|>{calls}<|tool_call_end|>"


def _lfc(
    desc: str, inner: str, calls: list[Call], tools: list[dict[str, Any]], **kw: Any
) -> PeerCase:
    """TestLFM2Parser_parseToolCallsContent: the text between the markers."""
    return _case(
        f"lfm2-calls-{_slug(desc)}",
        LF,
        f"TestLFM2Parser_parseToolCallsContent/{desc}",
        "lfm2",
        _lf(inner),
        calls,
        None,
        tools,
        **kw,
    )


_BASH = [_t("bash", command=S)]
_LF_WX = [_t("get_weather", location=S)]

LFM2: list[PeerCase] = [
    _case("lfm2-tool-call-simple", LF, "TestLFM2Parser/tool_call_simple", "lfm2",
          "I'll check the weather." + _lf('[get_weather(location="Paris")]'), PARIS,
          "I'll check the weather.", _LF_WX),
    _case("lfm2-multiple-tool-calls", LF, "TestLFM2Parser/multiple_tool_calls", "lfm2",
          "Getting weather for both cities." + _lf('[get_weather(location="Paris")]')
          + _lf('[get_weather(location="London")]'),
          [*PARIS, ("get_weather", {"location": "London"})], "Getting weather for both cities.",
          _LF_WX),
    _case("lfm2-complex-arguments", LF, "TestLFM2Parser/complex_tool_arguments", "lfm2",
          "Processing data." + _lf("[process_data(items=['item1','item2'], "
                                   "config={'enabled': True, 'threshold': 0.95})]"),
          [("process_data", {"items": ["item1", "item2"],
                             "config": {"enabled": True, "threshold": 0.95}})],
          "Processing data.", [_t("process_data", items=A, config=OBJ)]),
    # Ollama: thinking "Let me check the weather...", content "I'll get that for you.".
    _case("lfm2-thinking-with-tool-call", LF, "TestLFM2Parser/thinking_with_tool_call", "lfm2",
          "<think>Let me check the weather...</think>I'll get that for you."
          + _lf('[get_weather(location="Paris")]'), PARIS,
          "<think>Let me check the weather...</think>I'll get that for you.", _LF_WX),
    _case("lfm2-python-style-multiple", LF, "TestLFM2Parser/python_style_multiple_calls", "lfm2",
          "Running commands." + _lf("[bash(command='ls'),bash(command='pwd')]"),
          [("bash", {"command": "ls"}), ("bash", {"command": "pwd"})], "Running commands.", _BASH),
    _case("lfm2-mixed-types", LF, "TestLFM2Parser/python_style_mixed_types", "lfm2",
          "Processing." + _lf('[process(name="test", count=42, enabled=true)]'),
          [("process", {"name": "test", "count": 42, "enabled": True})], "Processing.",
          [_t("process", name=S, count=INT, enabled=B)]),
    _case("lfm2-thinking-directly-to-call", LF, "TestLFM2Parser/thinking_directly_to_tool_call",
          "lfm2", "<think>Let me run this command...</think>" + _lf("[bash(command='ls')]"),
          [("bash", {"command": "ls"})], "<think>Let me run this command...</think>", _BASH),
    _case("lfm2-streaming-split-python", LF,
          "TestLFM2Parser_Streaming/streaming_tool_call_with_split_python", "lfm2",
          "Processing." + _lf("[calc(x=42, y=24)]"), [("calc", {"x": 42, "y": 24})],
          "Processing.", [_t("calc", x=INT, y=INT)]),
    _lfc("python_style_complex_literals",
         "[AskUserQuestion(question=\"What's up?\", headers=['Hello!', 'How can I help you?'], "
         "options=['Debugging help', 'Code writing assistance'], multiSelect=False, "
         "metadata={'priority': 1, 'active': True})]",
         [("AskUserQuestion", {"question": "What's up?",
                               "headers": ["Hello!", "How can I help you?"],
                               "options": ["Debugging help", "Code writing assistance"],
                               "multiSelect": False, "metadata": {"priority": 1, "active": True}})],
         [_t("AskUserQuestion", question=S, headers=A, options=A, multiSelect=B, metadata=OBJ)]),
    _lfc("single_python_style_call", "bash(command='ls -la')", [("bash", {"command": "ls -la"})],
         _BASH),
    _lfc("multiple_args", "bash(command='ls', flag='-la', count=42)",
         [("bash", {"command": "ls", "flag": "-la", "count": 42})],
         [_t("bash", command=S, flag=S, count=INT)]),
    _lfc("three_calls", "[a(x='1'),b(y='2'),c(z='3')]",
         [("a", {"x": "1"}), ("b", {"y": "2"}), ("c", {"z": "3"})],
         [_t("a", x=S), _t("b", y=S), _t("c", z=S)]),
    _lfc("whitespace_around_args", 'func( arg1 = "value1" , arg2 = 42 )',
         [("func", {"arg1": "value1", "arg2": 42})], [_t("func", arg1=S, arg2=INT)]),
    _case("lfm2-calls-orphan-end-tag", LF,
          "TestLFM2Parser_parseToolCallsContent/single_call_with_orphan_end_tag", "lfm2",
          "[bash(command='ls')]<|tool_call_end|>", [("bash", {"command": "ls"})], None, _BASH),
    _neg("lfm2-missing-parenthesis", LF, "TestLFM2Parser_parseToolCallContent/missing_parenthesis",
         "lfm2", _lf('get_weather location="Paris")'), _LF_WX),
    _neg("lfm2-invalid-argument-format", LF,
         "TestLFM2Parser_parseToolCallContent/invalid_argument_format", "lfm2",
         _lf("bash(command)"), _BASH),
    _case("lfm2-bare-fallback", LF, "TestLFM2Parser_BareToolCallFallback", "pythonic",
          '[get_weather(location="Paris")]', PARIS, None, [tool("get_weather", {})]),
    _neg("lfm2-bare-unknown-tool", LF, "TestLFM2Parser_BareUnknownToolCallDoesNotParse",
         "pythonic", '[unknown_tool(location="Paris")]', [tool("get_weather", {})]),
    _neg("lfm2-image-placeholder-indexed", LF,
         "TestLFM2Parser_ImagePlaceholdersPreserved/indexed_img_placeholder", "pythonic",
         "[img-0]describe this image", [tool("bash", {})]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Ministral `[TOOL_CALLS]NAME[ARGS]{...}` (ministral_test.go); family mistral. The tests
# declare tools with no parameters.

MI = P + "ministral_test.go"


def _mi(
    desc: str, text: str, calls: list[Call], content: str | None, names: list[str], **kw: Any
) -> PeerCase:
    return _case(
        f"ministral-{_slug(desc)}",
        MI,
        f"TestMinistralParserStreaming/{desc}",
        "mistral",
        text,
        calls,
        content,
        [tool(n, {}) for n in names],
        **kw,
    )


MINISTRAL: list[PeerCase] = [
    _mi("simple tool call", '[TOOL_CALLS]get_weather[ARGS]{"location": "San Francisco"}',
        [("get_weather", {"location": "San Francisco"})], None, ["get_weather"]),
    _mi("tool call with nested object",
        '[TOOL_CALLS]create_entities[ARGS]{"entities": [{"entityType": "Person", "name": "Jack", '
        '"observations": ["Works as a baker"]}]}',
        [("create_entities", {"entities": [{"entityType": "Person", "name": "Jack",
                                            "observations": ["Works as a baker"]}]})],
        None, ["create_entities"]),
    _mi("JSON with newlines in string",
        '[TOOL_CALLS]write[ARGS]{"content": "line1\\nline2\\nline3"}',
        [("write", {"content": "line1\nline2\nline3"})], None, ["write"]),
    _mi("backslash in string value", '[TOOL_CALLS]path[ARGS]{"dir": "C:\\\\Users\\\\test"}',
        [("path", {"dir": "C:\\Users\\test"})], None, ["path"]),
    _mi("content after tool call", '[TOOL_CALLS]test[ARGS]{"a": 1}some content after',
        [("test", {"a": 1})], "some content after", ["test"]),
    _mi("multiple tool calls in sequence",
        '[TOOL_CALLS]get_weather[ARGS]{"location": "NYC"}[TOOL_CALLS]get_time[ARGS]'
        '{"timezone": "EST"}',
        [("get_weather", {"location": "NYC"}), ("get_time", {"timezone": "EST"})], None,
        ["get_weather", "get_time"]),
    _mi("content before tool call", "hello [TOOL_CALLS]get_weather[ARGS]{}",
        [("get_weather", {})], "hello", ["get_weather"]),
    _mi("whitespace between content and tool call is trimmed",
        "content \n [TOOL_CALLS]test[ARGS]{}", [("test", {})], "content", ["test"]),
    # Ollama: thinking "let me think", content "".
    _mi("thinking then tool call", "let me think[/THINK][TOOL_CALLS]test[ARGS]{}",
        [("test", {})], "let me think[/THINK]", ["test"]),
    _neg("ministral-partial-tag-fakeout", MI,
         "TestMinistralParserStreaming/partial tool tag fakeout", "mistral",
         "abc[TOOL not a tag", [tool("test", {})]),
    _neg("ministral-unknown-tool", MI, "TestMinistralParser_Errors/unknown tool returns error",
         "mistral", '[TOOL_CALLS]unknown_tool[ARGS]{"a": 1}', [tool("known_tool", {})]),
    _neg("ministral-invalid-json", MI, "TestMinistralParser_Errors/invalid JSON returns error",
         "mistral", "[TOOL_CALLS]test[ARGS]{invalid json}", [tool("test", {})],
        differs=("BEHAVIOUR.md 4.2: unparseable arguments are passed through unchanged and "
                 "flagged, so the call is still recovered; Ollama rejects it.")),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Olmo 3 `<function_calls>f(a=1)\ng(b=2)</function_calls>` (olmo3_test.go); family olmo3.

OL = P + "olmo3_test.go"


def _fc(calls: str) -> str:
    return f"<function_calls>{calls}</function_calls>"


def _ol(
    desc: str,
    inner: str,
    calls: list[Call],
    tools: list[dict[str, Any]],
    test: str = "TestOlmo3Parser",
    content: str | None = None,
    lead: str = "",
    **kw: Any,
) -> PeerCase:
    return _case(
        f"olmo3-{_slug(desc)}",
        OL,
        f"{test}/{desc}",
        "olmo3",
        lead + _fc(inner),
        calls,
        content,
        tools,
        **kw,
    )


OLMO3: list[PeerCase] = [
    _ol("simple tool call", 'get_weather(location="San Francisco")',
        [("get_weather", {"location": "San Francisco"})], _LF_WX),
    _ol("content then tool call", 'get_weather(location="NYC")',
        [("get_weather", {"location": "NYC"})], _LF_WX, content="Let me check the weather.",
        lead="Let me check the weather."),
    _ol("tool call with multiple arguments", 'book_flight(from="SFO", to="NYC", date="2024-01-15")',
        [("book_flight", {"from": "SFO", "to": "NYC", "date": "2024-01-15"})],
        [_t("book_flight", **{"from": S, "to": S, "date": S})]),
    _ol("multiple tool calls", 'get_weather(location="San Francisco")\n'
        'get_weather(location="New York")',
        [("get_weather", {"location": "San Francisco"}), ("get_weather", {"location": "New York"})],
        _LF_WX),
    _ol("tool call with numeric argument", "set_temperature(value=72)",
        [("set_temperature", {"value": 72})], [_t("set_temperature", value=INT)]),
    _ol("tool call with null argument", "clear_value(field=null)",
        [("clear_value", {"field": None})], [_t("clear_value", field=S)]),
    _ol("tool call with dict argument", 'update_config(settings={"theme": "dark", "fontSize": 14})',
        [("update_config", {"settings": {"theme": "dark", "fontSize": 14}})],
        [_t("update_config", settings=OBJ)]),
    _ol("tool call with no arguments", "get_current_time()", [("get_current_time", {})],
        [tool("get_current_time", {})]),
    _ol("tool call with escaped quotes", 'search(query="say \\"hello\\"")',
        [("search", {"query": 'say "hello"'})], [_t("search", query=S)]),
    _ol("multiple calls with newlines", 'get_weather(location="SF")\nget_time(timezone="PST")',
        [("get_weather", {"location": "SF"}), ("get_time", {"timezone": "PST"})],
        [*_LF_WX, _t("get_time", timezone=S)], test="TestParseOlmo3FunctionCalls"),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# FunctionGemma `<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`
# (functiongemma_test.go, chunks joined) and Gemma 4 `<|tool_call>call:NAME{k:<|"|>v<|"|>}
# <tool_call|>` (gemma4_test.go); family functiongemma.

FG = P + "functiongemma_test.go"
G4 = P + "gemma4_test.go"
E = "<escape>"
Q = '<|"|>'


def _fg(name: str, body: str) -> str:
    return f"<start_function_call>call:{name}{{{body}}}<end_function_call>"


def _g4(name: str, body: str) -> str:
    return f"<|tool_call>call:{name}{{{body}}}<tool_call|>"


def _fgc(
    desc: str, text: str, calls: list[Call], content: str | None, tools: list[dict[str, Any]]
) -> PeerCase:
    return _case(
        f"functiongemma-{_slug(desc)}",
        FG,
        f"TestFunctionGemmaParser/{desc}",
        "functiongemma",
        text,
        calls,
        content,
        tools,
    )


def _g4c(
    desc: str,
    text: str,
    calls: list[Call],
    tools: list[dict[str, Any]],
    content: str | None = None,
    test: str = "TestGemma4Parser",
    **kw: Any,
) -> PeerCase:
    return _case(
        f"gemma4-{_slug(desc)}",
        G4,
        f"{test}/{desc}",
        "functiongemma",
        text,
        calls,
        content,
        tools,
        **kw,
    )


_FG_WX = [_t("get_weather", city=S)]
_G4_WX = [_t("get_weather", location=S)]
_CITY = [("get_weather", {"city": "Paris"})]

FUNCTIONGEMMA: list[PeerCase] = [
    _fgc("simple_tool_call", _fg("get_weather", f"city:{E}Paris{E}"), _CITY, None, _FG_WX),
    _fgc("content_before_tool_call", "Let me check." + _fg("get_weather", f"city:{E}Paris{E}"),
         _CITY, "Let me check.", _FG_WX),
    _fgc("numeric_arguments", _fg("add", "a:1,b:2"), [("add", {"a": 1, "b": 2})], None,
         [_t("add", a=INT, b=INT)]),
    _fgc("multiple_tool_calls", _fg("get_weather", f"city:{E}Paris{E}")
         + _fg("get_weather", f"city:{E}London{E}"),
         [*_CITY, ("get_weather", {"city": "London"})], None, _FG_WX),
    _neg("functiongemma-content-with-angle-brackets", FG,
         "TestFunctionGemmaParser/content_with_angle_brackets", "functiongemma",
         "The result is a <value> tag", _FG_WX),
    _fgc("content_after_tool_call", _fg("test", "") + "Done!", [("test", {})], "Done!",
         [tool("test", {})]),
    _fgc("unicode_content_and_arguments", "こんにちは " + _fg("greet", f"name:{E}日本語{E}"),
         [("greet", {"name": "日本語"})], "こんにちは", [_t("greet", name=S)]),
    _fgc("nested_object_argument",
         _fg("create", f"config:{{settings:{{enabled:true,name:{E}test{E}}}}}"),
         [("create", {"config": {"settings": {"enabled": True, "name": "test"}}})], None,
         [_t("create", config=OBJ)]),
    _neg("functiongemma-partial-start-tag", FG,
         "TestFunctionGemmaParser/partial_start_tag_in_content", "functiongemma",
         "Hello <start world", _FG_WX),
    _fgc("parallel_tool_calls", _fg("get_weather", f"city:{E}Paris{E}")
         + _fg("get_time", f"timezone:{E}UTC{E}"),
         [*_CITY, ("get_time", {"timezone": "UTC"})], None,
         [*_FG_WX, _t("get_time", timezone=S)]),
    _fgc("content_between_tool_calls", _fg("first", "") + "Some text here" + _fg("second", ""),
         [("first", {}), ("second", {})], "Some text here",
         [tool("first", {}), tool("second", {})]),
    _g4c("tool_call_simple", _g4("get_weather", f"location:{Q}Paris{Q}"), PARIS, _G4_WX),
    _g4c("tool_call_with_null_arg", _g4("set_optional", "value:null,nested:{value:null}"),
         [("set_optional", {"value": None, "nested": {"value": None}})],
         [_t("set_optional", value=S, nested=OBJ)]),
    _g4c("tool_call_with_multiline_string_arg", _g4("bash", f"command:{Q}date\n{Q}"),
         [("bash", {"command": "date\n"})], _BASH),
    _g4c("tool_call_with_escaped_double_quotes_in_string_arg",
         _g4("search", f'query:{Q}say \\"hello\\"{Q}'), [("search", {"query": 'say \\"hello\\"'})],
         [_t("search", query=S)]),
    _g4c("tool_call_done_flush_without_close_tag_with_unescaped_double_quotes",
         f'<|tool_call>call:search{{query:{Q}say "hello" and "bye"{Q}}}',
         [("search", {"query": 'say "hello" and "bye"'})], [_t("search", query=S)]),
    _g4c("tool_call_with_mixed_raw_and_gemma_quoted_values",
         _g4("search", f'query:"raw \\"quoted\\"",note:{Q}gemma "quoted"{Q}'),
         [("search", {"query": 'raw "quoted"', "note": 'gemma "quoted"'})],
         [_t("search", query=S, note=S)]),
    _g4c("tool_call_with_array_of_objects_and_mixed_quotes",
         _g4("plan", f'steps:[{{title:{Q}step "one"{Q},done:false}},'
                     f'{{title:{Q}step \\"two\\"{Q},done:true}}]'),
         [("plan", {"steps": [{"title": 'step "one"', "done": False},
                              {"title": 'step \\"two\\"', "done": True}]})],
         [_t("plan", steps=A)]),
    _g4c("tool_call_edit_with_array_of_objects_multiline_markdown_and_quotes",
         _g4("edit", f"edits:[\n  {{newText:{Q}# Gemma4 + openclaude speed optimization guide\n\n"
                     f'Use "nvfp4" only after validating tool calls.\n{Q},oldText:{Q}# Gemma4 + '
                     f"openclaude speed optimization guide\n\nUse the default quantization.\n{Q}}},"
                     f"\n  {{newText:{Q}## 14. Methods tried but not adopted\n\n### 1. Model "
                     f'quantization\nDo not enable "mxfp8" by default.\n{Q},oldText:{Q}## 14. '
                     f"Methods tried but not adopted\n{Q}}}\n]"),
         [("edit", {"edits": [
             {"newText": "# Gemma4 + openclaude speed optimization guide\n\nUse \"nvfp4\" only "
                         "after validating tool calls.\n",
              "oldText": "# Gemma4 + openclaude speed optimization guide\n\nUse the default "
                         "quantization.\n"},
             {"newText": "## 14. Methods tried but not adopted\n\n### 1. Model quantization\n"
                         "Do not enable \"mxfp8\" by default.\n",
              "oldText": "## 14. Methods tried but not adopted\n"}]})],
         [_t("edit", edits=A)]),
    _g4c("tool_call_with_windows_path_single_backslashes",
         _g4("open_file", f"path:{Q}C:\\users\\bob\\file.txt{Q}"),
         [("open_file", {"path": "C:\\users\\bob\\file.txt"})], [_t("open_file", path=S)]),
    # Ollama: thinking "I need to check the weather", content "".
    _g4c("thinking_then_tool_call", "<|channel>thought\nI need to check the weather<channel|>"
         + _g4("get_weather", f"location:{Q}Paris{Q}"), PARIS, _G4_WX,
         "<|channel>thought\nI need to check the weather<channel|>"),
    _g4c("content_then_tool_call",
         "Let me check that for you." + _g4("get_weather", f"location:{Q}Paris{Q}"), PARIS,
         _G4_WX, "Let me check that for you."),
    _g4c("same_chunk_before_real_content", _g4("get_weather", f"location:{Q}Paris{Q}")
         + "<tool_call|>Done.", PARIS, _G4_WX, "Done.",
         test="TestGemma4Parser_IgnoresExtraToolCallCloseTags"),
    _g4c("tool_response_boundary_before_real_content",
         _g4("get_weather", f"location:{Q}Paris{Q}") + "<|tool_response>Done.", PARIS, _G4_WX,
         "Done.", test="TestGemma4Parser_IgnoresToolResponseBoundaryAfterToolCall"),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Cohere Command `<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>`
# (cohere_test.go, chunks joined); family command_r. The model's output begins inside
# `<|START_THINKING|>` (the generation prompt opened it).

CO = P + "cohere_test.go"

COHERE: list[PeerCase] = [
    # Ollama: thinking "plan", content "".
    _case("cohere-tool-call", CO, "TestCohereParseToolCall", "command_r",
          "plan<|END_THINKING|><|START_ACTION|>[\n"
          '    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}},'
          '    {"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}'
          "\n]<|END_ACTION|>",
          [*_CITY, ("get_time", {})], "plan<|END_THINKING|>",
          [_t("get_weather", city=S), tool("get_time", {})]),
    _case("cohere-malformed-sibling", CO, "TestCohereParseMalformedActions", "command_r",
          "plan<|END_THINKING|><|START_ACTION|>[\n"
          '    {"tool_call_id": "0", "tool_name": "set_alarm", "parameters": {"time": 15:30}},'
          '    {"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}'
          "\n]<|END_ACTION|>",
          [("get_weather", {"city": "Oslo"})], "plan<|END_THINKING|>",
          [_t("set_alarm", time=S), _t("get_weather", city=S)],
          differs=("The unreadable item (`15:30`) stays text in the content and its sibling is "
                   "recovered (README: a call of a block that cannot be read stays text); "
                   "Ollama drops it.")),
    _case("cohere-missing-comma", CO, "TestCohereParseMalformedActions/missing comma", "command_r",
          "<|END_THINKING|><|START_ACTION|>["
          '{"tool_call_id": "0", "tool_name": "a", "parameters": {}}'
          '{"tool_call_id": "1", "tool_name": "b", "parameters": {"x": "{not json}"}}'
          "]<|END_ACTION|>",
          [("a", {}), ("b", {"x": "{not json}"})], "<|END_THINKING|>",
          [tool("a", {}), _t("b", x=S)]),
    _neg("cohere-garbage-action", CO, "TestCohereParseMalformedActions/garbage", "command_r",
         "x<|END_THINKING|><|START_ACTION|>[!!!]<|END_ACTION|>", [tool("a", {})]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Laguna: GLM's arg_key form, Hermes JSON, a name line before JSON, bare JSON and `<user>` as a
# stand-in for `<tool_call>` (laguna_test.go).

LG = P + "laguna_test.go"
_LG_WX = [_t("get_weather", location=S, days=INT)]
_READ = [_t("read", path=S)]
_GOMOD = [("read", {"path": "/Users/test/code/myproject/go.mod"})]

LAGUNA: list[PeerCase] = [
    _case("laguna-tool-call", LG, "TestLagunaParserToolCall", "glm",
          "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n"
          "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
          [("get_weather", {"location": "Paris", "days": 3})], None, _LG_WX),
    _case("laguna-json-tool-call", LG, "TestLagunaParserJSONToolCall", "hermes",
          '<tool_call>\n{"name":"get_weather","arguments":{"location":"Paris","days":3}}\n'
          "</tool_call>", [("get_weather", {"location": "Paris", "days": 3})], None, _LG_WX),
    _case("laguna-standalone-json", LG, "TestLagunaParserStandaloneJSONToolCall", "bare_json",
          '{"name":"get_weather","arguments":{"location":"Paris","days":3}}',
          [("get_weather", {"location": "Paris", "days": 3})], None, _LG_WX),
    _case("laguna-standalone-json-after-content", LG,
          "TestLagunaParserStandaloneJSONToolCallAfterLeadingContent", "bare_json",
          'Let me call the weather tool.\n{"name":"get_weather","arguments":{"location":"Paris"}}',
          PARIS, "Let me call the weather tool.", _LG_WX),
    _case("laguna-name-line-json", LG, "TestLagunaParserNameLineJSONToolCall", "glm",
          '<tool_call>get_weather\n{"location":"San Francisco"}</tool_call>',
          [("get_weather", {"location": "San Francisco"})], None, _LG_WX),
    _case("laguna-tool-alias", LG, "TestLagunaParserNormalizesCommonToolAliases", "hermes",
          '<tool_call>\n{"name":"read_file","arguments":{"path":"./go.mod"}}\n</tool_call>',
          [("read", {"path": "./go.mod"})], None, _READ,
        differs=("BEHAVIOUR.md 4.1 recovers calls to declared tools only and renames none; "
                 "Ollama maps the undeclared `read_file` to the declared `read`.")),
    _case("laguna-duplicated-nested-call", LG, "TestLagunaParserIgnoresDuplicatedNestedToolCall",
          "glm",
          '<tool_call>skill\n{"name":"git-diff-review"}\n<tool_call>skill\n'
          '{"name":"git-diff-review"}</tool_call>',
          [("skill", {"name": "git-diff-review"})], None, [_t("skill", name=S)],
        differs=("The call is read once, as Ollama does, but the unclosed first block before it "
                 "stays text (BEHAVIOUR.md 4.1: an unclosed call is no call, and nothing is "
                 "dropped); Ollama drops it as a duplicate of the next.")),
    # Ollama: thinking "Need current weather.", content "".
    _case("laguna-thinking-then-tool", LG, "TestLagunaParserThinkingThenTool", "glm",
          "<think>Need current weather.</think>\n<tool_call>get_weather\n<arg_key>location"
          "</arg_key>\n<arg_value>SF</arg_value>\n</tool_call>",
          [("get_weather", {"location": "SF"})], "<think>Need current weather.</think>", _LG_WX),
    _case("laguna-user-tagged", LG, "TestLagunaParserUserTaggedToolAlias", "laguna",
          "<user>get_weather\n<arg_key>location</arg_key>\n<arg_value>San Francisco, CA"
          "</arg_value>\n</user>", [("get_weather", {"location": "San Francisco, CA"})], None,
          _LG_WX,
        gap=("Laguna's `<user>` written in place of `<tool_call>` (GLM arg_key/arg_value "
             "inside) is not read as a call.")),
    _case("laguna-user-tagged-after-content", LG,
          "TestLagunaParserUserTaggedToolAliasWithLeadingContent", "laguna",
          "I'll read the file for you.\n<user>read\n<arg_key>path</arg_key>\n"
          "<arg_value>/Users/test/code/myproject/go.mod</arg_value>\n</user>",
          _GOMOD, "I'll read the file for you.", _READ,
        gap=("Laguna's `<user>` written in place of `<tool_call>` (GLM arg_key/arg_value "
             "inside) is not read as a call.")),
    _case("laguna-user-tagged-json", LG, "TestLagunaParserUserTaggedJSONToolCallWithLeadingContent",
          "laguna",
          "I'll run git diff for you.<user>\n"
          '{"name":"bash","arguments":{"command":"git diff main"}}\n</user>',
          [("bash", {"command": "git diff main"})], "I'll run git diff for you.", _BASH,
        gap=("Laguna's `<user>` written in place of `<tool_call>`: the JSON inside is "
             "recovered as a bare call but `<user>\\n</user>` stays in the content.")),
    _neg("laguna-user-tagged-non-tool", LG, "TestLagunaParserUserTaggedNonToolContent", "laguna",
         "<user>hello</user>", _LG_WX),
    # Ollama: thinking "Need lookup" (the `<think>` never closes), then the call.
    _case("laguna-split-tool-tag-in-thinking", LG, "TestLagunaParserSplitToolTag", "glm",
          "<think>Need lookup<tool_call>get_weather\n<arg_key>location</arg_key>\n"
          "<arg_value>SF</arg_value>\n</tool_call>",
          [("get_weather", {"location": "SF"})], "<think>Need lookup", _LG_WX,
        differs=("BEHAVIOUR.md 4.1: a call inside a think block (here one never closed) is "
                 "not a call; Ollama ends the thinking at `<tool_call>`.")),
    _neg("laguna-partial-tool-call-fakeout", LG, "TestLagunaParserPartialToolCallFakeoutInContent",
         "glm", "Document literal <tool_call fakeout", _LG_WX),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# gpt-oss harmony (harmony/harmonyparser_test.go): the tests check the header a message opens
# with; a message whose recipient is `functions.NAME` is a call of NAME with the message as its
# arguments. Family harmony.

HM = "harmony/harmonyparser_test.go"

HARMONY: list[PeerCase] = [
    _case("harmony-channel-then-recipient", HM,
          "TestHarmonyParserStreaming/message with channel and recipient", "harmony",
          '<|start|>assistant<|channel|>commentary to=functions.calc<|message|>{"x": 5}<|end|>',
          [("calc", {"x": 5})], None, [_t("calc", x=INT)]),
    _case("harmony-recipient-then-channel", HM,
          "TestHarmonyParserStreaming/message with channel and recipient (receipient before "
          "channel)", "harmony",
          '<|start|>assistant to=functions.calc<|channel|>commentary<|message|>{"x": 5}<|end|>',
          [("calc", {"x": 5})], None, [_t("calc", x=INT)]),
    # Ollama: the analysis message is thinking, the commentary message a call.
    _case("harmony-analysis-then-call", HM, "TestHarmonyParserHeaderEvent/3", "harmony",
          "<|channel|>analysis<|message|>User asks weather in SF. We need location. Use "
          'get_current_weather with location "San Francisco, CA".<|end|><|start|>assistant'
          "<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>"
          '{"location":"San Francisco, CA"}<|call|>',
          [("get_current_weather", {"location": "San Francisco, CA"})],
          "<|channel|>analysis<|message|>User asks weather in SF. We need location. Use "
          'get_current_weather with location "San Francisco, CA".<|end|>',
          [_t("get_current_weather", location=S)]),
    _case("harmony-constrain-json", HM, "TestHarmonyParserHeaderEvent/2", "harmony",
          "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
          '<|message|>{"location":"San Francisco"}<|call|>',
          [("get_weather", {"location": "San Francisco"})], None, _G4_WX),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Glimmer `<atem:function_calls><atem:invoke name=..><atem:parameter name=..>` after a
# ` to=NAME<|message|>` header (glimmer_test.go).

GL = P + "glimmer_test.go"


def _atem(name: str, params: str) -> str:
    return (
        f'<atem:function_calls>\n<atem:invoke name="{name}">\n{params}</atem:invoke>\n'
        "</atem:function_calls>"
    )


GLIMMER: list[PeerCase] = [
    _case("glimmer-value-types", GL, "TestGlimmerParserATEMValueTypesAndWhitespace", "glimmer",
          " to=tools.run<|message|>" + _atem(
              "tools.run",
              '<atem:parameter name="text"> keep  spaces </atem:parameter>\n'
              '<atem:parameter name="count">3</atem:parameter>\n'
              '<atem:parameter name="enabled">true</atem:parameter>\n'
              '<atem:parameter name="items">["one", "two"]</atem:parameter>\n'
              '<atem:parameter name="config">{"mode":"fast"}</atem:parameter>\n'
              '<atem:parameter name="choice">null</atem:parameter>\n'),
          [("tools.run", {"text": " keep  spaces ", "count": 3, "enabled": True,
                          "items": ["one", "two"], "config": {"mode": "fast"}, "choice": None})],
          None,
          [tool("tools.run", {"text": {"type": S}, "count": {"type": INT}, "enabled": {"type": B},
                              "items": {"type": A}, "config": {"type": OBJ},
                              "choice": {"anyOf": [{"type": "null"}, {"type": S}]}})]),
    _case("glimmer-control-token-text-in-value", GL,
          "TestGlimmerParserATEMValueMayContainControlTokenText", "glimmer",
          " to=echo<|message|>" + _atem(
              "echo", '<atem:parameter name="text">literal <|eot|> and <|start|>assistant '
                      "to=user<|message|> text</atem:parameter>\n") + "<|eot|>",
          [("echo", {"text": "literal <|eot|> and <|start|>assistant to=user<|message|> text"})],
          None, [_t("echo", text=S)]),
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# The template-driven generic parser (tools/tools_test.go::TestParser, inputs joined): the
# template's format decides the family (qwen: hermes, mistral, deepseek with ASCII `|`, json and
# list: bare_json). The test declares the same six tools for every case.

TT = "tools/tools_test.go"
TOOLS = [
    tool(
        "get_temperature",
        {"format": {"type": S, "enum": ["fahrenheit", "celsius"]}, "city": {"type": S}},
    ),
    _t("get_conditions", location=S),
    tool("say_hello", {}),
    tool("say_hello_world", {}),
    _t("get_address", location=S),
    _t("add", a=S, b=S),
]
_SF: list[Call] = [("get_conditions", {"location": "San Francisco"})]
_TOKYO: list[Call] = [("get_conditions", {"location": "Tokyo"})]
_LONDON_F: list[Call] = [("get_temperature", {"city": "London", "format": "fahrenheit"})]


def _tt(
    desc: str,
    family: str,
    text: str,
    calls: list[Call],
    content: str | None,
    slug: str = "",
    **kw: Any,
) -> PeerCase:
    return _case(
        f"tools-{slug or _slug(desc)}",
        TT,
        f"TestParser/{desc}",
        family,
        text,
        calls,
        content,
        TOOLS,
        **kw,
    )


def _ttn(desc: str, family: str, text: str, slug: str = "", **kw: Any) -> PeerCase:
    return _tt(desc, family, text, [], text, slug, **kw)


GENERIC: list[PeerCase] = [
    _tt("tool call", "hermes",
        '<tool_call>{"name": "get_conditions", "arguments": {"location": "San Francisco"}}'
        "</tool_call>", _SF, None),
    _tt("text before tool call", "hermes",
        'Let me check the weather. <tool_call>{"name": "get_temperature", "arguments": '
        '{"city": "New York"}}</tool_call>',
        [("get_temperature", {"city": "New York"})], "Let me check the weather."),
    _ttn("qwen no args with text", "hermes",
         "Let me say hello to the user. I'll use the say_hello tool. "),
    _tt("two tool calls in a list", "mistral",
        '[TOOL_CALLS] [{"name": "get_temperature", "arguments": {"city": "London", "format": '
        '"fahrenheit"}}, {"name": "get_conditions", "arguments": {"location": "Tokyo"}}]'
        "[/TOOL_CALLS]", [*_LONDON_F, *_TOKYO], None),
    _tt("qwen two tool calls", "hermes",
        'Okay, let\'s call both tools! <tool_call>{"name": "get_temperature", "arguments": '
        '{"city": "London", "format": "fahrenheit"}}</tool_call><tool_call>{"name": '
        '"get_conditions", "arguments": {"location": "Tokyo"}}</tool_call>',
        [*_LONDON_F, *_TOKYO], "Okay, let's call both tools!"),
    _tt("empty args followed by args", "hermes",
        'Let me say hello and check the weather. <tool_call>{"name": "say_hello", "arguments": '
        '{}}</tool_call><tool_call>{"name": "get_temperature", "arguments": {"city": "London", '
        '"format": "fahrenheit"}}</tool_call>',
        [("say_hello", {}), *_LONDON_F], "Let me say hello and check the weather."),
    _tt("qwen empty followed by args", "hermes",
        'Let me check the weather. <tool_call>{"name": "get_conditions", "arguments": {}}'
        '</tool_call><tool_call>{"name": "get_conditions", "arguments": {"location": "Tokyo"}}',
        [("get_conditions", {}), *_TOKYO], "Let me check the weather."),
    _tt("deepseek", "deepseek",
        "<think>Wait, I need to call a tool</think><|tool▁calls▁begin|><|tool▁call▁begin|>"
        "function<|tool▁sep|>get_temperature\n```json\n{\"city\": \"Tokyo\"}\n```"
        "<|tool▁call▁end|><|tool▁calls▁end|><|end▁of▁sentence|>",
        [("get_temperature", {"city": "Tokyo"})], "<think>Wait, I need to call a tool</think>"),
    _tt("json", "bare_json", '{"name": "get_temperature","arguments": {"city": "Tokyo"}}',
        [("get_temperature", {"city": "Tokyo"})], None),
    _ttn("json not a tool call", "bare_json",
         '{"name": "search", "arguments": {"query": "What is the capital of Canada?"}}'),
    _ttn("json object followed by tool call", "bare_json",
         '{"name": "jeff"}{"name": "get_conditions", "arguments": {"location": "San Francisco"}}'),
    _ttn("json code", "bare_json", 'for { fmt.Println("hello") }'),
    _tt("list multiple", "bare_json",
        '[{"name": "get_temperature", "arguments": {"city": "London"}},{"name": "get_conditions", '
        '"arguments": {"location": "Tokyo"}}]',
        [("get_temperature", {"city": "London"}), *_TOKYO], None),
    _tt("list partial", "bare_json",
        '[{"name": "get_conditions", "arguments": {"location": "Tokyo"}}', _TOKYO, None,
        differs=("BEHAVIOUR.md 4.1 takes a bare list only when the whole reply is one JSON "
                 "list of calls; Ollama accepts `[{...}` without its `]`.")),
    _tt("list invalid", "bare_json",
        '[{"name": "search", "arguments": {"query": "What is the capital of Canada?"}}',
        [], None,
        differs=("BEHAVIOUR.md 4.1 leaves a bare call to an undeclared tool (`search`) as "
                 "text; Ollama's streaming parser swallows it and leaves no content.")),
    _tt("list trailing ]", "bare_json",
        '[{"name": "get_conditions", "arguments": {"location": "Tokyo"}}]]', _TOKYO, None,
        slug="list-trailing-bracket",
        differs=("BEHAVIOUR.md 4.1 takes a bare list only when the whole reply is one JSON "
                 "list of calls; Ollama reads the list out of `[...]]` and drops the extra "
                 "`]`.")),
    _ttn("list not a tool call", "bare_json", "[special delivery]"),
    _tt("tool name with collision", "hermes",
        '<tool_call>{"name": "say_hello_world","arguments": {}}}', [("say_hello_world", {})], None,
        differs=("BEHAVIOUR.md 4.1 keeps the text left after a recovered call as content, "
                 "here a stray `}`; Ollama discards it.")),
    _tt("tool name with collision multiple", "hermes",
        '<tool_call>{"name": "say_hello_world","arguments": {}}</tool_call><tool_call>{'
        '"name": "say_hello","arguments": {}}</tool_call>',
        [("say_hello_world", {}), ("say_hello", {})], None),
    _tt("tool name with collision non streaming", "hermes", '<tool_call>{"name": "say_hello',
        [], None,
        differs=("BEHAVIOUR.md 4.1: text holding no complete call stays as it was; Ollama's "
                 "test never flushes its parser, so the unfinished `<tool_call>` is held "
                 "back as no content.")),
    _tt("tool name with collision non streaming multiple", "hermes",
        '<tool_call>{"name": "say_hello", "arguments": {}}</tool_call><tool_call>{"name": '
        '"say_hello_world", "arguments": {}}',
        [("say_hello", {}), ("say_hello_world", {})], None),
    _tt("tool name with substring of another", "hermes",
        '<tool_call>{"name": "get_address", "arguments": {"location": "London"}}</tool_call>',
        [("get_address", {"location": "London"})], None, slug="substring-qwen"),
    _tt("args before name", "hermes",
        '<tool_call>{"arguments": {"a": "5", "b": "10"}, "name": "add"}</tool_call>',
        [("add", {"a": "5", "b": "10"})], None),
]  # fmt: skip

CASES: list[PeerCase] = [
    *QWEN3CODER,
    *QWEN3,
    *QWEN35,
    *GLM,
    *DEEPSEEK,
    *LFM2,
    *MINISTRAL,
    *OLMO3,
    *FUNCTIONGEMMA,
    *COHERE,
    *LAGUNA,
    *HARMONY,
    *GLIMMER,
    *GENERIC,
]
