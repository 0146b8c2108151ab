"""Self-healing tool calls on a real llama-server: valid-call rate and latency, four ways at once.

Healing sends a failed tool turn back to the model once (an undeclared tool, arguments that do
not parse or validate, or no call where `tool_choice` demanded one). Whether that pays off on a
small model, and what it costs in time, can only be measured on the real thing, so this runs
every turn of tests/e2e/tool_turns.py, interleaved turn by turn so load from elsewhere hits each
column alike, through:

- (a) `direct`: straight to llama-server (jinja templates on, as the e2e tests run it);
- (b) `off`: through latchgate with the upstream option `heal_retries = 0`;
- (c) `on`: through latchgate with `heal_retries = 1`;
- (d) `nojinja`: a second llama-server started with `--no-jinja`, which refuses `tools`
  ("tools param requires --jinja flag"), through latchgate, which is to emulate tools there.

`heal_retries` is passed as an ordinary `[[upstreams]]` key through `parse_upstream`, so the
script needs no change once the option exists. Until then parse_upstream rejects it: (b) then
runs latchgate without the key (no healing exists, so it is off), (c) is reported as "n/a: not
built yet", and (d) runs without it and shows what latchgate does today.

Needs `bash scripts/install-llama.sh` (set LATCHGATE_MODEL_DIR when the model is not under
this tree's .cache/models, e.g. in a git worktree). From the project root (2 idle CPUs:
about 3 minutes for whole turns, twice that with --streamed):

    .venv/bin/python bench/bench_healing.py [--streamed] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.http.server import start  # noqa: E402
from proxy.observe import logs  # noqa: E402
from proxy.settings import ConfigError, Settings, parse_upstream  # noqa: E402
from tests.e2e.conftest import (  # noqa: E402
    MEMORY_CAP_KB,
    LlamaServer,
    find_binary,
    free_port,
    model_path,
    stop,
    wait_healthy,
)
from tests.e2e.tool_turns import TURNS, Outcome, ToolTurn, rate, run_turn  # noqa: E402

MODES = ("direct", "off", "on", "nojinja")
LABELS = {"direct": "(a) direct", "off": "(b) latchgate, heal_retries=0",
          "on": "(c) latchgate, heal_retries=1", "nojinja": "(d) --no-jinja via latchgate"}
NOT_BUILT = "n/a: not built yet"


@contextmanager
def llama(binary: Path, model: Path, log: Path, jinja: bool) -> Iterator[LlamaServer]:
    """llama-server as the e2e tests start it (-c 4096 --parallel 2 -t 2), jinja on or off.

    Jinja is this build's default; it is passed either way so an older build, where it was
    off by default, measures the same thing.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", "4096", "--parallel", "2", "-t", "2", "--no-ui",
            "--jinja" if jinja else "--no-jinja"]
    command = ["bash", "-c", f"ulimit -v {MEMORY_CAP_KB}; exec {shlex.join(args)}"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_healthy(proc, url, log)
        yield LlamaServer(url=url, binary=binary, model=model, log=log)
    finally:
        stop(proc)


def upstream(base_url: str, heal_retries: int | None) -> Any:
    """The `[[upstreams]]` table, with `heal_retries` when given; ConfigError if unknown."""
    raw: dict[str, Any] = {"name": "llama", "base_url": base_url, "kind": "llama.cpp"}
    if heal_retries is not None:
        raw["heal_retries"] = heal_retries
    return parse_upstream(raw, "upstreams[0]")


def heal_option_exists() -> bool:
    try:
        upstream("http://127.0.0.1:1/v1", 0)
    except ConfigError:
        return False
    return True


@dataclass
class Column:
    """One mode's outcomes, per (turn name, streamed) and round."""

    note: str = ""
    results: dict[tuple[str, bool], list[Outcome]] = field(default_factory=dict)

    def all(self, stream: bool | None = None) -> list[Outcome]:
        return [o for (_, s), got in self.results.items() if stream in (None, s) for o in got]


async def _measure(clients: dict[str, openai.AsyncOpenAI], turns: list[ToolTurn],
                   streams: list[bool], rounds: int, columns: dict[str, Column]) -> float:
    t0 = time.monotonic()
    for _ in range(rounds):
        for turn in turns:
            for stream in streams:
                for mode, client in clients.items():
                    got = await run_turn(client, turn, stream=stream)
                    columns[mode].results.setdefault((turn.name, stream), []).append(got)
                    print(f"{turn.name} {'streamed' if stream else 'whole'} {mode}: "
                          f"{'ok' if got.ok else got.problems[0][:60]} {got.seconds:.1f} s",
                          file=sys.stderr, flush=True)
    return time.monotonic() - t0


async def bench(streams: list[bool], rounds: int) -> str:
    binary, model = find_binary(), model_path()
    if binary is None or not model.is_file():
        raise SystemExit("llama-server or the model is missing: run bash scripts/install-llama.sh")
    logs.configure("warning")
    built = heal_option_exists()
    columns = {mode: Column() for mode in MODES}
    if not built:
        columns["off"].note = "no heal_retries option yet: latchgate as it is (no healing)"
        columns["on"].note = NOT_BUILT
        columns["nojinja"].note = "no heal_retries option yet: latchgate as it is"
    with tempfile.TemporaryDirectory() as tmp, \
            llama(binary, model, Path(tmp) / "jinja.log", jinja=True) as server, \
            llama(binary, model, Path(tmp) / "nojinja.log", jinja=False) as plain:
        configs = {"off": upstream(server.base_url, 0 if built else None),
                   "nojinja": upstream(plain.base_url, 1 if built else None)}
        if built:
            configs["on"] = upstream(server.base_url, 1)
        async with AsyncExitStack() as stack:
            clients = {"direct": openai.AsyncOpenAI(base_url=server.base_url, api_key="x",
                                                    max_retries=0)}
            for mode in MODES[1:]:
                if mode not in configs:
                    continue
                runner, port = await start(Settings(
                    upstreams=[configs[mode]], port=0, probe_interval=3600,
                    state_file=Path(tmp) / f"state-{mode}.json"))
                stack.push_async_callback(runner.cleanup)
                clients[mode] = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                                                   api_key="x", max_retries=0)
            for client in clients.values():
                stack.push_async_callback(client.close)
            elapsed = await _measure(clients, TURNS, streams, rounds, columns)
    return report(columns, streams, rounds, elapsed, len(clients))


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.mean(values):+.2f} / {statistics.median(values):+.2f} s"


