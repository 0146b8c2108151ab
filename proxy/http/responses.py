"""The Responses API routes: `POST /v1/responses` onto the chat path, and the stored responses.

`POST` is a front's route (`proxy.http.app.FrontRoute`): its body is translated
(`proxy.fronts.responses`) after what it refers to is read from the store (the previous
response's history, `item_reference`s), run as a chat job, and its final response stored. An
upstream set to `responses = "passthrough"` (OpenAI's own API, by default) gets the body as it
came on its own `/responses`, with latchgate's auth, retries, metrics and logs.

`GET /v1/responses/{id}`, `GET .../input_items` and `DELETE` read the store, where a response is
visible only to the client key that made it; ids the store does not hold are asked of the
passthrough upstreams, which keep their own.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.errors import ProxyError
from proxy.fronts.common import Options
from proxy.fronts.responses.front import ResponsesFront
from proxy.fronts.responses.items import identified
from proxy.fronts.responses.output import Context
from proxy.fronts.responses.request import as_items, translate
from proxy.http.auth import bearer
from proxy.http.jobs import JobMaker
from proxy.observe import events as ev
from proxy.path import client as out
from proxy.path.job import Job
from proxy.path.sse import frame
from proxy.state.responses import ResponseStore, StoredResponse
from proxy.upstreams.client import Upstream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def passes_through(upstream: Upstream) -> bool:
    """Whether /v1/responses goes to the upstream's own Responses API: as configured, and by
    default for OpenAI's API (where encrypted reasoning and hosted tools matter)."""
    mode = upstream.config.responses
    return mode == "passthrough" or (mode == "auto" and upstream.kind == "openai")


def owner_secret(client_keys: list[str]) -> bytes:
    """The key of the owner digests: made from this proxy's client keys, which every replica
    sharing a store has (so they agree on owners) and whoever reads the store does not (so a
    digest there cannot be tried against guessed keys, as a plain hash could). Changing the
    client keys orphans what was stored before, as a new key sees nothing of an old one's."""
    material = "\0".join(sorted(client_keys)).encode("utf-8", "surrogateescape")
    return hashlib.sha256(b"latchgate owner\0" + material).digest()


def owner_of(request: web.Request, secret: bytes) -> str:
    """Whose stored responses a request may see: an HMAC of its key (no key is ever kept)."""
    key = (bearer(request.headers) or "").encode("utf-8", "surrogateescape")
    return hmac.new(secret, key, hashlib.sha256).hexdigest()


def not_found(response_id: str) -> ProxyError:
    """OpenAI's answer for an id it does not have (a foreign one looks exactly the same)."""
    return ProxyError(
        404, f"Response with id '{response_id}' not found.", type="invalid_request_error"
    )


