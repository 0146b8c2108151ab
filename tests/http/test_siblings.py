"""The workers' talk (`proxy.http.siblings`) in one process: two or three proxies started as
workers are (`start` with their `Siblings`), on unix sockets in a private directory, so each
message and each merge can be checked directly, without processes or timing."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from proxy.http.app import PROXY_KEY, Proxy
from proxy.http.server import start
from proxy.http.siblings import SiblingLatches, Siblings
from proxy.settings import Settings, parse_upstream
from proxy.state.latches import SNAPSHOT_VERSION
from tests.fakeupstream import FakeUpstream

Worker = tuple[Proxy, Siblings]
StartWorker = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def worker(fake: FakeUpstream) -> AsyncIterator[StartWorker]:
    # Not tmp_path: a unix socket's path is limited to ~100 bytes, and pytest's are long.
    runtime = Path(tempfile.mkdtemp(prefix="lg-"))
    started: list[tuple[web.AppRunner, Siblings]] = []

    async def _start(index: int, count: int = 2, state_url: str | None = None) -> Worker:
        settings = Settings(
            upstreams=[
                parse_upstream({"name": "up", "base_url": fake.url, "kind": "generic"}, "up")
            ],
            port=0,
            probe_interval=3600,
            workers=count,
            state_url=state_url,
        )
        siblings = Siblings(runtime, index, count)
        runner, _ = await start(settings, siblings=siblings)
        await siblings.open()
        started.append((runner, siblings))
        return runner.app[PROXY_KEY], siblings

    yield _start
    for runner, siblings in started:
        await runner.cleanup()
        await siblings.close()
    shutil.rmtree(runtime, ignore_errors=True)


def _latch(proxy: Proxy, model: str = "m") -> str:
    """Latch `legacy_token_limit` for `model` on the proxy's upstream, as a refusal would."""
    eid = next(iter(proxy.upstreams.values())).endpoint_id
    snapshot = {
        "version": SNAPSHOT_VERSION,
        "endpoints": {eid: {"since": 1.0, "models": {model: {"legacy_token_limit": False}}}},
    }
    assert proxy.store.merge_snapshot(snapshot) == []
    return eid


def _models(proxy: Proxy, eid: str) -> dict[str, Any]:
    models: dict[str, Any] = (
        proxy.store.snapshot_of(eid)["endpoints"].get(eid, {}).get("models", {})
    )
    return models


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not check():
            await asyncio.sleep(0.01)


async def test_a_latch_learned_reaches_the_sibling(worker: StartWorker) -> None:
    (a, siblings), (b, _) = await worker(0), await worker(1)
    assert a.sync is siblings.latches and b.sync is not a.sync
    eid = _latch(a)
    a.sync.learned(eid)
    await _until(lambda: eid in b.store.endpoint_ids())
    assert b.store.snapshot_of(eid)["endpoints"][eid]["models"]["m"]["legacy_token_limit"] is False


async def test_a_reset_and_an_expiry_reach_the_sibling(worker: StartWorker) -> None:
    (a, _), (b, _) = await worker(0), await worker(1)
    eid = _latch(a, "m")
    _latch(a, "n")
    a.sync.learned(eid)
    await _until(lambda: len(_models(b, eid)) == 2)
    a.store.reset(eid, "m")
    a.sync.forgot(eid, "m")
    await _until(lambda: set(_models(b, eid)) == {"n"})
    a.store.expire(0.0, now=10.0)
    a.sync.expired(0.0, 10.0)  # "since": 1.0 is older than 10.0 - 0
    await _until(lambda: eid not in b.store.endpoint_ids())


async def test_a_worker_starting_takes_the_siblings_latches(worker: StartWorker) -> None:
    a, _ = await worker(0, count=3)
    eid = _latch(a)
    # Worker 1 starts after the latch, worker 2 never does: it is skipped, not waited for long.
    b, _ = await worker(1, count=3)
    assert eid in b.store.endpoint_ids()


async def test_one_scrape_sums_the_siblings(worker: StartWorker) -> None:
    (a, siblings), (b, _) = await worker(0), await worker(1)
    for proxy, count in ((a, 2), (b, 3)):
        for _ in range(count):
            proxy.metrics.request_done(
                upstream="up", model="m", route="chat", stream=False, status=200,
                duration=0.1, overhead=0.0,
            )  # fmt: skip
    _latch(a)
    _latch(b)
    a.refresh_latch_gauge()
    own, _ = a.metrics.render()
    merged = await siblings.metrics.merged(own)
    families = {f.name: f for f in text_string_to_metric_families(merged.decode())}
    assert sum(s.value for s in families["latchgate_requests"].samples) == 5
    assert [s.value for s in families["latchgate_latches"].samples] == [1.0]
    assert families["latchgate_workers"].samples[0].value == 2


async def test_a_silent_sibling_is_left_out_of_the_scrape(worker: StartWorker) -> None:
    a, siblings = await worker(0, count=3)
    own, _ = a.metrics.render()
    merged = await siblings.metrics.merged(own)
    families = {f.name: f for f in text_string_to_metric_families(merged.decode())}
    assert families["latchgate_workers"].samples[0].value == 1


async def test_with_a_state_backend_latches_are_left_to_it(worker: StartWorker) -> None:
    a, siblings = await worker(0, state_url="redis://127.0.0.1:1/0")
    # (whatever carries them then is not ours: the proxy's own sync is left as it was)
    assert siblings.latches is None and not isinstance(a.sync, SiblingLatches)
    assert a.metrics_peers is siblings.metrics
