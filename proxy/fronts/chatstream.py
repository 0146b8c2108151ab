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

from proxy.path import text_events
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

    def add_texts(self, texts: list[str]) -> bool:
        """Take in texts for the open text item, as `add` takes in chunks whose one choice's
        delta holds a text alone (no finish, no logprobs); False, taking none of them, when no
        text item is open (the first text opens one, through `add`)."""
        ...

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
        # The shape of the chat path's plain text events, once learnt (`_learn`); or none will
        # be, the first event that might have taught it being of another shape.
        self._shape: text_events.TextShape | None = None
        self._unlearnt = False

    def translate(self, data: bytes) -> bytes:
        """The front's events for what the chat path wrote (whole events only)."""
        region = self._parser.feed(data)
        out: list[bytes] = []
        pos, size = 0, len(region)
        while pos < size:
            pos = self._texts(region, pos)
            if pos < size:
                stop = self._texts_start(region, pos)
                self._translate_events(region[pos:stop], out)
                pos = stop
        out.append(self.events.take())
        # Usually one piece (a Responses stream's, with a client's tools, is hundreds of KB):
        # not copied again by a join.
        pieces = [piece for piece in out if piece]
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _texts(self, region: bytes, pos: int) -> int:
        """Take in, unread, the run of plain text events at `pos` (of the shape learnt: see
        `_learn`) while the writer has a text item open for them; where the run ends.

        Most of an answer is such events, and the chat path wrote their bytes as it read or
        passed them: parsed again here, they cost a Responses or Messages stream more than
        the rest of its translation (bench/RESULTS.md). Their texts are sliced out instead
        (`proxy.path.text_events`), and handed to the writer as `add` would take them in."""
        shape = self._shape
        if shape is None:
            return pos
        bodies, texts = text_events.read(shape, region, pos)
        if not texts or not self.events.add_texts(texts):
            return pos
        return text_events.end(shape, pos, bodies, len(texts))

    def _texts_start(self, region: bytes, pos: int) -> int:
        """Where, after the event at `pos`, a run of plain text events may start: an event of
        the shape learnt; until one is learnt, the event after the first that may teach it
        (`_learn`). The end of the region when there is none."""
        shape = self._shape
        if shape is None:
            at = -1 if self._unlearnt else region.find(_PLAIN_TEXT, pos)
            if at < 0:
                return len(region)
            start = region.rfind(b"\n\n", pos, at)
            start = pos if start < 0 else start + 2
            end = region.find(b"\n\n", at)
            if end < 0:
                return len(region)
            if start > pos:
                return start  # the events before it first, then it alone
            self._learn(region[start:end])
            return end + 2
        at = region.find(shape.head, pos + 1)
        while at >= 0 and region[at - 2 : at] != b"\n\n":
            at = region.find(shape.head, at + 1)  # not an event's start: in a comment, say
        return len(region) if at < 0 else at

    def _learn(self, block: bytes) -> None:
        """The shape of the plain text events, from the first event that may be one (`block`);
        when it is a chunk of another kind, learning stops and the stream is read as before."""
        if not block.startswith(b"data: {") or b"\n" in block:
            return  # not a one-line data event: the next one may teach it
        data = block[6:]
        chunk = loads(data)
        choice = first_choice(chunk) if type(chunk) is dict else None
        # A text with logprobs is not taught: the writer keeps each text's logprobs, which a
        # text taken in unread would lose.
        if choice is not None and choice.get("logprobs") is None:
            shape = text_events.learn(data, chunk)
            if shape is not None and shape.call is None and shape.bare:
                self._shape = shape
                return
        self._unlearnt = True

    def _translate_events(self, region: bytes, out: list[bytes]) -> None:
        """Take in the whole events of `region`, adding to `out` the bytes of those that cannot
        wait for the next `take` (a comment, a terminal event)."""
        chunks = _plain_chunks(region)
        if chunks is not None:
            add = self.events.add
            for chunk in chunks:
                add(chunk)
            if region.endswith(DONE_EVENT):
                out.append(self.events.done())
            return
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


# Where the first plain text event of a chat stream may be (its delta opening with the text, as
# every server that writes compact JSON writes it): only that event is read alone to learn their
# shape, the events before it are read together as before.
_PLAIN_TEXT = b'"delta":{"content":"'

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
