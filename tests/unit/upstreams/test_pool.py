"""The pool of an upstream's servers: balance, cache and slot affinity, health, `id_slot_body`.

Pure logic: `check` is given a fake `get`. One test at the end starts a real aiohttp server on
127.0.0.1 to show the URLs `check` asks for are the ones llama-server, vLLM and Ollama answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from proxy.settings import MemberConfig, parse_upstream
from proxy.upstreams.pool import (
    CONNECT,
    SILENT,
    STATUS,
    TIMEOUT,
    Change,
    Choice,
    Pool,
    id_slot_body,
)


def pool_of(*names: str, affinity: bool = True, slots: int | None = None, **kw: Any) -> Pool:
    pool = Pool([MemberConfig(n, f"http://{n}:8080/v1") for n in names], affinity=affinity, **kw)
    if slots is not None:
        for m in pool.members:
            m.learn_slots(slots)
    return pool


def names(choices: list[Choice]) -> list[str]:
    return [c.member.name for c in choices]


def one_by_one(pool: Pool, keys: list[str | None]) -> list[Choice]:
    """Each request finished before the next is chosen."""
    out = []
    for key in keys:
        choice = pool.choose(key)
        pool.finish(choice)
        out.append(choice)
    return out


class FakeGet:
    """A scripted `get`: URL -> (status, data) or an exception to raise; records each call."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, float]] = []

    async def __call__(self, url: str, timeout: float) -> tuple[int, Any]:
        self.calls.append((url, timeout))
        answer = self.answers.get(url, (404, None))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def urls(self) -> list[str]:
        return [url for url, _ in self.calls]


# -- members ------------------------------------------------------------------------------------


def test_members_keep_config_order_and_strip_urls() -> None:
    pool = Pool([MemberConfig("b", "http://h2:8080/v1/"), MemberConfig("a", "http://h1:9000")])
    assert [m.name for m in pool.members] == ["b", "a"]
    b = pool.member("b")
    assert (b.base, b.root) == ("http://h2:8080/v1", "http://h2:8080")
    assert (pool.member("a").base, pool.member("a").root) == ("http://h1:9000", "http://h1:9000")
    assert b.healthy and b.in_flight == b.requests == b.failures == 0
    assert b.slots is None and b.slot_busy == []
    with pytest.raises(KeyError):
        pool.member("c")


def test_from_config_takes_pool_and_affinity() -> None:
    up = parse_upstream(
        {"name": "p", "base_urls": ["http://h1:8080/v1", "http://h2:8080/v1"], "affinity": False},
        "upstreams[0]",
    )
    pool = Pool.from_config(up)
    assert [m.base for m in pool.members] == ["http://h1:8080/v1", "http://h2:8080/v1"]
    assert pool.affinity is False
    single = Pool.from_config(parse_upstream({"name": "s", "base_url": "http://h:1/v1"}, "u"))
    assert [m.name for m in single.members] == ["h:1"]


def test_an_empty_pool_is_refused() -> None:
    with pytest.raises(ValueError):
        Pool([])


# -- balance ------------------------------------------------------------------------------------


def test_least_busy_member_is_chosen() -> None:
    pool = pool_of("a", "b", "c")
    first, second, third = pool.choose(None), pool.choose(None), pool.choose(None)
    assert names([first, second, third]) == ["a", "b", "c"]
    pool.finish(second)
    assert pool.choose(None).member.name == "b"  # the only one with nothing in flight
    assert [m.in_flight for m in pool.members] == [1, 1, 1]


def test_ties_alternate_without_affinity() -> None:
    pool = pool_of("a", "b", affinity=False)
    assert names(one_by_one(pool, ["k", "k", "k", "k"])) == ["a", "b", "a", "b"]
    assert pool.conversations == 0  # nothing remembered with affinity off


def test_ties_alternate_without_a_key() -> None:
    pool = pool_of("a", "b", "c")
    assert names(one_by_one(pool, [None] * 6)) == ["a", "b", "c", "a", "b", "c"]
    assert [m.requests for m in pool.members] == [2, 2, 2]
    assert all(m.affinity_hits == m.affinity_misses == 0 for m in pool.members)


def test_excluded_members_are_skipped() -> None:
    pool = pool_of("a", "b", "c")
    assert pool.choose(None, frozenset({"a", "b"})).member.name == "c"


