"""Latches, stored responses and rescue plans shared between replicas through Redis.

latchgate keeps its state in memory (`latches`, `responses`, `rescues`), which serves one process
well and several replicas behind one load balancer badly: a refusal learned on one replica would
be paid for again on each of the others, and a client continuing a response
(`previous_response_id`) or a rescued conversation may land on a replica that never saw it. This
module shares all three through one Redis (`server.state`, `--state`), with the memory stores
still in front of it:

- **Memory first.** A read answers from the local store when it has the entry; Redis is asked
  only on a local miss, within `REQUEST_TIMEOUT` (a timeout is a miss), and what it held is kept
  locally too.
- **Redis never fails or stalls a request.** A request waits for Redis at most
  `REQUEST_TIMEOUT`, and not at all while Redis is down: then no operation touches Redis, reads
  are local only and writes are remembered (latches as dirty endpoints, responses and plans by
  id, bounded), to be written when a ping finds Redis back (the "resync"). The outage and the
  return are logged once each, with the URL redacted (`redact_url`), never per operation.
- **Changes are told.** One pub/sub channel carries small JSON messages
  `{"from": replica id, "op": ..., ...}`: a latch learned (with its merged entry), a reset, an
  expiry, a response deleted. A replica ignores its own. After the subscriber (re)connects every
  piece resyncs, since it may have missed messages meanwhile.

Layout (the prefix is "latchgate" unless given):

    {prefix}:latches               hash: endpoint id -> JSON of that endpoint's latches, as
                                   `LatchStore.snapshot_of` gives it
    {prefix}:latches:epoch         a random token set by whoever finds it missing: a new one
                                   means Redis lost its data, and every replica pushes all it has
    {prefix}:response:{id}         JSON {"owner", "response", "input_items"}, TTL the memory
                                   store's `max_age`
    {prefix}:item:{owner}:{item}   the id of the newest response holding that item, same TTL
    {prefix}:plans:{key}           JSON list of rescue plans, most recent first, TTL `ttl`
    {prefix}:events                the pub/sub channel

Responses and plans go with their TTL; beyond that Redis's own `maxmemory` policy bounds them
(`maxmemory-policy volatile-lru` evicts only keys with a TTL, so never the latches; an evicted
response is one a client can no longer continue, never a wrong answer). Latches are bounded by
the number of endpoints and carry no TTL. Nothing identifying a client is written: `owner` is
already a digest of the client's key, and endpoint ids and plan keys are digests.

Merging latches only ever latches off or grows sets (`LatchStore.merge_snapshot`), so the order
in which replicas hear of each other does not matter. Resets and expiries are carried as
operations; one made here while Redis was down is replayed at the resync, but one made elsewhere
while this replica was cut off is not applied here (its latches merge back in from nowhere else,
and an operator's second reset clears them).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol, TypeVar, cast

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from proxy.settings import redact_url
from proxy.state.latches import SNAPSHOT_VERSION, LatchStore
from proxy.state.rescues import Fold, MemoryPlans, Plan
from proxy.state.responses import MemoryStore, StoredResponse

T = TypeVar("T")
V = TypeVar("V")

PREFIX = "latchgate"
SOCKET_TIMEOUT = 1.0  # connect and per-command timeout of every Redis connection
PING_INTERVAL = 1.0
REQUEST_TIMEOUT = 0.5  # the longest a client request waits for Redis
START_SYNC_TIMEOUT = 5.0  # how long `start` waits for the first resync
CLOSE_GRACE = 1.0  # how long `close` lets background writes finish
PENDING_LIMIT = 1000  # responses, deletions and plan keys remembered while Redis is down
OPS_LIMIT = 100  # latch resets and expiries remembered while Redis is down
WATCH_ATTEMPTS = 20
PLAN_TTL = 86400.0

# What a Redis operation may raise: redis-py's own errors, and the OS's (sockets, timeouts).
REDIS_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError)

Handler = Callable[[dict[str, Any]], Awaitable[None]]
Resync = Callable[[], Awaitable[None]]


class Log(Protocol):
    """What is needed of a structlog logger."""

    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...

    def error(self, event: str, **fields: Any) -> Any: ...


def _reply(call: object) -> Awaitable[Any]:
    """A command's reply, to await: redis-py types replies as "awaitable or value", for its sync
    and asyncio clients at once."""
    return cast(Awaitable[Any], call)


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says Redis is unreachable (stop asking it until a ping answers), rather than
    that one answer was slow (the request timeout) or refused (a command error)."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return True
    return isinstance(exc, OSError) and not isinstance(exc, TimeoutError)


async def watched(once: Callable[[], Awaitable[T]]) -> T:
    """`once`, a WATCH ... MULTI ... EXEC transaction, tried again while other writers change the
    watched key between its read and its write (the last WatchError is raised)."""
    for _ in range(WATCH_ATTEMPTS - 1):
        try:
            return await once()
        except WatchError:
            await asyncio.sleep(0)
    return await once()


def remember_bounded(pending: OrderedDict[str, V], key: str, value: V) -> None:
    """Remember `key` as the newest in `pending`, forgetting the oldest past `PENDING_LIMIT`."""
    pending.pop(key, None)
    pending[key] = value
    while len(pending) > PENDING_LIMIT:
        pending.popitem(last=False)


def ttl_seconds(seconds: float) -> int:
    """A TTL as Redis takes it: whole seconds, at least one."""
    return max(1, math.ceil(seconds))


def _loads(raw: object) -> object:
    """Decoded JSON, or None when `raw` is not JSON text."""
    if not isinstance(raw, bytes | str):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def decode_message(data: object) -> dict[str, Any] | None:
    """A pub/sub message, or None unless it is a JSON object naming its sender and operation."""
    message = _loads(data)
    if not isinstance(message, dict):
        return None
    if not isinstance(message.get("from"), str) or not isinstance(message.get("op"), str):
        return None
    return message


class RedisState:
    """The one Redis client the shared pieces use, and whether Redis is up.

    `on_status(up)` is called at start and on every transition; `on_error(operation)` each time
    a Redis operation fails. A ping every `ping_interval` seconds tells an outage and the return;
    the subscriber applies the other replicas' messages to the pieces registered with
    `on_message`, and after every (re)subscription runs the resyncs registered with `on_resync`.
    """

    def __init__(
        self,
        url: str,
        log: Log,
        on_status: Callable[[bool], None],
        on_error: Callable[[str], None],
        *,
        prefix: str = PREFIX,
        ping_interval: float = PING_INTERVAL,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.client: Redis = Redis.from_url(
            url,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=Retry(NoBackoff(), 0),  # redis-py's default retries would stall a request
        )
        self.shown_url = redact_url(url)  # the only form of the URL that is ever logged
        self.log = log
        self.replica_id = secrets.token_hex(8)
        self.prefix = prefix
        self.channel = f"{prefix}:events"
        self.request_timeout = request_timeout
        self.up = False
        self._on_status = on_status
        self._on_error = on_error
        self._ping_interval = ping_interval
        self._known: bool | None = None
        self._ups = 0  # up transitions so far: a new one means subscribe and resync again
        self._reported: set[tuple[str, str]] = set()
        self._came_up = asyncio.Event()
        self._synced = asyncio.Event()
        self._resyncs: list[tuple[str, Resync]] = []
        self._handlers: dict[str, Handler] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._started = False
        self._closed = False

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def on_resync(self, name: str, resync: Resync) -> None:
        """Run `resync` whenever Redis is reachable and subscribed anew: at start and after every
        outage. `name` names its failures (`on_error(f"{name}.resync")`)."""
        self._resyncs.append((name, resync))

    def on_message(self, op: str, handler: Handler) -> None:
        """Apply another replica's messages of operation `op` with `handler`."""
        self._handlers[op] = handler

    def message(self, op: str, **fields: Any) -> bytes:
        """A message to publish on the channel, from this replica."""
        return orjson.dumps({"from": self.replica_id, "op": op, **fields})

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T] | None:
        """Run `work` in the background, kept until it ends (none once closed)."""
        if self._closed:
            work.close()
            return None
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def failed(self, operation: str, exc: BaseException) -> None:
        """A Redis operation failed: count it, and when Redis is unreachable mark it down (logged
        once), so that nothing asks it again until a ping answers. Any other kind of failure is
        logged once per operation and error type until Redis is next back up."""
        self._on_error(operation)
        if is_outage(exc):
            self._set(False, exc)
            return
        error = type(exc).__name__
        if (operation, error) not in self._reported:
            self._reported.add((operation, error))
            self.log.warning(
                "state_backend_error", operation=operation, error=error, url=self.shown_url
            )

    async def bounded(self, operation: str, work: Callable[[], Awaitable[T]], default: T) -> T:
        """`work()`'s result within the request timeout; `default` at once while Redis is down,
        and when it is slow or fails (counted)."""
        if not self.up:
            return default
        try:
            return await asyncio.wait_for(work(), self.request_timeout)
        except REDIS_ERRORS as exc:
            self.failed(operation, exc)
            return default

    async def briefly(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Start `work` in the background and wait for it at most the request timeout: its
        result, or None when it is still running (it goes on: a write is not abandoned)."""
        task = self.spawn(work)
        if task is None:
            return None
        done, _ = await asyncio.wait({task}, timeout=self.request_timeout)
        return task.result() if task in done else None

    async def start(self) -> None:
        """Connect, subscribe and run the first resync (waiting for it up to
        `START_SYNC_TIMEOUT`). Never fails: an unreachable Redis is logged once and tried again
        in the background while the proxy serves from memory. Only the first call does it."""
        if self._started:
            return
        self._started = True
        try:
            await self.client.ping()
        except REDIS_ERRORS as exc:
            self._set(False, exc)
        else:
            self._set(True)
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._watch()), loop.create_task(self._listen())]
        if self.up:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._synced.wait(), START_SYNC_TIMEOUT)

    async def close(self) -> None:
        """Let background writes finish (briefly), stop the ping and the subscriber, and close
        the connections. Only the first call does it."""
        if self._closed:
            return
        self._closed = True
        if self._tasks and self.up:
            await asyncio.wait(set(self._tasks), timeout=CLOSE_GRACE)
        tasks = [*self._loops, *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(*REDIS_ERRORS):
            await self.client.aclose()

    def _set(self, up: bool, exc: BaseException | None = None) -> None:
        if self._known is up:
            return
        self._known = self.up = up
        if up:
            self._ups += 1
            self._reported.clear()
            self._came_up.set()
            self.log.info("state_backend_up", url=self.shown_url)
        else:
            self._came_up.clear()
            error = type(exc).__name__ if exc is not None else None
            self.log.warning("state_backend_down", url=self.shown_url, error=error)
        self._on_status(up)

    async def _watch(self) -> None:
        """Ping Redis: down when it stops answering, up when it answers again."""
        while not self._closed:
            await asyncio.sleep(self._ping_interval)
            try:
                await self.client.ping()
            except REDIS_ERRORS as exc:
                if self.up:  # the pings of an outage already known are not failures counted
                    self._on_error("ping")
                self._set(False, exc)
            else:
                self._set(True)

    async def _listen(self) -> None:
        """Subscribe whenever Redis is up, again after every outage."""
        while not self._closed:
            await self._came_up.wait()
            try:
                await self._subscribed()
            except REDIS_ERRORS as exc:
                self.failed("subscribe", exc)
                await asyncio.sleep(self._ping_interval)

    async def _subscribed(self) -> None:
        """Subscribe, resync every piece (messages may have been missed before), then apply the
        other replicas' messages until Redis goes down or has been down and back meanwhile."""
        ups = self._ups
        pubsub = self.client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            if await pubsub.get_message(timeout=SOCKET_TIMEOUT) is None:
                raise RedisTimeoutError("the subscription was not confirmed")
            await self._resync()
            # `_closed` as well as the cancel from `close()`: redis-py's read timeout can swallow
            # a cancel that lands as it expires, and the loop would then read on for ever.
            while self.up and self._ups == ups and not self._closed:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=SOCKET_TIMEOUT
                )
                if message is not None:
                    await self._dispatch(message.get("data"))
        finally:
            with contextlib.suppress(*REDIS_ERRORS):
                await pubsub.aclose()

    async def _resync(self) -> None:
        for name, resync in self._resyncs:
            if not self.up:
                break
            try:
                await resync()
            except REDIS_ERRORS as exc:
                self.failed(f"{name}.resync", exc)
        self._synced.set()

    async def _dispatch(self, data: object) -> None:
        message = decode_message(data)
        if message is None or message["from"] == self.replica_id:
            return
        handler = self._handlers.get(message["op"])
        if handler is not None:
            await handler(message)


