"""The client's stream on a front: chat events in, the front's own events out.

The chat path writes to a client's stream as it always does: SSE chunks, comment lines for its
notices, `[DONE]`, or an error event. On a front the stream it writes to is a `ChatStream`,
which reads those events back and hands them to the front's `Writer` (the Responses events,
the Messages events), so the chat path needs no second way of writing and each front only says
what a chunk becomes. Notices stay comment lines, which every SSE client skips.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson
from aiohttp import web

from proxy.path.chunks import DONE_EVENT, loads
from proxy.path.sse import DONE, SSEParser, parse_block


class Writer(Protocol):
    """What a front makes of a chat stream (`responses.events.EventWriter`,
    `messages.events.MessageWriter`)."""

    ended: bool  # a terminal event went out: nothing more may

    @property
    def completed(self) -> bool:
        """The answer went out whole (the client may hang up right after it)."""
        ...

    def add(self, chunk: dict[str, Any]) -> None:
        """Take in one chat chunk; its events wait for `take`."""

    def take(self) -> bytes:
        """The events so far, as bytes on the wire."""
        ...

    def done(self) -> bytes:
        """The chat stream ended complete: the closing events."""
        ...

    def failed(self, error: dict[str, Any]) -> bytes:
        """The chat stream ended with this error (an OpenAI error object): the closing events."""
        ...

    def keepalive(self) -> bytes:
        """The event that says "still working" while the answer has not begun."""
        ...


class ChatStream(web.StreamResponse):
    """A streamed response whose writes are translated from chat events by a `Writer`."""

    # Headers go out with the first bytes, as on the chat route (see proxy.path.client).
    _send_headers_immediately = False

    def __init__(self, writer: Writer, status: int = 200) -> None:
        super().__init__(status=status)
        self.events = writer
        self._parser = SSEParser()

    def translate(self, data: bytes) -> bytes:
        """The Responses events for what the chat path wrote (whole events only)."""
        region = self._parser.feed(data)
        chunks = _plain_chunks(region)
        if chunks is not None:
            add = self.events.add
            for chunk in chunks:
                add(chunk)
            end = self.events.done() if region.endswith(DONE_EVENT) else b""
            return self.events.take() + end
        out: list[bytes] = []
        for block in region.split(b"\n\n"):
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(self._data(block[6:]))  # one data line: the usual event
                continue
            event = parse_block(block) if block else None
            if event is None:
                continue
            if event.data is not None:
                out.append(self._data(event.data))
            elif event.comment == b"keepalive" and not self.events.ended:
                out.append(self.events.take() + self.events.keepalive())  # proxy.path.keepalive
            elif event.comment is not None and not self.events.ended:
                out.append(self.events.take() + b": " + event.comment + b"\n\n")
        out.append(self.events.take())
        return b"".join(out)

    def _data(self, data: bytes) -> bytes:
        """A data event taken in; the bytes of a terminal event (the rest waits for `take`)."""
        if data == DONE:
            return self.events.done()
        if not data.strip():
            return b""  # an empty data line (a heartbeat some servers send): nothing in it
        chunk = loads(data)
        if not isinstance(chunk, dict) or not _readable_choices(chunk.get("choices")):
            # The chat route relays such an event as it came, and the client's SDK raises on
            # it; here it would vanish, and the answer end complete without what it held.
            return self.events.failed(_UNREADABLE)
        error = chunk.get("error")
        if error is not None and "choices" not in chunk:
            return self.events.failed(_error(error))
        self.events.add(chunk)
        return b""

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        translated = self.translate(bytes(data))
        if translated:
            await super().write(translated)

    async def write_eof(self, data: bytes = b"") -> None:
        translated = self.translate(data) if data else b""
        if not self.events.ended:
            # The chat path always ends a stream with [DONE] or an error; should it ever not,
            # the client must not take the end for a finished response.
            translated += self.events.failed(
                {"code": "server_error", "message": "The answer ended before it was complete."}
            )
        try:
            await super().write_eof(translated)
        except ConnectionResetError:
            # Codex hangs up as soon as it reads response.completed: not a failure then.
            if not self.events.completed:
                raise


@dataclass(slots=True)
class ChatCall:
    """A tool call as chat streams it: assembled from fragments that share an index."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


C = TypeVar("C", bound=ChatCall)


