"""The idle watchdog, request timeouts and usage through the real HTTP path (BEHAVIOUR.md 7).

An upstream silent before its first token is retried; one that stalls mid-stream ends the
client's stream with an error the SDK raises; a slow but steady stream completes; a timeout of 0
waits. Usage is asked of the upstream on every stream and forwarded only to clients that asked.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Hang, Json, Stream, chunk, completion, text_stream

MODEL = "fake-model"
MSG = [{"role": "user", "content": "Hi"}]


async def start(start_proxy: StartProxy, fake: FakeUpstream, **cfg: Any) -> Running:
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic", **cfg})


def sample(lg: Running, name: str, labels: dict[str, str]) -> float:
    return lg.proxy.metrics.registry.get_sample_value(name, labels) or 0.0


def silent(lg: Running, phase: str) -> float:
    return sample(lg, "latchgate_endpoint_silent_total", {"upstream": "fake", "phase": phase})


def tokens(lg: Running, kind: str) -> float:
    return sample(lg, "latchgate_tokens_total", {"upstream": "fake", "model": MODEL, "kind": kind})


async def stream_text(lg: Running, **kw: Any) -> str:
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True,
                                                       **kw)
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


# -- before the first token --------------------------------------------------------------------

async def test_silent_before_headers_is_retried(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.3)
    fake.push(Hang(5))
    t0 = time.monotonic()
    assert await stream_text(lg) == "Hello!"
    assert time.monotonic() - t0 < 2.0
    assert len(fake.requests) == 2
    assert silent(lg, "first_token") == 1
    assert sample(lg, "latchgate_retries_total", {"upstream": "fake", "reason": "silent"}) == 1


async def test_silent_after_headers_before_content_is_retried(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.3)
    # The role chunk arrives at once but carries no content: the first-token clock keeps running.
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "late"})],
                     delay=3.0))
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in raw.parse() if c.choices])
    assert text == "Hello!"
    assert len(fake.requests) == 2
    assert silent(lg, "first_token") == 1


async def test_silent_after_a_role_chunk_every_time_ends_the_opened_stream(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    """The client's stream is already open (a role chunk): the final error goes on it as SSE."""
    lg = await start(start_proxy, fake, first_token_timeout=0.2, retries=1)
    role_then_hang = Stream([chunk({"role": "assistant", "content": ""})], then="hang")
    fake.push(role_then_hang, role_then_hang)
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    with pytest.raises(openai.APIError) as info:
        async for _ in stream:
            pass
    assert info.value.message == (
        "The upstream fake went silent before the first token (silent for 0.2 s) after 2 "
        "attempt(s). Check that the server is up, or raise its timeouts or retry budget."
    )
    assert len(fake.requests) == 2
    assert silent(lg, "first_token") == 2


async def test_a_late_first_token_is_retried(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.3)
    fake.push(Stream([chunk({"content": "late"}), chunk({}, "stop"), "[DONE]"], first_delay=3.0))
    assert await stream_text(lg) == "Hello!"
    assert len(fake.requests) == 2


async def test_silent_every_time_is_504(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.2, retries=1)
    fake.push(Hang(5), Hang(5))
    with pytest.raises(openai.APIStatusError) as info:
        await stream_text(lg)
    assert info.value.status_code == 504
    assert info.value.code == "upstream_timeout"
    assert info.value.body["message"] == (  # type: ignore[index]
        "The upstream fake went silent before the first token (silent for 0.2 s) after 2 "
        "attempt(s). Check that the server is up, or raise its timeouts or retry budget."
    )
    assert silent(lg, "first_token") == 2


async def test_first_token_timeout_defaults_to_five_idle_timeouts(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, idle_timeout=0.1)
    fake.push(Stream([chunk({"content": "slow"}), chunk({}, "stop"), "[DONE]"], first_delay=0.3))
    assert await stream_text(lg) == "slow"  # 0.3 s: over idle, under 5 x idle
    fake.push(Hang(5))
    assert await stream_text(lg) == "Hello!"  # silent past 0.5 s: retried
    assert silent(lg, "first_token") == 1


# -- mid-stream --------------------------------------------------------------------------------

async def test_a_stall_mid_stream_ends_with_an_error(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, idle_timeout=0.3)
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
                      chunk({"content": "lo"})], then="hang"))
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    got: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(openai.APIError) as info:
        async for c in stream:
            got.append(c.choices[0].delta.content or "")
    elapsed = time.monotonic() - t0
    assert "".join(got) == "Hello"
    assert info.value.message == (
        "The upstream fake went silent for 0.3 s mid-stream; the answer is incomplete. Retry "
        "the request, or raise idle_timeout for this upstream."
    )
    assert 0.25 <= elapsed < 1.5
    assert len(fake.requests) == 1  # never resent after content
    assert silent(lg, "idle") == 1
    assert sample(lg, "latchgate_requests_total", {"upstream": "fake", "model": MODEL,
                                                   "route": "chat", "stream": "true",
                                                   "status": "504"}) == 1


async def test_a_slow_but_steady_stream_completes(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, idle_timeout=0.4)
    fake.push(text_stream("a", "b", "c", "d", delay=0.15))  # 7 events, about 0.9 s in all
    t0 = time.monotonic()
    assert await stream_text(lg) == "abcd"
    assert time.monotonic() - t0 > 0.4  # longer than the idle timeout, in total
    assert silent(lg, "idle") == 0 and silent(lg, "first_token") == 0


async def test_zero_first_token_timeout_waits(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0, idle_timeout=0.2)
    fake.push(text_stream("late", first_delay=1.5))
    assert await stream_text(lg) == "late"
    assert len(fake.requests) == 1


