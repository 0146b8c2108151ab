"""The Anthropic Messages routes: `POST /v1/messages` onto the chat path, and `count_tokens`.

`POST /v1/messages` is a front's route (`proxy.http.app.FrontRoute`): its body is translated
(`proxy.fronts.messages`), run as a chat job, and every error answered on the way, before the job
or by it, is rewritten in Anthropic's shape (`{"type": "error", "error": {...}}`) so the
Anthropic SDK raises the exception its status stands for. `POST /v1/messages/count_tokens`
counts with the upstream's own tokenizer where it has one (llama.cpp), else with latchgate's
calibrated estimate. Keys come as `x-api-key` or a bearer token (`proxy.http.auth`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from proxy.errors import ProxyError
from proxy.fronts.common import Options
from proxy.fronts.messages.errors import shaped_body
from proxy.fronts.messages.front import MessagesFront
from proxy.fronts.messages.output import Context
from proxy.fronts.messages.request import translate
from proxy.http.bodies import parse_object
from proxy.http.jobs import JobMaker
from proxy.observe import events as ev
from proxy.path.job import Job
from proxy.upstreams.client import Upstream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Counter = Callable[[Upstream, str, list[dict[str, Any]], Any], Awaitable[int]]


def shaped(response: web.Response) -> web.Response:
    """An OpenAI-shaped error answer rewritten in Anthropic's shape (headers kept)."""
    if response.status < 400 or not isinstance(response.body, bytes):
        return response
    out = web.Response(
        status=response.status,
        body=shaped_body(response.status, response.body),
        content_type="application/json",
    )
    for name, value in response.headers.items():
        if name.lower() not in ("content-type", "content-length"):
            out.headers.add(name, value)
    if response.keep_alive is False:
        out.force_close()  # the answer closes the connection (a body that could not be read)
    return out


class MessagesRoute:
    """`POST /v1/messages`: the job for a body, and the answer in Anthropic's shape."""

    def __init__(self, jobs: JobMaker, count: Counter, keepalive: float) -> None:
        self.jobs = jobs
        self.count = count
        self.keepalive = keepalive

    async def job(self, request: web.Request, rid: str, raw: bytes, body: dict[str, Any]) -> Job:
        upstream = await self.jobs.detected(body["model"])
        translated = translate(body, Options.for_kind(upstream.kind))
        chat = translated.chat
        job = self.jobs.chat(request, rid, chat, upstream)
        stops = chat.get("stop") or ()
        job.front = MessagesFront(Context(body["model"], tuple(stops)), keepalive=self.keepalive)
        for notice in translated.notices:
            job.events.emit(ev.INFO, notice)
        return job

    async def answered(
        self, request: web.Request, job: Job, response: web.StreamResponse
    ) -> web.StreamResponse:
        if isinstance(response, web.Response):
            return shaped(response)  # an error before any stream: Anthropic's shape
        return response

    @staticmethod
    def shaped(response: web.Response) -> web.Response:
        return shaped(response)

    def count_tokens(self) -> Handler:
        """`POST /v1/messages/count_tokens`: `{"input_tokens": N}` for a Messages body."""

        async def count(request: web.Request) -> web.StreamResponse:
            body = parse_object(await request.read())
            model = body.get("model")
            if not isinstance(model, str) or not model:
                raise ProxyError(400, "'model' must name the model to count for.", param="model")
            upstream = await self.jobs.detected(model)
            # max_tokens has no part in a count: any value lets the body translate.
            chat = translate({**body, "max_tokens": 1}, Options.for_kind(upstream.kind)).chat
            tokens = await self.count(upstream, model, chat["messages"], chat.get("tools"))
            return web.json_response({"input_tokens": tokens})

        return count


def anthropic_errors(handler: Handler, *, only: tuple[str, ...] = ()) -> Handler:
    """A guarded route (OpenAI-shaped errors) whose errors go out in Anthropic's shape: all of
    them, or with `only` those on paths that begin so."""

    async def route(request: web.Request) -> web.StreamResponse:
        response = await handler(request)
        if only and not request.path.startswith(only):
            return response
        return shaped(response) if isinstance(response, web.Response) else response

    return route
