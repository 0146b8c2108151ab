"""The `latchgate` command serving for real: a subprocess in front of the fake upstream answers
the SDK, saves its latches on SIGTERM, and starts with a FIFO as its state file."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import sys
from pathlib import Path

import aiohttp
import openai
import orjson

from tests.fakeupstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_serves_and_saves_latches_on_shutdown(fake: FakeUpstream, tmp_path: Path) -> None:
    port = _free_port()
    state = tmp_path / "state.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy",
        "--upstream",
        fake.url,
        "--kind",
        "generic",
        "--port",
        str(port),
        "--state-file",
        str(state),
        "--log-level",
        "warning",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(100):
                try:
                    async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0
        )
        got = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert got.choices[0].message.content == "Hello!"
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 0
    saved = orjson.loads(state.read_bytes())
    assert saved["version"] == 1 and "endpoints" in saved


# --- issue 13 item 11: a FIFO as the state file, and leftovers of a kill -9, at start ----------


async def _wait_healthy(port: int, proc: asyncio.subprocess.Process, tries: int = 200) -> bool:
    """True once /healthz answers; False if it never does (bounded: about 10 s) or it died."""
    async with aiohttp.ClientSession() as s:
        for _ in range(tries):
            if proc.returncode is not None:
                return False
            try:
                async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return True
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
    return False


async def test_starts_with_a_fifo_as_state_file_and_cleans_leftovers(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    """A FIFO once blocked start-up forever in open(); a kill -9's temp file stayed forever."""
    port = _free_port()
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    leftover = tmp_path / ".state.json.k2j4_9xq.tmp"
    leftover.write_bytes(b'{"version": 1, "endp')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy", "--upstream", fake.url, "--kind", "generic",
        "--port", str(port), "--state-file", str(fifo), "--log-level", "warning",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        started = await _wait_healthy(port, proc)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 10)
        except TimeoutError:
            proc.kill()  # still stuck (in the FIFO's open): end it so the test reports, not hangs
            out, err = await proc.communicate()
    logged = (out + err).decode()
    assert started, f"latchgate did not start with a FIFO as its state file: {logged}"
    assert proc.returncode == 0, logged
    assert "not a regular file" in logged and "FIFO" in logged
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # neither read, moved nor replaced at shutdown
    assert not leftover.exists() and ".state.json.k2j4_9xq.tmp" in logged
    assert sorted(os.listdir(tmp_path)) == ["state.json"]
