"""A pool of servers behind one upstream: which member (and llama.cpp slot) gets each request.

Several llama-server, vLLM or Ollama processes serving the same models can stand behind one
upstream name (`base_urls` or `[[upstreams.members]]`). Spreading requests over them is the easy
part; the reason this module exists is the prompt cache. A local server only answers the next
turn of a long agent conversation quickly when that conversation's prefix is still in its KV
cache, and on llama.cpp, in the *slot* that processed the previous turn. Plain round-robin sends
every turn to a cold server and makes each turn re-read the whole conversation. So the pool keeps
a bounded table conversation key -> (member, slot) of the last turn and sends the next turn back
there, unless that would cost more than the cache saves.

The rules, in `Pool.choose`:

* **Balance.** Among healthy members not yet tried by this request (`exclude`), the one with the
  fewest requests in flight; ties go round-robin, so sequential requests alternate. When every
  member is unhealthy or excluded, the least busy not excluded, and when all are excluded, the
  least busy of all: a member marked unhealthy may have recovered since, so the pool never
  refuses a request for want of a healthy member.
* **Cache affinity** (`affinity` on, a conversation key given). A conversation stays on the
  member of its previous turn unless that member is unhealthy, excluded, or *clearly busier*:
  - its slot count is known, its requests in flight are at least that many (the request would
    queue), and another healthy member has a free slot (in flight below its slot count, or
    nothing in flight when its slot count is unknown); the conversation moves to the least busy
    such member;
  - its slot count is unknown and it has at least 2 more requests in flight than the least busy
    healthy member; the conversation moves there.
  One more request on a warm server usually beats a cold prefill elsewhere, hence "clearly".
  A turn served by the conversation's member counts as an affinity hit on it; a turn moved
  elsewhere counts as a miss on the member that serves it (cold).
* **Slot affinity** (llama.cpp members whose slot count `total_slots` is known, and the client
  did not pin `id_slot` itself). The request gets a slot: its conversation's previous slot on
  that member when latchgate has nothing in flight on it, else the idle slot assigned longest
  ago (so conversations spread over the slots instead of evicting each other's caches), else
  none (the server chooses). The integrator adds it to the body with `id_slot_body`.

Health is learnt two ways: passively (`Pool.failed`: a connection failure or timeout marks the
member unhealthy at once), and by `Pool.check`, run every `health_interval` seconds, which also
learns each llama.cpp member's slot count. Nothing here does I/O of its own or logs: `check` is
given the function that fetches a URL and returns what changed, for the caller to log and count.
No aiohttp either: the module is pure bookkeeping, tested without sockets.

`choose` and `finish` run on every request of a pooled upstream: they are O(members) (and
O(slots) for the slot), and allocate nothing beyond the `Choice` they hand out.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.settings import MemberConfig, UpstreamConfig

DEFAULT_MAX_KEYS = 10_000
DEFAULT_CHECK_TIMEOUT = 5.0
# Requests more in flight than the least busy member before a conversation leaves its member,
# when slot counts are unknown. 1 would move a conversation whenever another request shares its
# server, throwing its cache away for the sake of one queued request.
BUSIER_BY = 2

# `Pool.failed` reasons (those of `Layer.on_failure`). A connection failure or a timeout
# (`SILENT` is one: no byte within the first-token or idle timeout) marks a member unhealthy;
# any other reason (`STATUS`, an HTTP error status: the server is up and answering) only counts.
CONNECT = "connect"
TIMEOUT = "timeout"
SILENT = "silent"
STATUS = "status"
UNREACHABLE = frozenset({CONNECT, TIMEOUT, SILENT})

# Fetches a URL with a timeout (seconds): (status, parsed JSON or None). Raises when the server
# cannot be reached (aiohttp.ClientError, OSError, TimeoutError...).
Get = Callable[[str, float], Awaitable[tuple[int, Any]]]

_NONE: frozenset[str] = frozenset()


@dataclass(slots=True, eq=False)  # eq=False: members are compared (and hashed) by identity
class Member:
    """One server of a pool and what latchgate knows about it."""

    config: MemberConfig
    base: str  # the OpenAI base URL, without a trailing slash
    root: str  # the server root (the base URL without `/v1`), for /health and /props
    healthy: bool = True  # until a check or a failed connection says otherwise
    in_flight: int = 0
    requests: int = 0  # requests chosen for it (each attempt of a request counts)
    failures: int = 0  # `Pool.failed` calls
    affinity_hits: int = 0
    affinity_misses: int = 0
    # Prompt tokens it was sent and took from its prompt cache: kept by the caller, which reads
    # them from the answers; the pool only holds them, for the metrics.
    prompt_tokens: int = 0
    cached_tokens: int = 0
    outages: int = 0  # times it was marked unhealthy
    last_error: str | None = None  # why it is unhealthy (no URL: it may hold a password)
    slots: int | None = None  # its parallel slots (llama.cpp `total_slots`), when known
    # Per slot: whether latchgate has a request in flight on it, and the `requests` count when
    # it was last assigned (0: never), for picking the idle slot assigned longest ago.
    slot_busy: list[bool] = field(default_factory=list)
    slot_assigned: list[int] = field(default_factory=list)
    # Whether /props gave a final answer (slots, or a server without them): not asked again.
    props_settled: bool = False

    @classmethod
    def from_config(cls, config: MemberConfig) -> Member:
        return cls(config, config.base_url.rstrip("/"), config.server_root.rstrip("/"))

    @property
    def name(self) -> str:
        return self.config.name

    def learn_slots(self, total: int) -> None:
        """Set its slot count (once known, it is kept: a restarted server is the same member)."""
        self.slots = total
        self.slot_busy = [False] * total
        self.slot_assigned = [0] * total

    def has_room(self) -> bool:
        """Whether a request sent now would start at once rather than queue (as far as latchgate
        knows: with no slot count, only an idle member is known to have room)."""
        return self.in_flight < (self.slots if self.slots is not None else 1)

    def idle_slot(self) -> int | None:
        """The slot without latchgate's requests that was assigned longest ago, if any."""
        best: int | None = None
        oldest = 0
        for slot, busy in enumerate(self.slot_busy):
            if not busy and (best is None or self.slot_assigned[slot] < oldest):
                best, oldest = slot, self.slot_assigned[slot]
        return best


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: each choice is its own request
class Choice:
    """Where one request goes: a member, and the slot to pin with `id_slot` (None: no pin)."""

    member: Member
    slot: int | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """What one health check changed about one member."""

    member: Member
    healthy: bool | None  # its new health when that flipped, else None
    slots: int | None  # its slot count when this check learnt it, else None
    detail: str  # what the check saw: "ok", "GET /health answered 503", "unreachable: ..."


