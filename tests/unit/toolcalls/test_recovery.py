"""Whole-response recovery (BEHAVIOUR.md 4.1) over the corpus, plus process_response's contract."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from proxy.observe.events import ARGUMENTS, TOOL_RECOVERED
from proxy.toolcalls.recovery import process_response, recover, recovered_event
from tests.toolcall_case import TOOLS
from tests.toolcall_corpus import CASES, TRUNCATED, TRUNCATED_RAW_ARGS, Case, by_format


def _body(text: str, finish: str = "stop") -> dict[str, Any]:
    message = {"role": "assistant", "content": text, "reasoning_content": "hidden"}
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def whole_result(case: Case) -> tuple[str | None, list[tuple[str, str, str]], str]:
    """(content, [(id, name, arguments)], finish_reason) as a client sees the whole response."""
    body = _body(case.text)
    new, _ = process_response(body, list(case.tools))
    choice = (new or body)["choices"][0]
    msg = choice["message"]
    calls = [(c["id"], c["function"]["name"], c["function"]["arguments"])
             for c in msg.get("tool_calls") or []]
    return msg["content"], calls, choice["finish_reason"]


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 80
    assert sum(by_format().values()) == len(CASES) + 1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus_whole(case: Case) -> None:
    content, calls, finish = whole_result(case)
    if case.format is None:
        assert (content, calls, finish) == (case.text, [], "stop")
        assert recover(case.text, list(case.tools)) is None
        return
    assert content == case.content
    assert [(n, json.loads(a)) for _, n, a in calls] == case.calls
    assert [i for i, _, _ in calls] == [f"call_recovered_{k}" for k in range(len(calls))]
    assert all(a == json.dumps(json.loads(a), separators=(",", ":"), ensure_ascii=False)
               for _, _, a in calls)
    assert finish == "tool_calls"
    rec = recover(case.text, list(case.tools))
    assert rec is not None and rec.format == case.format


def test_truncated_final_call_is_flagged() -> None:
    body = _body(TRUNCATED.text, "length")
    new, events = process_response(body, TOOLS)
    assert new is not None
    calls = new["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("get_time", '{"tz":"UTC"}'), ("write_file", TRUNCATED_RAW_ARGS)]
    outcomes = [e.labels["outcome"] for e in events if e.kind == ARGUMENTS]
    assert outcomes == ["truncated"]
    assert "max_tokens" in next(e.notice for e in events if e.kind == ARGUMENTS)


def test_process_response_events_and_no_mutation() -> None:
    body = _body('Sure.\n<tool_call>{"name": "get_time", "arguments": {\'tz\': \'UTC\'}}'
                 "</tool_call>")
    before = copy.deepcopy(body)
    new, events = process_response(body, TOOLS)
    assert body == before
    assert new is not None
    msg = new["choices"][0]["message"]
    assert msg["content"] == "Sure."
    assert msg["reasoning_content"] == "hidden"
    assert msg["tool_calls"][0]["function"] == {"name": "get_time", "arguments": '{"tz":"UTC"}'}
    assert [(e.kind, e.labels, e.count) for e in events] == [
        (TOOL_RECOVERED, {"format": "hermes"}, 1), (ARGUMENTS, {"outcome": "repaired"}, 1)]
    assert "1 tool call" in events[0].notice
    assert "parser does not match" in events[0].notice


def test_recovered_event_is_one_shared_event_per_kind_of_recovery() -> None:
    """One Event for each (count, format, where): the same object every time, its notice and
    labels those of that recovery, never another's."""
    one, again = recovered_event(1, "hermes"), recovered_event(1, "hermes")
    assert one is again
    assert (one.kind, one.labels, one.count) == (TOOL_RECOVERED, {"format": "hermes"}, 1)
    assert one.notice.startswith("Recovered 1 tool call written as text (hermes);")
    two = recovered_event(2, "mistral", in_reasoning=True)
    assert (two.labels, two.count) == ({"format": "mistral"}, 2)
    assert two.notice.startswith("Recovered 2 tool calls written as text in the reasoning (")
    assert recovered_event(1, "hermes", in_reasoning=True) is not one


def test_unchanged_body_returns_none() -> None:
    assert process_response(_body("Hello there."), TOOLS) == (None, [])


def test_recovery_switched_off() -> None:
    text = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    assert process_response(_body(text), TOOLS, recover=False) == (None, [])
    assert process_response(_body(text), None) == (None, [])


def test_native_calls_repaired_not_recovered() -> None:
    body = _body("<tool_call>ignored</tool_call>")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": i, "type": "function", "function": {"name": "get_time", "arguments": a}}
        for i, a in (("a", "{'tz': 'UTC'}"), ("b", ""), ("c", '{"tz": "X"}'))
    ]
    new, events = process_response(body, TOOLS)
    assert new is not None
    args = [c["function"]["arguments"] for c in new["choices"][0]["message"]["tool_calls"]]
    assert args == ['{"tz":"UTC"}', "{}", '{"tz": "X"}']
    assert new["choices"][0]["message"]["content"] == "<tool_call>ignored</tool_call>"
    assert new["choices"][0]["finish_reason"] == "stop"
    assert [e.labels for e in events] == [{"outcome": "repaired"}]


def test_native_unparseable_arguments_flagged() -> None:
    body = _body("")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"a": "lo'}}]
    new, events = process_response(body, TOOLS)
    assert new is None
    assert [e.labels for e in events] == [{"outcome": "unparseable"}]
    assert "invalid arguments" in events[0].notice


def test_choices_n2_each_recovered() -> None:
    body = _body('<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')
    body["choices"].append({"index": 1, "message": {"role": "assistant", "content": "plain"},
                            "finish_reason": "stop"})
    new, _ = process_response(body, TOOLS)
    assert new is not None
    assert new["choices"][0]["finish_reason"] == "tool_calls"
    assert new["choices"][1] is body["choices"][1]
