"""Pools of servers behind one upstream, through the real HTTP path (proxy.upstreams.pool).

Two or three fake members (`tests.poolfakes.Member`: each names itself in its answers and reports
its prompt cache, the llama.cpp-like ones in `timings` and per `id_slot`) stand behind one
upstream with `base_urls`, and the openai SDK talks to latchgate. What each member received and
what the client got show the balance, the cache affinity per conversation and llama.cpp slot,
failover before any content reached the client (without spending the retry budget), passive and
checked health, and the per-member metrics. Nothing waits on the clock: eventual conditions are
polled with a generous deadline.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, cast

import aiohttp
import openai
import orjson
import pytest
import structlog
from openai import AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe import logs
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Hang, Json, Recorded, Reply, Stream, chunk
from tests.poolfakes import TOKENS_PER_MESSAGE, Member, closed_port

MODEL = "m"
UPSTREAM = "pool"
NOTICE = "x-latchgate-notice"
DEADLINE = 20.0  # seconds, for conditions that hold eventually (a loaded 2-core machine)
SLOTS = 2
PASSWORD = "pw5ecret-Tq9"
USER = "lguser"
# No health check during the test after the first one (passive marking only).
NO_CHECKS = 3600

MakeMember = Callable[..., Awaitable[Member]]
Message = dict[str, Any]


@pytest.fixture
async def members() -> AsyncIterator[MakeMember]:
    started: list[Member] = []

    async def make(name: str, **kw: Any) -> Member:
        member = await Member(name, **kw).start()
        started.append(member)
        return member

    yield make
    for member in started:
        if member.gate is not None:
            member.gate.set()  # nothing left held
        await member.close()


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("debug", json=True, stream=out)
    yield out
    structlog.reset_defaults()


async def start_pool(start_proxy: StartProxy, *servers: Member | str, **cfg: Any) -> Running:
    urls = [s if isinstance(s, str) else s.url for s in servers]
    return await start_proxy({"name": UPSTREAM, "base_urls": urls, **cfg})


def user(text: str) -> Message:
    return {"role": "user", "content": text}


async def ask(
    lg: Running, messages: list[Message], *, stream: bool = False, **kw: Any
) -> tuple[str, list[str]]:
    """One chat completion, whole or streamed, from a client of its own: its content and
    latchgate's notices. A stream must be complete (one finish reason, "stop"), as a whole
    answer must."""
    async with lg.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=cast(Any, messages), stream=stream, **kw
        )
        notices = raw.headers.get_list(NOTICE)
        if stream:
            parts = [part async for part in cast(AsyncStream[ChatCompletionChunk], raw.parse())]
            text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            ends = [p.choices[0].finish_reason for p in parts if p.choices]
            assert [end for end in ends if end] == ["stop"], parts
            return text, notices
        reply = cast(ChatCompletion, raw.parse())
        assert reply.choices[0].finish_reason == "stop"
        return reply.choices[0].message.content or "", notices


def failover_notice(member: Member, reason: str) -> str:
    return f"{UPSTREAM}: member {member.label} failed ({reason}); sent to another member."


# -- /metrics --------------------------------------------------------------------------------


class Scrape:
    """One `GET /metrics`, its text and its samples."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def get(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def member(self, name: str, member: Member | str, **labels: str) -> float | None:
        label = member if isinstance(member, str) else member.label
        return self.get(name, upstream=UPSTREAM, member=label, **labels)

    def members(self, name: str) -> dict[str, float]:
        """member label -> value of every series of `name` on the pool."""
        return {
            dict(labels)["member"]: value
            for (found, labels), value in self.samples.items()
            if found == name and dict(labels).get("upstream") == UPSTREAM
        }


async def scrape(lg: Running) -> Scrape:
    async with aiohttp.ClientSession() as s, s.get(lg.url + "/metrics") as resp:
        assert resp.status == 200
        return Scrape(await resp.text())


