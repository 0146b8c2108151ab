"""The aiohttp application: the running proxy, its routes, and the front door of every request.

This is where a client's request comes in: it is authenticated, read, parsed, validated and
routed to an upstream here, then handed as a `Job` to the attempt loop (`proxy.path`), which
writes the answer back; once it is over, its metrics and its log line are recorded here. Every
error this module returns is OpenAI-shaped, including those aiohttp raises itself (body too
large, unknown route, wrong method). `Proxy` holds everything a running latchgate owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiohttp import HttpVersion11, web

from proxy.errors import ProxyError, error_response
from proxy.headers import REQUEST_ID_HEADER, header_value
from proxy.http.admin import add_admin_routes
from proxy.http.auth import bearer, key_matches
from proxy.http.bodies import UNREADABLE, parse_object, unreadable
from proxy.http.drain import InFlight
from proxy.http.jobs import JobMaker
from proxy.http.messages import MessagesRoute, anthropic_errors
from proxy.http.protocol import ErrorAnswer
from proxy.http.request_ids import new_request_id
from proxy.http.responses import ResponsesRoute, owner_secret
from proxy.http.routing import Router, merge_listings
from proxy.http.validate import check_chat, check_completion, check_embeddings, check_front_body
from proxy.managed.fleet import Fleet
from proxy.managed.process import ManagedServer, State
from proxy.observe import logs
from proxy.observe.events import RequestEvents
from proxy.observe.managed_metrics import ManagedStats
from proxy.observe.masking import Masker, short_secrets
from proxy.observe.metrics import MemberStats, Metrics
from proxy.path.attempts import Pipeline
from proxy.path.job import Job
from proxy.path.layer import AgentLayer
from proxy.path.usage import token_counts
from proxy.settings import Settings, configured_secrets
from proxy.state.latches import SNAPSHOT_VERSION, LatchStore, endpoint_id
from proxy.state.redis import RedisLatches, RedisPlans, RedisResponses, RedisState
from proxy.state.rescues import MemoryPlans, PlanStore
from proxy.state.responses import MemoryStore, ResponseStore
from proxy.state.snapshots import load_file, save_file, set_aside
from proxy.state.sync import LatchSync, NoSync
from proxy.upstreams.client import Upstream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class MetricsPeers(Protocol):
    """The other processes whose metrics a scrape of this one includes (the workers)."""

    async def merged(self, own: bytes) -> bytes:
        """This process's exposition `own`, with the peers' summed in."""
        ...


class Proxy:
    """Everything a running latchgate holds: upstreams, latches, metrics, the pipeline."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.upstreams: dict[str, Upstream] = {
            u.name: Upstream(u, endpoint_id(u.identity, u.api_key)) for u in settings.upstreams
        }
        self.router = Router((u.name, u.models) for u in settings.upstreams)
        self.metrics = Metrics(model_cap=settings.model_label_cap)
        self.metrics.mask = self.mask
        self.metrics.members.source = self._member_stats
        self.store = LatchStore()
        self.log = logs.get_logger()
        self.fleet = self._fleet(settings)
        masker = Masker(configured_secrets(settings))
        logs.mask_secrets(masker)
        # Latch changes shared with the other workers or replicas: through Redis when a state
        # URL is set, else set before start-up by whoever runs this proxy among other workers
        # (proxy.http.server).
        self.sync: LatchSync = NoSync()
        # The other workers' metrics, merged into a scrape (proxy.http.siblings), when any.
        self.metrics_peers: MetricsPeers | None = None
        bounds = settings.store
        memory = MemoryStore(bounds.max_entries, bounds.max_bytes, bounds.max_age)
        self.responses: ResponseStore = memory
        plans: PlanStore = MemoryPlans()
        if settings.state_url is not None:
            shared = self._shared(settings.state_url)
            self.sync = RedisLatches(shared, self.store, self.merged)
            self.responses = RedisResponses(shared, memory)
            plans = RedisPlans(shared, MemoryPlans())
        self.layer = AgentLayer(self.store, self.upstreams, on_latch=self._latched, plans=plans)
        self.listeners = (self.metrics.on_event,)  # every request's event listeners
        self.pipeline = Pipeline(self.layer, on_attempt=self._count_attempt)
        self.jobs = JobMaker(self.router, self.upstreams, self.listeners, masker)
        self._probe_task: asyncio.Task[None] | None = None
        self.in_flight = InFlight()
        self._save_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._checks: list[asyncio.Task[None]] = []  # the pools' health checks

    @property
    def masker(self) -> Masker:
        """The secrets nothing latchgate sends may carry (kept where every job takes it from)."""
        return self.jobs.masker

    @masker.setter
    def masker(self, masker: Masker) -> None:
        self.jobs.masker = masker

    def mask(self, text: str) -> str:
        """`text` with every configured secret replaced: upstreams echo keys in their errors."""
        return self.masker.text(text)

    def _fleet(self, settings: Settings) -> Fleet | None:
        """The llama-servers latchgate runs itself, each tied to its upstream."""
        if not settings.managed:
            return None
        servers = []
        for config in settings.managed:
            upstream = self.upstreams[config.name]
            assert config.managed is not None  # `settings.managed` holds only these
            servers.append(ManagedServer(config.name, config.managed, self.log, upstream.move_to))
        fleet = Fleet(servers, settings.max_running, self.log)
        for server in servers:
            self.upstreams[server.name].managed = fleet.handle(server.name)
        self.metrics.managed.source = lambda: [_managed_stats(s) for s in servers]
        return fleet

    def _member_stats(self) -> Iterator[MemberStats]:
        for upstream in self.upstreams.values():
            for m in upstream.pool.members if upstream.pool is not None else ():
                yield MemberStats(
                    upstream.name, m.name, m.requests, m.failures, m.in_flight, m.healthy,
                    m.slots, m.affinity_hits, m.affinity_misses, m.prompt_tokens, m.cached_tokens,
                )  # fmt: skip

    def _count_attempt(self, job: Job, status: str) -> None:
        self.metrics.upstream_attempt(
            upstream=job.upstream.name, model=job.events.model, status=status
        )

    def _shared(self, url: str) -> RedisState:
        """The Redis state every shared store goes through, its health on the gauge."""
        metrics = self.metrics
        metrics.state_backend("redis", False)
        return RedisState(
            url,
            self.log,
            on_status=lambda up: metrics.state_backend("redis", up),
            on_error=lambda operation: metrics.state_error("redis", operation),
        )

    def _latched(self, eid: str) -> None:
        self.refresh_latch_gauge()
        self.sync.learned(eid)

    def merged(self) -> None:
        """Latches learned elsewhere were merged into the store: the gauge, and the state file
        (saved off the caller's path: a sync calls this from its listener)."""
        self.refresh_latch_gauge()
        self._background(self.save_state())

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # held, or the task could be collected mid-way
        task.add_done_callback(self._tasks.discard)

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

    async def _health_loop(self, upstream: Upstream) -> None:
        """Check a pool's members every `health_interval`; log each that goes down or up."""
        while True:
            try:
                changes = await upstream.check_members()
            except Exception as exc:  # a bug in a check must not end the checking for good
                self.log.error("member_check", upstream=upstream.name, error=repr(exc))
                changes = []
            for change in changes:
                if change.healthy is not None:
                    say = self.log.info if change.healthy else self.log.warning
                    say(
                        "member_up" if change.healthy else "member_down",
                        upstream=upstream.name,
                        member=change.member.name,
                        detail=self.mask(change.detail),
                    )
            await asyncio.sleep(upstream.config.health_interval)

    async def startup(self, _app: web.Application) -> None:
        if short := short_secrets(configured_secrets(self.settings)):
            self.log.warning(
                "short_secret",
                message=f"{short} configured key(s) are shorter than 8 characters: too short to "
                "be masked in answers without garbling them, and too short to be secret. Use "
                "longer keys.",
            )
        self.load_state()
        await self.sync.start()
        if self.fleet is not None:
            self.fleet.start()
        self._probe_task = asyncio.create_task(self._probe_loop())
        self._checks = [
            asyncio.create_task(self._health_loop(u))
            for u in self.upstreams.values()
            if u.pool is not None
        ]

    async def drain(self, _app: web.Application) -> None:
        """At shutdown, before connections close: let requests finish, within the grace."""
        grace = self.settings.shutdown_grace
        if len(self.in_flight):
            self.log.info("draining", requests=len(self.in_flight), grace_seconds=grace)
        interrupted = await self.in_flight.drain(grace)
        if interrupted:
            self.log.warning(
                "drained",
                message=f"{interrupted} request(s) outlasted the {grace:g} s grace period and "
                "were ended with an error.",
            )

    async def shutdown(self, _app: web.Application) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe_task
        for task in self._checks:
            task.cancel()
        await self.sync.close()
        await asyncio.gather(*self._checks, *self._tasks, return_exceptions=True)
        await self.save_state()
        await self.pipeline.close()
        await asyncio.gather(*(u.close() for u in self.upstreams.values()))
        if self.fleet is not None:
            await self.fleet.close()  # after the drain: requests in flight had their grace


