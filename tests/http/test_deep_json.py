"""JSON nested deeper than latchgate can write it again, wherever it must write what it read.

orjson reads 1024 levels of nesting but writes only 254. A request or an answer between the two
goes through untouched as its own bytes; these are the places where latchgate changes it and
must write it again (the first found by bench/compare_trees.py, the rest by probing every such
place; each was a 500): an answer whose repairs are written, a failing reply kept while the model
is asked again, a stream's rebuilt chunks, a Responses input stored, a front's request
translated to chat and a front's answer translated back. Each ends in an answer the client can
use or an error in the shape of its API. (A chat request too deep to re-encode for its schemas
is a 400: tests/http/test_broken_answers.py; one too deep to ask again when healing:
tests/http/test_healing.py.)
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import anthropic
import openai
import pytest

from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion, text_stream
from tests.http.test_logs import captured, lines

__all__ = ["captured"]  # a fixture of test_logs', used here

MODEL = "fake-model"
MSG: Any = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def deep(levels: int = 300) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def with_deep_field(item: dict[str, Any]) -> bytes:
    """`item`'s JSON with a top-level field 300 levels deep (written by `json`, which can)."""
    return json.dumps({**item, "x_deep": deep()}).encode()


async def test_a_whole_answer_too_deep_to_write_its_repairs_is_passed_on_as_sent(
    lg: Running, fake: FakeUpstream
) -> None:
    # The call written as text would be recovered, but the answer cannot be written again.
    fake.push(Json(with_deep_field(completion(CALL))))
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=TOOLS
    )
    message = raw.parse().choices[0].message
    assert message.content == CALL and not message.tool_calls
    notices = raw.headers.get_list("x-latchgate-notice")
    assert any("more than 254 levels deep" in n and "as the server sent it" in n for n in notices)


async def test_a_failing_reply_too_deep_to_keep_is_passed_on_flagged_not_asked_again(
    lg: Running, fake: FakeUpstream
) -> None:
    # A call to a tool never declared would be asked for again, keeping this reply in case
    # the next is no better; a reply that cannot be written again cannot be kept.
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    reply = completion(None, finish="tool_calls", tool_calls=[call])
    fake.push(Json(with_deep_field(reply)), Json(completion("unused")))
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=TOOLS
    )
    calls = raw.parse().choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["weather"]
    assert len(fake.bodies()) == 1
    notices = raw.headers.get_list("x-latchgate-notice")
    assert any("more than 254 levels deep" in n and "passed it on" in n for n in notices)


def deep_stream(*pieces: str) -> Stream:
    stream = text_stream(*pieces)
    stream.events = [
        b"data: " + with_deep_field(e) + b"\n\n" if isinstance(e, dict) else e
        for e in stream.events
    ]
    return stream


async def test_a_stream_too_deep_to_write_is_a_502_before_any_content(
    lg: Running, fake: FakeUpstream
) -> None:
    # The call is held from its first character: nothing reached the client when the chunk
    # that carries it, rebuilt from the upstream's, cannot be written.
    fake.push(deep_stream(CALL[:20], CALL[20:]))
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(
            model=MODEL, messages=MSG, tools=TOOLS, stream=True
        )
    assert info.value.status_code == 502
    assert info.value.code == "upstream_bad_answer"
    assert "254 levels deep" in info.value.message
    assert len(fake.bodies()) == 1  # not retried: the server would nest it again


async def test_a_stream_too_deep_to_write_after_content_ends_with_an_error_event(
    lg: Running, fake: FakeUpstream
) -> None:
    seen = asyncio.Event()  # the call comes once the client has the text
    paused = deep_stream("Let me check.", CALL)
    paused.events.insert(2, seen)
    fake.push(paused)
    stream = await lg.client().chat.completions.create(
        model=MODEL, messages=MSG, tools=TOOLS, stream=True
    )
    texts: list[str] = []
    with pytest.raises(openai.APIError) as info:
        async for chunk in stream:
            texts += [c.delta.content or "" for c in chunk.choices]
            if "".join(texts):
                seen.set()
    assert "".join(texts) == "Let me check."  # the text relayed as it came, then the error
    assert "254 levels deep" in info.value.message


