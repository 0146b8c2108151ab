"""proxy.toolcalls.leading: the call lines an emulated reply opens with."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.toolcalls.leading import in_answer, leading_calls

NAMES = {"get_weather", "read_file"}


def calls(text: str) -> tuple[list[tuple[str, Any]], str | None] | None:
    found = leading_calls(text, NAMES)
    if found is None:
        return None
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in found.calls]
    assert [c["id"] for c in found.calls] == [f"call_recovered_{k}" for k in range(len(got))]
    return got, found.rest


@pytest.mark.parametrize(("text", "want"), [
    ('{"name": "get_weather", "arguments": {"city": "London"}}\n{"temperature": 22}',
     ([("get_weather", {"city": "London"})], '{"temperature": 22}')),
    ('  {"name": "read_file", "parameters": {"path": "a"}}\n'
     '{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\nDone.',
     ([("read_file", {"path": "a"}), ("get_weather", {"city": "Oslo"})], "Done.")),
    ('{"name": "read_file", "arguments": {"path": "a"}}',
     ([("read_file", {"path": "a"})], None)),
    # Not a call line: text after the object on its line, an undeclared tool, no arguments,
    # arguments that are not an object, prose first, broken JSON.
    ('{"name": "read_file", "arguments": {"path": "a"}} and then', None),
    ('{"name": "cat", "arguments": {}}\nx', None),
    ('{"name": "read_file"}\nx', None),
    ('{"name": "read_file", "arguments": [1]}\nx', None),
    ('{"name": "read_file", "arguments": "{oops"}\nx', None),
    ('Here: {"name": "read_file", "arguments": {}}', None),
    ('{"name": "read_file", "arguments": {', None),
    ("", None),
])
def test_leading_calls(text: str, want: Any) -> None:
    assert calls(text) == want


def test_the_second_line_stops_at_the_first_that_is_no_call() -> None:
    text = '{"name": "read_file", "arguments": {}}\n{"name": "cat", "arguments": {}}\n'
    assert calls(text) == ([("read_file", {})], '{"name": "cat", "arguments": {}}')


def test_in_answer() -> None:
    body = {"id": "x", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": '{"name": "read_file", "arguments": {"path": "a"}}\nok'}}]}
    new, count = in_answer(body, NAMES) or ({}, 0)
    assert count == 1
    choice = new["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "ok"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "read_file"
    assert body["choices"][0]["message"]["content"].endswith("ok")  # not mutated
    native = {"choices": [{"message": {"content": "{}", "tool_calls": [{"id": "c"}]}}]}
    assert in_answer(native, NAMES) is None
    assert in_answer({"choices": []}, NAMES) is None


@given(st.text(max_size=200))
def test_never_raises(text: str) -> None:
    leading_calls(text, NAMES)
    leading_calls("{" + text, NAMES)


def test_arguments_nested_past_what_orjson_writes_are_written_all_the_same() -> None:
    # 300 levels: orjson writes 254; the call became a 500.
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    line = json.dumps({"name": "get_weather", "arguments": {"city": deep}})
    assert calls(line + "\nDone.") == ([("get_weather", {"city": deep})], "Done.")