def assemble(
    calls: dict[int, C], make: Callable[[], C], fragment: dict[str, Any], position: int
) -> tuple[C, str]:
    """The call a `tool_calls` fragment belongs to (made when new), with the fragment's id,
    name and argument piece added; and that piece ("" when it has none)."""
    index = fragment.get("index")
    key = index if isinstance(index, int) and not isinstance(index, bool) else position
    call = calls.get(key)
    if call is None:
        call = calls[key] = make()
    if isinstance(fragment.get("id"), str) and fragment["id"] and not call.id:
        call.id = fragment["id"]
    found = fragment.get("function")
    function: dict[str, Any] = found if isinstance(found, dict) else {}
    if isinstance(function.get("name"), str) and function["name"] and not call.name:
        call.name = function["name"]
    piece = function.get("arguments")
    if not isinstance(piece, str) or not piece:
        return call, ""
    call.arguments.append(piece)
    return call, piece


class QueuedWriter:
    """What both fronts' writers share: events queued as bytes until `take`, and the way a
    chunk is taken in (once started, its usage noted, its choice 0 handed to `_choice`).

    A writer says what its events are: `_start` (the opening events, once), `_choice` (what a
    choice's delta becomes) and `_flush` (the text held for one delta, sent)."""

    def __init__(self) -> None:
        self.started = False
        self.ended = False  # a terminal event went out: nothing more may
        self._usage: object = None
        self._out: list[bytes] = []

    def add(self, chunk: dict[str, Any]) -> None:
        """Take in one chat chunk (its events wait for `take`)."""
        if self.ended:
            return
        if not self.started:
            self._start()
        usage = chunk.get("usage")
        if usage is not None:
            self._usage = usage
        choice = first_choice(chunk)
        if choice is not None:
            self._choice(choice)

    def take(self) -> bytes:
        """The events so far, as bytes; text added since the last call goes as one delta.

        Deltas are sent per `take`, not per chunk: the stream calls it once per write of the
        chat path, so text that reached latchgate together reaches the client together, in one
        event instead of one per token (which costs each event's framing again, for nothing a
        client could see).
        """
        self._flush()
        out = b"".join(self._out)
        self._out.clear()
        return out

    def _start(self) -> None:
        raise NotImplementedError

    def _choice(self, choice: dict[str, Any]) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError


def first_choice(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """A chunk's choice 0 (the only one a front's request asks for), if it has it."""
    choices = chunk.get("choices")
    if type(choices) is list:
        for choice in choices:
            if type(choice) is dict and not choice.get("index"):
                return choice
    return None


def _plain_chunks(region: bytes) -> list[dict[str, Any]] | None:
    """The chunks of a region that holds only one-line data events of chunks (and perhaps
    `[DONE]` last), all parsed in one go; None for anything else (then each event is read on
    its own). One parse of the whole run instead of one per event is most of what keeps this
    front near the chat route's speed: per event, a stream here costs only `EventWriter.add`.
    """
    body = region[: -len(DONE_EVENT)] if region.endswith(DONE_EVENT) else region
    if not body.startswith(b"data: {"):
        return None
    events = body.count(b"\n") // 2
    # Every event is `data: ...` on one line: two newlines each, each after the first begins
    # right after the blank line before it.
    if body.count(b"\n\ndata: ") != events - 1 or body.count(b"\n") != 2 * events:
        return None
    try:
        chunks = orjson.loads(b"[" + body[6:-2].replace(b"\n\ndata: ", b",") + b"]")
    except orjson.JSONDecodeError:
        return None
    for chunk in chunks:
        if (
            type(chunk) is not dict
            or "error" in chunk
            or not _readable_choices(chunk.get("choices"))
        ):
            return None
    return chunks


def _readable_choices(choices: object) -> bool:
    """Whether a chunk's `choices` can be read: a list, or none at all (a usage report)."""
    return choices is None or type(choices) is list


_UNREADABLE = {
    "code": "upstream_bad_stream",
    "type": "upstream_error",
    "message": "The upstream sent a stream event that is not a chat chunk (not a JSON object, or "
    "its choices not a list), so the answer is incomplete. Retry the request; check the "
    "server if it repeats.",
}


def _error(error: Any) -> dict[str, Any]:
    if isinstance(error, dict):
        return error
    return {"code": "server_error", "message": str(error)}