async def eventually(lg: Running, what: str, check: Callable[[Scrape], bool]) -> Scrape:
    """Scrape until `check` holds (within DEADLINE); the scrape that satisfied it."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while True:
        found = await scrape(lg)
        if check(found):
            return found
        assert loop.time() < end, f"not within {DEADLINE:g} s: {what}\n{found.text}"
        await asyncio.sleep(0.05)


async def slots_known(lg: Running, *llamas: Member) -> Scrape:
    """Wait for the first health check to have learnt every llama.cpp member's slot count."""
    return await eventually(
        lg,
        "slot counts learnt",
        lambda m: all(m.member("latchgate_member_slots", x) == SLOTS for x in llamas),
    )


async def settled(lg: Running, *servers: Member | str) -> Scrape:
    """Wait for nothing to be in flight on any member (finished requests are let go after
    their answer is sent)."""
    return await eventually(
        lg,
        "nothing in flight",
        lambda m: all(m.member("latchgate_member_in_flight", x) == 0 for x in servers),
    )


def retry_reasons(found: Scrape) -> dict[str, float]:
    return {
        dict(labels)["reason"]: value
        for (name, labels), value in found.samples.items()
        if name == "latchgate_retries_total" and dict(labels).get("upstream") == UPSTREAM
    }


# -- balance ---------------------------------------------------------------------------------


