"""Latches survive a restart, through the real app lifecycle (issue 3; BEHAVIOUR 2.7).

A latchgate learns refusals over HTTP, is shut down the way the server shuts down (the runner's
cleanup, which saves), and a new latchgate on the same state file sends right the first time. A
state file that is not a snapshot never stops the proxy: it is kept aside and latches start empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.state.latches import SNAPSHOT_VERSION, endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json
from tests.refusal_cases import MESSAGES

MODEL = "m"
OTHER = "m2"
MAX_TOKENS_REFUSAL = Json(orjson.dumps({"error": {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
    "'max_completion_tokens' instead.", "code": "unsupported_parameter"}}), status=400)
TOP_K_REFUSAL = Json(orjson.dumps({"error": {
    "message": "Unrecognized request argument supplied: top_k"}}), status=400)
STREAM_OPTIONS_REFUSAL = Json(orjson.dumps({"error": {
    "message": "Stream options can only be defined when `stream=True`."}}), status=400)

CEILING = {"model": MODEL, "messages": MESSAGES, "max_tokens": 64}
SAMPLED = {"model": OTHER, "messages": MESSAGES, "top_k": 40}
STREAMED = {"model": MODEL, "messages": MESSAGES, "stream": True}


def table(fake: FakeUpstream) -> dict[str, Any]:
    return {"name": "fake", "base_url": fake.url, "kind": "generic"}


async def post(lg: Running, body: dict[str, Any]) -> str:
    """One request through latchgate with the SDK; the answer's text."""
    sdk = lg.client(http_client=httpx.AsyncClient(verify=False))
    extra = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
    if not body.get("stream"):
        done = await sdk.chat.completions.create(
            model=body["model"], messages=body["messages"], extra_body=extra
        )
        return done.choices[0].message.content or ""
    stream = await sdk.chat.completions.create(
        model=body["model"], messages=body["messages"], stream=True, extra_body=extra
    )
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def learn_three(lg: Running, fake: FakeUpstream) -> None:
    """Teach latchgate a model latch, a field on another model, and an endpoint latch."""
    for body, refusal in ((CEILING, MAX_TOKENS_REFUSAL), (SAMPLED, TOP_K_REFUSAL),
                          (STREAMED, STREAM_OPTIONS_REFUSAL)):
        fake.push(refusal)
        assert await post(lg, body) == "Hello!"
    assert len(fake.bodies()) == 6


