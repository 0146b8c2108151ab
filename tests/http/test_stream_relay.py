"""Upstreams and clients that misbehave: each case a way the request path once went wrong."""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import orjson
import pytest

from proxy.agent.negotiate import Refusal
from proxy.state.latches import endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Hang, Json, Stream, chunk, completion, text_stream

MSG = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
MAX_TOKENS_REFUSAL = orjson.dumps(
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
)


def sample(lg: Running, name: str, **labels: str) -> float:
    return lg.proxy.metrics.registry.get_sample_value(name, labels) or 0.0


def chat_requests(lg: Running, stream: str, status: str) -> float:
    """Client requests for model "m" on the fake upstream answered with `status`."""
    return sample(
        lg,
        "latchgate_requests_total",
        upstream="fake",
        model="m",
        route="chat",
        stream=stream,
        status=status,
    )


async def test_an_error_body_in_several_pieces_is_judged_whole(
    lg: Running, fake: FakeUpstream
) -> None:
    # The refusal arrives in two TCP writes 50 ms apart: it must still be recognised.
    fake.push(Stream([MAX_TOKENS_REFUSAL[:40], MAX_TOKENS_REFUSAL[40:]], delay=0.05, status=400))
    got = await lg.client().chat.completions.create(model="m", messages=MSG, max_tokens=5)
    assert got.choices[0].message.content == "Hello!"
    first, second = fake.bodies()
    assert first["max_tokens"] == 5 and second["max_completion_tokens"] == 5


@pytest.mark.parametrize(
    "odd",
    [
        {"choices": [{"index": 0, "delta": "x"}]},
        {"choices": [{"index": [1], "delta": {"content": "x"}}]},
        {"choices": ["not a choice"]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": "a", "id": 5, "function": {"name": 5}}]},
                }
            ]
        },
    ],
)
async def test_odd_chunks_never_garble_the_stream(
    lg: Running, fake: FakeUpstream, odd: dict[str, object]
) -> None:
    # What the upstream sends wrong is relayed or reported, but the client's stream stays a
    # well-formed SSE stream that ends properly, and the request is counted once.
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": "ok "}),
                odd,
                chunk({"content": "done"}),
                chunk({}, "stop"),
                "[DONE]",
            ]
        )
    )
    body = {"model": "m", "messages": MSG, "tools": TOOLS, "stream": True}
    async with (
        aiohttp.ClientSession() as s,
        s.post(lg.base_url + "/chat/completions", json=body) as r,
    ):
        assert r.status == 200
        raw = await r.read()
    events = [e for e in raw.split(b"\n\n") if e.startswith(b"data: ")]
    assert events[-1] == b"data: [DONE]" or b'"error"' in events[-1]
    for event in events[:-1]:
        orjson.loads(event[6:])  # every event is one JSON document
    assert b"ok" in raw and b"done" in raw
    assert chat_requests(lg, "true", "200") + chat_requests(lg, "true", "500") == 1


async def test_function_call_fragments_are_content(lg: Running, fake: FakeUpstream) -> None:
    # Legacy function_call deltas reached the client: a drop afterwards must not be resent.
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": None}),
                chunk({"function_call": {"name": "f", "arguments": '{"a"'}}),
            ],
            then="drop",
        )
    )
    stream = await lg.client().chat.completions.create(model="m", messages=MSG, stream=True)
    with pytest.raises(openai.APIError, match="broke mid-stream"):
        async for _ in stream:
            pass
    assert len(fake.bodies()) == 1


async def test_held_output_is_dropped_when_the_attempt_is_retried(
    lg: Running, fake: FakeUpstream
) -> None:
    # JSON asked for in words holds all content; an attempt that ends with nothing relayed is
    # retried, and the client sees one answer, not a half one and then a whole one.
    store = lg.proxy.store
    store.learn(endpoint_id(fake.url, None), "m", Refusal("structured_output"), upstream="fake")
    fake.push(Stream([chunk({"role": "assistant", "content": ""})]), text_stream('{"a": 1}'))
    stream = await lg.client().chat.completions.create(
        model="m",
        messages=MSG,
        stream=True,
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "x",
                "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
            },
        },
    )
    parts = [p async for p in stream]
    content = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
    assert orjson.loads(content) == {"a": 1}
    assert [
        p.choices[0].finish_reason for p in parts if p.choices and p.choices[0].finish_reason
    ] == ["stop"]
    assert len(fake.bodies()) == 2


async def test_a_pretty_printed_error_into_an_open_stream_stays_one_event(
    start_proxy: StartProxy, fake: FakeUpstream
) -> None:
    running = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "first_token_timeout": 0.3,
            "retries": 1,
        }
    )
    pretty = orjson.dumps(
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        option=orjson.OPT_INDENT_2,
    )
    fake.push(
        Stream([chunk({"role": "assistant", "content": ""})], then="hang"),
        Json(pretty, status=429, headers={"retry-after": "30"}),
    )
    stream = await running.client().chat.completions.create(model="m", messages=MSG, stream=True)
    with pytest.raises(openai.APIError, match="Rate limit reached"):
        async for _ in stream:
            pass


