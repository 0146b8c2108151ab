"""`--state redis://...` for real: latchgate replicas, as subprocesses, sharing one redis-server.

Several replicas behind one load balancer must look like one latchgate: a refusal learned by one
is never paid for again by another, a response stored by one is continued, read and deleted
through another, and Redis going away (and coming back empty) fails no request, whatever it
costs in sharing meanwhile. The Redis URL's password stays out of every log line and scrape.

The replicas are the `latchgate` command (`tests.http.test_workers.Latchgate`, with `--state`
and the client keys in its environment), each with its own port and state file, in front of one
fake upstream running in a thread; Redis is a real server (`tests.redisserver`). Everything that
becomes true eventually (a latch heard, a deletion told, an outage noticed) is polled with a
generous deadline; nothing is timed.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.fakeupstream import FakeUpstream
from tests.http.test_workers import (
    DEADLINE,
    ROOT,
    Latchgate,
    RefusingUpstream,
    ThreadedUpstream,
    _free_port,
    _requests_total,
)
from tests.redisserver import RedisServer, running_redis

KEYS = ("replica-key-one", "replica-key-two")  # LATCHGATE_CLIENT_KEYS of every replica
PASSWORD = "hunter22pw"
MSG = [{"role": "user", "content": "hi"}]


class Replica(Latchgate):
    """One replica: the command with `--state URL`, its own port and state file, both client
    keys accepted; its requests carry the first key unless told another."""

    def __init__(
        self, upstream: FakeUpstream, tmp: Path, name: str, state: str, workers: int = 1
    ) -> None:
        self.name = name
        self.port = _free_port()
        env = {**os.environ, "LATCHGATE_CLIENT_KEYS": ",".join(KEYS)}
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "proxy", "--upstream", upstream.url, "--kind", "generic",
                "--port", str(self.port), "--workers", str(workers), "--state", state,
                "--state-file", str(tmp / f"{name}.json"), "--log-level", "info",
            ],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def request(
        self, method: str, path: str, body: Any = None, key: str = KEYS[0]
    ) -> tuple[int, bytes]:
        """One request on a new connection, with a client key."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=DEADLINE)
        try:
            headers = {"Authorization": f"Bearer {key}"}
            data = None if body is None else orjson.dumps(body)
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def metrics(self) -> bytes:
        status, body = self.request("GET", "/metrics")
        assert status == 200, body
        return body

    def client(self, key: str = KEYS[0]) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key, max_retries=0
        )

    def count(self, event: str) -> int:
        return len(self.events(event))

    def back_up(self) -> bool:
        """Whether Redis came back after an outage (it was up at start too)."""
        return self.count("state_backend_up") >= 2