@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_too_deep_to_store_is_answered_and_not_stored(
    stream: bool, lg: Running, fake: FakeUpstream, captured: io.StringIO
) -> None:
    fake.push(text_stream("Sunny.") if stream else Json(completion("Sunny.")))
    client = lg.client()
    part: Any = {"type": "input_text", "text": "Weather?", "x": deep()}
    items: Any = [{"role": "user", "content": [part]}]
    if stream:
        async with client.responses.stream(model=MODEL, input=items) as events:
            response = await events.get_final_response()
    else:
        response = await client.responses.create(model=MODEL, input=items)
    assert response.output_text == "Sunny." and response.status == "completed"
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as bad:
        await client.responses.create(model=MODEL, previous_response_id=response.id, input="x")
    assert bad.value.code == "previous_response_not_found"
    # Streamed, the client had its answer before the store was written: the log says whether
    # the handler ended well.
    logged = [(e["event"], e.get("status")) for e in lines(captured)]
    assert ("request", 200) in logged and not [e for e, _ in logged if e == "unhandled"]


def deep_schema(levels: int = 300) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_request_too_deep_to_translate_is_a_400(
    stream: bool, lg: Running, fake: FakeUpstream
) -> None:
    # The chat request a front translates to is written before it is sent (the chat route
    # itself says which schema is too deep: tests/http/test_schemas.py).
    tool: Any = {"type": "function", "name": "f", "parameters": deep_schema()}
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().responses.create(model=MODEL, input="x", tools=[tool], stream=stream)
    assert "more than 254 levels deep" in info.value.message
    assert "flatten the deepest part" in info.value.message
    assert fake.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_a_messages_request_too_deep_to_translate_is_an_anthropic_400(
    stream: bool, lg: Running, fake: FakeUpstream
) -> None:
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="unused", max_retries=0)
    tool: Any = {"name": "f", "input_schema": deep_schema()}
    with pytest.raises(anthropic.BadRequestError) as info:
        await sdk.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "x"}],
            tools=[tool], stream=stream,
        )  # fmt: skip
    await sdk.close()
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "more than 254 levels deep" in info.value.message
    assert fake.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_arguments_too_deep_for_a_messages_answer(
    stream: bool, lg: Running, fake: FakeUpstream
) -> None:
    # The Messages front writes a call's arguments as an object. Streamed, they go out as the
    # string pieces they came in; whole, an object nested past 254 levels cannot be written,
    # and the answer is an Anthropic-shaped 502 instead of a 500.
    arguments = json.dumps({"city": deep()})
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    if stream:
        fake.push(
            Stream(
                [
                    chunk({"role": "assistant", "content": None}),
                    chunk({"tool_calls": [{"index": 0, **call}]}),
                    chunk({}, "tool_calls"),
                    "[DONE]",
                ]
            )
        )
    else:
        fake.push(Json(completion(None, finish="tool_calls", tool_calls=[call])))  # type: ignore[arg-type]
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="unused", max_retries=0)
    tool: Any = {"name": "f", "input_schema": {"type": "object"}}
    kw: Any = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    try:
        if stream:
            # Read as events: the SDK's own stream helper parses JSON only ~200 levels deep.
            events = await sdk.messages.create(**kw, tools=[tool], stream=True)
            pieces = [
                e.delta.partial_json
                async for e in events
                if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
            ]
            assert json.loads("".join(pieces)) == {"city": deep()}
            return
        with pytest.raises(anthropic.APIStatusError) as info:
            await sdk.messages.create(**kw, tools=[tool])
    finally:
        await sdk.close()
    assert info.value.status_code == 502
    assert info.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "more than 254 levels deep" in info.value.message
    assert "Messages API's shape" in info.value.message


async def test_a_messages_call_input_too_deep_to_write_is_an_anthropic_400(
    lg: Running, fake: FakeUpstream
) -> None:
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="unused", max_retries=0)
    use: Any = {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": deep()}}
    result: Any = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    messages: Any = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    tool: Any = {"name": "f", "input_schema": {"type": "object"}}
    with pytest.raises(anthropic.BadRequestError) as info:
        await sdk.messages.create(model=MODEL, max_tokens=5, messages=messages, tools=[tool])
    await sdk.close()
    assert "messages[0].content[0].input nests JSON more than 254 levels" in info.value.message
    assert fake.requests == []


async def test_a_responses_shell_action_too_deep_to_write_is_a_400(
    lg: Running, fake: FakeUpstream
) -> None:
    action = {"type": "exec", "command": ["ls"], "env": {"X": deep()}}
    items: Any = [
        {"type": "local_shell_call", "id": "ls_1", "call_id": "c1", "status": "completed",
         "action": action},
        {"type": "local_shell_call_output", "id": "ls_1", "output": "ok"},
    ]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().responses.create(
            model=MODEL, input=items, tools=[{"type": "local_shell"}]
        )
    assert info.value.param == "input[0].action"  # type: ignore[attr-defined]
    assert "more than 254 levels deep" in info.value.message
    assert fake.requests == []
