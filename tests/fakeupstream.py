"""A scripted fake model server: a real aiohttp app on 127.0.0.1 that tests program reply by reply.

Tests queue replies (`Json`, `Stream`, `Hang`, `Drop`) and read back every request the fake
received (path, headers, raw body), so they can assert on both ends of latchgate. When the queue is
empty it answers like a plain OpenAI server: a short completion, whole or streamed.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    raw: bytes
    peer: int = 0  # the client's port: one per upstream connection

    @property
    def json(self) -> Any:
        return orjson.loads(self.raw)


@dataclass
class Json:
    """A whole JSON (or raw bytes) reply."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Stream:
    """An SSE reply: each item is a chunk dict, raw bytes (sent as they are), "[DONE]", or an
    `asyncio.Event` the stream waits for (the test sets it, e.g. once the client saw a chunk)."""

    events: list[Any]
    delay: float = 0.0  # between events
    first_delay: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    split: int | None = None  # write each event in pieces of this many bytes
    then: str = (
        "end"  # "end" (close cleanly), "hang" (stay open silent), "drop" (cut the connection)
    )
    end_delay: float = 0.0  # before the end of the body (after the last event), as real servers


@dataclass
class Hang:
    """Accept the request and say nothing for `seconds`."""

    seconds: float = 3600.0


@dataclass
class Drop:
    """Close the connection without an answer."""


Reply = Json | Stream | Hang | Drop | Callable[[Recorded], Any]


def completion(
    content: str = "Hello!",
    *,
    model: str = "fake-model",
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
    **message: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    body: dict[str, Any] = {
        "id": "chatcmpl-fake1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
    }
    body["usage"] = usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    return body


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    model: str = "fake-model",
    usage: dict[str, Any] | None = None,
    choices: list[Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": choices
        if choices is not None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def text_stream(*pieces: str, finish: str = "stop", usage: bool = True, **kw: Any) -> Stream:
    """A well-formed stream of `pieces` as content deltas."""
    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in pieces]
    events.append(chunk({}, finish))
    if usage:
        events.append(
            chunk(
                choices=[],
                usage={
                    "prompt_tokens": 10,
                    "completion_tokens": len(pieces),
                    "total_tokens": 10 + len(pieces),
                },
            )
        )
    events.append("[DONE]")
    return Stream(events, **kw)


class FakeUpstream:
    """The fake server. `await start()`, queue replies with `push`, read `requests`."""

    def __init__(self, models: list[str] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.probes: list[Recorded] = []  # GETs and `routes` hits (/v1/models, /props, ...)
        self.script: deque[Reply] = deque()
        self.routes: dict[str, Json] = {}
        self.models = models or ["fake-model"]
        self.cancelled_at: list[float] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def bodies(self, path: str = "/v1/chat/completions") -> list[Any]:
        return [r.json for r in self.requests if r.path == path]

    async def start(self) -> FakeUpstream:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if (
            request.method == "GET"
            or request.path in self.routes
            or not request.path.endswith(
                ("/chat/completions", "/completions", "/embeddings", "/responses")
            )
        ):
            self.probes.append(Recorded(request.path, dict(request.headers), raw))
            return self._get(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        rec = Recorded(request.path, dict(request.headers), raw, peer[1] if peer else 0)
        self.requests.append(rec)
        reply: Reply = self.script.popleft() if self.script else self._default(rec)
        if callable(reply) and not isinstance(reply, Json | Stream | Hang | Drop):
            reply = reply(rec)
        try:
            return await self._play(request, reply)
        except asyncio.CancelledError:
            self.cancelled_at.append(time.monotonic())
            raise

    def _get(self, request: web.Request) -> web.StreamResponse:
        route = self.routes.get(request.path)
        if route is not None:
            return web.Response(
                status=route.status, body=orjson.dumps(route.body), content_type="application/json"
            )
        if request.path == "/v1/models":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models
            ]
            return web.json_response({"object": "list", "data": data})
        return web.json_response(
            {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}},
            status=404,
        )

    def _default(self, rec: Recorded) -> Reply:
        body = orjson.loads(rec.raw) if rec.raw else {}
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        if isinstance(body, dict) and body.get("stream"):
            return text_stream("Hel", "lo", "!")
        if rec.path.endswith("/embeddings"):
            return Json(
                {
                    "object": "list",
                    "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                    "model": model,
                }
            )
        if rec.path.endswith("/completions") and not rec.path.endswith("chat/completions"):
            return Json(
                {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "text": "Hello!", "finish_reason": "stop"}],
                }
            )
        return Json(completion(model=model))

    async def _play(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        if isinstance(reply, Json):
            if reply.delay:
                await asyncio.sleep(reply.delay)
            body = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
            resp = web.Response(status=reply.status, body=body, headers=reply.headers)
            if "Content-Type" not in reply.headers:
                resp.content_type = "application/json"
            return resp
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            return web.Response(status=204)
        if isinstance(reply, Drop):
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        assert isinstance(reply, Stream)
        resp = web.StreamResponse(status=reply.status, headers=reply.headers)
        resp.content_type = "text/event-stream"
        await resp.prepare(request)
        if reply.first_delay:
            await asyncio.sleep(reply.first_delay)
        for i, item in enumerate(reply.events):
            if i and reply.delay:
                await asyncio.sleep(reply.delay)
            if isinstance(item, asyncio.Event):
                await item.wait()  # the test says when the stream goes on
                continue
            if isinstance(item, bytes):
                data = item
            elif item == "[DONE]":
                data = b"data: [DONE]\n\n"
            else:
                data = b"data: " + orjson.dumps(item) + b"\n\n"
            if reply.split:
                for j in range(0, len(data), reply.split):
                    await resp.write(data[j : j + reply.split])
            else:
                await resp.write(data)
        if reply.then == "hang":
            await asyncio.sleep(3600)
        if reply.then == "drop":
            assert request.transport is not None
            request.transport.close()
            return resp
        if reply.end_delay:
            await asyncio.sleep(reply.end_delay)
        await resp.write_eof()
        return resp
