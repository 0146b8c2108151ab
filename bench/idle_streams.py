"""What open streams cost in memory: latchgate's RSS with N concurrent streams waiting mid-answer.

An agent fleet keeps many streams open at once, most of them waiting on a slow model. This
starts a fake upstream that answers every streamed chat request with its first words and then
stays silent, starts latchgate in front of it (idle timeout off), opens N streams that declare a
tool (so each holds the tool-call stream processor as well as its two connections), waits until
every one has received its first words, and reads latchgate's RSS from /proc before and during.

    .venv/bin/python bench/idle_streams.py --streams 2000

Prints the RSS before the streams, with them open, and the difference per stream. Needs a file
descriptor limit above 3 x N (this script raises its soft limit to the hard one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import bench_proxy as bp
import orjson

_FIRST = (
    b'data: {"id":"c","object":"chat.completion.chunk","model":"bench-model","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Let me think"},"finish_reason":null}]}'
    b"\n\n"
)
_MODELS = orjson.dumps({"object": "list", "data": [{"id": "bench-model", "object": "model"}]})


class _Silent(asyncio.Protocol):
    """An upstream that answers a stream with its first words and then says nothing."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if len(body) < length:
            return
        self.buffer = b""
        assert isinstance(self.transport, asyncio.Transport)
        if head.startswith(b"GET"):
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(_MODELS)).encode()
                + b"\r\n\r\n"
                + _MODELS
            )
            return
        if not head.split(b" ", 2)[1].endswith(b"/chat/completions"):
            # Window probes and the like: a server without them (else each would wait on a
            # stream that never ends).
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        chunk = b"%x\r\n%s\r\n" % (len(_FIRST), _FIRST)
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunk
        )


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def open_streams(
    port: int, count: int
) -> tuple[list[aiohttp.ClientResponse], aiohttp.ClientSession]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    body = orjson.loads(bp.request_body("stream", "one"))
    url = f"http://127.0.0.1:{port}/v1/chat/completions"

    async def one() -> aiohttp.ClientResponse:
        resp = await session.post(url, json=body)
        await resp.content.readuntil(b"\n\n")  # the first words: the stream is open
        return resp

    streams: list[aiohttp.ClientResponse] = []
    # In waves, as clients arrive: one burst of connects would overflow the listen backlog, and
    # the dropped ones wait a second for their SYN to be sent again.
    for start in range(0, count, 50):
        streams += await asyncio.gather(*(one() for _ in range(min(50, count - start))))
    return streams, session


async def main_async(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    up_port, port = bp.free_port(), bp.free_port()
    server = await loop.create_server(_Silent, "127.0.0.1", up_port, backlog=4096)
    with tempfile.TemporaryDirectory(prefix="latchgate-idle-") as tmp:
        config = Path(tmp) / "latchgate.toml"
        config.write_text(
            f'[server]\nport = {port}\nlog_level = "warning"\nstate_file = "state.json"\n\n'
            f'[[upstreams]]\nname = "silent"\nbase_url = "http://127.0.0.1:{up_port}/v1"\n'
            'kind = "generic"\nidle_timeout = 0\nfirst_token_timeout = 0\n'
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--config", str(config)], cwd=bp.ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await asyncio.to_thread(bp.wait_listening, port, proc)
            warm, session = await open_streams(port, 20)  # imports and pools: not per stream
            for resp in warm:
                resp.close()
            await session.close()
            await asyncio.sleep(1)
            before = rss_kib(proc.pid)
            t0 = time.perf_counter()
            streams, session = await open_streams(port, args.streams)
            opened = time.perf_counter() - t0
            await asyncio.sleep(2)
            during = rss_kib(proc.pid)
            print(f"streams open: {len(streams)} (in {opened:.1f} s)")
            print(f"latchgate RSS before: {before / 1024:.1f} MiB")
            print(f"latchgate RSS with them open: {during / 1024:.1f} MiB")
            print(f"per stream: {(during - before) / len(streams):.1f} KiB")
            for resp in streams:
                resp.close()
            await session.close()
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
            server.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, default=2000)
    args = p.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
