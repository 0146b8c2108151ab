"""`--workers N`: one supervisor process keeping N serving processes on one port.

One Python process serves on one core; a machine in front of several model servers has more.
The supervisor binds nothing it serves on: each worker opens its own listening socket on the
same (host, port) with SO_REUSEPORT, and the kernel spreads new connections among them. That is
chosen over one socket shared by inheritance (the pre-fork way): with spawned processes there
is nothing to inherit, and separate accept queues spread connections evenly instead of letting
whichever process wakes first take them all.

The supervisor resolves the port once, before any worker starts, by binding (not listening) a
SO_REUSEPORT socket of its own and holding it: port 0 then means one port for every worker, and
the port stays reserved while a worker restarts. It then starts the workers (the "spawn"
context: a fresh interpreter, nothing of the supervisor's state inherited), restarts any that
dies (with a backoff, so a worker that cannot start does not spin), and on SIGTERM or SIGINT
tells every worker to drain, as one process does on SIGTERM, then exits 0. The workers talk to
each other (metrics, latches) over unix sockets in a private directory: `proxy.http.siblings`.

Running the application inside a worker is `proxy.http.server`'s job (it passes its worker
entry point in as `target`): this module only starts, watches and stops processes, and gives
the workers what they need to find the port, each other and their supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TypeVar

import structlog

from proxy.lifetime import die_with_parent
from proxy.observe import logs
from proxy.settings import Settings

# A worker that dies is started again after BACKOFF_FIRST seconds, then twice as long after each
# death, up to BACKOFF_MAX; a worker that had lived HEALTHY_AFTER seconds starts from the first
# delay again (it died of something, not of failing to start).
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0
# Past the shutdown grace (when workers end the requests left), the time they get to close.
STOP_MARGIN = 10.0
# How often a worker checks that its supervisor is still there (besides `die_with_parent`).
PARENT_CHECK_SECONDS = 1.0
_READY = b"ready"
_T = TypeVar("_T")


@dataclass(frozen=True)
class WorkerPlace:
    """What a worker is told at start: which one it is, and where its port, siblings and
    supervisor are."""

    index: int
    port: int
    runtime_dir: Path
    supervisor: int  # the supervisor's pid: a worker whose parent is another has lost it


# The worker's entry point: called in the new process with the settings, its place, and the
# pipe on which it says it is serving (`report_ready`).
WorkerTarget = Callable[[Settings, WorkerPlace, Connection], None]


# -- sockets -----------------------------------------------------------------------------------


def _address(host: str, port: int) -> tuple[socket.AddressFamily, tuple[str, int]]:
    # The first address only: a name such as "localhost" that resolves to both 127.0.0.1 and
    # ::1 is served on the first (aiohttp alone would bind each).
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return family, (str(sockaddr[0]), int(sockaddr[1]))


def _reusable_socket(host: str, port: int) -> socket.socket:
    family, address = _address(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            # As asyncio (and so aiohttp) binds IPv6: v6 only, "::" does not also take IPv4.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) with SO_REUSEPORT and not listening: it takes no
    connection, but holds the port (the one chosen, for port 0) for the workers to bind."""
    return _reusable_socket(host, port)


def listening_socket(host: str, port: int) -> socket.socket:
    """A worker's own socket on the supervisor's port (aiohttp's site calls `listen` on it)."""
    sock = _reusable_socket(host, port)
    sock.setblocking(False)
    return sock


# -- inside a worker ---------------------------------------------------------------------------


def become_worker(settings: Settings, place: WorkerPlace) -> None:
    """First thing in a new worker: die with the supervisor, log with a `worker` field."""
    die_with_parent()  # besides `watch_supervisor`, for a supervisor killed with SIGKILL
    # Ctrl-C in a terminal reaches the whole process group; the supervisor answers it by
    # telling each worker to drain (SIGTERM), so a worker does not act on it a second time.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.configure(settings.log_level)
    # Bound before the event loop starts: every task copies this context, so every line of
    # this process carries the field.
    structlog.contextvars.bind_contextvars(worker=place.index)


async def watch_supervisor(place: WorkerPlace, stop: asyncio.Event) -> None:
    """Set `stop` once the supervisor is gone (this process was adopted by another)."""
    while os.getppid() == place.supervisor:
        await asyncio.sleep(PARENT_CHECK_SECONDS)
    logs.get_logger().warning("supervisor_gone", message="the supervisor exited; stopping")
    stop.set()


def leave(place: WorkerPlace) -> None:
    """Last thing in a worker (its socket file removed): without a supervisor to remove the
    runtime directory, the last worker out does (it is not empty for the others)."""
    if os.getppid() != place.supervisor:
        with contextlib.suppress(OSError):
            place.runtime_dir.rmdir()


def report_ready(ready: Connection) -> None:
    """Tell the supervisor this worker is serving."""
    with contextlib.suppress(OSError):
        ready.send_bytes(_READY)
    ready.close()


# -- the supervisor ----------------------------------------------------------------------------


@dataclass
class _Slot:
    """One worker position: the process holding it now, and its restart backoff."""

    index: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    delay: float = BACKOFF_FIRST
    served: bool = False  # whether any of its processes said it was serving
    exited: asyncio.Future[int] = field(default_factory=lambda: _done(0))


def _done(value: _T) -> asyncio.Future[_T]:
    future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def _exit_fields(code: int | None) -> dict[str, object]:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return {"signal": signal.Signals(-code).name}
        return {"signal": -code}
    return {"exit_code": code}


