"""A stream event ended by an odd run of newlines is relayed, never hangs the event loop.

The stream relay walks `SSEParser.feed`'s region itself; a region whose last blank line is
followed by a stray newline (an event ended by three newlines, or CRLF CRLF CRLF) once sent
that walk into an endless loop that froze the whole event loop. Run in a subprocess with a
timeout so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = r'''
import asyncio, sys
sys.path.insert(0, {root!r})
import openai
from pathlib import Path
from tests.fakeupstream import FakeUpstream, Stream
from proxy.settings import Settings, parse_upstream
from proxy.http.server import start

async def main() -> None:
    fake = await FakeUpstream().start()
    fake.push(Stream([
        b'data: {{"choices":[{{"index":0,"delta":{{"content":"Hi"}},'
        b'"finish_reason":null}}]}}' + {sep!r},
        b'data: {{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}\n\n',
        b"data: [DONE]\n\n"], delay=0.05))
    up = parse_upstream({{"name": "f", "base_url": fake.url, "kind": "generic"}}, "u")
    s = Settings(upstreams=[up], port=0, state_file=Path({state!r}), probe_interval=3600)
    runner, port = await start(s)
    c = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{{port}}/v1", api_key="x")
    out = []
    stream = await c.chat.completions.create(
        model="m", messages=[{{"role": "user", "content": "q"}}], stream=True)
    async for ch in stream:
        out.append(ch.choices[0].delta.content if ch.choices else None)
    print("RESULT", out)
    await runner.cleanup(); await fake.close()
asyncio.run(main())
'''


@pytest.mark.parametrize("sep", [b"\n\n\n", b"\r\n\r\n\r\n", b"\n\n\n\n\n"])
def test_event_ended_by_an_odd_run_of_newlines_does_not_hang(tmp_path: Path, sep: bytes) -> None:
    root = Path(__file__).resolve().parents[2]
    script = _SCRIPT.format(
        root=str(root), sep=sep, state=str(tmp_path / "s.json")
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the proxy hung relaying an event ended by {sep!r}")
    assert "RESULT ['Hi', None]" in done.stdout, done.stderr[-2000:]
