"""Shutting down gracefully: the requests in flight, and ending those that outlast the grace.

On SIGTERM latchgate stops accepting connections, then gives the requests in flight
`shutdown_grace` seconds to finish. What is still running after that (a stream from a stalled
upstream would otherwise hold the shutdown for its whole idle timeout) is interrupted: its task
is cancelled with the request marked, and the request path ends it with an error the client's
SDK raises (an SSE error event, or a 503 before anything was sent) instead of a cut connection.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

POLL = 0.05  # seconds between looks at what is still in flight
SETTLE = 5.0  # seconds for interrupted requests to write their last words


class Interruptible(Protocol):
    interrupted: bool


class InFlight:
    """The tasks serving requests right now, each with the request it serves."""

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[object], Interruptible] = {}

    def __len__(self) -> int:
        return len(self._running)

    def add(self, task: asyncio.Task[object] | None, request: Interruptible) -> None:
        if task is not None:
            self._running[task] = request

    def discard(self, task: asyncio.Task[object] | None) -> None:
        if task is not None:
            self._running.pop(task, None)

    async def drain(self, grace: float) -> int:
        """Wait up to `grace` seconds for the requests in flight, then interrupt the rest;
        returns how many were interrupted."""
        loop = asyncio.get_running_loop()
        until = loop.time() + grace
        while self._running and loop.time() < until:
            await asyncio.sleep(POLL)
        late = list(self._running.items())
        for task, request in late:
            request.interrupted = True
            task.cancel()
        until = loop.time() + SETTLE
        while self._running and loop.time() < until:
            await asyncio.sleep(POLL)
        return len(late)
