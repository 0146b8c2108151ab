"""Every response latchgate gives, from any route or from the HTTP layer itself, is OpenAI-shaped
JSON with a request id, and every request is counted and logged, whatever went wrong."""

from __future__ import annotations

import io
from collections.abc import Iterator

import aiohttp
import orjson
import pytest
import structlog

from proxy.observe import logs
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, completion
from tests.rawhttp import parse_answer, raw_request, send_raw

CHAT = b'{"model":"m","messages":[{"role":"user","content":"Hi"}]}'


def requests_total(lg: Running, route: str, status: str) -> float:
    labels = {
        "upstream": "none",
        "model": "none",
        "route": route,
        "stream": "false",
        "status": status,
    }
    return lg.proxy.metrics.registry.get_sample_value("latchgate_requests_total", labels) or 0.0


def assert_openai_error(got: object, status: int) -> dict[str, object]:
    assert got.status == status, got.body  # type: ignore[attr-defined]
    assert got.header("Content-Type").startswith("application/json")  # type: ignore[attr-defined]
    assert got.header("x-latchgate-request-id")  # type: ignore[attr-defined]
    error = orjson.loads(got.body)["error"]  # type: ignore[attr-defined]
    assert set(error) == {"message", "type", "param", "code"}
    return error  # type: ignore[no-any-return]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("info", json=True, stream=out)
    yield out
    structlog.reset_defaults()


def log_lines(out: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


# -- the HTTP layer's own errors (item 6) --------------------------------------------------------

PROTOCOL_ERRORS = {
    "header too long": (
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",
        431,
    ),
    "request line garbage": (b"GARBAGE\r\n\r\n", 400),
    "bad method bytes": (b"G\x01T /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "length and chunked": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:"
        b" chunked\r\nContent-Length: 5\r\n\r\nzz\r\n",
        400,
    ),
    "bad chunk size": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:"
        b" chunked\r\n\r\nZZZ\r\n",
        400,
    ),
    "brotli body": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n"
        b"Content-Length: %d\r\n\r\n" % len(CHAT) + CHAT,
        415,
    ),
    "zstd body": (
        b"POST /admin/latches/reset HTTP/1.1\r\nHost: x\r\nContent-Encoding: zstd\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        415,
    ),
}


@pytest.mark.parametrize("case", list(PROTOCOL_ERRORS))
async def test_http_layer_errors_are_openai_shaped_counted_and_logged(
    lg: Running, captured: io.StringIO, case: str
) -> None:
    data, status = PROTOCOL_ERRORS[case]
    got = parse_answer(await send_raw(lg.port, data, timeout=10))
    error = assert_openai_error(got, status)
    assert "Please install" not in str(error["message"])
    assert requests_total(lg, "invalid", str(status)) == 1
    line = [x for x in log_lines(captured) if x.get("route") == "invalid"]
    assert line and line[0]["request_id"] == got.header("x-latchgate-request-id")


async def test_an_encoded_line_break_in_the_path_is_a_404_in_openai_shape(lg: Running) -> None:
    got = await raw_request(lg.port, "GET", "/v1/%0d%0amodels")
    assert_openai_error(got, 404)


# -- a body labelled gzip that is not (item 5) ---------------------------------------------------


@pytest.fixture
async def admin_lg(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    return await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, admin_key="admin-key-123"
    )


@pytest.mark.parametrize("path", ["/admin/latches/reset", "/admin/latches/expire"])
@pytest.mark.parametrize("encoding", [b"gzip", b"deflate"])
async def test_an_admin_body_labelled_compressed_but_plain_is_a_400(
    admin_lg: Running, path: str, encoding: bytes
) -> None:
    got = await raw_request(
        admin_lg.port,
        "POST",
        path,
        [b"Authorization: Bearer admin-key-123", b"Content-Encoding: " + encoding],
        b'{"older_than": "7d"}',
    )
    error = assert_openai_error(got, 400)
    assert error["code"] == "invalid_body"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/admin/latches/expire"])
async def test_a_body_that_cannot_be_decoded_closes_the_connection_it_came_on(
    admin_lg: Running, fake: FakeUpstream, path: str
) -> None:
    # aiohttp drops the connection after a body it could not decode; the answer must say so
    # (`Connection: close`), or a client that pools connections sends its next request on a
    # dead one and fails with "Server disconnected".
    headers = {"Content-Encoding": "gzip", "Authorization": "Bearer admin-key-123"}
    fake.push(Json(completion("ok")))
    async with aiohttp.ClientSession() as s:
        async with s.post(admin_lg.url + path, data=b'{"older_than": "7d"}', headers=headers) as r:
            assert r.status == 400
            assert r.headers.get("Connection", "").lower() == "close"
            body = await r.json()
        error = body["error"]
        assert (error["type"] if path == "/v1/messages" else error["code"]) in (
            "invalid_body",
            "invalid_request_error",
        )
        chat = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
        async with s.post(admin_lg.base_url + "/chat/completions", json=chat) as r:
            assert r.status == 200  # the next request, on a new connection


