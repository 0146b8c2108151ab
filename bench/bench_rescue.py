"""What context rescue costs a request, in microseconds, on agent-sized transcripts.

Measures `proxy.path.rescue.Rescuer.fit` with the in-memory plan store (no summary: pruning and
repeating a plan are what a turn pays; a compaction's cost is the model's summary, seconds, and
is not latchgate's):

- **nothing to do**: `on_overflow` is on, the request fits and its conversation was never
  rewritten (the conversation key is computed and looked up);
- **new prune**: the request is over the window and old results are cleared;
- **repeated**: the next turn of a pruned conversation, rewritten the same way;
- for scale, the pre-flight estimate every request with a known window pays anyway.

    .venv/bin/python bench/bench_rescue.py [--turns 40] [--result-chars 8000] [--number 200]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from types import SimpleNamespace
from typing import Any

from proxy.agent.sizing import estimate_chars
from proxy.path.rescue import Budget, Options, Rescuer
from proxy.state.rescues import MemoryPlans

SYSTEM = {"role": "system", "content": "You are a coding agent. " * 400}  # ~10 KB, like Codex


def transcript(turns: int, result_chars: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Fix the failing test."}]
    body = "def f(x):\n    return x + 1\n" * (result_chars // 25 + 1)
    for k in range(turns):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{k}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "src/m{k}.py"}}'}}]},
            {"role": "tool", "tool_call_id": f"call_{k}",
             "content": (f"# m{k}\n" + body)[:result_chars]},
        ]
    return messages


async def never(job: Any, body: dict[str, Any]) -> object:
    return None


def job_for(messages: list[dict[str, Any]]) -> Any:
    return SimpleNamespace(
        body={"model": "m", "messages": messages}, client_auth="Bearer k",
        events=SimpleNamespace(model="m"),
    )


async def per_call(number: int, fn: Any) -> float:
    """Median of five runs of `number` awaits, in microseconds per call."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(number):
            await fn()
        runs.append((time.perf_counter() - t0) / number * 1e6)
    return sorted(runs)[2]


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=40)
    p.add_argument("--result-chars", type=int, default=8000)
    p.add_argument("--number", type=int, default=200)
    args = p.parse_args()
    messages = transcript(args.turns, args.result_chars)
    chars = estimate_chars(messages, None)
    tokens = math.ceil(chars / 4)
    window = 32768
    options = Options("prune")
    over = Budget(window, 0, 4.0, prompt=tokens)
    roomy = Budget(tokens * 2, 0, 4.0, prompt=tokens)

    async def nothing() -> None:
        await Rescuer(MemoryPlans(), never).fit(job_for(messages), options, roomy, needed=False)

    async def new_prune() -> None:
        await Rescuer(MemoryPlans(), never).fit(job_for(messages), options, over, needed=True)

    repeat = Rescuer(MemoryPlans(), never)
    first = await repeat.fit(job_for(messages), options, over, needed=True)
    assert first is not None and first.messages is not None and not first.repeated
    nxt = [*messages, {"role": "user", "content": "go on"}]

    async def repeated() -> None:
        await repeat.fit(job_for(nxt), options, over, needed=True)

    async def estimate() -> None:
        estimate_chars(messages, None)

    print(f"transcript: {len(messages)} messages, {chars:,} chars, ~{tokens:,} tokens; "
          f"window {window:,}; pruned to ~{first.after:,} tokens ({len(first.plan.pruned)} "
          "results cleared)")
    print("| case | µs per request |")
    print("| --- | ---: |")
    for name, fn in (("pre-flight estimate (every request with a known window)", estimate),
                     ("rescue on, nothing to do", nothing),
                     ("new prune", new_prune),
                     ("repeated plan (the next turn)", repeated)):
        print(f"| {name} | {await per_call(args.number, fn):,.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
