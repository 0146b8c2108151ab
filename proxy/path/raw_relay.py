"""The raw stream relay: a plain stream (`/v1/completions`) forwarded event by event.

Nothing in a completions stream is changed, so there is no per-event reading: each read's whole
events are masked and written as they came. What it shares with the chat stream is the rule that
matters: under the first-token and idle watchdog, a stream that ends without `[DONE]` or a
finish reason, breaks or goes quiet is retried while nothing reached the client and ended with
an error event once something did. A server that ignores `stream` is answered whole, except on
completions, where its answer goes out as a stream: an SDK reading one finds nothing in JSON.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.agent.negotiate import client_wants_usage
from proxy.observe import events as ev
from proxy.path import client as out
from proxy.path.chunks import RAW_END, RESPONSES_END
from proxy.path.deadlines import Deadlines
from proxy.path.job import Decision, Job, Layer
from proxy.path.sending import Sender, close_unreleased
from proxy.path.sse import DONE, EventTooLarge, SSEParser, frame
from proxy.path.stream_relay import Outcome, done, too_large
from proxy.path.whole import WholeRelay
from proxy.upstreams.transport import UpstreamResponse


class RawStreamRelay:
    """Runs plain stream attempts; one per pipeline."""

    def __init__(
        self, layer: Layer, sender: Sender, deadlines: Deadlines, whole: WholeRelay
    ) -> None:
        self.layer = layer
        self.sender = sender
        self.deadlines = deadlines
        self.whole = whole

    async def attempt(self, request: web.Request, job: Job) -> Outcome:
        cfg = job.upstream.config
        loop = self.deadlines.loop()
        first, idle = cfg.effective_first_token_timeout, cfg.idle_timeout
        timer = self.deadlines.at(loop.time() + first if first > 0 else None)
        parser = SSEParser()
        end = RESPONSES_END if job.route == "responses" else RAW_END  # how this stream finishes
        resp: UpstreamResponse | Decision | None = None
        ended = False  # [DONE] or a finish reason came
        try:
            with timer:
                resp = await self.sender.start(job)
                if isinstance(resp, Decision):
                    return resp
                if "event-stream" not in resp.headers.get("Content-Type", "text/event-stream"):
                    raw = job.masker.bytes(await resp.read())
                    if job.route == "completions":
                        return await self._whole_as_stream(request, job, resp, raw)
                    return self.whole.answer(job, resp, raw)  # the server ignored `stream`
                async for chunk in resp.content.iter_any():
                    region = job.masker.bytes(parser.feed(chunk))  # whole events: no key split
                    if not region:
                        continue
                    ended = ended or end.search(region) is not None
                    # Opened at the first event, so a silent try is retried.
                    client = job.response or await self._open(request, job, resp)
                    timer.reschedule(None)  # the client's write time is not the upstream's
                    await out.write(client, region)
                    job.relayed = True
                    timer.reschedule(loop.time() + idle if idle > 0 else None)
                ended = await self._last_event(request, job, resp, parser, end) or ended
            self.sender.release(resp)
            resp = None
        except TimeoutError:
            limit = idle if job.relayed else first
            return await self._failed(request, job, "timeout", 504, f"went silent for {limit:g} s")
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            detail = f"broke the connection ({type(exc).__name__}: {exc})"
            return await self._failed(request, job, "connect", 502, detail)
        except EventTooLarge as err:
            return await too_large(request, job, err)
        finally:
            close_unreleased(resp)
        if not ended:
            detail = "ended the stream without finishing the answer (no finish reason, no [DONE])"
            return await self._failed(request, job, "connect", 502, detail)
        assert job.response is not None  # an ended stream had an event
        job.status = 200
        await out.end(job.response)
        return job.response

    async def _last_event(
        self,
        request: web.Request,
        job: Job,
        resp: UpstreamResponse,
        parser: SSEParser,
        end: re.Pattern[bytes],
    ) -> bool:
        """The event the stream ended on without its blank line; whether it ends the answer.
        When nothing else came, that event is the whole stream, and the client gets it."""
        last = parser.close()
        ended = any(event.data == DONE for event in last)
        tail = job.masker.bytes(b"".join(frame(e.data) for e in last if e.data))
        if job.response is None and tail:
            ended = ended or end.search(tail) is not None
            await out.write(await self._open(request, job, resp), tail)
            job.relayed = True
        return ended

    async def _whole_as_stream(
        self, request: web.Request, job: Job, resp: UpstreamResponse, raw: bytes
    ) -> Outcome:
        """The server ignored `stream: true` and answered whole: that answer as one event (its
        usage in another, when asked) and `[DONE]`. An SDK reading a stream finds no event in a
        JSON body, and would end it as an empty answer. (A completion's chunk is the
        completion's own shape.)"""
        parsed, decision = self.whole.judged(job, resp, raw)
        if decision is not None:
            return decision
        try:
            events = _as_events(parsed, client_wants_usage(job.body))
        except orjson.JSONEncodeError:  # nested past what orjson writes: sent as it came
            return self.whole.answer(job, resp, raw)
        self.whole.changed(job, parsed)  # its usage noted
        job.events.emit(
            ev.INFO,
            f"{job.upstream.name} answered a streamed request whole; latchgate sent it to the "
            "client as a stream.",
        )
        return await done(request, job, [events], True)

    async def _open(
        self, request: web.Request, job: Job, resp: UpstreamResponse
    ) -> web.StreamResponse:
        return await out.open_stream(
            request,
            job,
            status=resp.status,
            content_type=resp.headers.get("Content-Type", "text/event-stream"),
            unbuffered=False,
        )

    async def _failed(
        self, request: web.Request, job: Job, reason: str, status: int, detail: str
    ) -> Outcome:
        """Retried while nothing reached the client, else ended with an error event."""
        if not job.relayed:
            return self.layer.on_failure(job, reason, detail)
        message = (
            f"The upstream {job.upstream.name} {detail} mid-stream; the answer is incomplete. "
            "Retry the request."
        )
        code = "upstream_timeout" if status == 504 else "upstream_incomplete"
        return await out.end_with_error(request, job, status, message, code)


def _as_events(completion: dict[str, Any], usage: bool) -> bytes:
    """A whole completion as a stream's events: the completion without its usage (one line:
    the server may have indented it), then, for a client that asked, the usage in a chunk of
    its own, as OpenAI streams it."""
    report = completion.get("usage")
    events = frame(orjson.dumps({k: v for k, v in completion.items() if k != "usage"}))
    if usage and report is not None:
        fields = {k: v for k, v in completion.items() if k not in ("choices", "usage")}
        events += frame(orjson.dumps({**fields, "choices": [], "usage": report}))
    return events
