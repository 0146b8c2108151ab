"""The upstream client alone: aiohttp's `ClientSession` against latchgate's transport.

`bench_proxy.py` measures whole proxies; this measures only the part that sends a request
upstream and reads the answer, which is where the two clients differ. It starts the bench's
nginx upstream (bench/upstream.py), and from one process on one core sends the same POST over
one kept-alive connection, one request after another, through each client in turn (alternating,
so drift hits both), and prints µs a round trip: the upstream's time is in both, so the
difference is the clients' own.

    .venv/bin/python bench/bench_transport.py
    .venv/bin/python bench/bench_transport.py --requests 20000 --rounds 5 --cpu 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import bench_proxy as bp
import upstream as fake

from proxy.upstreams.transport import Transport  # the package, installed with `pip install -e .`

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "User-Agent": "latchgate/bench",
}
Client = Callable[[str, bytes, int], Awaitable[float]]


async def through_aiohttp(url: str, body: bytes, n: int) -> float:
    """µs a round trip through a ClientSession configured as latchgate configured its own."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        async with session.post(url, data=body, headers=HEADERS) as resp:
            await resp.read()  # the connection is open before the clock starts
        t0 = time.perf_counter()
        for _ in range(n):
            async with session.post(url, data=body, headers=HEADERS) as resp:
                await resp.read()
        return (time.perf_counter() - t0) / n * 1e6


async def through_transport(url: str, body: bytes, n: int) -> float:
    """µs a round trip through `proxy.upstreams.transport.Transport`."""
    transport = Transport()
    resp = await transport.send("POST", url, HEADERS, body)
    await resp.read()
    resp.release()
    t0 = time.perf_counter()
    for _ in range(n):
        resp = await transport.send("POST", url, HEADERS, body)
        await resp.read()
        resp.release()
    elapsed = (time.perf_counter() - t0) / n * 1e6
    await transport.close()
    return elapsed


async def measure(port: int, args: argparse.Namespace) -> None:
    clients: dict[str, Client] = {"aiohttp": through_aiohttp, "transport": through_transport}
    for mode in ("whole", "stream"):
        url = f"http://127.0.0.1:{port}/{fake.prefix(mode)}/v1/chat/completions"
        body = bp.request_body(mode, "one")
        times: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(args.rounds):
            for name, client in clients.items():
                times[name].append(await client(url, body, args.requests))
        for name, got in times.items():
            print(
                f"{mode:6} {name:10} {statistics.median(got):7.1f} µs a round trip "
                f"(rounds {min(got):.1f}–{max(got):.1f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="a round (5000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=1, help="the core this process runs on")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    port = bp.free_port()
    with tempfile.TemporaryDirectory() as run_dir:
        cmd = fake.nginx_command(port, Path(run_dir))
        if cmd is None:
            cmd = fake.asyncio_command(port)
        server = subprocess.Popen(cmd)
        try:
            bp.wait_listening(port, server)
            try:
                import uvloop

                uvloop.run(measure(port, args))
            except ImportError:
                asyncio.run(measure(port, args))
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
