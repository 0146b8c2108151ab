"""Client and admin keys: every route refuses a bad credential with a 401, whatever its bytes."""

from __future__ import annotations

import pytest

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream
from tests.rawhttp import raw_request

ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/embeddings"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/fake-model"),
    ("GET", "/admin/latches"),
    ("POST", "/admin/latches/reset"),
    ("POST", "/admin/latches/expire"),
]
# Bytes that are not UTF-8 (Latin-1 é, 0xff), and a valid key's prefix followed by them.
UNDECODABLE = [b"\xe9\xff", b"client-key\xff", b"\xc3"]


@pytest.fixture
async def keyed(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    return await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"},
        client_keys=["client-key"],
        admin_key="admin-key",
    )


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("value", UNDECODABLE)
@pytest.mark.parametrize("header", [b"Authorization: Bearer ", b"x-api-key: ", b"api-key: "])
async def test_an_undecodable_key_is_a_401_on_every_route(
    keyed: Running, fake: FakeUpstream, method: str, path: str, value: bytes, header: bytes
) -> None:
    got = await raw_request(keyed.port, method, path, [header + value], b"{}")
    assert got.status == 401, got.body
    error = got.json["error"]  # type: ignore[index]
    assert error["type"] == "authentication_error"
    assert got.header("x-latchgate-request-id")
    assert fake.requests == []


async def test_the_right_keys_still_open_their_routes(keyed: Running) -> None:
    ok = await raw_request(keyed.port, "GET", "/v1/models", [b"x-api-key: client-key"])
    assert ok.status == 200
    admin = await raw_request(
        keyed.port, "GET", "/admin/latches", [b"Authorization: Bearer admin-key"]
    )
    assert admin.status == 200
    # The client key does not open admin routes, nor the admin key the API.
    assert (
        await raw_request(keyed.port, "GET", "/admin/latches", [b"x-api-key: client-key"])
    ).status == 401
