"""The transparent proxy: what the client sends reaches the upstream, what it answers comes back."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from tests.conftest import Running, StartProxy
from tests.fakeupstream import Drop, FakeUpstream, Json, Stream, chunk, completion, text_stream

MSG = [{"role": "user", "content": "Hi"}]

FIDELITY_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"messages": MSG}),
    (
        "tools",
        {
            "messages": MSG,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "city": {
                                    "type": "string",
                                    "format": "hostname",
                                    "pattern": "^(?=a).*$",
                                }
                            },
                            "required": ["city"],
                        },
                    },
                }
            ],
            "tool_choice": "auto",
        },
    ),
    (
        "image parts",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 50},
                        },
                    ],
                }
            ]
        },
    ),
    (
        "unknown fields",
        {
            "messages": MSG,
            "top_k": 40,
            "min_p": 0.05,
            "cache_prompt": True,
            "x_custom": {"nested": [1, 2, {"deep": None}]},
        },
    ),
    (
        "unicode",
        {"messages": [{"role": "user", "content": "Grüße, 你好, emoji 🦙, rtl שלום, \u0000 nul"}]},
    ),
    (
        "sampling",
        {
            "messages": MSG,
            "temperature": 0.3,
            "top_p": 0.9,
            "max_tokens": 55,
            "seed": 7,
            "stop": ["\n\n"],
            "n": 1,
        },
    ),
    ("10 MB message", {"messages": [{"role": "user", "content": "x" * (10 * 1024 * 1024)}]}),
]


@pytest.mark.parametrize(
    ("name", "extra"), FIDELITY_REQUESTS, ids=[n for n, _ in FIDELITY_REQUESTS]
)
async def test_request_reaches_upstream_unchanged(
    lg: Running, fake: FakeUpstream, name: str, extra: dict[str, Any]
) -> None:
    client = lg.client()
    known = {
        k: v
        for k, v in extra.items()
        if k
        in (
            "messages",
            "tools",
            "tool_choice",
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "stop",
            "n",
        )
    }
    unknown = {k: v for k, v in extra.items() if k not in known}
    result = await client.chat.completions.create(model="fake-model", extra_body=unknown, **known)
    assert result.choices[0].message.content == "Hello!"
    sent = fake.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.json == {"model": "fake-model", **extra}


async def test_unchanged_request_is_forwarded_byte_for_byte(
    lg: Running, fake: FakeUpstream
) -> None:
    raw = b'{"model":"fake-model",  "messages":[{"role":"user","content":"Hi"}], "zz":1.50}'
    assert await _post_raw(lg, raw) == 200
    assert fake.requests[-1].raw == raw


async def _post_raw(lg: Running, raw: bytes) -> int:
    """POST these exact bytes as a chat request; the status (the body is read to its end)."""
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions",
            data=raw,
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        await r.read()
        return r.status


async def test_streamed_request_keeps_the_client_s_bytes_and_adds_only_stream_options(
    lg: Running, fake: FakeUpstream
) -> None:
    # Odd spacing and a number form orjson would write differently: re-serialising would show.
    raw = (
        b'{"model":"fake-model",  "messages":[{"role":"user","content":"Hi"}], '
        b'"zz":1.50, "stream":true} \n'
    )
    assert await _post_raw(lg, raw) == 200
    assert fake.requests[-1].raw == raw.rstrip()[:-1] + b',"stream_options":{"include_usage":true}}'


RESPONSES: list[tuple[str, dict[str, Any]]] = [
    (
        "reasoning and timings",
        completion("4", reasoning_content="2+2 is 4")
        | {"timings": {"prompt_n": 16, "predicted_ms": 12.5}, "system_fingerprint": "b0-unknown"},
    ),
    (
        "refusal and extra",
        completion("no", refusal=None) | {"service_tier": "default", "x_extra": [1, {"a": None}]},
    ),
    ("unicode", completion("Grüße 🦙 你好")),
]


@pytest.mark.parametrize(("name", "body"), RESPONSES, ids=[n for n, _ in RESPONSES])
async def test_response_relayed_intact(
    lg: Running, fake: FakeUpstream, name: str, body: dict[str, Any]
) -> None:
    fake.push(Json(body, headers={"x-request-id": "req-upstream-1", "openai-processing-ms": "12"}))
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions", json={"model": "fake-model", "messages": MSG}
        ) as r,
    ):
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.headers["x-request-id"] == "req-upstream-1"
        assert r.headers["openai-processing-ms"] == "12"
        assert r.headers["x-latchgate-request-id"]
        assert orjson.loads(await r.read()) == body


async def test_sdk_whole_and_sync_client(lg: Running) -> None:
    client = lg.sync_client()
    result = await asyncio.to_thread(
        client.chat.completions.create, model="fake-model", messages=MSG
    )
    assert result.choices[0].message.content == "Hello!"
    assert result.usage is not None and result.usage.total_tokens == 13


async def test_stream_relayed_event_by_event(lg: Running, fake: FakeUpstream) -> None:
    fake.push(text_stream("Hel", "lo", " world", delay=0.05))
    client = lg.client()
    stream = await client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    arrivals: list[tuple[float, str]] = []
    async for part in stream:
        if part.choices and part.choices[0].delta.content:
            arrivals.append((time.monotonic(), part.choices[0].delta.content))
    assert "".join(t for _, t in arrivals) == "Hello world"
    # each piece arrives on its own, ~50 ms apart: nothing was batched
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals)]
    assert len(arrivals) == 3 and all(g > 0.03 for g in gaps)


async def test_stream_usage_only_when_asked(lg: Running, fake: FakeUpstream) -> None:
    client = lg.client()
    stream = await client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    parts = [p async for p in stream]
    assert all(p.usage is None for p in parts)
    # latchgate asked the upstream for usage anyway, to count tokens
    assert fake.requests[-1].json["stream_options"] == {"include_usage": True}
    stream = await client.chat.completions.create(
        model="fake-model", messages=MSG, stream=True, stream_options={"include_usage": True}
    )
    parts = [p async for p in stream]
    assert parts[-1].usage is not None and parts[-1].usage.completion_tokens == 3


async def test_openai_null_usage_on_every_chunk(lg: Running, fake: FakeUpstream) -> None:
    # OpenAI's streams that asked for usage carry `"usage":null` on every chunk, then a usage
    # chunk: the null ones are ordinary chunks, the report is counted and shown only when asked.
    def openai_stream() -> Stream:
        events: list[Any] = [{**c, "usage": None} for c in text_stream("Hel", "lo").events[:-2]]
        return Stream([*events, *text_stream("Hel", "lo").events[-2:]])

    for asked in (False, True):
        fake.push(openai_stream())
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if asked else {}
        stream = await lg.client().chat.completions.create(
            model="fake-model", messages=MSG, stream=True, **extra
        )
        parts = [p async for p in stream]
        assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "Hello"
        reports = [p.usage for p in parts if p.usage is not None]
        assert [u.completion_tokens for u in reports] == ([2] if asked else [])
        assert parts[-1].choices == [] if asked else parts[-1].choices[0].finish_reason == "stop"
    labels = {"upstream": "fake", "model": "fake-model", "kind": "completion"}
    assert lg.proxy.metrics.registry.get_sample_value("latchgate_tokens_total", labels) == 4


async def test_sync_stream(lg: Running) -> None:
    client = lg.sync_client()

    def run() -> str:
        stream = client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
        return "".join(p.choices[0].delta.content or "" for p in stream if p.choices)

    assert await asyncio.to_thread(run) == "Hello!"


async def test_stream_without_done_or_finish_raises(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "partial"})]))
    client = lg.client()
    stream = await client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    seen = []
    with pytest.raises(openai.APIError, match="without finishing"):
        async for part in stream:
            seen.append(part.choices[0].delta.content if part.choices else None)
    assert "partial" in seen


async def test_stream_broken_mid_way_raises(lg: Running, fake: FakeUpstream) -> None:
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": ""}), chunk({"content": "par"})], then="drop"
        )
    )
    client = lg.client()
    stream = await client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass


async def test_stream_finish_without_done_is_complete(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": "ok"}), chunk({}, "stop")]))
    client = lg.client()
    stream = await client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    parts = [p async for p in stream]
    assert parts[-1].choices[0].finish_reason == "stop"


async def test_client_disconnect_cancels_upstream(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": "a"})] * 2, then="hang"))
    async with aiohttp.ClientSession() as s:
        resp = await s.post(
            lg.base_url + "/chat/completions",
            json={"model": "fake-model", "messages": MSG, "stream": True},
        )
        await resp.content.readline()
        closed = time.monotonic()
        resp.close()
    for _ in range(100):
        if fake.cancelled_at:
            break
        await asyncio.sleep(0.005)
    assert fake.cancelled_at, "the upstream request was not cancelled"
    assert fake.cancelled_at[0] - closed < 0.1


async def test_upstream_error_passed_on(lg: Running, fake: FakeUpstream) -> None:
    body = {
        "error": {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    fake.push(Json(body, status=401))
    with pytest.raises(openai.AuthenticationError) as info:
        await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert info.value.status_code == 401
    assert info.value.body == body["error"]


async def test_string_error_wrapped_in_openai_shape(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json({"error": "model 'x' not found"}, status=404))
    with pytest.raises(openai.NotFoundError) as info:
        await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert info.value.body["message"] == "model 'x' not found"  # type: ignore[index]


async def test_unreachable_upstream_is_502(start_proxy: StartProxy) -> None:
    running = await start_proxy(
        {"name": "gone", "base_url": "http://127.0.0.1:9/v1", "kind": "generic", "retries": 0}
    )
    with pytest.raises(openai.APIStatusError) as info:
        await running.client().chat.completions.create(model="m", messages=MSG)
    assert info.value.status_code == 502
    assert "could not be reached" in str(info.value.message)


async def test_upstream_dropping_connection_is_502(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Drop(), Drop(), Drop())
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert info.value.status_code == 502


async def test_routes_without_v1_prefix(lg: Running) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.post(
            lg.url + "/chat/completions", json={"model": "fake-model", "messages": MSG}
        ) as r:
            assert r.status == 200
        async with s.get(lg.url + "/models") as r:
            assert [m["id"] for m in (await r.json())["data"]] == ["fake-model"]


async def test_completions_and_embeddings_forwarded(lg: Running, fake: FakeUpstream) -> None:
    client = lg.client()
    done = await client.completions.create(model="fake-model", prompt="Say hi", max_tokens=5)
    assert done.choices[0].text == "Hello!"
    assert fake.requests[-1].json == {"model": "fake-model", "prompt": "Say hi", "max_tokens": 5}
    emb = await client.embeddings.create(model="fake-model", input="hi", encoding_format="float")
    assert emb.data[0].embedding == [0.1, 0.2]
    assert fake.requests[-1].path == "/v1/embeddings"


async def test_models_union_and_lookup(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    other = FakeUpstream(models=["other-a", "shared"])
    await other.start()
    fake.models = ["fake-model", "shared"]
    try:
        running = await start_proxy(
            {
                "name": "first",
                "base_url": fake.url,
                "kind": "generic",
                "models": ["fake-model", "shared"],
                "context_length": {"fake-model": 32768},
            },
            {"name": "second", "base_url": other.url, "kind": "generic", "models": ["other-*"]},
        )
        client = running.client()
        models = await client.models.list()
        ids = sorted(m.id for m in models.data)
        assert ids == ["fake-model", "other-a", "shared"]
        one = await client.models.retrieve("other-a")
        assert one.owned_by == "fake"
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("nope")
        with pytest.raises(openai.NotFoundError) as info:
            await client.chat.completions.create(model="unknown", messages=MSG)
        assert info.value.body["code"] == "model_not_found"  # type: ignore[index]
        await client.chat.completions.create(model="other-a", messages=MSG)
        assert other.requests[-1].json["model"] == "other-a"
    finally:
        await other.close()


async def test_health_and_readiness(lg: Running, start_proxy: StartProxy) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(lg.url + "/healthz") as r:
            assert r.status == 200
        async with s.get(lg.url + "/readyz") as r:
            assert r.status == 200
            assert (await r.json())["upstreams"]["fake"]["ready"] is True
        down = await start_proxy({"name": "gone", "base_url": "http://127.0.0.1:9/v1"})
        async with s.get(down.url + "/readyz") as r:
            assert r.status == 503
            assert (await r.json())["upstreams"]["gone"]["ready"] is False


async def test_client_keys_required_when_set(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    running = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, client_keys=["k-123"]
    )
    with pytest.raises(openai.AuthenticationError):
        await running.client(api_key="wrong").chat.completions.create(
            model="fake-model", messages=MSG
        )
    ok = await running.client(api_key="k-123").chat.completions.create(
        model="fake-model", messages=MSG
    )
    assert ok.choices[0].message.content == "Hello!"
    # the client's key is never forwarded to an upstream that does not ask for it
    assert "Authorization" not in fake.requests[-1].headers


async def test_upstream_key_and_client_auth_forwarding(
    fake: FakeUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-upstream-secret")
    running = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "api_key_env": "FAKE_KEY"}
    )
    await running.client(api_key="client-key").chat.completions.create(
        model="fake-model", messages=MSG
    )
    assert fake.requests[-1].headers["Authorization"] == "Bearer sk-upstream-secret"
    passing = await start_proxy(
        {"name": "pass", "base_url": fake.url, "kind": "generic", "forward_client_auth": True}
    )
    await passing.client(api_key="client-key").chat.completions.create(
        model="fake-model", messages=MSG
    )
    assert fake.requests[-1].headers["Authorization"] == "Bearer client-key"


async def test_upstream_cookies_are_not_kept_between_clients(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # One pooled session serves every client: a cookie one answer sets must not ride along on
    # the next client's request (a load balancer's session cookie, say). By host name: aiohttp
    # keeps no cookies for a bare IP address anyway.
    base = fake.url.replace("127.0.0.1", "localhost")
    lg = await start_proxy({"name": "fake", "base_url": base, "kind": "generic"})
    fake.push(Json(completion(), headers={"Set-Cookie": "session=alice; Path=/"}))
    await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert "Cookie" not in fake.requests[-1].headers
    # latchgate names itself to the upstream rather than passing on aiohttp's default
    assert fake.requests[-1].headers["User-Agent"].startswith("latchgate/")


async def test_error_event_before_content_is_judged_like_an_http_error(
    lg: Running, fake: FakeUpstream
) -> None:
    overflow = {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
            "message": "request (5000 tokens) exceeds the available "
            "context size (4096 tokens), try increasing it",
        }
    }
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), overflow, "[DONE]"]))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    with pytest.raises(openai.APIError) as info:
        async for _ in stream:
            pass
    assert info.value.code == "context_length_exceeded"
    assert "exceeds the available context size" in info.value.message
    assert len(fake.bodies()) == 1  # mapped, not retried
    # a transient one is retried on the same client stream
    busy = {"error": {"code": 503, "type": "unavailable_error", "message": "server busy"}}
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), busy]), text_stream("fine"))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    text = "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])
    assert text == "fine"


async def test_fast_path_relays_text_that_looks_like_keys(lg: Running, fake: FakeUpstream) -> None:
    tricky = ['{"error": 1}', ' "usage": 2,', ' "finish_reason": "stop"', " done"]
    fake.push(text_stream(*tricky, usage=False))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    parts = [p async for p in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "".join(tricky)
    assert [p.choices[0].finish_reason for p in parts if p.choices][-1] == "stop"
    assert all(p.usage is None for p in parts)


async def test_models_listing_shows_the_window_an_entry_carries(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # llama.cpp lists its per-slot window under meta.n_ctx; vLLM as max_model_len.
    fake.routes["/v1/models"] = Json(
        {
            "object": "list",
            "data": [
                {"id": "llama", "object": "model", "meta": {"n_ctx": 2048, "n_ctx_train": 32768}},
                {"id": "vllm", "object": "model", "max_model_len": 16384},
                {"id": "plain", "object": "model"},
            ],
        }
    )
    running = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"})
    listed = {
        m.id: getattr(m, "context_length", None)
        for m in (await running.client().models.list()).data
    }
    assert listed == {"llama": 2048, "vllm": 16384, "plain": None}


async def test_cached_tokens_from_every_server_s_report(lg: Running, fake: FakeUpstream) -> None:
    def cached() -> float:
        return (
            lg.proxy.metrics.registry.get_sample_value(
                "latchgate_tokens_total",
                {"upstream": "fake", "model": "fake-model", "kind": "cached"},
            )
            or 0.0
        )

    usage = {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53}
    fake.push(Json(completion(usage={**usage, "prompt_tokens_details": {"cached_tokens": 7}})))
    await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert cached() == 7
    fake.push(Json(completion(usage={**usage, "prompt_cache_hit_tokens": 11})))  # DeepSeek
    await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert cached() == 18
    fake.push(Json(completion(usage=usage) | {"timings": {"cache_n": 20}}))  # llama.cpp
    await lg.client().chat.completions.create(model="fake-model", messages=MSG)
    assert cached() == 38


def _one_read_stream(*, comment_at: int | None = None) -> bytes:
    """A whole answer as one write, the way an instant server or a fast local model sends it."""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in ("Hel", "lo", ' "usage" [x]', "!")]
    events.append(chunk({}, "stop"))
    raw = [b"data: " + orjson.dumps(e) + b"\n\n" for e in events]
    if comment_at is not None:
        raw.insert(comment_at, b": keep-alive\n\n")
    usage = chunk(choices=[], usage={"prompt_tokens": 4, "completion_tokens": 4})
    raw.append(b"data: " + orjson.dumps(usage) + b"\n\ndata: [DONE]\n\n")
    return b"".join(raw)


@pytest.mark.parametrize("comment_at", [None, 3])
async def test_stream_in_one_read_is_relayed_whole_and_unchanged(
    lg: Running, fake: FakeUpstream, comment_at: int | None
) -> None:
    raw = _one_read_stream(comment_at=comment_at)
    fake.push(Stream([raw]))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True, stream_options={"include_usage": True}
    )
    parts = [p async for p in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == (
        'Hello "usage" [x]!'
    )
    assert [p.choices[0].finish_reason for p in parts if p.choices][-1] == "stop"
    assert parts[-1].usage is not None and parts[-1].usage.completion_tokens == 4

    # On the wire: the content events byte for byte as the server sent them, then usage (asked
    # for) and [DONE]; the comment, which carries nothing, is not relayed.
    fake.push(Stream([raw]))
    async with aiohttp.ClientSession() as s:
        resp = await s.post(
            lg.base_url + "/chat/completions",
            json={"model": "fake-model", "messages": MSG, "stream": True},
        )
        got = await resp.read()
    sent = raw.replace(b": keep-alive\n\n", b"")
    usage_at = sent.index(b'data: {"id"', sent.index(b'"finish_reason":"stop"'))
    assert got.startswith(sent[:usage_at])  # content relayed unchanged
    assert got.endswith(b"\n\ndata: [DONE]\n\n")
    assert b'"usage"' not in got[usage_at:]  # not asked for: the usage chunk is not relayed


async def test_upstream_connection_is_reused_when_the_body_ends_after_done(
    lg: Running, fake: FakeUpstream
) -> None:
    # llama.cpp and others send `data: [DONE]` and end the chunked body in a later write. The
    # client must have its whole answer at [DONE], and the upstream connection must go back to
    # the pool rather than be closed (a new TCP, or TLS, handshake for every stream otherwise).
    body = {"model": "fake-model", "messages": MSG, "stream": True}
    async with aiohttp.ClientSession() as s:
        for _ in range(3):
            fake.push(text_stream("a", "b", end_delay=0.3))
            t0 = time.monotonic()
            async with s.post(lg.base_url + "/chat/completions", json=body) as r:
                got = await r.read()
            assert got.endswith(b"data: [DONE]\n\n")
            assert time.monotonic() - t0 < 0.2  # not held until the server ends its body
            await asyncio.sleep(0.4)  # the server ends it; the connection goes back to the pool
    peers = {r.peer for r in fake.requests[-3:]}
    assert len(peers) == 1, peers


async def test_a_body_never_ended_after_done_costs_the_client_nothing(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(text_stream("a", then="hang"))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    text = "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])
    assert text == "a"
    # the next request is answered at once, on another connection
    fake.push(text_stream("b"))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    assert "".join([p.choices[0].delta.content or "" async for p in stream if p.choices]) == "b"


async def test_an_error_event_in_a_one_read_answer_is_still_judged_on_its_own(
    lg: Running, fake: FakeUpstream
) -> None:
    # The whole reply in one write (role chunk, error event, [DONE]): the role chunk must not be
    # relayed unread as if content had started, or the error could no longer be retried.
    def event(body: Any) -> bytes:
        return b"data: " + orjson.dumps(body) + b"\n\n"

    busy = {"error": {"code": 503, "type": "unavailable_error", "message": "server busy"}}
    one_read = (
        event(chunk({"role": "assistant", "content": ""})) + event(busy) + b"data: [DONE]\n\n"
    )
    fake.push(Stream([one_read]), Stream([_one_read_stream()]))
    stream = await lg.client().chat.completions.create(
        model="fake-model", messages=MSG, stream=True
    )
    text = "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])
    assert text == 'Hello "usage" [x]!'
    assert len(fake.bodies()) == 2  # retried, and the retry's whole answer relayed
