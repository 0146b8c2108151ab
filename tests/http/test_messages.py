"""The Anthropic Messages front through a running latchgate, read back with the real anthropic SDK
(issue 16).

latchgate stands in front of the scripted fake chat upstream; the client speaks the Messages API
(`messages.create`, the `messages.stream` helper, `messages.count_tokens`). What is checked is
what an Anthropic client (Claude Code above all) relies on: the Message and its blocks, the
streamed events in the order the SDK accumulates them, thinking in its own block, tool calls
native and recovered from text, a tool round trip with `tool_result` blocks, refusals latched and
resent, overflows in Anthropic's words, cut streams raised, errors as the SDK's exception classes
in Anthropic's shape, and the request Claude Code really sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from proxy.headers import NOTICE_HEADER
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion, text_stream
from tests.http.test_responses import call_chunk, calls_stream, tool_call, usage_chunk
from tests.http.test_toolcalls import _FORMAT_CASES
from tests.toolcall_corpus import Case

MODEL = "fake-model"
KEY = "k-123456789"
CLAUDE_REQUEST = Path(__file__).resolve().parents[1] / "fixtures" / "claude" / "main_request.json"
WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
HI: Any = [{"role": "user", "content": "Hi"}]


_CLIENTS: list[anthropic.AsyncAnthropic] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Every SDK client a test made is closed while its event loop still runs."""
    yield
    while _CLIENTS:
        await _CLIENTS.pop().close()


def client(lg: Running, **kw: Any) -> anthropic.AsyncAnthropic:
    kw.setdefault("api_key", "x")
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, max_retries=0, **kw)
    _CLIENTS.append(sdk)
    return sdk


def anthropic_tools(case: Case) -> Any:
    return [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
        for t in case.tools
    ]


def check_error_shape(body: object, kind: str) -> str:
    """An Anthropic error body of this type; its message."""
    assert isinstance(body, dict), body
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    error = body["error"]
    assert set(error) == {"type", "message"}, body
    assert error["type"] == kind, body
    assert isinstance(error["message"], str) and error["message"], body
    return error["message"]


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """Every event of a Messages stream (name and data must agree), comment lines skipped."""
    events = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert len(lines) == 2, block
        name = lines[0].removeprefix("event: ")
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == name
        events.append(data)
    return events


async def raw_post(
    lg: Running, body: Any, path: str = "/v1/messages", headers: dict[str, str] | None = None
) -> tuple[int, str, bytes]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            lg.url + path,
            data=data,
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as resp,
    ):
        return resp.status, resp.headers.get("Content-Type", ""), await resp.read()


def texts(message: Any) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def tool_uses(message: Any) -> list[Any]:
    return [b for b in message.content if b.type == "tool_use"]


# -- whole answers -------------------------------------------------------------------------------


async def test_create_returns_a_message_and_sends_the_chat_body(
    lg: Running, fake: FakeUpstream
) -> None:
    message = await client(lg).messages.create(
        model=MODEL,
        max_tokens=50,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=HI,
        extra_body={"temperature": 0.2},  # this SDK version has no sampling parameters
        stop_sequences=["END"],
        metadata={"user_id": "u-1"},
    )
    assert message.type == "message" and message.id.startswith("msg_")
    assert message.role == "assistant" and message.model == MODEL
    assert [b.type for b in message.content] == ["text"] and texts(message) == "Hello!"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 3)
    assert fake.bodies()[-1] == {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 50,
        "temperature": 0.2,
        "stop": ["END"],
        "user": "u-1",
    }
    requests = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_requests_total",
        {"upstream": "fake", "model": MODEL, "route": "messages", "status": "200",
         "stream": "false"},
    )  # fmt: skip
    assert requests == 1


