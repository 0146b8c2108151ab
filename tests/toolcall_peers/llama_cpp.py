"""llama.cpp's own chat-format parser tests, transcribed as data (ggml-org/llama.cpp
tests/test-chat.cpp: `test_template_output_peg_parsers`, `test_lfm2_parser`, and the older
`test_template_output_parsers` with its `common_chat_parse(...)` asserts): the model output each
test feeds the parser, the tools it declared (llama.cpp's fixed test tools, same types), and the
calls and content it expects.

llama.cpp splits reasoning out of a think block, including a block the generation prompt opened
(the text then starts inside it and only `</think>` shows). latchgate keeps everything up to the
last `</think>` in content (BEHAVIOUR.md 4.1), so those cases expect that text as content. Partial
(`is_partial`) parses are mid-stream snapshots; only a few are kept, judged as finished replies.
"""

from __future__ import annotations

import json
from typing import Any

from tests.toolcall_case import Call, tool
from tests.toolcall_peers import PeerCase

S: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
N: dict[str, Any] = {"type": "number"}
B: dict[str, Any] = {"type": "boolean"}
ARR: dict[str, Any] = {"type": "array"}
OBJ: dict[str, Any] = {"type": "object"}

SF = tool("special_function", {"arg1": INT})
SFO = tool("special_function_with_opt", {"arg1": INT, "arg2": INT})
EMPTY = tool("empty_args", {})
EMPTY_NO_PROPS = {"type": "function",
                  "function": {"name": "empty_args_no_props", "parameters": {"type": "object"}}}
EMPTY_NO_SCHEMA = {"type": "function", "function": {"name": "empty_args_no_schema",
                                                    "parameters": {}}}
PY = tool("python", {"code": S})
CODE_INTERPRETER = tool("code_interpreter", {"code": S})
HTML = tool("html", {"markup": S})
GET_TIME = tool("get_time", {"city": S})
GET_WEATHER = tool("get_weather", {"city": S})
TODO = tool("todo_list", {"todos": ARR})
EDIT = tool("edit", {"filename": S, "oldString": S, "newString": S})
RUN = tool("run_in_terminal", {"command": S})
TODO_MANAGE = tool("manage_todo_list", {"todos": ARR})
MAGIC = tool("magic", {"name": S, "ref": S})
MAGIC_INT = tool("magic_int", {"ref": INT, "name": S})
AMOUNT = tool("amount", {"orig": N})
TOGGLE = tool("toggle", {"enabled": B})
NULLABLE = tool("set_nullable", {"value": {"type": "null"}})
CONFIG = tool("set_config", {"config": OBJ})
CALENDAR = tool("Calendar.create_event", {"title": S, "participants": {"type": "array",
                                          "items": S}, "metadata": OBJ})
IMAGINARY = tool("imaginary_number", {"number": {"type": "object",
                                                 "properties": {"real": N, "imaginary": N}}})
NESTED = tool("nested_args", {"tags": {"type": "array", "items": S}, "entries": {
    "type": "array", "items": {"type": "object", "properties": {"id": INT, "label": S}}}})
UNION_ARGS = tool("union_args", {
    "filter": {"anyOf": [{"type": "array", "items": S},
                         {"type": "object", "properties": {"field": S, "op": S}}]},
    "label": {"oneOf": [S, {"type": "object", "properties": {"text": S}}]},
    "limit": {"oneOf": [INT, {"type": "object", "properties": {"max": INT}}]},
})
NULL_STR = tool("set_nullable_str", {"name": {"type": ["string", "null"]}})
NULL_STR_NF = tool("set_nullable_str_nf", {"name": {"type": ["null", "string"]}})
NULL_INT = tool("set_nullable_int", {"count": {"type": ["integer", "null"]}})
STR_UNION = tool("set_union", {"value": {"type": ["string", "object"]},
                               "amount": {"type": ["string", "integer"]}})
ENUM_UNIT = tool("set_unit", {"unit": {"enum": ["celsius", "fahrenheit"]}})
STRING_PARAM = tool("string_param", {"text": S})
QUOTED = tool("quoted_unquoted", {"quoted": S, "unquoted": S})
_REQ_OPT = {"req1": S, "req2": INT, "opt1": S, "opt2": INT, "opt3": S, "opt4": INT}
T24 = tool("tool_2req_4opt", _REQ_OPT)
T25 = tool("tool_2req_5opt", {**_REQ_OPT, "opt5": S})
DIFF_MD = tool("read_file_diff_md", {"review_id": S, "file_id": S})
EXEC = tool("execute_command", {"command": S, "cwd": S, "timeout": INT})
EDIT_GPT = tool("edit", {"oldString": S, "newString": S, "replaceAll": B})
PROCESS_DATA = tool("process_data", {"input": S, "format": S})
FG_WEATHER = tool("get_weather", {"location": S})
FG_TEMP = tool("set_temperature", {"value": INT})

FILE = "ggml-org/llama.cpp tests/test-chat.cpp"
SF1: list[Call] = [("special_function", {"arg1": 1})]
SF_PAIR: list[Call] = [*SF1, ("special_function_with_opt", {"arg1": 1, "arg2": 2})]
HELLO = "Hello, world!\nWhat's up?"
THINKING = "I'm\nthinking"
PY_HELLO = 'def hello():\n    print("Hello, world!")\n\nhello()'
PWD: list[Call] = [("run_in_terminal", {"command": "pwd"})]
PARIS: list[Call] = [("get_time", {"city": "Paris"})]
BOTH_PARIS: list[Call] = [*PARIS, ("get_weather", {"city": "Paris"})]

CASES: list[PeerCase] = []


def _add(name: str, text: str, calls: list[Call], content: str | None, tools: tuple[Any, ...],
         where: str, family: str, **kw: Any) -> None:
    CASES.append(PeerCase(f"llamacpp-{name}", text, calls, content, tuple(tools),
                          f"{FILE}::{where}", family, **kw))


def _neg(name: str, text: str, tools: tuple[Any, ...], where: str, family: str,
         **kw: Any) -> None:
    _add(name, text, [], text, tools, where, family, **kw)