# -- fallbacks -----------------------------------------------------------------------------------


def test_all_unhealthy_falls_back_to_least_busy() -> None:
    pool = pool_of("a", "b")
    pool.failed("a", CONNECT)
    pool.failed("b", TIMEOUT)
    busy = pool.choose(None)
    assert pool.choose(None).member is not busy.member  # still balanced, never refused


def test_unhealthy_or_excluded_everywhere_falls_back_to_one_not_excluded() -> None:
    pool = pool_of("a", "b", "c")
    pool.failed("c", CONNECT)
    for _ in range(3):
        pool.choose(None)  # one each: a, b, c busy
    assert pool.choose(None, frozenset({"a", "b"})).member.name == "c"


def test_all_excluded_gives_least_busy_of_all() -> None:
    pool = pool_of("a", "b")
    pool.choose(None)  # a
    assert pool.choose(None, frozenset({"a", "b"})).member.name == "b"


def test_unhealthy_member_is_avoided_while_another_is_healthy() -> None:
    pool = pool_of("a", "b")
    pool.failed("a", CONNECT)
    assert names(one_by_one(pool, [None] * 3)) == ["b", "b", "b"]


# -- cache affinity -------------------------------------------------------------------------------


def test_affinity_sticks_across_turns() -> None:
    pool = pool_of("a", "b")
    first = one_by_one(pool, ["conv"])[0]
    one_by_one(pool, [None, "other", None])  # other traffic moves the round-robin along
    turns = one_by_one(pool, ["conv", "conv", "conv"])
    assert {c.member.name for c in turns} == {first.member.name}
    assert first.member.affinity_hits == 3
    assert sum(m.affinity_misses for m in pool.members) == 0


def test_affinity_spreads_new_conversations() -> None:
    pool = pool_of("a", "b")
    assert names(one_by_one(pool, ["c1", "c2", "c1", "c2"])) == ["a", "b", "a", "b"]


def test_affinity_moves_off_an_unhealthy_member_and_counts_a_miss() -> None:
    pool = pool_of("a", "b")
    assert one_by_one(pool, ["conv"])[0].member.name == "a"
    assert pool.failed("a", CONNECT) is True
    moved = pool.choose("conv")
    assert moved.member.name == "b"
    assert pool.member("b").affinity_misses == 1
    assert pool.member("a").affinity_hits == 0
    pool.finish(moved)
    assert pool.choose("conv").member.name == "b"  # the table now says b
    assert pool.member("b").affinity_hits == 1


def test_affinity_moves_off_an_excluded_member() -> None:
    pool = pool_of("a", "b")
    one_by_one(pool, ["conv"])
    retry = pool.choose("conv", frozenset({"a"}))
    assert retry.member.name == "b"
    assert pool.member("b").affinity_misses == 1


def test_affinity_stays_on_unhealthy_member_when_none_is_healthy() -> None:
    pool = pool_of("a", "b")
    one_by_one(pool, [None, "conv"])  # conv on b
    pool.failed("a", CONNECT)
    pool.failed("b", CONNECT)
    assert pool.choose("conv").member.name == "b"  # its cache beats another unhealthy server
    assert pool.member("b").affinity_hits == 1


def test_affinity_moves_when_clearly_busier_without_slot_counts() -> None:
    pool = pool_of("a", "b")
    one_by_one(pool, ["conv"])  # conv on a
    pool.choose("x", frozenset({"b"}))  # a: 1 in flight
    assert pool.choose("conv").member.name == "a"  # 1 more than b: stays
    # a now has 2 in flight, b none: 2 more, clearly busier
    moved = pool.choose("conv")
    assert moved.member.name == "b"
    assert pool.member("b").affinity_misses == 1
    assert pool.member("a").affinity_hits == 1


def test_affinity_moves_when_its_slots_are_full_and_another_has_one_free() -> None:
    pool = pool_of("a", "b", slots=2)
    one_by_one(pool, ["conv"])  # conv on a
    pool.choose("x", frozenset({"b"}))
    stay = pool.choose("conv")  # a has a free slot: stays, though b is idle
    assert stay.member.name == "a" and stay.slot is not None
    moved = pool.choose("conv")  # a's 2 slots are both busy: it would queue
    assert moved.member.name == "b"
    assert pool.member("b").affinity_misses == 1


