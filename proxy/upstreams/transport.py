"""The request path's HTTP/1.1 client: kept-alive connections to an upstream, and one method.

Why not aiohttp's `ClientSession`, which latchgate keeps for everything else it asks a server
(probes, listings, token counts, summaries): measured on the bench, a request through it costs
the proxy more CPU than all of latchgate's own work on a plain request (bench/RESULTS.md,
issue 17), for features a relay to a model server never uses: cookies, redirects, proxies,
auth flows, tracing, per-request timeouts objects. What the path needs is small: send a body,
get the status and headers, read the body as it comes, keep the connection for the next
request. This module does that and nothing more (`Transport.send`).

Its `Response` offers the part of `aiohttp.ClientResponse` the path uses (`status`, `headers`,
`content.readany/read/read_nowait/at_eof/iter_any`, `read`, `release`, `close`), and it raises
aiohttp's own exception types (`ClientConnectorError`, `ServerDisconnectedError`,
`ClientPayloadError`, `ConnectionTimeoutError`), so the path handles one set of errors whichever
client answered, and the messages clients see name the same causes as before.

The wire format it reads: a status line and headers (1xx answers skipped), then a body framed by
`Transfer-Encoding: chunked`, by `Content-Length`, or by the connection's end; a gzip or deflate
`Content-Encoding` is decoded, though none is asked for (no `Accept-Encoding` is sent: between
latchgate and a model server, compressing costs more than it saves). A redirect is an answer
like any other, relayed as it came: aiohttp followed it, turning the POST into a GET.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import NamedTuple, Protocol, cast
from urllib.parse import unquote, urlsplit

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.upstreams.malformed import MalformedResponse

MAX_HEAD = 64 * 1024  # a status line and headers larger than this are not an HTTP answer
HIGH_WATER = 256 * 1024  # unread body bytes at which the socket stops being read
KEEPALIVE = 30.0  # seconds an idle connection is kept for the next request


class _Key(NamedTuple):
    """The fields aiohttp's `ClientConnectorError` reads to describe a failed connect."""

    host: str
    port: int
    ssl: bool


class Origin(NamedTuple):
    """Where a URL's requests go, and what their request line and Host header say."""

    scheme: str
    host: str
    port: int
    host_header: str
    target: str  # the path and query
    basic: str | None  # `Authorization` for credentials in the URL (`http://user:pw@host/`)

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise aiohttp.InvalidURL(url)
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == (443 if tls else 80) else f"{shown}:{port}"
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        basic = None
        if parts.username is not None or parts.password is not None:
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            basic = "Basic " + base64.b64encode(pair.encode()).decode()
        return cls(parts.scheme, host, port, header, target, basic)


class BodyReads(Protocol):
    """What the request path reads of a response body: `Body`, or a test's scripted body.

    The path's modules are compiled (proxy/compiled.py), and compiled code checks a value
    against a concrete class it was annotated with; typed by these protocols, which it does
    not check, the path reads whatever has these methods, as it did when it was sources.
    """

    def at_eof(self) -> bool: ...

    def read_nowait(self) -> bytes: ...

    async def readany(self) -> bytes: ...

    async def read(self, n: int = -1) -> bytes: ...

    def iter_any(self) -> AsyncIterator[bytes]: ...


class UpstreamResponse(Protocol):
    """What the request path reads of an upstream's response: `Response`, or a test's."""

    status: int
    headers: CIMultiDictProxy[str]

    @property
    def content(self) -> BodyReads: ...

    async def read(self) -> bytes: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class Body:
    """A response body as it arrives: the reads of `aiohttp.StreamReader` the path makes."""

    __slots__ = ("_chunks", "_conn", "_eof", "_error", "_size", "_waiter")

    def __init__(self, conn: Connection) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._conn = conn

    # -- the connection's side ---------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER:
            self._conn.pause()
        self._wake()

    def feed_eof(self) -> None:
        self._eof = True
        self._wake()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- the reader's side -------------------------------------------------------------

    def at_eof(self) -> bool:
        return self._eof and not self._chunks

    def read_nowait(self) -> bytes:
        """What has arrived and not been read (b"" when nothing has)."""
        if not self._chunks:
            if self._error is not None:
                raise self._error
            return b""
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._taken(len(data))
        return data

    async def readany(self) -> bytes:
        """What has arrived, waiting for something when nothing has; b"" at the end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            await self._wait()
        return self.read_nowait()

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (everything to the end when `n` is negative); b"" at the end."""
        if n < 0:
            parts = []
            while chunk := await self.readany():
                parts.append(chunk)
            return b"".join(parts)
        data = await self.readany()
        if len(data) > n:
            self._chunks.appendleft(data[n:])
            self._size += len(data) - n
            data = data[:n]
        return data

    def iter_any(self) -> Body:
        """The body's pieces as they arrive, for `async for` (the body is its own iterator:
        mypyc compiles no async generator)."""
        return self

    def __aiter__(self) -> Body:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.readany()
        if not chunk:
            raise StopAsyncIteration
        return chunk

    def _taken(self, n: int) -> None:
        self._size -= n
        if self._size <= HIGH_WATER // 4:
            self._conn.resume()

    async def _wait(self) -> None:
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None


