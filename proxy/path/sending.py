"""The upstream side of one attempt: build the body, send it, judge an error status, let go.

Every relay starts an attempt the same way (`Sender.open`: the agent layer builds the body from
the latches, the upstream gets it, the attempt is counted) and ends it the same way (`release`,
which keeps a finished stream's connection for the next request). An error status is read to its
end and handed to the agent layer, whose `Decision` the attempt returns (`Sender.refusal`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp

from proxy.agent.rescue.transcript import conversation_key
from proxy.errors import ProxyError
from proxy.managed.fleet import StartFailed, unavailable
from proxy.managed.process import State
from proxy.path.deadlines import Deadlines
from proxy.path.job import Decision, Job, Layer
from proxy.upstreams.client import forwardable_headers
from proxy.upstreams.pool import Pool, id_slot_body
from proxy.upstreams.transport import UpstreamResponse

MAX_ERROR_BODY = 1024 * 1024  # an upstream error body larger than this is cut (it is prose)
SETTLE_TIMEOUT = 5.0  # seconds to wait for a server to end a stream's body after [DONE]

OnAttempt = Callable[[Job, str], None]


def affinity_key(job: Job) -> str | None:
    """The conversation a request belongs to, for cache affinity: its `prompt_cache_key`, its
    `user`, else a digest of its leading messages, per client key (as context rescue keys its
    plans). None for a request with no conversation (embeddings, completions)."""
    body = job.body
    if "messages" not in body and "prompt_cache_key" not in body and "user" not in body:
        return None
    return conversation_key(body, job.client_auth or "")


def close_unreleased(resp: UpstreamResponse | Decision | None) -> None:
    """Close an attempt's response that was not released (an error or a cancellation ended the
    attempt mid-way): its connection is of no use to the next request."""
    if resp is not None and not isinstance(resp, Decision):
        resp.close()


class Sender:
    """Opens attempts upstream and releases them; one per pipeline, shared by every request."""

    def __init__(self, layer: Layer, deadlines: Deadlines, on_attempt: OnAttempt) -> None:
        self.layer = layer
        self.deadlines = deadlines
        self.on_attempt = on_attempt
        self._settling: set[asyncio.Task[None]] = set()  # see `release`

    async def open(self, job: Job) -> UpstreamResponse | Decision:
        """Send the attempt's body; the response once its headers arrived (body unread), or
        the decision when the body cannot be built or the server cannot be reached."""
        try:
            sent, payload = self.layer.prepare(job)
        except ProxyError as refused:
            # The request cannot be built (a schema too deep or malformed to rewrite): the
            # client's to fix, answered before anything was sent for it.
            return Decision.give(refused.status, refused.body())
        job.sent = sent
        job.attempts += 1
        job.upstream_headers = {}  # never the headers of an earlier attempt
        t0 = time.perf_counter()
        upstream = job.upstream
        if job.lease is not None and job.lease.server.state is not State.READY:
            restarted = await self._restarted(job)  # it died since: wait for it to be back
            if restarted is not None:
                return restarted
        resp: UpstreamResponse
        try:
            if upstream.pool is None:
                resp = await upstream.open(job.path, payload, client_auth=job.client_auth)
            else:
                resp = await self._open_pooled(job, upstream.pool, payload)
        except (aiohttp.ClientConnectionError, OSError) as exc:
            self.on_attempt(job, "error")
            return self.layer.on_failure(job, "connect", f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:
            # A watchdog or request timeout cancelled the attempt before any status came back
            # (or the client left): it was an attempt all the same, counted with no status.
            self.on_attempt(job, "error")
            raise
        finally:
            job.upstream_wait += time.perf_counter() - t0
        self.on_attempt(job, str(resp.status))
        headers = forwardable_headers(resp.headers)
        if headers and job.masker:
            headers = {name: job.masker.text(value) for name, value in headers.items()}
        job.upstream_headers = headers
        return resp

    async def _restarted(self, job: Job) -> Decision | None:
        """Wait for a managed server to be ready again; the refusal when its restart fails."""
        assert job.lease is not None  # checked by the caller
        t0 = time.perf_counter()
        try:
            await job.lease.server.wait_ready()
        except StartFailed as failed:
            self.on_attempt(job, "error")
            refused = unavailable(job.upstream.name, failed)
            return Decision.give(refused.status, refused.body())
        finally:
            job.upstream_wait += time.perf_counter() - t0
        return None

    @staticmethod
    def _open_pooled(job: Job, pool: Pool, payload: bytes) -> Awaitable[UpstreamResponse]:
        """Open on a member of the pool: the one its conversation was on, else the least busy
        (`Pool.choose`), on the conversation's llama.cpp slot when one is known."""
        if job.choice is not None:
            pool.finish(job.choice)  # the last attempt's member is free again
        elif pool.affinity and job.conversation is None:
            job.conversation = affinity_key(job)
        pinned = "id_slot" in job.body
        job.choice = choice = pool.choose(job.conversation, job.tried, client_slot=pinned)
        if choice.slot is not None:  # a slot count is known only from llama.cpp's /props
            payload = id_slot_body(payload, choice.slot)
        base = choice.member.base
        return job.upstream.open_on(base, job.path, payload, client_auth=job.client_auth)

    async def start(self, job: Job) -> UpstreamResponse | Decision:
        """`open`, and an error status judged at once: a 2xx response, or the decision."""
        resp = await self.open(job)
        if isinstance(resp, Decision) or resp.status < 400:
            return resp
        return await self.refusal(job, resp)

    async def refusal(self, job: Job, resp: UpstreamResponse) -> Decision:
        """An error status: read the body (to its end, up to a cap); the layer decides."""
        t0 = time.perf_counter()
        raw = bytearray()
        try:
            # Read to the end (up to the cap): a refusal that arrives in several pieces must be
            # judged whole, or its wording is missed.
            while len(raw) < MAX_ERROR_BODY:
                part = await resp.content.read(MAX_ERROR_BODY - len(raw))
                if not part:
                    break
                raw += part
        except (aiohttp.ClientError, OSError):
            pass  # judge what arrived
        finally:
            job.upstream_wait += time.perf_counter() - t0
            resp.close()
        # Masked before anything reads it: upstreams echo the key they were sent in errors.
        return self.layer.on_error(job, resp.status, resp.headers, job.masker.bytes(bytes(raw)))

    def release(self, resp: UpstreamResponse) -> None:
        """Give a finished stream's upstream connection back to the pool.

        Servers such as llama.cpp end the HTTP body a moment after `data: [DONE]`. Releasing a
        response whose body is not over closes its connection, so the next request would pay a
        new TCP (and TLS) handshake. The client has its whole answer already, so the rest of the
        body is read in a task of its own, off the request path, within `SETTLE_TIMEOUT`.
        """
        if resp.content.at_eof():
            resp.release()
            return
        task = self.deadlines.loop().create_task(self._settle(resp))
        self._settling.add(task)  # held, or the task could be collected mid-way
        task.add_done_callback(self._settling.discard)

    async def close(self) -> None:
        """Stop settling streams (at shutdown): their connections are closed with the pools."""
        for task in list(self._settling):
            task.cancel()
        await asyncio.gather(*self._settling, return_exceptions=True)

    async def _settle(self, resp: UpstreamResponse) -> None:
        try:
            with self.deadlines.at(self.deadlines.loop().time() + SETTLE_TIMEOUT):
                while await resp.content.readany():
                    pass  # after [DONE]: nothing anyone needs
        except (TimeoutError, aiohttp.ClientError, OSError):
            resp.close()  # a server that never ends the body: this connection is not reused
            return
        except asyncio.CancelledError:
            resp.close()
            raise
        resp.release()