def _j(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


# --- Hermes 2 Pro (old test_template_output_parsers, COMMON_CHAT_FORMAT_HERMES_2_PRO) -----------
W = "test_template_output_parsers Hermes-2-Pro"
J1 = '{"name": "special_function", "arguments": {"arg1": 1}}'
_add("hermes-2-pro-call", f"<tool_call>\n{J1}\n</tool_call>", SF1, None, (SF,), W, "hermes")
_add("hermes-2-pro-content", f"{HELLO}<tool_call>\n{J1}\n</tool_call>", SF1, HELLO, (SF,), W,
     "hermes")
# QwQ's generation prompt opens the think block: only </think> shows.
_add("hermes-2-pro-qwq-think", f"{THINKING}</think>\n<tool_call>{J1}</tool_call>", SF1,
     f"{THINKING}</think>", (SF,), W, "hermes")
_add("hermes-2-pro-function-eq", '<function=special_function>{"arg1": 1}</function>', SF1, None,
     (SF,), W, "functionary")
_add("hermes-2-pro-function-name-attr",
     '<function name="special_function">\n{"arg1": 1}\n</function>', SF1, None, (SF,), W,
     "hermes")
for _tag in ("tool", "tools", "response", "json", "JSON"):
    _add(f"hermes-2-pro-{_tag.lower()}{'-upper' if _tag == 'JSON' else ''}-tag",
         f"<{_tag}>\n  {J1}\n</{_tag}>", SF1, None, (SF,), W, "hermes")
_add("hermes-2-pro-xml-tag", '<xml>\n  {\n    "name": "special_function", "arguments": '
     '{"arg1": 1}\n  }\n</xml>', SF1, None, (SF,), W, "hermes")
_add("hermes-2-pro-xml-fence-response", f"```xml\n<response>\n    {J1}\n</response>\n```", SF1,
     None, (SF,), W, "hermes")
_add("hermes-2-pro-xml-fence", f"```xml\n  {J1}\n```", SF1, None, (SF,), W, "bare_json")
_add("hermes-2-pro-plain-fence-indented", f"```\n  {J1}\n```", SF1, None, (SF,), W, "bare_json")
_add("hermes-2-pro-plain-fence", f"```\n{J1}\n```", SF1, None, (SF,), W, "bare_json")
_add("hermes-2-pro-json-fence", f"```json\n  {J1}\n```", SF1, None, (SF,), W, "bare_json")
_add("hermes-2-pro-json-fence-function-call",
     f"```json\n\n{' ' * 20}<function_call> {J1} \n{' ' * 20}</function_call> \n``` ",
     SF1, None, (SF,), W, "hermes")
_add("hermes-2-pro-bare-json", J1, SF1, None, (SF,), W, "bare_json")
_add("hermes-2-pro-bare-json-newline",
     '{\n  "name": "special_function", "arguments": {"arg1": 1}}', SF1, None, (SF,), W,
     "bare_json")
_HELLO_PY: list[Call] = [*SF1, ("python", {"code": "print('hello')"})]
_add("hermes-2-pro-parallel", f"<tool_call>\n{J1}\n</tool_call>\n<tool_call>\n"
     '{"name": "python", "arguments": {"code":"print(\'hello\')"}}\n</tool_call>', _HELLO_PY,
     None, (SF, PY), W, "hermes")
_add("hermes-2-pro-function-eq-parallel", '<function=special_function>{"arg1": 1}</function>\n'
     '<function=python>{"code":"print(\'hello\')"}</function>', _HELLO_PY, None, (SF, PY), W,
     "functionary")
_add("hermes-2-pro-python-lines", '<tool_call>\n{"name": "python", "arguments": '
     '{"code":"# This is a program:\\nprint(\'hey\')"}}\n</tool_call>',
     [("python", {"code": "# This is a program:\nprint('hey')"})], None, (SF, PY), W, "hermes")
_add("hermes-2-pro-prose-then-bare-json", f"This is not a tool call:\n{J1}", SF1,
     "This is not a tool call:", (SF,), W, "bare_json")
_neg("hermes-2-pro-content-only", HELLO, (SF,), W, "hermes")
_neg("hermes-2-pro-think-content", f"<think>{THINKING}</think>{HELLO}", (SF,), W, "hermes")
_neg("hermes-2-pro-think-md-empty-json", f"<think>{THINKING}</think>{HELLO}\n```json\n{{}}```",
     (SF,), W, "hermes")
_neg("hermes-2-pro-unclosed-think-garbage", "<think><tool_call>nah uhg</tool_call>", (SF,), W,
     "hermes")
_neg("hermes-2-pro-partial-name", 'Let\'s call something\n<tool_call>{"name"', (SF,), W,
     "hermes")

# --- Qwen3.5 (Qwen3-Coder XML; generation prompt opens <think>) -----------------------------------
W = "test_template_output_peg_parsers Qwen3.5-4B"


def xml_call(name: str, params: list[tuple[str, str]], wrap: bool = True, nl: bool = True) -> str:
    """Qwen3-Coder XML: one <function=..> with <parameter=..> values as written."""
    sep = "\n" if nl else ""
    body = "".join(f"<parameter={k}>{sep}{v}{sep}</parameter>\n" for k, v in params)
    inner = f"<function={name}>\n{body}</function>\n"
    return f"<tool_call>\n{inner}</tool_call>" if wrap else inner + "</tool_call>"


X_SF = xml_call("special_function", [("arg1", "1")])
X_SFO = xml_call("special_function_with_opt", [("arg1", "1"), ("arg2", "2")])
X_PWD = xml_call("run_in_terminal", [("command", "pwd")])
X_EDIT = xml_call("edit", [("filename", "foo.c"), ("oldString", "#iclunde"),
                           ("newString", "#include")])
EDIT_CALL: list[Call] = [("edit", {"filename": "foo.c", "oldString": "#iclunde",
                                   "newString": "#include"})]
_add("qwen3.5-call", X_SF, SF1, None, (SF,), W, "qwen3_coder")
_add("qwen3.5-think-call", f"{THINKING}\n</think>\n\n{X_SF}", SF1, f"{THINKING}\n</think>",
     (SF,), W, "qwen3_coder")
_add("qwen3.5-parallel", f"{X_SF}\n{X_SFO}", SF_PAIR, None, (SF, SFO), W, "qwen3_coder")
_add("qwen3.5-python-multiline", xml_call("python", [("code", PY_HELLO)]),
     [("python", {"code": PY_HELLO})], None, (PY,), W, "qwen3_coder")
_add("qwen3.5-edit", X_EDIT, EDIT_CALL, None, (EDIT,), W, "qwen3_coder")
_add("qwen3.5-value-trailing-newline", xml_call("edit", [
    ("filename", "foo.c"), ("oldString", "#iclunde"), ("newString", "#include\n")]),
    [("edit", {"filename": "foo.c", "oldString": "#iclunde", "newString": "#include\n"})], None,
    (EDIT,), W, "qwen3_coder")
_add("qwen3.5-value-leading-indent", xml_call("python", [("code", '    print("Hello, world!")')]),
     [("python", {"code": '    print("Hello, world!")'})], None, (PY,), W, "qwen3_coder")
_add("qwen3.5-call-ends-open-think", X_PWD, PWD, None, (RUN,), W, "qwen3_coder")
_add("qwen3.5-reasoning-then-call-no-close", f"Need to inspect the current directory.\n{X_PWD}",
     PWD, "Need to inspect the current directory.", (RUN,), W, "qwen3_coder")
_add("qwen3.5-empty-args", "<tool_call>\n<function=empty_args>\n</function>\n</tool_call>",
     [("empty_args", {})], None, (EMPTY,), W, "qwen3_coder")
_add("qwen3.5-empty-args-no-props",
     "<tool_call>\n<function=empty_args_no_props>\n</function>\n</tool_call>",
     [("empty_args_no_props", {})], None, (EMPTY_NO_PROPS,), W, "qwen3_coder")
_add("qwen3.5-empty-think", f"<think>\n\n</think>\n\n{X_SF}", SF1, "<think>\n\n</think>", (SF,),
     W, "qwen3_coder")
_add("qwen3.5-bare-close-think", f"</think>\n\n{X_SF}", SF1, "</think>", (SF,), W, "qwen3_coder")
_add("qwen3.5-close-think-prose", f"</think>\n\nLet me inspect the current directory.\n{X_PWD}",
     PWD, "</think>\n\nLet me inspect the current directory.", (RUN,), W, "qwen3_coder")
_add("qwen3.5-reasoning-prose-call",
     f"I should inspect the directory.\n</think>\n\nLet me inspect it now.\n{X_PWD}", PWD,
     "I should inspect the directory.\n</think>\n\nLet me inspect it now.", (RUN,), W,
     "qwen3_coder")
_add("qwen3.5-after-tool-history", f"I need to run a terminal command.\n</think>\n\n{X_PWD}",
     PWD, "I need to run a terminal command.\n</think>", (TODO_MANAGE, RUN), W, "qwen3_coder")
_neg("qwen3.5-content-only", f"{THINKING}\n</think>\n\n{HELLO}", (SF,), W, "qwen3_coder")

# --- Nemotron 3 Nano (same XML, newline after </tool_call>) ------------------------------------
W = "test_template_output_peg_parsers NVIDIA-Nemotron-3-Nano-30B-A3B"
_add("nemotron-3-call", X_SF + "\n", SF1, None, (SF,), W, "qwen3_coder")
_add("nemotron-3-think-call", f"{THINKING}\n</think>\n{X_SF}\n", SF1, f"{THINKING}\n</think>",
     (SF,), W, "qwen3_coder")
_add("nemotron-3-parallel", f"{X_SF}\n{X_SFO}\n", SF_PAIR, None, (SF, SFO), W, "qwen3_coder")
_add("nemotron-3-python", xml_call("python", [("code", PY_HELLO)]) + "\n",
     [("python", {"code": PY_HELLO})], None, (PY,), W, "qwen3_coder")

# --- Qwen3-Coder -------------------------------------------------------------------------------
W = "test_template_output_peg_parsers Qwen3-Coder"
X_SF_OPEN = xml_call("special_function", [("arg1", "1")], wrap=False)
_add("qwen3-coder-call", X_SF, SF1, None, (SF,), W, "qwen3_coder")
_add("qwen3-coder-no-open-tag", X_SF_OPEN, SF1, None, (SF,), W, "qwen3_coder")
_add("qwen3-coder-prose-no-open-tag", f"Let me call it.\n{X_SF_OPEN}", SF1, "Let me call it.",
     (SF,), W, "qwen3_coder")
_add("qwen3-coder-no-open-tag-parallel", f"{X_SF_OPEN}\n{X_SFO}", SF_PAIR, None, (SF, SFO), W,
     "qwen3_coder")
_add("qwen3-coder-parallel", f"{X_SF}\n{X_SFO}", SF_PAIR, None, (SF, SFO), W, "qwen3_coder")
_add("qwen3-coder-unicode", xml_call("python", [("code", "格")]), [("python", {"code": "格"})],
     None, (PY,), W, "qwen3_coder")
_MARKUP = "<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>"
_add("qwen3-coder-html-value", xml_call("html", [("markup", _MARKUP)]),
     [("html", {"markup": _MARKUP})], None, (HTML,), W, "qwen3_coder")
_TODOS = [{"item": "Check stuff", "selected": False}, {"item": "Prepare stuff", "selected": True}]
_add("qwen3-coder-array-of-objects", xml_call("todo_list", [("todos", _j(_TODOS))]),
     [("todo_list", {"todos": _TODOS})], None, (TODO,), W, "qwen3_coder")
_add("qwen3-coder-required-any-order", xml_call("edit", [
    ("newString", "#include"), ("filename", "foo.c"), ("oldString", "#iclunde")]),
    [("edit", {"newString": "#include", "filename": "foo.c", "oldString": "#iclunde"})], None,
    (EDIT,), W, "qwen3_coder")
_add("qwen3-coder-2req4opt-req2-first", xml_call("tool_2req_4opt", [
    ("req2", "42"), ("req1", "hello"), ("opt2", "200")]),
    [("tool_2req_4opt", {"req2": 42, "req1": "hello", "opt2": 200})], None, (T24,), W,
    "qwen3_coder")
_add("qwen3-coder-2req4opt-reversed-opt", xml_call("tool_2req_4opt", [
    ("req1", "hello"), ("req2", "42"), ("opt4", "100"), ("opt2", "200")]),
    [("tool_2req_4opt", {"req1": "hello", "req2": 42, "opt4": 100, "opt2": 200})], None, (T24,),
    W, "qwen3_coder")
_add("qwen3-coder-2req5opt-shuffled", xml_call("tool_2req_5opt", [
    ("req1", "test"), ("req2", "99"), ("opt3", "c"), ("opt1", "a"), ("opt5", "e"), ("opt4", "4"),
    ("opt2", "2")]), [("tool_2req_5opt", {"req1": "test", "req2": 99, "opt3": "c", "opt1": "a",
                                          "opt5": "e", "opt4": 4, "opt2": 2})], None, (T25,), W,
     "qwen3_coder")
_add("qwen3-coder-nullable-string", xml_call("set_nullable_str", [("name", "hello world")]),
     [("set_nullable_str", {"name": "hello world"})], None, (NULL_STR,), W, "qwen3_coder")
_add("qwen3-coder-nullable-string-null-first",
     xml_call("set_nullable_str_nf", [("name", "hello world")]),
     [("set_nullable_str_nf", {"name": "hello world"})], None, (NULL_STR_NF,), W, "qwen3_coder")
_add("qwen3-coder-nullable-int", xml_call("set_nullable_int", [("count", "42")]),
     [("set_nullable_int", {"count": 42})], None, (NULL_INT,), W, "qwen3_coder")
_add("qwen3-coder-nullable-string-null", xml_call("set_nullable_str", [("name", "null")]),
     [("set_nullable_str", {"name": None})], None, (NULL_STR,), W, "qwen3_coder")
_add("qwen3-coder-string-union-object", xml_call("set_union", [
    ("value", '{"a": 1}'), ("amount", "2 dollars")]),
    [("set_union", {"value": {"a": 1}, "amount": "2 dollars"})], None, (STR_UNION,), W,
    "qwen3_coder")
_add("qwen3-coder-string-union-invalid-json", xml_call("set_union", [
    ("value", "{not valid json"), ("amount", "42")]),
    [("set_union", {"value": "{not valid json", "amount": 42})], None, (STR_UNION,), W,
    "qwen3_coder")
_add("qwen3-coder-enum-no-type", xml_call("set_unit", [("unit", "celsius")]),
     [("set_unit", {"unit": "celsius"})], None, (ENUM_UNIT,), W, "qwen3_coder")

# --- StepFun 3.5 Flash (Qwen3-Coder XML after an opened think block) ---------------------------
W = "test_template_output_peg_parsers StepFun3.5-Flash"
_add("stepfun-3.5-numeric-string", "Let me call the magic tool\n</think>\n" + xml_call(
    "magic", [("name", "fooBar"), ("ref", "5123123")]),
    [("magic", {"name": "fooBar", "ref": "5123123"})], "Let me call the magic tool\n</think>",
    (MAGIC,), W, "qwen3_coder")
_add("stepfun-3.5-big-int", "Let me call the special function\n</think>\n" + xml_call(
    "special_function", [("arg1", "42555916")]), [("special_function", {"arg1": 42555916})],
    "Let me call the special function\n</think>", (SF,), W, "qwen3_coder")
_add("stepfun-3.5-empty-string", "Call string_param with empty text\n</think>\n"
     "<tool_call>\n<function=string_param>\n<parameter=text>\n\n</parameter>\n</function>\n"
     "</tool_call>", [("string_param", {"text": ""})],
     "Call string_param with empty text\n</think>", (STRING_PARAM,), W, "qwen3_coder")
_add("stepfun-3.5-quoted-unquoted", "Test simple quoted unquoted\n</think>\n" + xml_call(
    "quoted_unquoted", [("quoted", '"foo"'), ("unquoted", "foo")]),
    [("quoted_unquoted", {"quoted": '"foo"', "unquoted": "foo"})],
    "Test simple quoted unquoted\n</think>", (QUOTED,), W, "qwen3_coder")
_add("stepfun-3.5-quoted-escapes", "Test complex quoted unquoted\n</think>\n" + xml_call(
    "quoted_unquoted", [("quoted", '"printf(\\"foo\\");"'), ("unquoted", 'printf("foo");')]),
    [("quoted_unquoted", {"quoted": '"printf(\\"foo\\");"', "unquoted": 'printf("foo");'})],
    "Test complex quoted unquoted\n</think>", (QUOTED,), W, "qwen3_coder")
_add("stepfun-3.5-negative-int", "Test negative number\n</think>\n" + xml_call(
    "magic_int", [("ref", "-14")]), [("magic_int", {"ref": -14})],
    "Test negative number\n</think>", (MAGIC_INT,), W, "qwen3_coder")
_add("stepfun-3.5-object", "Test imaginary number\n</think>\n" + xml_call(
    "imaginary_number", [("number", '{ "real": 3.14, "imaginary": 2.71 }')]),
    [("imaginary_number", {"number": {"real": 3.14, "imaginary": 2.71}})],
    "Test imaginary number\n</think>", (IMAGINARY,), W, "qwen3_coder")

# --- Seed-OSS ----------------------------------------------------------------------------------
W = "test_template_output_peg_parsers ByteDance-Seed-OSS"


def seed(name: str, params: list[tuple[str, str]], nl: bool = False) -> str:
    sep = "\n" if nl else ""
    body = "".join(f"<parameter={k}>{sep}{v}{sep}</parameter>\n" for k, v in params)
    return f"<seed:tool_call>\n<function={name}>\n{body}</function>\n</seed:tool_call>"


_add("seed-oss-call", seed("special_function", [("arg1", "1")]), SF1, None, (SF,), W,
     "seed_oss")
_add("seed-oss-parallel", seed("special_function", [("arg1", "1")]) + "\n" + seed(
    "special_function_with_opt", [("arg1", "1"), ("arg2", "2")]), SF_PAIR, None, (SF, SFO), W,
    "seed_oss")
_add("seed-oss-array-of-objects", seed("todo_list", [("todos", _j(_TODOS))]),
     [("todo_list", {"todos": _TODOS})], None, (TODO,), W, "seed_oss")
_OLD = 'def foo(arg = "14"):\n    return arg + "bar"\n'
_NEW = 'def foo(arg = "15"):\n    pass\n'
_add("seed-oss-quotes-trailing-newline", seed("edit", [
    ("filename", "foo.cpp"), ("oldString", _OLD), ("newString", _NEW)]),
    [("edit", {"filename": "foo.cpp", "oldString": _OLD, "newString": _NEW})], None, (EDIT,), W,
    "seed_oss", differs="latchgate trims one framing newline at each end of an XML parameter value "
    "(BEHAVIOUR.md 4.1, the Qwen3-Coder rules of research/toolcall-formats.md); llama.cpp keeps "
    "the trailing newline when the value did not open with one.")
W = "test_template_output_parsers Seed-OSS"
_add("seed-oss-newline-value", seed("special_function", [("arg1", "42")], nl=True),
     [("special_function", {"arg1": 42})], None, (SF, PROCESS_DATA), W, "seed_oss")
_add("seed-oss-multi-param", seed("process_data", [("input", "test"), ("format", "json")], True),
     [("process_data", {"input": "test", "format": "json"})], None, (SF, PROCESS_DATA), W,
     "seed_oss")
_add("seed-oss-think-call", "<seed:think>I need to call the special function</seed:think>"
     + seed("special_function", [("arg1", "42")], nl=True), [("special_function", {"arg1": 42})],
     "<seed:think>I need to call the special function</seed:think>", (SF, PROCESS_DATA), W,
     "seed_oss")
_neg("seed-oss-think-content", "<seed:think>I'm thinking about the answer</seed:think>\n"
     "Hello, world!", (SF,), W, "seed_oss")

# --- Mistral: Ministral 3 reasoning, Devstral, Small 3.2, Nemo ---------------------------------
W = "test_template_output_peg_parsers Ministral-3-14B-Reasoning-2512"
_add("ministral-call", '[TOOL_CALLS]special_function[ARGS]{"arg1":1}', SF1, None, (SF,), W,
     "mistral")
_add("ministral-think-call", f'[THINK]{THINKING}[/THINK][TOOL_CALLS]special_function[ARGS]'
     '{"arg1":1}', SF1, f"[THINK]{THINKING}[/THINK]", (SF,), W, "mistral")
_add("ministral-parallel", '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}'
     '[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}', SF_PAIR, None,
     (SF, SFO), W, "mistral")
_FAKE = '[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK]'
_add("ministral-fake-call-in-think", _FAKE + '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}',
     SF1, _FAKE, (SF,), W, "mistral")
_neg("ministral-think-content", f"[THINK]{THINKING}[/THINK]{HELLO}", (SF,), W, "mistral")
W = "test_template_output_peg_parsers unsloth-mistral-Devstral-Small-2507"
_add("devstral-call", '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', SF1, None, (SF,), W,
     "mistral")
_add("devstral-content-call", f'{HELLO}[TOOL_CALLS]special_function[ARGS]{{"arg1": 1}}', SF1,
     HELLO, (SF,), W, "mistral")
W = "test_template_output_peg_parsers Mistral-Small-3.2-24B-Instruct-2506"
_add("mistral-small-3.2-call-id", '[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]'
     '{"arg1": 1}', SF1, None, (SF,), W, "mistral")
_add("mistral-small-3.2-parallel-call-ids",
     '[TOOL_CALLS]special_function[CALL_ID]000000001[ARGS]{"arg1": 1}'
     '[TOOL_CALLS]special_function_with_opt[CALL_ID]000000002[ARGS]{"arg1": 1, "arg2": 2}',
     SF_PAIR, None, (SF, SFO), W, "mistral")
W = "test_template_output_peg_parsers mistralai-Mistral-Nemo-Instruct-2407"
_add("mistral-nemo-array-with-id",
     '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]',
     SF1, None, (SF,), W, "mistral")

# --- Command R7B, Cohere2 MoE, Command R+ ------------------------------------------------------
W = "test_template_output_peg_parsers CohereForAI-c4ai-command-r7b-12-2024-tool_use"
_ACT = ('<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", '
        '"parameters": {"arg1": 1}}\n]<|END_ACTION|>')
_R7B_THINK = f"<|START_THINKING|>{THINKING}<|END_THINKING|>"
_add("command-r7b-think-action", _R7B_THINK + _ACT, SF1, _R7B_THINK, (SF,), W, "command_r")
_add("command-r7b-empty-think-action", "<|START_THINKING|><|END_THINKING|>" + _ACT, SF1,
     "<|START_THINKING|><|END_THINKING|>", (SF,), W, "command_r")
_neg("command-r7b-response", f"<|START_RESPONSE|>{HELLO}<|END_RESPONSE|>", (SF,), W,
     "command_r")
W = "test_template_output_peg_parsers Cohere2MoE"
_add("cohere2-think-action", f"{THINKING}<|END_THINKING|>" + _ACT, SF1,
     f"{THINKING}<|END_THINKING|>", (SF,), W, "command_r")
_add("cohere2-array-arg", '<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", '
     '"tool_name": "todo_list", "parameters": {"todos": ["buy milk", "walk dog"]}}\n'
     ']<|END_ACTION|>', [("todo_list", {"todos": ["buy milk", "walk dog"]})], "<|END_THINKING|>",
     (TODO,), W, "command_r")
_add("cohere2-parallel", f'{THINKING}<|END_THINKING|><|START_ACTION|>[\n'
     '    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}},\n'
     '    {"tool_call_id": "1", "tool_name": "python", "parameters": {"code": "print(\'hey\')"}}'
     '\n]<|END_ACTION|>', [*SF1, ("python", {"code": "print('hey')"})],
     f"{THINKING}<|END_THINKING|>", (SF, PY), W, "command_r")
_neg("cohere2-text", f"{THINKING}<|END_THINKING|><|START_TEXT|>{HELLO}<|END_TEXT|>", (SF,), W,
     "command_r")
W = "test_template_output_peg_parsers CohereForAI-c4ai-command-r-plus-tool_use"
_add("command-r-plus-action-fence", 'Action:\n```json\n[{"tool_name": "special_function", '
     '"parameters": {"arg1": 1}}]\n```', SF1, None, (SF,), W, "COMMAND_R_PLUS")

# --- Gemma 4 and FunctionGemma -----------------------------------------------------------------
W = "test_template_output_peg_parsers google-gemma-4-31B-it"
Q = '<|"|>'


def g4(name: str, args: str) -> str:
    return f"<|tool_call>call:{name}{{{args}}}<tool_call|>"


_add("gemma4-string", g4("get_time", f"city:{Q}London{Q}"), [("get_time", {"city": "London"})],
     None, (GET_TIME,), W, "functiongemma")
_add("gemma4-string-space", g4("get_time", f"city:{Q}San Francisco{Q}"),
     [("get_time", {"city": "San Francisco"})], None, (GET_TIME,), W, "functiongemma")
_add("gemma4-empty-args", g4("empty_args", ""), [("empty_args", {})], None, (EMPTY,), W,
     "functiongemma")
_add("gemma4-content-call", HELLO + g4("get_time", f"city:{Q}Paris{Q}"), PARIS, HELLO,
     (GET_TIME,), W, "functiongemma")
_add("gemma4-thought-call", f"<|channel>thought\n{THINKING}<channel|>"
     + g4("get_time", f"city:{Q}Paris{Q}"), PARIS, f"<|channel>thought\n{THINKING}<channel|>",
     (GET_TIME,), W, "functiongemma")
_add("gemma4-parallel", g4("get_time", f"city:{Q}London{Q}") + g4("get_weather",
     f"city:{Q}Paris{Q}"), [("get_time", {"city": "London"}), ("get_weather", {"city": "Paris"})],
     None, (GET_TIME, GET_WEATHER), W, "functiongemma")
for _n, _raw, _tool, _args in [
    ("int", "arg1:42", SF, {"arg1": 42}), ("negative", "arg1:-7", SF, {"arg1": -7}),
    ("decimal", "orig:3.14", AMOUNT, {"orig": 3.14}), ("true", "enabled:true", TOGGLE,
                                                       {"enabled": True}),
    ("false", "enabled:false", TOGGLE, {"enabled": False}),
    ("null", "value:null", NULLABLE, {"value": None}),
    ("array", f"todos:[{Q}buy milk{Q},{Q}walk dog{Q}]", TODO, {"todos": ["buy milk", "walk dog"]}),
    ("dict", f"config:{{theme:{Q}dark{Q},count:3}}", CONFIG,
     {"config": {"theme": "dark", "count": 3}}),
    ("empty-array", "todos:[]", TODO, {"todos": []}),
    ("empty-dict", "config:{}", CONFIG, {"config": {}}),
    ("scientific", "orig:1.5e10", AMOUNT, {"orig": 1.5e10}),
]:
    _name = _tool["function"]["name"]
    _add(f"gemma4-{_n}", g4(_name, _raw), [(_name, _args)], None, (_tool,), W, "functiongemma")
W = "test_template_output_parsers FunctionGemma"
_add("functiongemma-escape-string",
     "<start_function_call>call:get_weather{location:<escape>Tokyo<escape>}<end_function_call>",
     [("get_weather", {"location": "Tokyo"})], None, (FG_WEATHER, FG_TEMP), W, "functiongemma")
_add("functiongemma-number", "<start_function_call>call:set_temperature{value:25}"
     "<end_function_call>", [("set_temperature", {"value": 25})], None, (FG_WEATHER, FG_TEMP), W,
     "functiongemma")
_add("functiongemma-content-call", "Let me check that for you.<start_function_call>call:"
     "get_weather{location:<escape>London<escape>}<end_function_call>",
     [("get_weather", {"location": "London"})], "Let me check that for you.",
     (FG_WEATHER, FG_TEMP), W, "functiongemma")

# --- Granite -----------------------------------------------------------------------------------
W = "test_template_output_peg_parsers ibm-granite-granite-4.0"
_add("granite-4.0-tool-call", f"<tool_call>\n{J1}\n</tool_call>", SF1, None, (SF,), W, "hermes")
W = "test_template_output_parsers Granite-3.3"
_add("granite-3.3-call", f"<|tool_call|>[{J1}]", SF1, None, (SF,), W, "granite")
_add("granite-3.3-think-call-cut", f"<think>{THINKING}</think><|tool_call|>[{J1}, {{", SF1,
     f"<think>{THINKING}</think>", (SF,), W, "granite", finish="length")
_neg("granite-3.3-think-response", f"<think>{THINKING}</think><response>{HELLO}</response>",
     (SF,), W, "granite")

# --- DeepSeek R1 / V3.1 ------------------------------------------------------------------------
W = "test_template_output_peg_parsers llama-cpp-deepseek-r1"
R1_CALL = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n"
           '```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
R1_CALL_NL = R1_CALL.replace('{"arg1": 1}```', '{"arg1": 1}\n```')
_add("deepseek-r1-close-think-call", "</think>" + R1_CALL, SF1, "</think>", (SF,), W, "deepseek")
_add("deepseek-r1-call", R1_CALL, SF1, None, (SF,), W, "deepseek")
W = "test_template_output_parsers DeepSeek-R1 (llama-cpp-deepseek-r1)"
_add("deepseek-r1-think-unparsed", f"<think>{THINKING}</think>\n\n{R1_CALL_NL}", SF1,
     f"<think>{THINKING}</think>", (SF,), W, "deepseek")
_add("deepseek-r1-short-calls-marker", "<｜tool▁calls｜>function<｜tool▁sep｜>special_function\n"
     '```json\n{"arg1": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', SF1, None, (SF,), W,
     "deepseek")
_neg("deepseek-r1-marker-mentioned", "I need to remember the correct syntax. It starts with "
     "<｜tool▁calls▁begin｜> and ends with", (SF,), W, "deepseek")
W = "test_template_output_peg_parsers deepseek-ai-DeepSeek-V3.1"


def v31(name: str, args: str) -> str:
    return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>"


def v31_block(*calls: str) -> str:
    return "<｜tool▁calls▁begin｜>" + "".join(calls) + "<｜tool▁calls▁end｜>"


_add("deepseek-v3.1-call", v31_block(v31("get_time", '{"city": "XYZCITY"}')),
     [("get_time", {"city": "XYZCITY"})], None, (GET_TIME,), W, "deepseek")
_add("deepseek-v3.1-reasoning-call", "REASONING</think>" + v31_block(
    v31("get_time", '{"city": "Tokyo"}')), [("get_time", {"city": "Tokyo"})], "REASONING</think>",
    (GET_TIME,), W, "deepseek")
_add("deepseek-v3.1-reasoning-content-parallel", "REASONING</think>CONTENT" + v31_block(
    v31("get_time", '{"city": "Paris"}'), v31("get_weather", '{"city": "Paris"}')), BOTH_PARIS,
    "REASONING</think>CONTENT", (GET_TIME, GET_WEATHER), W, "deepseek")

# --- DeepSeek V3.2 / V4 DSML -------------------------------------------------------------------


def dsml(block: str, *invokes: tuple[str, list[tuple[str, str, str]]]) -> str:
    out = f"<｜DSML｜{block}>\n"
    for name, params in invokes:
        out += f'<｜DSML｜invoke name="{name}">\n'
        for k, is_str, v in params:
            out += f'<｜DSML｜parameter name="{k}" string="{is_str}">{v}</｜DSML｜parameter>\n'
        out += "</｜DSML｜invoke>\n"
    return out + f"</｜DSML｜{block}>"


for _ver, _block in (("v3.2", "function_calls"), ("v4", "tool_calls")):
    W = f"test_template_output_peg_parsers deepseek-ai-DeepSeek-{_ver.upper()}"
    _p = f"deepseek-{_ver}-dsml"
    _add(f"{_p}-think-call", "Let me check the time</think>\n\n" + dsml(
        _block, ("get_time", [("city", "true", "Tokyo")])), [("get_time", {"city": "Tokyo"})],
        "Let me check the time</think>", (GET_TIME,), W, "dsml")
    _add(f"{_p}-int", dsml(_block, ("special_function", [("arg1", "false", "1")])), SF1, None,
         (SF,), W, "dsml")
    _add(f"{_p}-parallel", "Calling both</think>\n\n" + dsml(
        _block, ("get_time", [("city", "true", "Paris")]),
        ("get_weather", [("city", "true", "Paris")])), BOTH_PARIS, "Calling both</think>",
        (GET_TIME, GET_WEATHER), W, "dsml")
    _add(f"{_p}-content-before", "Thinking about it</think>Let me call the function.\n\n" + dsml(
        _block, ("special_function", [("arg1", "false", "1")])), SF1,
        "Thinking about it</think>Let me call the function.", (SF,), W, "dsml")
    _add(f"{_p}-mixed-params", "Multi-arg call</think>\n\n" + dsml(
        _block, ("magic_int", [("ref", "false", "42"), ("name", "true", "foo bar")])),
        [("magic_int", {"ref": 42, "name": "foo bar"})], "Multi-arg call</think>", (MAGIC_INT,),
        W, "dsml")
W = "test_template_output_peg_parsers deepseek-ai-DeepSeek-V3.2"
for _n, _tool, _k, _v, _args in [
    ("negative", MAGIC_INT, "ref", "-14", {"ref": -14}),
    ("decimal", AMOUNT, "orig", "3.14", {"orig": 3.14}),
    ("boolean", TOGGLE, "enabled", "true", {"enabled": True}),
    ("array", TODO, "todos", '["buy milk","walk dog"]', {"todos": ["buy milk", "walk dog"]}),
    ("object", CONFIG, "config", '{"theme":"dark","level":2}',
     {"config": {"theme": "dark", "level": 2}}),
]:
    _name = _tool["function"]["name"]
    _add(f"deepseek-v3.2-dsml-{_n}", f"Test {_n}</think>\n\n" + dsml(
        "function_calls", (_name, [(_k, "false", _v)])), [(_name, _args)], f"Test {_n}</think>",
        (_tool,), W, "dsml")
_add("deepseek-v3.2-dsml-empty-reasoning", "</think>\n\n" + dsml(
    "function_calls", ("get_time", [("city", "true", "XYZCITY")])),
    [("get_time", {"city": "XYZCITY"})], "</think>", (GET_TIME,), W, "dsml")
W = "test_template_output_peg_parsers deepseek-ai-DeepSeek-V4"
_add("deepseek-v4-dsml-no-think-close", "Let me check the time\n\n" + dsml(
    "tool_calls", ("get_time", [("city", "true", "Tokyo")])), [("get_time", {"city": "Tokyo"})],
    "Let me check the time", (GET_TIME,), W, "dsml")
W = "test_template_output_peg_parsers deepseek-ai-DeepSeek-V4-Flash-0731"
_add("deepseek-v4-flash-leading-newlines", "\n\n" + dsml(
    "tool_calls", ("special_function", [("arg1", "false", "1")])), SF1, None, (SF,), W, "dsml")

# --- GLM 4.6 / 4.7, Spark 2.5, Ling 3.0 (arg_key / arg_value) ----------------------------------
W = "test_template_output_peg_parsers GLM-4.6"
GLM_SF = "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>"
GLM_SFO = ("<tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value>"
           "<arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>")
_add("glm-4.6-call", "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1"
     "</arg_value>\n</tool_call>", SF1, None, (SF,), W, "glm")
W = "test_template_output_peg_parsers GLM-4.7-Flash"
_add("glm-4.7-call", GLM_SF, SF1, None, (SF,), W, "glm")
_add("glm-4.7-think-call", f"{THINKING}</think>{GLM_SF}", SF1, f"{THINKING}</think>", (SF,), W,
     "glm")
_add("glm-4.7-parallel", GLM_SF + GLM_SFO, SF_PAIR, None, (SF, SFO), W, "glm")
_add("glm-4.7-no-arg-tags", "Let me read the diff content.</think>"
     "<tool_call>read_file_diff_md</tool_call>", [("read_file_diff_md", {})],
     "Let me read the diff content.</think>", (DIFF_MD,), W, "glm")
_neg("glm-4.7-think-content", f"{THINKING}</think>{HELLO}", (SF,), W, "glm")
W = "test_template_output_peg_parsers Spark2.5"


def glm(name: str, params: list[tuple[str, str]], nl: str = "") -> str:
    body = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{v}</arg_value>{nl}" for k, v in params)
    return f"<tool_call>{name}{nl}{body}</tool_call>"


_SPARK_CFG = {"source": "spark", "options": {"strict": True}}
_SPARK_ENTRIES = [{"id": 1, "label": "first"}, {"id": 2, "label": "第二"}]
_add("spark-2.5-six-typed-calls", "Preparing updates." + glm(
    "magic_int", [("ref", "42"), ("name", "上海")]) + glm("amount", [("orig", "2.5")]) + glm(
    "toggle", [("enabled", "true")]) + glm("set_config", [("config", _j(_SPARK_CFG))]) + glm(
    "nested_args", [("tags", _j(["alpha", "测试"])), ("entries", _j(_SPARK_ENTRIES))]) + glm(
    "empty_args", []), [
    ("magic_int", {"ref": 42, "name": "上海"}), ("amount", {"orig": 2.5}),
    ("toggle", {"enabled": True}), ("set_config", {"config": _SPARK_CFG}),
    ("nested_args", {"tags": ["alpha", "测试"], "entries": _SPARK_ENTRIES}), ("empty_args", {})],
    "Preparing updates.", (MAGIC_INT, AMOUNT, TOGGLE, CONFIG, NESTED, EMPTY), W, "glm")
W = "test_template_output_peg_parsers inclusionai-ling-3.0-flash"
LING = glm("get_time", [("city", "Paris")], "\n")
_add("ling-3.0-call-before-think-close", f"I need to check the time first.\n{LING}", PARIS,
     "I need to check the time first.", (GET_TIME,), W, "glm")
_add("ling-3.0-think-prose-call", f"Let me check the time.\n</think>\nChecking it now.\n{LING}",
     PARIS, "Let me check the time.\n</think>\nChecking it now.", (GET_TIME,), W, "glm")
_add("ling-3.0-prose-after-call", f"{LING}\nThe time has been checked.", PARIS,
     "The time has been checked.", (GET_TIME,), W, "glm")
_add("ling-3.0-parallel", f"</think>\n{LING}\n{LING}", [*PARIS, *PARIS], "</think>", (GET_TIME,),
     W, "glm")
_MARKERS = "contains </think> and <tool_call> strings"
_add("ling-3.0-markers-in-value", "check this\n</think>\n" + glm(
    "tool_2req_4opt", [("req1", _MARKERS), ("req2", "1")], "\n"),
    [("tool_2req_4opt", {"req1": _MARKERS, "req2": 1})], "check this\n</think>", (T24,), W, "glm",
    differs="A `</think>` inside an argument value is the last `</think>`, and BEHAVIOUR.md 4.1 "
    "looks for calls only after it, so the call stays text.")
_add("ling-3.0-role-end-token", f"{LING}<|role_end|>", PARIS, None, (GET_TIME,), W, "glm")
_add("ling-3.0-compact", "</think>\n" + glm("get_time", [("city", "Paris")]), PARIS, "</think>",
     (GET_TIME,), W, "glm")
_add("ling-3.0-required-any-order", "</think>\n" + glm(
    "tool_2req_4opt", [("req2", "7"), ("req1", "hello")], "\n"),
    [("tool_2req_4opt", {"req2": 7, "req1": "hello"})], "</think>", (T24,), W, "glm")
_add("ling-3.0-nullable-null", "</think>\n" + glm("set_nullable_str", [("name", "null")], "\n"),
     [("set_nullable_str", {"name": None})], "</think>", (NULL_STR,), W, "glm")
_add("ling-3.0-nullable-number-like-string", "</think>\n" + glm(
    "set_nullable_str", [("name", "123 Main St")], "\n"),
    [("set_nullable_str", {"name": "123 Main St"})], "</think>", (NULL_STR,), W, "glm")
_add("ling-3.0-string-union-typed", "</think>\n" + glm(
    "set_union", [("value", '{"a": 1}'), ("amount", "7")], "\n"),
    [("set_union", {"value": {"a": 1}, "amount": 7})], "</think>", (STR_UNION,), W, "glm")
_add("ling-3.0-string-union-raw", "</think>\n" + glm(
    "set_union", [("value", "plain text"), ("amount", "1abc")], "\n"),
    [("set_union", {"value": "plain text", "amount": "1abc"})], "</think>", (STR_UNION,), W,
    "glm")

# --- Kimi K3 (XTML) and Kimi K2 ----------------------------------------------------------------
W = "test_template_output_peg_parsers Kimi-K3"
K3_RESP = "<|open|>response<|sep|><|close|>response<|sep|>"
K3_END = "<|close|>tools<|sep|><|close|>message<|sep|>"


def k3_call(name: str, idx: int, args: list[tuple[str, str, str]]) -> str:
    body = "".join(f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>'
                   for k, t, v in args)
    return f'<|open|>call tool="{name}" index="{idx}"<|sep|>{body}<|close|>call<|sep|>'


K3_SF = k3_call("special_function", 1, [("arg1", "number", "1")])
_add("kimi-k3-call", K3_RESP + "<|open|>tools<|sep|>" + K3_SF + K3_END, SF1, None, (SF,), W,
     "kimi_k3")
_add("kimi-k3-think-content-call", "I should call it<|close|>think<|sep|><|open|>response<|sep|>"
     "On it.<|close|>response<|sep|><|open|>tools<|sep|>" + K3_SF + K3_END, SF1,
     "I should call it<|close|>think<|sep|>On it.", (SF,), W, "kimi_k3",
     differs="A K3 response section with words keeps its `<|open|>response<|sep|>`: the stream "
     "relays the words before the tools show, and a reply with no call keeps its wrapper "
     "(llamacpp-kimi-k3-prose-mentions-tags); BEHAVIOUR.md 4.3 delays no ordinary text.")
_add("kimi-k3-two-typed-args", K3_RESP + "<|open|>tools<|sep|>" + k3_call(
    "special_function_with_opt", 1, [("arg1", "number", "1"), ("arg2", "number", "2")]) + K3_END,
    SF_PAIR[1:], None, (SFO,), W, "kimi_k3")
_add("kimi-k3-parallel", K3_RESP + "<|open|>tools<|sep|>" + K3_SF + k3_call(
    "special_function_with_opt", 2, [("arg1", "number", "1"), ("arg2", "number", "2")]) + K3_END,
    SF_PAIR, None, (SF, SFO), W, "kimi_k3")
_add("kimi-k3-string-arg", K3_RESP + "<|open|>tools<|sep|>" + k3_call(
    "python", 1, [("code", "string", "print('hey')")]) + K3_END,
    [("python", {"code": "print('hey')"})], None, (PY,), W, "kimi_k3")
_neg("kimi-k3-prose-mentions-tags", "<|open|>response<|sep|>Use the response tag, then message "
     "the handler.<|close|>response<|sep|><|close|>message<|sep|>", (SF,), W, "kimi_k3")
W = "test_template_output_peg_parsers Kimi-K2-Thinking"


def k2(name: str, idx: int, args: str, end: bool = True) -> str:
    close = "<|tool_call_end|>" if end else ""
    return (f"<|tool_call_begin|>functions.{name}:{idx}<|tool_call_argument_begin|>{args}"
            + close)


def k2_section(*calls: str) -> str:
    return "<|tool_calls_section_begin|>" + "".join(calls) + "<|tool_calls_section_end|>"


K2_SF = k2("special_function", 0, '{"arg1": 1}')
K2_PY = k2("python", 1, '{"code": "print(\'hey\')"}')
SF_PY_HEY: list[Call] = [*SF1, ("python", {"code": "print('hey')"})]
_add("kimi-k2-call", k2_section(K2_SF), SF1, None, (SF,), W, "kimi_k2")
_add("kimi-k2-think-call", "<think>I'm thinking about this</think>" + k2_section(K2_SF), SF1,
     "<think>I'm thinking about this</think>", (SF,), W, "kimi_k2")
_add("kimi-k2-content-call", HELLO + k2_section(K2_SF), SF1, HELLO, (SF,), W, "kimi_k2")
_add("kimi-k2-parallel", k2_section(K2_SF, k2("special_function_with_opt", 1,
                                              '{"arg1": 1, "arg2": 2}')),
     SF_PAIR, None, (SF, SFO), W, "kimi_k2")
_add("kimi-k2-think-parallel", "<think>I need to call two functions</think>" + k2_section(
    K2_SF, K2_PY), SF_PY_HEY, "<think>I need to call two functions</think>", (SF, PY), W,
    "kimi_k2")
_add("kimi-k2-python-multiline", k2_section(k2("python", 0, _j({"code": PY_HELLO}))),
     [("python", {"code": PY_HELLO})], None, (PY,), W, "kimi_k2")
_add("kimi-k2-empty-args", k2_section(k2("empty_args", 0, "{}")), [("empty_args", {})], None,
     (EMPTY,), W, "kimi_k2")
_add("kimi-k2-three-calls", k2_section(K2_SF, k2("python", 1, '{"code": "print(1)"}'), k2(
    "html", 2, '{"markup": "<p>test</p>"}')), [*SF1, ("python", {"code": "print(1)"}),
                                              ("html", {"markup": "<p>test</p>"})], None,
     (SF, PY, HTML), W, "kimi_k2")
_add("kimi-k2-calls-inside-open-think", "<think>I need to call two functions" + k2_section(
    K2_SF, K2_PY), SF_PY_HEY, "<think>I need to call two functions", (SF, PY), W, "kimi_k2")
_add("kimi-k2-inside-think-no-section-no-end", "<think>I need to call two functions" + k2(
    "special_function", 0, '{"arg1": 1}', False) + k2("python", 1, '{"code": "print(\'hey\')"}',
                                                      False),
     SF_PY_HEY, "<think>I need to call two functions", (SF, PY), W, "kimi_k2")
_add("kimi-k2-execute-command-bare", k2("execute_command", 0, '{"command": "ls -lah", "cwd": '
     '"/home/user/development/exllamav3", "timeout": 10}', False),
     [("execute_command", {"command": "ls -lah", "cwd": "/home/user/development/exllamav3",
                           "timeout": 10})], None, (EXEC,), W, "kimi_k2")
W = "test_template_output_peg_parsers moonshotai-Kimi-K2"
_add("kimi-k2-old-template-call", k2_section(K2_SF), SF1, None, (SF,), W, "kimi_k2")

# --- LFM2 (pythonic list in <|tool_call_start|>) ----------------------------------------------
W = "test_lfm2_parser"


def lfm(body: str) -> str:
    return f"<|tool_call_start|>[{body}]<|tool_call_end|>"


_CAL = {"title": "demo", "participants": ["Alice", "Bob"],
        "metadata": {"priority": "high", "reminder": True}}
for _n, _body, _tool, _calls in [
    ("call", "special_function(arg1=1)", SF, SF1),
    ("string", 'get_time(city="XYZCITY")', GET_TIME, [("get_time", {"city": "XYZCITY"})]),
    ("python-true", "toggle(enabled=True)", TOGGLE, [("toggle", {"enabled": True})]),
    ("python-none", "set_nullable(value=None)", NULLABLE, [("set_nullable", {"value": None})]),
    ("nested-python-literal", 'set_config(config={"enabled": True, "count": 3})', CONFIG,
     [("set_config", {"config": {"enabled": True, "count": 3}})]),
    ("json-literals", 'set_config(config={"enabled": true, "note": null})', CONFIG,
     [("set_config", {"config": {"enabled": True, "note": None}})]),
    ("dotted-name", 'Calendar.create_event(title="demo", participants=["Alice", "Bob"], '
     'metadata={"priority": "high", "reminder": true})', CALENDAR,
     [("Calendar.create_event", _CAL)]),
    ("newline-escape", "python(code=\"def hello():\\n    print('hey')\")", PY,
     [("python", {"code": "def hello():\n    print('hey')"})]),
    ("tab-escape", 'python(code="First line\\nSecond line\\tindented")', PY,
     [("python", {"code": "First line\nSecond line\tindented"})]),
    ("escaped-quotes", 'python(code="print(\\"hi\\")")', PY,
     [("python", {"code": 'print("hi")'})]),
    ("empty-args", "empty_args()", EMPTY, [("empty_args", {})]),
]:
    _add(f"lfm2-{_n}", lfm(_body), _calls, None, (_tool,), W, "lfm2")
_add("lfm2-content-call", "Let me check the time." + lfm('get_time(city="Paris")'), PARIS,
     "Let me check the time.", (GET_TIME,), W, "lfm2")
_add("lfm2-parallel", lfm("special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)"),
     SF_PAIR, None, (SF, SFO), W, "lfm2")
_neg("lfm2-markdown-links", "Use this format: [link text](url). Example: "
     "[Wikipedia](https://www.wikipedia.org).", (GET_TIME,), W, "lfm2")
W = "test_template_output_peg_parsers LFM2.5-8B-A1B"
_add("lfm2.5-think-call", f"<think>{THINKING}</think>" + lfm("special_function(arg1=1)"), SF1,
     f"<think>{THINKING}</think>", (SF,), W, "lfm2")
_add("lfm2.5-think-content-call", "<think>I need to call a function</think>Let me check the "
     "time." + lfm('get_time(city="Paris")'), PARIS,
     "<think>I need to call a function</think>Let me check the time.", (GET_TIME,), W, "lfm2")
_LFM_FAKE = "<think>Let me think about " + lfm("special_function(arg1=1)") + " hmm</think>"
_add("lfm2.5-fake-call-in-think", _LFM_FAKE + lfm("special_function(arg1=1)"), SF1, _LFM_FAKE,
     (SF,), W, "lfm2")

# --- Reka Edge, MiMo-VL / Hermes 3 / Qwen 2.5 (Hermes JSON) ------------------------------------
W = "test_template_output_peg_parsers Reka-Edge"
_add("reka-edge-think-call", f"{THINKING}\n</think>\n\n<tool_call>\n{J1}</tool_call>", SF1,
     f"{THINKING}\n</think>", (SF,), W, "hermes")
_add("reka-edge-parallel-no-newline", f"<tool_call>\n{J1}</tool_call><tool_call>\n"
     '{"name": "special_function_with_opt", "arguments": {"arg1": 1, "arg2": 2}}</tool_call>',
     SF_PAIR, None, (SF, SFO), W, "hermes")
_add("reka-edge-think-content-call", "I need to call a function\n</think>\n\nLet me check the "
     'time.<tool_call>\n{"name": "get_time", "arguments": {"city": "XYZCITY"}}</tool_call>',
     [("get_time", {"city": "XYZCITY"})],
     "I need to call a function\n</think>\n\nLet me check the time.", (GET_TIME,), W, "hermes")
_add("reka-edge-no-schema", '<tool_call>\n{"name": "empty_args_no_schema", "arguments": {}}'
     "</tool_call>", [("empty_args_no_schema", {})], None, (EMPTY_NO_SCHEMA,), W, "hermes")
_REKA_FAKE = ('Let me think about <tool_call>\n{"name": "special_function", "arguments": '
              '{"arg1": 2}}</tool_call> hmm\n</think>')
_add("reka-edge-fake-call-in-think", f"{_REKA_FAKE}\n\n<tool_call>\n{J1}</tool_call>", SF1,
     _REKA_FAKE, (SF,), W, "hermes")
_add("reka-edge-content-call", f"{HELLO}\n<tool_call>\n{J1}\n</tool_call>", SF1, HELLO, (SF,), W,
     "hermes")

# --- Nemotron Nano v2, Apriel, Apertus, MiniMax M2 ---------------------------------------------
W = "test_template_output_peg_parsers NVIDIA-Nemotron-Nano-v2"
TC = f"<TOOLCALL>[{J1}]</TOOLCALL>"
_add("nemotron-v2-think-call", f"{THINKING}\n</think>\n{TC}", SF1, f"{THINKING}\n</think>", (SF,),
     W, "nemotron")
W = "test_template_output_parsers Nemotron-Nano-v2"
_add("nemotron-v2-call", TC, SF1, None, (SF,), W, "nemotron")
_add("nemotron-v2-content-after", TC + HELLO, SF1, HELLO, (SF,), W, "nemotron")
_add("nemotron-v2-think-call-content-after", f"<think>{THINKING}</think>{TC}{HELLO}", SF1,
     f"<think>{THINKING}</think>{HELLO}", (SF,), W, "nemotron")
W = "test_template_output_peg_parsers unsloth-Apriel-1.5"
_add("apriel-1.5-call", f"<tool_calls>[{J1}]</tool_calls>", SF1, None, (SF,), W,
     "tool_calls_tag")
W = "test_template_output_peg_parsers Apriel-1.6-15b-Thinker"
_add("apriel-1.6-reasoning-call", f"{THINKING}\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{J1}]"
     "</tool_calls>", SF1, f"{THINKING}\n[BEGIN FINAL RESPONSE]", (SF,), W, "tool_calls_tag")
W = "test_template_output_peg_parsers Apertus-8B-Instruct"
_add("apertus-call", '<|tools_prefix|>[{"special_function": {"arg1": 1}}]<|tools_suffix|>', SF1,
     None, (SF,), W, "apertus")
W = "test_template_output_peg_parsers MiniMax-M2"
_add("minimax-m2-empty-args-think", "Let's call a tool:\n</think>\n\n<minimax:tool_call>\n"
     '<invoke name="empty_args">\n</invoke>\n</minimax:tool_call>', [("empty_args", {})],
     "Let's call a tool:\n</think>", (EMPTY,), W, "minimax")
_add("minimax-m2-call", '\n</think>\n\n<minimax:tool_call>\n<invoke name="special_function">\n'
     '<parameter name="arg1">1</parameter>\n</invoke>\n</minimax:tool_call>', SF1, "</think>",
     (SF,), W, "minimax")

# --- MiniMax M3 (namespaced tags; not a latchgate family) --------------------------------------
W = "test_template_output_peg_parsers MiniMax-M3"
M = "]<]minimax[>["
M3_GAP = ("MiniMax M3's `]<]minimax[>[`-namespaced markup: the `<invoke name=..>` names are "
          "taken up with empty arguments (the parameter-named tags are lost) and `]<]minimax[>[` "
          "residue is left as content.")


def m3(*invokes: tuple[str, str]) -> str:
    body = "".join(f'{M}<invoke name="{n}">{params}{M}</invoke>\n' for n, params in invokes)
    return f"{M}<tool_call>\n{body}{M}</tool_call>"


_add("minimax-m3-think-call", "<mm:think>Let me check the time</mm:think>" + m3(
    ("get_time", f"{M}<city>Tokyo{M}</city>")), [("get_time", {"city": "Tokyo"})],
    "<mm:think>Let me check the time</mm:think>", (GET_TIME,), W, "MINIMAX_M3")
_add("minimax-m3-int", "</mm:think>" + m3(("special_function", f"{M}<arg1>1{M}</arg1>")), SF1,
     "</mm:think>", (SF,), W, "MINIMAX_M3")
_add("minimax-m3-parallel", "<mm:think>Calling both</mm:think>" + m3(
    ("get_time", f"{M}<city>Paris{M}</city>"), ("get_weather", f"{M}<city>Paris{M}</city>")),
    BOTH_PARIS, "<mm:think>Calling both</mm:think>", (GET_TIME, GET_WEATHER), W, "MINIMAX_M3")
_add("minimax-m3-nested-object", "<mm:think>Nested object</mm:think>" + m3(
    ("imaginary_number", f"{M}<number>{M}<real>1.5{M}</real>{M}<imaginary>-2.5{M}</imaginary>"
     f"{M}</number>")), [("imaginary_number", {"number": {"real": 1.5, "imaginary": -2.5}})],
    "<mm:think>Nested object</mm:think>", (IMAGINARY,), W, "MINIMAX_M3")

# --- Functionary v3.1 / v3.2, Firefunction v2, Llama 3.x ---------------------------------------
W = "test_template_output_peg_parsers meetkai-functionary-medium-v3.1"
_add("functionary-v3.1-call", '<function=special_function>{"arg1": 1}</function>', SF1, None,
     (SF,), W, "functionary")
W = "test_template_output_parsers Functionary-v3.1"
_add("functionary-v3.1-cut-close", '<function=special_function>{"arg1": 1}<', SF1, None, (SF,), W,
     "functionary", finish="length")
W = "test_template_output_peg_parsers meetkai-functionary-medium-v3.2"
# The generation prompt ends in `>>>`: the model's text starts with the recipient.
_add("functionary-v3.2-call", 'special_function\n{"arg1": 1}', SF1, None, (SF,), W,
     "functionary")
W = "test_template_output_parsers Functionary-v3.2"
_add("functionary-v3.2-content-then-call", 'all\nHello, world!\nnono\nWhat\'s up?'
     '>>>special_function\n{"arg1": 1}\n', SF1, "Hello, world!\nnono\nWhat's up?", (SF,), W,
     "functionary")
_add("functionary-v3.2-python-raw-code", "python\n# This is a program:\nprint('hey')",
     [("python", {"code": "# This is a program:\nprint('hey')"})], None, (SF, PY), W,
     "functionary")
_add("functionary-v3.2-trailing-space", 'special_function\n{"arg1": 1} \n                    ', SF1,
     None, (SF,), W, "functionary")
# latchgate drops the `all` recipient line as llama.cpp does.
_add("functionary-v3.2-all-content", f"all\n{HELLO}", [], HELLO, (SF,), W, "functionary")
W = "test_template_output_peg_parsers fireworks-ai-llama-3-firefunction-v2"
_add("firefunction-v2-call", f" functools[{J1}]", SF1, None, (SF,), W, "functools")
W = "test_template_output_parsers Llama-3.1/3.2"
_add("llama-3.x-parameters-json", '{"name": "special_function", "parameters": {"arg1": 1}}', SF1,
     None, (SF,), W, "bare_json")
_add("llama-3.1-python-tag-builtin", "<|python_tag|>python.call(code=\"print('hey')\")",
     [("python", {"code": "print('hey')"})], None, (SF, PY), W, "llama3")
_add("llama-3.1-python-tag-code-interpreter",
     "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
     [("code_interpreter", {"code": "print('hey')"})], None, (CODE_INTERPRETER,), W, "llama3")
_neg("llama-3.1-content-only", HELLO, (SF,), W, "llama3")

# --- GPT-OSS harmony and LLM-jp-4.1 ------------------------------------------------------------
W = "test_template_output_peg_parsers openai-gpt-oss-120b"
A1 = '{"arg1": 1}'
ANALYSIS = f"<|channel|>analysis<|message|>{THINKING}<|end|>"
for _n, _text in [
    ("role-header", f" to=functions.special_function<|channel|>analysis<|message|>{A1}"),
    ("channel-header", f"<|channel|>analysis to=functions.special_function<|message|>{A1}"),
    ("constrain", " to=functions.special_function<|channel|>analysis <|constrain|>json"
     f"<|message|>{A1}"),
    ("commentary", f"<|channel|>commentary to=functions.special_function<|message|>{A1}"),
]:
    _add(f"gpt-oss-{_n}", _text, SF1, None, (SF,), W, "harmony")
_add("gpt-oss-analysis-then-call", ANALYSIS + "<|start|>assistant to=functions.special_function"
     f"<|channel|>analysis<|message|>{A1}", SF1, ANALYSIS, (SF,), W, "harmony")
_EDIT_ARGS = {"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {",
              "replaceAll": False}
_add("gpt-oss-complex-edit", "<|channel|>analysis<|message|>Thinking about edit...<|end|>"
     "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json<|message|>"
     + _j(_EDIT_ARGS), [("edit", _EDIT_ARGS)],
     "<|channel|>analysis<|message|>Thinking about edit...<|end|>", (EDIT_GPT,), W, "harmony")
_add("gpt-oss-builtin-recipient-unsolicited", "<|channel|>analysis<|message|>I will execute "
     "python to say hello<|end|><|start|>assistant to=container.exec<|channel|>commentary"
     "<|message|>python3 -c 'print(\"hello\")'", [],
     "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant "
     "to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'", (SF,), W,
     "harmony")
W = "test_template_output_parsers GPT-OSS"
_add("gpt-oss-commentary-content-then-call", ANALYSIS + "<|start|>assistant<|channel|>commentary"
     f"<|message|>{HELLO}<|end|><|start|>assistant<|channel|>commentary to=functions."
     f"special_function <|constrain|>json<|message|>{A1}", SF1,
     f"{ANALYSIS}<|start|>assistant<|channel|>commentary<|message|>{HELLO}<|end|>", (SF,), W,
     "harmony")
_neg("gpt-oss-final-only", f"{ANALYSIS}<|start|>assistant<|channel|>final<|message|>{HELLO}",
     (SF,), W, "harmony")
W = "test_template_output_peg_parsers llm-jp-llm-jp-4.1-8b-thinking"
JP_ANALYSIS = f"<|channel|> analysis<|message|> {THINKING}<|end|>"
JP_GAP = ("Harmony with a space after each special token (LLM-jp 4.1): calls are recovered but "
          "header residue (`<|start|> assistant`, `<|channel|>`) is left as content.")
JP_CALL = ("<|start|> assistant to=functions.special_function<|channel|> commentary "
           "<|constrain|>  json<|message|> ")
_add("llm-jp-4.1-role-header-spaces", JP_ANALYSIS + JP_CALL + A1, SF1, JP_ANALYSIS, (SF,), W,
     "harmony")
_add("llm-jp-4.1-channel-header-spaces",
     f"<|channel|> commentary to=functions.special_function<|message|> {A1}", SF1, None, (SF,), W,
     "harmony")
_add("llm-jp-4.1-parallel-end-separated", JP_ANALYSIS + JP_CALL + A1 + "<|end|>" + JP_CALL
     + '{"arg1": 2}', [*SF1, ("special_function", {"arg1": 2})], JP_ANALYSIS, (SF,), W, "harmony")

# --- Formats latchgate has no family for -------------------------------------------------------
W = "test_template_output_peg_parsers GigaChat3-10B-A1.8B"
_add("gigachat-3-function-call", f"<|message_sep|>\n\nfunction call<|role_sep|>\n{J1}", SF1, None,
     (SF,), W, "GIGACHAT_V3")
W = "test_template_output_peg_parsers GigaChat3.1-10B-A1.8B"
_add("gigachat-3.1-content-call", f"{HELLO}<|function_call|>{J1}", SF1, HELLO, (SF,), W,
     "GIGACHAT_V3_1")
W = "test_template_output_peg_parsers openbmb-MiniCPM5-1B"
_MINICPM_GAP = ("MiniCPM5's `<function name=..><param name=..>` XML calls are not "
                "recognised.")
_add("minicpm5-call", '<function name="python"><param name="code">print(\'Hello, World!\')'
     "</param></function>", [("python", {"code": "print('Hello, World!')"})], None, (PY,), W,
     "MINICPM5")
_add("minicpm5-cdata", '<function name="html"><param name="markup"><![CDATA[<a href="/x">hi</a> '
     "</param>]]></param></function>", [("html", {"markup": '<a href="/x">hi</a> </param>'})],
     None, (HTML,), W, "MINICPM5")
W = "test_template_output_peg_parsers muse-glimmer"
GLIMMER = ('<atem:function_calls>\n<atem:invoke name="special_function">\n'
           '<atem:parameter name="arg1">1</atem:parameter>\n</atem:invoke>\n'
           "</atem:function_calls>")
_add("muse-glimmer-call", " to=special_function<|message|>" + GLIMMER, SF1, None, (SF,), W,
     "MUSE_GLIMMER")
_add("muse-glimmer-quoted-markup", f" to=user<|message|>You invoke it like this:\n{GLIMMER}"
     "<|eot|>", [], f"You invoke it like this:\n{GLIMMER}", (SF,), W, "MUSE_GLIMMER")