def test_affinity_stays_when_every_member_is_full() -> None:
    pool = pool_of("a", "b", slots=1)
    one_by_one(pool, ["conv"])  # conv on a, slot 0
    pool.choose("x", frozenset({"b"}))
    pool.choose("y", frozenset({"a"}))
    stay = pool.choose("conv")  # both would queue: better on the warm one
    assert stay.member.name == "a" and stay.slot is None
    assert pool.member("a").affinity_hits == 1


def test_full_member_moves_to_one_of_unknown_slots_only_when_idle() -> None:
    pool = pool_of("a", "b")
    pool.member("a").learn_slots(1)
    one_by_one(pool, ["conv"])  # conv on a
    pool.choose("x", frozenset({"b"}))  # a full
    busy_b = pool.choose("y", frozenset({"a"}))  # b, slots unknown, 1 in flight: no known room
    assert pool.choose("conv").member.name == "a"
    pool.finish(busy_b)
    assert pool.choose("conv").member.name == "b"


def test_affinity_off_ignores_keys() -> None:
    pool = pool_of("a", "b", affinity=False)
    assert names(one_by_one(pool, ["conv", "conv"])) == ["a", "b"]
    assert all(m.affinity_hits == m.affinity_misses == 0 for m in pool.members)


def test_affinity_table_is_bounded_lru() -> None:
    pool = pool_of("a", "b", max_keys=3)
    one_by_one(pool, ["k1", "k2", "k3"])  # a, b, a
    one_by_one(pool, ["k1"])  # k1 used again: k2 is now the oldest
    one_by_one(pool, ["k4"])
    assert pool.conversations == 3
    hits = pool.member("a").affinity_hits
    assert one_by_one(pool, ["k1"])[0].member.name == "a"
    assert pool.member("a").affinity_hits == hits + 1
    misses = sum(m.affinity_misses for m in pool.members) + sum(
        m.affinity_hits for m in pool.members
    )
    one_by_one(pool, ["k2"])  # forgotten: a new conversation, neither hit nor miss
    assert misses == sum(m.affinity_misses for m in pool.members) + sum(
        m.affinity_hits for m in pool.members
    )
    assert pool.conversations == 3


def test_default_table_bound_is_ten_thousand() -> None:
    pool = pool_of("a")
    one_by_one(pool, [f"k{i}" for i in range(10_050)])
    assert pool.conversations == 10_000


# -- slot affinity --------------------------------------------------------------------------------


def test_conversations_spread_over_idle_slots() -> None:
    pool = pool_of("a", slots=3)
    # Each finished before the next: slot 0 is idle every time, yet each new conversation gets
    # the slot assigned longest ago, so none evicts another's cache.
    assert [c.slot for c in one_by_one(pool, ["c1", "c2", "c3"])] == [0, 1, 2]
    assert [c.slot for c in one_by_one(pool, ["c2", "c1", "c3", "c1"])] == [1, 0, 2, 0]


def test_a_busy_slot_is_not_given_to_another_conversation() -> None:
    pool = pool_of("a", slots=2)
    one_by_one(pool, ["c1", "c2"])  # c1 slot 0, c2 slot 1
    c3 = pool.choose("c3")
    assert c3.slot == 0  # the one assigned longest ago
    c1 = pool.choose("c1")
    assert c1.slot == 1  # its own slot 0 is busy with c3
    c4 = pool.choose("c4")
    assert c4.slot is None  # every slot busy: the server chooses
    assert pool.member("a").slot_busy == [True, True]
    pool.finish(c3)
    assert pool.member("a").slot_busy == [False, True]


def test_a_conversation_gets_its_slot_back_once_free() -> None:
    pool = pool_of("a", slots=2)
    one_by_one(pool, ["c1"])  # slot 0
    other = pool.choose("c2")  # slot 1
    assert pool.choose("c1").slot == 0
    pool.finish(other)


def test_no_slot_keeps_the_previous_slot_in_the_table() -> None:
    pool = pool_of("a", slots=1)
    one_by_one(pool, ["c1"])  # slot 0
    blocker = pool.choose("c2")  # takes slot 0
    assert blocker.slot == 0
    unpinned = pool.choose("c1")
    assert unpinned.slot is None
    pool.finish(unpinned)
    pool.finish(blocker)
    assert pool.choose("c1").slot == 0  # still c1's best guess