async def test_latches_learned_over_http_survive_a_restart(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    first = await start_proxy(table(fake))
    await learn_three(first, fake)
    await first.runner.cleanup()  # the server's shutdown: saves the snapshot

    second = await start_proxy(table(fake))
    eid = second.proxy.upstreams["fake"].endpoint_id
    endpoint, model = second.proxy.store.view(eid, MODEL)
    assert (endpoint.usage_in_stream, model.legacy_token_limit) == (False, False)
    assert second.proxy.store.view(eid, OTHER)[1].refused_fields == {"top_k"}

    before = len(fake.bodies())
    for body in (CEILING, SAMPLED, STREAMED):
        assert await post(second, body) == "Hello!"
    assert fake.bodies()[before:] == [
        {"model": MODEL, "messages": MESSAGES, "max_completion_tokens": 64},
        {"model": OTHER, "messages": MESSAGES},
        {"model": MODEL, "messages": MESSAGES, "stream": True},
    ]


async def test_a_latch_is_on_disk_as_soon_as_it_is_learned(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    lg = await start_proxy(table(fake))
    fake.push(MAX_TOKENS_REFUSAL)

    assert await post(lg, CEILING) == "Hello!"

    # Saved when the request that learned it ends, not only at shutdown (a crash loses nothing).
    saved = orjson.loads((tmp_path / "state.json").read_bytes())
    eid = endpoint_id(fake.url, None)
    assert saved["version"] == SNAPSHOT_VERSION
    assert list(saved["endpoints"]) == [eid]
    entry = saved["endpoints"][eid]
    assert entry["upstream"] == "fake"
    assert entry["since"] > 0
    assert (entry["strict_schemas"], entry["usage_in_stream"]) == (True, True)
    model = entry["models"][MODEL]
    assert model["legacy_token_limit"] is False
    assert model["since"] > 0
    assert [model[k] for k in ("reasoning_effort", "chosen_temperature", "structured_output")] \
        == [True, True, True]


async def test_a_corrupt_state_file_is_kept_aside_and_the_proxy_starts_empty(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    state.write_bytes(b'{"version": 1, "endpoints": {"abc": ')  # cut off mid-write

    lg = await start_proxy(table(fake))

    assert lg.proxy.store.describe() == []
    aside = list(tmp_path.glob("state.json.corrupt-*"))
    assert len(aside) == 1
    assert aside[0].read_bytes() == b'{"version": 1, "endpoints": {"abc": '
    assert not state.exists()
    # It still negotiates, and the next save writes a good file beside the kept copy.
    fake.push(MAX_TOKENS_REFUSAL)
    assert await post(lg, CEILING) == "Hello!"
    saved = orjson.loads(state.read_bytes())
    assert saved["endpoints"][endpoint_id(fake.url, None)]["models"][MODEL][
        "legacy_token_limit"] is False
    assert aside[0].exists()


@pytest.mark.parametrize("content", [b"[1, 2, 3]", b"", b"\xff\xfe not text"])
async def test_a_state_file_that_is_no_snapshot_never_stops_the_proxy(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "state.json").write_bytes(content)

    lg = await start_proxy(table(fake))

    assert lg.proxy.store.describe() == []
    assert [p.read_bytes() for p in tmp_path.glob("state.json.corrupt-*")] == [content]
    assert await post(lg, {"model": MODEL, "messages": MESSAGES}) == "Hello!"


async def test_a_snapshot_of_another_version_is_ignored(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    eid = endpoint_id(fake.url, None)
    foreign = {"version": SNAPSHOT_VERSION + 1, "endpoints": {
        eid: {"usage_in_stream": False, "models": {MODEL: {"legacy_token_limit": False}}}}}
    (tmp_path / "state.json").write_bytes(orjson.dumps(foreign))

    lg = await start_proxy(table(fake))

    assert lg.proxy.store.describe() == []
    assert await post(lg, CEILING) == "Hello!"
    assert fake.bodies() == [CEILING]  # sent as the client asked: nothing was imported


async def test_a_snapshot_of_another_version_is_kept_before_it_is_overwritten(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    foreign = orjson.dumps({"version": SNAPSHOT_VERSION + 1, "endpoints": {}})
    (tmp_path / "state.json").write_bytes(foreign)
    lg = await start_proxy(table(fake))
    fake.push(MAX_TOKENS_REFUSAL)

    assert await post(lg, CEILING) == "Hello!"  # learns a latch, so the state is saved

    kept = [p.read_bytes() for p in tmp_path.iterdir() if p.name != "state.json"]
    assert foreign in kept


async def test_latches_belong_to_the_endpoint_a_new_key_is_a_new_endpoint(
    fake: FakeUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await start_proxy(table(fake))
    fake.push(MAX_TOKENS_REFUSAL)
    assert await post(first, CEILING) == "Hello!"
    await first.runner.cleanup()
    monkeypatch.setenv("FAKE_KEY", "sk-other")

    second = await start_proxy({**table(fake), "api_key_env": "FAKE_KEY"})

    assert second.proxy.upstreams["fake"].endpoint_id == endpoint_id(fake.url, "sk-other")
    fake.push(MAX_TOKENS_REFUSAL)
    assert await post(second, CEILING) == "Hello!"
    assert [b.get("max_tokens") for b in fake.bodies()[2:]] == [64, None]  # negotiated afresh
    # Both endpoints are remembered side by side in the one file.
    await second.runner.cleanup()
    third = await start_proxy(table(fake))
    assert len(third.proxy.store.describe()) == 2
