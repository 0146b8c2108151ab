"""A chat completion as a Response object (`proxy.fronts.responses.output`): items and their order,
reasoning, call ids, custom and namespaced calls mapped back, status and usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.fronts.common import Options
from proxy.fronts.responses.items import reasoning_token, to_messages
from proxy.fronts.responses.output import (
    Context,
    call_item,
    custom_input,
    from_completion,
    output_items,
    status_of,
    usage_of,
)
from proxy.fronts.responses.tools import Tools, translate_tools

USAGE = {"prompt_tokens": 82, "completion_tokens": 41, "total_tokens": 123}
ECHO = {"tool_choice": "auto", "tools": [], "store": True, "parallel_tool_calls": True}


def tools() -> Tools:
    return translate_tools(
        [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch"},
            {"type": "local_shell"},
            {
                "type": "namespace",
                "name": "agents",
                "tools": [{"type": "function", "name": "spawn"}],
            },
        ],
        [],
    )


def context(encrypted: bool = False) -> Context:
    return Context("qwen3-8b", dict(ECHO), tools(), encrypted_reasoning=encrypted)


def completion(message: dict[str, Any], finish: str = "stop", usage: object = USAGE) -> dict:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_call(call_id: object, name: str, arguments: object) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- the response object ---------------------------------------------------------------------------


def test_text_answer() -> None:
    ctx = context()
    r = from_completion(ctx, completion({"content": "Hello."}))
    assert r["id"] == ctx.id and r["id"].startswith("resp_")
    assert r["object"] == "response"
    assert r["created_at"] == ctx.created_at
    assert isinstance(r["completed_at"], int)
    assert r["status"] == "completed"
    assert r["error"] is None and r["incomplete_details"] is None
    assert r["model"] == "qwen3-8b"
    assert len(r["output"]) == 1
    item = r["output"][0]
    assert item["id"].startswith("msg_")
    assert {k: v for k, v in item.items() if k != "id"} == {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hello.", "annotations": [], "logprobs": []}],
    }
    for key, value in ECHO.items():
        assert r[key] == value


def test_empty_completion_has_no_items() -> None:
    r = from_completion(context(), {"choices": []})
    assert r["output"] == [] and r["status"] == "completed" and r["usage"] is None
    assert from_completion(context(), {})["output"] == []


def test_reasoning_comes_first_with_an_empty_summary() -> None:
    r = from_completion(context(), completion({"reasoning_content": "Think.", "content": "Hi."}))
    assert [i["type"] for i in r["output"]] == ["reasoning", "message"]
    reasoning = r["output"][0]
    assert reasoning["id"].startswith("rs_")
    assert reasoning["summary"] == []
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Think."}]
    assert reasoning["status"] == "completed"
    assert "encrypted_content" not in reasoning


def test_reasoning_field_named_reasoning_is_read_too() -> None:
    items = output_items(context(), {"reasoning": "R", "content": "C"})
    assert items[0]["content"] == [{"type": "reasoning_text", "text": "R"}]


def test_encrypted_content_only_when_asked_and_it_round_trips() -> None:
    r = from_completion(context(encrypted=True), completion({"reasoning_content": "Plan ✓"}))
    reasoning = r["output"][0]
    assert reasoning["encrypted_content"] == reasoning_token("Plan ✓")
    # a store:false client that keeps only encrypted_content sends the reasoning back
    resent = {
        "type": "reasoning",
        "summary": [],
        "encrypted_content": reasoning["encrypted_content"],
    }
    messages = to_messages(
        [{"role": "user", "content": "q"}, resent, {"role": "assistant", "content": "a"}],
        None,
        Tools(),
        Options(reasoning_field="reasoning_content"),
        [],
    )
    assert messages[-1]["reasoning_content"] == "Plan ✓"


def test_tool_call_becomes_a_function_call_with_its_own_id() -> None:
    r = from_completion(
        context(),
        completion(
            {
                "content": None,
                "tool_calls": [tool_call("call_Qx81", "get_weather", '{"city":"Paris"}')],
            },
            finish="tool_calls",
        ),
    )
    assert r["status"] == "completed"
    (item,) = r["output"]
    assert item["id"].startswith("fc_")
    assert item["id"] != item["call_id"]
    assert {k: v for k, v in item.items() if k != "id"} == {
        "type": "function_call",
        "status": "completed",
        "call_id": "call_Qx81",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }


def test_text_is_kept_alongside_tool_calls_in_order() -> None:
    message = {
        "reasoning_content": "R",
        "content": "Checking.",
        "tool_calls": [
            tool_call("call_1", "get_weather", '{"city":"Paris"}'),
            tool_call("call_2", "get_weather", '{"city":"Rome"}'),
        ],
    }
    r = from_completion(context(), completion(message, finish="tool_calls"))
    assert [i["type"] for i in r["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert r["output"][1]["content"][0]["text"] == "Checking."
    assert [i["call_id"] for i in r["output"][2:]] == ["call_1", "call_2"]
    assert len({i["id"] for i in r["output"]}) == 4


def test_object_arguments_are_serialised() -> None:
    items = output_items(context(), {"tool_calls": [tool_call("c", "get_weather", {"a": 1})]})
    assert json.loads(items[0]["arguments"]) == {"a": 1}


def test_malformed_tool_calls_are_skipped() -> None:
    calls = [
        {"id": "x"},
        "junk",
        {"function": {"arguments": "{}"}},
        tool_call("ok", "get_weather", "{}"),
    ]
    items = output_items(context(), {"tool_calls": calls})
    assert [i["call_id"] for i in items] == ["ok"]


def test_refusal_is_a_refusal_part() -> None:
    items = output_items(context(), {"content": None, "refusal": "I can't."})
    assert items[0]["content"] == [{"type": "refusal", "refusal": "I can't."}]


def test_logprobs_go_on_the_text_part() -> None:
    tokens = [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]
    items = output_items(context(), {"content": "Hi"}, {"content": tokens})
    assert items[0]["content"][0]["logprobs"] == tokens


# -- call ids --------------------------------------------------------------------------------------


def test_recovered_call_ids_get_fresh_ids_stable_within_a_context() -> None:
    ctx = context()
    first = ctx.call_id("call_recovered_0")
    assert first.startswith("call_") and not first.startswith("call_recovered_")
    assert ctx.call_id("call_recovered_0") == first
    second = ctx.call_id("call_recovered_1")
    assert second != first and not second.startswith("call_recovered_")
    assert context().call_id("call_recovered_0") != first  # a new response, a new id
    assert ctx.call_id("call_abc") == "call_abc"


def test_missing_call_ids_get_distinct_fresh_ids() -> None:
    ctx = context()
    ids = [ctx.call_id(None), ctx.call_id(""), ctx.call_id(None), ctx.call_id(3)]
    assert all(i.startswith("call_") for i in ids)
    assert len(set(ids)) == 4


def test_recovered_ids_in_a_completion() -> None:
    ctx = context()
    message = {
        "tool_calls": [
            tool_call("call_recovered_0", "get_weather", "{}"),
            tool_call("call_recovered_1", "get_weather", "{}"),
        ]
    }
    items = from_completion(ctx, completion(message, finish="tool_calls"))["output"]
    call_ids = [i["call_id"] for i in items]
    assert len(set(call_ids)) == 2
    assert not any(c.startswith("call_recovered_") for c in call_ids)
    assert call_ids == [ctx.call_id("call_recovered_0"), ctx.call_id("call_recovered_1")]


# -- calls mapped back to the client's tools -------------------------------------------------------


def test_custom_wrapper_call_is_a_custom_tool_call_with_the_raw_input() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
    items = output_items(
        context(),
        {"tool_calls": [tool_call("call_p", "apply_patch", json.dumps({"input": patch}))]},
    )
    (item,) = items
    assert item["type"] == "custom_tool_call"
    assert item["id"].startswith("ctc_")
    assert item["call_id"] == "call_p"
    assert item["name"] == "apply_patch"
    assert item["input"] == patch
    assert "arguments" not in item


@pytest.mark.parametrize(
    "arguments", ["*** Begin Patch\n*** End Patch", '{"patch": "x"}', '{"input": 3}', "[1]", ""]
)
def test_custom_input_not_in_the_wrapper_is_taken_raw(arguments: str) -> None:
    assert custom_input(arguments) == arguments
    item = call_item(context(), "c", "apply_patch", arguments)
    assert item["input"] == arguments


def test_custom_input_unwraps() -> None:
    assert custom_input('{"input": "a\\nb"}') == "a\nb"
    assert custom_input('{"input": ""}') == ""


def test_namespace_is_restored() -> None:
    item = call_item(context(), "call_n", "agents__spawn", '{"task":"x"}')
    assert item["type"] == "function_call"
    assert item["name"] == "spawn"
    assert item["namespace"] == "agents"
    assert item["call_id"] == "call_n"
    assert item["arguments"] == '{"task":"x"}'


def test_top_level_call_has_no_namespace() -> None:
    assert "namespace" not in call_item(context(), "c", "get_weather", "{}")


def test_undeclared_name_is_a_plain_function_call() -> None:
    item = call_item(context(), "c", "mystery", "{}")
    assert item["type"] == "function_call" and item["name"] == "mystery"


def test_local_shell_call() -> None:
    arguments = json.dumps({"command": ["ls", "-l"], "workdir": "/tmp", "timeout_ms": 5})
    item = call_item(context(), "call_s", "local_shell", arguments)
    assert item["type"] == "local_shell_call"
    assert item["id"].startswith("lsh_")
    assert item["call_id"] == "call_s"
    assert item["action"] == {
        "type": "exec",
        "command": ["ls", "-l"],
        "env": {},
        "working_directory": "/tmp",
        "timeout_ms": 5,
        "user": None,
    }
    assert call_item(context(), "c", "local_shell", "not json")["action"]["command"] == []


def test_call_item_status() -> None:
    assert call_item(context(), "c", "get_weather", "", "in_progress")["status"] == "in_progress"


# -- status and usage ------------------------------------------------------------------------------


def test_length_is_incomplete_with_max_output_tokens() -> None:
    r = from_completion(context(), completion({"content": "Once upon"}, finish="length"))
    assert r["status"] == "incomplete"
    assert r["incomplete_details"] == {"reason": "max_output_tokens"}
    assert r["completed_at"] is None
    assert r["output"][-1]["status"] == "incomplete"


def test_length_marks_only_the_last_item_incomplete() -> None:
    message = {"content": "x", "tool_calls": [tool_call("c", "get_weather", '{"a":')]}
    r = from_completion(context(), completion(message, finish="length"))
    assert [i["status"] for i in r["output"]] == ["completed", "incomplete"]


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", ("completed", None)),
        ("tool_calls", ("completed", None)),
        ("function_call", ("completed", None)),
        (None, ("completed", None)),
        ("length", ("incomplete", "max_output_tokens")),
        ("content_filter", ("incomplete", "content_filter")),
    ],
)
def test_status_of(finish: object, expected: tuple[str, str | None]) -> None:
    assert status_of(finish) == expected


def test_usage_mapping_with_details() -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 50},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    assert usage_of(usage) == {
        "input_tokens": 82,
        "input_tokens_details": {"cached_tokens": 50, "cache_write_tokens": 0},
        "output_tokens": 41,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 123,
    }


def test_usage_details_default_to_zero_and_total_to_the_sum() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": None}
    assert usage_of(usage) == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }


@pytest.mark.parametrize(
    "usage",
    [
        None,
        "usage",
        {},
        {"prompt_tokens": 5},
        {"completion_tokens": 5},
        {"prompt_tokens": "5", "completion_tokens": 1},
        {"prompt_tokens": 5, "completion_tokens": -1},
        {"prompt_tokens": True, "completion_tokens": 1},
        {"prompt_tokens": 1.0, "completion_tokens": 1},
    ],
)
def test_usage_is_none_unless_complete(usage: object) -> None:
    assert usage_of(usage) is None


def test_whole_response_usage() -> None:
    assert from_completion(context(), completion({"content": "x"}))["usage"]["total_tokens"] == 123
    assert from_completion(context(), completion({"content": "x"}, usage=None))["usage"] is None
