"""The request path for one client request: send, resend or retry, then relay whole or streamed.

This module owns the mechanics every feature shares: the attempt loop, timeouts and the idle
watchdog, relaying SSE events as they arrive, ending a broken stream with an error the SDK raises,
cancelling the upstream when the client leaves, and the one rule that matters most: once any
content has reached the client, nothing is ever resent. What to send, how to read an error and how
to change a response are decisions of the agent layer (`proxy.layer`), passed in as `Layer`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from proxy.agent.overflow import parse_error
from proxy.errors import ProxyError, error_body, sse_error_event
from proxy.headers import (
    DROPPED_HEADER,
    NOTICE_HEADER,
    NOTICES_HEADER,
    REQUEST_ID_HEADER,
    header_value,
    notices_value,
)
from proxy.observe import events as ev
from proxy.observe.masking import Masker
from proxy.path.answers import judge
from proxy.path.answers import message as answer_message
from proxy.path.deadlines import Deadline, Deadlines
from proxy.path.sse import (
    DONE,
    EventTooLarge,
    SSEParser,
    comment,
    frame,
    next_block,
    parse_block,
    plain_run,
)
from proxy.upstreams.client import Upstream, forwardable_headers

if TYPE_CHECKING:
    from proxy.observe.events import RequestEvents

MAX_ERROR_BODY = 1024 * 1024  # an upstream error body larger than this is cut (it is prose)


@dataclass(slots=True)
class Decision:
    """What to do about an upstream error or a failed attempt."""

    action: str  # "resend" (latched, rebuild now), "retry" (after wait), "return" (to client)
    wait: float = 0.0
    status: int = 502
    body: bytes = b""
    reason: str = ""

    @staticmethod
    def give(status: int, body: bytes | dict[str, Any]) -> Decision:
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        return Decision("return", status=status, body=raw)


@dataclass(slots=True)
class Job:
    """One client request on its way through the pipeline."""

    upstream: Upstream
    route: str  # "chat", "completions", "embeddings"
    path: str  # upstream path relative to the base URL
    raw: bytes  # the client's body as received
    body: dict[str, Any]  # the client's body, parsed; never mutated
    stream: bool
    events: RequestEvents
    client_auth: str | None = None
    masker: Masker = field(default_factory=Masker)  # secrets its answer must not carry
    started: float = field(default_factory=time.perf_counter)
    upstream_wait: float = 0.0
    attempts: int = 0
    retries: int = 0
    sent: dict[str, Any] | None = None  # the body of the last attempt
    content_started: bool = False  # the upstream has begun answering (the watchdog's switch)
    relayed: bool = False  # content reached the client: from here on, nothing is ever resent
    interrupted: bool = False  # cancelled because latchgate is shutting down (see proxy.drain)
    first_token_at: float | None = None
    usage: dict[str, Any] | None = None
    dropped: list[str] = field(default_factory=list)
    upstream_headers: dict[str, str] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # per-request scratch for the layer
    status: int = 0


class StreamProcessor(Protocol):
    """Turns each upstream chunk into the chunks the client should get (see proxy.toolstream)."""

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]: ...

    def finish(self) -> list[dict[str, Any]]: ...


class Layer(Protocol):
    """The agent layer: every decision the pipeline delegates."""

    async def preflight(self, job: Job) -> ProxyError | None: ...

    def prepare(self, job: Job) -> tuple[dict[str, Any], bytes]: ...

    def on_error(self, job: Job, status: int, headers: Any, raw: bytes) -> Decision: ...

    def on_failure(self, job: Job, reason: str, detail: str) -> Decision: ...

    def whole(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | None: ...

    def stream_processor(self, job: Job) -> StreamProcessor | None: ...

    def on_usage(self, job: Job, usage: dict[str, Any]) -> None: ...

    def forward_usage(self, job: Job) -> bool: ...


class _Retry(Exception):
    """Raised inside an attempt to start the next one (the decision holds the wait)."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.reason)
        self.decision = decision


SETTLE_TIMEOUT = 5.0  # seconds to wait for a server to end a stream's body after [DONE]
_WRITE_ROOM = 16 * 1024  # well under asyncio's 64 KiB default high-water mark
_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
_DONE_EVENT = b"data: [DONE]\n\n"


class _ErrorEvent(Exception):
    """An error event in a stream before any content: handled like an HTTP error status."""

    def __init__(self, data: bytes, status: int) -> None:
        super().__init__(status)
        self.data = data
        self.status = status


def _event_status(chunk: dict[str, Any]) -> int:
    """The HTTP status an in-stream error stands for (its `code`, when that is one)."""
    error = chunk.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return 500


