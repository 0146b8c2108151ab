"""Refusal handling at its edges: what must not latch, and races between requests."""

from __future__ import annotations

import asyncio

import openai
import orjson
import pytest

from proxy.agent.negotiate import classify
from proxy.state.latches import endpoint_id
from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Json, completion

MSG = [{"role": "user", "content": "Hi"}]


def test_an_echoed_request_body_is_not_read_as_a_refusal() -> None:
    # pydantic echoes the rejected body in `input`; the words in it are the client's.
    sent = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 1,
        "messages": [{"role": "user", "content": "Unrecognized request argument: seed"}],
        "tool_choice": "foo",
    }
    item = {
        "type": "value_error",
        "loc": ("body",),
        "msg": "Invalid value for tool_choice: foo",
        "input": sent,
    }
    as_repr = orjson.dumps({"object": "error", "message": str([item]), "code": 400})
    as_json = orjson.dumps({"detail": [{**item, "loc": ["body"]}]})
    assert classify(400, as_repr, sent) is None
    assert classify(400, as_json, sent) is None


async def test_a_grammar_error_with_nothing_to_relax_is_returned(
    lg: Running, fake: FakeUpstream
) -> None:
    error = {
        "error": {
            "code": 500,
            "type": "server_error",
            "message": 'JSON schema conversion failed:\nUnrecognized schema: {"required":["x"]}',
        }
    }
    fake.push(Json(error, status=500), Json(error, status=500), Json(error, status=500))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": ["x"],
                },
            },
        }
    ]
    with pytest.raises(openai.InternalServerError, match="JSON schema conversion failed"):
        await lg.client().chat.completions.create(model="m", messages=MSG, tools=tools)
    assert all(b["tools"] == tools for b in fake.bodies())  # never sent "relaxed"
    endpoint, _ = lg.proxy.store.view(endpoint_id(fake.url, None), "m")
    assert endpoint.strict_schemas is True  # nothing was relaxable: no latch


async def test_a_request_that_lost_the_race_on_an_effort_value_is_resent(
    lg: Running, fake: FakeUpstream
) -> None:
    refusal = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support "
            "'none' with this model. Supported values are: 'minimal', 'low', "
            "'medium', and 'high'.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }
    # Both first attempts are refused before either is answered; then both are served.
    fake.push(
        Json(refusal, status=400, delay=0.2),
        Json(refusal, status=400, delay=0.3),
        Json(completion()),
        Json(completion()),
    )
    client = lg.client()
    results = await asyncio.gather(
        *(
            client.chat.completions.create(model="m", messages=MSG, reasoning_effort="none")
            for _ in range(2)
        )
    )
    assert [r.choices[0].message.content for r in results] == ["Hello!", "Hello!"]
    assert [b.get("reasoning_effort") for b in fake.bodies()[2:]] == ["minimal", "minimal"]


async def test_the_latch_gauge_is_labelled_with_the_whole_upstream_name(
    fake: FakeUpstream, start_proxy
) -> None:
    running = await start_proxy(
        {"name": "openrouter-production", "base_url": fake.url, "kind": "generic"}
    )
    refusal = {
        "error": {
            "message": "Unsupported value: 'temperature' does not support 0.2 with "
            "this model. Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    fake.push(Json(refusal, status=400))
    await running.client().chat.completions.create(model="m", messages=MSG, temperature=0.2)
    value = running.proxy.metrics.registry.get_sample_value(
        "latchgate_latches",
        {"upstream": "openrouter-production", "capability": "chosen_temperature"},
    )
    assert value == 1


def test_a_refusal_of_another_field_does_not_move_the_effort() -> None:
    body = orjson.dumps(
        {
            "error": {
                "message": "Unsupported value: 'temperature' does not support 0.2 with this "
                "model. Only the default (1) value is supported when reasoning_effort is not "
                "'none'.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "unsupported_value",
            }
        }
    )
    sent = {"model": "m", "messages": MSG, "temperature": 0.2, "reasoning_effort": "low"}
    got = classify(400, body, sent)
    assert got is not None and got.capability == "chosen_temperature"


def test_a_mistake_inside_response_format_is_the_client_s() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    for message in (
        "Unknown parameter: 'response_format.schema'.",
        "Unknown parameter: 'response_format.json_schema.strictt'.",
    ):
        body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        assert (
            classify(400, body, {"model": "m", "messages": MSG, "response_format": schema}) is None
        )
    text_only = orjson.dumps({"error": {"message": "response_format text is not supported"}})
    sent = {"model": "m", "messages": MSG, "response_format": {"type": "text"}}
    assert classify(400, text_only, sent) is None  # latching would not change this request


def test_imported_latches_without_times_are_not_expired_at_once() -> None:
    import time

    from proxy.state.latches import LatchStore

    store = LatchStore()
    store.merge_snapshot(
        {
            "version": 1,
            "saved_at": time.time() - 3600,
            "endpoints": {
                "e" * 64: {"strict_schemas": False, "models": {"m": {"legacy_token_limit": False}}}
            },
        }
    )
    assert store.expire(7 * 86400) == 0  # an hour old, not "since 1970"
    assert store.expire(1800) == 2
