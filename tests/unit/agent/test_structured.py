"""Structured output in words: the instruction, and extracting JSON from the reply."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.agent.structured import ask_in_words, extract_json

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
RF = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
SCHEMA_TEXT = (
    "Reply with a single JSON value and nothing else: no prose before or after it, no code "
    'fence. The value must match this JSON schema: {"type":"object","properties":{"a":'
    '{"type":"integer"}},"required":["a"]}'
)


def _ask(body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    before = copy.deepcopy(body)
    out = ask_in_words(body, **kw)
    assert body == before
    return out


def test_appends_to_existing_system_prompt_and_keeps_order() -> None:
    body = {"model": "m", "response_format": RF, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "temperature": 0}
    out = _ask(body)
    assert list(out) == ["model", "messages", "temperature"]
    assert out["messages"] == [
        {"role": "system", "content": f"Be brief.\n\n{SCHEMA_TEXT}"},
        {"role": "user", "content": "hi"}]


def test_creates_system_prompt_when_none() -> None:
    out = _ask({"messages": [{"role": "user", "content": "hi"}], "response_format": RF})
    assert out["messages"] == [{"role": "system", "content": SCHEMA_TEXT},
                               {"role": "user", "content": "hi"}]


def test_system_prompt_as_parts_gets_a_text_part() -> None:
    body = {"messages": [{"role": "user", "content": "hi"},
                         {"role": "developer", "content": [{"type": "text", "text": "x"}]}],
            "response_format": RF}
    out = _ask(body)
    assert out["messages"][1]["content"] == [{"type": "text", "text": "x"},
                                             {"type": "text", "text": SCHEMA_TEXT}]


def test_json_object_has_no_schema() -> None:
    out = _ask({"messages": [], "response_format": {"type": "json_object"}})
    assert out["messages"][0]["content"] == (
        "Reply with a single JSON value and nothing else: no prose before or after it, no code "
        "fence. The value must be a JSON object.")


def test_sanitiser_is_applied_to_the_schema() -> None:
    out = _ask({"messages": [], "response_format": RF}, sanitise=lambda s: {"type": "object"})
    assert out["messages"][0]["content"].endswith('JSON schema: {"type":"object"}')


def test_extract_plain_json() -> None:
    assert extract_json('{"a": 1}') == '{"a":1}'
    assert extract_json("  [1, 2] ") == "[1,2]"


def test_extract_fenced_block() -> None:
    text = 'Here you go:\n```json\n{"a": 1, "b": "x"}\n```\nAnything else?'
    assert extract_json(text) == '{"a":1,"b":"x"}'


def test_extract_skips_fence_that_is_not_json() -> None:
    text = '```python\nprint(1)\n```\nand the answer: {"a": 2}'
    assert extract_json(text) == '{"a":2}'


def test_extract_first_brace_to_last_brace_with_prose() -> None:
    assert extract_json('Sure! {"a": {"b": [1, 2]}} Hope that helps.') == '{"a":{"b":[1,2]}}'


def test_extract_repairs_almost_json() -> None:
    assert extract_json("Result: {'a': True, b: None,}") == '{"a":true,"b":null}'


def test_extract_repairs_cut_off_reply() -> None:
    assert extract_json('{"a": [1, 2') == '{"a":[1,2]}'
    assert extract_json('```json\n{"a": "x"') == '{"a":"x"}'


def test_extract_ignores_think_block() -> None:
    assert extract_json('<think>maybe {"a": 0}</think>\n{"a": 1}') == '{"a":1}'


def test_extract_nothing() -> None:
    assert extract_json("No JSON here, sorry.") is None
    assert extract_json("") is None


def test_extract_keeps_non_ascii() -> None:
    assert extract_json('{"name": "Zoë"}') == '{"name":"Zoë"}'


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(value=st.dictionaries(st.text(max_size=5), _json, max_size=4),
       prose=st.sampled_from(["", "Here it is: ", "Sure.\n```json\n"]),
       tail=st.sampled_from(["", "\n```", " Done."]))
def test_property_wrapped_object_comes_back_exactly(
    value: dict[str, Any], prose: str, tail: str
) -> None:
    text = prose + orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + tail
    assert extract_json(text) == orjson.dumps(value).decode()


def test_extract_fence_mark_inside_a_string_does_not_cut_the_object() -> None:
    text = 'Sure.\n```json\n{"code": "```x```", "n": 1}\n```'
    assert extract_json(text) == '{"code":"```x```","n":1}'


def test_extract_with_think_end_inside_a_string() -> None:
    # found by the property test: the last </think> is inside the JSON, not a think block
    assert extract_json('Here it is: {"": "</think>"}') == '{"":"</think>"}'
    assert extract_json('<think>plan {a}</think>{"a": 1}') == '{"a":1}'


def test_extract_prefers_the_answer_to_drafts_and_examples() -> None:
    draft = '<think>```json {"name": "draft", "age": 0}``` hmm</think>{"name": "Bob", "age": 42}'
    assert extract_json(draft) == '{"name":"Bob","age":42}'
    two = 'Example:\n```json\n{"a": 0}\n```\nAnswer:\n```json\n{"a": 1}\n```'
    assert extract_json(two) == '{"a":1}'


def test_repaired_json_with_an_emoji_written_as_escapes_is_sendable() -> None:
    # Found by bench/compare_trees.py: json_repair turns "\ud83d\ude42" into two lone
    # surrogates, which orjson refuses to write (a TypeError, a broken stream).
    from proxy.agent.structured import JsonInWordsStream, extract_json

    got = extract_json('{"a": "\\ud83d\\ude42", "n": ')
    assert got is not None and orjson.loads(got)["a"] == "\U0001f642"
    stream = JsonInWordsStream()
    stream.feed({"choices": [{"index": 0, "delta": {"content": '{"a": "\\ud83d\\ude42", '}}]})
    out = stream.finish()
    assert orjson.loads(out[0]["choices"][0]["delta"]["content"]) == {"a": "\U0001f642"}
    orjson.dumps(out)  # every chunk can be written


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # 300 levels: orjson reads it and writes only 254 (the strict path was a 500).
        ("Here:\n```json\n" + "[" * 300 + "1" + "]" * 300 + "\n```", "[" * 300 + "1" + "]" * 300),
        # Broken and 2000 levels deep: past json_repair's parser, which raises (a 500 too).
        ('{"a": ' + "[" * 2000 + "1", None),
    ],
)
def test_json_nested_past_what_the_parsers_take(text: str, want: str | None) -> None:
    assert extract_json(text) == want