def sample(exposition: bytes, name: str, **labels: str) -> float | None:
    """The sum of metric `name`'s samples carrying `labels` (None when it has none)."""
    found = None
    for family in text_string_to_metric_families(exposition.decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                found = (found or 0.0) + s.value
    return found


def backend_up(exposition: bytes) -> float | None:
    return sample(exposition, "latchgate_state_backend_up", backend="redis")


def poll(check: Callable[[], object], what: str) -> Any:
    """`check()`'s first true answer, asked again until the deadline."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not in time: {what}")


def refused(upstream: RefusingUpstream, since: int, model: str) -> int:
    """Requests for `model` the upstream received (and refused) with max_tokens since `since`."""
    bodies = [r.json for r in upstream.requests[since:]]
    return len([b for b in bodies if b.get("model") == model and "max_tokens" in b])


@pytest.fixture(scope="module")
def upstream() -> Iterator[RefusingUpstream]:
    with ThreadedUpstream() as fake:
        yield fake


@pytest.fixture
def replicas(upstream: RefusingUpstream, tmp_path: Path) -> Iterator[Callable[..., list[Replica]]]:
    """Start replicas on one Redis URL (all at once, then wait for each); stopped at the end."""
    running: list[Replica] = []

    def start(state: str, *names: str, workers: int = 1) -> list[Replica]:
        started = [Replica(upstream, tmp_path, name, state, workers) for name in names]
        running.extend(started)
        for replica in started:
            replica.started()
        return started

    yield start
    for replica in running:
        replica.close()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


def test_a_latch_learned_by_one_replica_is_used_by_the_other(
    replicas: Callable[..., list[Replica]], redis_server: RedisServer, upstream: RefusingUpstream
) -> None:
    a, b = replicas(redis_server.url(), "a", "b")
    before = len(upstream.requests)
    a.chat(model="m1", max_tokens=16)  # refused, latched, sent again: 200
    assert refused(upstream, before, "m1") == 1
    assert "max_tokens" not in upstream.requests[-1].json
    # B merges it in as A tells it (its gauge says when), and sends the request latched at once.
    poll(lambda: sample(b.metrics(), "latchgate_latches"), "B holding A's latch")
    since = len(b.lines)
    for _ in range(3):
        mark = len(upstream.requests)
        b.chat(model="m1", max_tokens=16)
        sent = [r.json for r in upstream.requests[mark:]]
        assert len(sent) == 1 and "max_tokens" not in sent[0], sent
        assert sent[0]["max_completion_tokens"] == 16
    assert refused(upstream, before, "m1") == 1  # A's alone
    b.wait_until(partial(b.logged_requests, since, 3))  # a line is written as the answer goes
    lines = [x for x in b.events("request", since) if x.get("route") == "chat"]
    assert [(x["attempts"], "latched" in x) for x in lines] == [(1, False)] * 3
    body = b.metrics()
    assert sample(body, "latchgate_latches") == 1
    assert backend_up(body) == 1 and backend_up(a.metrics()) == 1


def test_a_response_stored_by_one_replica_is_continued_read_and_deleted_through_another(
    replicas: Callable[..., list[Replica]], redis_server: RedisServer, upstream: RefusingUpstream
) -> None:
    a, b = replicas(redis_server.url(), "a", "b")
    first = a.client().responses.create(model="m", input="hi", store=True)
    assert first.output_text == "Hello!"
    mark = len(upstream.requests)
    second = b.client().responses.create(
        model="m", previous_response_id=first.id, input="and then?"
    )
    assert second.previous_response_id == first.id and second.output_text == "Hello!"
    sent = [r.json for r in upstream.requests[mark:]]
    assert len(sent) == 1
    # The first turn's history, which B never saw but read from Redis.
    assert sent[0]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "and then?"},
    ]

    got = b.client().responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == "Hello!"
    with pytest.raises(openai.NotFoundError):  # another key's: not found, as a foreign id
        b.client(KEYS[1]).responses.retrieve(first.id)
    assert a.client().responses.retrieve(first.id).id == first.id  # A's own copy, in memory

    b.client().responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        b.client().responses.retrieve(first.id)
    # A drops its local copy when B tells it of the deletion.
    path = f"/v1/responses/{first.id}"
    poll(lambda: a.request("GET", path)[0] == 404, "A forgetting the deleted response")
    assert a.request("GET", path, key=KEYS[1])[0] == 404
    # The second turn, stored by B, is read through A.
    assert a.client().responses.retrieve(second.id).previous_response_id == first.id


class Traffic:
    """Requests sent one after the other, each on a new connection, alternately to every
    replica, whole and streamed, until stopped; every outcome kept."""

    def __init__(self, targets: list[Replica]) -> None:
        self.targets = targets
        self.outcomes: list[tuple[str, str, object]] = []  # replica, kind, status or error
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(DEADLINE)

    def _run(self) -> None:
        while not self.stopping.is_set():
            for replica in self.targets:
                for stream in (False, True):
                    outcome = self._one(replica, stream)
                    self.outcomes.append((replica.name, "stream" if stream else "whole", outcome))

    @staticmethod
    def _one(replica: Replica, stream: bool) -> object:
        body = {"model": "m", "messages": MSG, "stream": stream}
        try:
            status, raw = replica.request("POST", "/v1/chat/completions", body)
        except Exception as exc:  # any failure at all is one the test reports
            return repr(exc)
        if status != 200:
            return f"{status}: {raw[:300]!r}"
        if stream and not raw.rstrip().endswith(b"data: [DONE]"):
            return f"cut stream: {raw[-300:]!r}"
        if not stream and orjson.loads(raw)["choices"][0]["message"]["content"] != "Hello!":
            return f"wrong answer: {raw[:300]!r}"
        return status

    def sent(self) -> int:
        return len(self.outcomes)

    def failures(self) -> list[tuple[str, str, object]]:
        return [x for x in self.outcomes if x[2] != 200]


def test_redis_killed_and_restarted_under_traffic_fails_no_request(
    replicas: Callable[..., list[Replica]], redis_server: RedisServer, upstream: RefusingUpstream
) -> None:
    both = replicas(redis_server.url(), "a", "b")
    a, b = both
    with Traffic(both) as traffic:
        poll(lambda: traffic.sent() >= 8, "traffic before the outage")
        redis_server.stop()
        for replica in both:
            replica.wait_for(lambda line: line.get("event") == "state_backend_down")
        during = traffic.sent()
        assert all(backend_up(r.metrics()) == 0 for r in both)
        # A latch learned by A while Redis is down: kept, to be shared at the resync.
        before = len(upstream.requests)
        a.chat(model="m-down", max_tokens=16)
        assert refused(upstream, before, "m-down") == 1
        assert not sample(b.metrics(), "latchgate_latches")  # nothing carries it meanwhile
        poll(lambda: traffic.sent() >= during + 8, "traffic during the outage")
        redis_server.start()  # same port, no data: a Redis that lost everything
        for replica in both:
            replica.wait_until(replica.back_up)
        poll(lambda: sample(b.metrics(), "latchgate_latches"), "B holding A's latch after resync")
        after = traffic.sent()
        poll(lambda: traffic.sent() >= after + 8, "traffic after the outage")
    assert traffic.failures() == [], traffic.failures()
    kinds = {(name, kind) for name, kind, _ in traffic.outcomes}
    assert kinds == {(r.name, k) for r in both for k in ("whole", "stream")}
    for replica in both:
        assert replica.count("state_backend_down") == 1, replica.text()
        assert replica.count("state_backend_up") == 2, replica.text()
        assert backend_up(replica.metrics()) == 1
    mark = len(upstream.requests)
    b.chat(model="m-down", max_tokens=16)
    sent = [r.json for r in upstream.requests[mark:]]
    assert len(sent) == 1 and "max_tokens" not in sent[0], sent
    assert refused(upstream, before, "m-down") == 1  # A's alone, while Redis was down


def test_the_redis_password_is_in_no_log_line_and_no_scrape(
    replicas: Callable[..., list[Replica]], upstream: RefusingUpstream, tmp_path: Path
) -> None:
    with running_redis(tmp_path, "--requirepass", PASSWORD) as server:
        url = server.url(PASSWORD)
        both = replicas(url, "a", "b")
        a, b = both
        scrapes = []
        a.chat(model="m-pw", max_tokens=16)
        poll(lambda: sample(b.metrics(), "latchgate_latches"), "B holding A's latch")
        scrapes += [r.metrics() for r in both]
        assert all(backend_up(s) == 1 for s in scrapes)
        server.stop()
        for replica in both:
            down = replica.wait_for(lambda line: line.get("event") == "state_backend_down")
            assert f"127.0.0.1:{server.port}" in down["url"]
            replica.chat()  # served from memory meanwhile
        scrapes += [r.metrics() for r in both]
        assert all(backend_up(s) == 0 for s in scrapes[2:])
        server.start()
        for replica in both:
            replica.wait_until(replica.back_up)
        scrapes += [r.metrics() for r in both]
        for replica in both:
            replica.close()  # its last lines too (shutdown)
    for replica in both:
        text = replica.text()
        assert "state_backend_down" in text and PASSWORD not in text
        assert replica.count("state_backend_up") == 2 and replica.count("state_backend_error") == 0
    for s in scrapes:
        assert PASSWORD.encode() not in s


def test_workers_share_a_latch_through_redis_and_one_scrape_sums_them(
    replicas: Callable[..., list[Replica]], redis_server: RedisServer, upstream: RefusingUpstream
) -> None:
    (lg,) = replicas(redis_server.url(), "w", workers=2)
    before = len(upstream.requests)
    since = len(lg.lines)
    lg.chat(model="m-w", max_tokens=16)
    learner = lg.wait_for(lambda line: bool(line.get("latched")), since)["worker"]
    # Written to Redis and told in one transaction: the other worker hears it from there (the
    # siblings' own latch channel is off with a state backend).
    raw = redis.Redis.from_url(redis_server.url())
    try:
        poll(lambda: raw.hlen("latchgate:latches"), "the latch in Redis")
    finally:
        raw.close()
    sent = 1 + lg.chat_until_both_served(model="m-w", max_tokens=16)
    assert refused(upstream, before, "m-w") == 1  # the learner's alone
    chats = [x for x in lg.events("request", since) if x.get("route") == "chat"]
    others = [x for x in chats if x["worker"] != learner]
    assert len(others) >= 2 and all(x["attempts"] == 1 and "latched" not in x for x in others)
    body = lg.metrics()
    assert _requests_total(body) == sent, body.decode()
    assert sample(body, "latchgate_workers") == 2
    assert sample(body, "latchgate_latches") == 1 and backend_up(body) == 1