async def test_a_client_leaving_during_backoff_is_a_disconnect(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json({"error": {"message": "busy"}}, status=503, headers={"retry-after": "2"}))
    async with aiohttp.ClientSession() as s:
        with pytest.raises(asyncio.TimeoutError):
            async with s.post(
                lg.base_url + "/chat/completions",
                json={"model": "m", "messages": MSG},
                timeout=aiohttp.ClientTimeout(total=0.4),
            ) as r:
                await r.read()
    await asyncio.sleep(0.2)
    assert sample(lg, "latchgate_client_disconnects_total", upstream="fake") == 1
    assert chat_requests(lg, "false", "499") == 1


@pytest.mark.parametrize("path", ["/completions", "/embeddings"])
async def test_plain_routes_have_a_timeout(
    start_proxy: StartProxy, fake: FakeUpstream, path: str
) -> None:
    running = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "request_timeout": 0.3,
            "retries": 0,
        }
    )
    fake.push(Hang(5))
    body = {"model": "m", "prompt": "x"} if path == "/completions" else {"model": "m", "input": "x"}
    async with aiohttp.ClientSession() as s, s.post(running.base_url + path, json=body) as r:
        assert r.status == 504
        assert (await r.json())["error"]["code"] == "upstream_timeout"


async def test_a_whole_answer_to_a_stream_request_is_streamed(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(completion("whole answer")))
    stream = await lg.client().chat.completions.create(model="m", messages=MSG, stream=True)
    parts = [p async for p in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "whole answer"
    assert parts[-1].choices[0].finish_reason == "stop"
    assert len(fake.bodies()) == 1


async def test_errors_latchgate_answers_itself_carry_the_request_id(lg: Running) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions", data=b"{", headers={"x-request-id": "trace-42"}
        ) as r,
    ):
        assert r.status == 400
        assert r.headers["x-latchgate-request-id"] == "trace-42"


async def test_a_slow_reader_is_not_blamed_on_the_upstream(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # The upstream streams ~6 MB at once; the client stops reading for longer than the idle
    # timeout. latchgate's writes wait on the client: that is not the upstream going silent.
    running = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "idle_timeout": 0.3}
    )
    big = chunk({"content": "y" * 4000})
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                *[big] * 1500,
                chunk({}, "stop"),
                "[DONE]",
            ]
        )
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
    body = orjson.dumps({"model": "m", "messages": MSG, "stream": True})
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    await writer.drain()
    await reader.read(1000)
    await asyncio.sleep(1.0)  # the client is busy elsewhere
    data = b""
    async with asyncio.timeout(10):
        while part := await reader.read(1 << 20):
            data += part
            if b"data: [DONE]" in data[-400:] or b'"error"' in data[-800:]:
                break
    writer.close()
    assert b"data: [DONE]" in data[-400:]
    assert sample(running, "latchgate_endpoint_silent_total", upstream="fake", phase="idle") == 0


async def test_json_in_words_stream_keeps_reasoning_and_usage(
    lg: Running, fake: FakeUpstream
) -> None:
    store = lg.proxy.store
    store.learn(endpoint_id(fake.url, None), "m", Refusal("structured_output"), upstream="fake")
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"reasoning_content": "thinking hard"}),
                chunk({"content": 'Sure: {"a": '}),
                chunk({"content": "1}"}),
                chunk({}, "stop", usage=usage),
                "[DONE]",
            ]
        )
    )
    stream = await lg.client().chat.completions.create(
        model="m",
        messages=MSG,
        stream=True,
        stream_options={"include_usage": True},
        response_format={"type": "json_object"},
    )
    parts = [p async for p in stream]
    deltas = [p.choices[0].delta for p in parts if p.choices]
    assert "".join(d.content or "" for d in deltas) == '{"a":1}'
    assert any(getattr(d, "reasoning_content", None) == "thinking hard" for d in deltas)
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 15


async def test_an_upstream_error_after_content_ends_the_stream(
    lg: Running, fake: FakeUpstream
) -> None:
    error = {"error": {"message": "boom: backend crashed", "type": "server_error", "code": 500}}
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": "par"}), error, chunk({"content": "never"})],
            then="hang",
        )
    )
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions", json={"model": "m", "messages": MSG, "stream": True}
        ) as r,
    ):
        raw = await r.read()
    assert b"boom: backend crashed" in raw
    assert b"[DONE]" not in raw and b"never" not in raw  # it ended at the error
    assert chat_requests(lg, "true", "500") == 1


async def test_a_retry_gets_its_own_first_token_limit(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    running = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "idle_timeout": 0.3,
            "first_token_timeout": 5,
            "retries": 1,
        }
    )
    fragment = chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a"'},
                }
            ]
        }
    )
    # Attempt 1: a held tool-call fragment, then silence (idle fires, nothing was relayed).
    # Attempt 2: its first token comes 0.8 s after its role chunk: inside the 5 s limit.
    rest = (
        b"".join(
            b"data: " + orjson.dumps(c) + b"\n\n"
            for c in (chunk({"content": "second"}), chunk({}, "stop"))
        )
        + b"data: [DONE]\n\n"
    )
    fake.push(
        Stream([chunk({"role": "assistant", "content": None}), fragment], then="hang"),
        Stream([chunk({"role": "assistant", "content": ""}), rest], delay=0.8),
    )
    stream = await running.client().chat.completions.create(
        model="m", messages=MSG, tools=TOOLS, stream=True
    )
    text = "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])
    assert text == "second"
    assert len(fake.bodies()) == 2
