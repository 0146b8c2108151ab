"""Server-sent events: split an upstream byte stream into events, and frame events for the client.

Upstreams send `data: <json>` events separated by blank lines, in TCP chunks that cut events
anywhere. `SSEParser` buffers only the unfinished tail and hands back whole raw events, which
`parse_block` reads (the relay forwards most of them without reading at all); it accepts
`\\n`, `\\r\\n` and `\\r` line ends (all allowed by the SSE standard), multi-line `data:` fields,
comments and named events.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = b"[DONE]"


@dataclass(slots=True)
class SSEEvent:
    """One event: its `data` (lines joined with `\\n`), its `event` name, or a comment line."""

    data: bytes | None = None
    event: str | None = None
    comment: bytes | None = None


class SSEParser:
    """Incremental SSE splitter: give it bytes, get back the raw events they completed."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def blocks(self, chunk: bytes) -> list[bytes]:
        """The raw events `chunk` completed, each without its blank line (LF line ends)."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # Normalise CR and CRLF to LF. A CR at the very end might be half of a CRLF: keep it.
            tail = b""
            if buf.endswith(b"\r"):
                buf, tail = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        blocks: list[bytes] = []
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            if end > start:
                blocks.append(buf[start:end])
            start = end + 2
        self._buf = buf[start:]
        return blocks

    def close(self) -> list[SSEEvent]:
        """The last event of a stream that ended without a blank line, if any."""
        rest, self._buf = self._buf.strip(b"\n"), b""
        if not rest:
            return []
        event = parse_block(rest)
        return [event] if event is not None else []


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


def frame(data: bytes) -> bytes:
    """One `data:` event as bytes on the wire."""
    return b"data: " + data + b"\n\n"


def comment(text: str) -> bytes:
    """A comment line, which SDKs ignore; used for notices that arise mid-stream."""
    safe = text.replace("\r", " ").replace("\n", " ")
    return b": latchgate: " + safe.encode("utf-8") + b"\n\n"
