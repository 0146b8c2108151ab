"""Upstream pools against real llama-servers: cache affinity against round robin (issue 21).

Starts two llama-servers (`-c 4096 --parallel 2`, `--threads` each: two side by side on a
two-core machine need one thread each) and one latchgate in-process with two upstreams over
them, `sticky` (`affinity = true`) and `round-robin` (`affinity = false`). Then runs the
interleaved conversations of tests/e2e/test_pool_llama.py through each: `--conversations`
conversations of `--turns` turns, each with a system prompt of its own (`--system-words`, about
300 tokens at 240), one streamed request at a time, `max_tokens` 8 at temperature 0, every turn
appending a question and then the answer. Every round and mode has system prompts of its own, so
no cache carries over from one to the next.

The order of a round (`--order`): `alternate` (the default) makes each round-robin turn go to the
other server than the conversation's previous turn (sequential requests make round robin plain
alternation; the order rotates by one each round when the count is even); `shuffle` is a random
order each round (`--seed`), where about half of the round-robin turns land on the server of the
previous turn.

Prints a Markdown table per mode: the prompt-cache hit rate over turns 2 and later (llama.cpp's
`timings`: sum(cache_n) / sum(cache_n + prompt_n)), the time to the first content (mean and
median, all turns and turns 2 and later) and the total time. Needs `bash
scripts/install-llama.sh` first. From the project root:

    .venv/bin/python bench/bench_pool_llama.py [--conversations 8 --turns 4 --rounds 1]

and copy the printed table into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.observe import logs  # noqa: E402
from tests.e2e.conftest import find_binary, model_path  # noqa: E402
from tests.e2e.test_pool_llama import (  # noqa: E402
    CONTEXT,
    MAX_TOKENS,
    MODES,
    SLOTS,
    Phase,
    Turn,
    latchgate,
    llama_pool,
    run_phase,
)


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return platform.processor() or "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _mean(xs: list[float]) -> str:
    return f"{statistics.fmean(xs):.2f} s" if xs else "—"


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s" if xs else "—"


def _row(mode: str, phases: list[Phase]) -> str:
    turns: list[Turn] = [t for p in phases for t in p.turns]
    merged = Phase(mode, turns, sum(p.seconds for p in phases))
    first, later = merged.ttfts(), merged.ttfts(2)
    later_turns = merged.later()
    cached = sum(t.cache_n for t in later_turns)
    processed = sum(t.prompt_n for t in later_turns)
    return (
        f"| {mode} | {len(turns)} | {merged.hit_rate():.1%} | {cached:,} / {cached + processed:,}"
        f" | {_mean(first)} | {_median(first)} | {_mean(later)} | {_median(later)}"
        f" | {merged.seconds:.1f} s |"
    )


async def bench(args: argparse.Namespace) -> str:
    binary, model = find_binary(), model_path()
    if binary is None or not model.is_file():
        raise SystemExit("llama-server or the model is missing: run bash scripts/install-llama.sh")
    logs.configure("warning")  # one info line per request would bury the progress lines
    results: dict[str, list[Phase]] = {mode: [] for mode in MODES}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        with llama_pool(binary, model, directory, threads=args.threads) as servers:
            async with latchgate(servers, directory / "state.json") as lg:
                for rnd in range(args.rounds):
                    # Alternate which mode goes first, should one round warm anything for the next.
                    modes = MODES if rnd % 2 == 0 else MODES[::-1]
                    for mode in modes:
                        # Both modes of a round get the same orders.
                        shuffle = (
                            random.Random(f"{args.seed}/{rnd}") if args.order == "shuffle" else None
                        )
                        phase = await run_phase(
                            lg,
                            mode,
                            tag=f"{mode}-{rnd}",
                            conversations=args.conversations,
                            turns=args.turns,
                            shuffle=shuffle,
                            system_words=args.system_words,
                            verbose=args.verbose,
                        )
                        results[mode].append(phase)
                        print(f"round {rnd + 1}: {phase.line()}", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - t0
    command = " ".join([".venv/bin/python", f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    lines = [
        "| mode | requests | hit rate (turns ≥ 2) | cached / prompt tokens (turns ≥ 2) "
        "| TTFT mean | TTFT median | TTFT mean, turns ≥ 2 | TTFT median, turns ≥ 2 "
        "| total time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(_row(mode, results[mode]) for mode in MODES),
        "",
        f"- {args.conversations} conversations x {args.turns} turns x {args.rounds} round(s) per "
        f"mode, order `{args.order}`"
        + (f" (seed {args.seed})" if args.order == "shuffle" else "")
        + f", system prompts of {args.system_words} words, max_tokens {MAX_TOKENS}, "
        "temperature 0, streamed, one request at a time",
        f"- servers: 2 x llama-server `-c {CONTEXT} --parallel {SLOTS} -t {args.threads}`, "
        f"model `{model.name}`",
        f"- machine: {os.cpu_count()} CPUs (nproc), {_cpu_model()}, Python "
        f"{platform.python_version()}; {datetime.date.today().isoformat()}; {elapsed:.0f} s in all",
        f"- command: `{command}`",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1, help="repeat both modes N times")
    parser.add_argument("--order", choices=("alternate", "shuffle"), default="alternate")
    parser.add_argument("--seed", type=int, default=21, help="for --order shuffle")
    parser.add_argument("--system-words", type=int, default=240)
    parser.add_argument("--threads", type=int, default=1, help="llama-server -t, each")
    parser.add_argument("--verbose", action="store_true", help="print every turn")
    args = parser.parse_args()
    if args.conversations < 1 or args.turns < 2 or args.rounds < 1:
        parser.error("need at least 1 conversation, 2 turns and 1 round")
    print(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
