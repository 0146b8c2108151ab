"""An upstream pool of two real llama-servers (issue 21): cache affinity, and a member lost.

Two llama-servers (`-c 4096 --parallel 2`, one thread each: the machine has two cores) stand
behind one latchgate as two upstreams over the same two servers: `sticky` (`affinity = true`,
the default) and `round-robin` (`affinity = false`), each reached by the model of its name.

- **Cache affinity.** Six interleaved conversations of four turns, each with a system prompt of
  its own of about 300 tokens (so a turn on a server without the conversation's prefix pays a
  prefill of the whole of it), `max_tokens` 8 at temperature 0, streamed through the `openai`
  SDK, first through `round-robin` and then through `sticky`, with different system prompts so
  no cache carries over from one phase to the next. llama.cpp's `timings` in each answer (which
  latchgate passes through) give the prompt tokens taken from the cache (`cache_n`) and those
  processed (`prompt_n`); the hit rate over turns 2 and later is sum(cache_n) / sum(cache_n +
  prompt_n). Sequential requests make round robin plain alternation, and with an even number
  of conversations in a fixed order alternation would send each conversation back to its own
  server every turn; so the order rotates by one each round, and each round-robin turn goes to
  the other server: the worst case for round robin, as it promises nothing about where a turn
  goes. With affinity every turn goes back to its conversation's server and slot. The test
  asserts on where turns went and on the hit rates (not on speed: the machine is shared), and
  prints them with the time to first token (`pytest -s`).
- **A member lost.** Three clients each run a conversation of four streamed turns at once
  while one server is killed (SIGKILL) with a request of latchgate's in flight on it, still in
  its prefill. Every request that had not started streaming when the server died is answered
  in full (through the other server), and none gets a 5xx.

The servers are started once for the module; each test starts its own latchgate in-process.
bench/bench_pool_llama.py runs the same conversations at other sizes and prints a table.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest

from proxy.http.server import start
from proxy.settings import Settings, parse_upstream
from proxy.upstreams.pool import Pool
from tests.conftest import Running
from tests.e2e.conftest import _installed, free_port, server_command, stop, wait_healthy
from tests.e2e.test_llama import metrics, total

pytestmark = pytest.mark.e2e

CONTEXT = 4096  # over --parallel 2 (server_command's): 2,048 tokens a slot
SLOTS = 2
MAX_TOKENS = 8
CONVERSATIONS = 6
TURNS = 4
STICKY = "sticky"  # the upstream with cache affinity, and the model routed to it
ROUND_ROBIN = "round-robin"  # the one without
MODES = (ROUND_ROBIN, STICKY)  # the phases' order (see the module docstring)
SETTLE_TIMEOUT = 30.0  # seconds for latchgate to see every member healthy, with its slots
CLIENT_TIMEOUT = 300.0

WORDS = (
    "parser", "token", "window", "stream", "handle", "cache", "limit", "state", "event",
    "entry", "config", "value", "index", "result", "buffer", "record", "module", "schema",
    "request", "answer", "server", "client", "thread", "queue", "signal", "worker", "report",
    "format", "header", "socket", "retry", "budget", "latency", "replica", "shard", "ledger",
    "invoice", "customer", "order", "payment", "refund", "export", "import", "backup",
    "migration", "release", "branch", "commit", "review", "deploy", "monitor", "alert",
)  # fmt: skip
QUESTIONS = (
    "In one short sentence, what does this project do?",
    "Which part of it should I read first?",
    "Name one risk the notes mention.",
    "What would you test before the next release?",
    "Which module is most likely to break?",
    "Give the project a one-word codename.",
)


# -- the servers ----------------------------------------------------------------------------


@dataclass
class Server:
    """One llama-server of the pool, on a port of its own, that a test may kill and restart."""

    binary: Path
    model: Path
    port: int
    log: Path
    threads: int = 1
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def member(self) -> str:
        """Its name in latchgate's pool (host:port, the default label)."""
        return f"127.0.0.1:{self.port}"

    def launch(self) -> None:
        # server_command passes `-t 2`; llama.cpp takes the last `-t` it is given.
        command = server_command(
            self.binary, self.model, self.port, CONTEXT, ("-t", str(self.threads))
        )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def wait(self) -> None:
        assert self.proc is not None
        wait_healthy(self.proc, self.url, self.log)

    def kill(self) -> None:
        """SIGKILL (server_command `exec`s llama-server, so the process is the server)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


@contextmanager
def llama_pool(
    binary: Path, model: Path, directory: Path, count: int = 2, threads: int = 1
) -> Iterator[list[Server]]:
    """`count` llama-servers side by side (loaded at once), stopped on exit."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    servers = [
        Server(binary, model, port, directory / f"llama-{i}.log", threads)
        for i, port in enumerate(ports)
    ]
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait()
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    binary, model = _installed()
    with llama_pool(binary, model, tmp_path_factory.mktemp("pool")) as started:
        yield started


