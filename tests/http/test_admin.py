"""The admin routes for latches over HTTP: list, reset, expire, behind the admin key (issue 3).

The operator's view of what latchgate learned, and the only way back from a latch besides the
CLI: a reset must make the next request negotiate again, and it must reach the state file so a
restart does not bring the latch back. Without the admin key nothing is shown or changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.state.latches import endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json
from tests.refusal_cases import MESSAGES

ADMIN = {"Authorization": "Bearer adm"}
MAX_TOKENS_REFUSAL = Json(orjson.dumps({"error": {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
    "'max_completion_tokens' instead."}}), status=400)
TOP_K_REFUSAL = Json(orjson.dumps({"error": {
    "message": "Unrecognized request argument supplied: top_k"}}), status=400)
GRAMMAR_REFUSAL = Json(orjson.dumps({"error": {"code": 500, "message": "failed to parse grammar",
                                               "type": "server_error"}}), status=500)
CEILING = {"model": "m", "messages": MESSAGES, "max_tokens": 64}
SAMPLED = {"model": "m2", "messages": MESSAGES, "top_k": 40}
SCHEMA = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}
TOOLED = {"model": "m", "messages": MESSAGES, "tools": [
    {"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]}


async def start(start_proxy: StartProxy, fake: FakeUpstream, **server: Any) -> Running:
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"}, **server)


async def admin(
    lg: Running, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=lg.url) as http:
        return await http.request(method, path, headers=ADMIN if headers is None else headers,
                                  **kw)


async def chat(lg: Running, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=lg.url) as http:
        resp = await http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    return resp


async def learn(lg: Running, fake: FakeUpstream) -> None:
    """legacy_token_limit on m, top_k on m2, strict_schemas on the endpoint."""
    for body, refusal in ((CEILING, MAX_TOKENS_REFUSAL), (SAMPLED, TOP_K_REFUSAL),
                          (TOOLED, GRAMMAR_REFUSAL)):
        fake.push(refusal)
        await chat(lg, body)


def model_entry(model: str, **latched: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "model": model, "reasoning_effort": True, "legacy_token_limit": True,
        "chosen_temperature": True, "structured_output": True, "native_tools": True,
        "refused_fields": [], "refused_efforts": [], "supported_efforts": None,
        "effort_with_tools": None, "refused": [],
    }
    entry.update(latched)
    return entry


# -- who may ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/admin/latches"), ("POST", "/admin/latches/reset"),
     ("POST", "/admin/latches/expire")],
)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "adm"},
     {"Authorization": "Basic adm"}],
    ids=["none", "wrong", "no-scheme", "basic"],
)
async def test_a_missing_or_wrong_admin_key_is_401_and_changes_nothing(
    fake: FakeUpstream, start_proxy: StartProxy, method: str, path: str, headers: dict[str, str]
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    fake.push(MAX_TOKENS_REFUSAL)
    await chat(lg, CEILING)

    resp = await admin(lg, method, path, headers=headers, json={"older_than": "0s"})

    assert resp.status_code == 401
    assert resp.json() == {"error": {
        "message": "Missing or wrong admin key: send 'Authorization: Bearer <admin key>'.",
        "type": "authentication_error", "param": None, "code": "invalid_admin_key"}}
    assert len(lg.proxy.store.describe()) == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/admin/latches"), ("POST", "/admin/latches/reset"),
     ("POST", "/admin/latches/expire")],
)
async def test_without_an_admin_key_configured_the_routes_are_403(
    fake: FakeUpstream, start_proxy: StartProxy, method: str, path: str
) -> None:
    lg = await start(start_proxy, fake)

    resp = await admin(lg, method, path)

    assert resp.status_code == 403
    error = resp.json()["error"]
    assert error["code"] == "admin_disabled"
    assert error["type"] == "permission_error"
    assert "LATCHGATE_ADMIN_KEY" in error["message"]


async def test_admin_routes_ignore_the_client_keys(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm", client_keys=["client"])

    assert (await admin(lg, "GET", "/admin/latches")).status_code == 200
    wrong = await admin(lg, "GET", "/admin/latches", headers={"Authorization": "Bearer client"})
    assert wrong.status_code == 401


# -- list -----------------------------------------------------------------------------------------


async def test_list_shows_every_latch_by_endpoint_and_model(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    assert (await admin(lg, "GET", "/admin/latches")).json() == {"endpoints": []}
    await learn(lg, fake)

    resp = await admin(lg, "GET", "/admin/latches")

    assert resp.status_code == 200
    (endpoint,) = resp.json()["endpoints"]
    assert endpoint.pop("since") > 0
    assert endpoint == {
        "endpoint": endpoint_id(fake.url, None),
        "upstream": "fake",
        "strict_schemas": False,
        "usage_in_stream": True,
        "refused": ["strict_schemas"],
        "models": [
            model_entry("m", legacy_token_limit=False, refused=["legacy_token_limit"]),
            model_entry("m2", refused_fields=["top_k"], refused=["refused_field"]),
        ],
    }


# -- reset --------------------------------------------------------------------------------------


async def test_reset_all_makes_the_next_request_negotiate_again(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    await learn(lg, fake)

    resp = await admin(lg, "POST", "/admin/latches/reset")

    assert resp.status_code == 200
    assert resp.json() == {"reset": 1}  # one endpoint, with everything under it
    assert lg.proxy.store.describe() == []
    assert orjson.loads((tmp_path / "state.json").read_bytes())["endpoints"] == {}
    before = len(fake.bodies())
    fake.push(MAX_TOKENS_REFUSAL)
    await chat(lg, CEILING)
    assert [b.get("max_tokens") for b in fake.bodies()[before:]] == [64, None]
    assert (await admin(lg, "GET", "/admin/latches")).json()["endpoints"][0]["models"] == [
        model_entry("m", legacy_token_limit=False, refused=["legacy_token_limit"])
    ]


async def test_reset_one_model_keeps_the_others_and_the_endpoint(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    await learn(lg, fake)

    resp = await admin(lg, "POST", "/admin/latches/reset", json={"model": "m"})

    assert resp.json() == {"reset": 1}
    eid = lg.proxy.upstreams["fake"].endpoint_id
    endpoint, m2 = lg.proxy.store.view(eid, "m2")
    assert (endpoint.strict_schemas, m2.refused_fields) == (False, {"top_k"})
    assert lg.proxy.store.view(eid, "m")[1].legacy_token_limit is True
    # m negotiates again; m2 is still sent right the first time.
    before = len(fake.bodies())
    fake.push(MAX_TOKENS_REFUSAL)
    await chat(lg, CEILING)
    await chat(lg, SAMPLED)
    assert fake.bodies()[before:] == [
        CEILING,
        {"model": "m", "messages": MESSAGES, "max_completion_tokens": 64},
        {"model": "m2", "messages": MESSAGES},
    ]


async def test_reset_by_upstream_name_and_by_query(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    await learn(lg, fake)

    one = await admin(lg, "POST", "/admin/latches/reset", params={"upstream": "fake",
                                                                  "model": "m2"})
    assert one.json() == {"reset": 1}
    rest = await admin(lg, "POST", "/admin/latches/reset", json={"upstream": "fake"})
    assert rest.json() == {"reset": 1}
    assert lg.proxy.store.describe() == []
    again = await admin(lg, "POST", "/admin/latches/reset", json={"upstream": "fake"})
    assert again.json() == {"reset": 0}


async def test_reset_of_an_unknown_upstream_is_404_and_a_bad_body_400(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    await learn(lg, fake)

    unknown = await admin(lg, "POST", "/admin/latches/reset", json={"upstream": "nope"})
    garbled = await admin(lg, "POST", "/admin/latches/reset", content=b"{not json")
    listed = await admin(lg, "POST", "/admin/latches/reset", json=["m"])

    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "No upstream named 'nope'; names: fake."
    assert unknown.json()["error"]["code"] == "unknown_upstream"
    assert (garbled.status_code, listed.status_code) == (400, 400)
    assert garbled.json()["error"]["message"].startswith("The request body is not valid UTF-8 JSON")
    assert len(lg.proxy.store.describe()) == 1  # nothing was reset


# -- expire -------------------------------------------------------------------------------------


async def test_expire_forgets_only_latches_older_than_asked(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")
    await learn(lg, fake)

    young = await admin(lg, "POST", "/admin/latches/expire", json={"older_than": "1h"})
    assert young.json() == {"expired": 0}
    assert len(lg.proxy.store.describe()) == 1

    old = await admin(lg, "POST", "/admin/latches/expire", params={"older_than": "0"})

    assert old.status_code == 200
    assert old.json() == {"expired": 3}  # two models and the endpoint's own latch
    assert lg.proxy.store.describe() == []
    assert orjson.loads((tmp_path / "state.json").read_bytes())["endpoints"] == {}
    before = len(fake.bodies())
    fake.push(TOP_K_REFUSAL)
    await chat(lg, SAMPLED)
    assert len(fake.bodies()) - before == 2  # negotiated again


@pytest.mark.parametrize(("params", "message"), [
    ({}, "Say how old: older_than=DURATION such as 7d, 12h or 3600s."),
    ({"older_than": "soon"},
     "'soon' is not a duration; write a number with s, m, h, d or w, e.g. 7d"),
])
async def test_expire_needs_a_duration(
    fake: FakeUpstream, start_proxy: StartProxy, params: dict[str, str], message: str
) -> None:
    lg = await start(start_proxy, fake, admin_key="adm")

    resp = await admin(lg, "POST", "/admin/latches/expire", params=params)

    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == message
    assert resp.json()["error"]["param"] == "older_than"