class Pool:
    """The members of one upstream, their load and health, and where conversations went."""

    def __init__(
        self,
        members: Sequence[MemberConfig],
        *,
        affinity: bool = True,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        if not members:
            raise ValueError("a pool needs at least one member")
        self._members = [Member.from_config(m) for m in members]
        self._by_name = {m.name: m for m in self._members}
        self.affinity = affinity
        self.max_keys = max_keys
        # Conversation key -> the Choice of its last turn, least recently used first. The Choice
        # itself rather than a (name, slot) tuple: it names both, and is already allocated.
        self._table: OrderedDict[str, Choice] = OrderedDict()
        # Choices not yet finished. A set rather than a flag on the Choice: the Choice stays
        # immutable, and a second `finish` of the same one finds nothing to undo.
        self._live: set[Choice] = set()
        self._next = 0  # where the round-robin scan starts

    @classmethod
    def from_config(cls, config: UpstreamConfig, *, max_keys: int = DEFAULT_MAX_KEYS) -> Pool:
        return cls(config.pool, affinity=config.affinity, max_keys=max_keys)

    # -- looking -------------------------------------------------------------------------------

    @property
    def members(self) -> list[Member]:
        """Every member, in config order."""
        return list(self._members)

    def member(self, name: str) -> Member:
        """The member of that name (KeyError when there is none)."""
        return self._by_name[name]

    def any_healthy(self) -> bool:
        return any(m.healthy for m in self._members)

    def retry_member(self, exclude: frozenset[str]) -> bool:
        """Whether a healthy member not yet tried (not in `exclude`) is left to fail over to."""
        return any(m.healthy and m.name not in exclude for m in self._members)

    @property
    def conversations(self) -> int:
        """How many conversation keys the affinity table holds."""
        return len(self._table)

    # -- choosing ------------------------------------------------------------------------------

    def choose(
        self, key: str | None, exclude: frozenset[str] = _NONE, client_slot: bool = False
    ) -> Choice:
        """Where to send a request: see the module docstring for the rules. `key` identifies its
        conversation (None: none), `exclude` names the members this request already tried, and
        `client_slot` says the client pinned `id_slot` itself. Call `finish` when it is over."""
        tracked = self.affinity and key is not None
        prev = self._table.get(key) if tracked and key is not None else None
        member = self._pick(prev, exclude)
        # Slots only with affinity: without it, llama.cpp's own choice (the slot whose cached
        # prompt is most similar) is better than a pinned slot that may hold another prompt.
        slot = (
            None
            if client_slot or not self.affinity or member.slots is None
            else self._slot(member, prev)
        )
        choice = Choice(member, slot)
        self._start(choice)
        if tracked and key is not None:
            self._remember(key, prev, choice)
        return choice

    def finish(self, choice: Choice) -> bool:
        """The request sent on `choice` is over. False (and nothing changes) when it was already
        finished, or is not this pool's."""
        try:
            self._live.remove(choice)
        except KeyError:
            return False
        member = choice.member
        member.in_flight -= 1
        if choice.slot is not None:
            member.slot_busy[choice.slot] = False
        return True

    def _pick(self, prev: Choice | None, exclude: frozenset[str]) -> Member:
        if prev is None:
            return self._balanced(exclude)
        home = prev.member
        member = self._stay_or_move(home, exclude)
        if member is home:
            member.affinity_hits += 1
        else:
            member.affinity_misses += 1
        return member

    def _stay_or_move(self, home: Member, exclude: frozenset[str]) -> Member:
        if home.name in exclude:
            return self._balanced(exclude)
        if not home.healthy:
            # With no healthy member to go to, its own (maybe recovered) server, which holds the
            # conversation's cache, beats another unhealthy one.
            return self._balanced(exclude, fallback=home)
        relief = self._relief(home, exclude)
        return relief if relief is not None else home

    def _relief(self, home: Member, exclude: frozenset[str]) -> Member | None:
        """The member to move to when `home` is clearly busier (module docstring), else None."""
        if home.slots is not None:
            if home.in_flight < home.slots:
                return None
            i = self._least_busy(exclude, healthy=True, room=True, skip=home)
        else:
            i = self._least_busy(exclude, healthy=True)
            if i >= 0 and home.in_flight < self._members[i].in_flight + BUSIER_BY:
                return None
        return self._members[i] if i >= 0 else None

    def _balanced(self, exclude: frozenset[str], fallback: Member | None = None) -> Member:
        """The least busy healthy member not excluded, round-robin among equals; else
        `fallback`, else the least busy not excluded, else the least busy of all."""
        i = self._least_busy(exclude, healthy=True)
        if i < 0 and fallback is not None:
            return fallback
        if i < 0:
            i = self._least_busy(exclude, healthy=False)
        if i < 0:
            i = self._least_busy(_NONE, healthy=False)
        self._next = (i + 1) % len(self._members)
        return self._members[i]

    def _least_busy(
        self,
        exclude: frozenset[str],
        *,
        healthy: bool,
        room: bool = False,
        skip: Member | None = None,
    ) -> int:
        """Index of the member with the fewest in flight among those that qualify, scanning from
        the round-robin start so the first of equals wins; -1 when none qualifies."""
        members = self._members
        n = len(members)
        best = -1
        for step in range(n):
            i = (self._next + step) % n
            m = members[i]
            if m is skip or (healthy and not m.healthy) or (room and not m.has_room()):
                continue
            if m.name in exclude:
                continue
            if best < 0 or m.in_flight < members[best].in_flight:
                best = i
        return best

    def _slot(self, member: Member, prev: Choice | None) -> int | None:
        # (prev.slot indexes member's lists: a member's slot count, once learnt, never changes.)
        slot = prev.slot if prev is not None and prev.member is member else None
        if slot is not None and not member.slot_busy[slot]:
            return slot
        return member.idle_slot()

    def _start(self, choice: Choice) -> None:
        member = choice.member
        member.in_flight += 1
        member.requests += 1
        if choice.slot is not None:
            member.slot_busy[choice.slot] = True
            member.slot_assigned[choice.slot] = member.requests  # a clock that only goes up
        self._live.add(choice)

    def _remember(self, key: str, prev: Choice | None, choice: Choice) -> None:
        table = self._table
        if prev is not None:
            table.move_to_end(key)
            if choice.slot is None and prev.member is choice.member:
                # No slot given (all busy, or the client pinned one): the server chose, and its
                # old slot stays the best guess of where the conversation's cache is.
                return
        table[key] = choice
        if len(table) > self.max_keys:
            table.popitem(last=False)

    # -- health --------------------------------------------------------------------------------

    def failed(self, member_name: str, reason: str) -> bool:
        """A request to the member failed. `CONNECT`, `TIMEOUT` or `SILENT` marks it unhealthy
        until the next good check; any other reason (`STATUS`: an error answer) only counts.
        True when this marked it unhealthy (it was healthy before)."""
        member = self._by_name[member_name]
        member.failures += 1
        if reason not in UNREACHABLE:
            return False
        was = member.healthy
        _mark_down(member, f"request failed: {reason}")
        return was

    async def check(self, get: Get, timeout: float = DEFAULT_CHECK_TIMEOUT) -> list[Change]:
        """Check every member at once: `GET {root}/health` (200: healthy; llama.cpp answers 503
        while it loads the model), falling back to `GET {base}/models` when /health is 404;
        then, for a healthy member whose slot count is unknown, `GET {root}/props` for llama.cpp's
        `total_slots`. Any exception `get` raises means unreachable. Returns what changed."""
        found = await asyncio.gather(*(self._check_member(m, get, timeout) for m in self._members))
        return [change for change in found if change is not None]

    async def _check_member(self, member: Member, get: Get, timeout: float) -> Change | None:
        outages = member.outages
        healthy, detail = await _probe_health(member, get, timeout)
        flipped: bool | None = None
        if not healthy:
            flipped = False if member.healthy else None
            _mark_down(member, detail)
        elif not member.healthy and member.outages == outages:
            # (Checked against `outages`: a request that failed while this check was under way
            # is newer news than a good answer, and the member stays down until the next one.)
            flipped = True
            member.healthy, member.last_error = True, None
        learned = None
        if member.healthy and member.slots is None and not member.props_settled:
            learned = await _learn_slots(member, get, timeout)
        if flipped is None and learned is None:
            return None
        return Change(member, flipped, learned, detail)


def _mark_down(member: Member, why: str) -> None:
    if member.healthy:
        member.outages += 1
    member.healthy = False
    member.last_error = why


async def _probe_health(member: Member, get: Get, timeout: float) -> tuple[bool, str]:
    try:
        status, _ = await get(member.root + "/health", timeout)
        if status == 404:  # not llama.cpp nor vLLM (Ollama, LM Studio...): is the API up?
            status, _ = await get(member.base + "/models", timeout)
            return status == 200, "ok" if status == 200 else f"GET /models answered {status}"
    except Exception as exc:  # whatever the caller's client raises when unreachable
        return False, f"unreachable: {type(exc).__name__}"
    return status == 200, "ok" if status == 200 else f"GET /health answered {status}"


async def _learn_slots(member: Member, get: Get, timeout: float) -> int | None:
    """llama.cpp's slot count from /props; None (and leave it unknown) for any other server."""
    try:
        status, data = await get(member.root + "/props", timeout)
    except Exception:
        return None  # ask again on the next check
    if status >= 500:
        return None  # loading, or a passing error: ask again
    member.props_settled = True  # 404, 401, or an answer: this server's answer will not change
    total = data.get("total_slots") if isinstance(data, dict) else None
    if status != 200 or not isinstance(total, int) or isinstance(total, bool) or total < 1:
        return None
    member.learn_slots(total)
    return total


def id_slot_body(payload: bytes, slot: int) -> bytes:
    """`payload` (a compact JSON object, as orjson encodes a dict) with `"id_slot": slot` added.

    Spliced in before the closing brace instead of decoding and re-encoding: the body may be
    megabytes of conversation. The caller does not call it when the body already has a top-level
    `id_slot` (the client pinned the slot itself: `choose(..., client_slot=True)`), so the key is
    never there twice.
    """
    if payload == b"{}":
        return b'{"id_slot":%d}' % slot
    return payload[:-1] + b',"id_slot":%d}' % slot