def test_client_pinned_slot_gets_no_slot_and_keeps_the_table() -> None:
    pool = pool_of("a", slots=2)
    one_by_one(pool, ["c1"])  # slot 0
    pinned = pool.choose("c1", client_slot=True)
    assert pinned.slot is None
    assert pool.member("a").slot_busy == [False, False]
    assert pool.member("a").in_flight == 1
    pool.finish(pinned)
    assert pool.choose("c1").slot == 0


def test_slots_without_a_key_still_spread() -> None:
    pool = pool_of("a", slots=2)
    held = [pool.choose(None), pool.choose(None), pool.choose(None)]
    assert [c.slot for c in held] == [0, 1, None]


def test_members_without_slot_counts_get_no_slot() -> None:
    pool = pool_of("a", "b")
    assert pool.choose("c1").slot is None


def test_moved_conversation_gets_a_slot_on_its_new_member() -> None:
    pool = pool_of("a", "b", slots=2)
    one_by_one(pool, ["c1", "c2"])  # c1 a/0, c2 b/0
    pool.failed("a", CONNECT)
    moved = pool.choose("c1")
    assert (moved.member.name, moved.slot) == ("b", 1)  # b's slot 0 holds c2's cache


# -- finish ---------------------------------------------------------------------------------------


def test_finish_is_idempotent() -> None:
    pool = pool_of("a", slots=2)
    first, second = pool.choose("c1"), pool.choose("c2")
    assert pool.finish(first) is True
    assert pool.finish(first) is False
    a = pool.member("a")
    assert a.in_flight == 1 and a.slot_busy == [False, True]
    pool.finish(second)
    pool.finish(second)
    assert a.in_flight == 0 and a.slot_busy == [False, False]
    assert a.requests == 2


def test_finish_of_a_choice_from_another_pool_does_nothing() -> None:
    pool, other = pool_of("a"), pool_of("a")
    pool.choose(None)
    assert pool.finish(other.choose(None)) is False
    assert pool.member("a").in_flight == 1


def test_equal_choices_are_distinct_requests() -> None:
    pool = pool_of("a")
    first, second = pool.choose(None), pool.choose(None)
    pool.finish(first)
    pool.finish(first)
    assert pool.member("a").in_flight == 1  # the second is still in flight
    pool.finish(second)
    assert pool.member("a").in_flight == 0


# -- passive health -------------------------------------------------------------------------------


def test_connection_failure_and_timeout_mark_unhealthy() -> None:
    pool = pool_of("a", "b", "c")
    assert pool.failed("a", CONNECT) is True
    assert pool.failed("a", CONNECT) is False  # already down
    assert pool.failed("b", TIMEOUT) is True
    assert pool.failed("c", SILENT) is True  # no first token in time: a timeout too
    a = pool.member("a")
    assert not a.healthy and a.failures == 2 and a.outages == 1
    assert a.last_error == "request failed: connect"
    assert not pool.any_healthy()


def test_http_error_status_counts_but_keeps_healthy() -> None:
    pool = pool_of("a")
    assert pool.failed("a", STATUS) is False
    a = pool.member("a")
    assert a.healthy and a.failures == 1 and a.outages == 0


def test_retry_member_and_any_healthy() -> None:
    pool = pool_of("a", "b", "c")
    assert pool.any_healthy()
    assert pool.retry_member(frozenset({"a"}))
    pool.failed("b", CONNECT)
    assert pool.retry_member(frozenset({"a"}))  # c
    assert not pool.retry_member(frozenset({"a", "c"}))  # b left, but unhealthy
    pool.failed("c", TIMEOUT)
    assert not pool.retry_member(frozenset({"a"}))
    assert pool.any_healthy()


# -- checks ---------------------------------------------------------------------------------------


def healthy_llama(host: str, slots: int = 4) -> dict[str, Any]:
    return {
        f"http://{host}:8080/health": (200, {"status": "ok"}),
        f"http://{host}:8080/props": (200, {"total_slots": slots}),
    }


