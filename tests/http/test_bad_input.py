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
from tests.http.test_schemas import nested_json

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


def _chat(*messages: bytes) -> bytes:
    return b'{"model": "fake-model", "messages": [%s]}' % b", ".join(messages)


_OK = b'{"role": "user", "content": "x"}'
# Message shapes (issue 13 item 7): before, each of these was forwarded as if valid.
CASES += [
    ("content object", _chat(_OK, _OK, b'{"role": "user", "content": {"a": 1}}'), 400,
     "messages[2].content"),
    ("content number", _chat(b'{"role": "user", "content": 5}'), 400, "messages[0].content"),
    ("content boolean", _chat(b'{"role": "user", "content": true}'), 400,
     "messages[0].content"),
    ("part a number", _chat(b'{"role": "user", "content": [{"type": "text", "text": "a"}, 5]}'),
     400, "messages[0].content[1]"),
    ("part null", _chat(b'{"role": "user", "content": [null]}'), 400, "messages[0].content[0]"),
    ("part a list", _chat(b'{"role": "user", "content": [["text"]]}'), 400,
     "messages[0].content[0]"),
    ("part type not a string", _chat(b'{"role": "user", "content": [{"type": {"t": 1}}]}'), 400,
     "messages[0].content[0].type"),
    ("tool_calls object", _chat(_OK, b'{"role": "assistant", "tool_calls": {"id": "c"}}'), 400,
     "messages[1].tool_calls"),
    ("tool_calls string", _chat(b'{"role": "assistant", "tool_calls": "[]"}'), 400,
     "messages[0].tool_calls"),
    ("tool call not an object",
     _chat(b'{"role": "assistant", "content": null, "tool_calls": [{"id": "c"}, "call"]}'), 400,
     "messages[0].tool_calls[1]"),
]

# Shapes the OpenAI API or common servers accept: every one must reach the upstream unchanged.
VALID_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "developer", "content": "Answer in French."},
    {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
        {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}},  # vLLM
        {"image_url": "https://example.com/a.png"},  # vLLM: a part without `type`
        "plain text",  # vLLM: a string as a text part
    ]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "ok"}]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}], "tool_calls": []},
    {"role": "assistant", "content": "", "tool_calls": None, "reasoning_content": "hm"},
    {"role": "user", "name": "ann", "content": []},
    {"role": "assistant"},  # no content at all: the upstream judges
]


async def test_a_bad_message_shape_says_what_to_send(lg: Running, fake: FakeUpstream) -> None:
    async with aiohttp.ClientSession() as s, s.post(
        lg.base_url + "/chat/completions",
        data=_chat(_OK, _OK, b'{"role": "user", "content": {"a": 1}}'),
    ) as r:
        error = assert_openai_error(r.status, await r.read(), 400)
    assert error == {
        "message": "messages[2].content must be a string, null, or a list of content parts, "
        "not an object.",
        "type": "invalid_request_error",
        "param": "messages[2].content",
        "code": "invalid_value",
    }
    assert fake.requests == []


async def test_message_shapes_the_api_and_servers_accept_are_forwarded(
    lg: Running, fake: FakeUpstream
) -> None:
    body = {"model": "fake-model", "messages": VALID_MESSAGES}
    url = lg.base_url + "/chat/completions"
    async with aiohttp.ClientSession() as s, s.post(url, data=orjson.dumps(body)) as r:
        assert r.status == 200, await r.read()
    assert fake.bodies() == [body]


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


# Chat bodies shaped like real ones, with the odd parts the fuzz runs of issue 13 found: message
# contents and parts of every JSON type, schemas with counts past 64 bits, junk in type lists,
# and nesting far past MAX_DEPTH (written as text: neither json nor orjson encodes it).
HUGE = st.sampled_from([1e20, 1e21, 1e308, 2.0**64, 18446744073709551615, -1e300])
schema_values = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.sampled_from(
        ["string", "object", "array", "null", "widget", "(?=x)", "#/properties/a", "#"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "properties", "items", "anyOf", "minItems", "maxItems",
                             "maxLength", "minProperties", "required", "$ref", "enum", "a",
                             "pattern", "$defs", "prefixItems"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=16,
)
schema_texts = st.one_of(
    schema_values.map(json.dumps),
    st.builds(nested_json, st.integers(1, 480), st.sampled_from(["items", "properties"])),
)
parts = st.one_of(
    json_values,
    st.fixed_dictionaries({"type": json_values}, optional={"text": json_values}),
)
chat_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "tool"])},
        optional={"content": st.one_of(json_values, st.lists(parts, max_size=3)),
                  "tool_calls": st.one_of(json_values, st.lists(json_values, max_size=2))},
    ),
    min_size=1,
    max_size=3,
)


@pytest.fixture
async def both_modes(fake: FakeUpstream, start_proxy: StartProxy) -> list[Running]:
    return [
        await start_proxy({"name": "fake", "base_url": fake.url, "schema_mode": mode})
        for mode in ("sanitise", "passthrough")
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(messages=chat_messages, tool_schema=schema_texts, response_schema=schema_texts,
       which=st.integers(0, 1), stream=st.booleans())
async def test_fuzz_chat_shapes_never_crash(
    both_modes: list[Running], fake: FakeUpstream, messages: list[Any], tool_schema: str,
    response_schema: str, which: int, stream: bool,
) -> None:
    raw = "".join([
        f'{{"model": "fake-model", "stream": {json.dumps(stream)}, ',
        f'"messages": {json.dumps(messages)}, ',
        '"tools": [{"type": "function", "function": {"name": "t", "parameters": ', tool_schema,
        '}}], "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": ',
        response_schema, "}}}",
    ])
    sent = len(fake.requests)
    async with (
        aiohttp.ClientSession() as s,
        s.post(both_modes[which].base_url + "/chat/completions", data=raw.encode()) as r,
    ):
        answer = await r.read()
    if r.status == 200:
        return
    error = assert_openai_error(r.status, answer)
    assert r.status < 500, answer
    if r.status == 400 and error["code"] != "context_length_exceeded":
        assert len(fake.requests) == sent  # refused before anything was sent


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
