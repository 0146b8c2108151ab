"""Context rescue against the real llama-server and the test model (issue 20).

One scripted agent run: a system prompt, a task, then turns that each append a `read_file` call
and its result (a 5,000 to 6,000-character Python file, about 1,700 tokens), and, once the files
are read, two short follow-up exchanges. The scripted turns never depend on the model's replies,
so every run sends the same bytes. The run goes past the 8,192-token slots of `llama_wide`
(-c 16384 --parallel 2, a window latchgate discovers from /props), through three latchgates in
front of that one server, one per `on_overflow` mode:

- refuse (the default): the run stops at the window, with context_length_exceeded;
- prune (the upstream's `on_overflow`, keeping the latest two results: the default five of
  these would fill more than the window on their own): old results are cleared and every turn
  is answered;
- compact (the client's `x-latchgate-context` header, over an upstream left at refuse): the
  oldest turns are folded into a summary the model writes, and every turn is answered.

After a rewrite, the turns that re-apply the remembered plan must reach the server with the
previous turn's prompt as their prefix: llama.cpp's own `timings.cache_n` shows that cache kept.
(A turn that needs a new plan loses the cache from the first message it changes: pruning clears
only as much as the turn needs, so each further big result past the window is a new plan; that
is printed, not asserted.)

Prompt processing runs at 50 to 100 tokens a second on two cores, so the three modes share one
run (`rescue_run`), turn by turn: while the transcript fits, the three requests are the same and
the server processes each turn once. Past the window the pruned and the compacted conversations
each keep one of the server's two slots (compact goes first at the first rewrite, so its summary
request takes the idle slot rather than the one pruning is about to need). Each mode's test then
asserts on its own turns. `pytest -s` prints every turn's figures. The run takes about 7 minutes.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from proxy.http.server import start
from proxy.settings import Settings, parse_upstream
from tests.conftest import Running
from tests.e2e.conftest import LlamaServer

pytestmark = pytest.mark.e2e

WINDOW = 8192  # -c 16384 over --parallel 2
# One token: with `tools` declared, llama.cpp samples under the tool-call grammar once this model
# starts a call, about two seconds a token on two cores; the reply is not what is tested.
MAX_TOKENS = 1
READS = 6  # the run is past the window from the fifth read on
CONTEXT_HEADER = "x-latchgate-context"
MODES = ("refuse", "compact", "prune")  # the order of each turn's requests (see the docstring)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the project.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the project root"},
                },
                "required": ["path"],
            },
        },
    },
]
SYSTEM = (
    "You are a coding agent working in a Python project. Read files with the read_file "
    "tool, and answer briefly."
)
TASK = (
    f"Read src/mod1.py to src/mod{READS}.py one by one, and then say which one defines "
    "`window_limit`."
)
FOLLOW_UPS = [
    ("src/mod3.py defines `window_limit`.", "Thanks. Which of the files import math?"),
    ("All of them import math.", "Good. In one line, what does src/mod5.py do?"),
]
WORDS = (
    "config",
    "value",
    "index",
    "result",
    "buffer",
    "record",
    "parser",
    "token",
    "window",
    "stream",
    "handle",
    "cache",
    "limit",
    "state",
    "event",
    "entry",
)


def file_body(k: int) -> str:
    """src/mod{k}.py: deterministic, Python-looking, 5,000 to 6,000 characters, one per k."""
    size = 5000 + (k * 389) % 1000
    rng = random.Random(k)
    lines = [
        f'"""Helpers for stage {k} of the pipeline."""',
        "",
        "from __future__ import annotations",
        "",
        "import math",
        "",
    ]
    if k == 3:
        lines += ["def window_limit(tokens: int) -> int:", "    return min(tokens, 8192)", ""]
    n = 0
    while sum(len(line) + 1 for line in lines) < size:
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        lines += [
            f"def {a}_{b}_{k}_{n}({a}: int, {b}: int = {rng.randint(1, 99)}) -> int:",
            f'    """Return the {a} combined with the {b} ({n})."""',
            f"    total = {a} * {rng.randint(2, 9)} + {b}",
            f"    if total > {rng.randint(100, 999)}:",
            f"        return math.isqrt(total) - {rng.randint(1, 9)}",
            "    return total",
            "",
        ]
        n += 1
    return "\n".join(lines)[:size]


def read_turn(k: int) -> list[dict[str, Any]]:
    """The scripted assistant turn that reads src/mod{k}.py, and the tool's answer."""
    call_id = f"call_{k}"
    arguments = json.dumps({"path": f"src/mod{k}.py"})
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": file_body(k)},
    ]


def steps() -> list[list[dict[str, Any]]]:
    """What the client appends before each request: the reads, then the follow-ups."""
    reads = [read_turn(k) for k in range(1, READS + 1)]
    talk = [
        [{"role": "assistant", "content": said}, {"role": "user", "content": asked}]
        for said, asked in FOLLOW_UPS
    ]
    return reads + talk