async def test_unhealthy_member_comes_back_after_a_good_check() -> None:
    pool = pool_of("a", "b")
    pool.failed("a", CONNECT)
    get = FakeGet({**healthy_llama("a"), **healthy_llama("b")})
    changes = await pool.check(get)
    a = pool.member("a")
    assert a.healthy and a.last_error is None
    assert Change(a, True, 4, "ok") in changes
    assert pool.choose("c", frozenset({"b"})).member is a


async def test_503_from_health_is_unhealthy() -> None:
    pool = pool_of("a")
    get = FakeGet({"http://a:8080/health": (503, {"error": {"message": "Loading model"}})})
    changes = await pool.check(get, timeout=2.5)
    a = pool.member("a")
    assert changes == [Change(a, False, None, "GET /health answered 503")]
    assert not a.healthy and a.outages == 1 and a.last_error == "GET /health answered 503"
    assert get.calls == [("http://a:8080/health", 2.5)]  # /props not asked while loading
    assert await pool.check(get) == []  # still down: nothing changed


async def test_health_404_falls_back_to_models() -> None:
    pool = pool_of("a", "b")
    get = FakeGet(
        {"http://a:8080/v1/models": (200, {"data": []}), "http://b:8080/v1/models": (401, None)}
    )
    changes = await pool.check(get)
    assert pool.member("a").healthy
    b = pool.member("b")
    assert not b.healthy
    assert changes == [Change(b, False, None, "GET /models answered 401")]
    assert sorted(get.urls()) == [
        "http://a:8080/health",
        "http://a:8080/props",  # 404: not llama.cpp, so slots stay unknown
        "http://a:8080/v1/models",
        "http://b:8080/health",
        "http://b:8080/v1/models",
    ]  # and no /props for b: it is down


async def test_total_slots_learnt_from_props_once() -> None:
    pool = pool_of("a")
    get = FakeGet(healthy_llama("a", slots=3))
    assert await pool.check(get) == [Change(pool.member("a"), None, 3, "ok")]
    a = pool.member("a")
    assert a.slots == 3 and a.slot_busy == [False] * 3
    get.calls.clear()
    assert await pool.check(get) == []
    assert get.urls() == ["http://a:8080/health"]  # known: not asked again


async def test_props_without_total_slots_leaves_slots_unknown_and_is_not_asked_again() -> None:
    pool = pool_of("vllm", "ollama")
    get = FakeGet(
        {
            "http://vllm:8080/health": (200, None),
            "http://ollama:8080/v1/models": (200, {"data": []}),
            "http://vllm:8080/props": (200, {"something": "else"}),
        }
    )
    assert await pool.check(get) == []
    assert all(m.slots is None and m.props_settled for m in pool.members)
    get.calls.clear()
    await pool.check(get)
    assert not any(url.endswith("/props") for url in get.urls())


@pytest.mark.parametrize(
    "answer", [(503, None), OSError("refused"), (200, {"total_slots": "4"}), (200, None)]
)
async def test_props_odd_answers_leave_slots_unknown(answer: Any) -> None:
    pool = pool_of("a")
    get = FakeGet({"http://a:8080/health": (200, None), "http://a:8080/props": answer})
    await pool.check(get)
    a = pool.member("a")
    assert a.slots is None
    # a server error or no answer: asked again next time; an answer without slots: not
    assert a.props_settled is (answer[0] == 200 if isinstance(answer, tuple) else False)


class FakeClientError(Exception):
    """Stands for aiohttp.ClientError, which is an Exception like this one."""


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (OSError("refused"), "unreachable: OSError"),
        (TimeoutError(), "unreachable: TimeoutError"),
        (FakeClientError(), "unreachable: FakeClientError"),
    ],
)
async def test_get_raising_is_unhealthy(exc: Exception, detail: str) -> None:
    pool = pool_of("a", "b")
    get = FakeGet({"http://a:8080/health": exc, **healthy_llama("b")})
    changes = await pool.check(get)
    a, b = pool.member("a"), pool.member("b")
    assert Change(a, False, None, detail) in changes
    assert not a.healthy and b.healthy and a.last_error == detail
    assert "http://a:8080/props" not in get.urls()


async def test_models_fallback_raising_is_unhealthy() -> None:
    pool = pool_of("a")
    get = FakeGet({"http://a:8080/v1/models": TimeoutError()})
    changes = await pool.check(get)
    assert changes == [Change(pool.member("a"), False, None, "unreachable: TimeoutError")]