async def test_whole_reasoning_text_and_calls_are_blocks_in_order(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Json(
            completion(
                "Checking.",
                finish="tool_calls",
                reasoning_content="Need the weather.",
                tool_calls=[tool_call("call_a", "get_weather", '{"city":"Paris"}')],
                usage={"prompt_tokens": 30, "completion_tokens": 9,
                       "prompt_tokens_details": {"cached_tokens": 20}},
            )
        )
    )  # fmt: skip
    message = await client(lg).messages.create(
        model=MODEL, max_tokens=100, messages=HI, tools=[WEATHER]
    )
    thinking, text, use = message.content
    assert thinking.type == "thinking" and thinking.thinking == "Need the weather."
    assert text.type == "text" and text.text == "Checking."
    assert use.type == "tool_use" and use.id == "toolu_call_a"
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 10 and message.usage.cache_read_input_tokens == 20
    (sent,) = fake.bodies()[-1]["tools"]
    assert sent == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER["input_schema"],
        },
    }


async def test_a_length_cut_is_max_tokens(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(completion("Once upon a", finish="length")))
    message = await client(lg).messages.create(model=MODEL, max_tokens=3, messages=HI)
    assert message.stop_reason == "max_tokens"


# -- streams -------------------------------------------------------------------------------------


async def test_stream_helper_text(lg: Running, fake: FakeUpstream) -> None:
    fake.push(text_stream("Hel", "lo", " there"))
    async with client(lg).messages.stream(model=MODEL, max_tokens=50, messages=HI) as stream:
        kinds = [event.type async for event in stream]
        message = await stream.get_final_message()
    assert texts(message) == "Hello there" and message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 3 and message.usage.input_tokens == 10
    assert kinds[0] == "message_start" and kinds.count("message_start") == 1
    assert kinds[-1] == "message_stop"
    assert "text" in kinds  # the helper's own text events, from text_delta
    assert fake.bodies()[-1]["stream"] is True
    assert fake.bodies()[-1]["stream_options"] == {"include_usage": True}


async def test_raw_stream_events_in_order(lg: Running, fake: FakeUpstream) -> None:
    fake.push(text_stream("Hel", "lo"))
    status, ctype, raw = await raw_post(
        lg, {"model": MODEL, "max_tokens": 5, "messages": HI, "stream": True}
    )
    assert status == 200 and ctype.startswith("text/event-stream")
    events = parse_sse(raw)
    kinds = [e["type"] for e in events if e["type"] != "content_block_delta"]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(d["text"] for d in deltas) == "Hello"
    assert all(d["type"] == "text_delta" for d in deltas)
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


async def test_stream_thinking_then_text_are_separate_blocks(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"reasoning_content": "The capital "}),
                chunk({"reasoning_content": "of France."}),
                chunk({"content": "Paris."}),
                chunk({}, "stop"),
                usage_chunk(),
                "[DONE]",
            ]
        )
    )
    async with client(lg).messages.stream(
        model=MODEL,
        max_tokens=2000,
        messages=HI,
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        kinds = [event.type async for event in stream]
        message = await stream.get_final_message()
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == "The capital of France."
    assert text.type == "text" and text.text == "Paris."
    assert "thinking" in kinds and "signature" in kinds
    assert fake.bodies()[-1]["reasoning_effort"] == "low"


async def test_stream_native_tool_use(lg: Running, fake: FakeUpstream) -> None:
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Checking."}),
                call_chunk(0, "call_w", "get_weather", '{"city":'),
                call_chunk(0, "", "", '"Paris"}'),
                chunk({}, "tool_calls"),
                usage_chunk(),
                "[DONE]",
            ]
        )
    )
    async with client(lg).messages.stream(
        model=MODEL, max_tokens=100, messages=HI, tools=[WEATHER]
    ) as stream:
        kinds = [event.type async for event in stream]
        message = await stream.get_final_message()
    text, use = message.content
    assert text.type == "text" and text.text == "Checking."
    assert use.type == "tool_use" and use.id == "toolu_call_w"
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
    assert message.stop_reason == "tool_use"
    assert "input_json" in kinds


