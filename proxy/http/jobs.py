"""Making a job: a parsed request routed to its upstream, with its events and its masker.

Every forwarded route (and every front) makes its jobs here, so routing a model name, the
"no such model" answer and what a job's answer must never carry are decided in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from proxy import knowntools
from proxy.errors import ProxyError, too_deep_to_send
from proxy.headers import CONTEXT_HEADER
from proxy.http.auth import bearer
from proxy.http.routing import Router
from proxy.observe.events import Listener, RequestEvents
from proxy.observe.masking import Masker
from proxy.path.job import Job
from proxy.settings import OVERFLOW_MODES
from proxy.upstreams.client import Upstream


class JobMaker:
    """Routes requests and makes their jobs."""

    def __init__(
        self,
        router: Router,
        upstreams: Mapping[str, Upstream],
        listeners: tuple[Listener, ...],
        masker: Masker,
    ) -> None:
        self.router = router
        self.upstreams = upstreams
        self.listeners = listeners
        self.masker = masker

    def upstream_for(self, model: str) -> Upstream:
        """The upstream serving `model`; a 404 the SDK reads as "model not found" if none."""
        name = self.router.route(model)
        if name is None:
            raise ProxyError(
                404,
                f"The model {model!r} does not exist here: no upstream serves it. "
                "GET /v1/models lists the models this proxy can route.",
                type="invalid_request_error",
                param="model",
                code="model_not_found",
            )
        return self.upstreams[name]

    async def detected(self, model: str) -> Upstream:
        """The upstream serving `model`, its kind known (a front's translation depends on it)."""
        upstream = self.upstream_for(model)
        if not upstream.kind_detected:
            await upstream.detect_kind()
        return upstream

    def chat(self, request: web.Request, rid: str, chat: dict[str, Any], upstream: Upstream) -> Job:
        """The chat job for a front's translated request; a 400 when it cannot be written."""
        try:
            raw = knowntools.dumps(chat)  # an agent's translated tools: their stored bytes
        except orjson.JSONEncodeError:  # a tool schema nested deeper than orjson writes, say
            raise too_deep_to_send() from None
        return self.make(request, rid, "chat", "/chat/completions", raw, chat, upstream)

    def make(
        self,
        request: web.Request,
        rid: str,
        route: str,
        path: str,
        raw: bytes,
        body: dict[str, Any],
        upstream: Upstream | None = None,
    ) -> Job:
        """The job for `body` (already checked), sent to `upstream` or the one its model routes
        to."""
        model = body["model"]
        upstream = upstream or self.upstream_for(model)
        events = RequestEvents(
            request_id=rid, upstream=upstream.name, model=model, listeners=self.listeners
        )
        key = bearer(request.headers)  # `Authorization: Bearer`, or `x-api-key` (Anthropic's)
        client_auth = None if key is None else f"Bearer {key}"
        masker = self.masker
        if upstream.config.forward_client_auth and key:
            masker = masker.with_secret(key)  # what is sent on its behalf
        job = Job(
            upstream=upstream,
            route=route,
            path=path,
            raw=raw,
            body=body,
            stream=body.get("stream") is True,
            events=events,
            client_auth=client_auth,
            masker=masker,
        )
        asked = request.headers.get(CONTEXT_HEADER)
        if asked is not None:
            job.rescue.mode = _context_mode(asked)
        return job


def _context_mode(asked: str) -> str:
    """The client's `x-latchgate-context`: how a request over the window is handled."""
    mode = asked.strip().lower()
    if mode not in OVERFLOW_MODES:
        raise ProxyError(
            400,
            f"The {CONTEXT_HEADER} header must be one of {', '.join(OVERFLOW_MODES)} (how a "
            "request over the model's context window is handled); leave it out to use the "
            "upstream's on_overflow setting.",
            param=CONTEXT_HEADER,
            code="invalid_value",
        )
    return mode