def _added(column: Column, direct: Column, stream: bool) -> list[float]:
    """Per turn and round, this mode's seconds minus direct's for the same turn."""
    diffs = []
    for key, got in column.results.items():
        if key[1] != stream:
            continue
        diffs += [o.seconds - d.seconds for o, d in zip(got, direct.results[key], strict=True)]
    return diffs


def _failures(results: list[Outcome]) -> str:
    kinds: dict[str, int] = {}
    for o in results:
        if o.problems:
            head = o.problems[0]
            key = head if head.startswith(("HTTP", "no ")) else head.split(":")[0]
            kinds[key] = kinds.get(key, 0) + 1
    return "; ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "-"


def summary(columns: dict[str, Column], stream: bool) -> list[str]:
    rows = ["| mode | valid calls (turns expecting one) | text-fine turns ok | median turn "
            "| added vs direct (mean / median) | failures |",
            "| --- | ---: | ---: | ---: | ---: | --- |"]
    for mode in MODES:
        column = columns[mode]
        got = column.all(stream)
        if not got:
            rows.append(f"| {LABELS[mode]} | {column.note or 'n/a'} | | | | |")
            continue
        calls = [o for o in got if o.turn.expects_call]
        texts = [o for o in got if not o.turn.expects_call]
        added = "-" if mode == "direct" else _seconds(_added(column, columns["direct"], stream))
        median = statistics.median(o.seconds for o in got)
        rows.append(
            f"| {LABELS[mode]} | {sum(o.ok for o in calls)}/{len(calls)} "
            f"({100 * rate(got):.0f}%) | {sum(o.ok for o in texts)}/{len(texts)} "
            f"| {median:.2f} s | {added} | {_failures(calls)} |")
    return rows


def per_turn(columns: dict[str, Column], stream: bool) -> list[str]:
    modes = [m for m in MODES if columns[m].all(stream)]
    rows = ["| turn | tags | call? | " + " | ".join(LABELS[m] for m in modes) + " |",
            "| --- | --- | --- |" + " --- |" * len(modes)]
    for turn in TURNS:
        cells = []
        for mode in modes:
            got = columns[mode].results[(turn.name, stream)]
            ok = sum(o.ok for o in got)
            why = next((o.problems[0] for o in got if o.problems), "")
            why = why if len(why) < 48 else why[:45] + "..."
            mean = statistics.mean(o.seconds for o in got)
            cells.append(f"{ok}/{len(got)} {mean:.1f} s" + (f" ({why})" if why else ""))
        rows.append(f"| {turn.name} | {', '.join(turn.tags)} | "
                    f"{'yes' if turn.expects_call else 'text ok'} | " + " | ".join(cells) + " |")
    return rows


def report(columns: dict[str, Column], streams: list[bool], rounds: int, elapsed: float,
           modes_run: int) -> str:
    lines: list[str] = []
    for stream in streams:
        kind = "streamed" if stream else "whole"
        lines += [f"#### {kind}", "", *summary(columns, stream), "", *per_turn(columns, stream),
                  ""]
    passes = rounds * len(streams) * modes_run
    lines += [
        *(f"- {m}: {columns[m].note}" for m in MODES if columns[m].note),
        f"- {len(TURNS)} turns ({sum(t.expects_call for t in TURNS)} expecting a call), "
        f"{rounds} round(s), temperature 0, max_tokens 128; {elapsed:.0f} s for {passes} "
        f"passes over all turns ({elapsed / passes:.0f} s a pass)",
        f"- machine: {os.cpu_count()} CPUs (nproc); llama-server -c 4096 --parallel 2 -t 2",
        f"- command: `.venv/bin/python bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="repeat every turn N times")
    parser.add_argument("--streamed", action="store_true", help="also measure streamed turns")
    args = parser.parse_args()
    streams = [False, True] if args.streamed else [False]
    print(asyncio.run(bench(streams, args.rounds)))


if __name__ == "__main__":
    main()
