"""How the workers of one supervisor talk to each other: metrics and latches over unix sockets.

Each worker of `--workers N` is a process of its own, with its own counters and its own latch
store, but to clients and to Prometheus they are one latchgate. Two things must therefore cross
between them:

- a scrape of `/metrics`, which any worker may take, must show the totals of all of them: the
  worker scraped fetches every sibling's own exposition and sums them (`SiblingMetrics`, the
  sum being `proxy.observe.merge`);
- a latch learned by one worker must apply in all, or each would pay for the refusal again:
  `SiblingLatches` (a `LatchSync`) posts what changed to the siblings, and takes in theirs.

Each worker serves a small aiohttp app on `worker-{index}.sock` in the supervisor's private
runtime directory (mode 0700, so only this user reaches it: these routes ask for no key). Unix
sockets rather than a pipe to the supervisor: workers ask each other directly, so nothing
depends on a relay, and a sibling that is restarting or stuck is just one that does not answer
within `PEER_TIMEOUT`, and is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.http.app import Proxy
from proxy.observe import logs
from proxy.observe.merge import merge_expositions
from proxy.state.latches import LatchStore

# A sibling is given this long to answer (it is on this machine: an answer takes milliseconds,
# and a scrape or a worker's start waits this long at most for one that is busy or gone).
PEER_TIMEOUT = 1.0
# At shutdown, how long latch changes not yet delivered may hold it up.
FLUSH_TIMEOUT = 2.0
# Latch changes waiting for delivery beyond this are dropped (siblings stuck for that long
# will take the whole store when they start again).
OUTBOX_SIZE = 1000


def socket_path(runtime_dir: Path, index: int) -> Path:
    """Where worker `index` of a supervisor listens for its siblings."""
    return runtime_dir / f"worker-{index}.sock"


class Peers:
    """HTTP to the other workers over their unix sockets; one that does not answer is skipped."""

    def __init__(self, runtime_dir: Path, index: int, count: int) -> None:
        self.runtime_dir = runtime_dir
        self.index = index
        self.others = [i for i in range(count) if i != index]
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    def _session(self, peer: int) -> aiohttp.ClientSession:
        session = self._sessions.get(peer)
        if session is None or session.closed:
            # A new connection per request (force_close): a sibling that restarted leaves a dead
            # pooled connection behind, and a unix-socket connect costs microseconds.
            connector = aiohttp.UnixConnector(
                path=str(socket_path(self.runtime_dir, peer)), force_close=True
            )
            session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT)
            )
            self._sessions[peer] = session
        return session

    async def ask(self, peer: int, method: str, path: str, body: bytes = b"") -> bytes | None:
        """Sibling `peer`'s answer to one request, or None when it gives no 200 in time."""
        try:
            session = self._session(peer)
            async with session.request(method, f"http://worker{peer}{path}", data=body) as resp:
                if resp.status != 200:
                    return None
                return await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None

    async def ask_all(self, method: str, path: str, body: bytes = b"") -> dict[int, bytes]:
        """The answers of every sibling that answers, by index, asked at the same time."""
        answers = await asyncio.gather(*(self.ask(p, method, path, body) for p in self.others))
        return {p: a for p, a in zip(self.others, answers, strict=True) if a is not None}

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self._sessions.values()))
        self._sessions.clear()


class SiblingMetrics:
    """`MetricsPeers`: a scrape's exposition with every answering sibling's summed in."""

    def __init__(self, peers: Peers) -> None:
        self.peers = peers

    async def merged(self, own: bytes) -> bytes:
        texts = await self.peers.ask_all("GET", "/metrics")
        texts[self.peers.index] = own
        try:
            # By worker index, whichever worker answers: every scrape lists series alike.
            # Merged on the loop rather than in a thread: a few ms per scrape, and the GIL
            # would hold the requests up all the same.
            return merge_expositions([texts[i].decode() for i in sorted(texts)]).encode()
        except ValueError as exc:  # a sibling's answer that is no exposition: ours alone
            logs.get_logger().warning("metrics_merge", message=f"not merged: {exc}")
            return own


