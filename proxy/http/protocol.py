"""aiohttp's HTTP protocol, answering its own errors in latchgate's shape.

Some requests fail before any latchgate handler sees them: a request line or header that does
not parse or is too long, bad framing (`Content-Length` with `Transfer-Encoding`), a body in a
`Content-Encoding` this server cannot decode (`br`, `zstd`), a handler that raised. aiohttp
answers those itself, as plain text with no request id, from `RequestHandler.handle_error`.
That method is aiohttp's one hook for them, so the protocol here overrides it and hands the
answer to a function of the application (`ErrorAnswer`), which shapes, counts and logs it like
every other error. The runner and server subclasses exist only to install this protocol.

Not shapeable here: a connection aiohttp drops without answering (a client that sends nothing,
or bytes after a broken request on the same connection). Those get no response at all.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

# (request, status aiohttp chose, the exception, aiohttp's message) -> the response to send
ErrorAnswer = Callable[[web.BaseRequest, int, BaseException | None, str | None], web.Response]


class _Protocol(RequestHandler):
    answer: ErrorAnswer | None = None  # set per server, see `_Server.__call__`

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        answer = self.answer
        if answer is None or request.writer.output_size > 0:
            # Bytes of a response went out already: only aiohttp's own handling (which closes
            # the connection) is left.
            return super().handle_error(request, status, exc, message)
        response = answer(request, status, exc, message)
        response.force_close()  # after a protocol error the connection cannot be trusted
        return response


class _Server(web.Server):
    answer: ErrorAnswer | None = None

    def __call__(self) -> RequestHandler:
        protocol = _Protocol(self, loop=self._loop, **self._kwargs)
        protocol.answer = self.answer
        return protocol


class Runner(web.AppRunner):
    """An `AppRunner` whose connections answer protocol errors through `answer`."""

    def __init__(self, app: web.Application, *, answer: ErrorAnswer, **kwargs: object) -> None:
        super().__init__(app, **kwargs)  # type: ignore[arg-type]
        self._answer = answer

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        server = _Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )
        server.answer = self._answer
        return server
