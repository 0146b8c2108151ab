"""The whole relay: one attempt of a non-streamed request, read whole, judged, changed, answered.

The same for every route: the answer is read to its end under the first-token and request
timeouts, judged (`proxy.path.answers`: a 200 that is not an answer is an error), its usage
noted, and on the chat route handed to the agent layer, which may change it (tool calls
recovered, arguments repaired, JSON extracted). Anything that is not an answer comes back as a
`Decision` for the attempt loop.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.errors import error_body
from proxy.observe import events as ev
from proxy.path import usage
from proxy.path.answers import judge
from proxy.path.answers import message as answer_message
from proxy.path.chunks import loads
from proxy.path.client import add_headers, json_response
from proxy.path.deadlines import Deadlines
from proxy.path.job import Decision, Job, Layer
from proxy.path.sending import Sender
from proxy.upstreams.transport import UpstreamResponse


class WholeRelay:
    """Runs whole attempts; one per pipeline."""

    def __init__(self, layer: Layer, sender: Sender, deadlines: Deadlines) -> None:
        self.layer = layer
        self.sender = sender
        self.deadlines = deadlines

    async def attempt(self, request: web.Request, job: Job) -> web.StreamResponse | Decision:
        """One attempt: the client's answer, or what to do instead."""
        read = await self.read(job)
        if isinstance(read, Decision):
            return read
        return self.answer(job, *read)

    def answer(self, job: Job, resp: UpstreamResponse, raw: bytes) -> web.StreamResponse | Decision:
        """The client's answer from a whole 2xx body (also a stream request answered whole, on
        the raw route), or the decision when the body is not an answer."""
        parsed, decision = self.judged(job, resp, raw)
        if decision is not None:
            return decision
        job.status = resp.status
        if isinstance(parsed, dict):
            # Parsed whole: orjson reads a typical answer faster than any skim of its bytes
            # could find the usage, and the shape had to be checked anyway.
            changed = self.changed(job, parsed)
            if job.route == "chat":
                settled = self.layer.settle(job, parsed if changed is None else changed)
                if isinstance(settled, Decision):
                    return settled  # asked again (self-healing)
                # Every answer to a whole request is whole, a kept one too (reask._kept).
                assert isinstance(settled, dict)
                if settled is not parsed:
                    changed = settled
            if job.front is not None:
                return self._translated(job, resp.status, parsed if changed is None else changed)
            if changed is not None:
                raw = _written(job, changed, raw)
        out = web.Response(status=resp.status, body=raw)
        out.headers["Content-Type"] = resp.headers.get("Content-Type", "application/json")
        add_headers(out, job)
        return out

    @staticmethod
    def respond(job: Job, body: dict[str, Any]) -> web.Response:
        """A chat answer in hand (the first of two, when asking again failed), for the client."""
        job.status = 200
        if job.front is not None:
            return WholeRelay._translated(job, 200, body)
        out = web.Response(status=200, body=orjson.dumps(body))
        out.headers["Content-Type"] = "application/json"
        add_headers(out, job)
        return out

    @staticmethod
    def _translated(job: Job, status: int, body: dict[str, Any]) -> web.Response:
        """The answer in the shape of the API the client spoke."""
        assert job.front is not None
        try:
            translated = job.front.whole(job, body)
        except orjson.JSONEncodeError:
            # The Messages front writes a call's arguments as an object: one nested deeper than
            # orjson writes (254 levels) cannot be, and the chat answer's bytes are no answer
            # in that API's shape.
            job.status = 502
            job.upstream_error = "an answer nested more than 254 levels deep"
            message = (
                f"The upstream {job.upstream.name} answered with JSON nested more than 254 "
                "levels deep (a tool call's arguments), which latchgate cannot write in the "
                f"{job.front.name.capitalize()} API's shape."
            )
            error = error_body(502, message, code="upstream_bad_answer")
            return json_response(job, 502, orjson.dumps(error))
        out = web.Response(status=status, body=translated)
        out.headers["Content-Type"] = "application/json"
        add_headers(out, job)
        return out

    async def read(self, job: Job) -> tuple[UpstreamResponse, bytes] | Decision:
        """The response and its body, masked; or the decision when there is none.

        The first-token timeout runs until the server starts answering (its status line): a
        server that accepted the request and says nothing is retried like a silent stream. From
        then on, `request_timeout` bounds the whole exchange.
        """
        cfg = job.upstream.config
        now = self.deadlines.loop().time()
        first = cfg.effective_first_token_timeout
        total = now + cfg.request_timeout if cfg.request_timeout > 0 else None
        start = now + first if first > 0 else None
        # The first-token limit matters only when it is the nearer of the two.
        waiting_start = start is not None and (total is None or start < total)
        timer = self.deadlines.at(start if waiting_start else total)
        answering = False
        try:
            with timer:
                resp = await self.sender.open(job)
                if isinstance(resp, Decision):
                    return resp
                # The server is answering: from here on only the request timeout applies (also
                # while an error body is read), so the status is judged here, not in `start`.
                answering = True
                timer.reschedule(total)
                if resp.status >= 400:
                    return await self.sender.refusal(job, resp)
                t0 = time.perf_counter()
                try:
                    raw = job.masker.bytes(await resp.read())
                finally:
                    job.upstream_wait += time.perf_counter() - t0
                    resp.release()
        except TimeoutError:
            if answering or not waiting_start:
                detail = f"no complete answer within {cfg.request_timeout:g} s"
                return self.layer.on_failure(job, "timeout", detail)
            job.events.emit(
                ev.SILENT,
                f"{job.upstream.name} did not start answering within {first:g} s.",
                phase="first_token",
            )
            return self.layer.on_failure(job, "silent", f"no answer within {first:g} s")
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            return self.layer.on_failure(job, "connect", f"{type(exc).__name__}: {exc}")
        return resp, raw

    def judged(self, job: Job, resp: UpstreamResponse, raw: bytes) -> tuple[Any, Decision | None]:
        """A 2xx body, parsed, and no decision when it is what the route promises; else the
        decision: an error object in a 200 is judged as the error it is, anything else is a
        502 (not retried: the server did answer, with something broken)."""
        parsed = loads(raw)
        bad = judge(job.route, parsed, raw, resp.headers.get("Content-Type", ""))
        if bad is None:
            return parsed, None
        if bad.status is not None:
            return None, self.layer.on_error(job, bad.status, resp.headers, raw)
        job.upstream_error = f"HTTP {resp.status} with {bad.what}"
        message = answer_message(job.upstream.name, job.route, bad)
        return None, Decision.give(502, error_body(502, message, code="upstream_bad_answer"))

    def changed(self, job: Job, parsed: dict[str, Any]) -> dict[str, Any] | None:
        """A whole answer from upstream: its usage noted; on the chat route, what the agent
        layer makes of it (None: unchanged)."""
        usage.record(job, parsed, self.layer.on_usage)
        if job.route != "chat":
            return None
        return self.layer.whole(job, parsed)


def _written(job: Job, changed: dict[str, Any], raw: bytes) -> bytes:
    """The bytes of the answer latchgate changed; the server's own `raw` when orjson cannot
    write it (it reads JSON nested 1024 levels deep, writes 254): the client then has the
    answer as the server gave it, which loses nothing, rather than a 500."""
    try:
        return orjson.dumps(changed)
    except orjson.JSONEncodeError:
        job.events.emit(
            ev.INFO,
            f"{job.upstream.name}'s answer nests JSON more than 254 levels deep, too deep for "
            "latchgate to write its repairs: it is passed on as the server sent it.",
        )
        return raw
