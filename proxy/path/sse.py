"""Server-sent events: split an upstream byte stream into events, and frame events for the client.

Upstreams send `data: <json>` events separated by blank lines, in TCP chunks that cut events
anywhere. `SSEParser` buffers only the unfinished tail and hands back whole raw events, which
`parse_block` reads (the relay forwards most of them without reading at all); it accepts
`\\n`, `\\r\\n` and `\\r` line ends (all allowed by the SSE standard), multi-line `data:` fields,
comments and named events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

DONE = b"[DONE]"


@dataclass(slots=True, init=False)  # its own __init__: several a stream (proxy/compiled.py)
class SSEEvent:
    """One event: its `data` (lines joined with `\\n`), its `event` name, or a comment line."""

    data: bytes | None
    event: str | None
    comment: bytes | None

    def __init__(
        self, data: bytes | None = None, event: str | None = None, comment: bytes | None = None
    ) -> None:
        self.data = data
        self.event = event
        self.comment = comment


MAX_EVENT_BYTES = 16 * 1024 * 1024  # one event's bytes before it ends, at most (see EventTooLarge)


class EventTooLarge(ValueError):
    """An upstream sent more than the limit without ending an event: a broken stream (no event
    separator at all), or an event no client could want. Never buffered further."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event grew past {limit} bytes without ending")
        self.limit = limit


class SSEParser:
    """Incremental SSE splitter: give it bytes, get back the raw events they completed.

    Linear in what it is fed: the unfinished tail is kept as a list of pieces (joined once, when
    its event ends) and each read is searched only where it is new, so a server that never sends
    a blank line costs one pass over its bytes, not one pass per read over all of them. The tail
    is bounded by `limit`; past it `feed` raises `EventTooLarge`.
    """

    __slots__ = ("_cr", "_pending", "_size", "limit")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._pending: list[bytes] = []  # the unfinished event, in pieces
        self._size = 0
        self._cr = False  # the last read ended in CR: maybe half of a CRLF
        self.limit = limit

    def blocks(self, chunk: bytes) -> list[bytes]:
        """The raw events `chunk` completed, each without its blank line (LF line ends)."""
        region = self.feed(chunk)
        blocks: list[bytes] = []
        found = next_block(region, 0)
        while found is not None:
            block, start = found
            blocks.append(block)
            found = next_block(region, start)
        return blocks

    def feed(self, chunk: bytes) -> bytes:
        """The whole events `chunk` completed, as one run of bytes (LF line ends, each event
        ending in a blank line; empty when none): for a caller that walks them itself."""
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if b"\r" in chunk:
            # Normalise CR and CRLF to LF. A CR at the very end might be half of a CRLF: keep it.
            if chunk.endswith(b"\r"):
                chunk, self._cr = chunk[:-1], True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n\n") + 2
        if end == 1 and self._pending and chunk[:1] == b"\n" and self._pending[-1][-1:] == b"\n":
            end = 1  # the blank line straddles the reads: one LF before, one in this chunk
        elif end == 1:
            self._hold(chunk)
            return b""
        if not self._pending:
            if end == len(chunk):
                return chunk  # the usual read: whole events and nothing after
            self._hold(chunk[end:])
            return chunk[:end]
        pending, self._pending, self._size = self._pending, [], 0
        self._hold(chunk[end:])
        return b"".join((*pending, chunk[:end]))

    def _hold(self, rest: bytes) -> None:
        if not rest:
            return
        self._size += len(rest)
        if self._size > self.limit:
            self._pending, self._size = [], 0
            raise EventTooLarge(self.limit)
        self._pending.append(rest)

    def close(self) -> list[SSEEvent]:
        """The last event of a stream that ended without a blank line, if any."""
        rest = b"".join(self._pending).strip(b"\n")
        self._pending, self._size, self._cr = [], 0, False
        if not rest:
            return []
        event = parse_block(rest)
        return [event] if event is not None else []


