"""Bad input gets a clear OpenAI-shaped error, never a crash, and never reaches the upstream."""

from __future__ import annotations

import gzip
import json
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream

ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/chat/completions"]


def assert_openai_error(
    status: int, body: bytes, expected_status: int | None = None
) -> dict[str, Any]:
    if expected_status is not None:
        assert status == expected_status, body
    assert 400 <= status < 600
    parsed = orjson.loads(body)
    error = parsed["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error


CASES: list[tuple[str, bytes, int, str | None]] = [
    ("invalid json", b'{"model": ', 400, None),
    ("not an object", b"[1, 2]", 400, None),
    ("empty", b"", 400, None),
    ("latin-1 bytes", '{"model": "é"}'.encode("latin-1"), 400, None),
    ("missing model", b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
    (
        "model not string",
        b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}',
        400,
        "model",
    ),
    ("missing messages", b'{"model": "fake-model"}', 400, "messages"),
    ("messages not list", b'{"model": "fake-model", "messages": "hi"}', 400, "messages"),
    ("message not object", b'{"model": "fake-model", "messages": ["hi"]}', 400, "messages[0]"),
    (
        "stream not bool",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "stream": "yes"}',
        400,
        "stream",
    ),
    (
        "max_tokens string",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "max_tokens": "9"}',
        400,
        "max_tokens",
    ),
    (
        "max_tokens boolean",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "max_tokens": true}',
        400,
        "max_tokens",
    ),
    (
        "max_tokens fraction",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "max_tokens": 9.5}',
        400,
        "max_tokens",
    ),
    (
        "temperature boolean",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "temperature": false}',
        400,
        "temperature",
    ),
    (
        "response_format list",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "response_format": []}',
        400,
        "response_format",
    ),
    (
        "tools not list",
        b'{"model": "fake-model", "messages": [{"role": "user"}], "tools": {}}',
        400,
        "tools",
    ),
]


async def test_typed_chat_fields_accept_their_types_and_null(
    lg: Running, fake: FakeUpstream
) -> None:
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 1,  # a whole number is a number
        "max_tokens": None,
        "n": 1,
        "reasoning_effort": "low",
        "response_format": {"type": "text"},
    }
    url = lg.base_url + "/chat/completions"
    async with aiohttp.ClientSession() as s, s.post(url, data=orjson.dumps(body)) as r:
        assert r.status == 200, await r.read()
    assert fake.bodies() == [body]


@pytest.mark.parametrize(("name", "raw", "status", "param"), CASES, ids=[c[0] for c in CASES])
async def test_bad_chat_bodies(
    lg: Running, fake: FakeUpstream, name: str, raw: bytes, status: int, param: str | None
) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions",
            data=raw,
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        error = assert_openai_error(r.status, await r.read(), status)
    if param is not None:
        assert error["param"] == param
    assert fake.requests == []


@pytest.mark.parametrize("size", [10_000, 3_000_000])  # in with the headers / over many reads
async def test_body_over_limit_is_413(
    fake: FakeUpstream, start_proxy: StartProxy, size: int
) -> None:
    running = await start_proxy({"name": "fake", "base_url": fake.url}, max_body_bytes=4096)
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * size}]})
    async with (
        aiohttp.ClientSession() as s,
        s.post(running.base_url + "/chat/completions", data=raw) as r,
    ):
        error = assert_openai_error(r.status, await r.read(), 413)
    assert "max_body_bytes" in error["message"]
    assert fake.requests == []


async def test_gzip_body_accepted_and_bad_gzip_refused(lg: Running, fake: FakeUpstream) -> None:
    raw = orjson.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "x"}]})
    async with aiohttp.ClientSession() as s:
        async with s.post(
            lg.base_url + "/chat/completions",
            data=gzip.compress(raw),
            headers={"Content-Encoding": "gzip"},
        ) as r:
            assert r.status == 200
        async with s.post(
            lg.base_url + "/chat/completions",
            data=b"not gzip at all",
            headers={"Content-Encoding": "gzip"},
        ) as r:
            assert_openai_error(r.status, await r.read(), 400)


async def test_unknown_route_and_method(lg: Running) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(lg.base_url + "/nothing") as r:
            assert_openai_error(r.status, await r.read(), 404)
        for path in ("/v1/chat/completions", "/completions", "/v1/embeddings"):
            # The forwarded routes are looked up before aiohttp's router (`direct_dispatch`):
            # another method on their paths still gets the router's 405.
            async with s.get(lg.url + path) as r:
                assert_openai_error(r.status, await r.read(), 405)
        async with s.put(lg.url + "/v1/chat/completions", data=b"{}") as r:
            assert_openai_error(r.status, await r.read(), 405)
        # Near misses of a forwarded path are not forwarded.
        for path in ("/v1/chat/completions/", "/v1%2Fchat/completions", "/V1/chat/completions"):
            async with s.post(lg.url + path, data=b"{}") as r:
                assert_openai_error(r.status, await r.read(), 404)


async def test_expect_100_continue_is_answered(lg: Running, fake: FakeUpstream) -> None:
    # curl sends `Expect: 100-continue` before a large body and waits for the go-ahead.
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "x" * 5000}]}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s, s.post(
        lg.base_url + "/chat/completions", data=orjson.dumps(body), expect100=True
    ) as r:
        assert r.status == 200, await r.read()
        assert (await r.json())["choices"][0]["message"]["role"] == "assistant"
    assert fake.bodies() == [body]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(
        st.sampled_from(
            [
                "model",
                "messages",
                "stream",
                "tools",
                "max_tokens",
                "prompt",
                "input",
                "temperature",
                "response_format",
                "stream_options",
            ]
        ),
        json_values,
        max_size=5,
    ).map(lambda v: json.dumps(v).encode()),
)
headers = st.dictionaries(
    st.sampled_from(
        ["Content-Type", "Content-Encoding", "Authorization", "X-Request-Id", "Accept"]
    ),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    max_size=3,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(ROUTES), body=bodies, hdrs=headers)
async def test_fuzz_never_crashes(
    lg: Running, route: str, body: bytes, hdrs: dict[str, str]
) -> None:
    async with aiohttp.ClientSession() as s, s.post(lg.url + route, data=body, headers=hdrs) as r:
        raw = await r.read()
        if r.status == 200:
            return  # a body that happens to be valid: the fake answered
        error = assert_openai_error(r.status, raw)
        assert r.status < 500 or error["type"] != "server_error", raw


OTHER_ROUTES = [
    ("GET", "/v1/models"),
    ("GET", "/v1/models/fake-model"),
    ("GET", "/models/%00%ff"),
    ("POST", "/admin/latches/reset"),
    ("POST", "/admin/latches/expire"),
    ("GET", "/admin/latches"),
    ("DELETE", "/v1/chat/completions"),
]


@pytest.fixture
async def admin_lg(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    return await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, admin_key="adm-key"
    )


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(OTHER_ROUTES), body=bodies, hdrs=headers, admin=st.booleans())
async def test_fuzz_other_routes_never_crash(
    admin_lg: Running, route: tuple[str, str], body: bytes, hdrs: dict[str, str], admin: bool
) -> None:
    if admin:
        hdrs = {**hdrs, "Authorization": "Bearer adm-key"}
    method, path = route
    async with (
        aiohttp.ClientSession() as s,
        s.request(method, admin_lg.url + path, data=body, headers=hdrs) as r,
    ):
        raw = await r.read()
        if r.status < 400:
            orjson.loads(raw)  # answers are JSON
            return
        error = assert_openai_error(r.status, raw)
        assert r.status < 500 or error["type"] != "server_error", raw
