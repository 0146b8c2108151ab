"""How much schema work the second request of an agent run pays, against the first.

An agent sends the same tools on every turn. The first request sanitises every schema; later
requests, whose bodies are fresh `orjson.loads` objects with identical content, should only pay
for the cache key. Run: `.venv/bin/python bench/bench_schemas.py [rounds]`.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from proxy.agent.schemas import apply_to_request, clear_caches

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "schema_corpus"
TOOLS = 40


def request_bytes() -> bytes:
    """A chat request with 40 realistic function tools (the corpus, cycled) as raw JSON."""
    schemas = [orjson.loads(p.read_bytes()) for p in sorted(CORPUS.glob("*.json"))]
    tools: list[dict[str, Any]] = []
    for i in range(TOOLS):
        schema = schemas[i % len(schemas)]
        tools.append({"type": "function", "function": {
            "name": f"tool_{i}", "description": "A realistic tool.", "parameters": schema}})
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    return orjson.dumps(body)


def timed(raw: bytes, mode: str, relaxed: bool) -> float:
    body = orjson.loads(raw)  # fresh objects, as the app would parse them; not timed
    start = time.perf_counter()
    apply_to_request(body, mode=mode, relaxed=relaxed)
    return time.perf_counter() - start


def measure(mode: str, relaxed: bool, rounds: int) -> tuple[float, float]:
    raw = request_bytes()
    firsts, seconds = [], []
    for _ in range(rounds):
        clear_caches()
        firsts.append(timed(raw, mode, relaxed))
        seconds.append(timed(raw, mode, relaxed))
    return statistics.median(firsts), statistics.median(seconds)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    print(f"{TOOLS} tools, median of {rounds} rounds")
    for mode, relaxed in (("sanitise", False), ("sanitise", True), ("passthrough", False),
                          ("passthrough", True)):
        first, second = measure(mode, relaxed, rounds)
        print(f"{mode:11} relaxed={relaxed!s:5}  first {first * 1e3:7.3f} ms  "
              f"second {second * 1e3:7.3f} ms  ratio {second / first:6.1%}")


if __name__ == "__main__":
    main()
