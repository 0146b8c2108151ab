"""The Messages front as the chat path sees it: one per request, translating its answer.

The chat path answers a translated request as it answers any chat request; this object is the
`Front` it hands that answer to (`proxy.path.job.Front`): a whole completion becomes a Message,
a stream goes through a `ChatStream` with this front's `MessageWriter`. Errors are rewritten in
Anthropic's shape by the HTTP layer (`proxy.http.messages`) and, in a stream, by the writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from proxy.fronts.chatstream import ChatStream
from proxy.fronts.messages.events import MessageWriter
from proxy.fronts.messages.output import Context, from_completion
from proxy.path.job import Job


@dataclass(slots=True)
class MessagesFront:
    """The translation of one Messages request's answer."""

    ctx: Context
    name: str = "messages"
    # While a long prompt is read before the first token: an event every so many seconds (the
    # client's idle timers, and proxies in between, see a live stream); `[server] keepalive`.
    keepalive: float = 10.0

    def whole(self, job: Job, body: dict[str, Any]) -> bytes:
        return orjson.dumps(from_completion(self.ctx, body))

    def stream(self, status: int) -> web.StreamResponse:
        return ChatStream(MessageWriter(self.ctx), status)