def next_block(region: bytes, start: int) -> tuple[bytes, int] | None:
    """The next raw event of `region` (as `SSEParser.feed` gives it) from `start`, without its
    blank line, and where the one after it begins; None when only blank lines are left (a run
    of three or more newlines leaves a stray one after the last event)."""
    while True:
        end = region.find(b"\n\n", start)
        if end < 0:
            return None
        if end > start:
            return region[start:end], end + 2
        start = end + 2  # an empty event: nothing to give


def parse_block(block: bytes) -> SSEEvent | None:
    """One raw event (without its blank line) as an `SSEEvent`; None when it carries nothing."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return SSEEvent(data=block[6:])  # the common case: one data line
    data: list[bytes] = []
    event: str | None = None
    comment: bytes | None = None
    for line in block.split(b"\n"):
        if not line:
            continue
        if line.startswith(b":"):
            comment = line[1:].lstrip()
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
        # `id:` and `retry:` fields mean nothing to an OpenAI stream; they are dropped.
    if data:
        return SSEEvent(data=b"\n".join(data), event=event)
    if comment is not None:
        return SSEEvent(comment=comment)
    if event is not None:
        return SSEEvent(event=event)
    return None


# What makes an event more than an ordinary content chunk: a `"usage"` key that is not null, or
# an `"error"` key (these byte strings appear only as JSON keys: quotes inside JSON strings are
# escaped on the wire).
_NULL_USAGE = re.compile(rb'"usage"\s*:\s*null')
# A line break that does not belong to a plain run of one-line `data: ` events: a blank line
# followed by anything but another `data: ` line (a comment, a named event, an empty event,
# `data: [DONE]`) or a lone line break inside an event (multi-line data). One regex pass: it
# replaced a scan for `[DONE]` and two counts of line breaks (each a full pass of the bytes).
_ODD_BREAK = re.compile(rb"\n(?:\n(?!data: (?!\[DONE\])|\Z)|(?<!\n\n)(?!\n))")


def plain_run(region: bytes, start: int) -> int:
    """Where the run of ordinary events at `region[start:]` ends (`start` when there is none).

    `region` is whole events as `SSEParser.feed` gives them. An ordinary event is one `data: `
    line that carries no usage, no error and is not `[DONE]`: such a run can be relayed as it
    came without reading it. Found with a few C-speed scans instead of a Python step per event.
    """
    stop = len(region)
    found = region.find(b'"usage"', start, stop)
    # OpenAI puts `"usage":null` in every chunk of a stream that asked for usage (latchgate asks
    # for every stream): only a usage report is notable.
    while found >= 0 and _NULL_USAGE.match(region, found):
        found = region.find(b'"usage"', found + 7, stop)
    if found >= 0:
        stop = found
    found = region.find(b'"error"', start, stop)
    if found >= 0:
        stop = found
    if stop < len(region):
        stop = region.rfind(b"\n\n", start, stop) + 2  # back to the end of the last whole event
    odd = _ODD_BREAK.search(region, start, stop)
    if odd is not None:
        # The run ends with the last whole event before the odd break (a blank line that is
        # odd only for what follows it ends an event that is still plain).
        stop = region.rfind(b"\n\n", start, odd.start() + 2) + 2
    if (
        stop - start < 8
        or not region.startswith(b"data: ", start)
        or region.startswith(b"data: [DONE]", start)
    ):
        return start
    return stop


def frame(data: bytes) -> bytes:
    """One `data:` event as bytes on the wire."""
    return b"data: " + data + b"\n\n"


class Unwritable(ValueError):
    """A chunk latchgate made or changed that orjson cannot write: it copies a field of the
    upstream's nested deeper than orjson writes (254 levels; it reads 1024). The relay ends the
    stream with an error, as for any upstream that breaks its stream."""


def encoded(chunk: Any) -> bytes:
    """`chunk` as one `data:` event; `Unwritable` when orjson cannot write it."""
    try:
        return frame(orjson.dumps(chunk))
    except orjson.JSONEncodeError:
        raise Unwritable("an event nests JSON more than 254 levels deep") from None


def comment(text: str) -> bytes:
    """A comment line, which SDKs ignore; used for notices that arise mid-stream."""
    safe = text.replace("\r", " ").replace("\n", " ")
    return b": latchgate: " + safe.encode("utf-8") + b"\n\n"
