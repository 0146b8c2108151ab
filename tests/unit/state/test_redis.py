"""The state shared through Redis (`proxy.state.redis`), against a real redis-server.

Two `RedisState`s with separate local stores stand for two replicas. Nothing of Redis is
mocked: the server is started for each test (`tests.redisserver`), and stopped and started again
on the same port for the outage tests. Conditions that become true eventually (a message
reaching the other replica, a reconnect) are polled with a generous deadline; no test measures
how fast anything is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from proxy.state.latches import LatchStore, Refusal, endpoint_id
from proxy.state.redis import (
    RedisLatches,
    RedisPlans,
    RedisResponses,
    RedisState,
    decode_message,
    decode_plans,
    decode_response,
    encode_plans,
    encode_response,
    latch_op_result,
    merged_plans,
    remembered,
)
from proxy.state.rescues import Fold, MemoryPlans, Plan
from proxy.state.responses import MemoryStore, StoredResponse
from tests.redisserver import RedisServer, running_redis

DEADLINE = 10.0
PASSWORD = "secretpw"
OWNER = "a" * 64  # owners arrive as digests
OTHER = "b" * 64
EID = endpoint_id("http://127.0.0.1:8080/v1", None)
EID2 = endpoint_id("http://127.0.0.1:9090/v1", None)


class RecordingLog:
    """A structlog-style logger that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append(("info", event, fields))

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append(("warning", event, fields))

    def error(self, event: str, **fields: Any) -> None:
        self.events.append(("error", event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for _, name, fields in self.events if name == event]


class Replica:
    """One replica's state: its own local stores, shared through its own `RedisState`."""

    def __init__(self, url: str) -> None:
        self.log = RecordingLog()
        self.statuses: list[bool] = []
        self.errors: list[str] = []
        self.merged = 0
        self.state = RedisState(
            url, self.log, self.statuses.append, self.errors.append, ping_interval=0.2
        )
        self.store = LatchStore()
        self.latches = RedisLatches(self.state, self.store, self._on_merged)
        self.local = MemoryStore(max_entries=100, max_bytes=10_000_000, max_age=3600)
        self.responses = RedisResponses(self.state, self.local)
        self.local_plans = MemoryPlans()
        self.plans = RedisPlans(self.state, self.local_plans, ttl=600)

    def _on_merged(self) -> None:
        self.merged += 1

    def learn(self, eid: str, model: str, capability: str) -> None:
        """What the proxy does on a refusal: learn it locally, then tell the sync."""
        assert self.store.learn(eid, model, Refusal(capability))
        self.latches.learned(eid)

    def latched(self, eid: str, model: str, capability: str) -> bool:
        return getattr(self.store.view(eid, model)[1], capability) is False


Replicas = Callable[..., Awaitable[Replica]]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[Redis]:
    """A plain client of the test server, to look at (and spoil) what the replicas wrote."""
    client = Redis.from_url(redis_server.url())
    yield client
    await client.aclose()


@pytest.fixture
async def replica(redis_server: RedisServer) -> AsyncIterator[Replicas]:
    """Start replicas on the test server (or on `url`); all are closed at the end."""
    started: list[Replica] = []

    async def _start(url: str | None = None, *, start: bool = True) -> Replica:
        one = Replica(url or redis_server.url())
        started.append(one)
        if start:
            await one.latches.start()
        return one

    yield _start
    for one in started:
        await one.state.close()


async def eventually(condition: Callable[[], Any], what: str) -> None:
    """Wait until `condition()` (a value, or a coroutine's) is true, up to `DEADLINE`."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {DEADLINE} s: {what}")


def response(response_id: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "output": [{"id": item_id, "type": "message", "role": "assistant", "content": []}],
    }


def stored(response_id: str, owner: str = OWNER, item_id: str = "msg_1") -> StoredResponse:
    items = [{"id": f"in_{response_id}", "type": "message", "role": "user", "content": []}]
    return StoredResponse(owner=owner, response=response(response_id, item_id), input_items=items)


PLAN_A = Plan(pruned=((3, "d3"), (5, "d5")))
PLAN_B = Plan(pruned=((3, "d3"),), fold=Fold(1, 4, 2, "dfold", "the summary", 2))


# -- latches -------------------------------------------------------------------------------------


async def test_a_latch_learned_on_one_replica_reaches_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    a.learn(EID, "m", "native_tools")
    await eventually(lambda: b.latched(EID, "m", "native_tools"), "B has A's latch")
    assert b.merged >= 1
    entry = orjson.loads(await raw.hget("latchgate:latches", EID))
    assert entry == a.store.snapshot_of(EID)["endpoints"][EID]
    assert a.merged == 0  # its own message is ignored, and Redis held nothing more
    assert a.errors == b.errors == []
    assert a.statuses == b.statuses == [True]


async def test_latches_learned_at_once_on_two_replicas_are_merged(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    a.learn(EID, "m1", "native_tools")
    b.learn(EID, "m2", "reasoning_effort")
    for one in (a, b):
        await eventually(lambda o=one: o.latched(EID, "m1", "native_tools"), "m1 everywhere")
        await eventually(lambda o=one: o.latched(EID, "m2", "reasoning_effort"), "m2 everywhere")
    entry = orjson.loads(await raw.hget("latchgate:latches", EID))
    assert set(entry["models"]) == {"m1", "m2"}


async def test_a_replica_started_later_takes_in_what_redis_holds(
    replica: Replicas, raw: Redis
) -> None:
    a = await replica()
    a.learn(EID, "m", "structured_output")
    await eventually(lambda: raw.hexists("latchgate:latches", EID), "A pushed")
    b = await replica()  # start() waits for the first resync
    assert b.latched(EID, "m", "structured_output")
    assert b.merged == 1


async def test_a_reset_on_one_replica_resets_redis_and_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    a.learn(EID, "m1", "native_tools")
    a.learn(EID, "m2", "native_tools")
    a.learn(EID2, "m1", "native_tools")
    await eventually(lambda: b.latched(EID2, "m1", "native_tools"), "B has all three")
    await eventually(lambda: b.latched(EID, "m2", "native_tools"), "B has all three")

    assert a.store.reset(EID, "m1") == 1
    a.latches.forgot(EID, "m1")
    await eventually(lambda: not b.latched(EID, "m1", "native_tools"), "B forgot m1")
    assert b.latched(EID, "m2", "native_tools")
    entry = orjson.loads(await raw.hget("latchgate:latches", EID))
    assert set(entry["models"]) == {"m2"}

    a.store.reset(None, None)
    a.latches.forgot(None, None)
    await eventually(lambda: b.store.endpoint_ids() == [], "B forgot everything")
    assert not await raw.exists("latchgate:latches")


async def test_an_expiry_on_one_replica_expires_redis_and_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    a.learn(EID, "m", "native_tools")
    await eventually(lambda: b.latched(EID, "m", "native_tools"), "B has the latch")
    later = time.time() + 3600  # an expiry an hour from now removes what is a minute old
    assert a.store.expire(60, later) == 1
    a.latches.expired(60, later)
    await eventually(lambda: b.store.endpoint_ids() == [], "B expired it")
    await eventually(
        lambda: _not(raw.hexists("latchgate:latches", EID)), "Redis no longer holds it"
    )


async def _not(awaitable: Awaitable[Any]) -> bool:
    return not await awaitable


# -- responses -----------------------------------------------------------------------------------


async def test_a_response_put_on_one_replica_is_got_on_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    first = stored("resp_1")
    await a.responses.put(first)  # awaited: on the other replica at once
    assert await b.responses.get(OTHER, "resp_1") is None  # another owner's is missing
    assert len(b.local) == 0
    assert await b.responses.get(OWNER, "resp_1") == first
    assert len(b.local) == 1  # kept locally too
    assert await b.responses.item(OWNER, "in_resp_1") == first.input_items[0]
    assert 0 < await raw.ttl("latchgate:response:resp_1") <= 3600
    assert await raw.get(f"latchgate:item:{OWNER}:msg_1") == b"resp_1"
    assert a.errors == b.errors == []


async def test_an_item_is_found_on_the_other_replica_through_its_newest_response(
    replica: Replicas,
) -> None:
    a, b = await replica(), await replica()
    await a.responses.put(stored("resp_1", item_id="msg_shared"))
    await a.responses.put(stored("resp_2", item_id="msg_shared"))
    assert await b.responses.item(OTHER, "msg_shared") is None
    found = await b.responses.item(OWNER, "msg_shared")
    assert found is not None and found["id"] == "msg_shared"
    assert await b.local.get(OWNER, "resp_2") is not None  # the newest holder, now local
    assert await b.responses.item(OWNER, "msg_nowhere") is None


async def test_a_delete_on_one_replica_drops_the_copy_of_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    await a.responses.put(stored("resp_1"))
    assert await b.responses.get(OWNER, "resp_1") is not None  # now in B's memory too
    assert await a.responses.delete(OTHER, "resp_1") is False  # another owner: as missing
    assert await raw.exists("latchgate:response:resp_1")

    assert await a.responses.delete(OWNER, "resp_1") is True
    await eventually(_missing(b.local, "resp_1"), "B dropped its copy")
    assert not await raw.exists("latchgate:response:resp_1", f"latchgate:item:{OWNER}:msg_1")
    assert await a.responses.get(OWNER, "resp_1") is None
    assert await b.responses.get(OWNER, "resp_1") is None
    assert await a.responses.delete(OWNER, "resp_1") is False


async def test_a_delete_of_a_response_held_only_in_redis(replica: Replicas, raw: Redis) -> None:
    a, b = await replica(), await replica()
    await a.responses.put(stored("resp_1"))
    assert await b.responses.delete(OWNER, "resp_1") is True  # B never held it in memory
    assert not await raw.exists("latchgate:response:resp_1")
    await eventually(_missing(a.local, "resp_1"), "A dropped its copy")


def _missing(local: MemoryStore, response_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await local.get(OWNER, response_id) is None

    return check


# -- plans ---------------------------------------------------------------------------------------


async def test_plans_remembered_on_one_replica_are_found_on_the_other(
    replica: Replicas, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    await a.plans.remember("k" * 64, PLAN_A)
    await a.plans.remember("k" * 64, PLAN_B, replaces=PLAN_A)
    await eventually(lambda: _plans_are(raw, "k" * 64, [PLAN_B]), "Redis holds plan B only")
    assert await b.plans.plans("k" * 64) == [PLAN_B]
    assert await b.local_plans.plans("k" * 64) == [PLAN_B]  # kept locally too
    assert await b.plans.plans("unknown") == []
    assert 0 < await raw.ttl("latchgate:plans:" + "k" * 64) <= 600


async def _plans_are(raw: Redis, key: str, plans: list[Plan]) -> bool:
    return decode_plans(await raw.get(f"latchgate:plans:{key}")) == plans


# -- Redis down and back -------------------------------------------------------------------------


async def test_while_redis_is_down_everything_is_local_and_it_all_resyncs_on_return(
    replica: Replicas, redis_server: RedisServer, raw: Redis
) -> None:
    a, b = await replica(), await replica()
    await a.responses.put(stored("resp_before"))
    redis_server.stop()
    await eventually(lambda: a.statuses == [True, False], "A saw Redis go")
    await eventually(lambda: b.statuses == [True, False], "B saw Redis go")
    errors = len(a.errors)

    for n in range(20):  # requests while down: none fails, none asks Redis
        a.learn(EID, f"m{n}", "native_tools")
        await a.responses.put(stored(f"resp_{n}"))
        assert await a.responses.get(OWNER, f"resp_{n}") is not None
        assert await a.responses.get(OWNER, "resp_nowhere") is None
        assert await a.responses.item(OWNER, "msg_nowhere") is None
        await a.plans.remember(f"key{n}", PLAN_A)
        assert await a.plans.plans("key_nowhere") == []
    assert await a.responses.delete(OWNER, "resp_before") is True
    await asyncio.sleep(1.0)  # several pings fail meanwhile
    assert len(a.errors) == errors
    assert len(a.log.named("state_backend_down")) == 1
    assert a.log.named("state_backend_down")[0]["error"] == "ConnectionError"

    redis_server.start()  # empty: it saved nothing
    await eventually(lambda: a.statuses == [True, False, True], "A saw Redis come back")
    await eventually(lambda: b.latched(EID, "m19", "native_tools"), "B has A's latches")
    assert all(b.latched(EID, f"m{n}", "native_tools") for n in range(20))
    await eventually(lambda: b.responses.get(OWNER, "resp_19"), "the responses were written")
    await eventually(lambda: b.plans.plans("key19"), "the plans were written")
    assert await b.plans.plans("key19") == [PLAN_A]
    assert len(a.log.named("state_backend_up")) == 2  # at start, and on return
    assert len(a.log.named("state_backend_down")) == 1


async def test_a_delete_made_while_redis_was_down_reaches_redis(
    replica: Replicas, redis_server: RedisServer, raw: Redis
) -> None:
    a = await replica()
    redis_server.stop()
    await eventually(lambda: a.statuses == [True, False], "A saw Redis go")
    redis_server.start()
    await eventually(lambda: a.statuses == [True, False, True], "A saw Redis come back")
    await a.responses.put(stored("resp_1"))
    redis_server.stop()
    await eventually(lambda: a.statuses[-1] is False, "A saw Redis go again")
    assert await a.responses.delete(OWNER, "resp_1") is True
    a.learn(EID, "m", "native_tools")
    assert a.store.reset(EID, None) == 1
    a.latches.forgot(EID, None)  # while down: replayed at the resync
    redis_server.start()
    await eventually(lambda: a.statuses[-1] is True, "A saw Redis come back again")
    await eventually(lambda: not a.latches._ops, "A replayed its reset")
    assert a.store.endpoint_ids() == []
    assert not await raw.exists("latchgate:response:resp_1")


async def test_redis_unreachable_at_start_is_logged_once_and_joined_later(
    replica: Replicas, redis_server: RedisServer
) -> None:
    redis_server.stop()
    a = await replica()  # start() does not fail
    assert a.statuses == [False]
    a.learn(EID, "m", "legacy_token_limit")
    await a.responses.put(stored("resp_1"))
    assert await a.responses.get(OWNER, "resp_1") is not None
    await asyncio.sleep(0.6)  # a few pings fail meanwhile
    assert len(a.log.named("state_backend_down")) == 1
    assert a.errors == []

    redis_server.start()
    await eventually(lambda: a.statuses == [False, True], "A reached Redis")
    b = await replica()
    await eventually(lambda: b.latched(EID, "m", "legacy_token_limit"), "B has A's latch")
    assert await b.responses.get(OWNER, "resp_1") is not None


async def test_the_subscriber_comes_back_after_a_redis_restart(
    replica: Replicas, redis_server: RedisServer
) -> None:
    a, b = await replica(), await replica()
    redis_server.restart()
    await eventually(lambda: a.statuses[-1] is True and len(a.statuses) == 3, "A reconnected")
    await eventually(lambda: b.statuses[-1] is True and len(b.statuses) == 3, "B reconnected")
    a.learn(EID, "m", "chosen_temperature")
    await eventually(lambda: b.latched(EID, "m", "chosen_temperature"), "B heard A again")


# -- malformed data, secrets ---------------------------------------------------------------------


async def test_malformed_values_in_redis_are_skipped(replica: Replicas, raw: Redis) -> None:
    a = await replica()
    a.learn(EID, "m", "native_tools")
    await eventually(lambda: raw.hexists("latchgate:latches", EID), "A pushed")
    await raw.hset("latchgate:latches", mapping={"bad": b"{not json", "list": b"[1, 2]"})
    await raw.set("latchgate:response:resp_bad", b"{")
    await raw.set("latchgate:response:resp_list", b"[]")
    await raw.set("latchgate:plans:pk", b'[{"pruned": "nope"}]')
    await raw.set(f"latchgate:item:{OWNER}:msg_bad", b"resp_bad")

    b = await replica()
    assert b.latched(EID, "m", "native_tools")
    assert sorted(b.store.endpoint_ids()) == [EID]
    assert [f["malformed"] for f in b.log.named("state_latches_skipped")] == [2]
    assert await b.responses.get(OWNER, "resp_bad") is None
    assert await b.responses.get(OWNER, "resp_list") is None
    assert await b.responses.item(OWNER, "msg_bad") is None
    assert await b.plans.plans("pk") == []
    assert b.errors == []

    for junk in (b"junk", b'{"from": "x"}', b'{"from": "x", "op": "learned", "eid": 5}'):
        await raw.publish("latchgate:events", junk)
    await raw.publish(
        "latchgate:events", orjson.dumps({"from": "x", "op": "forgot", "eid": 1, "model": None})
    )
    a.learn(EID2, "m", "native_tools")  # the subscriber still works after the junk
    await eventually(lambda: b.latched(EID2, "m", "native_tools"), "B heard A")
    assert b.latched(EID, "m", "native_tools")


async def test_the_password_in_the_url_is_never_logged(tmp_path: Path) -> None:
    with running_redis(tmp_path, "--requirepass", PASSWORD) as server:
        right = Replica(server.url(PASSWORD))
        wrong = Replica(server.url("wrongsecret"))
        try:
            await right.latches.start()
            await wrong.latches.start()
            assert right.statuses == [True]
            assert wrong.statuses == [False]
            assert wrong.log.named("state_backend_down")[0]["error"] == "AuthenticationError"
            server.stop()
            await eventually(lambda: right.statuses == [True, False], "Redis went")
            server.start()
            await eventually(lambda: right.statuses == [True, False, True], "Redis came back")
        finally:
            await right.state.close()
            await wrong.state.close()
    logged = repr(right.log.events + wrong.log.events)
    assert right.log.named("state_backend_up")[0]["url"] == server.url("***")
    assert PASSWORD not in logged
    assert "wrongsecret" not in logged


async def test_calls_after_close_do_nothing(replica: Replicas) -> None:
    a = await replica()
    await a.latches.close()
    a.learn(EID, "m", "native_tools")
    a.latches.forgot(None, None)
    await a.plans.remember("k", PLAN_A)
    await a.latches.close()


# -- pure parts ----------------------------------------------------------------------------------


def test_plans_round_trip_and_malformed_plans_are_none() -> None:
    plans = [PLAN_B, PLAN_A, Plan()]
    assert decode_plans(encode_plans(plans)) == plans
    for bad in (
        None,
        b"",
        b"{",
        b"{}",
        b'[{"pruned": [[1]]}]',
        b'[{"pruned": [[true, "d"]]}]',
        b'[{"pruned": [], "fold": {"start": 1}}]',
        b'[{"pruned": []}, 7]',
    ):
        assert decode_plans(bad) == []


def test_plan_lists_are_kept_as_the_memory_store_keeps_them() -> None:
    assert remembered([PLAN_A], PLAN_B, PLAN_A, 8) == [PLAN_B]
    assert remembered([PLAN_A], PLAN_B, None, 1) == [PLAN_B]
    assert remembered([PLAN_B, PLAN_A], PLAN_A, None, 8) == [PLAN_A, PLAN_B]
    assert merged_plans([PLAN_B], [PLAN_A, PLAN_B], 8) == [PLAN_B, PLAN_A]
    assert merged_plans([PLAN_B], [PLAN_A], 1) == [PLAN_B]


def test_responses_round_trip_and_malformed_ones_are_none() -> None:
    one = stored("resp_1")
    assert decode_response(encode_response(one)) == one
    for bad in (
        None,
        b"{",
        b"[]",
        b'{"owner": "o", "response": {}, "input_items": []}',
        b'{"owner": 1, "response": {"id": "r"}, "input_items": []}',
        b'{"owner": "o", "response": {"id": "r"}, "input_items": [1]}',
    ):
        assert decode_response(bad) is None


def test_messages_name_their_sender_and_operation() -> None:
    assert decode_message(b'{"from": "r", "op": "learned"}') == {"from": "r", "op": "learned"}
    for bad in (b"junk", b"[]", b'{"op": "learned"}', b'{"from": 1, "op": "x"}', 5):
        assert decode_message(bad) is None


def test_a_reset_or_expiry_applied_to_what_redis_holds() -> None:
    store = LatchStore()
    store.learn(EID, "m1", Refusal("native_tools"))
    store.learn(EID, "m2", Refusal("native_tools"))
    store.learn(EID2, "m1", Refusal("native_tools"))
    raw = {
        eid.encode(): orjson.dumps(entry)
        for eid, entry in store.to_snapshot()["endpoints"].items()
    }
    raw[b"bad"] = b"{"
    changed, removed = latch_op_result(raw, {"op": "forgot", "eid": None, "model": "m1"})
    assert removed == [EID2]
    assert set(changed) == {EID} and set(changed[EID]["models"]) == {"m2"}
    changed, removed = latch_op_result(raw, {"op": "expired", "older_than": 0, "now": 1.0})
    assert (changed, removed) == ({}, [])  # nothing was learned before 1970
    changed, removed = latch_op_result(
        raw, {"op": "expired", "older_than": 1, "now": time.time() + 60}
    )
    assert changed == {} and sorted(removed) == sorted([EID, EID2])