def _managed_stats(server: ManagedServer) -> ManagedStats:
    stats = server.stats
    return ManagedStats(
        server.name, server.state is State.READY, server.running, server.leases, stats.starts,
        stats.restarts, stats.start_failures, dict(stats.stops), stats.load_seconds,
    )  # fmt: skip


PROXY_KEY = web.AppKey("proxy", Proxy)
# The forwarded routes by path (all POST), for `direct_dispatch`.
DIRECT_ROUTES = web.AppKey("direct_routes", dict[str, Handler])


# -- guarding every route ------------------------------------------------------------------
#
# Auth and error handling are done inside the handlers, not as aiohttp middlewares: middlewares
# add three coroutine frames that every resume of the request passes through, and on the chat
# route every microsecond counts (the throughput target is set against a bare relay). The API
# handler guards itself inline; the other routes get one small wrapper.


def _check_key(proxy: Proxy, request: web.Request) -> None:
    keys = proxy.settings.client_keys
    if keys and not key_matches(bearer(request.headers), keys):
        raise ProxyError(
            401,
            "Missing or wrong API key: send one of this proxy's client keys as "
            "'Authorization: Bearer <key>' (or 'x-api-key: <key>').",
            code="invalid_api_key",
        )


def _error_for(proxy: Proxy, request: web.Request, exc: Exception) -> web.Response:
    """Every failure as an OpenAI-shaped answer: never an HTML page or a traceback."""
    if isinstance(exc, ProxyError):
        return exc.response()
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        response = error_response(
            413,
            f"The request body is larger than this proxy accepts ({exc.text or 'limit exceeded'}). "
            "Send a smaller body, or raise server.max_body_bytes.",
            code="request_too_large",
        )
        response.force_close()  # the rest of the body is unread: the connection cannot go on
        return response
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        return error_response(exc.status, exc.reason or "Request failed.")
    # The last line of defence: log it, answer 500 in OpenAI's shape.
    proxy.log.error("unhandled", path=request.path, error=type(exc).__name__, exc_info=exc)
    return _internal_error()