async def test_without_affinity_sequential_requests_alternate(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic", affinity=False)
    same = [user("one conversation, asked again and again")]  # affinity would keep it on one
    got = [(await ask(lg, same, stream=i % 2 == 1))[0] for i in range(6)]
    assert set(got) == {"a answered", "b answered"}
    assert all(x != y for x, y in itertools.pairwise(got)), got
    assert len(a.chat_bodies()) == len(b.chat_bodies()) == 3
    found = await settled(lg, a, b)
    assert found.members("latchgate_member_requests_total") == {a.label: 3, b.label: 3}
    assert found.members("latchgate_affinity_total") == {}.fromkeys((a.label, b.label), 0)


# -- cache affinity ----------------------------------------------------------------------------

CONVERSATIONS = 4
TURNS = 3
# Turn order per round: not the same each round, so round-robin could not keep a conversation
# on its member by chance.
ROUNDS = ([0, 1, 2, 3], [2, 0, 3, 1], [1, 3, 0, 2])


def conversation_of(body: dict[str, Any]) -> int:
    first = body["messages"][0]["content"]
    match = re.fullmatch(r"conversation (\d+) starts", first)
    assert match, first
    return int(match.group(1))


def turn_of(body: dict[str, Any]) -> int:
    return (len(body["messages"]) + 1) // 2  # u, a, u, a, u: the third turn


async def test_every_turn_of_a_conversation_goes_to_its_member_and_slot(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    a = await members("a", llama=True, slots=SLOTS)
    b = await members("b", llama=True, slots=SLOTS)
    c = await members("c")  # not llama.cpp: no slots, OpenAI's cached_tokens
    lg = await start_pool(start_proxy, a, b, c)  # kind auto: llama.cpp, from a's /props
    await slots_known(lg, a, b)
    histories = [[user(f"conversation {i} starts")] for i in range(CONVERSATIONS)]
    answers: dict[int, list[str]] = {i: [] for i in range(CONVERSATIONS)}
    for turn, order in enumerate(ROUNDS):
        for i in order:
            text, notices = await ask(lg, histories[i], stream=(i + turn) % 2 == 1)
            assert notices == []
            answers[i].append(text)
            histories[i] += [{"role": "assistant", "content": text}, user(f"turn {turn + 2}")]
    assert lg.proxy.upstreams[UPSTREAM].kind == "llama.cpp"

    # Where each turn of each conversation went, and on which slot.
    where: dict[int, dict[int, tuple[str, Any]]] = {i: {} for i in range(CONVERSATIONS)}
    for member in (a, b, c):
        for body in member.chat_bodies():
            conv, turn = conversation_of(body), turn_of(body)
            assert turn not in where[conv], "a turn sent twice"
            where[conv][turn] = (member.name, body.get("id_slot"))
    home: dict[int, str] = {}
    for conv, turns in where.items():
        assert sorted(turns) == [1, 2, 3]
        names = {name for name, _ in turns.values()}
        assert len(names) == 1, (conv, turns)  # every turn on the member of its first
        home[conv] = names.pop()
        assert answers[conv] == [f"{home[conv]} answered"] * TURNS
    assert set(home.values()) == {"a", "b", "c"}, home  # the conversations spread

    for conv, turns in where.items():
        slots = {slot for _, slot in turns.values()}
        if home[conv] == "c":
            assert slots == {None}  # a server without slots is sent no id_slot
            continue
        assert len(slots) == 1, (conv, turns)  # the same slot every turn
        slot = slots.pop()
        assert isinstance(slot, int) and not isinstance(slot, bool) and 0 <= slot < SLOTS
    for name in ("a", "b"):
        on = [next(iter(where[conv].values()))[1] for conv in home if home[conv] == name]
        assert len(set(on)) == len(on), (name, on)  # conversations of a member: their own slots

    # Each member's cache served every later turn of its conversations: prompt tokens of the
    # three turns are 10 + 30 + 50, of which 0 + 10 + 30 cached.
    served = {name: sum(1 for h in home.values() if h == name) for name in "abc"}
    per_conversation_prompt = TOKENS_PER_MESSAGE * (1 + 3 + 5)
    per_conversation_cached = TOKENS_PER_MESSAGE * (0 + 1 + 3)
    for member in (a, b, c):
        assert member.prompt_total == served[member.name] * per_conversation_prompt
        assert member.cached_total == served[member.name] * per_conversation_cached

    found = await settled(lg, a, b, c)
    for member in (a, b, c):
        n = served[member.name]
        assert found.member("latchgate_member_requests_total", member) == n * TURNS
        assert found.member("latchgate_member_failures_total", member) == 0
        assert found.member("latchgate_member_healthy", member) == 1
        assert found.member("latchgate_affinity_total", member, outcome="hit") == n * (TURNS - 1)
        assert found.member("latchgate_affinity_total", member, outcome="miss") == 0
        prompt = found.member("latchgate_member_prompt_tokens_total", member)
        cached = found.member("latchgate_member_cached_prompt_tokens_total", member)
        assert (prompt, cached) == (member.prompt_total, member.cached_total)
    assert found.members("latchgate_member_slots") == {a.label: 2, b.label: 2, c.label: 0}


@pytest.mark.parametrize("field", ["prompt_cache_key", "user"])
async def test_a_conversation_is_keyed_by_its_field_over_its_messages(
    members: MakeMember, start_proxy: StartProxy, field: str
) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic")
    got: dict[str, list[str]] = {"k1": [], "k2": []}
    for n, key in enumerate(["k1", "k1", "k1", "k2", "k2", "k2"]):
        # different messages every time: only the key ties the requests together
        text, _ = await ask(lg, [user(f"unrelated request {n}")], stream=n % 2 == 1,
                            **{field: key})
        got[key].append(text)
    assert len(set(got["k1"])) == 1 and len(set(got["k2"])) == 1, got
    assert got["k1"][0] != got["k2"][0]  # two conversations, two members
    bodies = a.chat_bodies() + b.chat_bodies()
    assert sorted(body[field] for body in bodies) == ["k1"] * 3 + ["k2"] * 3  # sent as given


async def test_a_client_pinned_id_slot_goes_through_unchanged(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    a = await members("a", llama=True, slots=SLOTS)
    b = await members("b", llama=True, slots=SLOTS)
    lg = await start_pool(start_proxy, a, b, kind="llama.cpp")
    await slots_known(lg, a, b)
    pinned = {0: [user("conversation 0 starts")], 1: [user("conversation 1 starts")]}
    for turn in range(2):
        for slot, history in pinned.items():
            text, _ = await ask(lg, history, stream=turn == 1,
                                extra_body={"id_slot": slot})
            history += [{"role": "assistant", "content": text}, user("more")]
    seen: list[tuple[int, int]] = []
    for member in (a, b):
        for rec in member.requests:
            assert rec.raw.count(b'"id_slot"') == 1, rec.raw  # the client's, not a second one
            seen.append((conversation_of(rec.json), rec.json["id_slot"]))
    assert sorted(seen) == [(0, 0), (0, 0), (1, 1), (1, 1)]


# -- a member down, failing, killed, back ------------------------------------------------------


async def test_a_member_down_from_the_start_never_fails_a_request(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    b = await members("b", llama=True, slots=SLOTS)
    down = f"http://127.0.0.1:{closed_port()}/v1"
    down_label = down.removeprefix("http://").removesuffix("/v1")
    lg = await start_pool(start_proxy, down, b, retries=0)  # failover spends no retry budget
    failovers = 0
    for n in range(6):
        text, notices = await ask(lg, [user(f"request {n}")], stream=n % 2 == 1)
        assert text == "b answered"
        # The first health check may find it down before a request does; a request that does
        # find it is sent on to b at once, and says so.
        assert notices in ([], [f"{UPSTREAM}: member {down_label} failed (connect); sent to "
                                "another member."]), notices
        failovers += len(notices)
    found = await eventually(
        lg, "the member down", lambda m: m.member("latchgate_member_healthy", down_label) == 0
    )
    found = await settled(lg, down_label, b)
    assert found.member("latchgate_member_healthy", b) == 1
    assert found.member("latchgate_member_requests_total", b) == 6
    # every attempt on it failed, and each was failed over
    assert found.member("latchgate_member_requests_total", down_label) == failovers
    assert found.member("latchgate_member_failures_total", down_label) == failovers
    assert retry_reasons(found) == ({"failover": failovers} if failovers else {})
    assert len(b.chat_bodies()) == 6


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_member_gone_since_its_check_is_failed_over_and_marked_down(
    members: MakeMember, start_proxy: StartProxy, stream: bool
) -> None:
    a = await members("a", llama=True, slots=SLOTS)
    b = await members("b", llama=True, slots=SLOTS)
    lg = await start_pool(start_proxy, a, b, retries=0, health_interval=NO_CHECKS)
    await slots_known(lg, a, b)  # the first check is over: both up
    await a.kill()
    results = [
        await ask(lg, [user(f"request {n}")], stream=stream) for n in range(4)
    ]
    assert [text for text, _ in results] == ["b answered"] * 4
    notices = [n for _, found in results for n in found]
    # the one request that found it down was sent to b at once; the pool then knew
    assert notices == [failover_notice(a, "connect")]
    found = await settled(lg, a, b)
    assert found.member("latchgate_member_healthy", a) == 0  # marked down, by no check
    assert found.member("latchgate_member_failures_total", a) == 1
    assert found.member("latchgate_member_requests_total", a) == 1
    assert found.member("latchgate_member_requests_total", b) == 4
    assert found.member("latchgate_member_failures_total", b) == 0
    assert retry_reasons(found) == {"failover": 1}


SERVER_ERRORS = {
    503: {"error": {"message": "Service Unavailable", "type": "server_error", "code": 503}},
    500: {"error": {"message": "Internal Server Error", "type": "server_error", "code": 500}},
}


def fail_first(status: int, *on: Member) -> list[Recorded]:
    """The first request any of `on` receives is answered `status`; the records of it."""
    trapped: list[Recorded] = []

    def hook(rec: Recorded) -> Reply | None:
        if trapped:
            return None
        trapped.append(rec)
        return Json(SERVER_ERRORS[status], status=status)

    for member in on:
        member.hook = hook
    return trapped


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("status", [503, 500])
async def test_a_transient_error_goes_to_another_member_before_any_content(
    members: MakeMember, start_proxy: StartProxy, status: int, stream: bool
) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic", retries=0)
    trapped = fail_first(status, a, b)
    text, notices = await ask(lg, [user("Hi")], stream=stream)
    assert len(trapped) == 1
    failed, other = (a, b) if a.requests and a.requests[0] is trapped[0] else (b, a)
    assert failed.requests == trapped
    assert text == f"{other.name} answered"  # a complete answer, all of it from the other
    assert notices == [failover_notice(failed, "status_5xx")]
    assert len(other.requests) == 1
    assert other.requests[0].json == failed.requests[0].json  # the same request, resent
    found = await settled(lg, a, b)
    assert retry_reasons(found) == {"failover": 1}
    assert found.member("latchgate_member_healthy", failed) == 1  # it answered: it is up
    assert found.member("latchgate_member_requests_total", failed) == 1
    assert found.member("latchgate_member_requests_total", other) == 1


STARTED = "stream, content already sent"
WAITING_STREAM = "stream, nothing sent yet"
WAITING_WHOLE = "whole, nothing sent yet"


def stall(rec: Recorded) -> Reply | None:
    """How the member to be killed answers: it hangs, after some content or before any."""
    text = rec.json["messages"][0]["content"]
    if text.startswith(STARTED):
        return Stream([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"})],
                      then="hang")
    if text.startswith(WAITING_STREAM):
        return Stream([], then="hang")  # the headers, then nothing
    if text.startswith(WAITING_WHOLE):
        return Hang()
    return None


async def stream_under_way(lg: Running) -> tuple[asyncio.Task[None], list[str]]:
    """A stream of STARTED (which the member to be killed answers with some content, then
    nothing), read to its end in a task; returned once its first content reached the client,
    with the content read so far."""
    first_content = asyncio.Event()
    streamed: list[str] = []

    async def read() -> None:
        async with lg.client() as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=[cast(Any, user(STARTED))], stream=True
            )
            async for part in stream:
                if part.choices and part.choices[0].delta.content:
                    streamed.append(part.choices[0].delta.content)
                    first_content.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(first_content.wait(), DEADLINE)
    return task, streamed


async def test_a_member_killed_mid_run(members: MakeMember, start_proxy: StartProxy) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic", retries=0,
                          health_interval=NO_CHECKS)
    a.hook = stall
    b.gate = asyncio.Event()  # b holds its answers, so that a gets its share of the requests

    started, streamed = await stream_under_way(lg)  # its first content reached the client
    assert [r.json["messages"][0]["content"] for r in a.requests] == [STARTED]

    # Requests nothing has reached the client of yet, on both members.
    waiting = [
        (f"{WAITING_STREAM} {n}" if n % 2 else f"{WAITING_WHOLE} {n}", n % 2 == 1)
        for n in range(6)
    ]
    tasks = [
        asyncio.create_task(ask(lg, [user(text)], stream=is_stream))
        for text, is_stream in waiting
    ]
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while len(a.requests) + len(b.requests) < 1 + len(waiting):
        assert loop.time() < end, "the requests did not all arrive"
        await asyncio.sleep(0.02)
    on_a = {r.json["messages"][0]["content"] for r in a.requests[1:]}
    assert on_a, "no waiting request was sent to a"  # least busy: about half of them

    await a.kill()
    b.gate.set()

    # The stream under way ends with an error the SDK raises, never a clean end.
    with pytest.raises(openai.APIError) as info:
        await asyncio.wait_for(started, DEADLINE)
    assert "".join(streamed) == "Hel"
    assert f"The upstream {UPSTREAM} " in info.value.message
    assert "the answer is incomplete" in info.value.message

    # Every request nothing had reached the client of succeeds, on b; those that were on a say
    # they were failed over.
    results = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)
    for (text, _), (got, notices) in zip(waiting, results, strict=True):
        assert got == "b answered", text
        if text in on_a:
            assert notices == [failover_notice(a, "connect")], (text, notices)
        else:
            assert notices == [], (text, notices)
    # and so does every request after
    for n in range(3):
        assert await ask(lg, [user(f"after {n}")], stream=n % 2 == 1) == ("b answered", [])

    found = await settled(lg, a, b)
    assert found.member("latchgate_member_healthy", a) == 0
    assert found.member("latchgate_member_healthy", b) == 1
    # every attempt on a was cut; each that had sent nothing yet was failed over
    assert found.member("latchgate_member_requests_total", a) == 1 + len(on_a)
    # the waiting ones failed over, and the stream under way broke: each counts a failure
    assert found.member("latchgate_member_failures_total", a) == len(on_a) + 1
    assert found.member("latchgate_member_requests_total", b) == len(waiting) + 3
    assert len(b.chat_bodies()) == len(waiting) + 3
    assert retry_reasons(found) == {"failover": len(on_a)}


async def test_a_member_back_after_its_health_check_gets_requests_again(
    members: MakeMember, start_proxy: StartProxy, captured: io.StringIO
) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic", affinity=False,
                          health_interval=0.5)
    await a.kill()
    await eventually(lg, "a checked down", lambda m: m.member("latchgate_member_healthy", a) == 0)
    for n in range(4):
        assert await ask(lg, [user(f"while a is down {n}")]) == ("b answered", [])
    await a.revive()
    await eventually(lg, "a checked up", lambda m: m.member("latchgate_member_healthy", a) == 1)
    got = [(await ask(lg, [user(f"a is back {n}")], stream=n % 2 == 1))[0]
           for n in range(4)]
    assert got.count("a answered") == 2 and got.count("b answered") == 2, got
    assert len(a.chat_bodies()) == 2  # all after it came back
    found = await settled(lg, a, b)
    assert found.member("latchgate_member_failures_total", a) == 0  # the check found it down
    assert found.member("latchgate_member_requests_total", a) == 2
    events = [orjson.loads(line) for line in captured.getvalue().splitlines()]
    changes = [(e["event"], e["member"], e["detail"]) for e in events if "member" in e]
    assert [(event, member) for event, member, _ in changes] == [
        ("member_down", a.label), ("member_up", a.label)
    ], changes
    assert changes[0][2].startswith("unreachable: ") and changes[1][2] == "ok", changes


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_every_member_down_is_the_usual_upstream_error(
    start_proxy: StartProxy, stream: bool
) -> None:
    urls = [f"http://127.0.0.1:{closed_port()}/v1" for _ in range(2)]
    lg = await start_pool(start_proxy, *urls, kind="generic", retries=1)
    with pytest.raises(openai.APIStatusError) as info:
        await ask(lg, [user("Hi")], stream=stream)
    err = info.value
    assert err.status_code == 502
    assert err.code == "upstream_unreachable"
    body = err.body
    assert isinstance(body, dict) and body["type"] == "upstream_error"
    assert re.fullmatch(
        rf"The upstream {UPSTREAM} could not be reached or broke the connection "
        r"\(ClientConnectorError: .*\) after [23] attempt\(s\)\. Check that the server is up, "
        r"or raise its timeouts or retry budget\.",
        body["message"],
    ), body["message"]
    # the retry budget was spent on the pool as a whole
    assert f"Retry 1 of 1 on {UPSTREAM} after connect" in " ".join(
        err.response.headers.get_list(NOTICE)
    )
    found = await settled(lg, *[u.removeprefix("http://").removesuffix("/v1") for u in urls])
    assert set(found.members("latchgate_member_healthy").values()) == {0}
    assert retry_reasons(found).get("connect") == 1


# -- metrics -----------------------------------------------------------------------------------


async def test_member_metrics_count_everything_and_never_show_a_password(
    members: MakeMember, start_proxy: StartProxy, captured: io.StringIO
) -> None:
    p = await members("p", llama=True, slots=SLOTS, userinfo=f"{USER}:{PASSWORD}@")
    a = await members("a", llama=True, slots=SLOTS)
    lg = await start_pool(start_proxy, p, a, retries=0, health_interval=NO_CHECKS)
    await slots_known(lg, p, a)
    # the member reached through its URL's credentials
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert p.probes and all(r.headers.get("Authorization") == f"Basic {basic}" for r in p.probes)

    x: list[Message] = [user("conversation x")]
    y: list[Message] = [user("conversation y")]

    async def turn(history: list[Message], expect: str, notices: list[str] | None = None) -> None:
        text, said = await ask(lg, history, stream=len(history) % 4 == 3)
        assert (text, said) == (f"{expect} answered", notices or [])
        history += [{"role": "assistant", "content": text}, user("go on")]

    await turn(x, "p")  # first turns: balanced
    await turn(y, "a")
    await turn(x, "p")  # hits
    await turn(y, "a")
    found = await settled(lg, p, a)
    assert found.member("latchgate_member_in_flight", p) == 0
    assert all(r.headers.get("Authorization") == f"Basic {basic}" for r in p.requests)

    await p.kill()
    await turn(x, "a", [failover_notice(p, "connect")])  # a hit on p, failed, a miss on a
    await turn(x, "a")  # a hit on a, its new home

    found = await settled(lg, p, a)
    assert found.members("latchgate_member_requests_total") == {p.label: 3, a.label: 4}
    assert found.members("latchgate_member_failures_total") == {p.label: 1, a.label: 0}
    assert found.members("latchgate_member_healthy") == {p.label: 0, a.label: 1}
    assert found.members("latchgate_member_slots") == {p.label: 2, a.label: 2}
    hits = {m.label: found.member("latchgate_affinity_total", m, outcome="hit") for m in (p, a)}
    misses = {m.label: found.member("latchgate_affinity_total", m, outcome="miss") for m in (p, a)}
    assert hits == {p.label: 2, a.label: 2}
    assert misses == {p.label: 0, a.label: 1}
    # the tokens the fakes reported, per member: p served x's first two turns (10 + 30, 10 of
    # it cached), a served y's (10 + 30, 10 cached) and x's last two (50 + 70; the first cold
    # on a, the second with its 50 cached)
    assert (p.prompt_total, p.cached_total) == (40, 10)
    assert (a.prompt_total, a.cached_total) == (160, 60)
    assert found.members("latchgate_member_prompt_tokens_total") == {p.label: 40, a.label: 160}
    assert found.members("latchgate_member_cached_prompt_tokens_total") == {
        p.label: 10, a.label: 60,
    }

    await a.kill()  # every member down: an error naming the upstream, no URL credentials
    with pytest.raises(openai.APIStatusError) as info:
        await ask(lg, [user("nobody home")])
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict)
    assert body["message"].startswith(f"The upstream {UPSTREAM} could not be reached")
    error_text = info.value.response.text

    final = await scrape(lg)
    log_text = captured.getvalue()
    assert p.label in final.text
    assert failover_notice(p, "connect") in log_text  # the log did speak of p
    for where, text in (("metrics", final.text), ("log", log_text), ("error", error_text)):
        assert PASSWORD not in text, where
        assert USER not in text, where
        assert basic not in text, where
    assert any(e.get("status") == 502 for e in map(orjson.loads, log_text.splitlines()))