async def test_zero_idle_timeout_waits(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.3, idle_timeout=0)
    fake.push(Stream([chunk({"content": "a"}), chunk({"content": "b"}, "stop"), "[DONE]"],
                     delay=0.6))
    assert await stream_text(lg) == "ab"
    assert silent(lg, "idle") == 0


# -- whole requests ----------------------------------------------------------------------------

async def test_whole_request_timeout_is_504_after_retries(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, request_timeout=0.3, retries=1)
    fake.push(Hang(5), Json(completion("too late"), delay=5))
    t0 = time.monotonic()
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert time.monotonic() - t0 < 2.0
    assert info.value.status_code == 504
    assert info.value.code == "upstream_timeout"
    assert info.value.body["message"] == (  # type: ignore[index]
        "The upstream fake did not answer in time (no complete answer within 0.3 s) after 2 "
        "attempt(s). Check that the server is up, or raise its timeouts or retry budget."
    )
    assert len(fake.requests) == 2
    assert sample(lg, "latchgate_retries_total", {"upstream": "fake", "reason": "timeout"}) == 1


async def test_whole_request_timeout_then_success(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, request_timeout=0.3)
    fake.push(Hang(5))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "Hello!"


async def test_whole_requests_ignore_the_idle_timeout(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # Idle time is between stream chunks; a whole answer has none. (The first-token timeout does
    # apply to whole requests: see the next test.)
    lg = await start(start_proxy, fake, first_token_timeout=0, idle_timeout=0.1,
                     request_timeout=0)
    fake.push(Json(completion("slow"), delay=0.5))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "slow"
    assert len(fake.requests) == 1


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/embeddings"])
async def test_a_whole_request_to_a_silent_upstream_is_retried_then_504(
    fake: FakeUpstream, start_proxy: StartProxy, path: str
) -> None:
    # No byte of the answer within the first-token timeout: retried (budget 1), then 504, long
    # before request_timeout (600 s).
    lg = await start(start_proxy, fake, first_token_timeout=0.2, retries=1)
    fake.push(Hang(), Hang())
    async with aiohttp.ClientSession() as s:
        body = {"model": MODEL, "messages": MSG, "prompt": "Hi", "input": "Hi"}
        async with s.post(lg.base_url + path, json=body) as resp:
            got = await resp.json()
            assert resp.status == 504, got
    assert got["error"]["code"] == "upstream_timeout"
    assert len(fake.requests) == 2
    assert silent(lg, "first_token") == 2


async def test_a_whole_request_that_starts_answering_in_time_is_not_cut(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, first_token_timeout=0.5)
    fake.push(Json(completion("in time"), delay=0.1))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "in time"
    assert len(fake.requests) == 1


# -- usage -------------------------------------------------------------------------------------

async def test_usage_is_asked_for_but_not_forwarded_unasked(
    lg: Running, fake: FakeUpstream
) -> None:
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    chunks = [c async for c in stream]
    assert fake.bodies()[0]["stream_options"] == {"include_usage": True}
    assert [c.usage for c in chunks] == [None] * len(chunks)
    assert all(c.choices for c in chunks)  # the usage-only chunk was held back
    assert (tokens(lg, "prompt"), tokens(lg, "completion")) == (10, 3)


async def test_usage_is_forwarded_to_a_client_that_asked(lg: Running, fake: FakeUpstream) -> None:
    stream = await lg.client().chat.completions.create(
        model=MODEL, messages=MSG, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (10, 3)
    assert fake.bodies()[0]["stream_options"] == {"include_usage": True}


async def test_client_stream_options_are_kept(lg: Running, fake: FakeUpstream) -> None:
    stream = await lg.client().chat.completions.create(
        model=MODEL, messages=MSG, stream=True,
        stream_options={"include_usage": False, "include_obfuscation": False},
    )
    chunks = [c async for c in stream]
    assert fake.bodies()[0]["stream_options"] == {
        "include_usage": True, "include_obfuscation": False}
    assert all(c.usage is None for c in chunks)


async def test_usage_on_a_content_chunk_is_stripped_unasked(
    lg: Running, fake: FakeUpstream
) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    fake.push(Stream([chunk({"content": "ok"}), chunk({}, "stop", usage=usage), "[DONE]"]))
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    chunks = [c async for c in stream]
    assert [c.choices[0].finish_reason for c in chunks] == [None, "stop"]
    assert all(c.usage is None for c in chunks)
    assert (tokens(lg, "prompt"), tokens(lg, "completion")) == (7, 2)


async def test_the_last_usage_report_wins(lg: Running, fake: FakeUpstream) -> None:
    """llama.cpp reports cumulatively: counting each report would count tokens twice."""
    fake.push(Stream([
        chunk({"content": "a"}, usage={"prompt_tokens": 5, "completion_tokens": 1}),
        chunk({"content": "b"}, usage={"prompt_tokens": 5, "completion_tokens": 2}),
        chunk({}, "stop"), "[DONE]"]))
    assert await stream_text(lg) == "ab"
    assert (tokens(lg, "prompt"), tokens(lg, "completion")) == (5, 2)


async def test_whole_usage_with_cached_tokens_is_counted(lg: Running, fake: FakeUpstream) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
             "prompt_tokens_details": {"cached_tokens": 64}}
    fake.push(Json(completion(usage=usage)))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.usage is not None and reply.usage.total_tokens == 120
    assert "stream_options" not in fake.bodies()[0]
    assert (tokens(lg, "prompt"), tokens(lg, "completion"), tokens(lg, "cached")) == (100, 20, 64)


# -- plain routes, a slow client, and a retried attempt's own first-token limit ------------------

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


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
    idle = {"upstream": "fake", "phase": "idle"}
    assert sample(running, "latchgate_endpoint_silent_total", idle) == 0


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