async def test_two_streamed_calls_are_sequential_blocks(lg: Running, fake: FakeUpstream) -> None:
    fake.push(
        calls_stream(
            ("call_1", "get_weather", '{"city":"Paris"}'),
            ("call_2", "get_weather", '{"city":"Rome"}'),
        )
    )
    status, _, raw = await raw_post(
        lg, {"model": MODEL, "max_tokens": 50, "messages": HI, "stream": True, "tools": [WEATHER]}
    )
    assert status == 200
    events = parse_sse(raw)
    open_index = None
    for event in events:
        if event["type"] == "content_block_start":
            assert open_index is None
            open_index = event["index"]
        elif event["type"] in ("content_block_delta", "content_block_stop"):
            assert event["index"] == open_index
            if event["type"] == "content_block_stop":
                open_index = None
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [(s["type"], s["id"]) for s in starts] == [
        ("tool_use", "toolu_call_1"),
        ("tool_use", "toolu_call_2"),
    ]
    for index, city in ((0, "Paris"), (1, "Rome")):
        partial = "".join(
            e["delta"]["partial_json"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == index
        )
        assert json.loads(partial) == {"city": city}


@pytest.mark.parametrize("case", _FORMAT_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("stream", [False, True])
async def test_calls_written_as_text_are_recovered_in_every_format(
    lg: Running, fake: FakeUpstream, case: Case, stream: bool
) -> None:
    tools = anthropic_tools(case)
    go: Any = [{"role": "user", "content": "go"}]
    if stream:
        fake.push(text_stream(*[case.text[i : i + 7] for i in range(0, len(case.text), 7)]))
        async with client(lg).messages.stream(
            model=MODEL, max_tokens=500, messages=go, tools=tools
        ) as events:
            message = await events.get_final_message()
    else:
        fake.push(Json(completion(case.text)))
        message = await client(lg).messages.create(
            model=MODEL, max_tokens=500, messages=go, tools=tools
        )
    uses = tool_uses(message)
    assert [(u.name, u.input) for u in uses] == [(name, args) for name, args in case.calls]
    ids = [u.id for u in uses]
    assert all(i.startswith("toolu_") and "recovered" not in i for i in ids)
    assert len(set(ids)) == len(ids)
    assert texts(message) == (case.content or "")
    assert message.stop_reason == "tool_use"
    kinds = [b.type for b in message.content]
    assert kinds == sorted(kinds, key=["thinking", "text", "tool_use"].index)


UNREADABLE = {
    "cut JSON": b'data: {"choices":[{"index":0,"delta":{"content":"forty-two"}}]\n\n',
    "not an object": b"data: [1, 2]\n\n",
    "choices not a list": b'data: {"choices": "x"}\n\n',
}


@pytest.mark.parametrize("bad", sorted(UNREADABLE))
async def test_an_unreadable_stream_event_ends_the_message_with_an_error(
    lg: Running, fake: FakeUpstream, bad: str
) -> None:
    # The chat route relays such an event as it came (the client's SDK raises on it); on the
    # Messages front it must not vanish and leave "The answer is " as a finished message.
    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer is "})]
    fake.push(Stream([*events, UNREADABLE[bad], chunk({}, "stop"), "[DONE]"]))
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client(lg).messages.stream(model=MODEL, max_tokens=50, messages=HI) as s:
            async for _ in s:
                pass
    check_error_shape(info.value.body, "api_error")
    assert "not a chat chunk" in info.value.body["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_is_the_stop_reason_exactly_when_a_tool_use_block_is_there(
    lg: Running, fake: FakeUpstream, stream: bool
) -> None:
    # A server that says tool_calls with no call in the reply: Claude Code would wait for a
    # tool_use block that never comes. Text alone ends the turn.
    fake.push(text_stream("Just text", finish="tool_calls") if stream
              else Json(completion("Just text", finish="tool_calls")))  # fmt: skip
    if stream:
        async with client(lg).messages.stream(
            model=MODEL, max_tokens=50, messages=HI, tools=[WEATHER]
        ) as s:
            message = await s.get_final_message()
    else:
        message = await client(lg).messages.create(
            model=MODEL, max_tokens=50, messages=HI, tools=[WEATHER]
        )
    assert [b.type for b in message.content] == ["text"]
    assert message.stop_reason == "end_turn"


async def test_an_upstream_cut_mid_stream_raises_in_the_sdk(
    lg: Running, fake: FakeUpstream
) -> None:
    cut = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"})]
    fake.push(Stream(cut, then="drop"))
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client(lg).messages.stream(model=MODEL, max_tokens=50, messages=HI) as s:
            async for _ in s:
                pass
    check_error_shape(info.value.body, "api_error")
    fake.push(Stream(cut, then="drop"))
    status, _, raw = await raw_post(
        lg, {"model": MODEL, "max_tokens": 5, "messages": HI, "stream": True}
    )
    assert status == 200
    events = parse_sse(raw)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "error"
    assert "message_stop" not in kinds and "message_delta" not in kinds
    check_error_shape({"type": "error", "error": events[-1]["error"]}, "api_error")


async def test_a_refusal_latches_and_is_resent(lg: Running, fake: FakeUpstream) -> None:
    refusal = {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with "
            "this model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    fake.push(Json(refusal, status=400))
    async with client(lg).messages.stream(model=MODEL, max_tokens=20, messages=HI) as s:
        message = await s.get_final_message()
    assert texts(message) == "Hello!"
    first, second = fake.bodies()
    assert first["max_tokens"] == 20 and "max_tokens" not in second
    assert second["max_completion_tokens"] == 20
    await client(lg).messages.create(model=MODEL, max_tokens=20, messages=HI)
    assert fake.bodies()[-1]["max_completion_tokens"] == 20  # latched: right the first time
    assert "max_tokens" not in fake.bodies()[-1]
    assert len(fake.requests) == 3


async def test_an_overflow_is_anthropics_prompt_too_long_whole_and_streamed(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "context_length": {MODEL: 8192}}
    )
    big: Any = [{"role": "user", "content": "word " * 40_000}]
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(lg).messages.create(model=MODEL, max_tokens=100, messages=big)
    message = check_error_shape(info.value.body, "invalid_request_error")
    assert message.startswith("prompt is too long: "), message
    assert message.split(": ", 1)[1].split(" ")[1:4] == ["tokens", ">", "8192"], message
    assert int(message.split(": ", 1)[1].split(" ")[0]) > 8192
    with pytest.raises(anthropic.BadRequestError) as streamed:
        async with client(lg).messages.stream(model=MODEL, max_tokens=100, messages=big) as s:
            async for _ in s:
                pass
    again = check_error_shape(streamed.value.body, "invalid_request_error")
    assert again == message
    assert fake.requests == []


async def test_an_upstream_overflow_says_prompt_too_long_with_the_sizes(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(
        b'{"error":{"code":400,"message":"request (18753 tokens) exceeds the available context '
        b'size (8192 tokens), try increasing it","type":"exceed_context_size_error",'
        b'"n_prompt_tokens":18753,"n_ctx":8192}}', status=400))  # fmt: skip
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(lg).messages.create(model=MODEL, max_tokens=100, messages=HI)
    message = check_error_shape(info.value.body, "invalid_request_error")
    assert message.startswith("prompt is too long"), message
    assert "18753" in message and "8192" in message


# -- a tool round trip ---------------------------------------------------------------------------


async def test_a_tool_round_trip_with_tool_result_blocks(lg: Running, fake: FakeUpstream) -> None:
    calls = [
        tool_call("call_a", "get_weather", '{"city":"Paris"}'),
        tool_call("call_b", "get_weather", '{"city":"Rome"}'),
    ]
    fake.push(Json(completion("Checking both.", finish="tool_calls", tool_calls=calls)))
    sdk = client(lg)
    question: Any = {"role": "user", "content": "Weather in Paris and Rome?"}
    first = await sdk.messages.create(
        model=MODEL, max_tokens=100, messages=[question], tools=[WEATHER]
    )
    uses = tool_uses(first)
    assert [u.id for u in uses] == ["toolu_call_a", "toolu_call_b"]
    fake.push(Json(completion("Sunny in Paris, rain in Rome.")))
    second = await sdk.messages.create(
        model=MODEL,
        max_tokens=100,
        tools=[WEATHER],
        messages=[
            question,
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": uses[1].id,
                        "content": [{"type": "text", "text": "rain"}],
                        "is_error": False,
                    },
                    {"type": "text", "text": "Summarise."},
                ],
            },
        ],
    )
    assert texts(second) == "Sunny in Paris, rain in Rome."
    messages = fake.bodies()[-1]["messages"]
    assert messages[0] == {"role": "user", "content": "Weather in Paris and Rome?"}
    assert messages[1]["role"] == "assistant" and messages[1]["content"] == "Checking both."
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in messages[1]["tool_calls"]] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Rome"}),
    ]  # fmt: skip
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "user", "content": "Summarise."},
    ]