def _internal_error() -> web.Response:
    return error_response(
        500,
        "latchgate hit an internal error handling this request; it was "
        "logged. Retry, and report it if it repeats.",
        type="server_error",
    )


def _guarded(
    proxy: Proxy, handler: Handler, *, needs_key: bool, route: str | None = None
) -> Handler:
    """A non-API route with the client-key check (when `needs_key`), OpenAI-shaped errors and
    the request id; with a `route` label, also counted and logged like the API routes (probes
    of /healthz, /readyz and /metrics are not: they would drown the log)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        rid = new_request_id(request.headers.get("x-request-id"))
        try:
            if needs_key:
                _check_key(proxy, request)
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # redirects and the like are answers, not errors
            response = _error_for(proxy, request, exc)
        except Exception as exc:  # every failure becomes an OpenAI-shaped answer
            response = _error_for(proxy, request, exc)
        response.headers[REQUEST_ID_HEADER] = rid
        if route is not None:
            _record(
                proxy,
                rid,
                route,
                response.status,
                started,
                method=request.method,
                path=header_value(request.path, 200),
            )
        return response

    return guarded


def protocol_answer(proxy: Proxy) -> ErrorAnswer:
    """How the HTTP layer answers what failed before any handler (see `proxy.protocol`): in
    OpenAI's shape, with a request id, counted and logged under the route label `invalid`."""

    def answer(
        request: web.BaseRequest, status: int, exc: BaseException | None, message: str | None
    ) -> web.Response:
        started = time.perf_counter()
        rid = new_request_id(request.headers.get("x-request-id"))
        detail = proxy.mask(" ".join((message or "").split()))[:300]
        if status >= 500:
            proxy.log.error("unhandled", request_id=rid, error=type(exc).__name__, exc_info=exc)
            response = _internal_error()
        else:
            response = _protocol_refusal(status, exc, detail).response()
        response.headers[REQUEST_ID_HEADER] = rid
        _record(proxy, rid, "invalid", response.status, started, error=detail)
        return response

    return answer


