"""`--workers N` for real: the command as a subprocess, in front of a fake upstream.

Two workers must look like one latchgate: connections reach both, one scrape of `/metrics`
counts the requests of both, a latch learned by one applies in the other, a worker that dies
is replaced, and the supervisor's SIGTERM (or its death) leaves no worker behind.

The tests are synchronous on purpose: the fake upstream runs in a thread with its own event loop,
so the blocking HTTP calls here (a fresh connection each, so the kernel spreads them over the
workers) and the waits on log lines stall nothing latchgate needs. Which worker served a request
is read from its log line (every worker's lines carry a `worker` field); their pids from the
supervisor's `worker_started` lines. Deadlines are generous, and nothing is timed.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakeupstream import FakeUpstream, Json, Recorded, Reply

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0  # seconds for anything to happen (start-up, a restart, a shutdown)
MSG = [{"role": "user", "content": "hi"}]
# OpenAI's wording (tests/refusal_cases.py), which llama.cpp's OpenAI-compatible clients see too.
MAX_TOKENS_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}

Line = dict[str, Any]


class RefusingUpstream(FakeUpstream):
    """Answers like a plain OpenAI server, but refuses `max_tokens` (every time it is sent)."""

    def _default(self, rec: Recorded) -> Reply:
        body = rec.json if rec.raw else {}
        if isinstance(body, dict) and "max_tokens" in body:
            return Json(MAX_TOKENS_REFUSAL, status=400)
        return super()._default(rec)


class ThreadedUpstream:
    """A `RefusingUpstream` served by an event loop of its own, in a thread."""

    def __init__(self) -> None:
        self.fake = RefusingUpstream()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> RefusingUpstream:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(DEADLINE)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(DEADLINE)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(DEADLINE)
        self.loop.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Latchgate:
    """The `latchgate` command in a subprocess; its log lines (JSON: stderr is a pipe) read as
    they come by a thread, so the pipe never fills."""

    def __init__(self, upstream: FakeUpstream, tmp: Path, workers: int) -> None:
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "LATCHGATE_CLIENT_KEYS"}
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "proxy", "--upstream", upstream.url, "--kind", "generic",
                "--port", str(self.port), "--workers", str(workers),
                "--state-file", str(tmp / "s.json"), "--log-level", "info",
            ],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: list[Line] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                line = {"event": "text", "text": raw.decode(errors="replace")}
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()

    def wait_until(self, check: Callable[[], object]) -> object:
        """`check()`'s first true answer, asked again as each log line comes."""
        deadline = time.monotonic() + DEADLINE
        with self.changed:
            while True:
                if found := check():
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise AssertionError(f"not in the log lines: {self.text()}")
                self.changed.wait(min(left, 0.5))

    def wait_for(self, wanted: Callable[[Line], bool], since: int = 0) -> Line:
        """The first log line from index `since` on that is `wanted` (waiting for it)."""
        found = self.wait_until(lambda: next((x for x in self.lines[since:] if wanted(x)), None))
        assert isinstance(found, dict)
        return found

    def text(self) -> str:
        return "\n".join(orjson.dumps(line).decode() for line in self.lines)

    def events(self, event: str, since: int = 0) -> list[Line]:
        with self.changed:
            return [line for line in self.lines[since:] if line.get("event") == event]

    def started(self) -> Latchgate:
        self.wait_for(lambda line: line.get("event") == "listening")
        return self

    def pids(self) -> dict[int, list[int]]:
        """Every pid each worker index has had, in order."""
        found: dict[int, list[int]] = {}
        for line in self.events("worker_started"):
            found.setdefault(line["index"], []).append(line["pid"])
        return found

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """One request on a new connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=DEADLINE)
        try:
            data = None if body is None else orjson.dumps(body)
            headers = {} if body is None else {"Content-Type": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def chat(self, **extra: Any) -> None:
        status, raw = self.request(
            "POST", "/v1/chat/completions", {"model": "m", "messages": MSG, **extra}
        )
        assert status == 200, raw

    def logged_requests(self, since: int, count: int) -> bool:
        """Whether `count` request lines were logged from line `since` on."""
        return len(self.events("request", since)) >= count

    def served_by(self, since: int) -> dict[int, int]:
        """Chat requests logged from line `since` on, by worker index."""
        count: dict[int, int] = {}
        for line in self.events("request", since):
            if line.get("route") == "chat":
                count[line["worker"]] = count.get(line["worker"], 0) + 1
        return count

    def chat_until_both_served(self, workers: tuple[int, ...] = (0, 1), **extra: Any) -> int:
        """Chat requests, each on a new connection, until every worker in `workers` has served
        at least two of them (the kernel spreads connections by their ports, and a worker still
        starting takes none yet); returns how many were sent."""
        since = len(self.lines)
        deadline = time.monotonic() + DEADLINE
        sent = 0
        while time.monotonic() < deadline:
            self.chat(**extra)
            sent += 1
            # its line, before the next (a line is written as the answer goes out)
            self.wait_until(partial(self.logged_requests, since, sent))
            served = self.served_by(since)
            if all(served.get(w, 0) >= 2 for w in workers):
                return sent
        raise AssertionError(f"not every worker served: {self.served_by(since)}: {self.text()}")

    def signal(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(DEADLINE)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(DEADLINE)


def _gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie nobody reaped counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pids: list[int]) -> list[int]:
    """The pids among `pids` still running after the deadline (none, normally)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return []
        time.sleep(0.1)
    return [pid for pid in pids if not _gone(pid)]