async def test_an_error_tool_result_says_so(lg: Running, fake: FakeUpstream) -> None:
    await client(lg).messages.create(
        model=MODEL,
        max_tokens=100,
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_x",
                        "name": "get_weather",
                        "input": {"city": "Atlantis"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_x",
                        "content": "no such city",
                        "is_error": True,
                    }
                ],
            },
        ],
    )
    assert fake.bodies()[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "x",
        "content": "Error: no such city",
    }


# -- count_tokens -------------------------------------------------------------------------------


async def test_count_tokens_counts_and_grows_with_the_prompt(
    lg: Running, fake: FakeUpstream
) -> None:
    sdk = client(lg)
    small = await sdk.messages.count_tokens(model=MODEL, messages=HI)
    large = await sdk.messages.count_tokens(
        model=MODEL,
        system="You are a careful assistant.",
        messages=[{"role": "user", "content": "Tell me about Paris. " * 200}],
        tools=[WEATHER],
    )
    assert small.input_tokens > 0
    assert large.input_tokens > small.input_tokens * 10
    status, _, raw = await raw_post(
        lg, {"model": MODEL, "messages": HI}, path="/v1/messages/count_tokens"
    )
    assert status == 200 and orjson.loads(raw) == {"input_tokens": small.input_tokens}
    assert fake.bodies() == []  # counting is not a completion


