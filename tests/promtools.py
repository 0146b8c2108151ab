"""Start a real Prometheus server for a test, scrape a running latchgate, and query it.

The dashboard is a product surface, so its PromQL is checked by Prometheus itself rather than by
a regex. Debian's `prometheus` package provides the binary; CI installs it and sets
LATCHGATE_REQUIRE_PROMETHEUS=1 so a missing binary fails there, while on a developer machine the
test skips with the install command.

Everything here is async on purpose: latchgate runs in the test's own event loop, so a blocking
HTTP call to Prometheus would stall the very /metrics endpoint Prometheus is scraping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

INSTALL = "apt-get update && apt-get install -y prometheus"
REQUIRE_ENV = "LATCHGATE_REQUIRE_PROMETHEUS"
SCRAPE_INTERVAL = 1.0


def prometheus_binary() -> str:
    """The Prometheus binary's path; skips (or fails when CI requires it) if it is missing."""
    found = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus")
    if found:
        return found
    message = f"the prometheus binary is not installed; install it with: {INSTALL}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrape_config(target: str, interval: float = SCRAPE_INTERVAL) -> str:
    """A Prometheus config scraping `target` ("127.0.0.1:port") at /metrics every `interval`."""
    return (
        "global:\n"
        f"  scrape_interval: {interval:g}s\n"
        f"  evaluation_interval: {interval:g}s\n"
        "scrape_configs:\n"
        "  - job_name: latchgate\n"
        "    metrics_path: /metrics\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )


class Prometheus:
    """A running Prometheus: its base URL and an HTTP session to query it."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))

    async def api(self, path: str, **params: str) -> dict[str, Any]:
        """GET /api/v1/<path>; the decoded JSON whatever the status (errors carry `error`)."""
        async with self.session.get(f"{self.url}/api/v1/{path}", params=params) as resp:
            body: dict[str, Any] = await resp.json(content_type=None)
            return body

    async def query(self, expr: str) -> dict[str, Any]:
        """An instant query at now: {"status": ..., "data": {"result": [...]}} or an error."""
        return await self.api("query", query=expr)

    async def ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited early:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with self.session.get(self.url + "/-/ready") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"prometheus not ready in time:\n{self.log.read_text()[-3000:]}")

    async def last_scrape(self) -> float:
        """The timestamp (Unix seconds) of the newest scrape of latchgate, or 0 before any."""
        answer = await self.query('timestamp(up{job="latchgate"} == 1)')
        result = answer.get("data", {}).get("result", [])
        return float(result[0]["value"][1]) if result else 0.0

    async def scraped_after(self, moment: float, *, scrapes: int = 1, timeout: float = 15) -> None:
        """Wait until `scrapes` scrapes have started after `moment` (a `time.time()` value)."""
        # Scrapes are `SCRAPE_INTERVAL` apart, so the newest scrape being that many intervals
        # past `moment` means the ones before it were after `moment` too.
        target = moment + (scrapes - 1) * SCRAPE_INTERVAL
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.last_scrape() > target:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"no scrape after {moment} within {timeout} s")

    async def stop(self) -> None:
        await self.session.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait, 10)


@contextlib.asynccontextmanager
async def prometheus(target: str, workdir: Path) -> AsyncIterator[Prometheus]:
    """Run Prometheus scraping `target` with its config and TSDB under `workdir`; stop it after."""
    binary = prometheus_binary()
    config = workdir / "prometheus.yml"
    config.write_text(scrape_config(target))
    log = workdir / "prometheus.log"
    port = free_port()
    args = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    server = Prometheus(proc, f"http://127.0.0.1:{port}", log)
    try:
        await server.ready(time.monotonic() + 20)
        yield server
    finally:
        await server.stop()