class Response:
    """A status, headers and a body being read, on a connection that is the response's until
    `release` (back to the pool when the body was read to its end) or `close`."""

    __slots__ = ("_conn", "content", "headers", "reason", "status")

    def __init__(
        self, status: int, reason: str, headers: CIMultiDictProxy[str], conn: Connection
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.content = Body(conn)
        self._conn: Connection | None = conn

    async def read(self) -> bytes:
        return await self.content.read()

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done(reuse=self.content.at_eof())

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done(reuse=False)


class Connection:
    """One HTTP/1.1 connection: writes a request, parses its answer as the bytes arrive.

    An asyncio protocol by its methods, not by deriving from `asyncio.Protocol`: this module is
    compiled (proxy/compiled.py), and a compiled class derives from no class outside it.
    """

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.reusable = False
        self._buffer = b""
        self._method = "POST"
        self._head: asyncio.Future[Response] | None = None
        self._response: Response | None = None
        self._framing: _Framing | None = None
        self._paused = False
        self.closed = False

    # -- asyncio's callbacks -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports are not asyncio's classes.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            if self._framing is None:
                self._read_head(data)
            else:
                self._read_body(data)
        except MalformedResponse as bad:
            self._fail(bad)

    def eof_received(self) -> bool:
        return False  # close the transport: half-open HTTP/1.1 connections are of no use

    def pause_writing(self) -> None:
        pass  # a request is written once, whole: there is nothing more to hold back

    def resume_writing(self) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        self.pool.forget(self)
        framing = self._framing
        if framing is not None and framing.until_close and self._response is not None:
            self._finish_body()  # a body framed by the connection's end has ended
            return
        if self._head is not None or framing is not None:
            self._fail(aiohttp.ServerDisconnectedError() if framing is None else _cut(framing))

    # -- one exchange ------------------------------------------------------------------

    def start(self, method: str, data: bytes) -> asyncio.Future[Response]:
        """Write a request; the future has the response once its head arrived."""
        assert self.transport is not None
        self._method = method
        self._head = head = asyncio.get_running_loop().create_future()
        self.reusable = False
        self.transport.write(data)
        if self._buffer:  # bytes the server sent before it was asked: not an answer to this
            self._fail(MalformedResponse("the server sent data before the request"))
        return head

    def done(self, *, reuse: bool) -> None:
        """The response is finished with: keep the connection for the next request, or not."""
        self._response = None
        if reuse and self.reusable and self._framing is None and not self.closed:
            self.resume()
            self.pool.put(self)
        else:
            self.close()

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    # -- parsing -----------------------------------------------------------------------

    def _read_head(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        # A loop, not a call to itself for each 1xx head (100 Continue and the like: the answer
        # is yet to come): a server's run of them must not nest calls (proxy/compiled.py).
        # An offset, not a slice a head: a run of them in one read is not copied once each.
        start = 0
        while True:
            end = buffer.find(b"\r\n\r\n", start)
            if end < 0:
                if len(buffer) - start > MAX_HEAD:
                    raise MalformedResponse("the server's response headers are too large")
                self._buffer = buffer[start:]
                return
            self._buffer = b""
            status, reason, headers, keep = _parse_head(buffer[start:end])
            start = end + 4
            if not 100 <= status < 200:
                break
            if start == len(buffer):
                return
        rest = buffer[start:]
        framing = _framing_of(self._method, status, headers)  # may find the head malformed
        head = self._head
        self._head = None
        if head is None or head.done():  # nobody is waiting (the request was cancelled)
            self.close()
            return
        self._response = response = Response(status, reason, headers, self)
        self.reusable = keep
        self._framing = framing
        head.set_result(response)
        if framing.done:
            if rest:  # a body where the status or method allows none: the connection is spoilt
                self.reusable = False
            self._finish_body()
        elif rest:
            self._read_body(rest)

    def _read_body(self, data: bytes) -> None:
        framing = self._framing
        response = self._response
        assert framing is not None
        pieces, rest = framing.take(data)
        if response is not None:
            for piece in pieces:
                response.content.feed(piece)
        if framing.done:
            if rest:  # more than the framing said: the connection cannot carry another answer
                self.reusable = False
            self._finish_body()

    def _finish_body(self) -> None:
        framing, self._framing = self._framing, None
        response = self._response
        if framing is not None and response is not None:
            tail = framing.flush()
            if tail:
                response.content.feed(tail)
            response.content.feed_eof()

    def _fail(self, error: BaseException) -> None:
        head, self._head = self._head, None
        if head is not None and not head.done():
            head.set_exception(error)
        response = self._response
        if response is not None and self._framing is not None:
            response.content.fail(error)
        self._framing = None
        self.close()


def _parse_head(raw: bytes) -> tuple[int, str, CIMultiDictProxy[str], bool]:
    """The status, reason, headers, and whether the connection stays open after the body."""
    lines = raw.split(b"\r\n")
    first = lines[0]
    if not first.startswith(b"HTTP/1.") or len(first) < 12 or not first[9:12].isdigit():
        raise MalformedResponse(f"not an HTTP/1.1 status line: {first[:60]!r}")
    status = int(first[9:12])
    reason = first[13:].decode("latin-1")
    pairs = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise MalformedResponse(f"not an HTTP header line: {line[:60]!r}")
        pairs.append((name.decode("latin-1"), value.strip().decode("latin-1")))
    headers = CIMultiDictProxy(CIMultiDict(pairs))
    connection = headers.get("Connection", "").lower()
    keep = "close" not in connection and (first[7:8] == b"1" or "keep-alive" in connection)
    return status, reason, headers, keep


# Where a chunked body's reading is: a size line, a chunk's data, the CRLF after it, trailers.
_SIZE, _DATA, _CRLF, _TRAILERS = range(4)


class _Framing:
    """Where a body ends: after `Content-Length` bytes, after the last chunk, or at the
    connection's end; and its decoding, when the server compressed it anyway."""

    __slots__ = ("_decoder", "_pending", "_state", "chunked", "done", "left", "until_close")

    def __init__(self, left: int, chunked: bool, until_close: bool, encoding: str) -> None:
        self.left = left  # bytes of the body (Content-Length) or of the current chunk
        self.chunked = chunked
        self.until_close = until_close
        self.done = not chunked and not until_close and left == 0
        self._state = _SIZE
        self._pending = b""  # a chunk's size line (or trailer) not yet whole
        self._decoder = _decoder(encoding)

    def take(self, data: bytes) -> tuple[list[bytes], bytes]:
        """The body's bytes in `data`, and what follows the body's end."""
        if self.chunked:
            pieces, rest = self._chunks(data)
        elif self.until_close:
            pieces, rest = [data], b""
        elif len(data) < self.left:
            self.left -= len(data)
            pieces, rest = [data], b""
        else:
            pieces, rest = [data[: self.left]], data[self.left :]
            self.left = 0
            self.done = True
        if self._decoder is not None:
            # Only decoding makes an empty piece (a compressed block still incomplete): each
            # piece taken above holds at least one byte.
            pieces = [out for p in pieces if (out := self._decoder.decompress(p))]
        return pieces, rest

    def flush(self) -> bytes:
        return self._decoder.flush() if self._decoder is not None else b""

    def _chunks(self, data: bytes) -> tuple[list[bytes], bytes]:
        pieces = []
        if self._pending:
            data, self._pending = self._pending + data, b""
        at, size = 0, len(data)
        while at < size:
            if self._state == _DATA:
                end = min(size, at + self.left)
                pieces.append(data[at:end])
                self.left -= end - at
                at = end
                if not self.left:
                    self._state = _CRLF
                continue
            line_end = data.find(b"\r\n", at)
            if line_end < 0:
                self._pending = data[at:]
                if len(self._pending) > 4096:
                    raise MalformedResponse("a chunk's size line or trailer is too long")
                break
            line, at = data[at:line_end], line_end + 2
            if self._state == _CRLF:
                if line:
                    raise MalformedResponse("a chunk's data did not end with CRLF")
                self._state = _SIZE
            elif self._state == _TRAILERS:
                if not line:
                    self.done = True
                    return pieces, data[at:]
            else:
                self.left = _chunk_size(line)
                self._state = _DATA if self.left else _TRAILERS
        return pieces, b""


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    if not size or size.strip(b"0123456789abcdefABCDEF") or len(size) > 16:
        raise MalformedResponse(f"not a chunk size: {line[:40]!r}")
    return int(size, 16)


def _framing_of(method: str, status: int, headers: CIMultiDictProxy[str]) -> _Framing:
    encoding = headers.get("Content-Encoding", "").strip().lower()
    if method == "HEAD" or status in (204, 304):
        return _Framing(0, False, False, "")
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        return _Framing(0, True, False, encoding)
    length = headers.get("Content-Length")
    if length is not None:
        if not length.strip().isdigit():
            raise MalformedResponse(f"not a Content-Length: {length[:40]!r}")
        return _Framing(int(length), False, False, encoding)
    return _Framing(0, False, True, encoding)


def _decoder(encoding: str) -> zlib._Decompress | None:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


def _cut(framing: _Framing) -> aiohttp.ClientPayloadError:
    # aiohttp's words for the same cut, so the message a client gets names it as before.
    kind, header = (
        ("TransferEncoding", "transfer") if framing.chunked else ("ContentLength", "content")
    )
    return aiohttp.ClientPayloadError(
        f"Response payload is not completed: <{kind}Error: 400, "
        f"message='Not enough data to satisfy {header} length header.'>"
    )


class Pool:
    """The idle connections to one origin, newest first (the likeliest to be still open)."""

    def __init__(self) -> None:
        self.idle: list[Connection] = []

    def put(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    def take(self) -> Connection | None:
        idle = self.idle
        while idle:
            conn = idle.pop()
            if not conn.closed and time.monotonic() - conn.idle_since < KEEPALIVE:
                return conn
            conn.close()
        return None

    def forget(self, conn: Connection) -> None:
        if conn in self.idle:
            self.idle.remove(conn)

    def sweep(self) -> None:
        """Close what has been idle longer than `KEEPALIVE` (the oldest are first)."""
        now = time.monotonic()
        while self.idle and now - self.idle[0].idle_since >= KEEPALIVE:
            self.idle.pop(0).close()


class Transport:
    """Requests to any origin, each on a kept-alive connection when one is idle."""

    def __init__(self, connect_timeout: float | None = None) -> None:
        self.connect_timeout = connect_timeout
        self._routes: dict[str, tuple[Origin, Pool]] = {}
        self._pools: dict[tuple[str, str, int], Pool] = {}
        self._tls: ssl.SSLContext | None = None
        self._sweeper: asyncio.TimerHandle | None = None

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> Response:
        """Send a request; the response once its status and headers arrived, body unread."""
        origin, pool = self._routes.get(url) or self._route(url)
        data = _request(method, origin, headers, body)
        conn = pool.take() or await self._connect(origin, pool)
        head = conn.start(method, data)
        try:
            return await head
        except BaseException:
            conn.close()
            raise

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for pool in self._pools.values():
            while pool.idle:
                pool.idle.pop().close()
        self._pools.clear()
        self._routes.clear()

    def _route(self, url: str) -> tuple[Origin, Pool]:
        """Where a URL's requests go, and the pool of its origin (remembered: URLs are few,
        a base and a handful of paths)."""
        origin = Origin.of(url)
        key = (origin.scheme, origin.host, origin.port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = Pool()
            self._sweep_later()
        if len(self._routes) > 1024:
            self._routes.clear()
        self._routes[url] = route = (origin, pool)
        return route

    async def _connect(self, origin: Origin, pool: Pool) -> Connection:
        loop = asyncio.get_running_loop()
        tls = origin.scheme == "https"
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()
        try:
            # 0 is no limit, as it was for aiohttp (and as the other timeouts read it).
            async with asyncio.timeout(self.connect_timeout or None):
                _, protocol = await loop.create_connection(
                    cast("Callable[[], asyncio.Protocol]", lambda: Connection(pool)),
                    origin.host,
                    origin.port,
                    ssl=self._tls if tls else None,
                    server_hostname=origin.host if tls else None,
                )
        except TimeoutError:
            raise aiohttp.ConnectionTimeoutError(
                f"Connection timeout to host {origin.scheme}://{origin.host_header}"
            ) from None
        except OSError as exc:
            # aiohttp's own error, for the same message as before: it reads only these fields.
            key = _Key(origin.host, origin.port, True)
            raise aiohttp.ClientConnectorError(key, exc) from exc  # type: ignore[arg-type]
        return cast(Connection, protocol)

    def _sweep_later(self) -> None:
        if self._sweeper is None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_later(KEEPALIVE, self._sweep)

    def _sweep(self) -> None:
        for pool in self._pools.values():
            pool.sweep()
        self._sweeper = asyncio.get_running_loop().call_later(KEEPALIVE, self._sweep)


def _request(method: str, origin: Origin, headers: Mapping[str, str], body: bytes) -> bytes:
    lines = [f"{method} {origin.target} HTTP/1.1\r\nHost: {origin.host_header}\r\n"]
    if origin.basic is not None and "Authorization" not in headers:
        lines.append(f"Authorization: {origin.basic}\r\n")  # a header given wins
    for name, value in headers.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"the {name} header holds a line break")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape") + body
