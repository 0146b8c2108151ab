"""The aiohttp application: routes, client auth, body limits, OpenAI-shaped errors, request ids.

This is the only module that talks to clients. It parses and validates what they send, picks the
upstream, hands a `Job` to the pipeline and records the outcome (metrics and the request's log
line). Every error it returns is OpenAI-shaped, whatever went wrong, including errors aiohttp
raises itself (body too large, unknown route, wrong method).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web, web_protocol

from . import logs
from .capabilities import SNAPSHOT_VERSION, LatchStore, endpoint_id
from .config import Settings
from .errors import ProxyError, error_response
from .events import RequestEvents
from .layer import AgentLayer
from .metrics import Metrics
from .pipeline import REQUEST_ID_HEADER, Job, Pipeline, new_request_id
from .routing import Router, merge_listings
from .snapshots import load_file, save_file, set_aside
from .upstream import Upstream
from .validate import check_chat, check_completion, check_embeddings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Proxy:
    """Everything a running latchgate holds: upstreams, latches, metrics, the pipeline."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.upstreams: dict[str, Upstream] = {
            u.name: Upstream(u, endpoint_id(u.base_url, u.api_key)) for u in settings.upstreams
        }
        self.router = Router((u.name, u.models) for u in settings.upstreams)
        self.metrics = Metrics(model_cap=settings.model_label_cap)
        self.store = LatchStore()
        self.log = logs.get_logger()
        self.layer = AgentLayer(self)
        self.pipeline = Pipeline(self.layer, on_attempt=self._count_attempt)
        self._probe_task: asyncio.Task[None] | None = None
        self._save_lock = asyncio.Lock()

    def mask(self, text: str) -> str:
        """`text` with every configured key replaced: upstreams echo keys in their errors."""
        secrets = [u.api_key for u in self.settings.upstreams if u.api_key]
        secrets += self.settings.client_keys
        if self.settings.admin_key:
            secrets.append(self.settings.admin_key)
        for secret in secrets:
            if len(secret) >= 4:
                text = text.replace(secret, "[REDACTED]")
        return text

    def _count_attempt(self, job: Job, status: str) -> None:
        self.metrics.upstream_attempt(
            upstream=job.upstream.name, model=job.events.model, status=status
        )

    # -- latches persistence --------------------------------------------------------------
    def load_state(self) -> None:
        path = self.settings.state_file
        if path is None:
            return
        data, warnings = load_file(path)
        if data is not None and data.get("version") != SNAPSHOT_VERSION:
            # Another version's file: ignored, and kept aside so our next save cannot lose it.
            why = f"version {data.get('version')!r}, this latchgate writes {SNAPSHOT_VERSION}"
            warnings.append(set_aside(path, why, tag="foreign"))
            data = None
        for warning in warnings:
            self.log.warning("state_file", message=warning, path=str(path))
        if data is not None:
            for warning in self.store.merge_snapshot(data):
                self.log.warning("state_file", message=warning, path=str(path))
        self.refresh_latch_gauge()

    async def save_state(self) -> None:
        path: Path | None = self.settings.state_file
        self.refresh_latch_gauge()
        if path is None:
            return
        async with self._save_lock:
            snapshot = self.store.to_snapshot()
            try:
                await asyncio.to_thread(save_file, path, snapshot)
            except OSError as exc:
                self.log.error(
                    "state_file", message=f"could not save latches: {exc}", path=str(path)
                )

    def refresh_latch_gauge(self) -> None:
        names = {u.endpoint_id: u.name for u in self.upstreams.values()}
        held: dict[tuple[str, str], int] = {}
        for (who, capability), count in self.store.held().items():
            # `who` is the upstream's name, or the endpoint id of an unnamed (imported) entry
            key = (names.get(who, who if len(who) != 64 else who[:12]), capability)
            held[key] = held.get(key, 0) + count
        self.metrics.set_latches(held)

    # -- probes ---------------------------------------------------------------------------
    async def probe_all(self) -> None:
        await asyncio.gather(*(u.probe() for u in self.upstreams.values()))

    async def _probe_loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.probe_all()
            await asyncio.sleep(self.settings.probe_interval)

    async def startup(self, _app: web.Application) -> None:
        self.load_state()
        self._probe_task = asyncio.create_task(self._probe_loop())

    async def shutdown(self, _app: web.Application) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe_task
        await self.save_state()
        await asyncio.gather(*(u.close() for u in self.upstreams.values()))


