"""The attempt loop: one client request, attempted until it is answered, then relayed.

`Pipeline.run` is the whole journey of a request after the HTTP layer: the agent layer's
pre-flight check (sizing, and fitting by context rescue), then attempts, each of which either
answers the client or returns a `Decision`: resend at once (a latch was learned and the body is
rebuilt), retry after a backoff (transient), check and fit the request again (the upstream said
it overflows its window), or return an error to the client. The same loop serves every route;
what an attempt is depends on the job (a chat stream, a plain stream, or a whole answer,
`_attempt_for`).

The one rule that matters most is kept by the relays and the agent layer together: once any
content has reached the client (`job.relayed`), nothing is ever resent. A client that leaves
cancels the upstream request at once; a request interrupted by shutdown ends with an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from proxy.errors import ProxyError, error_body
from proxy.managed.fleet import StartFailed, unavailable
from proxy.observe import events as ev
from proxy.path import client as out
from proxy.path import reask, stream_relay
from proxy.path.deadlines import Deadlines
from proxy.path.job import Decision, Job, Layer
from proxy.path.raw_relay import RawStreamRelay
from proxy.path.sending import OnAttempt, Sender
from proxy.path.stream_relay import Outcome, StreamRelay
from proxy.path.whole import WholeRelay

Attempt = Callable[[web.Request, Job], Awaitable[Outcome]]


class Pipeline:
    """Runs jobs: the attempt loop, over the relays."""

    def __init__(self, layer: Layer, on_attempt: OnAttempt | None = None) -> None:
        self.layer = layer
        self.deadlines = Deadlines()  # every request's timeouts, swept together
        self.sender = Sender(layer, self.deadlines, on_attempt or (lambda job, status: None))
        self.whole = WholeRelay(layer, self.sender, self.deadlines)
        self.raw_stream = RawStreamRelay(layer, self.sender, self.deadlines, self.whole)

    async def run(self, request: web.Request, job: Job) -> web.StreamResponse:
        """Answer one client request; always returns a response (or a finished stream)."""
        try:
            if job.upstream.managed is not None and (unstarted := await self._lease(job)):
                return unstarted
            problem = await self.layer.preflight(job)  # here, not in _preflight: one frame less
            if problem is not None:
                return self._refused(job, problem)
            attempt = self._attempt_for(job)
            while True:
                outcome = await attempt(request, job)
                if not isinstance(outcome, Decision):
                    return outcome
                if outcome.action == "return":
                    if job.heal.best is not None and not job.relayed:
                        return await self._first_answer(request, job, outcome)
                    return await out.give(request, job, outcome)
                if outcome.action == "refit" and (refused := await self._preflight(job)):
                    return refused
                if outcome.wait > 0:
                    await self._backoff(job, outcome.wait)
        except (asyncio.CancelledError, out.ClientGone):
            if job.interrupted:
                return await self._interrupted(request, job)
            self._client_left(job)
            raise asyncio.CancelledError() from None
        finally:
            if job.lease is not None:
                job.lease.release()

    async def _lease(self, job: Job) -> web.Response | None:
        """Hold the managed llama-server (started, or waited for, first); the refusal when it
        cannot start."""
        managed = job.upstream.managed
        assert managed is not None  # checked by the caller
        t0 = time.perf_counter()
        try:
            job.lease = await managed.acquire()
        except StartFailed as failed:
            return self._refused(job, unavailable(job.upstream.name, failed))
        finally:
            job.upstream_wait += time.perf_counter() - t0  # a model's load is not our overhead
        return None

    async def _preflight(self, job: Job) -> web.Response | None:
        """The agent layer's check again, when the upstream said the request overflows: None to
        send it (fitted), else the refusal."""
        problem = await self.layer.preflight(job)
        return None if problem is None else self._refused(job, problem)

    @staticmethod
    def _refused(job: Job, problem: ProxyError) -> web.Response:
        job.status = problem.status
        return out.json_response(job, problem.status, orjson.dumps(problem.body()))

    def _attempt_for(self, job: Job) -> Attempt:
        if not job.stream:
            return self.whole.attempt
        if job.route == "chat":
            return self._stream_attempt
        return self.raw_stream.attempt

    def _stream_attempt(self, request: web.Request, job: Job) -> Awaitable[Outcome]:
        # A plain function handing back the relay's coroutine: no frame of its own on every
        # resume of the stream.
        return StreamRelay(self.layer, self.sender, self.deadlines, request, job).run()

    async def _first_answer(
        self, request: web.Request, job: Job, failed: Decision
    ) -> web.StreamResponse:
        """Asking the model again (self-healing) ended in an error: the client gets the answer
        it would have had without latchgate, not the error of a request it never made."""
        best = reask.gave_up(job, f"HTTP {failed.status}")
        if job.stream:
            return await stream_relay.done(request, job, best, True)
        return self.whole.respond(job, best)

    async def close(self) -> None:
        """At shutdown: stop reading the ends of finished streams."""
        await self.sender.close()

    @staticmethod
    async def _backoff(job: Job, wait: float) -> None:
        # A retry's backoff is time the upstream costs, not latchgate's own: counted as upstream
        # wait so the overhead histogram does not report retry pauses as proxy cost.
        t0 = time.perf_counter()
        try:
            await asyncio.sleep(wait)
        finally:
            job.upstream_wait += time.perf_counter() - t0

    @staticmethod
    def _client_left(job: Job) -> None:
        """The client went away before its answer was complete (the upstream is cancelled)."""
        job.status = 499
        if not job.left:
            job.left = True
            job.events.emit(ev.CLIENT_DISCONNECT, "", upstream=job.upstream.name)

    async def _interrupted(self, request: web.Request, job: Job) -> web.StreamResponse:
        """latchgate is shutting down and this request outlasted the grace period: say so, in
        the stream if one is open (the SDK raises), else as a 503 (which SDKs retry)."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the cancellation was ours and is handled here
        message = (
            "latchgate is shutting down and this request outlasted its grace period; the "
            "answer is incomplete. Retry the request."
        )
        job.upstream_error = "interrupted by shutdown"
        try:
            if job.response is not None and job.response.prepared:
                return await out.end_with_error(request, job, 503, message, "proxy_shutting_down")
        except (out.ClientGone, ConnectionError):
            self._client_left(job)
            raise asyncio.CancelledError() from None
        job.status = 503
        body = orjson.dumps(error_body(503, message, code="proxy_shutting_down"))
        return out.json_response(job, 503, body)
