"""The client's side of one answer: the headers latchgate adds, the stream it opens, the last words.

The HTTP layer parses what a client sends; this module is where the path writes back to it. A
whole answer is one `json_response`; a stream is opened once (`open_stream`, remembered on the
job so a retry writes to the same stream) and ended either with `[DONE]` by the relay or with an
error event (`end_with_error`, `give`), never by simply stopping. Notices that arise after the
headers went out travel as SSE comment lines ahead of the next write (`with_notices`).
"""

from __future__ import annotations

from functools import lru_cache

from aiohttp import web

from proxy.agent.upstream_errors import parse_upstream_error
from proxy.errors import sse_error_event
from proxy.headers import (
    CONTEXT_HEADER,
    DROPPED_HEADER,
    NOTICE_HEADER,
    NOTICES_HEADER,
    REQUEST_ID_HEADER,
    header_value,
    notices_value,
)
from proxy.observe.masking import Masker
from proxy.path.chunks import compact_error
from proxy.path.job import Decision, Job
from proxy.path.sse import comment, frame

SSE = "text/event-stream; charset=utf-8"


class ClientGone(Exception):
    """A write to the client failed: it went away. Handled like a disconnect."""


class _Relayed(web.StreamResponse):
    """The client's streamed response. Its headers go out with its first bytes (one send, not
    two): latchgate prepares it only when it has something to write at once.

    (`_send_headers_immediately` is aiohttp's own switch, off for its whole `Response`; should
    a future aiohttp drop it, headers are merely sent on their own again.)
    """

    _send_headers_immediately = False


def add_headers(resp: web.StreamResponse, job: Job) -> None:
    """Headers latchgate adds to a response: the upstream's that matter, the request id, the
    notices (one header each, and all of them as one JSON list), the dropped fields."""
    headers = resp.headers
    if job.upstream_headers:
        headers.update(job.upstream_headers)
    headers[REQUEST_ID_HEADER] = job.events.request_id
    if job.events.events:  # no events, no notices: the usual case skips the walk
        notices = job.events.notices
        if notices:
            each, every = notice_values(job.masker, tuple(notices))
            for value in each:
                headers.add(NOTICE_HEADER, value)
            headers[NOTICES_HEADER] = every
    if job.dropped:
        headers[DROPPED_HEADER] = header_value(", ".join(job.dropped))
    if job.rescue.told:
        headers[CONTEXT_HEADER] = header_value(job.rescue.told)


@lru_cache(maxsize=256)
def notice_values(masker: Masker, notices: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The header values of `notices`, masked: one for each, and the JSON list of them all.

    Kept for the notices seen last, since the same ones come back request after request (a
    recovered call's, a refused field's): masking a notice and checking every character of it,
    twice, took 10,000 instructions, a fifth of what a recovered call costs beyond its parse.
    The masker is part of the key, so a new one (new secrets) never reads an old answer.
    """
    masked = [masker.text(notice) for notice in notices]
    return tuple([header_value(notice) for notice in masked]), notices_value(masked)


def json_response(job: Job, status: int, body: bytes) -> web.Response:
    resp = web.Response(status=status, body=body, content_type="application/json")
    add_headers(resp, job)
    return resp


async def open_stream(
    request: web.Request,
    job: Job,
    *,
    status: int = 200,
    content_type: str = SSE,
    unbuffered: bool = True,
) -> web.StreamResponse:
    """Prepare the client's stream (headers go out with its first write) and remember it."""
    client = _Relayed(status=status) if job.front is None else job.front.stream(status)
    client.headers["Content-Type"] = content_type
    client.headers["Cache-Control"] = "no-cache"
    if unbuffered:
        client.headers["X-Accel-Buffering"] = "no"  # nginx in front: do not buffer the stream
    add_headers(client, job)
    try:
        await client.prepare(request)
    except ConnectionResetError:
        raise ClientGone() from None
    job.notices_sent = len(job.events.notices)
    job.response = client
    return client


async def write(client: web.StreamResponse, data: bytes) -> None:
    # A client that left shows up here as a reset connection; it is not the upstream's fault.
    try:
        await client.write(data)
    except ConnectionResetError:
        raise ClientGone() from None


async def end(client: web.StreamResponse, data: bytes = b"") -> None:
    try:
        await client.write_eof(data)
    except ConnectionResetError:
        raise ClientGone() from None


def with_notices(job: Job, data: bytes) -> bytes:
    """`data` after SSE comment lines for notices that arose after the headers went out."""
    notices = job.events.notices
    sent = job.notices_sent
    if len(notices) <= sent:
        return data
    job.notices_sent = len(notices)
    return b"".join(comment(job.masker.text(n)) for n in notices[sent:]) + data


async def end_with_error(
    request: web.Request, job: Job, status: int, message: str, code: str
) -> web.StreamResponse:
    """End the client's stream (opening it if need be) with an error event the SDK raises."""
    job.status = status
    client = job.response or await open_stream(request, job)
    event = sse_error_event(status, job.masker.text(message), code=code)
    await write(client, with_notices(job, event))
    await end(client)
    return client


async def give(request: web.Request, job: Job, decision: Decision) -> web.StreamResponse:
    """Answer a `return` decision: a JSON error, or one error event in a stream already open."""
    job.status = decision.status
    body = job.masker.bytes(decision.body)
    client = job.response
    if client is None or not client.prepared:
        return json_response(job, decision.status, body)
    # The stream's headers went out already: the error goes as one SSE event instead (one line:
    # a pretty-printed upstream body would break the event apart).
    error = parse_upstream_error(decision.status, body)
    await write(client, with_notices(job, frame(compact_error(error))))
    await end(client)
    return client
