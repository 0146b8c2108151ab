"""The HTTP server alone: what aiohttp's server costs a request, against a minimal one.

Issue 17's streamed tools cases stay under their targets by a few tens of µs a request, spread
over latchgate's own Python (bench/RESULTS.md). The largest single piece of a request that is not
latchgate's is aiohttp's server: accepting the request, building its `Request`, routing, the
response's headers, chunked writing. The bare relay pays it too, so a leaner server is the one
change that would move every ratio at once. This measures how much there is to win before anyone
writes one: each server below answers `POST /v1/chat/completions` with the bench's streamed
answer (bench/upstream.py, text, 19 events), read and written as latchgate does (the request
body read whole; the answer as an event stream, chunked, its headers going out with the body in
one send), and wrk loads it as bench_proxy.py loads the proxies.

- `aiohttp`: a `web.Application` run as latchgate runs its own (AppRunner, handler
  cancellation, no access log), one route, a `StreamResponse` written once at its end.
- `aiohttp-lowlevel`: aiohttp's `web.Server` with the same handler: no application, router or
  middleware chain. latchgate's forwarded routes come close to this (`http.app.direct_dispatch`
  hands aiohttp's server their coroutine without the router).
- `protocol`: an `asyncio.Protocol` that parses the request head itself (request line, headers
  into a dict, Content-Length), waits for the body, and writes the same response bytes (status
  line, the same headers, one chunk and the last) in one `transport.write`: about the least a
  Python server must do.
- `protocol-task`: the same, the answer written from a task of its own per request, as a server
  whose handlers await (an upstream, a slow client) must run them: the floor for a lean server
  in latchgate.

All run on uvloop when it is installed, on one core (`--server-cpu`), with wrk on the other.
With 32 connections the server's core is saturated, so µs a request is its CPU time a request;
the difference between two servers is what replacing one by the other saves every request.

    .venv/bin/python bench/bench_server.py
    .venv/bin/python bench/bench_server.py --duration 5 --rounds 5 --connections 1,32
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_proxy as bp
import upstream as fake
from aiohttp import web

SERVERS = ("aiohttp", "aiohttp-lowlevel", "protocol-task", "protocol")
ANSWER = fake.sse_body("text")
HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


# -- the servers ----------------------------------------------------------------------------


class _OneSend(web.StreamResponse):
    """As latchgate's `path.client._Relayed`: the headers go out with the first write."""

    _send_headers_immediately = False


async def handle(request: web.BaseRequest) -> web.StreamResponse:
    await request.read()
    resp = _OneSend(status=200, headers=HEADERS)
    resp.headers["X-Request-Id"] = "bench"
    await resp.prepare(request)
    await resp.write_eof(ANSWER)
    return resp


async def serve_aiohttp(port: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
    await asyncio.Event().wait()


async def serve_lowlevel(port: int) -> None:
    server = web.Server(handle, handler_cancellation=True, access_log=None)
    await asyncio.get_running_loop().create_server(server, "127.0.0.1", port, backlog=1024)
    await asyncio.Event().wait()


_RESPONSE = (
    b"HTTP/1.1 200 OK\r\n"
    + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in HEADERS.items())
    + b"X-Request-Id: bench\r\nTransfer-Encoding: chunked\r\n\r\n"
)


class Minimal(asyncio.Protocol):
    """One keep-alive connection: requests parsed and answered one after another."""

    in_task = False  # answer from a task per request (`protocol-task`)

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (taken := fake.take_request(self.buffer)) is not None:
            head, body, self.buffer = taken
            if self.in_task:
                asyncio.get_running_loop().create_task(self.answer_later(head, body))
            else:
                self.answer(head, body)

    async def answer_later(self, head: bytes, body: bytes) -> None:
        self.answer(head, body)

    def answer(self, head: bytes, body: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        assert self.transport is not None
        if method != "POST" or path != "/v1/chat/completions":
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        self.transport.write(b"%s%x\r\n%s\r\n0\r\n\r\n" % (_RESPONSE, len(ANSWER), ANSWER))


class InTask(Minimal):
    in_task = True


async def serve_protocol(port: int, protocol: type[Minimal] = Minimal) -> None:
    await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", port, backlog=1024)
    await asyncio.Event().wait()


async def serve_protocol_task(port: int) -> None:
    await serve_protocol(port, InTask)


def serve(kind: str, port: int) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    servers = {
        "aiohttp": serve_aiohttp,
        "aiohttp-lowlevel": serve_lowlevel,
        "protocol-task": serve_protocol_task,
    }
    asyncio.run(servers.get(kind, serve_protocol)(port))


# -- the load -------------------------------------------------------------------------------


def measure(args: argparse.Namespace, kind: str, script: Path, run_dir: Path) -> list[float]:
    """Requests a second for `kind` at each of `args.connections`."""
    place = bp.Placement(args.server_cpu, args.load_cpu, args.nice)
    port = bp.free_port()
    cmd = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    with bp.running(cmd, port, run_dir / f"{kind}.log", place.preexec(args.server_cpu)):
        bp.run_wrk(args.wrk, script, url, 32, 1, place)  # warm up
        check = bp.fetch(port, "/v1/chat/completions", bp.request_body("stream"))
        if check != (200, ANSWER):
            raise RuntimeError(f"{kind} answered {check[0]}, not the bench's stream")
        out = []
        for connections in args.connections:
            raw = bp.run_wrk(args.wrk, script, url, connections, args.duration, place)
            out.append(raw["requests"] / (raw["duration_us"] / 1e6))
        return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=int, default=3, help="seconds of load a measurement (3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, servers alternating (3)")
    p.add_argument("--connections", default="1,32", help="wrk connections, comma-separated")
    p.add_argument("--server-cpu", type=int, default=1, help="core for the server (-1: any)")
    p.add_argument("--load-cpu", type=int, default=0, help="core for wrk (-1: any)")
    p.add_argument("--nice", type=int, default=0, help="niceness for both (root: below 0)")
    p.add_argument("--wrk", default="wrk")
    p.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.connections = [int(c) for c in args.connections.split(",")]
    args.server_cpu = None if args.server_cpu < 0 else args.server_cpu
    args.load_cpu = None if args.load_cpu < 0 else args.load_cpu
    return args


def main() -> None:
    args = parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    rates: dict[str, list[list[float]]] = {kind: [] for kind in SERVERS}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        script = run_dir / "load.lua"
        script.write_text(bp.wrk_script(bp.request_body("stream")))
        for _ in range(args.rounds):
            for kind in SERVERS:
                rates[kind].append(measure(args, kind, script, run_dir))
    print(f"# streamed answer ({len(ANSWER)} bytes), medians of {args.rounds} rounds")
    print("| server | " + " | ".join(f"{c} conn. req/s (range)" for c in args.connections), end="")
    print(" | µs a request at the last |")
    print("| --- |" + " ---: |" * (len(args.connections) + 1))
    for kind in SERVERS:
        cells: list[Any] = []
        for i in range(len(args.connections)):
            values = [r[i] for r in rates[kind]]
            cells.append(
                f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"
            )
        per = 1e6 / statistics.median(r[-1] for r in rates[kind])
        print(f"| {kind} | " + " | ".join(cells) + f" | {per:.1f} |")


if __name__ == "__main__":
    main()
