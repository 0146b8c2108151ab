"""A bare aiohttp byte relay: the floor for any Python proxy built on aiohttp.

It does what latchgate must do at minimum and nothing more: one pooled `ClientSession`, the
request body read and sent on unchanged, the answer's status and content type passed back, a
whole body returned whole and a stream relayed chunk by chunk as the bytes arrive (no parsing,
no validation, no metrics, no logging). latchgate's overhead is measured against this.

    python bench/relay.py --upstream http://127.0.0.1:9000/whole/v1 --port 9100

Like latchgate, `--upstream` is an OpenAI base URL: a client's `/v1/chat/completions` goes to
`{upstream}/chat/completions`.
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

SESSION = web.AppKey("session", aiohttp.ClientSession)
BASE = web.AppKey("base", str)


def target_path(path: str) -> str:
    """`/v1/chat/completions` and `/chat/completions` both become `/chat/completions`."""
    return path[3:] if path.startswith("/v1/") else path


async def relay(request: web.Request) -> web.StreamResponse:
    session = request.app[SESSION]
    body = await request.read()
    url = request.app[BASE] + target_path(request.path_qs)
    headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
    async with session.request(request.method, url, data=body, headers=headers) as upstream:
        ctype = upstream.headers.get("Content-Type", "application/octet-stream")
        if not ctype.startswith("text/event-stream"):
            # Whole answers: one read, one write with Content-Length (cheaper than chunking).
            return web.Response(
                status=upstream.status, body=await upstream.read(), headers={"Content-Type": ctype}
            )
        response = web.StreamResponse(status=upstream.status, headers={"Content-Type": ctype})
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def _session(app: web.Application) -> None:
    # The same pool settings as latchgate's upstream session, so only the work differs.
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30)
    app[SESSION] = aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    )


async def _close(app: web.Application) -> None:
    await app[SESSION].close()


def create_app(base: str) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[BASE] = base.rstrip("/")
    app.router.add_route("*", "/{tail:.*}", relay)
    app.on_startup.append(_session)
    app.on_cleanup.append(_close)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="bare aiohttp byte relay (benchmark floor)")
    parser.add_argument("--upstream", required=True, help="OpenAI base URL, e.g. http://h:p/v1")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8788)
    parser.add_argument(
        "--handler-cancellation",
        action="store_true",
        help="cancel the handler when the client leaves (what latchgate does; costs a task)",
    )
    args = parser.parse_args()
    loop_factory = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # the plain asyncio loop works, only slower
        pass
    # access_log=None: logging each request is exactly the kind of cost the floor leaves out.
    web.run_app(
        create_app(args.upstream),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        backlog=1024,
        handler_cancellation=args.handler_cancellation,
        loop=loop_factory() if loop_factory else None,
    )


if __name__ == "__main__":
    main()