async def test_members_are_checked_concurrently() -> None:
    pool = pool_of("a", "b", "c")
    started = 0
    all_started = asyncio.Event()

    async def get(url: str, timeout: float) -> tuple[int, Any]:
        nonlocal started
        if url.endswith("/health"):
            started += 1
            if started == 3:
                all_started.set()
            await asyncio.wait_for(all_started.wait(), 1.0)  # times out if one at a time
        return 200, None

    assert await pool.check(get) == []
    assert started == 3


async def test_a_failure_during_a_check_outweighs_its_good_answer() -> None:
    pool = pool_of("a")

    async def get(url: str, timeout: float) -> tuple[int, Any]:
        if url.endswith("/health"):
            pool.failed("a", CONNECT)  # a request fails while the check waits
        return 200, None

    await pool.check(get)
    assert not pool.member("a").healthy
    assert await pool.check(FakeGet({"http://a:8080/health": (200, None)})) != []
    assert pool.member("a").healthy  # the next check brings it back


# -- id_slot_body --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "hi }"}]},
        {"a": {"b": {}}, "c": [], "d": "{\"}"},
        {"x": "é ☃ 🦀", "n": None, "t": True, "f": 1.5},
        {},
    ],
)
@pytest.mark.parametrize("slot", [0, 3, 127])
def test_id_slot_body_round_trips(body: dict[str, Any], slot: int) -> None:
    spliced = id_slot_body(orjson.dumps(body), slot)
    assert orjson.loads(spliced) == {**body, "id_slot": slot}
    assert spliced.endswith(b'"id_slot":%d}' % slot)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text().filter(lambda k: k != "id_slot"), json_values, min_size=1),
       st.integers(min_value=0, max_value=1023))  # fmt: skip
def test_id_slot_body_matches_orjson(body: dict[str, Any], slot: int) -> None:
    assert orjson.loads(id_slot_body(orjson.dumps(body), slot)) == {**body, "id_slot": slot}


# -- the URLs, against a real server ------------------------------------------------------------


@pytest.fixture
async def servers() -> AsyncIterator[tuple[list[int], list[str]]]:
    """Two servers on 127.0.0.1: a llama-server lookalike (/health, /v1/models, /props) and an
    Ollama lookalike (/v1/models only). Yields their ports and the paths asked for."""
    seen: list[str] = []

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m"}]})

    async def props(request: web.Request) -> web.Response:
        return web.json_response({"total_slots": 2, "default_generation_settings": {}})

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(f"{request.url.port}{request.path}")
        return await handler(request)

    llama, ollama = web.Application(middlewares=[record]), web.Application(middlewares=[record])
    llama.router.add_get("/health", health)
    llama.router.add_get("/v1/models", models)
    llama.router.add_get("/props", props)
    ollama.router.add_get("/v1/models", models)
    runners, ports = [], []
    for app in (llama, ollama):
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        ports.append(runner.addresses[0][1])
    yield ports, seen
    for runner in runners:
        await runner.cleanup()


async def test_check_asks_real_servers_the_right_urls(
    servers: tuple[list[int], list[str]],
) -> None:
    (llama, ollama), seen = servers
    pool = Pool(
        [
            MemberConfig("llama", f"http://127.0.0.1:{llama}/v1"),
            MemberConfig("ollama", f"http://127.0.0.1:{ollama}/v1/"),
        ]
    )
    pool.failed("llama", CONNECT)
    pool.failed("ollama", CONNECT)
    async with aiohttp.ClientSession() as session:

        async def get(url: str, timeout: float) -> tuple[int, Any]:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                try:
                    return resp.status, await resp.json()
                except (aiohttp.ContentTypeError, ValueError):
                    return resp.status, None

        changes = await pool.check(get)
    llama_m, ollama_m = pool.member("llama"), pool.member("ollama")
    assert sorted(changes, key=lambda c: c.member.name) == [
        Change(llama_m, True, 2, "ok"),
        Change(ollama_m, True, None, "ok"),
    ]
    assert sorted(seen) == sorted(
        [f"{llama}/health", f"{llama}/props", f"{ollama}/health", f"{ollama}/v1/models",
         f"{ollama}/props"]
    )  # fmt: skip
    assert llama_m.slots == 2 and ollama_m.slots is None