@dataclass
class Turn:
    """One request of the run, as the client saw it."""

    step: int
    full: int  # the transcript's size as the client sent it, counted by the server
    status: int = 200
    code: str | None = None  # the error's code, when not answered
    message: str = ""
    told: str | None = None  # the x-latchgate-context response header
    prompt_tokens: int = 0  # what the server got, after any rewrite
    prompt_n: int = 0  # of which processed
    cache_n: int = 0  # of which taken from the slot's prompt cache
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens

    def line(self, mode: str) -> str:
        if self.status != 200:
            return (
                f"{mode:7} turn {self.step:2}  full {self.full:6,}  {self.status} "
                f"{self.code}: {self.message[:90]}"
            )
        share = self.cache_n / max(self.prompt_n + self.cache_n, 1)
        return (
            f"{mode:7} turn {self.step:2}  full {self.full:6,}  sent {self.prompt_tokens:6,}"
            f"  prompt_n {self.prompt_n:6,}  cache_n {self.cache_n:6,} ({share:4.0%})"
            f"  cached_tokens {self.cached_tokens}  header {self.told!r}"
        )


@dataclass
class Run:
    """One mode's turns, and its latchgate's counters at the end of the run."""

    turns: list[Turn] = field(default_factory=list)
    rescues: dict[tuple[str, str], float] = field(default_factory=dict)  # (action, outcome)
    overflows: dict[str, float] = field(default_factory=dict)  # where -> count


async def server_count(server: LlamaServer, messages: list[dict[str, Any]]) -> int:
    """The size of `messages` (with the tools) in tokens, as the server renders and counts it."""
    async with aiohttp.ClientSession() as http:
        body = {"messages": messages, "tools": TOOLS}
        async with http.post(f"{server.url}/apply-template", json=body) as r:
            prompt = (await r.json())["prompt"]
        async with http.post(f"{server.url}/tokenize", json={"content": prompt}) as r:
            return len((await r.json())["tokens"])


async def ask(
    client: openai.AsyncOpenAI, messages: list[dict[str, Any]], headers: dict[str, str], turn: Turn
) -> None:
    """One whole completion through latchgate, its answer read into `turn`."""
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="llama",
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            max_tokens=MAX_TOKENS,
            temperature=0,
            extra_headers=headers,
        )
    except openai.APIStatusError as exc:
        turn.status, turn.code, turn.message = exc.status_code, exc.code, exc.message
        return
    turn.told = raw.headers.get(CONTEXT_HEADER)
    data = raw.http_response.json()
    usage, timings = data.get("usage") or {}, data.get("timings") or {}
    turn.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    turn.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    turn.prompt_n = int(timings.get("prompt_n") or 0)
    turn.cache_n = int(timings.get("cache_n") or 0)


def counters(lg: Running) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """latchgate's context counters: rescues by (action, outcome), overflows by where."""
    rescues: dict[tuple[str, str], float] = {}
    overflows: dict[str, float] = {}
    for metric in lg.proxy.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "latchgate_context_rescues_total":
                key = (s.labels["action"], s.labels["outcome"])
                rescues[key] = rescues.get(key, 0.0) + s.value
            elif s.name == "latchgate_context_overflow_total":
                overflows[s.labels["where"]] = overflows.get(s.labels["where"], 0.0) + s.value
    return rescues, overflows


async def latchgate(mode: str, server: LlamaServer, state: Path) -> tuple[Running, dict[str, str]]:
    """A latchgate for `mode` and the headers its client sends: prune is the upstream's
    setting, compact the client's header over an upstream left at the default (refuse)."""
    table: dict[str, Any] = {
        "name": "llama",
        "base_url": server.base_url,
        "kind": "llama.cpp",
        "heal_retries": 0,
    }
    headers: dict[str, str] = {}
    if mode == "prune":
        table.update(on_overflow="prune", prune_keep_last=2)
    elif mode == "compact":
        headers[CONTEXT_HEADER] = "compact"
        table["compact_summary_tokens"] = 128  # a short summary: generation is slow here
    settings = Settings(
        upstreams=[parse_upstream(table, "upstreams[0]")],
        port=0,
        state_file=state,
        probe_interval=3600,
    )
    runner, port = await start(settings)
    return Running(runner, port), headers


async def run_all(server: LlamaServer, tmp: Path) -> dict[str, Run]:
    started = [await latchgate(mode, server, tmp / f"{mode}.json") for mode in MODES]
    runs = {mode: Run() for mode in MODES}
    clients = [lg.client(timeout=900) for lg, _ in started]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    try:
        for number, added in enumerate(steps(), start=1):
            messages = [*messages, *added]
            full = await server_count(server, messages)
            for mode, client, (_, headers) in zip(MODES, clients, started, strict=True):
                turns = runs[mode].turns
                if turns and turns[-1].status != 200:
                    continue  # the client's run stopped there
                turn = Turn(number, full)
                await ask(client, messages, headers, turn)
                turns.append(turn)
                print(turn.line(mode), flush=True)
        for mode, (lg, _) in zip(MODES, started, strict=True):
            runs[mode].rescues, runs[mode].overflows = counters(lg)
            print(f"{mode:7} rescues {runs[mode].rescues}  overflows {runs[mode].overflows}")
    finally:
        for client in clients:
            await client.close()
        for lg, _ in started:
            await lg.runner.cleanup()
    return runs