# -- latches -------------------------------------------------------------------------------------


def latch_snapshot(entries: Mapping[str, Any]) -> dict[str, Any]:
    """A latch snapshot of endpoint entries, as `LatchStore.merge_snapshot` takes it."""
    return {"version": SNAPSHOT_VERSION, "saved_at": time.time(), "endpoints": dict(entries)}


def decode_entries(raw: Mapping[Any, Any]) -> tuple[dict[str, dict[str, Any]], int]:
    """Endpoint entries as the latches hash holds them (field -> JSON), and how many values were
    skipped as malformed (a missing value, None, is not counted)."""
    entries: dict[str, dict[str, Any]] = {}
    skipped = 0
    for field, value in raw.items():
        if value is None:
            continue
        entry = _loads(value)
        if isinstance(entry, dict):
            eid = field.decode(errors="replace") if isinstance(field, bytes) else str(field)
            entries[eid] = entry
        else:
            skipped += 1
    return entries, skipped


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def apply_latch_op(store: LatchStore, op: Mapping[str, Any]) -> None:
    """Apply a "forgot" (`reset`) or "expired" (`expire`) operation; a malformed one does
    nothing."""
    if op.get("op") == "forgot":
        eid, model = op.get("eid"), op.get("model")
        if (eid is None or isinstance(eid, str)) and (model is None or isinstance(model, str)):
            store.reset(eid, model)
    elif op.get("op") == "expired":
        older_than, now = _number(op.get("older_than")), _number(op.get("now"))
        if older_than is not None and now is not None:
            store.expire(older_than, now)


