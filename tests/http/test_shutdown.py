"""Shutting down: requests in flight get a grace period; those that outlast it end with an error
the SDK raises, never a cut connection, and a stalled stream no longer holds the shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.conftest import StartProxy
from tests.fakeupstream import FakeUpstream, Hang, Stream, chunk, text_stream

MSG = [{"role": "user", "content": "Hi"}]
ROOT = Path(__file__).resolve().parents[2]


def stalled_stream() -> Stream:
    return Stream([chunk({"role": "assistant", "content": "Hel"})], then="hang")


async def read_all(url: str, body: dict[str, object]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as s, s.post(url, json=body) as resp:
        return resp.status, await resp.read()


async def started(fake: FakeUpstream, count: int) -> None:
    while len(fake.requests) < count:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
async def test_a_stalled_stream_is_ended_with_an_error_after_the_grace(
    fake: FakeUpstream, start_proxy: StartProxy, path: str
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "idle_timeout": 3600},
        shutdown_grace=0.3,
    )
    if path == "/completions":
        first = {"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]}
        fake.push(Stream([b"data: " + orjson.dumps(first) + b"\n\n"], then="hang"))
    else:
        fake.push(stalled_stream())
    body = {"model": "m", "messages": MSG, "prompt": "Hi", "stream": True}
    reader = asyncio.create_task(read_all(lg.base_url + path, body))
    await started(fake, 1)
    await asyncio.sleep(0.1)  # the first event is relayed
    await lg.runner.cleanup()
    status, raw = await reader
    assert status == 200
    assert b"Hel" in raw
    last = [e for e in raw.split(b"\n\n") if e][-1]
    error = orjson.loads(last[len(b"data: ") :])["error"]
    assert error["code"] == "proxy_shutting_down"
    assert fake.cancelled_at  # the upstream request was cancelled too


async def test_a_whole_request_still_waiting_gets_a_503(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, shutdown_grace=0.2
    )
    fake.push(Hang())
    reader = asyncio.create_task(
        read_all(lg.base_url + "/chat/completions", {"model": "m", "messages": MSG})
    )
    await started(fake, 1)
    await lg.runner.cleanup()
    status, raw = await reader
    assert status == 503
    assert orjson.loads(raw)["error"]["code"] == "proxy_shutting_down"


async def test_requests_that_finish_within_the_grace_are_not_interrupted(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, shutdown_grace=30
    )
    fake.push(text_stream("Hel", "lo", delay=0.2))
    reader = asyncio.create_task(
        read_all(lg.base_url + "/chat/completions", {"model": "m", "messages": MSG, "stream": True})
    )
    await started(fake, 1)
    await lg.runner.cleanup()
    status, raw = await reader
    assert status == 200
    assert raw.endswith(b"data: [DONE]\n\n") and b'"error"' not in raw


async def test_sigterm_drains_with_the_configured_grace(fake: FakeUpstream, tmp_path: Path) -> None:
    fake.push(stalled_stream())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy",
            "--upstream",
            fake.url,
            "--kind",
            "generic",
            "--port",
            "0",
            "--state-file",
            str(tmp_path / "s.json"),
            "--shutdown-grace",
            "0.5",
            "--idle-timeout",
            "3600",
            "--log-level",
            "info",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = None
        assert proc.stderr is not None
        while port is None:
            line = await asyncio.to_thread(proc.stderr.readline)
            assert line, "latchgate exited before listening"
            if "listening" in line:
                port = orjson.loads(line)["port"]  # not a TTY: JSON lines
        reader = asyncio.create_task(
            read_all(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                {"model": "m", "messages": MSG, "stream": True},
            )
        )
        await started(fake, 1)
        await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        status, raw = await reader
        code = await asyncio.to_thread(proc.wait, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0
    assert status == 200 and b"Hel" in raw
    assert b"proxy_shutting_down" in raw