class ResponsesRoute:
    """`POST /v1/responses`: the job for a body, and the store after the answer."""

    def __init__(
        self, jobs: JobMaker, store: ResponseStore, keepalive: float, secret: bytes
    ) -> None:
        self.jobs = jobs
        self.store = store
        self.keepalive = keepalive
        self.secret = secret  # of the owner digests (`owner_secret`)

    async def job(self, request: web.Request, rid: str, raw: bytes, body: dict[str, Any]) -> Job:
        upstream = await self.jobs.detected(body["model"])
        if passes_through(upstream):
            return self.jobs.make(request, rid, "responses", "/responses", raw, body, upstream)
        history, items = await self._stored_input(request, body)
        resolved = {**body, "input": items} if "input" in body else body
        options = Options.for_kind(upstream.kind)
        translated = translate(resolved, history, options, openai=upstream.kind == "openai")
        job = self.jobs.chat(request, rid, translated.chat, upstream)
        ctx = Context(body["model"], translated.echo, translated.tools,
                      translated.encrypted_reasoning)  # fmt: skip
        front = job.front = ResponsesFront(ctx, translated.store, keepalive=self.keepalive)
        if front.store:  # what only storing needs (Codex, the busiest client, stores nothing)
            front.owner = owner_of(request, self.secret)
            front.input_items = [*history, *identified(items)]
        for notice in translated.notices:
            job.events.emit(ev.INFO, notice)
        return job

    async def _stored_input(
        self, request: web.Request, body: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[Any]]:
        """The previous response's history and the input with its references resolved."""
        items = as_items(body.get("input"))
        references = any(isinstance(i, dict) and _is_reference(i) for i in items)
        if body.get("previous_response_id") is None and not references:
            return [], items  # the usual request: nothing to read from the store
        owner = owner_of(request, self.secret)
        return await self._history(owner, body), await self._resolved(owner, items)

    async def _history(self, owner: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        previous = body.get("previous_response_id")
        if previous is None:
            return []
        if not isinstance(previous, str):
            raise ProxyError(400, "'previous_response_id' must be a string.",
                             param="previous_response_id", code="invalid_value")  # fmt: skip
        stored = await self.store.get(owner, previous)
        if stored is None:
            raise ProxyError(
                400,
                f"Previous response with id '{previous}' not found.",
                type="invalid_request_error",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return stored.items()

    async def _resolved(self, owner: str, items: list[Any]) -> list[Any]:
        """The input with every `item_reference` replaced by the stored item it names."""
        resolved: list[Any] = []
        for i, item in enumerate(items):
            if isinstance(item, dict) and _is_reference(item):
                found = await self.store.item(owner, item["id"]) if isinstance(
                    item.get("id"), str) else None  # fmt: skip
                if found is None:
                    raise ProxyError(400, f"input[{i}] refers to item {item.get('id')!r}, which "
                                     "is not stored here (or belongs to another key).",
                                     param=f"input[{i}].id", code="invalid_value")  # fmt: skip
                item = found
            resolved.append(item)
        return resolved

    async def answered(
        self, request: web.Request, job: Job, response: web.StreamResponse
    ) -> web.StreamResponse:
        front = job.front
        if not isinstance(front, ResponsesFront):
            return response  # passthrough: the upstream's own answer
        if job.stream and not response.prepared and _overflow(response):
            # Codex knows an overflow only as a response.failed in the stream (it then compacts
            # its history); as an HTTP 400 it would show an error and stop.
            assert isinstance(response, web.Response) and isinstance(response.body, bytes)
            stream = await out.open_stream(request, job)
            await out.end(stream, frame(response.body))
            response = stream
        final = front.final
        if front.store and final is not None:
            await self.store.put(StoredResponse(front.owner, final, front.input_items))
        return response

    @staticmethod
    def shaped(response: web.Response) -> web.Response:
        return response  # the Responses API's errors are OpenAI's

    # -- the stored responses ------------------------------------------------------------------

    def handlers(self) -> dict[tuple[str, str], Handler]:
        """The store's routes by (method, path below /v1)."""

        async def get(request: web.Request) -> web.StreamResponse:
            stored = await self._stored(request)
            if isinstance(stored, web.StreamResponse):
                return stored
            if request.query.get("stream") == "true":
                raise ProxyError(400, "This response was not made in the background, so it "
                                 "cannot be streamed again; GET it without stream.",
                                 param="stream", code="invalid_value")  # fmt: skip
            return web.json_response(stored.response, dumps=_dumps)

        async def input_items(request: web.Request) -> web.StreamResponse:
            stored = await self._stored(request)
            if isinstance(stored, web.StreamResponse):
                return stored
            return web.json_response(item_page(stored.input_items, request.query), dumps=_dumps)

        async def delete(request: web.Request) -> web.StreamResponse:
            response_id = request.match_info["response_id"]
            if await self.store.delete(owner_of(request, self.secret), response_id):
                body = {"id": response_id, "object": "response", "deleted": True}
                return web.json_response(body, dumps=_dumps)
            forwarded = await self._forward(request)
            if forwarded is None:
                raise not_found(response_id)
            return forwarded

        async def cancel(request: web.Request) -> web.StreamResponse:
            raise ProxyError(400, "Only background responses can be cancelled, and latchgate "
                             "makes none.", code="invalid_value")  # fmt: skip

        return {
            ("GET", "/responses/{response_id}"): get,
            ("DELETE", "/responses/{response_id}"): delete,
            ("GET", "/responses/{response_id}/input_items"): input_items,
            ("POST", "/responses/{response_id}/cancel"): cancel,
        }

    async def _stored(self, request: web.Request) -> StoredResponse | web.StreamResponse:
        response_id = request.match_info["response_id"]
        stored = await self.store.get(owner_of(request, self.secret), response_id)
        if stored is not None:
            return stored
        forwarded = await self._forward(request)
        if forwarded is None:
            raise not_found(response_id)
        return forwarded

    async def _forward(self, request: web.Request) -> web.Response | None:
        """Ask the passthrough upstreams that get the client's own key for an id the store
        does not hold (they keep their own, scoped to that key); None if none has it. An
        upstream that cannot be asked is a 502.

        Upstreams called with latchgate's own key are not asked: every client key would reach
        every response stored under it. The path is rebuilt from a checked id, never taken from
        the request (`..%2Ffiles` would otherwise reach another route with that key).
        """
        response_id = request.match_info["response_id"]
        if not _ID.fullmatch(response_id):
            return None
        tail = "/input_items" if request.path.endswith("/input_items") else ""
        client_auth = _client_auth(request)
        unreachable: list[str] = []
        for upstream in self.jobs.upstreams.values():
            if not upstream.kind_detected:
                await upstream.detect_kind()
            if not passes_through(upstream) or not upstream.sends_client_key(client_auth):
                continue
            try:
                status, raw, ctype = await upstream.request(
                    request.method,
                    f"/responses/{response_id}{tail}",
                    request.query_string,
                    client_auth=client_auth,
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                unreachable.append(f"{upstream.name} ({type(exc).__name__})")
                continue
            if status != 404:
                body = self.jobs.masker.bytes(raw)
                return web.Response(status=status, body=body, content_type=ctype)
        if unreachable:
            raise ProxyError(
                502,
                "latchgate does not hold this response and could not ask "
                f"{', '.join(unreachable)}, which keeps its own. Retry later.",
                code="upstream_unreachable",
            )
        return None


_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def _client_auth(request: web.Request) -> str | None:
    key = bearer(request.headers)
    return None if key is None else f"Bearer {key}"


def _is_reference(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind == "item_reference" or (kind is None and "role" not in item and "id" in item)


def _overflow(response: web.StreamResponse) -> bool:
    body = response.body if isinstance(response, web.Response) else None
    return response.status == 400 and isinstance(body, bytes) and b"context_length_exceeded" in body


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def item_page(items: list[dict[str, Any]], query: Any) -> dict[str, Any]:
    """One page of a response's input items, as `GET .../input_items` lists them."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ProxyError(400, "order must be asc or desc.", param="order", code="invalid_value")
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise ProxyError(400, "limit must be a whole number from 1 to 100.", param="limit",
                         code="invalid_value")  # fmt: skip
    ordered = items if order == "asc" else items[::-1]
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise ProxyError(400, f"after: no input item {after!r} in this response.",
                             param="after", code="invalid_value")  # fmt: skip
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0].get("id") if page else None,
        "last_id": page[-1].get("id") if page else None,
        "has_more": len(ordered) > limit,
    }