# -- latchgate ------------------------------------------------------------------------------


def pool_settings(servers: Sequence[Server], state_file: Path | None) -> Settings:
    """Two upstreams over the same servers, with and without affinity."""
    urls = [s.base_url for s in servers]
    tables: list[dict[str, Any]] = [
        {"name": name, "base_urls": urls, "kind": "llama.cpp", "models": [name],
         "affinity": name == STICKY, "health_interval": 1}
        for name in (STICKY, ROUND_ROBIN)
    ]  # fmt: skip
    return Settings(
        upstreams=[parse_upstream(t, f"upstreams[{i}]") for i, t in enumerate(tables)],
        port=0,
        state_file=state_file,
        probe_interval=3600,
    )


def pools(lg: Running) -> dict[str, Pool]:
    return {name: u.pool for name, u in lg.proxy.upstreams.items() if u.pool is not None}


async def settled(lg: Running, timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait until latchgate sees every member healthy and knows its slots (from /props): only
    then does it pin conversations to slots."""
    deadline = time.monotonic() + timeout
    while True:
        members = [m for pool in pools(lg).values() for m in pool.members]
        if all(m.healthy and m.slots == SLOTS for m in members):
            return
        if time.monotonic() > deadline:
            states = [(m.name, m.healthy, m.slots, m.last_error) for m in members]
            raise AssertionError(f"pool members not ready after {timeout:.0f} s: {states}")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def latchgate(servers: Sequence[Server], state_file: Path | None) -> AsyncIterator[Running]:
    runner, port = await start(pool_settings(servers, state_file))
    lg = Running(runner, port)
    try:
        await settled(lg)
        yield lg
    finally:
        await runner.cleanup()


# -- conversations --------------------------------------------------------------------------


def prose(rng: random.Random, words: int) -> str:
    """`words` words of made-up project notes, in sentences of 6 to 14 words."""
    sentences: list[str] = []
    left = words
    while left > 0:
        n = min(left, rng.randint(6, 14))
        left -= n
        sentence = " ".join(rng.choice(WORDS) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(sentences)


def system_prompt(tag: str, k: int, words: int = 240) -> str:
    """Conversation k's system prompt (about 300 tokens at 240 words), one per (tag, k)."""
    rng = random.Random(f"{tag}/{k}")
    return (
        f"You are the assistant of project {tag}-{k}. Answer in one short sentence.\n"
        f"Project notes: {prose(rng, words)}"
    )


def question(k: int, turn: int) -> str:
    return QUESTIONS[(k + turn) % len(QUESTIONS)]


def order(n: int, rnd: int, shuffle: random.Random | None = None) -> list[int]:
    """The conversations' order in round `rnd` (from 0). By default, such that sequential
    requests alternating between two members send each conversation to the other member than
    on its previous turn: a fixed order when n is odd, rotated by one each round when it is
    even. With `shuffle`, a random order each round instead."""
    if shuffle is not None:
        ks = list(range(n))
        shuffle.shuffle(ks)
        return ks
    return [(rnd + k) % n for k in range(n)] if n % 2 == 0 else list(range(n))


@dataclass
class Turn:
    """One streamed request, as the client saw it."""

    conversation: int
    turn: int  # from 1
    member: str = ""  # where latchgate sent it ("+"-joined when more than one attempt)
    prompt_tokens: int = 0  # usage.prompt_tokens
    prompt_n: int = 0  # llama.cpp timings: prompt tokens processed
    cache_n: int = 0  # and taken from the prompt cache
    timings: bool = False  # whether the answer carried llama.cpp's timings
    ttft: float | None = None  # seconds to the first content
    elapsed: float = 0.0  # seconds to the end of the stream
    finish: str | None = None
    text: str = ""


async def ask(
    client: openai.AsyncOpenAI, model: str, messages: list[dict[str, Any]], turn: Turn
) -> None:
    """One streamed completion, read into `turn`."""
    t0 = time.perf_counter()
    stream = await client.chat.completions.create(  # type: ignore[call-overload]
        model=model,
        messages=messages,
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    parts: list[str] = []
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                if turn.ttft is None:
                    turn.ttft = time.perf_counter() - t0
                parts.append(choice.delta.content)
            turn.finish = choice.finish_reason or turn.finish
        if chunk.usage is not None:
            turn.prompt_tokens = chunk.usage.prompt_tokens
        timings = (chunk.model_extra or {}).get("timings")
        if isinstance(timings, dict):
            turn.timings = True
            turn.prompt_n = int(timings.get("prompt_n") or 0)
            turn.cache_n = int(timings.get("cache_n") or 0)
    turn.elapsed = time.perf_counter() - t0
    turn.text = "".join(parts)


def requests_by_member(pool: Pool) -> dict[str, int]:
    return {m.name: m.requests for m in pool.members}


def served_by(pool: Pool, before: dict[str, int]) -> str:
    """The members that got an attempt since `before` (for sequential requests)."""
    return "+".join(m.name for m in pool.members if m.requests > before[m.name])


@dataclass
class Phase:
    """One mode's run of the conversations."""

    mode: str
    turns: list[Turn] = field(default_factory=list)
    seconds: float = 0.0

    def later(self) -> list[Turn]:
        return [t for t in self.turns if t.turn >= 2]

    def hit_rate(self) -> float:
        """Prompt tokens taken from the cache over those of the prompts, turns 2 and later."""
        later = self.later()
        cached = sum(t.cache_n for t in later)
        whole = sum(t.cache_n + t.prompt_n for t in later)
        return cached / whole if whole else 0.0

    def ttfts(self, since: int = 1) -> list[float]:
        return [t.ttft for t in self.turns if t.turn >= since and t.ttft is not None]

    def line(self) -> str:
        first, later = self.ttfts(), self.ttfts(2)
        return (
            f"{self.mode:12} {len(self.turns):3} requests  hit rate (turns >= 2) "
            f"{self.hit_rate():6.1%}  TTFT mean {statistics.fmean(first):5.2f} s  "
            f"median {statistics.median(first):5.2f} s  turns >= 2 mean "
            f"{statistics.fmean(later):5.2f} s  total {self.seconds:6.1f} s"
        )


async def run_phase(
    lg: Running,
    mode: str,
    *,
    tag: str,
    conversations: int = CONVERSATIONS,
    turns: int = TURNS,
    shuffle: random.Random | None = None,
    system_words: int = 240,
    verbose: bool = True,
) -> Phase:
    """The interleaved conversations through the upstream `mode`, one request at a time: each
    turn appends a question, and then the answer."""
    pool = pools(lg)[mode]
    transcripts = [
        [{"role": "system", "content": system_prompt(tag, k, system_words)}]
        for k in range(conversations)
    ]
    phase = Phase(mode)
    t0 = time.perf_counter()
    async with lg.client(timeout=CLIENT_TIMEOUT) as client:
        for rnd in range(turns):
            for k in order(conversations, rnd, shuffle):
                messages = transcripts[k]
                messages.append({"role": "user", "content": question(k, rnd)})
                turn = Turn(k, rnd + 1)
                before = requests_by_member(pool)
                await ask(client, mode, messages, turn)
                turn.member = served_by(pool, before)
                messages.append({"role": "assistant", "content": turn.text})
                phase.turns.append(turn)
                if verbose:
                    share = turn.cache_n / max(turn.cache_n + turn.prompt_n, 1)
                    print(
                        f"  {mode:12} conv {k} turn {turn.turn}  {turn.member:16}  "
                        f"prompt_n {turn.prompt_n:4}  cache_n {turn.cache_n:4} ({share:4.0%})"
                        f"  ttft {turn.ttft or 0:5.2f} s",
                        flush=True,
                    )
    phase.seconds = time.perf_counter() - t0
    return phase


def homes(phase: Phase) -> dict[int, list[str]]:
    """Each conversation's members, turn by turn."""
    found: dict[int, list[str]] = {}
    for t in sorted(phase.turns, key=lambda t: t.turn):
        found.setdefault(t.conversation, []).append(t.member)
    return found


# -- cache affinity -------------------------------------------------------------------------


async def test_affinity_keeps_the_prompt_cache_round_robin_loses_it(
    servers: list[Server], tmp_path: Path
) -> None:
    print()
    async with latchgate(servers, tmp_path / "state.json") as lg:
        phases = {mode: await run_phase(lg, mode, tag=mode) for mode in MODES}
        samples = await metrics(lg)
    for phase in phases.values():
        print(phase.line(), flush=True)
    sticky, rr = phases[STICKY], phases[ROUND_ROBIN]
    names = {s.member for s in servers}

    for phase in phases.values():
        assert len(phase.turns) == CONVERSATIONS * TURNS
        for t in phase.turns:
            # Every answer is whole, one attempt on one member, with llama.cpp's timings passed
            # through, and its usage matching them.
            assert t.member in names, t
            assert t.finish in ("length", "stop") and t.text and t.ttft is not None, t
            assert t.timings and t.prompt_tokens == t.cache_n + t.prompt_n > 0, t
        # latchgate's per-member counters saw what the client saw.
        mode = phase.mode
        cached = total(samples, "latchgate_member_cached_prompt_tokens_total", upstream=mode)
        prompt = total(samples, "latchgate_member_prompt_tokens_total", upstream=mode)
        assert cached == sum(t.cache_n for t in phase.turns), (mode, cached)
        assert prompt == sum(t.prompt_tokens for t in phase.turns), (mode, prompt)

    # Where the turns went: with affinity each conversation stays on the member of its first
    # turn, three on each; round robin (strict alternation) moves each one every turn.
    for k, went in homes(sticky).items():
        assert len(set(went)) == 1, (k, went)
    firsts = [went[0] for went in homes(sticky).values()]
    assert firsts.count(servers[0].member) == firsts.count(servers[1].member) == 3, firsts
    for k, went in homes(rr).items():
        assert all(a != b for a, b in itertools.pairwise(went)), (k, went)
    later = CONVERSATIONS * (TURNS - 1)
    assert total(samples, "latchgate_affinity_total", upstream=STICKY, outcome="hit") == later
    assert total(samples, "latchgate_affinity_total", upstream=STICKY, outcome="miss") == 0
    assert total(samples, "latchgate_affinity_total", upstream=ROUND_ROBIN) == 0

    # The caches: with affinity a later turn prefills only its new messages (measured: about
    # 97 % from the cache); round robin's second turns are cold, and its later ones find only
    # what the other server kept of the turn before last (measured: about 55 %).
    assert all(t.cache_n > t.prompt_n for t in sticky.later()), sticky.later()
    assert all(t.cache_n < t.prompt_n for t in rr.turns if t.turn == 2), rr.turns
    assert sticky.hit_rate() >= 0.85, sticky.line()
    assert sticky.hit_rate() >= rr.hit_rate() + 0.2, (sticky.line(), rr.line())


# -- a member lost --------------------------------------------------------------------------

KILL_CLIENTS = 3
KILL_TURNS = 4
KILL_AFTER = 0.3  # seconds after a request was sent to the victim: well inside its prefill
KILL_WAIT = 120.0  # seconds to wait for the moment


@dataclass
class Sent:
    """One request of the failover run, as its client saw it."""

    client: int
    turn: int
    started: float
    first: float | None = None  # when the first content arrived
    ended: float = 0.0
    finish: str | None = None
    status: int | None = None  # an HTTP error status, when the SDK raised one
    error: str | None = None  # any failure

    @property
    def answered(self) -> bool:
        return self.error is None and self.finish is not None


async def talk(lg: Running, c: int, log: list[Sent], answered: list[Sent]) -> None:
    """Client c's conversation: a short system prompt, and turns of about 80 new tokens, so
    that every turn has a prefill of a second or more to be killed in."""
    rng = random.Random(f"kill/{c}")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt("kill", c, words=60)}
    ]
    async with lg.client(timeout=CLIENT_TIMEOUT) as client:
        for turn in range(1, KILL_TURNS + 1):
            text = f"{prose(rng, 60)}\n{question(c, turn)}"
            messages.append({"role": "user", "content": text})
            sent = Sent(c, turn, time.perf_counter())
            log.append(sent)
            parts: list[str] = []
            try:
                stream = await client.chat.completions.create(  # type: ignore[call-overload]
                    model=STICKY, messages=messages, max_tokens=MAX_TOKENS, temperature=0,
                    stream=True,
                )  # fmt: skip
                async for chunk in stream:
                    for choice in chunk.choices:
                        if choice.delta.content:
                            sent.first = sent.first or time.perf_counter()
                            parts.append(choice.delta.content)
                        sent.finish = choice.finish_reason or sent.finish
            except openai.APIStatusError as exc:
                sent.status, sent.error = exc.status_code, f"{exc.status_code}: {exc.message}"
            except openai.APIError as exc:
                sent.error = f"{type(exc).__name__}: {exc}"
            sent.ended = time.perf_counter()
            if sent.answered:
                answered.append(sent)
            messages.append({"role": "assistant", "content": "".join(parts) or "OK."})