async def test_count_tokens_errors_are_anthropic_shaped(lg: Running) -> None:
    for body in ({"messages": HI}, {"model": MODEL, "messages": []}, b"{nope"):
        status, _, raw = await raw_post(lg, body, path="/v1/messages/count_tokens")
        assert status == 400, raw
        check_error_shape(orjson.loads(raw), "invalid_request_error")


# -- errors -------------------------------------------------------------------------------------


async def test_an_unknown_model_is_not_found(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "models": [MODEL]}
    )
    with pytest.raises(anthropic.NotFoundError) as info:
        await client(lg).messages.create(model="claude-nope", max_tokens=5, messages=HI)
    check_error_shape(info.value.body, "not_found_error")
    with pytest.raises(anthropic.NotFoundError) as streamed:
        async with client(lg).messages.stream(model="claude-nope", max_tokens=5, messages=HI):
            pass
    check_error_shape(streamed.value.body, "not_found_error")
    assert fake.requests == []


async def test_a_bad_key_is_an_authentication_error_both_ways(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, client_keys=[KEY]
    )
    for sdk in (client(lg, api_key="wrong-key-1"), client(lg, api_key=None, auth_token="wrong")):
        with pytest.raises(anthropic.AuthenticationError) as info:
            await sdk.messages.create(model=MODEL, max_tokens=5, messages=HI)
        check_error_shape(info.value.body, "authentication_error")
        with pytest.raises(anthropic.AuthenticationError):
            await sdk.messages.count_tokens(model=MODEL, messages=HI)
    status, _, raw = await raw_post(lg, {"model": MODEL, "max_tokens": 5, "messages": HI})
    assert status == 401
    check_error_shape(orjson.loads(raw), "authentication_error")
    assert fake.requests == []
    for sdk in (client(lg, api_key=KEY), client(lg, api_key=None, auth_token=KEY)):
        message = await sdk.messages.create(model=MODEL, max_tokens=5, messages=HI)
        assert texts(message) == "Hello!"
        assert (await sdk.messages.count_tokens(model=MODEL, messages=HI)).input_tokens > 0
    assert fake.requests[0].headers.get("x-api-key") is None