def _protocol_refusal(status: int, exc: BaseException | None, detail: str) -> ProxyError:
    name = type(exc).__name__
    if name == "ContentEncodingError" or "content-encoding" in detail.lower():
        return ProxyError(
            415,
            # aiohttp's own advice (install a library) is for the server's operator, not for
            # the client, whose answer is to send another encoding.
            f"latchgate cannot decode this request body ({detail.split('. Please')[0]}). Send "
            "it plain, or gzip- or deflate-encoded with a matching Content-Encoding header.",
            code="unsupported_content_encoding",
        )
    if name == "LineTooLong":
        return ProxyError(
            431,
            f"A request line or header is too long ({detail}). Send shorter headers.",
            code="request_header_too_large",
        )
    return ProxyError(
        status if 400 <= status < 500 else 400,
        f"latchgate could not read this HTTP request ({detail or name}). Send a well-formed "
        "HTTP/1.1 request.",
        code="invalid_http_request",
    )


_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


# Paths under the Messages front: a client there reads only Anthropic's error shape, also for a
# path or method latchgate does not serve (Claude Code's SDK, a batch or a model listing).
_MESSAGES_PATHS = ("/v1/messages", "/messages")


def _unrouted(proxy: Proxy) -> Handler:
    """The catch-all route: 405 for a known path with the wrong method, else 404."""

    async def unrouted(request: web.Request) -> web.StreamResponse:
        allowed: set[str] = set()
        for resource in request.app.router.resources():
            match, methods = await resource.resolve(request)
            if match is None:  # a route for this path, other methods (the catch-all matches)
                allowed |= methods
        if request.path not in _OPEN_PATHS and not request.path.startswith("/admin/"):
            _check_key(proxy, request)  # an unknown path says nothing to a client without a key
        if allowed:
            allow = ", ".join(sorted(allowed))
            raise ProxyError(
                405,
                f"{request.method} is not allowed on {request.path}; use {allow}.",
                code="method_not_allowed",
                headers={"Allow": allow},  # RFC 9110: a 405 says which methods are
            )
        raise ProxyError(
            404,
            f"No route {request.path}; latchgate serves /v1/chat/completions, /v1/responses, "
            "/v1/messages, /v1/completions, /v1/embeddings and /v1/models.",
            code="unknown_url",
        )

    return unrouted