async def kill_in_prefill(lg: Running, victim: Server, answered: list[Sent]) -> float:
    """Once a few requests were answered, kill the victim KILL_AFTER after latchgate next sends
    it a request, if that is still in flight (in its prefill: a turn's is a second or more);
    the time of the kill."""
    member = pools(lg)[STICKY].member(victim.member)
    deadline = time.monotonic() + KILL_WAIT

    async def until(ready: Callable[[], bool]) -> None:
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError("no request in flight on the victim to kill it under")
            await asyncio.sleep(0.01)

    def sent_since(seen: int) -> Callable[[], bool]:
        return lambda: member.requests > seen

    await until(lambda: len(answered) >= 2)
    while True:
        await until(sent_since(member.requests))
        await asyncio.sleep(KILL_AFTER)
        if member.in_flight >= 1:
            victim.kill()
            return time.perf_counter()


async def test_a_killed_member_fails_over_without_errors(
    servers: list[Server], tmp_path: Path
) -> None:
    print()
    victim = servers[0]
    log: list[Sent] = []
    answered: list[Sent] = []
    try:
        async with latchgate(servers, tmp_path / "state.json") as lg:
            sticky = pools(lg)[STICKY]
            talks = [asyncio.create_task(talk(lg, c, log, answered)) for c in range(KILL_CLIENTS)]
            killed_at = await kill_in_prefill(lg, victim, answered)
            await asyncio.gather(*talks)
            dead, alive = sticky.member(victim.member), sticky.member(servers[1].member)
            samples = await metrics(lg)
    finally:
        if victim.proc is not None and victim.proc.poll() is not None:
            victim.launch()  # back for whatever runs next
            victim.wait()

    for s in sorted(log, key=lambda s: s.started):
        when = "streaming" if s.first is not None and s.first < killed_at else "waiting"
        if s.ended < killed_at:
            when = "done"
        elif s.started > killed_at:
            when = "after"
        print(
            f"  client {s.client} turn {s.turn}  {s.started - killed_at:+6.2f} s  "
            f"at the kill: {when:9}  {'answered' if s.answered else s.error}",
            flush=True,
        )
    print(
        f"  victim {dead.name}: {dead.requests} attempts, {dead.failures} failed, healthy "
        f"{dead.healthy}; other: {alive.requests} attempts, {alive.failures} failed; "
        f"affinity misses {total(samples, 'latchgate_affinity_total', outcome='miss'):.0f}",
        flush=True,
    )

    assert len(log) == KILL_CLIENTS * KILL_TURNS
    # No request got an error status; every one that had not started streaming when the server
    # died was answered in full. (One that was streaming from it may be cut: none was, here.)
    assert not [s for s in log if s.status is not None and s.status >= 500], log
    for s in log:
        if s.first is None or s.first >= killed_at:
            assert s.answered, s
    # The kill caught a request in its prefill on the victim: more attempts failed there than
    # the streams it cut, and those requests were answered by the other member; the
    # conversations on the victim moved there too.
    cut = [s for s in log if not s.answered]
    assert dead.failures > len(cut) and not dead.healthy, (dead, cut)
    waiting = [s for s in log if s.started < killed_at < s.ended and (s.first or 1e9) > killed_at]
    assert waiting and all(s.answered for s in waiting), log
    assert alive.failures == 0, alive
    assert total(samples, "latchgate_affinity_total", member=alive.name, outcome="miss") >= 1