async def test_a_malformed_body_is_a_bad_request(lg: Running, fake: FakeUpstream) -> None:
    sdk = client(lg)
    with pytest.raises(anthropic.BadRequestError) as info:
        await sdk.messages.create(model=MODEL, max_tokens=5, messages=[])
    assert "messages" in check_error_shape(info.value.body, "invalid_request_error")
    with pytest.raises(anthropic.BadRequestError) as info:
        await sdk.messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "bogus"}]}],  # type: ignore[list-item]
        )
    assert "messages[0].content[0]" in check_error_shape(info.value.body, "invalid_request_error")
    for body in (
        b"{not json",
        b"[1, 2]",
        {"model": MODEL, "messages": HI},  # no max_tokens
        {"max_tokens": 5, "messages": HI},  # no model
        {"model": MODEL, "max_tokens": 5, "messages": HI, "mcp_servers": [{"type": "url"}]},
    ):
        status, ctype, raw = await raw_post(lg, body)
        assert status == 400, (body, raw)
        assert ctype.startswith("application/json")
        check_error_shape(orjson.loads(raw), "invalid_request_error")
    status, _, raw = await raw_post(lg, {"model": MODEL, "messages": HI})
    assert "max_tokens" in orjson.loads(raw)["error"]["message"]
    assert fake.requests == []


async def test_upstream_errors_map_to_the_sdk_classes(lg: Running, fake: FakeUpstream) -> None:
    cases: list[tuple[int, type[anthropic.APIStatusError], str]] = [
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (500, anthropic.InternalServerError, "api_error"),
    ]
    for status, cls, kind in cases:
        error = {"error": {"message": f"upstream says {status}", "type": "x", "code": None}}
        fake.push(*[Json(error, status=status)] * 4)
        with pytest.raises(cls) as info:
            await client(lg).messages.create(model=MODEL, max_tokens=5, messages=HI)
        assert info.value.status_code == status
        check_error_shape(info.value.body, kind)
        fake.script.clear()


# -- what Claude Code sends --------------------------------------------------------------------


async def test_head_root_is_ok(lg: Running) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.head(lg.url + "/") as resp:
            assert resp.status == 200
        async with session.get(lg.url + "/") as resp:
            assert resp.status == 200


async def test_beta_query_and_anthropic_headers_are_accepted(
    lg: Running, fake: FakeUpstream
) -> None:
    headers = {
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
        "fine-grained-tool-streaming-2025-05-14",
        "x-api-key": "anything",
    }
    body = {"model": MODEL, "max_tokens": 32000, "messages": HI, "stream": True}
    status, ctype, raw = await raw_post(lg, body, path="/v1/messages?beta=true", headers=headers)
    assert status == 200 and ctype.startswith("text/event-stream"), raw
    assert parse_sse(raw)[-1]["type"] == "message_stop"
    status, _, raw = await raw_post(
        lg, {**body, "stream": False}, path="/messages?beta=true", headers=headers
    )
    assert status == 200 and orjson.loads(raw)["type"] == "message"
    status, _, raw = await raw_post(
        lg, {"model": MODEL, "messages": HI}, path="/v1/messages/count_tokens?beta=true",
        headers=headers,
    )  # fmt: skip
    assert status == 200 and orjson.loads(raw)["input_tokens"] > 0
    # The SDK's beta namespace posts to /v1/messages?beta=true with anthropic-beta itself.
    message = await client(lg).beta.messages.create(
        model=MODEL, max_tokens=10, messages=HI, betas=["interleaved-thinking-2025-05-14"]
    )
    assert message.content[0].type == "text"
    for sent in fake.bodies():
        assert "anthropic" not in json.dumps(sent)
    assert all("anthropic-beta" not in r.headers for r in fake.requests)


