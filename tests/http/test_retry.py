"""Retries through the real HTTP path (issue 6; BEHAVIOUR.md 6).

Transient upstream errors are retried with a notice, honouring the server's own wait; errors that
will not clear go back at once; a loading model is polled without spending the budget; nothing is
resent once content reached the client.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from proxy.state.latches import Refusal, endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import Drop, FakeUpstream, Json, Stream, chunk, text_stream

MODEL = "fake-model"
MSG = [{"role": "user", "content": "Hi"}]
UNAVAILABLE = {"error": {"message": "Service Unavailable", "type": "server_error", "code": 503}}
LOADING = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
QUOTA = (
    b'{"error":{"message":"You exceeded your current quota, please check your plan and billing '
    b'details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)
# Waits short enough for the suite: the server's own wait is honoured instead of backoff.
SOON = {"retry-after-ms": "10"}


def retries(lg: Running, reason: str) -> float:
    value = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_retries_total", {"upstream": "fake", "reason": reason}
    )
    return value or 0.0


async def start(start_proxy: StartProxy, fake: FakeUpstream, **cfg: Any) -> Running:
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic", **cfg})


async def create_raw(lg: Running, **kw: Any) -> Any:
    return await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, **kw  # type: ignore[arg-type]
    )


async def test_503_then_200_succeeds_after_one_retry_with_a_notice(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(UNAVAILABLE, status=503))
    raw = await create_raw(lg)
    assert raw.parse().choices[0].message.content == "Hello!"
    notices = raw.headers.get_list("x-latchgate-notice")
    assert len(notices) == 1
    assert re.fullmatch(
        r"Retry 1 of 2 on fake after status_5xx \(waiting 0\.(2[5-9]|[34]\d|50) s\)\.", notices[0]
    ), notices
    assert len(fake.requests) == 2
    assert fake.bodies()[0] == fake.bodies()[1]  # the same request, resent as it was
    assert retries(lg, "status_5xx") == 1


async def test_streamed_503_then_200(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(UNAVAILABLE, status=503, headers=SOON))
    raw = await create_raw(lg, stream=True)
    assert raw.headers.get_list("x-latchgate-notice") == [
        "Retry 1 of 2 on fake after status_5xx (waiting 0.01 s)."
    ]
    text = "".join([c.choices[0].delta.content or "" async for c in raw.parse() if c.choices])
    assert text == "Hello!"
    assert len(fake.requests) == 2


async def test_retry_after_seconds_is_waited(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(UNAVAILABLE, status=503, headers={"Retry-After": "1"}))
    t0 = time.monotonic()
    raw = await create_raw(lg)
    elapsed = time.monotonic() - t0
    assert raw.parse().choices[0].message.content == "Hello!"
    assert 0.95 <= elapsed < 2.5
    assert raw.headers.get_list("x-latchgate-notice") == [
        "Retry 1 of 2 on fake after status_5xx (waiting 1.00 s)."
    ]


async def test_retry_after_ms_wins_over_retry_after(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json({"error": {"message": "Rate limit reached. Please try again in 20s."}},
                   status=429, headers={"retry-after-ms": "300", "Retry-After": "20"}))
    t0 = time.monotonic()
    raw = await create_raw(lg)
    elapsed = time.monotonic() - t0
    assert 0.28 <= elapsed < 1.5
    assert raw.headers.get_list("x-latchgate-notice") == [
        "Retry 1 of 2 on fake after status_429 (waiting 0.30 s)."
    ]
    assert retries(lg, "status_429") == 1


async def test_a_wait_in_the_body_is_honoured(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json({"error": {"message": "Rate limit reached for gpt-4o on tokens per min "
                              "(TPM): Limit 30000, Used 14567, Requested 24754. Please try again "
                              "in 0.2s.", "type": "tokens", "code": "rate_limit_exceeded"}},
                   status=429))
    raw = await create_raw(lg)
    assert raw.headers.get_list("x-latchgate-notice") == [
        "Retry 1 of 2 on fake after status_429 (waiting 0.20 s)."
    ]


async def test_a_wait_longer_than_the_cap_is_returned(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(UNAVAILABLE, status=503, headers={"Retry-After": "30"}))
    with pytest.raises(openai.InternalServerError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert info.value.status_code == 503
    assert info.value.response.headers["retry-after"] == "30"  # the client may wait itself
    assert len(fake.requests) == 1


async def test_x_should_retry_false_is_final(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(UNAVAILABLE, status=503, headers={"x-should-retry": "false"}))
    with pytest.raises(openai.InternalServerError):
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert len(fake.requests) == 1


async def test_x_should_retry_true_retries_a_4xx(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json({"error": {"message": "Conflict, try later."}}, status=400,
                   headers={"x-should-retry": "true", **SOON}))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "Hello!"
    assert retries(lg, "status_4xx") == 1


async def test_insufficient_quota_is_returned_at_once(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(QUOTA, status=429, headers={"Retry-After": "0"}))
    with pytest.raises(openai.RateLimitError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert info.value.code == "insufficient_quota"
    assert info.value.response.content == QUOTA
    assert len(fake.requests) == 1
    assert retries(lg, "status_429") == 0


async def test_529_overloaded_is_retried(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
                   status=529, headers={"x-should-retry": "true", **SOON}))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "Hello!"
    assert len(fake.requests) == 2


async def test_the_budget_spent_returns_the_last_error(lg: Running, fake: FakeUpstream) -> None:
    for n in (1, 2, 3):
        fake.push(Json({"error": {"message": f"Bad gateway {n}", "type": "server_error"}},
                       status=502, headers=SOON))
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert info.value.status_code == 502
    assert info.value.body == {"message": "Bad gateway 3", "type": "server_error"}
    assert info.value.response.headers.get_list("x-latchgate-notice") == [
        "Retry 1 of 2 on fake after status_5xx (waiting 0.01 s).",
        "Retry 2 of 2 on fake after status_5xx (waiting 0.01 s).",
    ]
    assert len(fake.requests) == 3
    assert retries(lg, "status_5xx") == 2


async def test_the_budget_is_per_upstream(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, retries=0)
    fake.push(Json(UNAVAILABLE, status=503, headers=SOON))
    with pytest.raises(openai.InternalServerError):
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert len(fake.requests) == 1


# -- a loading model ---------------------------------------------------------------------------

async def test_a_loading_model_is_polled_then_served_without_spending_retries(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, retries=0, loading_timeout=0.3)
    fake.push(Json(LOADING, status=503))
    t0 = time.monotonic()
    raw = await create_raw(lg)
    elapsed = time.monotonic() - t0
    assert raw.parse().choices[0].message.content == "Hello!"
    assert raw.headers.get_list("x-latchgate-notice") == [
        "fake is loading the model; waiting up to 0.3 s."
    ]
    assert 0.28 <= elapsed < 1.5
    assert len(fake.requests) == 2
    assert retries(lg, "loading") == 1


async def test_a_model_still_loading_after_the_timeout_is_returned(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, loading_timeout=0.2)
    fake.push(*[Json(LOADING, status=503)] * 5)
    with pytest.raises(openai.InternalServerError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert info.value.body == LOADING["error"]
    # one poll fits a 0.2 s timeout; the retry budget is not spent on loading
    assert len(fake.requests) == 2


async def test_loading_then_a_transient_still_has_the_whole_budget(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, retries=1, loading_timeout=0.2)
    fake.push(Json(LOADING, status=503), Json(UNAVAILABLE, status=503, headers=SOON))
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "Hello!"
    assert len(fake.requests) == 3


# -- never resend after content ----------------------------------------------------------------

async def test_a_failure_after_two_streamed_tokens_is_not_retried(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
                      chunk({"content": "lo"})], then="drop"))
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        async for c in stream:
            got.append(c.choices[0].delta.content or "")
    assert "".join(got) == "Hello"
    assert "broke mid-stream" in info.value.message
    assert len(fake.requests) == 1
    assert retries(lg, "connect") == 0


async def test_a_stream_ending_without_finish_after_content_is_an_error(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"})]))
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    with pytest.raises(openai.APIError) as info:
        async for _ in stream:
            pass
    assert "without finishing the answer" in info.value.message
    assert len(fake.requests) == 1


async def test_a_drop_before_any_content_is_retried(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Drop())
    stream = await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Hello!"
    assert len(fake.requests) == 2
    assert retries(lg, "connect") == 1


async def test_a_drop_on_a_whole_request_is_retried(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Drop())
    reply = await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    assert reply.choices[0].message.content == "Hello!"
    assert len(fake.requests) == 2


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_connection_refused_is_502_after_retries(start_proxy: StartProxy) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    lg = await start_proxy({"name": "fake", "base_url": url, "kind": "generic", "retries": 1})
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG)
    err = info.value
    assert err.status_code == 502
    assert err.code == "upstream_unreachable"
    body = err.body
    assert isinstance(body, dict)
    assert body["message"].startswith("The upstream fake could not be reached or broke the "
                                      "connection (ClientConnectorError")
    assert body["message"].endswith("after 2 attempt(s). Check that the server is up, or raise "
                                    "its timeouts or retry budget.")
    assert retries(lg, "connect") == 1
    attempts = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_upstream_requests_total",
        {"upstream": "fake", "model": MODEL, "status": "error"},
    )
    assert attempts == 2


async def test_connection_refused_on_a_stream(start_proxy: StartProxy) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    lg = await start_proxy({"name": "fake", "base_url": url, "kind": "generic", "retries": 0})
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=MSG, stream=True)
    assert info.value.status_code == 502
    assert orjson.loads(info.value.response.content)["error"]["code"] == "upstream_unreachable"


# -- nothing is resent once content reached the client; a client that leaves is counted -----------


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
