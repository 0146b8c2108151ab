"""Coarse timeouts for the request path: one shared sweep instead of a loop timer per request.

`asyncio.timeout` arms an event-loop timer for every request and re-arms it on every
`reschedule`; under load that measured about 6 us a request, a tenth of everything latchgate adds to
a short answer. The limits it enforces here (request, first-token and idle timeouts) are seconds to
minutes, so one sweep every `TICK` seconds that cancels whatever is overdue is precise enough: a
deadline fires at most one tick late. Arming, moving and disarming a deadline is then a dict
operation.

The semantics are `asyncio.timeout`'s: an expired deadline cancels its task, the
`CancelledError` becomes `TimeoutError` on leaving the block (only when the cancellation was
ours), `reschedule(None)` disarms it and `expired()` tells our expiry from any other timeout.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

TICK = 0.05  # seconds between sweeps: the most a deadline can fire late


class Deadlines:
    """The shared sweeper: holds the armed deadlines of one event loop and fires overdue ones.

    The sweep runs as a task only while something is armed, so an idle proxy does not wake up.
    """

    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self._armed: dict[Deadline, float] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, remembered.

        On Python 3.11, `asyncio.get_running_loop()` makes a `getpid()` system call every time
        (its fork check; 3.12 dropped it): two of those per request measured as much as some
        features. Only one loop runs in a thread at a time, so a remembered loop that is running
        is the running one.
        """
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = asyncio.get_running_loop()
            if loop is not self._loop:
                # Another loop (tests, a restart): the old loop's sweep and deadlines are gone.
                self._loop, self._sweeper = loop, None
                self._armed.clear()
        return loop

    def at(self, when: float | None) -> Deadline:
        """A deadline at loop time `when` (None: not armed), used as `with` inside a task."""
        return Deadline(self, when)

    def _arm(self, deadline: Deadline, when: float) -> None:
        loop = self.loop()  # before arming: a new loop drops the old one's sweep and deadlines
        self._armed[deadline] = when
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())

    def _disarm(self, deadline: Deadline) -> None:
        self._armed.pop(deadline, None)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._armed:
                await asyncio.sleep(self.tick)
                now = loop.time()
                for deadline in [d for d, when in self._armed.items() if when <= now]:
                    del self._armed[deadline]
                    deadline._fire()
        finally:
            self._sweeper = None

    def __len__(self) -> int:
        return len(self._armed)


class Deadline:
    """One timeout block; see the module docstring for how it differs from `asyncio.timeout`."""

    __slots__ = ("_cancelling", "_expired", "_owner", "_task", "_when")

    def __init__(self, owner: Deadlines, when: float | None) -> None:
        self._owner = owner
        self._when = when
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def expired(self) -> bool:
        """Whether this deadline fired (and cancelled its task)."""
        return self._expired

    def reschedule(self, when: float | None) -> None:
        """Move the deadline to loop time `when`, or disarm it with None."""
        self._when = when
        if self._task is None or self._expired:
            return  # not entered yet (armed on entry), or already fired
        if when is None:
            self._owner._disarm(self)
        else:
            self._owner._arm(self, when)

    def _fire(self) -> None:
        self._expired = True
        if self._task is not None:
            self._task.cancel()

    # A plain (not async) context manager: arming and disarming never wait, and `with` costs
    # no coroutine objects, unlike `async with`.
    def __enter__(self) -> Deadline:
        task = asyncio.current_task(self._owner.loop())  # given the loop: no getpid() call
        if task is None:
            raise RuntimeError("a Deadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self._when is not None:
            self._owner._arm(self, self._when)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._owner._disarm(self)
        task = self._task
        if (
            self._expired
            and task is not None
            and task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