# -- unrouted requests are counted and logged (item 13) ------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/response", 404),
        ("POST", "/v1/chat/completion", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/admin/latches", 405),
    ],
)
async def test_unrouted_requests_are_counted_and_logged(
    lg: Running, captured: io.StringIO, method: str, path: str, status: int
) -> None:
    got = await raw_request(lg.port, method, path, body=CHAT if method == "POST" else b"")
    assert_openai_error(got, status)
    assert requests_total(lg, "unrouted", str(status)) == 1
    line = [x for x in log_lines(captured) if x.get("route") == "unrouted"]
    assert len(line) == 1
    assert line[0]["path"] == path and line[0]["method"] == method and line[0]["status"] == status


async def test_a_405_says_which_methods_the_path_takes(lg: Running) -> None:
    got = await raw_request(lg.port, "GET", "/v1/chat/completions")
    assert_openai_error(got, 405)
    assert got.header("Allow") == "POST"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/messages", 405),
        ("PUT", "/v1/messages", 405),
        ("GET", "/v1/messages/count_tokens", 405),
        ("POST", "/v1/messages/batches", 404),
        ("POST", "/messages/nope", 404),
    ],
)
async def test_unrouted_requests_under_messages_are_answered_in_anthropics_shape(
    lg: Running, method: str, path: str, status: int
) -> None:
    # The Messages front's clients (the anthropic SDK, Claude Code) read only Anthropic's
    # error shape, also for a path or method latchgate does not serve.
    got = await raw_request(lg.port, method, path, body=CHAT if method != "GET" else b"")
    assert got.status == status
    body = orjson.loads(got.body)
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == (
        "not_found_error" if status == 404 else "invalid_request_error"
    )
    if status == 405:
        assert got.header("Allow") == "POST"


async def test_model_listings_and_admin_calls_are_counted(admin_lg: Running) -> None:
    await raw_request(admin_lg.port, "GET", "/v1/models")
    await raw_request(admin_lg.port, "GET", "/admin/latches")  # no key: 401
    assert requests_total(admin_lg, "models", "200") == 1
    assert requests_total(admin_lg, "admin", "401") == 1


# -- the request id on every response (item 20) --------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models",
        "/v1/models/fake-model",
        "/models",
        "/healthz",
        "/readyz",
        "/metrics",
        "/admin/latches",
    ],
)
async def test_every_response_carries_a_request_id(admin_lg: Running, path: str) -> None:
    got = await raw_request(
        admin_lg.port,
        "GET",
        path,
        [b"Authorization: Bearer admin-key-123", b"x-request-id: my-trace-42"],
    )
    assert got.status == 200, got.body
    assert got.header("x-latchgate-request-id") == "my-trace-42"
    fresh = await raw_request(admin_lg.port, "GET", path, [b"Authorization: Bearer admin-key-123"])
    assert (fresh.header("x-latchgate-request-id") or "").startswith("lg-")


# -- logging never fails a request (item 12) -----------------------------------------------------


class _Full(io.StringIO):
    def write(self, s: str) -> int:
        raise OSError(28, "No space left on device")


class _Closed(io.StringIO):
    def write(self, s: str) -> int:
        raise ValueError("I/O operation on closed file.")


@pytest.mark.parametrize("stream", [_Full, _Closed])
async def test_a_failing_log_write_never_fails_a_request(
    lg: Running, stream: type[io.StringIO]
) -> None:
    logs.configure("info", json=True, stream=stream())
    try:
        before = logs.write_failures()
        ok = await raw_request(
            lg.port, "POST", "/v1/chat/completions", [b"Content-Type: application/json"], CHAT
        )
        refused = await raw_request(lg.port, "POST", "/v1/chat/completions", body=b"[")
        unrouted = await raw_request(lg.port, "GET", "/nowhere")
        assert (ok.status, refused.status, unrouted.status) == (200, 400, 404)
        assert logs.write_failures() >= before + 3
        scraped = await raw_request(lg.port, "GET", "/metrics")
        assert b"latchgate_log_write_failures_total" in scraped.body
    finally:
        structlog.reset_defaults()


async def test_errors_latchgate_answers_itself_carry_the_request_id(lg: Running) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions", data=b"{", headers={"x-request-id": "trace-42"}
        ) as r,
    ):
        assert r.status == 400
        assert r.headers["x-latchgate-request-id"] == "trace-42"