_SANE_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
# Fresh ids are a random per-process prefix and a counter: unique across restarts and processes
# like a uuid4, without a getrandom syscall per request.
_ID_PREFIX = "lg-" + secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


def new_request_id(given: str | None) -> str:
    """The client's own request id when it is a sane token, else a fresh one."""
    if given and _SANE_ID.fullmatch(given):
        return given
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


def add_headers(resp: web.StreamResponse, job: Job) -> None:
    """Headers latchgate adds to a response: the upstream's that matter, the request id, one
    notice header per notice, the dropped fields."""
    headers = resp.headers
    if job.upstream_headers:
        headers.update(job.upstream_headers)
    headers[REQUEST_ID_HEADER] = job.events.request_id
    if job.events.events:  # no events, no notices: the usual case skips the walk
        notices = [job.masker.text(notice) for notice in job.events.notices]
        for notice in notices:
            headers.add(NOTICE_HEADER, header_value(notice))
        if notices:
            headers[NOTICES_HEADER] = notices_value(notices)
    if job.dropped:
        headers[DROPPED_HEADER] = header_value(", ".join(job.dropped))


def json_response(job: Job, status: int, body: bytes) -> web.Response:
    resp = web.Response(status=status, body=body, content_type="application/json")
    add_headers(resp, job)
    return resp


def upstream_error_body(status: int, raw: bytes) -> bytes:
    """The upstream's error as an OpenAI error object: kept as it is when it already is one."""
    parsed = _loads(raw)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return raw
    message = parse_error(raw).message or f"The upstream answered HTTP {status} with no message."
    return orjson.dumps(error_body(status, message, type=None, code=str(status)))


class _Relayed(web.StreamResponse):
    """The client's streamed response. Its headers go out with its first bytes (one send, not
    two): latchgate prepares it only when it has something to write at once.

    (`_send_headers_immediately` is aiohttp's own switch, off for its whole `Response`; should
    a future aiohttp drop it, headers are merely sent on their own again.)
    """

    _send_headers_immediately = False


class _ClientGone(Exception):
    """A write to the client failed: it went away. Handled like a disconnect."""


