"""Running the application: bind, serve until a signal, shut down cleanly (saving latches).

One process serves by default; with `settings.workers > 1`, `run` hands over to the supervisor
(`proxy.http.workers`), which starts that many processes of `run_worker`. A worker serves the
same application the same way (`start`), on its own SO_REUSEPORT socket, with its siblings
attached (`proxy.http.siblings`): one code path for one process and for N.

`handler_cancellation=True` is chosen on purpose: when a client disconnects, aiohttp cancels the
handler, which closes the upstream request at once, so a model server stops generating for
nobody. (aiohttp's default keeps running the handler to completion.)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
from multiprocessing.connection import Connection

from aiohttp import web

from proxy import compiled
from proxy.http import workers
from proxy.http.app import (
    DIRECT_ROUTES,
    PROXY_KEY,
    Proxy,
    create_app,
    direct_dispatch,
    protocol_answer,
)
from proxy.http.protocol import Runner
from proxy.http.siblings import Siblings
from proxy.http.workers import WorkerPlace
from proxy.managed.process import StartFailed
from proxy.observe import logs
from proxy.settings import Settings


def _loop_factory() -> None:
    try:
        import uvloop
    except ImportError:  # optional: the pure-asyncio loop works, only slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def start(
    settings: Settings, *, sock: socket.socket | None = None, siblings: Siblings | None = None
) -> tuple[web.AppRunner, int]:
    """Start serving `settings`; returns the runner and the bound port (useful with port 0).

    A worker passes its own socket `sock` (bound, not listening) and its `siblings`, attached to
    the proxy before it starts (its start-up takes in the siblings' latches).
    """
    app = create_app(settings)
    if siblings is not None:
        siblings.attach(app[PROXY_KEY])
    runner = Runner(
        app,
        answer=protocol_answer(app[PROXY_KEY]),
        handler_cancellation=True,
        access_log=None,
    )
    await runner.setup()
    server = runner.server
    assert server is not None  # set by `setup`
    # Read by each new connection: set before the site accepts any.
    server.request_handler = direct_dispatch(app[DIRECT_ROUTES], server.request_handler)
    site: web.BaseSite
    if sock is None:
        site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
    else:
        site = web.SockSite(runner, sock, backlog=1024)
    await site.start()
    port = settings.port
    listening = getattr(site, "_server", None)
    if listening is not None and listening.sockets:
        port = listening.sockets[0].getsockname()[1]
    return runner, port


def _stop_on(*signals: signal.Signals) -> asyncio.Event:
    """An event set by any of `signals`."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in signals:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve(settings: Settings) -> None:
    runner, port = await start(settings)
    logs.get_logger().info(
        "listening",
        host=settings.host,
        port=port,
        upstreams=[u.name for u in settings.upstreams],
        build=compiled.build,  # "compiled", or why the hot modules' sources run (proxy.compiled)
    )
    stop = _stop_on(signal.SIGINT, signal.SIGTERM)
    try:
        await _preload(runner.app[PROXY_KEY], stop)
        await stop.wait()
    finally:
        await runner.cleanup()


async def _preload(proxy: Proxy, stop: asyncio.Event) -> None:
    """Start the managed llama-servers marked `preload` (`--model`), already listening: requests
    wait for them. One that cannot start raises StartFailed, which ends latchgate (status 2)."""
    if proxy.fleet is None:
        return
    loading = asyncio.ensure_future(proxy.fleet.preload())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((loading, stopping), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not loading.done():
        loading.cancel()  # stopped while it loaded: the shutdown stops the servers
        with contextlib.suppress(asyncio.CancelledError, StartFailed):
            await loading
        return
    loading.result()


async def _serve_worker(settings: Settings, place: WorkerPlace, ready: Connection) -> None:
    # SIGTERM only: the supervisor sends it (also for a Ctrl-C, which workers ignore).
    stop = _stop_on(signal.SIGTERM)
    sock = workers.listening_socket(settings.host, place.port)
    siblings = Siblings(place.runtime_dir, place.index, settings.workers)
    runner, _ = await start(settings, sock=sock, siblings=siblings)
    watch = asyncio.create_task(workers.watch_supervisor(place, stop))
    try:
        await siblings.open()
        workers.report_ready(ready)
        await stop.wait()
    finally:
        watch.cancel()
        # The siblings' socket stays open while requests drain: scrapes still count this one.
        await runner.cleanup()
        await siblings.close()
        workers.leave(place)


# CPython collects its youngest generation every 700 container allocations; one proxied request
# makes a few hundred, and nearly all of them are freed by reference counting, so the collector
# mostly walks the live objects of requests in flight. Collecting ten times less often measured
# ~10 us a request (about 8 % of throughput) for a few MB more at most between collections.
GC_THRESHOLDS = (10_000, 20, 20)


def _prepare_process() -> None:
    _loop_factory()
    gc.set_threshold(*GC_THRESHOLDS)


def run_worker(settings: Settings, place: WorkerPlace, ready: Connection) -> None:
    """A worker process's entry point (`workers.WorkerTarget`), run by the supervisor."""
    workers.become_worker(settings, place)
    _prepare_process()
    asyncio.run(_serve_worker(settings, place, ready))


def run(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT: in this process, or in `settings.workers` supervised
    ones. Raises OSError when the address cannot be bound."""
    if settings.workers > 1:
        workers.supervise(settings, run_worker)
        return
    _prepare_process()
    asyncio.run(_serve(settings))
