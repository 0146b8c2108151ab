"""The Responses front as the chat path sees it: one per request, translating its answer.

The chat path answers a translated request as it answers any chat request; this object is the
`Front` it hands that answer to (`proxy.path.job.Front`): a whole completion becomes a Response
object, a stream goes through a `ChatStream` with this front's `EventWriter`. Afterwards the
HTTP layer reads the final response from it, to store it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from proxy.fronts.chatstream import ChatStream
from proxy.fronts.responses.events import EventWriter
from proxy.fronts.responses.output import Context, from_completion
from proxy.path.job import Job


@dataclass(slots=True)
class ResponsesFront:
    """The translation of one Responses request's answer, and what storing it needs."""

    ctx: Context
    store: bool
    owner: str = ""  # who may read it back (a digest of the client's key), when stored
    input_items: list[dict[str, Any]] = field(default_factory=list)  # with ids, when stored
    name: str = "responses"
    # While a long prompt is read before the first token: an event every so many seconds (the
    # client's idle timers, and proxies in between, see a live stream); `[server] keepalive`.
    keepalive: float = 10.0
    whole_response: dict[str, Any] | None = None
    writer: EventWriter | None = field(default=None)

    def whole(self, job: Job, body: dict[str, Any]) -> bytes:
        self.whole_response = from_completion(self.ctx, body)
        return orjson.dumps(self.whole_response)

    def stream(self, status: int) -> web.StreamResponse:
        self.writer = EventWriter(self.ctx)
        return ChatStream(self.writer, status)

    @property
    def final(self) -> dict[str, Any] | None:
        """The response as the client got it in the end (None: it got an HTTP error)."""
        if self.whole_response is not None:
            return self.whole_response
        return None if self.writer is None else self.writer.final
