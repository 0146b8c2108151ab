"""Raw HTTP/1.1 over a socket, for requests no client library will send (bad bytes in headers,
broken framing, odd request lines) and for reading a response exactly as it came."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import orjson


@dataclass
class RawAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def json(self) -> object:
        return orjson.loads(self.body)


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


def parse_answer(raw: bytes) -> RawAnswer:
    """One HTTP/1.1 response (the connection closed after it), after any 1xx interim ones."""
    while raw.startswith(b"HTTP/1.1 1"):
        raw = raw.partition(b"\r\n\r\n")[2]
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
    answer = RawAnswer(status, headers, body)
    if (answer.header("Transfer-Encoding") or "").lower() == "chunked":
        answer.body = _dechunk(body)
    elif (length := answer.header("Content-Length")) is not None:
        assert len(body) == int(length), f"Content-Length {length} but {len(body)} bytes came"
    return answer


async def send_raw(port: int, data: bytes, *, timeout: float = 30.0) -> bytes:
    """Send `data` as it is and read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()


def request_bytes(
    method: str, path: str, headers: list[bytes] | None = None, body: bytes = b""
) -> bytes:
    """An HTTP/1.1 request with `Connection: close`; `headers` are raw header lines."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    if body or method == "POST":
        lines.append(b"Content-Length: %d" % len(body))
    lines += headers or []
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def raw_request(
    port: int, method: str, path: str, headers: list[bytes] | None = None, body: bytes = b""
) -> RawAnswer:
    return parse_answer(await send_raw(port, request_bytes(method, path, headers, body)))