class Supervisor:
    """Keeps `settings.workers` workers running until SIGTERM or SIGINT, then stops them."""

    def __init__(
        self, settings: Settings, target: WorkerTarget, port: int, runtime_dir: Path
    ) -> None:
        self.settings = settings
        self.target = target
        self.port = port
        self.runtime_dir = runtime_dir
        self.log = logs.get_logger()
        self._context = multiprocessing.get_context("spawn")
        self._slots: list[_Slot] = []
        self._stopping = False
        self._announced = False

    async def run(self) -> None:
        """Start the workers, keep them, and stop them on a signal."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self._slots = [_Slot(index) for index in range(self.settings.workers)]
        keepers = [asyncio.create_task(self._keep(slot)) for slot in self._slots]
        await stop.wait()
        self._stopping = True
        for keeper in keepers:
            keeper.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        await self._stop_all()

    def _announce(self) -> None:
        """Say "listening" once, when every worker has served (each has its socket open)."""
        if self._announced or not all(slot.served for slot in self._slots):
            return
        self._announced = True
        self.log.info(
            "listening",
            host=self.settings.host,
            port=self.port,
            workers=self.settings.workers,
            upstreams=[u.name for u in self.settings.upstreams],
        )

    def _start(self, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = self._context.Pipe(duplex=False)
        place = WorkerPlace(slot.index, self.port, self.runtime_dir, os.getpid())
        process = self._context.Process(
            target=self.target,
            args=(self.settings, place, writer),
            name=f"latchgate-worker-{slot.index}",
            # daemon: should the supervisor itself fail, multiprocessing's exit handler still
            # terminates the workers (the normal way out stops them below, before that).
            daemon=True,
        )
        process.start()
        writer.close()  # the worker holds the other copy: its end of the pipe closes with it
        slot.process, slot.exited = process, loop.create_future()
        loop.add_reader(process.sentinel, self._reap, process, slot.exited)
        loop.add_reader(reader.fileno(), self._on_ready, slot, reader)
        self.log.info("worker_started", index=slot.index, pid=process.pid)

    def _reap(self, process: BaseProcess, exited: asyncio.Future[int]) -> None:
        asyncio.get_running_loop().remove_reader(process.sentinel)
        # The sentinel is readable once the process is gone; `join` collects its status (a
        # moment after, at most: the kernel closes its files just before it becomes a zombie).
        process.join()
        code = process.exitcode
        if not exited.done():
            exited.set_result(0 if code is None else code)

    def _on_ready(self, slot: _Slot, reader: Connection) -> None:
        asyncio.get_running_loop().remove_reader(reader.fileno())
        try:
            said = reader.recv_bytes() == _READY
        except (EOFError, OSError):
            said = False  # it died before serving
        reader.close()
        if said:
            slot.served = True
            self._announce()

    async def _keep(self, slot: _Slot) -> None:
        """Run a worker in `slot`, again whenever it dies, with the backoff (until cancelled)."""
        loop = asyncio.get_running_loop()
        while True:
            slot.started_at = loop.time()
            try:
                self._start(slot)
            except Exception as exc:  # no process (out of memory, pids, files): tried again
                self.log.error("worker_not_started", index=slot.index, error=repr(exc))
                code: int | None = None
            else:
                # shielded: cancelling the keeper at shutdown must not cancel the exit it awaits
                code = await asyncio.shield(slot.exited)
            lived = loop.time() - slot.started_at
            if lived >= HEALTHY_AFTER:
                slot.delay = BACKOFF_FIRST
            delay, slot.delay = slot.delay, min(slot.delay * 2, BACKOFF_MAX)
            if code is not None:
                self.log.warning(
                    "worker_exited",
                    index=slot.index,
                    pid=slot.process.pid if slot.process is not None else None,
                    **_exit_fields(code),
                    lived_seconds=round(lived, 1),
                    restart_in_seconds=delay,
                )
            await asyncio.sleep(delay)
            if self._stopping:
                return

    async def _stop_all(self) -> None:
        """SIGTERM to every worker; SIGKILL to those still there after the grace and margin."""
        running = [slot for slot in self._slots if not slot.exited.done()]
        for slot in running:
            assert slot.process is not None  # a slot with a pending exit has a process
            with contextlib.suppress(OSError):
                slot.process.terminate()
        wait = self.settings.shutdown_grace + STOP_MARGIN
        if running:
            await asyncio.wait([slot.exited for slot in running], timeout=wait)
        for slot in running:
            assert slot.process is not None
            if not slot.exited.done():
                self.log.warning(
                    "worker_killed",
                    index=slot.index,
                    pid=slot.process.pid,
                    message=f"still running {wait:g} s after SIGTERM",
                )
                with contextlib.suppress(OSError):
                    slot.process.kill()
                await asyncio.wait([slot.exited], timeout=STOP_MARGIN)
            code = slot.exited.result() if slot.exited.done() else None
            self.log.info(
                "worker_exited",
                index=slot.index,
                pid=slot.process.pid,
                **_exit_fields(code),
                stopping=True,
            )


def supervise(settings: Settings, target: WorkerTarget) -> None:
    """Serve with `settings.workers` processes until SIGTERM or SIGINT (then return).

    Raises OSError when (host, port) cannot be bound, before any worker starts.
    """
    reserved = reserve_port(settings.host, settings.port)
    port = int(reserved.getsockname()[1])
    # mkdtemp makes the directory 0700: only this user can reach the workers' sockets, which
    # take latches and answer with metrics without asking for a key.
    runtime_dir = Path(tempfile.mkdtemp(prefix="latchgate-"))
    try:
        asyncio.run(Supervisor(settings, target, port, runtime_dir).run())
    finally:
        reserved.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)