@pytest.fixture(scope="module")
def rescue_run(
    llama_wide: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Run]]:
    """The scripted run through the three latchgates, once for the module's tests."""
    print()
    yield asyncio.run(run_all(llama_wide, tmp_path_factory.mktemp("rescue")))


def answered(run: Run) -> list[Turn]:
    return [t for t in run.turns if t.status == 200]


def assert_within_the_window(run: Run) -> None:
    """Every request the server answered fitted its window, reply included; only the turns
    over it were rewritten, and the server got the shorter transcript."""
    for turn in answered(run):
        assert turn.prompt_tokens + MAX_TOKENS <= WINDOW, turn
        if turn.full + MAX_TOKENS <= WINDOW:
            assert turn.told is None, turn  # nothing is rewritten while the transcript fits
            assert turn.prompt_tokens == turn.full, turn
        else:
            assert turn.told is not None, turn
            assert turn.prompt_tokens < turn.full, turn


def assert_cache_kept(run: Run) -> list[Turn]:
    """On each turn that re-applied the previous turn's plan, the server found the previous
    turn's prompt (as rewritten) in its cache: the rewritten prefix was the same bytes."""
    repeated = []
    for before, turn in zip(run.turns, run.turns[1:], strict=False):
        if turn.told is None or not turn.told.endswith("(as on the previous turn)"):
            continue
        repeated.append(turn)
        assert before.status == 200 and before.told is not None, (before, turn)
        assert turn.cache_n >= 0.9 * before.prompt_tokens, (before, turn)
        assert turn.cache_n >= 0.5 * (turn.cache_n + turn.prompt_n), turn
        if turn.cached_tokens is not None:
            assert turn.cached_tokens == turn.cache_n, turn
    assert repeated, [t.told for t in run.turns]
    return repeated


def test_refuse_stops_the_run_at_the_window(rescue_run: dict[str, Run]) -> None:
    run = rescue_run["refuse"]
    stopped = [t for t in run.turns if t.status != 200]
    assert len(stopped) == 1 and run.turns[-1] is stopped[0], [t.line("refuse") for t in run.turns]
    refused = stopped[0]
    assert (refused.status, refused.code) == (400, "context_length_exceeded"), refused
    # It is the first turn over the window; every turn before it was answered as sent.
    assert refused.full + MAX_TOKENS > WINDOW, refused
    assert all(t.full + MAX_TOKENS <= WINDOW for t in run.turns[:-1]), run.turns
    assert_within_the_window(run)
    assert not [t for t in run.turns if t.told is not None]
    assert sum(run.rescues.values()) == 0, run.rescues
    assert sum(run.overflows.values()) == 1, run.overflows


def test_prune_answers_every_turn_and_keeps_the_cache(rescue_run: dict[str, Run]) -> None:
    run = rescue_run["prune"]
    assert len(run.turns) == len(steps()), run.turns
    assert all(t.status == 200 for t in run.turns), [t.line("prune") for t in run.turns]
    assert max(t.full for t in run.turns) > WINDOW + 2000  # well past the window
    assert_within_the_window(run)
    told = [t.told for t in run.turns if t.told is not None]
    assert told and all(t.startswith("pruned ") for t in told), told
    assert not [t for t in told if "folded" in t], told
    repeated = assert_cache_kept(run)
    assert run.rescues.get(("pruned", "new"), 0) >= 1, run.rescues
    assert run.rescues.get(("pruned", "repeated"), 0) == len(repeated), run.rescues
    assert run.rescues.get(("pruned", "refused"), 0) == 0, run.rescues
    # Never refused, and never sent over the window (no overflow the server had to report).
    assert sum(run.overflows.values()) == 0, run.overflows


def test_compact_folds_old_turns_and_keeps_the_cache(rescue_run: dict[str, Run]) -> None:
    run = rescue_run["compact"]
    assert len(run.turns) == len(steps()), run.turns
    assert all(t.status == 200 for t in run.turns), [t.line("compact") for t in run.turns]
    assert_within_the_window(run)
    told = [t.told for t in run.turns if t.told is not None]
    assert any("folded" in t and "messages into a summary" in t for t in told), told
    repeated = assert_cache_kept(run)
    assert run.rescues.get(("compacted", "new"), 0) >= 1, run.rescues
    assert run.rescues.get(("compacted", "repeated"), 0) == len(repeated), run.rescues
    assert run.rescues.get(("compacted", "failed"), 0) == 0, run.rescues
    assert run.rescues.get(("compacted", "refused"), 0) == 0, run.rescues
    # Never refused, and never sent over the window (no overflow the server had to report).
    assert sum(run.overflows.values()) == 0, run.overflows
