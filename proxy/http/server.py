"""Running the application: bind, serve until a signal, shut down cleanly (saving latches).

`handler_cancellation=True` is chosen on purpose: when a client disconnects, aiohttp cancels the
handler, which closes the upstream request at once, so a model server stops generating for
nobody. (aiohttp's default keeps running the handler to completion.)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal

from aiohttp import web

from proxy.http.app import DIRECT_ROUTES, PROXY_KEY, create_app, direct_dispatch, protocol_answer
from proxy.http.protocol import Runner
from proxy.settings import Settings


def _loop_factory() -> None:
    try:
        import uvloop
    except ImportError:  # optional: the pure-asyncio loop works, only slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def start(settings: Settings) -> tuple[web.AppRunner, int]:
    """Start serving `settings`; returns the runner and the bound port (useful with port 0)."""
    app = create_app(settings)
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
    site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
    await site.start()
    port = settings.port
    listening = getattr(site, "_server", None)
    if listening is not None and listening.sockets:
        port = listening.sockets[0].getsockname()[1]
    return runner, port


async def _serve(settings: Settings) -> None:
    from proxy.observe import logs

    runner, port = await start(settings)
    logs.get_logger().info(
        "listening",
        host=settings.host,
        port=port,
        upstreams=[u.name for u in settings.upstreams],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


# CPython collects its youngest generation every 700 container allocations; one proxied request
# makes a few hundred, and nearly all of them are freed by reference counting, so the collector
# mostly walks the live objects of requests in flight. Collecting ten times less often measured
# ~10 us a request (about 8 % of throughput) for a few MB more at most between collections.
GC_THRESHOLDS = (10_000, 20, 20)


def run(settings: Settings) -> None:
    _loop_factory()
    gc.set_threshold(*GC_THRESHOLDS)
    asyncio.run(_serve(settings))
