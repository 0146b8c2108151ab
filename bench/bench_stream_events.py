"""The tools stream's own work, without sockets: what `StreamRelay` does with each event.

`bench_proxy.py` sees a whole request through the network and the event loop; its profiles under
load (py-spy) spread a few µs over many frames. This runs only the stream relay's synchronous
part on the bench's own answers (bench/upstream.py): the events of one read walked, passed or
held (`StreamRelay._events`), with the stream processor a request declaring get_weather gets
(`StreamToolProcessor` behind `reask.holder`), then its end and the settling. Each event's time
is reported by what it is, medians over many streams, and beside it the same stream with no tools
(the skim). The figures run about 1.4 times py-spy's µs under load (no other requests between
them to warm the caches, and Python's timer around each event).

    .venv/bin/python bench/bench_stream_events.py
    .venv/bin/python bench/bench_stream_events.py --answer textcall --streams 20000
    LATCHGATE_PURE=1 .venv/bin/python bench/bench_stream_events.py   # the sources

With the compiled build (proxy/compiled.py) the events are timed together: a compiled class's
methods cannot be wrapped to time them one by one.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import upstream as fake

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.unit.path.fakes
from proxy import compiled
from proxy.http.server import GC_THRESHOLDS  # the package, installed with `pip install -e .`
from proxy.path import reask, stream_relay
from proxy.path.deadlines import Deadlines
from proxy.path.job import Job
from proxy.path.sending import Sender
from proxy.path.stream_relay import StreamRelay
from proxy.toolcalls.stream import StreamToolProcessor
from tests.unit.path.fakes import FakeLayer, FakeUpstream, Wire, client_request, make_job

TOOL = {
    "type": "function",
    "function": {
        "name": fake.CALL_NAME,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
LIMIT = 256 * 1024


class ToolsLayer(FakeLayer):
    """The agent layer's stream processor and settling for a request declaring one tool."""

    def stream_processor(self, job: Job) -> Any:
        return reask.holder(job, StreamToolProcessor([TOOL], holdback_limit=LIMIT), LIMIT)

    def settle_stream(self, job: Job, unsent: list[bytes], tail: list[dict[str, Any]]) -> Any:
        return reask.settle_stream(job, unsent, tail)


def kind(block: bytes) -> str:
    """What an event is, for the report."""
    kinds = ((b'"role"', "role"), (b'"finish_reason":"', "finish"), (b"[DONE]", "done"))
    for needle, name in kinds:
        if needle in block:
            return name
    return "text or fragment (walked)"


def timed(tools: bool, body: bytes, streams: int) -> dict[str, list[float]]:
    """µs a stream by part, over `streams` streams of `body`."""
    times: dict[str, list[float]] = defaultdict(list)
    if compiled.is_compiled(stream_relay):
        # A compiled class's methods cannot be wrapped: the stream's parts alone are timed.
        asyncio.run(_run(tools, body, streams, times))
        return times
    walk, passing = StreamRelay._walk, StreamRelay._pass_texts
    clock = time.perf_counter

    def walked(self: StreamRelay, block: bytes, batch: list[bytes]) -> Any:
        t0 = clock()
        out = walk(self, block, batch)
        times[f"walk: {kind(block)}"].append(clock() - t0)
        return out

    def passed(self: StreamRelay, region: bytes, pos: int, batch: list[bytes]) -> int:
        t0 = clock()
        end = passing(self, region, pos, batch)
        times["pass: run of texts" if end > pos else "pass: nothing"].append(clock() - t0)
        return end

    StreamRelay._walk, StreamRelay._pass_texts = walked, passed  # type: ignore[method-assign]
    try:
        asyncio.run(_run(tools, body, streams, times))
    finally:
        StreamRelay._walk, StreamRelay._pass_texts = walk, passing  # type: ignore[method-assign]
    return times


async def _run(tools: bool, body: bytes, streams: int, times: dict[str, list[float]]) -> None:
    layer = ToolsLayer() if tools else FakeLayer()
    upstream, request = FakeUpstream(), client_request(Wire())
    # Real ones, never used here (nothing is sent or waited for): compiled, the relay takes no
    # stand-ins for them.
    deadlines = Deadlines()
    sender = Sender(layer, deadlines, lambda job, outcome: None)
    for _ in range(streams):
        job = make_job(upstream, stream=True)
        if tools:
            job.body["tools"] = [TOOL]
        relay = StreamRelay(layer, sender, deadlines, request, job)
        t0 = time.perf_counter()
        relay.processor = layer.stream_processor(job)
        t1 = time.perf_counter()
        batch, _ = relay._events(relay.parser.feed(body))
        t2 = time.perf_counter()
        if relay.processor is not None:
            layer.settle_stream(job, batch, relay.processor.finish())
        t3 = time.perf_counter()
        times["processor built"].append(t1 - t0)
        times["events, in all"].append(t2 - t1)
        times["end and settling"].append(t3 - t2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", choices=fake.ANSWERS, default="text")
    parser.add_argument("--streams", type=int, default=10000)
    args = parser.parse_args()
    gc.set_threshold(*GC_THRESHOLDS)  # as latchgate's server runs: Python's default costs more
    body = fake.sse_body(args.answer)
    print(f"# stream/one/{args.answer}: µs a stream, medians of {args.streams} (the last 3/4)")
    print(f"# build of the hot modules: {compiled.build}")
    for tools in (False, True):
        print(f"\n{'one tool declared' if tools else 'no tools (the skim)'}")
        for part, values in timed(tools, body, args.streams).items():
            kept = values[len(values) // 4 :]
            per = len(values) / args.streams
            print(f"  {statistics.median(kept) * 1e6:7.1f}  x{per:.0f}  {part}")


if __name__ == "__main__":
    main()