class Pipeline:
    """Runs jobs: the attempt loop and the relays."""

    def __init__(self, layer: Layer, on_attempt: Callable[[Job, str], None] | None = None) -> None:
        self.layer = layer
        self.on_attempt = on_attempt or (lambda job, status: None)
        self.deadlines = Deadlines()  # every request's timeouts, swept together
        self._settling: set[asyncio.Task[None]] = set()  # see `_release`

    async def run(self, request: web.Request, job: Job) -> web.StreamResponse:
        """Answer one client request; always returns a response (or a finished stream)."""
        # One frame for the whole attempt loop (rather than a wrapper around a loop method):
        # every resume of the upstream read passes through each frame above it.
        try:
            problem = await self.layer.preflight(job)
            if problem is not None:
                job.status = problem.status
                return json_response(job, problem.status, orjson.dumps(problem.body()))
            client: web.StreamResponse | None = None
            while True:
                try:
                    if job.stream:
                        return await self._stream_attempt(request, job, client)
                    return await self._whole_attempt(job)
                except _Retry as retry:
                    decision = retry.decision
                except ProxyError as refused:
                    # The request cannot be built (a schema too deep or malformed to rewrite):
                    # the client's to fix, answered before anything was sent for it.
                    decision = Decision.give(refused.status, refused.body())
                # An attempt may have opened the client's stream (a role chunk, before any
                # content) and then failed: the next attempt and `_give` must write to that
                # stream, not start a second response on the same connection.
                client = job.state.get("client", client)
                if decision.action == "return":
                    return await self._give(request, job, client, decision)
                if decision.wait > 0:
                    await self._backoff(job, decision.wait)
        except (asyncio.CancelledError, _ClientGone):
            if job.interrupted:
                return await self._interrupted(request, job)
            self._client_left(job)
            raise asyncio.CancelledError() from None

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
        job.state["upstream_error"] = "interrupted by shutdown"
        client = job.state.get("client")
        try:
            if client is not None and client.prepared:
                return await self._end_with_error(
                    request, job, client, 503, message, "proxy_shutting_down"
                )
        except (_ClientGone, ConnectionError):
            self._client_left(job)
            raise asyncio.CancelledError() from None
        job.status = 503
        body = orjson.dumps(error_body(503, message, code="proxy_shutting_down"))
        return json_response(job, 503, body)

    def _client_left(self, job: Job) -> None:
        """The client went away before its answer was complete (the upstream is cancelled)."""
        job.status = 499
        if not job.state.get("left"):
            job.state["left"] = True
            job.events.emit(ev.CLIENT_DISCONNECT, "", upstream=job.upstream.name)

    @staticmethod
    async def _backoff(job: Job, wait: float) -> None:
        # A retry's backoff is time the upstream costs, not latchgate's own: counted as upstream
        # wait so the overhead histogram does not report retry pauses as proxy cost.
        t0 = time.perf_counter()
        try:
            await asyncio.sleep(wait)
        finally:
            job.upstream_wait += time.perf_counter() - t0

    async def _give(
        self, request: web.Request, job: Job, client: web.StreamResponse | None, d: Decision
    ) -> web.StreamResponse:
        job.status = d.status
        if client is None or not client.prepared:
            return json_response(job, d.status, job.masker.bytes(d.body))
        # The stream's headers went out already: the error goes as one SSE event instead (one
        # line: a pretty-printed upstream body would break the event apart).
        event = frame(_compact_error(d.status, job.masker.bytes(d.body)))
        await self._write(client, self._with_notices(job, event))
        await self._end(client)
        return client

    async def _write(self, client: web.StreamResponse, data: bytes) -> None:
        # A client that left shows up here as a reset connection; it is not the upstream's fault.
        try:
            await client.write(data)
        except ConnectionResetError:
            raise _ClientGone() from None

    async def _end(self, client: web.StreamResponse, data: bytes = b"") -> None:
        try:
            await client.write_eof(data)
        except ConnectionResetError:
            raise _ClientGone() from None

    async def _open(self, job: Job) -> aiohttp.ClientResponse:
        sent, payload = self.layer.prepare(job)
        job.sent = sent
        job.attempts += 1
        job.upstream_headers = {}  # never the headers of an earlier attempt
        t0 = time.perf_counter()
        try:
            resp = await job.upstream.open(job.path, payload, client_auth=job.client_auth)
        except (aiohttp.ClientConnectionError, OSError) as exc:
            self.on_attempt(job, "error")
            raise _Retry(
                self.layer.on_failure(job, "connect", f"{type(exc).__name__}: {exc}")
            ) from None
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

    def _release(self, resp: aiohttp.ClientResponse) -> None:
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

    async def _settle(self, resp: aiohttp.ClientResponse) -> None:
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

    async def _check_status(self, job: Job, resp: aiohttp.ClientResponse) -> None:
        """An error status: read the body (to its end, up to a cap) and let the layer decide."""
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
        decision = self.layer.on_error(job, resp.status, resp.headers, job.masker.bytes(bytes(raw)))
        raise _Retry(decision)

    async def _read_whole(self, job: Job) -> tuple[aiohttp.ClientResponse, bytes]:
        """One attempt of a whole (non-streamed) request: its response and its body, masked.

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
                resp = await self._open(job)
                answering = True
                timer.reschedule(total)
                if resp.status >= 400:  # checked here: no coroutine for the usual answer
                    await self._check_status(job, resp)
                t0 = time.perf_counter()
                try:
                    raw = job.masker.bytes(await resp.read())
                finally:
                    job.upstream_wait += time.perf_counter() - t0
                    resp.release()
        except TimeoutError:
            if answering or not waiting_start:
                detail = f"no complete answer within {cfg.request_timeout:g} s"
                raise _Retry(self.layer.on_failure(job, "timeout", detail)) from None
            job.events.emit(
                ev.SILENT,
                f"{job.upstream.name} did not start answering within {first:g} s.",
                phase="first_token",
            )
            raise _Retry(
                self.layer.on_failure(job, "silent", f"no answer within {first:g} s")
            ) from None
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            raise _Retry(
                self.layer.on_failure(job, "connect", f"{type(exc).__name__}: {exc}")
            ) from None
        return resp, raw

    def _judged(self, job: Job, resp: aiohttp.ClientResponse, raw: bytes) -> Any:
        """A 2xx body, parsed, when it is what the route promises; else the attempt's decision
        is raised: an error object in a 200 is judged as the error it is, anything else is a
        502 (not retried: the server did answer, with something broken)."""
        parsed = _loads(raw)
        bad = judge(job.route, parsed, raw, resp.headers.get("Content-Type", ""))
        if bad is None:
            return parsed
        if bad.status is not None:
            raise _Retry(self.layer.on_error(job, bad.status, resp.headers, raw))
        job.state["upstream_error"] = f"HTTP {resp.status} with {bad.what}"
        body = error_body(502, answer_message(job.upstream.name, job.route, bad),
                          code="upstream_bad_answer")
        raise _Retry(Decision.give(502, body))

    async def _whole_attempt(self, job: Job) -> web.StreamResponse:
        resp, raw = await self._read_whole(job)
        parsed = self._judged(job, resp, raw)
        job.status = resp.status
        if isinstance(parsed, dict):
            # Parsed whole: orjson reads a typical answer faster than any skim of its bytes
            # could find the usage, and the shape had to be checked anyway.
            changed = self._whole_body(job, parsed)
            if changed is not None:
                raw = orjson.dumps(changed)
        out = web.Response(status=resp.status, body=raw)
        out.headers["Content-Type"] = resp.headers.get("Content-Type", "application/json")
        add_headers(out, job)
        return out

    def _whole_body(self, job: Job, parsed: dict[str, Any]) -> dict[str, Any] | None:
        """A whole chat completion from upstream: count its usage, let the layer change it."""
        if isinstance(parsed.get("usage"), dict):
            job.usage = parsed["usage"]
            _note_cache(job, parsed)
            self.layer.on_usage(job, parsed["usage"])
        if job.route != "chat":
            return None
        return self.layer.whole(job, parsed)

    async def _prepare_client(self, request: web.Request, job: Job) -> web.StreamResponse:
        client = _Relayed(status=200)
        client.headers["Content-Type"] = "text/event-stream; charset=utf-8"
        client.headers["Cache-Control"] = "no-cache"
        client.headers["X-Accel-Buffering"] = "no"
        add_headers(client, job)
        try:
            await client.prepare(request)
        except ConnectionResetError:
            raise _ClientGone() from None
        job.state["notices_sent"] = len(job.events.notices)
        job.state["client"] = client
        return client

    async def _stream_attempt(
        self, request: web.Request, job: Job, client: web.StreamResponse | None
    ) -> web.StreamResponse:
        cfg = job.upstream.config
        loop = self.deadlines.loop()
        first = cfg.effective_first_token_timeout
        idle = cfg.idle_timeout
        processor: StreamProcessor | None = None
        forward_usage = self.layer.forward_usage(job)
        parser = SSEParser()
        masker = job.masker
        finished = done = pending_carries = False
        pending: list[bytes] = []  # events held for the final write
        resp: aiohttp.ClientResponse | None = None
        deadline = loop.time() + first if first > 0 else None
        watchdog = self.deadlines.at(deadline)
        job.content_started = False  # per attempt: a retry gets its own first-token limit
        try:
            with watchdog:
                resp = await self._open(job)
                if resp.status >= 400:  # checked here: no coroutine for the usual answer
                    await self._check_status(job, resp)
                if "event-stream" not in resp.headers.get("Content-Type", "text/event-stream"):
                    return await self._whole_as_stream(request, job, client, resp, watchdog)
                # Chosen after `prepare` ran for this attempt: what to do with the reply depends
                # on what was sent (JSON asked for in words is only known once the body is built).
                processor = self.layer.stream_processor(job)
                content = resp.content
                while not done:
                    t0 = time.perf_counter()
                    try:
                        chunk = await content.readany()
                    finally:
                        # Also when the idle watchdog or a leaving client cancels the read: that
                        # wait is the upstream's, not latchgate's overhead.
                        job.upstream_wait += time.perf_counter() - t0
                    if not chunk:
                        break
                    # Everything that arrived together goes out together: one write per read,
                    # not one per event (no added latency; ~20 fewer sends per short stream).
                    batch: list[bytes] = []
                    carries = skimmed = False
                    complete: bool | None = None  # whether this read ends the answer (see below)
                    region = masker.bytes(parser.feed(chunk))  # whole events: no key is split
                    pos, size = 0, len(region)
                    while pos < size:
                        if (
                            not skimmed
                            and processor is None
                            and (job.content_started or complete is None)
                        ):
                            # The answer is flowing and nothing will change it: the ordinary
                            # events that follow go out as they came, unread; a finish reason
                            # is all there is to see. (Checked as soon as content starts, not
                            # per read: an instant server's whole answer is one read.) Tried
                            # once per read, so a read that cannot be skimmed costs no rescans.
                            # Before content starts, only when this read holds the rest of the
                            # answer up to [DONE] with no error event in it: then nothing can
                            # fail after these events, and none needs judging on its own.
                            end = plain_run(region, pos)
                            if not job.content_started:
                                complete = region.endswith(_DONE_EVENT) and (
                                    region.find(b'"error"', end) < 0
                                )
                                if not complete:
                                    end = pos
                            skimmed = end > pos or job.content_started
                            if end > pos:
                                batch.append(region[pos:end] if pos or end < size else region)
                                finished = finished or _finishes(region, pos, end)
                                carries = True
                                pos = end
                                if size - pos == len(_DONE_EVENT) and region.endswith(_DONE_EVENT):
                                    done = True  # all that is left is [DONE]: nothing to read
                                    break
                                continue
                        found = next_block(region, pos)
                        if found is None:
                            break
                        block, pos = found
                        event = parse_block(block)
                        if event is None or event.data is None:
                            continue  # comments and bare event names carry nothing to relay
                        if event.data == DONE:
                            done = True
                            break
                        try:
                            out, fin, has = self._translate(
                                job, event.data, processor, forward_usage
                            )
                        except _ErrorEvent as err:
                            # What came before the error goes out first. If that was content,
                            # the stream ends with the upstream's error: nothing may be resent.
                            client = await self._flush(request, job, client, batch, carries)
                            if not job.relayed:
                                raise
                            return await self._end_with_upstream_error(request, job, client, err)
                        finished = finished or fin
                        carries = carries or has
                        if out:
                            batch.append(out)
                    if done:
                        # The end came with these events: they, `[DONE]` and the end of the
                        # body go out in one write (`_done`), after the watchdog is off.
                        pending, pending_carries = batch, carries
                        break
                    if job.content_started:
                        deadline = loop.time() + idle if idle > 0 else None
                    # Time spent writing to the client is the client's, not the upstream's: the
                    # watchdog is paused when this write can wait on a slow reader, which is
                    # only when it takes the socket's buffer near its high-water mark (checking
                    # first saves two timer resets per read on the common path).
                    transport = request.transport
                    backed_up = transport is None or (
                        transport.get_write_buffer_size() + sum(map(len, batch)) > _WRITE_ROOM
                    )
                    if backed_up:
                        watchdog.reschedule(None)
                    client = await self._flush(request, job, client, batch, carries)
                    if backed_up or job.content_started:
                        watchdog.reschedule(deadline)
                if not done:
                    for event in parser.close():
                        if event.data == DONE:
                            done = True
            self._release(resp)
            resp = None
        except TimeoutError:
            if not watchdog.expired():  # aiohttp's own socket timeout, not our watchdog
                return await self._failed(
                    request,
                    job,
                    client,
                    ("timeout", "the connection timed out"),
                    504,
                    "timed out mid-stream",
                    "upstream_timeout",
                )
            phase = "idle" if job.content_started else "first_token"
            limit = idle if job.content_started else first
            job.events.emit(
                ev.SILENT,
                f"{job.upstream.name} sent nothing for {limit:g} s "
                f"({'mid-stream' if job.content_started else 'before the first token'}).",
                phase=phase,
            )
            return await self._failed(
                request,
                job,
                client,
                ("silent", f"silent for {limit:g} s"),
                504,
                f"went silent for {limit:g} s mid-stream",
                "upstream_timeout",
                ", or raise idle_timeout for this upstream",
            )
        except _ErrorEvent as err:
            raise _Retry(
                self.layer.on_error(job, err.status, resp.headers if resp else {}, err.data)
            ) from None
        except EventTooLarge as err:
            return await self._too_large(request, job, client, err)
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            return await self._failed(
                request,
                job,
                client,
                ("connect", f"{type(exc).__name__}: {exc}"),
                502,
                f"broke mid-stream (the connection failed: {type(exc).__name__})",
                "upstream_disconnected",
            )
        except (asyncio.CancelledError, _ClientGone, _Retry):
            raise
        except Exception as exc:  # a bug of ours on an odd chunk: end the stream, never garble it
            client = job.state.get("client", client)
            if client is None or not client.prepared:
                raise
            log_internal_error(job, exc)
            return await self._end_with_error(
                request,
                job,
                client,
                500,
                "latchgate hit an internal error relaying this stream; it was logged. Retry, "
                "and report it if it repeats.",
                "internal_error",
            )
        finally:
            if resp is not None:
                resp.close()
        incomplete = not done and not finished
        if incomplete and not job.relayed:
            # Nothing reached the client: retry, and drop whatever the processor still holds.
            raise _Retry(
                self.layer.on_failure(job, "connect", "the stream ended before any answer")
            )
        if processor is not None:
            tail = processor.finish()
            pending += [frame(orjson.dumps(c)) for c in tail]
            pending_carries = pending_carries or any(_chunk_has_content(c) for c in tail)
        if incomplete:
            client = await self._flush(request, job, client, pending, pending_carries)
            return await self._failed(
                request,
                job,
                client,
                ("connect", "the stream ended before any answer"),
                502,
                "ended the stream without finishing the answer (no finish reason, no [DONE])",
                "upstream_incomplete",
            )
        return await self._done(request, job, client, pending, pending_carries)

    async def _too_large(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        err: EventTooLarge,
    ) -> web.StreamResponse:
        """The upstream's stream has no event ends in sight: a broken server, not a transient
        failure (a retry would read the same megabytes again), so it is never retried."""
        message = (
            f"The upstream {job.upstream.name} sent more than {err.limit} bytes without ending "
            "an SSE event, so latchgate stopped reading it. Check that the server sends an event "
            "stream (events end with a blank line)."
        )
        job.state["upstream_error"] = f"stream: {err}"
        if job.relayed:
            return await self._end_with_error(
                request, job, client, 502, message, "upstream_bad_stream"
            )
        body = error_body(502, message, code="upstream_bad_stream")
        return await self._give(request, job, client, Decision.give(502, body))

    async def _done(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        batch: list[bytes],
        carries: bool,
    ) -> web.StreamResponse:
        """End a complete stream: the last events, `[DONE]` (after any pending notices) and the
        end of the body, in one write (a short answer is then one send in all)."""
        if client is None:
            client = await self._prepare_client(request, job)
        if carries and not job.relayed:
            job.relayed = True
            job.first_token_at = time.perf_counter()
        batch.append(b"data: [DONE]\n\n")
        await self._end(client, self._with_notices(job, b"".join(batch)))
        job.status = 200
        return client

    async def _whole_as_stream(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        resp: aiohttp.ClientResponse,
        watchdog: Deadline,
    ) -> web.StreamResponse:
        """The server ignored `stream: true` and answered whole: stream that answer ourselves."""
        raw = job.masker.bytes(await resp.read())
        watchdog.reschedule(None)  # the answer is in hand: writing it is the client's time
        parsed = _loads(raw)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
            ctype = resp.headers.get("Content-Type", "no content type")
            raise _Retry(
                Decision.give(
                    502,
                    error_body(
                        502,
                        f"The upstream {job.upstream.name} answered a streamed request with "
                        f"{ctype} that is neither an event stream nor a chat completion. Check "
                        "the server.",
                        code="upstream_bad_stream",
                    ),
                )
            )
        body = self._whole_body(job, parsed) or parsed
        job.events.emit(
            ev.INFO,
            f"{job.upstream.name} answered a streamed request whole; "
            "latchgate sent it to the client as a stream.",
        )
        chunks = completion_to_chunks(body, usage=self.layer.forward_usage(job))
        return await self._done(
            request, job, client, [frame(orjson.dumps(c)) for c in chunks], True
        )

    async def _failed(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        failure: tuple[str, str],
        status: int,
        what: str,
        code: str,
        advice: str = "",
    ) -> web.StreamResponse:
        """A stream attempt failed: retried while nothing reached the client, else ended with an
        error event saying what the upstream did (`what`)."""
        if not job.relayed:
            raise _Retry(self.layer.on_failure(job, *failure))
        message = (
            f"The upstream {job.upstream.name} {what}; the answer is incomplete. "
            f"Retry the request{advice}."
        )
        return await self._end_with_error(request, job, client, status, message, code)

    async def _flush(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        batch: list[bytes],
        carries: bool,
    ) -> web.StreamResponse | None:
        """Write the events of one upstream read in one go (opening the client's stream);
        `carries` says whether they hold content, after which nothing is ever resent."""
        if batch:
            if client is None:
                client = await self._prepare_client(request, job)
            if carries and not job.relayed:
                # Set before the write: bytes handed to the socket may reach the client even
                # when waiting for the write to drain is then cut short.
                job.relayed = True
                job.first_token_at = time.perf_counter()
            await self._write(client, self._with_notices(job, b"".join(batch)))
            batch.clear()
        return client

    def _with_notices(self, job: Job, data: bytes) -> bytes:
        """Prefix SSE comment lines for notices that arose after the headers went out."""
        notices = job.events.notices
        sent = job.state.get("notices_sent", 0)
        if len(notices) <= sent:
            return data
        job.state["notices_sent"] = len(notices)
        return b"".join(comment(job.masker.text(n)) for n in notices[sent:]) + data

    def _translate(
        self,
        job: Job,
        data: bytes,
        processor: StreamProcessor | None,
        forward_usage: bool,
    ) -> tuple[bytes, bool, bool]:
        """One upstream data event -> the bytes for the client, whether it finished a choice,
        and whether what goes out carries content."""
        chunk = _loads(data)
        if not isinstance(chunk, dict):
            return frame(data), False, False  # not a JSON object: relayed as it came
        if "error" in chunk and "choices" not in chunk:
            # Before any answer (older llama.cpp reports overflows this way) it is judged like
            # an HTTP error: mapped, latched or retried. After, it ends the stream.
            raise _ErrorEvent(data, _event_status(chunk))
        finished = has = False
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict):
                    if choice.get("finish_reason"):
                        finished = True
                    has = has or _has_content(choice.get("delta"))
        if has:
            job.content_started = True  # the upstream is answering: the idle timer from now
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            job.usage = usage
            _note_cache(job, chunk)
            self.layer.on_usage(job, usage)
        elif processor is None and usage is None:
            return frame(data), finished, has  # the common case: relayed as it came
        outs = [chunk] if processor is None else processor.feed(chunk)
        parts: list[bytes] = []
        carries = False
        for out in outs:
            if out.get("usage") is not None and not forward_usage:
                if not out.get("choices"):
                    continue  # a usage-only chunk the client did not ask for
                out = {k: v for k, v in out.items() if k != "usage"}
            carries = carries or _chunk_has_content(out)
            parts.append(frame(data) if out is chunk else frame(orjson.dumps(out)))
        return b"".join(parts), finished, carries

    async def _end_with_upstream_error(
        self, request: web.Request, job: Job, client: web.StreamResponse | None, err: _ErrorEvent
    ) -> web.StreamResponse:
        """The upstream reported an error after content reached the client: relay it, end."""
        job.status = err.status
        job.state["upstream_error"] = (
            f"HTTP {err.status} mid-stream: {parse_error(err.data).message}"
        )
        if client is None:
            client = await self._prepare_client(request, job)
        await self._write(
            client, self._with_notices(job, frame(_compact_error(err.status, err.data)))
        )
        await self._end(client)
        return client

    async def _end_with_error(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        status: int,
        message: str,
        code: str,
    ) -> web.StreamResponse:
        job.status = status
        if client is None:
            client = await self._prepare_client(request, job)
        event = sse_error_event(status, job.masker.text(message), code=code)
        await self._write(client, self._with_notices(job, event))
        await self._end(client)
        return client

    async def relay_raw(self, request: web.Request, job: Job) -> web.StreamResponse:
        """Forward a request as it is (completions, embeddings): bytes in, bytes out."""
        try:
            while True:
                try:
                    return await self._raw_attempt(request, job)
                except _Retry as retry:
                    decision = retry.decision
                if decision.action == "return":
                    return await self._give(request, job, job.state.get("client"), decision)
                if decision.wait > 0:
                    await self._backoff(job, decision.wait)
        except (asyncio.CancelledError, _ClientGone):
            if job.interrupted:
                return await self._interrupted(request, job)
            self._client_left(job)
            raise asyncio.CancelledError() from None

    async def _raw_attempt(self, request: web.Request, job: Job) -> web.StreamResponse:
        """One attempt of a plain relay: a whole answer judged before it goes out, or a stream
        relayed event by event."""
        if job.stream:
            return await self._raw_stream_attempt(request, job)
        resp, raw = await self._read_whole(job)
        return self._raw_whole(job, resp, raw)

    def _raw_whole(self, job: Job, resp: aiohttp.ClientResponse, raw: bytes) -> web.Response:
        parsed = self._judged(job, resp, raw)
        if isinstance(parsed, dict):
            self._whole_body(job, parsed)  # its usage, for the token counts
        job.status = resp.status
        out = web.Response(status=resp.status, body=raw)
        out.headers["Content-Type"] = resp.headers.get("Content-Type", "application/json")
        add_headers(out, job)
        return out

    async def _raw_stream_attempt(
        self, request: web.Request, job: Job
    ) -> web.StreamResponse:
        """A plain stream: whole events relayed as they complete (masked, unread otherwise),
        under the first-token and idle watchdog. A stream that ends without `[DONE]` or a
        finish reason is an error to the client, as on the chat route."""
        cfg = job.upstream.config
        loop = self.deadlines.loop()
        first, idle = cfg.effective_first_token_timeout, cfg.idle_timeout
        timer = self.deadlines.at(loop.time() + first if first > 0 else None)
        parser = SSEParser()
        client: web.StreamResponse | None = None
        resp: aiohttp.ClientResponse | None = None
        ended = False  # [DONE] or a finish reason came
        try:
            with timer:
                resp = await self._open(job)
                if resp.status >= 400:  # checked here: no coroutine for the usual answer
                    await self._check_status(job, resp)
                if "event-stream" not in resp.headers.get("Content-Type", "text/event-stream"):
                    raw = job.masker.bytes(await resp.read())
                    return self._raw_whole(job, resp, raw)  # the server ignored `stream`
                async for chunk in resp.content.iter_any():
                    region = job.masker.bytes(parser.feed(chunk))  # whole events: no key split
                    if not region:
                        continue
                    ended = ended or _RAW_END.search(region) is not None
                    if client is None:  # opened at the first event, so a silent try is retried
                        client = await self._prepare_raw_client(request, job, resp)
                    timer.reschedule(None)  # the client's write time is not the upstream's
                    await self._write(client, region)
                    job.relayed = True
                    timer.reschedule(loop.time() + idle if idle > 0 else None)
                for event in parser.close():
                    ended = ended or event.data == DONE
            resp.release()
            resp = None
        except TimeoutError:
            limit = idle if job.relayed else first
            return await self._raw_failed(
                request, job, client, "timeout", 504, f"went silent for {limit:g} s"
            )
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            detail = f"broke the connection ({type(exc).__name__}: {exc})"
            return await self._raw_failed(request, job, client, "connect", 502, detail)
        except EventTooLarge as err:
            return await self._too_large(request, job, client, err)
        finally:
            if resp is not None:
                resp.close()
        if not ended:
            detail = "ended the stream without finishing the answer (no finish reason, no [DONE])"
            return await self._raw_failed(request, job, client, "connect", 502, detail)
        assert client is not None  # an ended stream had an event
        job.status = 200
        await self._end(client)
        return client

    async def _prepare_raw_client(
        self, request: web.Request, job: Job, resp: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        client = _Relayed(status=resp.status)
        client.headers["Content-Type"] = resp.headers.get("Content-Type", "text/event-stream")
        client.headers["Cache-Control"] = "no-cache"
        add_headers(client, job)
        try:
            await client.prepare(request)
        except ConnectionResetError:
            raise _ClientGone() from None
        job.state["client"] = client
        return client

    async def _raw_failed(
        self,
        request: web.Request,
        job: Job,
        client: web.StreamResponse | None,
        reason: str,
        status: int,
        detail: str,
    ) -> web.StreamResponse:
        """A plain stream failed: retried while nothing reached the client, else ended with an
        error event saying what the upstream did."""
        if not job.relayed:
            raise _Retry(self.layer.on_failure(job, reason, detail))
        message = (
            f"The upstream {job.upstream.name} {detail} mid-stream; the answer is incomplete. "
            "Retry the request."
        )
        code = "upstream_timeout" if status == 504 else "upstream_incomplete"
        return await self._end_with_error(request, job, client, status, message, code)


# The end of a plain stream: a `[DONE]` event or a finish reason (completions streams carry one).
_RAW_END = re.compile(rb'(?:^|\n)data: ?\[DONE\]\n|"finish_reason"\s*:\s*"')


def _finishes(region: bytes, start: int, end: int) -> bool:
    """Whether the run of whole events `region[start:end]` finishes a choice. Its last event is
    searched first, where a finish nearly always is; the rest only when that one does not."""
    last = region.rfind(b"\n\ndata: ", start, end - 2)
    last = start if last < 0 else last + 2
    return (
        _FINISHED.search(region, last, end) is not None
        or _FINISHED.search(region, start, last) is not None
    )


def _has_content(delta: Any) -> bool:
    """Whether a delta carries any part of the answer: anything but the role, non-empty."""
    if not isinstance(delta, dict):
        return False
    return any(value for key, value in delta.items() if key != "role")


def _chunk_has_content(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and _has_content(c.get("delta")) for c in choices
    )


def _note_cache(job: Job, body: dict[str, Any]) -> None:
    """llama.cpp says how much of the prompt came from its cache in `timings.cache_n`."""
    timings = body.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        job.state["cache_n"] = timings["cache_n"]


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _compact_error(status: int, body: bytes) -> bytes:
    """An error body as one line of JSON, in OpenAI's shape."""
    parsed = _loads(body)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return orjson.dumps(parsed)
    return upstream_error_body(status, body)


def completion_to_chunks(body: dict[str, Any], *, usage: bool) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks a stream of it would have carried."""
    keep = ("id", "created", "model", "system_fingerprint")
    base: dict[str, Any] = {k: body[k] for k in keep if k in body}
    base["object"] = "chat.completion.chunk"
    chunks: list[dict[str, Any]] = []
    finals: list[dict[str, Any]] = []
    for n, choice in enumerate(body.get("choices") or []):
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", n)
        message = choice.get("message")
        delta = {k: v for k, v in (message or {}).items() if v is not None}
        if isinstance(delta.get("tool_calls"), list):
            delta["tool_calls"] = [
                {"index": i, **call}
                for i, call in enumerate(delta["tool_calls"])
                if isinstance(call, dict)
            ]
        chunks.append(
            {**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}
        )
        finish = choice.get("finish_reason") or "stop"
        finals.append({**base, "choices": [{"index": index, "delta": {}, "finish_reason": finish}]})
    chunks += finals
    if usage and isinstance(body.get("usage"), dict):
        chunks.append({**base, "choices": [], "usage": body["usage"]})
    return chunks


def log_internal_error(job: Job, exc: BaseException) -> None:
    """Log a bug of ours met while relaying, with the request it happened on."""
    from proxy.observe import logs  # late: logs is configured by the command, after import

    logs.get_logger().error(
        "internal_error",
        request_id=job.events.request_id,
        upstream=job.upstream.name,
        error=type(exc).__name__,
        exc_info=exc,
    )