async def test_claude_code_shapes_are_translated(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    """What Claude Code 2.1 sends, written out here so it is checked even without the fixture:
    adaptive thinking, an effort, context_management, metadata.user_id as JSON, a three-block
    system prompt with cache_control, a system message inside `messages`, and a draft 2020-12
    tool schema (sanitised: a local server builds a grammar from it)."""
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "schema_mode": "sanitise"}
    )
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path"},
            "offset": {"type": "number", "exclusiveMinimum": 0},
            "env": {"type": "object", "propertyNames": {"pattern": "^[A-Z_]+$"},
                    "additionalProperties": {"type": "string"}},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }  # fmt: skip
    body = {
        "model": MODEL,
        "max_tokens": 32000,
        "stream": True,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "s"})},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.0; rand=42"},
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read README.md"}]},
            {"role": "system", "content": "<system-reminder>Today is Monday.</system-reminder>"},
        ],
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": schema}],
    }
    status, _, raw = await raw_post(lg, body, path="/v1/messages?beta=true")
    assert status == 200, raw
    assert parse_sse(raw)[-1]["type"] == "message_stop"
    sent = fake.bodies()[-1]
    assert sent["messages"][0]["role"] == "system"
    assert "You are Claude Code." in sent["messages"][0]["content"]
    assert sent["messages"][1:] == [
        {"role": "user", "content": "Read README.md"},
        {"role": "user", "content": "[system] <system-reminder>Today is Monday.</system-reminder>"},
    ]
    assert sent["reasoning_effort"] == "high" and sent["user"] == body["metadata"]["user_id"]
    assert "context_management" not in sent and "cache_control" not in json.dumps(sent)
    assert [t["function"]["name"] for t in sent["tools"]] == ["Read"]
    check_grammar_safe(sent["tools"])


def check_grammar_safe(tools: list[dict[str, Any]]) -> None:
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            # `propertyNames` stays: a constraint, walked and sanitised like any subschema.
            assert "$schema" not in node, node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for tool in tools:
        assert tool["type"] == "function" and tool["function"]["name"]
        walk(tool["function"]["parameters"])


async def test_the_captured_claude_code_request(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    """The first request Claude Code sent (tests/fixtures/claude), in front of a llama.cpp-kind
    upstream (where Claude Code on a local model would be): a 200 stream to message_stop."""
    if not CLAUDE_REQUEST.exists():
        pytest.skip(f"{CLAUDE_REQUEST} has not been captured yet")
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "llama.cpp"})
    captured = json.loads(CLAUDE_REQUEST.read_text())
    body = captured["body"] if "messages" not in captured and "body" in captured else captured
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219"}
    sent_headers = CLAUDE_REQUEST.parent / "request_headers.json"
    if sent_headers.exists():
        cli = json.loads(sent_headers.read_text()).get("api_key", {})
        headers |= {k: v for k, v in cli.items() if k.lower().startswith(("anthropic-", "x-"))}
    body = {**body, "stream": True}
    status, ctype, raw = await raw_post(lg, body, path="/v1/messages?beta=true", headers=headers)
    assert status == 200, raw[:2000]
    assert ctype.startswith("text/event-stream")
    events = parse_sse(raw)
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    sent = fake.bodies()[-1]
    declared = [t for t in body.get("tools", []) if t.get("type") in (None, "custom")]
    assert len(declared) >= 10  # 12 in Claude Code 2.1.332 (the rest deferred to ToolSearch)
    assert [t["function"]["name"] for t in sent["tools"]] == [t["name"] for t in declared]
    assert [m["role"] for m in sent["messages"]].count("system") <= 1
    assert all(m["role"] != "system" for m in sent["messages"][1:])
    inner = [m for m in body["messages"] if m.get("role") == "system"]
    marked = [
        m
        for m in sent["messages"]
        if m["role"] == "user"
        and isinstance(m["content"], str)
        and m["content"].startswith("[system] ")
    ]
    assert len(marked) == len(inner)
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}  # thinking: adaptive
    assert sent["reasoning_effort"] == "high"  # output_config.effort
    assert sent["max_tokens"] == body["max_tokens"]
    assert "context_management" not in sent and "cache_control" not in json.dumps(sent)
    check_grammar_safe(sent["tools"])  # last: the schema sanitiser's part


