"""Admin HTTP routes for the latches: list, reset, expire. Every route needs the admin key.

Kept apart from the client routes because they answer to a different key and a different person
(the operator, not the agent). With no admin key configured the routes answer 403 and say how to
set one, rather than being open.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Protocol

import orjson
from aiohttp import web

from proxy.errors import ProxyError
from proxy.http.auth import bearer, key_matches
from proxy.http.bodies import read_object
from proxy.settings import Settings
from proxy.state.latches import LatchStore
from proxy.state.sync import LatchSync
from proxy.timespec import parse_duration
from proxy.upstreams.client import Upstream


class Operated(Protocol):
    """What the admin routes need of a running proxy (the proxy itself, in practice)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def upstreams(self) -> Mapping[str, Upstream]: ...

    @property
    def store(self) -> LatchStore: ...

    async def save_state(self) -> None: ...

    @property
    def sync(self) -> LatchSync: ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _require_admin(proxy: Operated, request: web.Request) -> Operated:
    key = proxy.settings.admin_key
    if not key:
        raise ProxyError(
            403,
            "Admin routes are off: start latchgate with LATCHGATE_ADMIN_KEY set "
            "(or server.admin_key_env in the config) to use them.",
            code="admin_disabled",
        )
    if not key_matches(bearer(request.headers), (key,)):
        raise ProxyError(
            401,
            "Missing or wrong admin key: send 'Authorization: Bearer <admin key>'.",
            code="invalid_admin_key",
        )
    return proxy


def _eid_for(proxy: Operated, upstream: str | None) -> str | None:
    if upstream is None:
        return None
    if upstream in proxy.upstreams:
        return proxy.upstreams[upstream].endpoint_id
    raise ProxyError(
        404,
        f"No upstream named {upstream!r}; names: {', '.join(proxy.upstreams)}.",
        param="upstream",
        code="unknown_upstream",
    )


async def _params(request: web.Request) -> dict[str, str]:
    params = dict(request.query)
    if request.can_read_body:
        body = await read_object(request, empty=True)
        params.update({k: str(v) for k, v in body.items() if v is not None})
    return params


async def list_latches(proxy: Operated, request: web.Request) -> web.StreamResponse:
    _require_admin(proxy, request)
    names = {u.endpoint_id: u.name for u in proxy.upstreams.values()}
    listing = proxy.store.describe()
    for item in listing:
        item.setdefault("upstream", names.get(item.get("endpoint", ""), ""))
    return web.Response(body=orjson.dumps({"endpoints": listing}), content_type="application/json")


async def reset_latches(proxy: Operated, request: web.Request) -> web.StreamResponse:
    _require_admin(proxy, request)
    params = await _params(request)
    eid = _eid_for(proxy, params.get("upstream"))
    removed = proxy.store.reset(eid, params.get("model"))
    proxy.sync.forgot(eid, params.get("model"))
    await proxy.save_state()
    return web.json_response({"reset": removed})


async def expire_latches(proxy: Operated, request: web.Request) -> web.StreamResponse:
    _require_admin(proxy, request)
    params = await _params(request)
    raw = params.get("older_than")
    if not raw:
        raise ProxyError(
            400, "Say how old: older_than=DURATION such as 7d, 12h or 3600s.", param="older_than"
        )
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise ProxyError(400, str(exc), param="older_than") from None
    now = time.time()
    removed = proxy.store.expire(seconds, now)
    proxy.sync.expired(seconds, now)
    await proxy.save_state()
    return web.json_response({"expired": removed})


def add_admin_routes(
    add: Callable[[str, str, Handler], None],
    guard: Callable[[Handler], Handler],
    proxy: Operated,
) -> None:
    """Add the admin routes with `add(method, path, handler)`, each wrapped by `guard`."""
    add("GET", "/admin/latches", guard(partial(list_latches, proxy)))
    add("POST", "/admin/latches/reset", guard(partial(reset_latches, proxy)))
    add("POST", "/admin/latches/expire", guard(partial(expire_latches, proxy)))