PROXY_KEY = web.AppKey("proxy", Proxy)


# -- middleware ---------------------------------------------------------------------------


def _bearer(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key") or request.headers.get("api-key")


def _key_ok(given: str | None, keys: list[str]) -> bool:
    if not given:
        return False
    ok = False
    for key in keys:  # compare with every key, in constant time, so timing says nothing
        ok |= hmac.compare_digest(given.encode(), key.encode())
    return ok


_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every error into an OpenAI-shaped one: never an HTML page or a traceback."""
    try:
        return await handler(request)
    except asyncio.CancelledError:
        raise
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects and the like are answers, not errors
        response = _error_for(request, exc)
    except Exception as exc:  # every failure becomes an OpenAI-shaped answer
        response = _error_for(request, exc)
    if not request.get(_JOB_RAN):  # a job that ran has been counted and logged already
        _record_rejected(request, response.status)
    response.headers[REQUEST_ID_HEADER] = _request_id(request)
    return response


_JOB_RAN = web.RequestKey("latchgate_job_ran", bool)
_REQUEST_ID = web.RequestKey("latchgate_request_id", str)


def _request_id(request: web.Request) -> str:
    """This request's id: the client's own when sane, else a fresh one; the same all along."""
    rid = request.get(_REQUEST_ID)
    if rid is None:
        rid = request[_REQUEST_ID] = new_request_id(request.headers.get("x-request-id"))
    return str(rid)


def _error_for(request: web.Request, exc: Exception) -> web.Response:
    if isinstance(exc, ProxyError):
        return exc.response()
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return error_response(
            413,
            f"The request body is larger than this proxy accepts ({exc.text or 'limit exceeded'}). "
            "Send a smaller body, or raise server.max_body_bytes.",
            code="request_too_large",
        )
    if isinstance(exc, web.HTTPNotFound):
        return error_response(
            404,
            f"No route {request.path}; latchgate serves /v1/chat/completions, "
            "/v1/completions, /v1/embeddings and /v1/models.",
            code="unknown_url",
        )
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return error_response(
            405,
            f"{request.method} is not allowed on {request.path}; use "
            f"{', '.join(sorted(exc.allowed_methods))}.",
            code="method_not_allowed",
        )
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        return error_response(exc.status, exc.reason or "Request failed.")
    # The last line of defence: log it, answer 500 in OpenAI's shape.
    proxy = request.app[PROXY_KEY]
    proxy.log.error("unhandled", path=request.path, error=type(exc).__name__, exc_info=exc)
    return error_response(
        500,
        "latchgate hit an internal error handling this request; it was "
        "logged. Retry, and report it if it repeats.",
        type="server_error",
    )


_API_ROUTES = {"chat/completions": "chat", "completions": "completions", "embeddings": "embeddings"}


def _record_rejected(request: web.Request, status: int) -> None:
    """Requests refused before they reached an upstream still get a log line and a count."""
    route = _API_ROUTES.get(request.path.removeprefix("/v1").strip("/"))
    if route is None:
        return
    proxy = request.app[PROXY_KEY]
    proxy.metrics.request_done(
        upstream="none",
        model="none",
        route=route,
        stream=False,
        status=status,
        duration=0.0,
        overhead=0.0,
    )
    events = RequestEvents(request_id=_request_id(request), upstream="none", model="none")
    logs.request_line(events, status=status, duration=0.0, attempts=0, route=route, stream=False)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    if request.path in _OPEN_PATHS or request.path.startswith("/admin/"):
        return await handler(request)
    keys = proxy.settings.client_keys
    if keys and not _key_ok(_bearer(request), keys):
        raise ProxyError(
            401,
            "Missing or wrong API key: send one of this proxy's client keys as "
            "'Authorization: Bearer <key>'.",
            code="invalid_api_key",
        )
    return await handler(request)


# -- handlers -----------------------------------------------------------------------------


async def _read_json(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise
    except (
        ValueError,
        UnicodeError,
        OSError,
        aiohttp.ClientPayloadError,
        web_protocol.RequestPayloadError,
    ) as exc:
        raise ProxyError(
            400,
            f"Could not read the request body ({type(exc).__name__}); send "
            "plain or gzip-encoded JSON.",
            code="invalid_body",
        ) from None
    if not raw.strip():
        raise ProxyError(400, "The request body is empty; send a JSON object.", code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProxyError(
            400,
            f"The request body is not valid UTF-8 JSON ({exc}). Send a JSON object.",
            code="invalid_json",
        ) from None
    if not isinstance(body, dict):
        raise ProxyError(
            400,
            f"The request body must be a JSON object, not a {type(body).__name__}.",
            code="invalid_json",
        )
    return raw, body


def _job(request: web.Request, route: str, path: str, raw: bytes, body: dict[str, Any]) -> Job:
    proxy = request.app[PROXY_KEY]
    model = body["model"]
    name = proxy.router.route(model)
    if name is None:
        raise ProxyError(
            404,
            f"The model {model!r} does not exist here: no upstream serves it. "
            "GET /v1/models lists the models this proxy can route.",
            type="invalid_request_error",
            param="model",
            code="model_not_found",
        )
    upstream = proxy.upstreams[name]
    events = RequestEvents(
        request_id=_request_id(request),
        upstream=name,
        model=model,
        listeners=[proxy.metrics.on_event],
    )
    return Job(
        upstream=upstream,
        route=route,
        path=path,
        raw=raw,
        body=body,
        stream=body.get("stream") is True,
        events=events,
        client_auth=request.headers.get("Authorization"),
    )


async def _run(
    request: web.Request, job: Job, runner: Callable[[], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    request[_JOB_RAN] = True
    name = job.upstream.name
    model = proxy.metrics.model_label(job.events.model)
    proxy.metrics.inflight(name, 1)
    try:
        return await runner()
    finally:
        proxy.metrics.inflight(name, -1)
        duration = time.perf_counter() - job.started
        overhead = max(0.0, duration - job.upstream_wait)
        status = job.status or 500
        proxy.metrics.request_done(
            upstream=name,
            model=model,
            route=job.route,
            stream=job.stream,
            status=status,
            duration=duration,
            overhead=overhead,
        )
        if job.first_token_at is not None:
            proxy.metrics.first_token(
                upstream=name, model=model, seconds=job.first_token_at - job.started
            )
        tokens = _token_counts(job.usage, job.state.get("cache_n"))
        if tokens:
            proxy.metrics.tokens(upstream=name, model=model, **tokens)
        logs.request_line(
            job.events,
            status=status,
            duration=duration,
            attempts=job.attempts,
            route=job.route,
            stream=job.stream,
            tokens=tokens,
            **_error_field(proxy, job, status),
        )
        if job.state.get("latched"):
            await proxy.save_state()


def _error_field(proxy: Proxy, job: Job, status: int) -> dict[str, str]:
    error = job.state.get("upstream_error")
    if status < 400 or not error:
        return {}
    return {"upstream_error": proxy.mask(error)}


def _token_counts(usage: dict[str, Any] | None, cache_n: Any = None) -> dict[str, int] | None:
    """Prompt, completion and cached tokens from a usage report (cached: OpenAI's details,
    DeepSeek's cache hits, else llama.cpp's `timings.cache_n`)."""
    if not isinstance(usage, dict):
        return None

    def num(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    cached = 0
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        cached = num(details.get("cached_tokens"))
    cached = cached or num(usage.get("prompt_cache_hit_tokens")) or num(cache_n)
    return {
        "prompt": num(usage.get("prompt_tokens")),
        "completion": num(usage.get("completion_tokens")),
        "cached": cached,
    }


def _api_route(
    route: str, path: str, check: Callable[[dict[str, Any]], None], *, whole_only: bool = False
) -> Handler:
    """A handler for one forwarded route: read and check the body, route it, run the job."""

    async def handle(request: web.Request) -> web.StreamResponse:
        raw, body = await _read_json(request)
        check(body)
        job = _job(request, route, path, raw, body)
        if whole_only:
            job.stream = False
        proxy = request.app[PROXY_KEY]
        if route == "chat":
            return await _run(request, job, lambda: proxy.pipeline.run(request, job))
        return await _run(request, job, lambda: proxy.pipeline.relay_raw(request, job))

    return handle


chat_completions = _api_route("chat", "/chat/completions", check_chat)
completions = _api_route("completions", "/completions", check_completion)
embeddings = _api_route("embeddings", "/embeddings", check_embeddings, whole_only=True)


async def _listing(proxy: Proxy) -> list[dict[str, Any]]:
    stale = [
        u
        for u in proxy.upstreams.values()
        if not u.listing or time.monotonic() - u.listing_at > proxy.settings.probe_interval
    ]
    if stale:
        await asyncio.gather(*(u.probe() for u in stale))
    windows = proxy.layer.known_windows()
    return merge_listings(
        ((u.name, u.listing) for u in proxy.upstreams.values()), proxy.router, windows
    )


async def list_models(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    data = await _listing(proxy)
    return web.Response(
        body=orjson.dumps({"object": "list", "data": data}), content_type="application/json"
    )


async def get_model(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    model_id = request.match_info["model_id"]
    for item in await _listing(proxy):
        if item["id"] == model_id:
            return web.Response(body=orjson.dumps(item), content_type="application/json")
    raise ProxyError(
        404,
        f"The model {model_id!r} does not exist here. GET /v1/models lists the "
        "models this proxy can route.",
        param="model",
        code="model_not_found",
    )


async def healthz(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    if any(u.last_probe is None for u in proxy.upstreams.values()):
        await proxy.probe_all()
    upstreams = {
        u.name: {"ready": u.ready, "error": u.last_probe_error} for u in proxy.upstreams.values()
    }
    ready = all(u.ready for u in proxy.upstreams.values())
    return web.Response(
        status=200 if ready else 503,
        content_type="application/json",
        body=orjson.dumps({"status": "ready" if ready else "not ready", "upstreams": upstreams}),
    )


async def metrics_route(request: web.Request) -> web.StreamResponse:
    proxy = request.app[PROXY_KEY]
    proxy.refresh_latch_gauge()
    body, ctype = proxy.metrics.render()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = ctype
    return resp


def create_app(settings: Settings) -> web.Application:
    """Build the aiohttp application for `settings` (not started)."""
    from .admin import add_admin_routes

    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[error_middleware, auth_middleware],
    )
    proxy = Proxy(settings)
    app[PROXY_KEY] = proxy
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", chat_completions)
        app.router.add_post(f"{prefix}/completions", completions)
        app.router.add_post(f"{prefix}/embeddings", embeddings)
        app.router.add_get(f"{prefix}/models", list_models)
        app.router.add_get(f"{prefix}/models/{{model_id:.+}}", get_model)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_route)
    add_admin_routes(app)
    app.on_startup.append(proxy.startup)
    app.on_cleanup.append(proxy.shutdown)
    return app