async def test_a_one_server_upstream_has_no_member_metrics(
    lg: Running, fake: FakeUpstream
) -> None:
    assert (await ask(lg, [user("Hi")]))[0] == "Hello!"
    assert lg.proxy.upstreams["fake"].pool is None
    text = (await scrape(lg)).text
    assert "latchgate_requests_total" in text  # the scrape is a real one
    assert "latchgate_member_" not in text
    assert "latchgate_affinity" not in text


# -- fixed bugs: a member that broke mid-stream, and readiness of a pool -----------------------


async def test_a_member_whose_stream_broke_mid_way_is_marked_down(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    a, b = await members("a"), await members("b")
    lg = await start_pool(start_proxy, a, b, kind="generic", retries=0,
                          health_interval=NO_CHECKS)
    a.hook = stall
    started, _ = await stream_under_way(lg)
    await a.kill()
    with pytest.raises(openai.APIError, match="broke mid-stream"):
        await asyncio.wait_for(started, DEADLINE)
    found = await settled(lg, a, b)
    assert found.member("latchgate_member_failures_total", a) == 1
    assert found.member("latchgate_member_healthy", a) == 0


async def test_a_pool_with_a_healthy_member_is_ready(
    members: MakeMember, start_proxy: StartProxy
) -> None:
    b = await members("b")
    down = f"http://127.0.0.1:{closed_port()}/v1"
    down_label = down.removeprefix("http://").removesuffix("/v1")
    lg = await start_pool(start_proxy, down, b, kind="generic")
    await eventually(
        lg, "the member down", lambda m: m.member("latchgate_member_healthy", down_label) == 0
    )
    assert await ask(lg, [user("Hi")]) == ("b answered", [])
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE / 2
    async with aiohttp.ClientSession() as s:
        while True:
            async with s.get(lg.url + "/readyz") as resp:
                if resp.status == 200:
                    break
                assert loop.time() < end, await resp.text()
            await asyncio.sleep(0.1)
