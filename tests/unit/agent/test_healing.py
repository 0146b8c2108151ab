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


def test_heal_messages_for_calls_keep_each_result_next_to_its_call() -> None:
    reply = message(call("nope", '{"x": 1}', "a"), call("ls", "{}", "b"), content="Looking.")
    verdict = judge(reply, TOOLS, Choice())
    said, first, second = heal_messages(reply, verdict, TOOLS, Choice())
    assert said["role"] == "assistant" and said["content"] == "Looking."
    assert [c["id"] for c in said["tool_calls"]] == ["a", "b"]
    assert first["tool_call_id"] == "a" and first["content"].startswith("Error: ")
    assert "nope" in first["content"]
    assert second["tool_call_id"] == "b" and "not run" in second["content"]
    assert "read_file, ls" in second["content"]  # the correction closes the last result


def test_heal_messages_mint_ids_and_encode_arguments_that_are_not_strings() -> None:
    odd = {"type": "function", "function": {"name": "nope", "arguments": {"a": 1}}}
    reply = message(odd)
    said, result = heal_messages(reply, judge(reply, TOOLS, Choice()), TOOLS, Choice())
    assert said["tool_calls"][0]["id"] == "call_heal_0" == result["tool_call_id"]
    assert json.loads(said["tool_calls"][0]["function"]["arguments"]) == {"a": 1}


def test_heal_messages_for_prose_under_a_forced_choice() -> None:
    reply = message(content=[{"type": "text", "text": "No tools."}])  # type: ignore[arg-type]
    verdict = judge(reply, TOOLS, Choice("required"))
    said, user = heal_messages(reply, verdict, TOOLS, Choice("required"))
    assert said == {"role": "assistant", "content": "No tools."}
    assert user["role"] == "user"
    assert user["content"].startswith("Tool_choice required a tool call")
    assert "read_file, ls" in user["content"]


def test_the_named_correction_names_the_tool() -> None:
    text = correction(judge(message(), TOOLS, Choice("function", "ls")), TOOLS,
                      Choice("function", "ls"))
    assert text.startswith("You must call the tool ls now.")


def test_the_correction_lists_a_bounded_number_of_tools() -> None:
    many = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(100)]
    text = correction(judge(message(), many, Choice("required")), many, Choice("required"))
    assert "t39, ..." in text and "t40" not in text


def test_calls_as_text() -> None:
    reply = message(call("ls", '{"a": [1]}'), call("x", "{oops"), content="Here:")
    out = calls_as_text(reply)
    assert "tool_calls" not in out
    lines = out["content"].split("\n")
    assert lines[0] == "Here:"
    assert json.loads(lines[1]) == {"name": "ls", "arguments": {"a": [1]}}
    assert json.loads(lines[2]) == {"name": "x", "arguments": "{oops"}
    assert calls_as_text(message(call("ls")))["content"] == '{"name":"ls","arguments":{}}'


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
    assert user["content"].startswith("There is no tool named 'main.py'")