def latch_op_result(
    raw: Mapping[Any, Any], op: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """What a reset or expiry leaves of the entries Redis holds: the entries it changed, to write
    back, and the endpoints it removed, to delete. Malformed values are left alone."""
    entries, _ = decode_entries(raw)
    scratch = LatchStore()
    scratch.merge_snapshot(latch_snapshot(entries))
    apply_latch_op(scratch, op)
    kept = scratch.to_snapshot()["endpoints"]
    changed = {eid: kept[eid] for eid in entries if eid in kept and kept[eid] != entries[eid]}
    return changed, [eid for eid in entries if eid not in kept]


def _forgets_all(op: Mapping[str, Any]) -> bool:
    return op.get("op") == "forgot" and op.get("eid") is None and op.get("model") is None


class RedisLatches:
    """The latch store shared through Redis (a `proxy.state.sync.LatchSync`).

    A latch learned here is merged with what Redis holds for its endpoint, written back and told
    to the other replicas, in the background; `on_merged()` is called whenever what they learned
    changed the local store (the proxy refreshes its gauge and saves its state file).
    """

    def __init__(self, state: RedisState, store: LatchStore, on_merged: Callable[[], None]):
        self._state = state
        self._store = store
        self._on_merged = on_merged
        self._key = state.key("latches")
        self._epoch_key = state.key("latches", "epoch")
        self._epoch: bytes | None = None
        self._dirty: set[str] = set()  # learned here, not yet in Redis
        self._queued: set[str] = set()  # a push is scheduled and has not started
        self._ops: deque[dict[str, Any]] = deque(maxlen=OPS_LIMIT)  # to replay at the resync
        state.on_resync("latches", self.resync)
        state.on_message("learned", self._heard_learned)
        state.on_message("forgot", self._heard_op)
        state.on_message("expired", self._heard_op)

    async def start(self) -> None:
        """Start the shared state (whoever asks first does): connect, subscribe, resync."""
        await self._state.start()

    async def close(self) -> None:
        """Close the shared state (the responses and plans through it stop sharing too)."""
        await self._state.close()

    def learned(self, eid: str) -> None:
        if not self._state.up:
            self._dirty.add(eid)
        elif eid not in self._queued:
            self._queued.add(eid)
            self._state.spawn(self._push_soon(eid))

    def forgot(self, eid: str | None, model: str | None) -> None:
        self._operate({"op": "forgot", "eid": eid, "model": model})

    def expired(self, older_than: float, now: float) -> None:
        self._operate({"op": "expired", "older_than": older_than, "now": now})

    async def resync(self) -> None:
        """Replay the resets and expiries made while Redis was down, push every dirty endpoint,
        then merge everything Redis holds."""
        while self._ops:
            await watched(functools.partial(self._operate_once, self._ops[0]))
            self._ops.popleft()
        await self._check_epoch()
        for eid in sorted(self._dirty):
            await watched(functools.partial(self._push_once, eid))
        entries, skipped = decode_entries(await _reply(self._state.client.hgetall(self._key)))
        skipped += self._merge(entries)
        if skipped:
            self._state.log.warning("state_latches_skipped", malformed=skipped)

    async def _check_epoch(self) -> None:
        """Mark every local latch dirty when Redis's data is not what this process synced with
        before: Redis was empty (the epoch was missing) or lost its data while this process ran
        (another replica set a new epoch). First contact with a Redis that has data pushes only
        the dirty ones, so that a state file does not bring back what was reset meanwhile."""
        client = self._state.client
        created = await _reply(client.set(self._epoch_key, secrets.token_hex(8), nx=True))
        epoch = await _reply(client.get(self._epoch_key))
        if created or (self._epoch is not None and epoch != self._epoch):
            self._dirty.update(self._store.endpoint_ids())
        self._epoch = epoch

    def _entry(self, eid: str) -> dict[str, Any] | None:
        entry: dict[str, Any] | None = self._store.snapshot_of(eid)["endpoints"].get(eid)
        return entry

    def _merge(self, entries: Mapping[str, Any]) -> int:
        """Merge endpoint entries into the store (`on_merged()` when that changed it); returns
        how many parts were skipped as malformed."""
        if not entries:
            return 0
        before = self._store.generation
        warnings = self._store.merge_snapshot(latch_snapshot(entries))
        if self._store.generation != before:
            self._on_merged()
        return len(warnings)

    async def _push_soon(self, eid: str) -> None:
        self._queued.discard(eid)
        if not self._state.up:
            self._dirty.add(eid)
            return
        try:
            await watched(functools.partial(self._push_once, eid))
        except REDIS_ERRORS as exc:
            self._dirty.add(eid)
            self._state.failed("latches.learned", exc)

    async def _push_once(self, eid: str) -> None:
        """Merge what Redis holds for `eid` into the store, then write the merged entry back and
        tell the others, unless the hash changed in between (WatchError)."""
        state = self._state
        async with state.client.pipeline(transaction=True) as pipe:
            await pipe.watch(self._key)
            raw = await _reply(pipe.hget(self._key, eid))
            if self._entry(eid) is not None:  # None: reset here since; nothing to share
                self._merge(decode_entries({eid: raw})[0])
                entry = self._entry(eid)
                pipe.multi()
                pipe.hset(self._key, eid, orjson.dumps(entry).decode())
                pipe.publish(state.channel, state.message("learned", eid=eid, entry=entry))
                await pipe.execute()
        self._dirty.discard(eid)

    def _operate(self, op: dict[str, Any]) -> None:
        if self._state.up:
            self._state.spawn(self._operate_soon(op))
        else:
            self._ops.append(op)

    async def _operate_soon(self, op: dict[str, Any]) -> None:
        if not self._state.up:
            self._ops.append(op)
            return
        try:
            await watched(functools.partial(self._operate_once, op))
        except REDIS_ERRORS as exc:
            self._ops.append(op)
            self._state.failed(f"latches.{op['op']}", exc)

    async def _operate_once(self, op: dict[str, Any]) -> None:
        """Apply a reset or expiry to what Redis holds (in a scratch store), and tell the others
        to apply it to theirs."""
        state = self._state
        async with state.client.pipeline(transaction=True) as pipe:
            if _forgets_all(op):
                pipe.multi()
                pipe.delete(self._key)
            else:
                await pipe.watch(self._key)
                changed, removed = latch_op_result(await self._load(pipe, op), op)
                pipe.multi()
                if changed:
                    values = {eid: orjson.dumps(entry).decode() for eid, entry in changed.items()}
                    pipe.hset(self._key, mapping=values)
                if removed:
                    pipe.hdel(self._key, *removed)
            pipe.publish(state.channel, state.message(**op))
            await pipe.execute()

    async def _load(self, pipe: Pipeline, op: Mapping[str, Any]) -> Mapping[Any, Any]:
        """The entries an operation affects: one endpoint's for a reset of one, else all."""
        eid = op.get("eid") if op["op"] == "forgot" else None
        if isinstance(eid, str):
            return {eid: await _reply(pipe.hget(self._key, eid))}
        found: Mapping[Any, Any] = await _reply(pipe.hgetall(self._key))
        return found

    async def _heard_learned(self, message: dict[str, Any]) -> None:
        eid, entry = message.get("eid"), message.get("entry")
        if isinstance(eid, str) and isinstance(entry, dict):
            self._merge({eid: entry})

    async def _heard_op(self, message: dict[str, Any]) -> None:
        before = self._store.generation
        apply_latch_op(self._store, message)
        if self._store.generation != before:
            self._on_merged()


# -- stored responses ----------------------------------------------------------------------------


def encode_response(stored: StoredResponse) -> bytes:
    return orjson.dumps(
        {"owner": stored.owner, "response": stored.response, "input_items": stored.input_items}
    )


def decode_response(raw: object) -> StoredResponse | None:
    """A stored response as `encode_response` wrote it; None when malformed."""
    data = _loads(raw)
    if not isinstance(data, dict):
        return None
    owner, response, items = data.get("owner"), data.get("response"), data.get("input_items")
    if not isinstance(owner, str) or not isinstance(response, dict) or not isinstance(items, list):
        return None
    if not isinstance(response.get("id"), str) or not all(isinstance(i, dict) for i in items):
        return None
    return StoredResponse(owner=owner, response=response, input_items=items)


def item_ids(stored: StoredResponse) -> list[str]:
    """The ids of a response's input and output items (each once)."""
    return list(dict.fromkeys(i["id"] for i in stored.items() if isinstance(i.get("id"), str)))


def find_item(stored: StoredResponse, item_id: str) -> dict[str, Any] | None:
    return next((i for i in stored.items() if i.get("id") == item_id), None)


class RedisResponses:
    """Stored responses in memory first (`local`), shared through Redis (a `ResponseStore`).

    A put is awaited (for at most the request timeout) so that a client continuing the response
    at once on another replica finds it there; while Redis is down or slow the id is remembered
    (the newest `PENDING_LIMIT`) and written at the resync if this process still holds it.
    """

    def __init__(self, state: RedisState, local: MemoryStore) -> None:
        self._state = state
        self._local = local
        self._pending: OrderedDict[str, str] = OrderedDict()  # response id -> owner, to write
        self._deleted: OrderedDict[str, str] = OrderedDict()  # response id -> owner, to delete
        state.on_resync("responses", self.resync)
        state.on_message("response_deleted", self._heard_deleted)

    def _response_key(self, response_id: str) -> str:
        return self._state.key("response", response_id)

    def _item_key(self, owner: str, item_id: str) -> str:
        return self._state.key("item", owner, item_id)

    async def put(self, stored: StoredResponse) -> None:
        await self._local.put(stored)
        if await self._local.get(stored.owner, stored.id) is None:
            return  # larger than the whole store: kept nowhere, shared neither
        self._deleted.pop(stored.id, None)
        if not self._state.up:
            remember_bounded(self._pending, stored.id, stored.owner)
            return
        await self._state.briefly(self._write_soon(stored))

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        found = await self._local.get(owner, response_id)
        if found is not None or not self._state.up:
            return found
        stored = await self._state.bounded(
            "responses.get", functools.partial(self._fetch, response_id), None
        )
        return await self._keep(owner, stored)

    async def item(self, owner: str, item_id: str) -> dict[str, Any] | None:
        found = await self._local.item(owner, item_id)
        if found is not None or not self._state.up:
            return found
        stored = await self._state.bounded(
            "responses.item", functools.partial(self._fetch_holder, owner, item_id), None
        )
        kept = await self._keep(owner, stored)
        return None if kept is None else find_item(kept, item_id)

    async def delete(self, owner: str, response_id: str) -> bool:
        here = await self._local.delete(owner, response_id)
        if here:
            self._pending.pop(response_id, None)
        if not self._state.up:
            remember_bounded(self._deleted, response_id, owner)
            return here
        there = await self._state.briefly(self._delete_soon(owner, response_id, here))
        return here or there is True

    async def resync(self) -> None:
        """Delete what was deleted here and write what was stored here while Redis was down."""
        for response_id, owner in list(self._deleted.items()):
            await self._delete_remote(owner, response_id, True)
            self._deleted.pop(response_id, None)
        for response_id, owner in list(self._pending.items()):
            stored = await self._local.get(owner, response_id)
            if stored is not None:
                await self._write(stored)
            self._pending.pop(response_id, None)

    async def _keep(self, owner: str, stored: StoredResponse | None) -> StoredResponse | None:
        """A response read from Redis, kept locally too; another owner's is no response."""
        if stored is None or stored.owner != owner:
            return None
        await self._local.put(stored)
        return stored

    async def _fetch(self, response_id: str) -> StoredResponse | None:
        stored = decode_response(await self._state.client.get(self._response_key(response_id)))
        return stored if stored is not None and stored.id == response_id else None

    async def _fetch_holder(self, owner: str, item_id: str) -> StoredResponse | None:
        holder = await self._state.client.get(self._item_key(owner, item_id))
        if not isinstance(holder, bytes):
            return None
        return await self._fetch(holder.decode(errors="replace"))

    async def _write(self, stored: StoredResponse) -> None:
        ttl = ttl_seconds(self._local.max_age)
        async with self._state.client.pipeline(transaction=True) as pipe:
            pipe.set(self._response_key(stored.id), encode_response(stored), ex=ttl)
            for item_id in item_ids(stored):
                pipe.set(self._item_key(stored.owner, item_id), stored.id, ex=ttl)
            await pipe.execute()

    async def _write_soon(self, stored: StoredResponse) -> None:
        try:
            await self._write(stored)
        except REDIS_ERRORS as exc:
            remember_bounded(self._pending, stored.id, stored.owner)
            self._state.failed("responses.put", exc)

    async def _delete_soon(self, owner: str, response_id: str, here: bool) -> bool:
        try:
            return await self._delete_remote(owner, response_id, here)
        except REDIS_ERRORS as exc:
            remember_bounded(self._deleted, response_id, owner)
            self._state.failed("responses.delete", exc)
            return False

    async def _delete_remote(self, owner: str, response_id: str, here: bool) -> bool:
        """Delete `owner`'s response from Redis, with the item keys still naming it, and tell
        the others to drop their copies (also when only this process held it). True when Redis
        held it; another owner's response is left alone, as a missing one."""
        state = self._state
        key = self._response_key(response_id)
        stored = decode_response(await state.client.get(key))
        if stored is None or stored.owner != owner or stored.id != response_id:
            stored = None
            if not here:
                return False
        doomed = [] if stored is None else [key, *await self._naming(stored)]
        async with state.client.pipeline(transaction=True) as pipe:
            if doomed:
                pipe.delete(*doomed)
            message = state.message("response_deleted", id=response_id, owner=owner)
            pipe.publish(state.channel, message)
            await pipe.execute()
        return stored is not None

    async def _naming(self, stored: StoredResponse) -> list[str]:
        """The item keys of `stored`'s items that still name it (not a newer response)."""
        holders = [self._item_key(stored.owner, item_id) for item_id in item_ids(stored)]
        if not holders:
            return []
        named = await self._state.client.mget(holders)
        mine = stored.id.encode()
        return [key for key, value in zip(holders, named, strict=True) if value == mine]

    async def _heard_deleted(self, message: dict[str, Any]) -> None:
        response_id, owner = message.get("id"), message.get("owner")
        if not isinstance(response_id, str) or not isinstance(owner, str):
            return
        if await self._local.delete(owner, response_id):
            self._pending.pop(response_id, None)


# -- rescue plans --------------------------------------------------------------------------------

_FOLD_INTS = ("start", "end", "anchor", "summarised")
_FOLD_STRS = ("digest", "summary")


def plan_to_json(plan: Plan) -> dict[str, Any]:
    fold = None if plan.fold is None else dataclasses.asdict(plan.fold)
    return {"pruned": [[index, digest] for index, digest in plan.pruned], "fold": fold}


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fold_from_json(data: object) -> Fold | None:
    if not isinstance(data, dict):
        return None
    if not all(_int(data.get(name)) for name in _FOLD_INTS):
        return None
    if not all(isinstance(data.get(name), str) for name in _FOLD_STRS):
        return None
    return Fold(**{name: data[name] for name in (*_FOLD_INTS, *_FOLD_STRS)})


def plan_from_json(data: object) -> Plan | None:
    """A plan as `plan_to_json` wrote it; None when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("pruned"), list):
        return None
    pruned = data["pruned"]
    if not all(
        isinstance(p, list) and len(p) == 2 and _int(p[0]) and isinstance(p[1], str) for p in pruned
    ):
        return None
    fold = _fold_from_json(data.get("fold"))
    if fold is None and data.get("fold") is not None:
        return None
    return Plan(pruned=tuple((p[0], p[1]) for p in pruned), fold=fold)


def encode_plans(plans: Iterable[Plan]) -> bytes:
    return orjson.dumps([plan_to_json(plan) for plan in plans])


def decode_plans(raw: object) -> list[Plan]:
    """Plans as `encode_plans` wrote them; none at all when any part is malformed."""
    data = _loads(raw)
    if not isinstance(data, list):
        return []
    plans = [plan_from_json(item) for item in data]
    return [p for p in plans if p is not None] if all(p is not None for p in plans) else []


def remembered(plans: list[Plan], plan: Plan, replaces: Plan | None, limit: int) -> list[Plan]:
    """`plans` with `plan` first in place of `replaces`, as `MemoryPlans.remember` keeps them."""
    kept = [p for p in plans if p != replaces and p != plan]
    return [plan, *kept][:limit]


def merged_plans(first: list[Plan], then: list[Plan], limit: int) -> list[Plan]:
    """`first`, then the plans of `then` not among them, at most `limit`."""
    return [*first, *(p for p in then if p not in first)][:limit]


class RedisPlans:
    """Rescue plans in memory first (`local`), shared through Redis (a `PlanStore`)."""

    def __init__(self, state: RedisState, local: MemoryPlans, ttl: float = PLAN_TTL) -> None:
        self._state = state
        self._local = local
        self._ttl = ttl_seconds(ttl)
        self._dirty: OrderedDict[str, None] = OrderedDict()  # keys remembered while down
        # One write at a time, in the order remembered: two writes of one key racing would
        # otherwise apply "plan B replaces plan A" before "plan A" itself.
        self._writing = asyncio.Lock()
        state.on_resync("plans", self.resync)

    def _key(self, key: str) -> str:
        return self._state.key("plans", key)

    async def plans(self, key: str) -> list[Plan]:
        found = await self._local.plans(key)
        if found or not self._state.up:
            return found
        fetch = functools.partial(self._fetch, key)
        fetched: list[Plan] = await self._state.bounded("plans.get", fetch, [])
        if not fetched:
            return []
        for plan in reversed(fetched):
            await self._local.remember(key, plan)
        return await self._local.plans(key)

    async def remember(self, key: str, plan: Plan, replaces: Plan | None = None) -> None:
        await self._local.remember(key, plan, replaces)
        if not self._state.up:
            remember_bounded(self._dirty, key, None)
            return
        limit = self._local.per_key
        change = functools.partial(remembered, plan=plan, replaces=replaces, limit=limit)
        self._state.spawn(self._push_soon(key, change))

    async def resync(self) -> None:
        """Write the plans remembered here while Redis was down, ahead of the ones it holds."""
        for key in list(self._dirty):
            local = await self._local.plans(key)
            if local:
                change = functools.partial(merged_plans, local, limit=self._local.per_key)
                async with self._writing:
                    await watched(functools.partial(self._push_once, key, change))
            self._dirty.pop(key, None)

    async def _fetch(self, key: str) -> list[Plan]:
        return decode_plans(await self._state.client.get(self._key(key)))

    async def _push_soon(self, key: str, change: Callable[[list[Plan]], list[Plan]]) -> None:
        try:
            async with self._writing:
                if not self._state.up:  # went down meanwhile: the resync writes it
                    remember_bounded(self._dirty, key, None)
                    return
                await watched(functools.partial(self._push_once, key, change))
        except REDIS_ERRORS as exc:
            remember_bounded(self._dirty, key, None)
            self._state.failed("plans.remember", exc)

    async def _push_once(self, key: str, change: Callable[[list[Plan]], list[Plan]]) -> None:
        """Change the plans Redis holds under `key`, unless they changed meanwhile (WatchError)."""
        redis_key = self._key(key)
        async with self._state.client.pipeline(transaction=True) as pipe:
            await pipe.watch(redis_key)
            plans = change(decode_plans(await pipe.get(redis_key)))
            pipe.multi()
            pipe.set(redis_key, encode_plans(plans), ex=self._ttl)
            await pipe.execute()