# -- the forwarded routes -------------------------------------------------------------------


def _record(proxy: Proxy, rid: str, route: str, status: int, started: float, **fields: str) -> None:
    """Count and log a request that reached no upstream (refused, unrouted, an admin call)."""
    duration = time.perf_counter() - started
    proxy.metrics.request_done(
        upstream="none",
        model="none",
        route=route,
        stream=False,
        status=status,
        duration=duration,
        overhead=duration,
    )
    events = RequestEvents(request_id=rid, upstream="none", model="none")
    if logs.wanted(status, events):
        extra: dict[str, Any] = {k: proxy.mask(v) for k, v in fields.items()}
        logs.request_line(
            events,
            status=status,
            duration=duration,
            attempts=0,
            route=route,
            stream=False,
            **extra,
        )


def _rejected(
    proxy: Proxy, request: web.Request, rid: str, route: str, exc: Exception
) -> web.Response:
    """A request refused before it reached an upstream: answered, counted and logged."""
    response = _error_for(proxy, request, exc)
    _record(proxy, rid, route, response.status, time.perf_counter())
    response.headers[REQUEST_ID_HEADER] = rid
    return response


def _finished(proxy: Proxy, job: Job) -> None:
    """A job is over (answered, failed or abandoned): its metrics and its log line."""
    name = job.upstream.name
    model = proxy.metrics.model_label(job.events.model)
    proxy.metrics.inflight(name, -1)
    duration = time.perf_counter() - job.started
    overhead = max(0.0, duration - job.upstream_wait)
    status = job.status or 500
    proxy.metrics.request_done(
        upstream=name,
        model=model,
        route=job.label,
        stream=job.stream,
        status=status,
        duration=duration,
        overhead=overhead,
    )
    if job.first_token_at is not None:
        proxy.metrics.first_token(
            upstream=name, model=model, seconds=job.first_token_at - job.started
        )
    tokens = token_counts(job)
    if tokens:
        proxy.metrics.tokens(upstream=name, model=model, **tokens)
    if job.choice is not None:
        _member_done(job, tokens)
    if logs.wanted(status, job.events):
        logs.request_line(
            job.events,
            status=status,
            duration=duration,
            attempts=job.attempts,
            route=job.label,
            stream=job.stream,
            tokens=tokens,
            **_error_field(proxy, job, status),
        )


def _member_done(job: Job, tokens: dict[str, int] | None) -> None:
    """A pooled request is over: its member is free, and its prompt-cache use is counted."""
    choice, pool = job.choice, job.upstream.pool
    if choice is None or pool is None:
        return
    pool.finish(choice)
    member = choice.member
    if tokens:
        member.prompt_tokens += tokens["prompt"]
        member.cached_tokens += tokens["cached"]


def _error_field(proxy: Proxy, job: Job, status: int) -> dict[str, str]:
    error = job.upstream_error
    if status < 400 or not error:
        return {}
    return {"upstream_error": proxy.mask(error)}


class FrontRoute(Protocol):
    """A front's part in its route (`proxy.http.responses`, `proxy.http.messages`): the job for
    a parsed body, what the front does with the answer once the chat path has given it, and its
    shape for an error answered before the job."""

    async def job(
        self, request: web.Request, rid: str, raw: bytes, body: dict[str, Any]
    ) -> Job: ...

    async def answered(
        self, request: web.Request, job: Job, response: web.StreamResponse
    ) -> web.StreamResponse: ...

    def shaped(self, response: web.Response) -> web.Response:
        """An error latchgate answered before the job (OpenAI-shaped) in the front's shape."""
        ...