async def test_claude_codes_tools_are_translated_alike_every_turn(
    lg: Running, fake: FakeUpstream
) -> None:
    """Claude Code sends its 50 KB of tools with every turn: latchgate translates them once and
    shares the result (proxy.knowntools). Each turn must still get what a fresh translation
    gives, and a turn that also declares a server tool its own notice, every time."""
    captured = json.loads(CLAUDE_REQUEST.read_text())
    body = {**captured, "stream": False}
    server_tool = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    turns = [
        body,
        {**body, "messages": [*body["messages"], {"role": "user", "content": "And then?"}]},
        {**body, "tools": [*body["tools"], server_tool]},
        {**body, "tools": [*body["tools"], server_tool], "max_tokens": 99},
    ]
    notices = []
    for turn in turns:
        fake.push(Json(completion("Done.")))
        async with (
            aiohttp.ClientSession() as session,
            session.post(lg.url + "/v1/messages", json=turn) as resp,
        ):
            assert resp.status == 200, await resp.text()
            notices.append(resp.headers.getall(NOTICE_HEADER, []))
    declared = [t for t in body["tools"] if t.get("type") in (None, "custom")]
    expected = [
        {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                          "parameters": t["input_schema"]}}
        for t in declared
    ]  # fmt: skip
    sent = [b["tools"] for b in fake.bodies()[-4:]]
    assert [[t["function"]["name"] for t in tools] for tools in sent] == [
        [t["function"]["name"] for t in expected]
    ] * 4
    assert sent[0] == sent[1] == sent[2] == sent[3]
    assert fake.bodies()[-3]["messages"][-1] == {"role": "user", "content": "And then?"}
    said = [[n for n in turn if "server tools" in n] for turn in notices]
    assert [len(s) for s in said] == [0, 0, 1, 1], notices
    assert "web_search_20250305" in said[3][0]


async def test_the_stop_sequence_that_ended_the_reply_is_named_when_the_server_says(
    lg: Running, fake: FakeUpstream
) -> None:
    # vLLM names the stop string that ended a choice (`stop_reason`); OpenAI and llama.cpp
    # only say "stop", which stays end_turn.
    reply = completion("Counting: 1, 2")
    reply["choices"][0]["stop_reason"] = "3"
    fake.push(Json(reply))
    message = await client(lg).messages.create(
        model=MODEL,
        max_tokens=20,
        stop_sequences=["3"],
        messages=[{"role": "user", "content": "Count"}],
    )
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "3")
    assert fake.bodies()[-1]["stop"] == ["3"]
    finish = chunk({}, "stop")
    finish["choices"][0]["stop_reason"] = "3"
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "1, 2"}),
                      finish, "[DONE]"]))  # fmt: skip
    async with client(lg).messages.stream(
        model=MODEL,
        max_tokens=20,
        stop_sequences=["3"],
        messages=[{"role": "user", "content": "Count"}],
    ) as stream:
        final = await stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "3")
    fake.push(Json(completion("Counting: 1, 2")))
    plain = await client(lg).messages.create(
        model=MODEL,
        max_tokens=20,
        stop_sequences=["3"],
        messages=[{"role": "user", "content": "Count"}],
    )
    assert (plain.stop_reason, plain.stop_sequence) == ("end_turn", None)


async def test_a_key_sent_as_x_api_key_is_forwarded_where_the_client_key_is(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "forward_client_auth": True}
    )
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="ck-12345678", max_retries=0)
    await sdk.messages.create(model=MODEL, max_tokens=10, messages=HI)
    assert fake.requests[-1].headers["Authorization"] == "Bearer ck-12345678"
