"""An instant fake upstream for the proxy benchmark: fixed bodies, answered as fast as possible.

The benchmark measures what a proxy adds, so the upstream must cost next to nothing and answer
the same bytes every time. nginx `return 200` is the preferred server (C, one worker, no
request-body parsing); when nginx is not installed, a raw asyncio protocol with the bodies
pre-encoded stands in (cheaper than any aiohttp server, still Python).

One server answers both response kinds, chosen by path, so every proxy is configured with a
plain base URL and never has to look into bodies:

    POST {root}/whole/v1/chat/completions   a chat completion (application/json)
    POST {root}/stream/v1/chat/completions  an SSE stream: 20 chunk events, then [DONE]
    GET  {root}/{whole,stream}/v1/models    a model listing (latchgate probes it at start)

Beside those plain-text answers, each kind has two tool-call answers at a path of its own
(`prefix(kind, answer)`), with their model listings too:

    {root}/{kind}-call/v1/...      a native call, get_weather({"city": "Paris"}): a completion
                                   with `tool_calls` and finish_reason tool_calls, or a stream of
                                   the role chunk, the call's name chunk, 4 argument fragments,
                                   the finish chunk and [DONE]
    {root}/{kind}-textcall/v1/...  the same call written as text in the Hermes form
                                   (`<tool_call>{...}</tool_call>` as content), whole or split
                                   over 10 content chunks, finish_reason stop: what latchgate
                                   recovers

Run alone: `python bench/upstream.py --port 9000 [--impl nginx|asyncio]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import cast

import orjson

MODEL = "bench-model"
CREATED = 1796011305
COMPLETION_ID = "chatcmpl-bench0000000000000000000000"
SSE_CONTENT_CHUNKS = 18  # + the role chunk + the finish chunk = 20 events, then [DONE]
WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.")


KINDS = ("whole", "stream")
ANSWERS = ("text", "call", "textcall")  # plain text, a native tool call, a call written as text
CALL_NAME = "get_weather"
CALL_ARGUMENTS = {"city": "Paris"}
CALL_ID = "call_bench0"
# The native call's arguments as the stream sends them: 4 fragments of `{"city": "Paris"}`.
CALL_FRAGMENTS = ('{"ci', 'ty": ', '"Par', 'is"}')
TEXT_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
TEXT_CALL_CHUNKS = 10


def prefix(kind: str, answer: str = "text") -> str:
    """The path segment that selects an answer: `whole`, `stream`, `whole-call`, ..."""
    return kind if answer == "text" else f"{kind}-{answer}"


def _native_call(arguments: str) -> dict[str, object]:
    return {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": CALL_NAME, "arguments": arguments},
    }


def completion_body(answer: str = "text") -> bytes:
    """A llama.cpp-shaped chat completion (511 bytes for the text answer)."""
    message: dict[str, object] = {"role": "assistant", "content": "".join(WORDS * 2)}
    finish = "stop"
    if answer == "call":
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [_native_call("".join(CALL_FRAGMENTS))],
        }
        finish = "tool_calls"
    elif answer == "textcall":
        message = {"role": "assistant", "content": TEXT_CALL}
    return orjson.dumps(
        {
            "choices": [{"finish_reason": finish, "index": 0, "message": message}],
            "created": CREATED,
            "model": MODEL,
            "system_fingerprint": "b0-unknown",
            "object": "chat.completion",
            "usage": {"completion_tokens": 18, "prompt_tokens": 24, "total_tokens": 42},
            "id": COMPLETION_ID,
            "timings": {
                "prompt_n": 24,
                "prompt_ms": 176.921,
                "predicted_n": 18,
                "predicted_ms": 931.2,
                "predicted_per_second": 19.32,
            },
        }
    )


def _chunk(delta: dict[str, object], finish: str | None) -> bytes:
    event = {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
        "created": CREATED,
        "id": COMPLETION_ID,
        "model": MODEL,
        "system_fingerprint": "b0-unknown",
        "object": "chat.completion.chunk",
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


def sse_body(answer: str = "text") -> bytes:
    """A llama.cpp-shaped SSE stream: role chunk, 18 content chunks, finish chunk, [DONE]
    (for a call: the call's chunks instead of the content chunks)."""
    parts = [_chunk({"role": "assistant", "content": None}, None)]
    finish = "stop"
    if answer == "call":
        first = {"index": 0, **_native_call("")}
        parts.append(_chunk({"tool_calls": [first]}, None))
        parts += [
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, None)
            for piece in CALL_FRAGMENTS
        ]
        finish = "tool_calls"
    elif answer == "textcall":
        size = -(-len(TEXT_CALL) // TEXT_CALL_CHUNKS)
        pieces = [TEXT_CALL[i : i + size] for i in range(0, len(TEXT_CALL), size)]
        parts += [_chunk({"content": piece}, None) for piece in pieces]
    else:
        parts += [
            _chunk({"content": WORDS[i % len(WORDS)]}, None) for i in range(SSE_CONTENT_CHUNKS)
        ]
    parts.append(_chunk({}, finish))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def sse_events(answer: str = "text") -> int:
    """How many events the stream of `answer` has before [DONE] (20 for the text answer)."""
    return sse_body(answer).count(b"data: ") - 1


def models_body() -> bytes:
    return orjson.dumps(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
    )


def _answers() -> list[tuple[str, str, str, bytes]]:
    """Every (kind, answer, content type, body) the upstream serves."""
    out = []
    for kind in KINDS:
        for answer in ANSWERS:
            if kind == "whole":
                out.append((kind, answer, "application/json", completion_body(answer)))
            else:
                out.append((kind, answer, "text/event-stream", sse_body(answer)))
    return out


# -- nginx ---------------------------------------------------------------------------------


def _nginx_string(body: bytes) -> str:
    text = body.decode()
    # `$` would start a variable in nginx's `return` text; the bodies are ours, so refuse it.
    if "$" in text:
        raise ValueError("fake bodies must not contain '$'")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _nginx_pieces(body: bytes) -> tuple[str, str]:
    """`set` directives holding `body` in pieces, and the `$p0$p1...` text that joins them.

    nginx caps one configuration parameter at 4 KiB, and the SSE body is larger; variables set
    from literals are copied, not re-interpolated, so joining them costs a few memcpys.
    """
    text = body.decode()
    size = 2000
    pieces = [text[i : i + size].encode() for i in range(0, len(text), size)]
    sets = " ".join(f"set $p{i} {_nginx_string(p)};" for i, p in enumerate(pieces))
    return sets, "".join(f"$p{i}" for i in range(len(pieces)))


def nginx_config(port: int, run_dir: Path) -> str:
    """A self-contained nginx.conf: one process, no logs, keep-alive without a request cap."""
    locations = []
    for kind, answer, ctype, body in _answers():
        sets, refs = _nginx_pieces(body)
        at = prefix(kind, answer)
        locations.append(
            f"""
        location = /{at}/v1/chat/completions {{
            default_type {ctype};
            {sets}
            return 200 "{refs}";
        }}
        location = /{at}/v1/models {{
            default_type application/json;
            return 200 {_nginx_string(models_body())};
        }}"""
        )
    tmp = run_dir / "nginx-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return f"""
daemon off;
master_process off;
worker_processes 1;
pid {run_dir / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 64m;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        {"".join(locations)}
        location / {{ return 404; }}
    }}
}}
"""


def nginx_command(port: int, run_dir: Path) -> list[str] | None:
    """The command that runs nginx on `port` in the foreground, or None without nginx."""
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx is None:
        return None
    conf = run_dir / "nginx.conf"
    conf.write_text(nginx_config(port, run_dir))
    return [nginx, "-p", str(run_dir), "-c", str(conf)]


# -- raw asyncio fallback --------------------------------------------------------------------


def _http_response(status: str, ctype: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 "
        + status.encode()
        + b"\r\nContent-Type: "
        + ctype
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: keep-alive\r\n\r\n"
        + body
    )


def _responses() -> dict[bytes, bytes]:
    out = {}
    for kind, answer, ctype, body in _answers():
        at = b"/" + prefix(kind, answer).encode()
        out[at + b"/v1/chat/completions"] = _http_response("200 OK", ctype.encode(), body)
        out[at + b"/v1/models"] = _http_response("200 OK", b"application/json", models_body())
    return out


def take_request(buf: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The first whole request in `buf` (a keep-alive connection's bytes, framed by
    Content-Length): its head (without the blank line), its body and the bytes after it; None
    while it has not all come."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end]
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    total = end + 4 + length
    if len(buf) < total:
        return None
    return head, buf[end + 4 : total], buf[total:]


class _Instant(asyncio.Protocol):
    """HTTP/1.1 keep-alive with pipelining; reads Content-Length bodies and ignores them."""

    responses = _responses()
    not_found = _http_response("404 Not Found", b"text/plain", b"not found")

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass, so cast, not isinstance.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (taken := take_request(self.buf)) is not None:
            head, _, self.buf = taken
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            assert self.transport is not None
            self.transport.write(self.responses.get(path, self.not_found))


async def serve_asyncio(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Instant, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def asyncio_command(port: int) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--port", str(port), "--impl", "asyncio"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--impl", choices=("nginx", "asyncio"), default="nginx")
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/latchgate-bench"))
    args = parser.parse_args()
    if args.impl == "nginx":
        args.run_dir.mkdir(parents=True, exist_ok=True)
        cmd = nginx_command(args.port, args.run_dir)
        if cmd is None:
            sys.exit("nginx is not installed; use --impl asyncio")
        os.execv(cmd[0], cmd)  # become nginx, so the caller's pid is nginx's pid
    try:
        import uvloop

        uvloop.run(serve_asyncio(args.port))
    except ImportError:
        asyncio.run(serve_asyncio(args.port))


if __name__ == "__main__":
    main()
