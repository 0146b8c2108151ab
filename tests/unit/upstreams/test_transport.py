"""The request path's HTTP/1.1 client against scripted servers on 127.0.0.1.

Each server is a real socket server that answers every request with bytes the test chose, cut
where the test chose: the transport is about the wire, so the wire is what is scripted (framing,
cuts, reuse, errors), and what it sent is recorded to be checked.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
import uvloop

from proxy.upstreams.transport import HIGH_WATER, MalformedResponse, Transport

Answer = Callable[[bytes], list[bytes] | None]  # request head+body -> pieces to write (None: close)


@dataclass
class Scripted:
    """A server whose answer to each request is the `answer` function's pieces, each written
    on its own (so a test can cut a response anywhere)."""

    answer: Answer
    close_after: bool = False  # close the connection after each answer
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                pieces = self.answer(request)
                if pieces is None:
                    break
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)  # each piece its own read on the other side
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the test ended
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"


class Servers:
    """Starts scripted servers, and stops them all at the end."""

    def __init__(self) -> None:
        self.servers: list[asyncio.Server] = []

    async def __call__(self, answer: Answer, **kwargs: bool) -> Scripted:
        scripted = Scripted(answer, **kwargs)
        server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0)
        scripted.port = server.sockets[0].getsockname()[1]
        self.servers.append(server)
        return scripted

    def close(self) -> None:
        for server in self.servers:
            server.close()


@pytest.fixture
async def serve() -> AsyncIterator[Servers]:
    servers = Servers()
    yield servers
    servers.close()


def fixed(*pieces: bytes) -> Answer:
    return lambda _request: list(pieces)


def whole(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    return head + b"".join(extra) + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(*chunks: bytes, trailer: bytes = b"") -> bytes:
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
    out += b"Content-Type: text/event-stream\r\n\r\n"
    for chunk in chunks:
        out += b"%x;ext=1\r\n%s\r\n" % (len(chunk), chunk)
    return out + b"0\r\n" + trailer + b"\r\n"


HEADERS = {"Content-Type": "application/json", "User-Agent": "latchgate/test"}


async def post(transport: Transport, url: str, body: bytes = b"{}") -> tuple[int, bytes]:
    resp = await transport.send("POST", url, HEADERS, body)
    raw = await resp.read()
    resp.release()
    return resp.status, raw


async def test_a_content_length_answer_is_read_and_its_connection_reused(serve: Servers) -> None:
    server = await serve(fixed(whole(b'{"ok":1}', b"X-Request-Id: r1\r\n")))
    transport = Transport()
    resp = await transport.send("POST", server.url + "?a=1", HEADERS, b'{"q":1}')
    assert resp.status == 200
    assert resp.headers.get("x-request-id") == "r1"  # any case
    assert resp.headers["Content-Type"] == "application/json"
    assert await resp.read() == b'{"ok":1}'
    assert resp.content.at_eof()
    resp.release()
    assert await post(transport, server.url) == (200, b'{"ok":1}')
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/chat/completions?a=1 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % server.port in first
    assert b"\r\nContent-Length: 7\r\n" in first
    assert b"\r\nUser-Agent: latchgate/test\r\n" in first
    assert b"Accept-Encoding" not in first
    assert first.endswith(b'\r\n\r\n{"q":1}')
    await transport.close()


async def test_a_chunked_stream_cut_at_every_byte_arrives_whole(serve: Servers) -> None:
    events = [b'data: {"n":%d}\n\n' % i for i in range(3)] + [b"data: [DONE]\n\n"]
    wire = chunked(*events, trailer=b"X-Trailer: t\r\n")
    server = await serve(fixed(*(wire[i : i + 1] for i in range(len(wire)))))
    transport = Transport()
    resp = await transport.send("POST", server.url, HEADERS, b"{}")
    got = [piece async for piece in resp.content.iter_any()]
    assert b"".join(got) == b"".join(events)
    assert len(got) > 1  # read as it came, not at the end
    resp.release()
    assert await post(transport, server.url) == (200, b"".join(events))
    assert server.connections == 1  # the trailer was read: the connection was clean to reuse
    await transport.close()


async def test_a_body_framed_by_the_connections_end_is_read_and_not_reused(serve: Servers) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    server = await serve(fixed(head, b"data: a\n\n", b"data: [DONE]\n\n"), close_after=True)
    transport = Transport()
    assert await post(transport, server.url) == (200, b"data: a\n\ndata: [DONE]\n\n")
    assert await post(transport, server.url) == (200, b"data: a\n\ndata: [DONE]\n\n")
    assert server.connections == 2
    await transport.close()


async def test_connection_close_on_a_framed_answer_is_not_reused(serve: Servers) -> None:
    server = await serve(fixed(whole(b"{}", b"Connection: close\r\n")))
    transport = Transport()
    for _ in range(2):
        assert await post(transport, server.url) == (200, b"{}")
    assert server.connections == 2
    await transport.close()


@pytest.mark.parametrize(
    ("wire", "named"),
    [
        (whole(b'{"ok":1}')[:-3], "ContentLengthError"),  # Content-Length promised more
        (chunked(b"data: a\n\n")[:-5], "TransferEncodingError"),  # no last chunk
    ],
    ids=["content-length", "chunked"],
)
async def test_a_body_cut_short_is_an_error_not_an_end(
    serve: Servers, wire: bytes, named: str
) -> None:
    server = await serve(fixed(wire), close_after=True)
    transport = Transport()
    resp = await transport.send("POST", server.url, HEADERS, b"{}")
    # In aiohttp's words, which the messages clients get quote.
    with pytest.raises(aiohttp.ClientPayloadError, match=f"not completed: <{named}: 400"):
        await resp.read()
    resp.close()
    await transport.close()


async def test_a_server_that_closes_without_answering_is_disconnected(serve: Servers) -> None:
    server = await serve(lambda _request: None)
    transport = Transport()
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await transport.send("POST", server.url, HEADERS, b"{}")
    await transport.close()


async def test_a_refused_connect_names_the_host_as_aiohttp_did(unused_tcp_port: int) -> None:
    transport = Transport()
    with pytest.raises(aiohttp.ClientConnectorError) as info:
        await transport.send("POST", f"http://127.0.0.1:{unused_tcp_port}/v1/x", HEADERS, b"")
    assert str(info.value).startswith(f"Cannot connect to host 127.0.0.1:{unused_tcp_port} ")
    await transport.close()


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * (70 * 1024), "too large"),
    ],
)
async def test_what_is_not_an_http_answer_fails(serve: Servers, wire: bytes, why: str) -> None:
    server = await serve(fixed(wire))
    transport = Transport()
    with pytest.raises(MalformedResponse, match=why):
        await transport.send("POST", server.url, HEADERS, b"{}")
    assert isinstance(MalformedResponse("x"), aiohttp.ClientConnectionError)  # handled as one
    await transport.close()


@pytest.mark.parametrize("size", [b"zz", b"0x10", b"-1", b"1_0", b""])
async def test_a_bad_chunk_size_fails_the_read(serve: Servers, size: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = await serve(fixed(head, b"5\r\nhello\r\n", size + b"\r\nabc\r\n0\r\n\r\n"))
    transport = Transport()
    resp = await transport.send("POST", server.url, HEADERS, b"{}")
    assert await resp.content.readany() == b"hello"
    with pytest.raises(MalformedResponse, match="chunk size"):
        await resp.content.readany()
    resp.close()
    await transport.close()


async def test_an_interim_100_continue_is_skipped(serve: Servers) -> None:
    server = await serve(fixed(b"HTTP/1.1 100 Continue\r\n\r\n" + whole(b"{}")))
    transport = Transport()
    assert await post(transport, server.url) == (200, b"{}")
    await transport.close()


@pytest.mark.parametrize("split", [False, True])
async def test_a_long_run_of_interim_answers_is_skipped_without_nesting(
    serve: Servers, split: bool
) -> None:
    # Read in a loop, not a call per head: compiled, a nesting as deep as the server's run
    # would crash the process (proxy/compiled.py), where the sources raised RecursionError.
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * 100_000
    pieces = (interim[:13], interim[13:], whole(b"{}")) if split else (interim + whole(b"{}"),)
    server = await serve(fixed(*pieces))
    transport = Transport()
    assert await post(transport, server.url) == (200, b"{}")
    await transport.close()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_body_is_decoded(serve: Servers, encoding: str) -> None:
    body = b'{"text":"' + b"abc" * 1000 + b'"}'
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    wire = whole(packed, b"Content-Encoding: %s\r\n" % encoding.encode())
    server = await serve(fixed(wire[:200], wire[200:]))
    transport = Transport()
    assert await post(transport, server.url) == (200, body)
    await transport.close()


async def test_a_response_released_before_its_end_gives_up_its_connection(serve: Servers) -> None:
    answers = iter([[chunked(b"data: a\n\n")[:-5]]])  # the first never ends, the next do
    server = await serve(lambda _request: next(answers, [whole(b"{}")]))
    transport = Transport()
    resp = await transport.send("POST", server.url, HEADERS, b"{}")
    assert await resp.content.readany() == b"data: a\n\n"
    resp.release()  # the last chunk not read yet
    await post(transport, server.url)
    assert server.connections == 2
    await transport.close()


async def test_bytes_beyond_the_body_spoil_the_connection(serve: Servers) -> None:
    server = await serve(fixed(whole(b"{}") + b"garbage"))
    transport = Transport()
    assert await post(transport, server.url) == (200, b"{}")
    assert await post(transport, server.url) == (200, b"{}")
    assert server.connections == 2
    await transport.close()


async def test_204_has_no_body_and_keeps_the_connection(serve: Servers) -> None:
    server = await serve(fixed(b"HTTP/1.1 204 No Content\r\n\r\n"))
    transport = Transport()
    assert await post(transport, server.url) == (204, b"")
    assert await post(transport, server.url) == (204, b"")
    assert server.connections == 1
    await transport.close()


async def test_a_body_after_a_204_spoils_the_connection(serve: Servers) -> None:
    server = await serve(fixed(b"HTTP/1.1 204 No Content\r\n\r\n{}"))
    transport = Transport()
    assert await post(transport, server.url) == (204, b"")
    assert await post(transport, server.url) == (204, b"")
    assert server.connections == 2
    await transport.close()


async def test_url_credentials_go_as_basic_auth_unless_a_header_is_given(serve: Servers) -> None:
    server = await serve(fixed(whole(b"{}")))
    transport = Transport()
    url = server.url.replace("http://", "http://us%40er:p%3Ass@")
    await post(transport, url)
    await transport.send("POST", url, {"Authorization": "Bearer k"}, b"")
    assert b"\r\nAuthorization: Basic dXNAZXI6cDpzcw==\r\n" in server.requests[0]  # us@er:p:ss
    assert b"\r\nAuthorization: Bearer k\r\n" in server.requests[1]
    assert b"Basic" not in server.requests[1]
    await transport.close()


async def test_a_header_with_a_line_break_is_refused_before_sending(serve: Servers) -> None:
    server = await serve(fixed(whole(b"{}")))
    transport = Transport()
    with pytest.raises(ValueError, match="line break"):
        await transport.send("POST", server.url, {"Authorization": "a\r\nX-Evil: 1"}, b"")
    assert server.requests == []
    await transport.close()


async def test_a_large_body_read_slowly_arrives_intact(serve: Servers) -> None:
    body = bytes(range(256)) * (8 * HIGH_WATER // 256)  # eight times the pause mark
    wire = whole(body)
    server = await serve(fixed(*(wire[i : i + 65536] for i in range(0, len(wire), 65536))))
    transport = Transport()
    resp = await transport.send("POST", server.url, HEADERS, b"{}")
    got = bytearray()
    while chunk := await resp.content.read(10_000):
        assert len(chunk) <= 10_000
        got += chunk
        await asyncio.sleep(0)
    assert bytes(got) == body
    resp.release()
    assert await post(transport, server.url) == (200, body)
    assert server.connections == 1
    await transport.close()


async def test_a_cancelled_request_closes_its_connection(serve: Servers) -> None:
    gate = asyncio.Event()

    def never(_request: bytes) -> list[bytes]:
        gate.set()
        return []  # says nothing

    server = await serve(never)
    transport = Transport()
    sending = asyncio.ensure_future(transport.send("POST", server.url, HEADERS, b"{}"))
    await gate.wait()
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    server.answer = fixed(whole(b"{}"))
    assert await post(transport, server.url) == (200, b"{}")
    assert server.connections == 2  # the silent connection was not handed to the next request
    await transport.close()


@pytest.mark.parametrize("limit", [0.0, None])
async def test_a_connect_timeout_of_zero_is_no_limit(serve: Servers, limit: float | None) -> None:
    server = await serve(fixed(whole(b"{}")))
    transport = Transport(connect_timeout=limit)
    assert await post(transport, server.url) == (200, b"{}")
    await transport.close()


async def test_a_url_that_is_not_http_is_refused() -> None:
    transport = Transport()
    with pytest.raises(aiohttp.InvalidURL):
        await transport.send("POST", "ftp://127.0.0.1/v1", HEADERS, b"")


ON_BOTH_LOOPS = [
    test_a_content_length_answer_is_read_and_its_connection_reused,
    test_a_chunked_stream_cut_at_every_byte_arrives_whole,
    test_a_body_framed_by_the_connections_end_is_read_and_not_reused,
    test_a_server_that_closes_without_answering_is_disconnected,
    test_a_response_released_before_its_end_gives_up_its_connection,
    test_a_large_body_read_slowly_arrives_intact,
    test_a_cancelled_request_closes_its_connection,
]


@pytest.mark.parametrize("scenario", ON_BOTH_LOOPS, ids=lambda f: f.__name__[5:])
def test_on_uvloop(scenario: Callable[[Servers], Awaitable[None]]) -> None:
    async def run() -> None:
        servers = Servers()
        try:
            await scenario(servers)
        finally:
            servers.close()

    uvloop.run(run())
