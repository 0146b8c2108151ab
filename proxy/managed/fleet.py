"""The managed llama-servers together: which run, who waits, which stop.

A request for a managed model takes a lease on its server (`Fleet.acquire`) for as long as it is
being answered. The server is started on its first lease; at most `max_running` run at once, so
a request for a model that has no place waits: the least recently used server with no requests
is stopped for it, or, when every running server is busy, the least recently used one takes no
new requests ("draining") and is stopped once its last request is answered, as llama-swap does.
Requests for a model that is starting, restarting or draining wait for it; none fails for it,
except when its start fails (then they get that failure, with its reason). A server with no
requests for `idle_stop` seconds is stopped (`_reap`).

Waiting is one loop over one "something changed" event, not a queue per model: places change
rarely (a start takes seconds), and every waiter re-reads the whole state when one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Iterable
from typing import Any

from proxy.errors import ProxyError
from proxy.managed.exposition import merge
from proxy.managed.process import ManagedServer, StartFailed, State

REAP_TICK = 1.0  # seconds between idle checks (at most; less for a shorter idle_stop)
# A model whose start just failed fails again at once for this long (doubling per failure up
# to the cap), instead of every request retrying a start that cannot work.
FAILED_HOLD = (2.0, 30.0)
_STOPPABLE = (State.STARTING, State.READY)


class Lease:
    """A request's hold on a managed server: it is not stopped while any are held."""

    __slots__ = ("fleet", "released", "server")

    def __init__(self, fleet: Fleet, server: ManagedServer) -> None:
        self.fleet = fleet
        self.server = server
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.fleet.release(self.server)


class Managed:
    """What an upstream holds of its managed server: the way to a lease, and its state."""

    __slots__ = ("fleet", "server")

    def __init__(self, fleet: Fleet, server: ManagedServer) -> None:
        self.fleet = fleet
        self.server = server

    def acquire(self) -> Awaitable[Lease]:
        return self.fleet.acquire(self.server.name)

    @property
    def ready(self) -> bool:
        return self.server.state is State.READY


class Fleet:
    """Every managed server of one latchgate, and the bound on how many run."""

    def __init__(self, servers: Iterable[ManagedServer], max_running: int, log: Any) -> None:
        self.servers = {s.name: s for s in servers}
        self.max_running = max_running
        self.log = log
        self._changed = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        for server in self.servers.values():
            server.changed = self._notify  # a start ended, a server stopped or failed

    # -- leases --------------------------------------------------------------------------------
    async def acquire(self, name: str) -> Lease:
        """A lease on `name`'s server, once it is ready; StartFailed when it cannot start."""
        server = self.servers[name]
        while True:
            if server.running and not server.draining and server.state is not State.STOPPING:
                return await self._lease(server)
            if not server.running:
                self._hold_check(server)
                if self._place_for(server):
                    continue
            await self._wait_change()

    async def _lease(self, server: ManagedServer) -> Lease:
        server.leases += 1
        server.last_used = time.monotonic()
        try:
            await server.wait_ready()
        except BaseException:
            self.release(server)
            raise
        return Lease(self, server)

    def release(self, server: ManagedServer) -> None:
        server.leases -= 1
        server.last_used = time.monotonic()
        if server.leases == 0:
            self._notify()

    def _hold_check(self, server: ManagedServer) -> None:
        """A start that failed moments ago is not tried again yet: the same failure, at once."""
        failed = server.failure
        if failed is None:
            return
        first, cap = FAILED_HOLD
        hold = min(cap, first * 2 ** (server.failures_in_row - 1))
        if time.monotonic() - server.failed_at < hold:
            raise failed

    def _place_for(self, server: ManagedServer) -> bool:
        """Start `server` if there is a place, or make one; True when it was started."""
        running = [s for s in self.servers.values() if s.running]
        if len(running) < self.max_running:
            self._start(server)
            return True
        if any(s.state is State.STOPPING or (s.draining and s.leases == 0) for s in running):
            return False  # a place is being freed: wait for it
        idle = [s for s in running if s.leases == 0 and s.state is not State.STARTING]
        if idle:
            victim = min(idle, key=lambda s: s.last_used)
            self._stop_for(victim, server)
            return False
        if not any(s.draining for s in running):
            victim = min(running, key=lambda s: s.last_used)
            victim.draining = True
            self._notify()  # one with no requests (still loading, say) is stopped at once
            self.log.info(
                "managed_draining",
                upstream=victim.name,
                waiting=server.name,
                requests=victim.leases,
                message=f"{server.name} waits for {victim.name}'s requests to finish",
            )
        return False

    @staticmethod
    def _start(server: ManagedServer) -> None:
        server.begin()

    def _stop_for(self, victim: ManagedServer, waiting: ManagedServer) -> None:
        self.log.info("managed_swap", stopping=victim.name, starting=waiting.name)
        self._background(victim.stop("swap"))

    # -- waiting -------------------------------------------------------------------------------
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        for server in self.servers.values():
            if server.draining and server.leases == 0 and server.state in _STOPPABLE:
                self._background(server.stop("swap"))

    async def _wait_change(self) -> None:
        await self._changed.wait()

    def _background(self, work: Any) -> None:
        async def run() -> None:
            try:
                await work
            finally:
                self._notify()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)  # held, or the task could be collected mid-way
        task.add_done_callback(self._tasks.discard)

    async def exposition(self) -> str:
        """The running servers' own metrics, each under its `upstream` label."""
        servers = list(self.servers.values())
        texts = await asyncio.gather(*(s.metrics_text() for s in servers))
        return merge((s.name, text) for s, text in zip(servers, texts, strict=True) if text)

    # -- start, idle, stop ---------------------------------------------------------------------
    def start(self) -> None:
        """Begin the idle checks (in the running loop)."""
        if self._reaper is None and any(s.config.idle_stop > 0 for s in self.servers.values()):
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def preload(self) -> None:
        """Start the servers marked `preload` (up to `max_running`) and wait until they are
        ready; StartFailed for the first that cannot start."""
        chosen = [s for s in self.servers.values() if s.config.preload][: self.max_running]
        for server in chosen:
            if not server.running:
                self._start(server)
        for server in chosen:
            await server.wait_ready()

    async def _reap(self) -> None:
        tick = min([REAP_TICK] + [s.config.idle_stop / 4 for s in self.servers.values()
                                  if s.config.idle_stop > 0])  # fmt: skip
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for server in self.servers.values():
                idle_stop = server.config.idle_stop
                if (
                    idle_stop > 0
                    and server.state is State.READY
                    and server.leases == 0
                    and now - server.last_used >= idle_stop
                ):
                    self.log.info("managed_idle", upstream=server.name, idle_seconds=idle_stop)
                    self._background(server.stop("idle"))

    async def close(self) -> None:
        """Stop every server (latchgate is shutting down)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await asyncio.gather(*(s.close() for s in self.servers.values()), return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def handle(self, name: str) -> Managed:
        return Managed(self, self.servers[name])


def unavailable(upstream: str, failed: StartFailed) -> ProxyError:
    """The answer to a request whose managed server cannot start (503: a later try may work,
    once the cause is fixed or the server's backoff has passed)."""
    return ProxyError(
        503,
        f"The model server of {upstream} could not start: {failed.brief()}. latchgate's log "
        "has its output; check the model file, the llama-server flags and free memory, then "
        "retry.",
        type="upstream_error",
        code="upstream_unavailable",
    )


__all__ = ["Fleet", "Lease", "Managed", "StartFailed", "unavailable"]