def _requests_total(exposition: bytes) -> float:
    for family in text_string_to_metric_families(exposition.decode()):
        if family.name == "latchgate_requests":
            return sum(s.value for s in family.samples if s.name == "latchgate_requests_total")
    return 0.0


def _gauge(exposition: bytes, name: str) -> float | None:
    for family in text_string_to_metric_families(exposition.decode()):
        if family.name == name:
            return sum(s.value for s in family.samples)
    return None


@pytest.fixture(scope="module")
def upstream() -> Iterator[RefusingUpstream]:
    with ThreadedUpstream() as fake:
        yield fake


@pytest.fixture
def latchgate(upstream: RefusingUpstream, tmp_path: Path) -> Iterator[Callable[[int], Latchgate]]:
    """Start the command with N workers (stopped at the end, whatever the test did)."""
    running: list[Latchgate] = []

    def start(workers: int) -> Latchgate:
        lg = Latchgate(upstream, tmp_path, workers)
        running.append(lg)
        return lg.started()

    yield start
    for lg in running:
        lg.close()


def test_connections_reach_both_workers_and_one_scrape_counts_them_all(
    latchgate: Callable[[int], Latchgate],
) -> None:
    lg = latchgate(2)
    assert lg.events("listening")[0]["workers"] == 2
    assert sorted(lg.pids()) == [0, 1]
    sent = lg.chat_until_both_served()
    # Every scrape on a fresh connection, whichever worker takes it, counts both workers' share.
    for _ in range(8):
        status, body = lg.request("GET", "/metrics")
        assert status == 200
        assert _requests_total(body) == sent, body.decode()
        assert _gauge(body, "latchgate_workers") == 2


def test_a_latch_learned_in_one_worker_applies_in_every_worker(
    latchgate: Callable[[int], Latchgate], upstream: RefusingUpstream
) -> None:
    lg = latchgate(2)
    before = len(upstream.requests)
    since = len(lg.lines)
    lg.chat(max_tokens=16)  # refused, latched, sent again with max_completion_tokens
    learner = lg.wait_for(lambda line: bool(line.get("latched")), since)["worker"]
    bodies = [r.json for r in upstream.requests[before:]]
    assert "max_tokens" in bodies[0] and "max_tokens" not in bodies[-1]
    # The other worker says when it merged the latch in.
    lg.wait_for(
        lambda line: line.get("event") == "latches_merged" and line.get("worker") != learner,
        since,
    )
    after = len(upstream.requests)
    lg.chat_until_both_served(max_tokens=16)
    sent = [r.json for r in upstream.requests[after:]]
    assert sent and not [b for b in sent if "max_tokens" in b]
    _, body = lg.request("GET", "/metrics")
    assert _gauge(body, "latchgate_latches") == 1  # held by both, counted once


def test_a_killed_worker_is_restarted_and_keeps_the_latches(
    latchgate: Callable[[int], Latchgate], upstream: RefusingUpstream
) -> None:
    lg = latchgate(2)
    since = len(lg.lines)
    lg.chat(max_tokens=16)
    learner = lg.wait_for(lambda line: bool(line.get("latched")), since)["worker"]
    lg.wait_for(
        lambda line: line.get("event") == "latches_merged" and line.get("worker") != learner,
        since,
    )
    victim = lg.pids()[0][-1]
    mark = len(lg.lines)
    os.kill(victim, signal.SIGKILL)
    exited = lg.wait_for(lambda line: line.get("event") == "worker_exited", mark)
    assert (exited["index"], exited["pid"], exited["signal"]) == (0, victim, "SIGKILL")
    restarted = lg.wait_for(lambda line: line.get("event") == "worker_started", mark)
    assert restarted["index"] == 0 and restarted["pid"] != victim
    after = len(upstream.requests)
    lg.chat_until_both_served(max_tokens=16)  # the new worker 0 among them, with the latch
    assert not [r for r in upstream.requests[after:] if "max_tokens" in r.json]
    assert lg.signal(signal.SIGTERM) == 0
    assert _wait_gone([pid for pids in lg.pids().values() for pid in pids]) == []


def test_sigterm_stops_every_worker_and_exits_0(latchgate: Callable[[int], Latchgate]) -> None:
    lg = latchgate(2)
    lg.chat()
    pids = [pid for pids in lg.pids().values() for pid in pids]
    assert len(pids) == 2
    assert lg.signal(signal.SIGTERM) == 0, lg.text()
    assert _wait_gone(pids) == []
    stopped = [line["index"] for line in lg.events("worker_exited") if line.get("stopping")]
    assert sorted(stopped) == [0, 1]


def test_workers_do_not_outlive_a_killed_supervisor(latchgate: Callable[[int], Latchgate]) -> None:
    lg = latchgate(2)
    pids = [pid for pids in lg.pids().values() for pid in pids]
    assert lg.signal(signal.SIGKILL) == -signal.SIGKILL
    assert _wait_gone(pids) == []


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_one_worker_serves_in_one_process(latchgate: Callable[[int], Latchgate]) -> None:
    lg = latchgate(1)
    listening = lg.events("listening")[0]
    assert listening["port"] == lg.port and "workers" not in listening
    lg.chat()
    lg.wait_for(lambda line: line.get("event") == "request")
    assert "worker" not in lg.events("request")[0]
    assert not lg.events("worker_started")
    if Path("/proc/self/stat").exists():
        assert _children(lg.proc.pid) == []
    _, body = lg.request("GET", "/metrics")
    assert _requests_total(body) == 1 and _gauge(body, "latchgate_workers") is None
    assert lg.signal(signal.SIGTERM) == 0
