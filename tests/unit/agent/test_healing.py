"""proxy.agent.healing: reading tool_choice, judging a reply, the turn that asks again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.agent.healing import (
    Choice,
    calls_as_text,
    correction,
    heal_messages,
    judge,
    read_choice,
    summary,
    written_call,
)

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}},
]


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def message(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = list(calls)
    return out


@pytest.mark.parametrize(("raw", "want"), [
    (None, Choice()),
    ("auto", Choice()),
    ("none", Choice("none")),
    ("required", Choice("required")),
    ({"type": "function", "function": {"name": "ls"}}, Choice("function", "ls")),
    ({"type": "function", "function": {}}, Choice()),
    ({"type": "function"}, Choice()),
    ("any", Choice()),
    (7, Choice()),
])
def test_read_choice(raw: object, want: Choice) -> None:
    assert read_choice(raw) == want


def test_a_text_reply_is_valid_unless_a_call_was_forced() -> None:
    assert judge(message(content="Hi"), TOOLS, Choice()).ok
    forced = judge(message(content="Hi"), TOOLS, Choice("required"))
    assert not forced.ok and forced.score == 1 and "required a tool call" in forced.choice
    named = judge(message(content="Hi"), TOOLS, Choice("function", "ls"))
    assert "call to ls" in named.choice


def test_a_named_choice_answered_with_another_tool() -> None:
    verdict = judge(message(call("read_file", '{"path": "a"}')), TOOLS, Choice("function", "ls"))
    assert verdict.problems == ()
    assert verdict.choice == "tool_choice required a call to ls, and the reply called read_file"
    assert judge(message(call("ls")), TOOLS, Choice("function", "ls")).ok


def test_problems_are_counted_per_call() -> None:
    verdict = judge(message(call("nope"), call("read_file", "{}", "c2")), TOOLS, Choice())
    assert [(p.index, p.kind) for p in verdict.problems] == [(0, "unknown_tool"), (1, "invalid")]
    assert verdict.score == 2
    text = summary(verdict)
    assert "undeclared tool 'nope'" in text and "read_file" in text


def test_heal_messages_send_the_reply_back_as_text_then_what_was_wrong() -> None:
    reply = message(call("nope", '{"x": 1}', "a"), call("ls", "{}", "b"), content="Looking.")
    verdict = judge(reply, TOOLS, Choice())
    said, user = heal_messages(reply, verdict, TOOLS, Choice())
    assert said == {"role": "assistant", "content": (
        'Looking.\n{"name": "nope", "arguments": {"x":1}}\n{"name": "ls", "arguments": {}}')}
    assert user["role"] == "user"
    assert user["content"] == (
        "The tool 'nope' does not exist.\n\nCall one of these tools instead:\n"
        "- read_file: Required: path (string).\n- ls: Required: none.\n"
        "Answer with the tool call only.\n"
        'For example: {"name": "read_file", "arguments": {"path": "..."}}')


def test_arguments_that_do_not_parse_go_back_as_written() -> None:
    reply = message(call("read_file", "{'path': oops"))
    verdict = judge(reply, TOOLS, Choice())
    said, user = heal_messages(reply, verdict, TOOLS, Choice())
    assert said["content"] == '{"name": "read_file", "arguments": {\'path\': oops}'
    assert "Call 'read_file' again with these parameters:" in user["content"]


def test_heal_messages_for_prose_under_a_forced_choice() -> None:
    reply = message(content=[{"type": "text", "text": "No tools."}])  # type: ignore[arg-type]
    verdict = judge(reply, TOOLS, Choice("required"))
    said, user = heal_messages(reply, verdict, TOOLS, Choice("required"))
    assert said == {"role": "assistant", "content": "No tools."}
    assert user["content"].startswith(
        "You must call one of these tools now instead of answering in text:\n- read_file:")


def test_the_named_correction_lists_only_that_tool() -> None:
    named = Choice("function", "ls")
    text = correction(judge(message(), TOOLS, named), TOOLS, named)
    assert text.startswith("You must call the tool 'ls' now instead of answering in text:")
    assert "read_file" not in text
    other = judge(message(call("read_file", '{"path": "a"}')), TOOLS, named)
    assert correction(other, TOOLS, named).startswith("You must call the tool 'ls' now:")


def test_the_correction_lists_a_bounded_number_of_tools() -> None:
    many = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(100)]
    text = correction(judge(message(), many, Choice("required")), many, Choice("required"))
    assert "- t19: Required: none." in text and "- t20:" not in text
    assert "- and 80 more: t20, t21," in text


def test_parameter_kinds_in_the_listing() -> None:
    tool = {"type": "function", "function": {"name": "f", "description": "Do it.", "parameters": {
        "type": "object", "required": ["a", "missing"], "properties": {
            "a": {"type": "array", "items": {"type": "integer"}},
            "b": {"enum": [1, "x", None]}, "c": {"type": ["string", "null"]}, "d": True}}}}
    text = correction(judge(message(), [tool], Choice("required")), [tool], Choice("required"))
    assert ("- f: Do it. Required: a (array of integer). Optional: b (one of 1, \"x\", null), "
            "c (string or null), d (any).") in text


def test_a_parameter_nested_far_deeper_than_the_recursion_limit_is_listed() -> None:
    # Read in a loop: compiled, a call per level would crash the process (proxy/compiled.py).
    items: dict[str, object] = {"type": "string"}
    for _ in range(5_000):
        items = {"type": "array", "items": items}
    params = {"type": "object", "required": ["a"], "properties": {"a": items}}
    tool = {"type": "function", "function": {"name": "f", "parameters": params}}
    text = correction(judge(message(), [tool], Choice("required")), [tool], Choice("required"))
    assert f"Required: a ({'array of ' * 5_000}string)." in text


def test_calls_as_text() -> None:
    reply = message(call("ls", '{"a": [1]}'), call("x", "{oops"), content="Here:")
    out = calls_as_text(reply)
    assert "tool_calls" not in out
    lines = out["content"].split("\n")
    assert lines[0] == "Here:"
    assert json.loads(lines[1]) == {"name": "ls", "arguments": {"a": [1]}}
    assert lines[2] == '{"name": "x", "arguments": {oops}'  # as the model wrote it
    assert calls_as_text(message(call("ls")))["content"] == '{"name": "ls", "arguments": {}}'


def test_arguments_nested_past_what_orjson_writes_go_back_whole() -> None:
    # 300 levels: orjson reads them (1024) but writes 254; the reply as text was a 500.
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    reply = message(call("nope", json.dumps({"x": deep})))
    said, _ = heal_messages(reply, judge(reply, TOOLS, Choice()), TOOLS, Choice())
    assert json.loads(said["content"]) == {"name": "nope", "arguments": {"x": deep}}
    assert json.loads(calls_as_text(reply)["content"])["arguments"] == {"x": deep}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=10,
)


@given(reply=_JSON, tools=_JSON, choice=_JSON)
def test_never_raises_on_odd_input(reply: Any, tools: Any, choice: Any) -> None:
    tools = tools if isinstance(tools, list) else []
    verdict = judge(reply, tools, read_choice(choice))
    if isinstance(reply, dict):
        heal_messages(reply, verdict, tools, read_choice(choice))
        calls_as_text(reply)
    summary(verdict)


@pytest.mark.parametrize(("content", "want"), [
    ('{"name": "main.py", "arguments": {}}', "main.py"),
    ('  ```json\n{"name": "x", "parameters": {"a": 1}}\n```  ', "x"),
    ('<tool_call>\n{"name": "cat", "arguments": {}}\n</tool_call>', "cat"),
    ('{"name": "ls", "arguments": {}}', None),  # declared: recovery's business, not a heal
    ('{"name": "main.py"}', None),  # no arguments: a JSON answer, not a call
    ('{"title": "x", "arguments": {}}', None),
    ('Try {"name": "main.py", "arguments": {}} here', None),  # prose around it
    ('{"name": "main.py", "arguments": {', None),  # not JSON
    ('[{"name": "main.py", "arguments": {}}]', None),
    ("", None),
    (None, None),
])
def test_written_call(content: Any, want: str | None) -> None:
    assert written_call({"role": "assistant", "content": content}, TOOLS) == want


def test_a_written_call_to_an_undeclared_tool_is_a_problem() -> None:
    reply = message(content='{"name": "main.py", "arguments": {"path": "a"}}')
    verdict = judge(reply, TOOLS, Choice())
    assert [(p.kind, p.name) for p in verdict.problems] == [("unknown_tool", "main.py")]
    said, user = heal_messages(reply, verdict, TOOLS, Choice())
    assert said["content"] == reply["content"]
    assert user["content"].startswith("The tool 'main.py' does not exist.")


def test_a_copied_placeholder_is_a_problem_only_after_a_correction() -> None:
    reply = message(call("read_file", '{"path": "..."}'))
    assert judge(reply, TOOLS, Choice()).ok  # unprompted, "..." may be a real value
    copied = judge(reply, TOOLS, Choice(), asked=True)
    assert [(p.kind, p.name) for p in copied.problems] == [("invalid", "read_file")]
    assert "placeholder" in copied.problems[0].detail
    assert judge(message(call("read_file", '{"path": "a..."}')), TOOLS, Choice(), asked=True).ok
