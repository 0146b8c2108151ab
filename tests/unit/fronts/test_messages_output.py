"""A chat completion as an Anthropic Message (`proxy.fronts.messages.output`): the blocks in order
(thinking, text, tool_use), tool ids that map back, fresh ids for recovered calls, stop reasons
and usage."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.fronts.messages.output import (
    Context,
    from_completion,
    stop_reason,
    tool_input,
    usage_of,
)
from proxy.fronts.messages.request import chat_call_id


def completion(
    content: Any = "Hello!",
    finish: Any = "stop",
    usage: Any = None,
    **message: Any,
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-name",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish,
            }
        ],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_text_answer() -> None:
    ctx = Context("claude-local")
    message = from_completion(ctx, completion())
    assert message == {
        "id": ctx.id,
        "type": "message",
        "role": "assistant",
        "model": "claude-local",  # the model the client asked for
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    assert ctx.id.startswith("msg_")
    assert Context("m").id != ctx.id


def test_blocks_in_order_thinking_text_tool_use() -> None:
    ctx = Context("m")
    message = from_completion(
        ctx,
        completion(
            "Checking.",
            "tool_calls",
            reasoning_content="Need the weather.",
            tool_calls=[
                call("call_a", "get_weather", '{"city":"Paris"}'),
                call("call_b", "get_weather", {"city": "Rome"}),
            ],
        ),
    )
    assert message["content"] == [
        {"type": "thinking", "thinking": "Need the weather.", "signature": ""},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_call_a", "name": "get_weather",
         "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_call_b", "name": "get_weather",
         "input": {"city": "Rome"}},
    ]  # fmt: skip
    assert message["stop_reason"] == "tool_use"
    assert chat_call_id(message["content"][2]["id"]) == "call_a"  # maps back on the next turn


def test_reasoning_field_alias() -> None:
    message = from_completion(Context("m"), completion("Paris.", reasoning="Thought."))
    assert message["content"][0] == {"type": "thinking", "thinking": "Thought.", "signature": ""}


def test_recovered_calls_get_fresh_ids() -> None:
    recovered = completion(
        None,
        "tool_calls",
        tool_calls=[call("call_recovered_0", "f", "{}"), call("call_recovered_1", "f", "{}")],
    )
    first = [b["id"] for b in from_completion(Context("m"), recovered)["content"]]
    second = [b["id"] for b in from_completion(Context("m"), recovered)["content"]]
    ids = first + second
    assert all(i.startswith("toolu_") and "recovered" not in i for i in ids)
    assert len(set(ids)) == 4


def test_calls_without_an_id_get_one() -> None:
    message = from_completion(
        Context("m"), completion(None, "tool_calls", tool_calls=[call("", "f", "{}")])
    )
    (block,) = message["content"]
    assert block["id"].startswith("toolu_") and len(block["id"]) > len("toolu_")


def test_a_tool_call_with_finish_stop_is_still_tool_use() -> None:
    message = from_completion(
        Context("m"), completion(None, "stop", tool_calls=[call("c", "f", "{}")])
    )
    assert message["stop_reason"] == "tool_use"
    assert [b["type"] for b in message["content"]] == ["tool_use"]


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        # A text reply the server says ended in calls: no tool_use block, so no tool_use.
        ("tool_calls", "end_turn"),
        ("function_call", "end_turn"),
        ("content_filter", "refusal"),
        ("eos", "end_turn"),
        (None, "end_turn"),
    ],
)
def test_stop_reasons(finish: Any, reason: str) -> None:
    assert from_completion(Context("m"), completion("x", finish))["stop_reason"] == reason


def test_stop_reason_helper() -> None:
    assert stop_reason("length") == "max_tokens"
    assert stop_reason(None) is None and stop_reason(3) is None


def test_usage_with_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    message = from_completion(Context("m"), completion("x", usage=usage))
    assert message["usage"] == {
        "input_tokens": 40,
        "output_tokens": 7,
        "cache_read_input_tokens": 60,
    }


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, {"input_tokens": 0, "output_tokens": 0}),
        ("garbage", {"input_tokens": 0, "output_tokens": 0}),
        ({"prompt_tokens": True, "completion_tokens": -2}, {"input_tokens": 0, "output_tokens": 0}),
        ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}},
         {"input_tokens": 5, "output_tokens": 0}),
        ({"prompt_tokens": 5, "prompt_tokens_details": "x"},
         {"input_tokens": 5, "output_tokens": 0}),
    ],
)  # fmt: skip
def test_usage_of_odd_shapes(usage: Any, expected: dict[str, int]) -> None:
    assert usage_of(usage) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),
        ("", {}),
        ("not json", {}),
        ("[1, 2]", {}),
        (None, {}),
    ],
)
def test_tool_input(arguments: Any, expected: dict[str, Any]) -> None:
    assert tool_input(arguments) == expected


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"choices": []},
        {"choices": "x"},
        {"choices": [None]},
        {"choices": [{"message": "x"}]},
        {"choices": [{"message": {"tool_calls": ["x", {"function": {"name": 3}}]}}]},
    ],
)
def test_odd_completions_give_an_empty_message(body: dict[str, Any]) -> None:
    message = from_completion(Context("m"), body)
    assert message["content"] == [] and message["stop_reason"] == "end_turn"
    assert message["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_empty_content_makes_no_text_block() -> None:
    message = from_completion(Context("m"), completion("", reasoning_content=""))
    assert message["content"] == []