class SiblingLatches:
    """`LatchSync` between the workers of one supervisor.

    A change made here is queued and delivered by one task, in order, to every sibling (each
    delivery waits for all of them, at most `PEER_TIMEOUT`): a reset that follows a learned
    latch reaches each sibling after it, not before. The receiving side is `apply`.
    """

    def __init__(self, peers: Peers, store: LatchStore, merged: Callable[[], None]) -> None:
        self.peers = peers
        self.store = store
        self.merged = merged  # the proxy's: latches changed from elsewhere (gauge, state file)
        self.log = logs.get_logger()
        self._outbox: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(OUTBOX_SIZE)
        self._sender: asyncio.Task[None] | None = None

    # -- this worker's changes, out --------------------------------------------------------

    async def start(self) -> None:
        """Take in the latches the siblings hold (a worker restarted after a crash learns what
        the others learned meanwhile); those not answering are skipped: they ask themselves
        when they start."""
        answers = await self.peers.ask_all("GET", "/latches")
        before = self.store.generation
        for peer, raw in sorted(answers.items()):
            with contextlib.suppress(ValueError):
                for warning in self.store.merge_snapshot(orjson.loads(raw)):
                    self.log.warning("latches_merged", message=warning, sibling=peer)
        if self.store.generation != before:
            self.log.info("latches_merged", siblings=sorted(answers))
            self.merged()
        self._sending()

    def learned(self, eid: str) -> None:
        self._send("learned", {"snapshot": self.store.snapshot_of(eid)})

    def forgot(self, eid: str | None, model: str | None) -> None:
        self._send("forgot", {"eid": eid, "model": model})

    def expired(self, older_than: float, now: float) -> None:
        self._send("expired", {"older_than": older_than, "now": now})

    def _send(self, kind: str, message: dict[str, Any]) -> None:
        body = orjson.dumps({"from": self.peers.index, **message})
        try:
            self._outbox.put_nowait((f"/latches/{kind}", body))
        except asyncio.QueueFull:
            self.log.warning("latch_sync", message="siblings not answering: a change was dropped")
        self._sending()

    def _sending(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._deliver())

    async def _deliver(self) -> None:
        while True:
            path, body = await self._outbox.get()
            try:
                await self.peers.ask_all("POST", path, body)
            finally:
                self._outbox.task_done()

    async def close(self) -> None:
        """Deliver what is queued (for `FLUSH_TIMEOUT` at most), then stop."""
        if self._sender is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._outbox.join(), FLUSH_TIMEOUT)
        self._sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._sender

    # -- a sibling's changes, in -----------------------------------------------------------

    def apply(self, kind: str, message: dict[str, Any]) -> None:
        """Apply a change a sibling made (`kind` as in its path); malformed parts raise
        ValueError, TypeError or KeyError."""
        before = self.store.generation
        if kind == "learned":
            for warning in self.store.merge_snapshot(message["snapshot"]):
                self.log.warning("latches_merged", message=warning, sibling=message.get("from"))
        elif kind == "forgot":
            self.store.reset(_optional_str(message["eid"]), _optional_str(message["model"]))
        elif kind == "expired":
            self.store.expire(float(message["older_than"]), float(message["now"]))
        else:
            raise KeyError(kind)
        if self.store.generation != before:
            self.log.info("latches_merged", change=kind, sibling=message.get("from"))
            self.merged()


def _optional_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected a string or null, not {type(value).__name__}")


def _sibling_app(proxy: Proxy, latches: SiblingLatches | None) -> web.Application:
    """The routes a worker answers its siblings on."""

    async def metrics(_request: web.Request) -> web.StreamResponse:
        proxy.refresh_latch_gauge()
        body, ctype = proxy.metrics.render()
        response = web.Response(body=body)
        response.headers["Content-Type"] = ctype
        return response

    async def snapshot(_request: web.Request) -> web.StreamResponse:
        return web.Response(body=orjson.dumps(proxy.store.to_snapshot()))

    async def change(request: web.Request) -> web.StreamResponse:
        assert latches is not None  # routed only with latches
        try:
            latches.apply(request.match_info["kind"], orjson.loads(await request.read()))
        except (ValueError, TypeError, KeyError) as exc:
            return web.Response(status=400, text=f"{type(exc).__name__}: {exc}")
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    if latches is not None:
        app.router.add_get("/latches", snapshot)
        app.router.add_post("/latches/{kind}", change)
    return app


class Siblings:
    """One worker's side of it all: what it asks the others, and the socket they ask it on."""

    def __init__(self, runtime_dir: Path, index: int, count: int) -> None:
        self.peers = Peers(runtime_dir, index, count)
        self.metrics = SiblingMetrics(self.peers)
        self.latches: SiblingLatches | None = None
        self.path = socket_path(runtime_dir, index)
        self._proxy: Proxy | None = None
        self._runner: web.AppRunner | None = None

    def attach(self, proxy: Proxy) -> None:
        """Make `proxy` (not started yet) one of the siblings: its scrapes sum theirs, and,
        unless a shared state backend carries latches between all processes already, its
        latches travel to them."""
        self._proxy = proxy
        proxy.metrics_peers = self.metrics
        if proxy.settings.state_url is None:
            self.latches = SiblingLatches(self.peers, proxy.store, proxy.merged)
            proxy.sync = self.latches

    async def open(self) -> None:
        """Answer the siblings (once the proxy has started: its store is loaded)."""
        assert self._proxy is not None, "attach a proxy first"
        self._runner = web.AppRunner(_sibling_app(self._proxy, self.latches), access_log=None)
        await self._runner.setup()
        # asyncio replaces a socket file left by this worker's previous life (a crash).
        await web.UnixSite(self._runner, str(self.path)).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        with contextlib.suppress(OSError):
            self.path.unlink()
        await self.peers.close()