def _api_route(
    proxy: Proxy,
    route: str,
    path: str,
    check: Callable[[dict[str, Any]], None],
    *,
    whole_only: bool = False,
    front: FrontRoute | None = None,
) -> Handler:
    """The handler of one forwarded route: check the key and the body, route it, run the job
    (a front's route makes its own job, and sees the answer before it goes out).

    Written as one function on purpose (see "guarding every route" above): the request's own
    coroutine is the only frame between aiohttp and the pipeline.
    """
    run = proxy.pipeline.run  # every route, one attempt loop
    make = proxy.jobs.make

    async def handle(request: web.Request) -> web.StreamResponse:
        rid = new_request_id(request.headers.get("x-request-id"))
        try:
            _check_key(proxy, request)
            try:  # read here, not in a helper coroutine: one frame fewer per request
                content = request.content
                if content.is_eof():
                    # The whole body came with the headers (most requests): taken as it is, with
                    # no await (`request.read()` copies it and reads again to see the end).
                    raw = content.read_nowait()
                    limit = request.client_max_size
                    if limit and len(raw) > limit:
                        raise web.HTTPRequestEntityTooLarge(limit, len(raw))
                else:
                    raw = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise
            except UNREADABLE as exc:
                raise unreadable(exc) from None
            body = parse_object(raw)
            check(body)
            if front is None:
                job = make(request, rid, route, path, raw, body)
            else:
                job = await front.job(request, rid, raw, body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every refusal is an OpenAI-shaped answer (or the front's)
            rejected = _rejected(proxy, request, rid, route, exc)
            return rejected if front is None else front.shaped(rejected)
        if whole_only:
            job.stream = False
        proxy.metrics.inflight(job.upstream.name, 1)
        task = asyncio.current_task(proxy.pipeline.deadlines.loop())  # no getpid() with a loop
        proxy.in_flight.add(task, job)
        try:
            if front is None:
                return await run(request, job)
            return await front.answered(request, job, await run(request, job))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: logged, answered 500 (the job is counted)
            job.status = 500
            response = _error_for(proxy, request, exc)
            if job.response is not None and job.response.prepared:
                return job.response  # its headers went out: no second answer on the wire
            response.headers[REQUEST_ID_HEADER] = rid
            return response if front is None else front.shaped(response)
        finally:
            proxy.in_flight.discard(task)
            _finished(proxy, job)
            if job.negotiation.latched:
                await proxy.save_state()

    return handle


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
    if proxy.metrics_peers is not None:
        body = await proxy.metrics_peers.merged(body)
    if proxy.fleet is not None:  # the managed llama-servers' own metrics, under their names
        body += (await proxy.fleet.exposition()).encode()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = ctype
    return resp


def direct_dispatch(
    direct: dict[str, Handler], fallback: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    """The server's request handler: forwarded routes by one dict lookup, the rest by the router.

    aiohttp's application handler resolves every request through the router and then awaits the
    route's handler from a coroutine of its own, a frame that every resume of the request passes
    through. The forwarded routes are a few fixed POST paths whose handlers need nothing from the
    match (they close over the proxy), so they are looked up here and their coroutine handed to
    aiohttp as it is. Anything else (another method, a path with variables, an unknown path, an
    `Expect: 100-continue` that aiohttp's own handler answers) takes the usual way.
    """

    def dispatch(request: web.BaseRequest) -> Awaitable[web.StreamResponse]:
        handler = direct.get(request.rel_url.path_safe)
        if handler is None or request.method != "POST" or "Expect" in request.headers:
            return fallback(request)
        # The application's request factory makes every request a `web.Request`.
        return handler(request)  # type: ignore[arg-type]

    return dispatch


def _expect_handler(proxy: Proxy) -> Callable[[web.Request], Awaitable[web.Response | None]]:
    """`Expect: 100-continue` answered as aiohttp does; any other expectation refused in OpenAI's
    shape (aiohttp's own refusal is a plain-text 417)."""

    async def expect(request: web.Request) -> web.Response | None:
        value = request.headers.get("Expect", "")
        if request.version != HttpVersion11:
            return None  # HTTP/1.0 has no Expect: the request goes on as it is
        if value.lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # the answer proper has not begun
            return None
        rid = new_request_id(request.headers.get("x-request-id"))
        response = ProxyError(
            417,
            f"Unknown expectation 'Expect: {header_value(value, 100)}'; send "
            "'Expect: 100-continue' or no Expect header.",
            code="expectation_failed",
        ).response()
        response.headers[REQUEST_ID_HEADER] = rid
        _record(proxy, rid, "invalid", 417, time.perf_counter())
        return response

    return expect


def create_app(settings: Settings) -> web.Application:
    """Build the aiohttp application for `settings` (not started)."""

    app = web.Application(client_max_size=settings.max_body_bytes)
    proxy = Proxy(settings)
    app[PROXY_KEY] = proxy
    expect = _expect_handler(proxy)

    def add(method: str, path: str, handler: Handler) -> None:
        app.router.add_route(method, path, handler, expect_handler=expect)

    direct: dict[str, Handler] = {}
    secret = owner_secret(settings.client_keys)
    responses = ResponsesRoute(proxy.jobs, proxy.responses, settings.keepalive, secret)
    messages = MessagesRoute(proxy.jobs, proxy.layer.count_tokens, settings.keepalive)
    count = anthropic_errors(
        _guarded(proxy, messages.count_tokens(), needs_key=True, route="messages")
    )
    for prefix in ("/v1", ""):
        direct[f"{prefix}/responses"] = _api_route(
            proxy, "responses", "/responses", check_front_body, front=responses
        )
        direct[f"{prefix}/messages"] = _api_route(
            proxy, "messages", "/messages", check_front_body, front=messages
        )
        add("POST", f"{prefix}/messages/count_tokens", count)
        for (method, path), handler in responses.handlers().items():
            add(method, prefix + path, _guarded(proxy, handler, needs_key=True, route="responses"))
        direct[f"{prefix}/chat/completions"] = _api_route(
            proxy, "chat", "/chat/completions", check_chat
        )
        direct[f"{prefix}/completions"] = _api_route(
            proxy, "completions", "/completions", check_completion
        )
        direct[f"{prefix}/embeddings"] = _api_route(
            proxy, "embeddings", "/embeddings", check_embeddings, whole_only=True
        )
        models = _guarded(proxy, list_models, needs_key=True, route="models")
        add("GET", f"{prefix}/models", models)
        model = _guarded(proxy, get_model, needs_key=True, route="models")
        add("GET", f"{prefix}/models/{{model_id:.+}}", model)
    for path, handler in direct.items():
        add("POST", path, handler)  # also routed, for `create_app` served without the fast path
    app[DIRECT_ROUTES] = direct
    # Claude Code probes the root (HEAD /) before its first request.
    root = _guarded(proxy, healthz, needs_key=False)
    add("GET", "/", root)
    add("HEAD", "/", root)
    add("GET", "/healthz", _guarded(proxy, healthz, needs_key=False))
    add("GET", "/readyz", _guarded(proxy, readyz, needs_key=False))
    add("GET", "/metrics", _guarded(proxy, metrics_route, needs_key=False))
    # Admin routes check the admin key themselves.
    add_admin_routes(
        add, lambda handler: _guarded(proxy, handler, needs_key=False, route="admin"), proxy
    )
    # Last: whatever no route above matched (registered after them, so it never shadows one).
    # `[\s\S]`, not `.`: a path holding an (encoded) line break must reach it too.
    unrouted = _guarded(proxy, _unrouted(proxy), needs_key=False, route="unrouted")
    add("*", r"/{tail:[\s\S]*}", anthropic_errors(unrouted, only=_MESSAGES_PATHS))
    app.on_startup.append(proxy.startup)
    app.on_shutdown.append(proxy.drain)
    app.on_cleanup.append(proxy.shutdown)
    return app
