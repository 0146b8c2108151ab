"""Fuzz every route with raw bytes: headers no client library would send (non-UTF-8, control
characters, line breaks), bodies with numbers past 64 bits, deep nesting and odd types, and
plain garbage. Whatever arrives, latchgate answers in OpenAI's shape with a request id, and
never with a server error."""

from __future__ import annotations

import json

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Running
from tests.rawhttp import parse_answer, send_raw

PATHS = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/embeddings"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/fake-model"),
    ("GET", "/v1/models/a%00b"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/admin/latches"),
    ("POST", "/admin/latches/reset"),
    ("POST", "/admin/latches/expire"),
    ("POST", "/v1/responses"),
    ("PUT", "/v1/chat/completions"),
    ("GET", "/%0d%0a"),
    ("POST", "/v1/chat/completions?x=%ff"),
]
HEADER_NAMES = [
    b"Authorization",
    b"x-api-key",
    b"api-key",
    b"x-request-id",
    b"Content-Type",
    b"Content-Encoding",
    b"Accept",
    b"Expect",
    b"X-Anything",
]
header_values = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"Bearer \xe9\xff",
            b"Bearer \x00\x1b\x7f",
            b"gzip",
            b"br",
            b"zstd",
            b"deflate",
            b"application/json",
            b"100-continue",
            b"\xc3",
            b"a\rb",
        ]
    ),
).map(lambda v: v.replace(b"\r\n", b" "))  # a bare CRLF would only end the header block
headers = st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=4)

HUGE = st.sampled_from([1e20, 1e21, 1e308, -1e300, 18446744073709551615])
odd = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | HUGE
    | st.text(max_size=8)
    | st.sampled_from(["\x00", "\x1b[31m", "\x7f", "é", "\ud800"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "properties", "items", "minItems", "maxLength", "a", "\x00"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)


def deep(levels: int) -> str:
    return '{"type":"array","items":' * levels + "{}" + "}" * levels


def chat(model: object, content: object, schema: str) -> bytes:
    head = json.dumps({"model": model, "messages": [{"role": "user", "content": content}]})
    tool = '{"type":"function","function":{"name":"f","parameters":' + schema + "}}"
    return (head[:-1] + ',"tools":[' + tool + "]}").encode("utf-8", "surrogatepass")


bodies = st.one_of(
    st.binary(max_size=200),
    odd.map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass")),
    st.builds(chat, odd, odd, odd.map(lambda v: json.dumps(v))),
    st.builds(
        chat,
        st.sampled_from(["m", "m\x00", "m\x1b", "m\x7f", "é"]),
        st.just("Hi"),
        st.integers(1, 600).map(deep),
    ),
    st.builds(
        lambda n: b'{"model":"m","prompt":"x","input":"x","n":' + n + b"}",
        st.sampled_from([b"1e400", b"99999999999999999999999", b"-0", b"NaN"]),
    ),
)


def request(method: str, path: str, hdrs: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1".encode(),
        b"Host: 127.0.0.1",
        b"Connection: close",
        b"Content-Length: %d" % len(body),
    ]
    lines += [name + b": " + value for name, value in hdrs]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(target=st.sampled_from(PATHS), hdrs=headers, body=bodies)
async def test_raw_fuzz_never_gets_a_server_error(
    lg: Running, target: tuple[str, str], hdrs: list[tuple[bytes, bytes]], body: bytes
) -> None:
    method, path = target
    raw = await send_raw(lg.port, request(method, path, hdrs, body), timeout=60)
    assert raw, "the connection closed without an answer"
    got = parse_answer(raw)
    assert got.status < 500, got.body[:300]
    assert got.header("x-latchgate-request-id"), got.headers
    if got.status >= 400:
        error = orjson.loads(got.body)["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert isinstance(error["message"], str) and error["message"]
    for value in got.all("x-latchgate-notice") + got.all("x-latchgate-dropped-fields"):
        assert value.isascii() and value.isprintable()
