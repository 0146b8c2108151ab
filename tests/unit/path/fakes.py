"""Fakes for driving the attempt loop and the relays without sockets (see test_attempts).

`FakeUpstream` hands out scripted responses (`Reply`) shaped like aiohttp's ClientResponse as
far as the relays read it; `Wire` records what the client would have received; `FakeLayer`
is a scripted agent layer that records what the loop asked it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.observe.events import RequestEvents
from proxy.path.job import Decision, Job, StreamProcessor
from proxy.settings import UpstreamConfig


class FakeContent:
    """The body of a scripted response: its reads, as aiohttp's StreamReader gives them."""

    def __init__(self, reads: list[bytes], then: BaseException | None = None) -> None:
        self._reads = deque(reads)
        self._then = then

    async def readany(self) -> bytes:
        await asyncio.sleep(0)
        if self._reads:
            return self._reads.popleft()
        if self._then is not None:
            raise self._then
        return b""

    async def read(self, n: int = -1) -> bytes:
        return await self.readany()

    async def iter_any(self):  # type: ignore[no-untyped-def]
        while chunk := await self.readany():
            yield chunk

    def at_eof(self) -> bool:
        return not self._reads


@dataclass
class Reply:
    """One scripted upstream response: a status, a content type and the body's reads."""

    reads: list[bytes]
    status: int = 200
    ctype: str = "text/event-stream"
    then: BaseException | None = None  # raised after the reads (a broken connection)

    @staticmethod
    def events(*items: Any, cut: int | None = None, **kw: Any) -> Reply:
        """An SSE reply of `items` (dicts framed as data events, bytes as they are, "[DONE]"),
        in one read, or cut into reads of `cut` bytes."""
        wire = b"".join(
            b"data: [DONE]\n\n"
            if item == "[DONE]"
            else item
            if isinstance(item, bytes)
            else b"data: " + orjson.dumps(item) + b"\n\n"
            for item in items
        )
        reads = [wire] if cut is None else [wire[i : i + cut] for i in range(0, len(wire), cut)]
        return Reply(reads, **kw)

    @staticmethod
    def json(body: Any, status: int = 200) -> Reply:
        return Reply([orjson.dumps(body)], status=status, ctype="application/json")


class FakeResponse:
    def __init__(self, reply: Reply) -> None:
        self.status = reply.status
        self.headers = CIMultiDictProxy(CIMultiDict({"Content-Type": reply.ctype}))
        self.content = FakeContent(reply.reads, reply.then)
        self.released = self.closed = False

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.content.readany():
            parts.append(chunk)
        return b"".join(parts)

    def release(self) -> None:
        self.released = True

    def close(self) -> None:
        self.closed = True


class FakeUpstream:
    """What the path asks of an upstream: `open` (scripted), its name, config and id."""

    def __init__(self, *replies: Reply | BaseException, **config: Any) -> None:
        self.script: deque[Reply | BaseException] = deque(replies)
        self.sent: list[bytes] = []
        self.name = "fake"
        self.endpoint_id = "0" * 64
        self.config = UpstreamConfig(name="fake", base_url="http://fake/v1", **config)
        self.pool = None  # one server
        self.managed = None  # not a llama-server latchgate runs

    async def open(self, path: str, body: bytes, *, client_auth: str | None = None) -> Any:
        self.sent.append(body)
        reply = self.script.popleft()
        if isinstance(reply, BaseException):
            raise reply
        return FakeResponse(reply)


class Wire:
    """The client's side of the connection: records headers and every byte written."""

    def __init__(self) -> None:
        self.status_line = ""
        self.headers: CIMultiDict[str] | None = None
        self.writes: list[bytes] = []
        self.ended = False
        self.buffer_size = 0
        self.output_size = 0
        self.length: int | None = None

    def enable_chunking(self) -> None: ...

    def enable_compression(self, *args: Any, **kw: Any) -> None: ...

    def send_headers(self) -> None: ...

    async def write_headers(self, status_line: str, headers: CIMultiDict[str]) -> None:
        self.status_line, self.headers = status_line, headers

    async def write(self, data: bytes, *args: Any, **kw: Any) -> None:
        self.writes.append(bytes(data))
        self.output_size += len(data)

    async def write_eof(self, data: bytes = b"") -> None:
        if data:
            self.writes.append(bytes(data))
        self.ended = True

    async def drain(self) -> None: ...

    @property
    def body(self) -> bytes:
        return b"".join(self.writes)


class _Transport:
    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return False


def client_request(wire: Wire) -> web.Request:
    transport = _Transport()
    request = make_mocked_request("POST", "/v1/chat/completions", writer=wire, transport=transport)
    return request


@dataclass
class FakeLayer:
    """A scripted agent layer: errors and failures answered by `errors` / `failures` in turn
    (default: return the error to the client), everything else passed through."""

    errors: deque[Decision] = field(default_factory=deque)
    failures: deque[Decision] = field(default_factory=deque)
    processor: Callable[[], StreamProcessor | None] = lambda: None
    asked: list[tuple[str, Any]] = field(default_factory=list)

    async def preflight(self, job: Job) -> None:
        return None

    def prepare(self, job: Job) -> tuple[dict[str, Any], bytes]:
        self.asked.append(("prepare", job.attempts))
        return job.body, job.raw

    def on_error(self, job: Job, status: int, headers: Any, raw: bytes) -> Decision:
        self.asked.append(("error", (status, raw)))
        return self.errors.popleft() if self.errors else Decision.give(status, raw)

    def on_failure(self, job: Job, reason: str, detail: str) -> Decision:
        self.asked.append(("failure", reason))
        if self.failures:
            return self.failures.popleft()
        return Decision.give(502, {"error": {"message": detail, "code": "upstream_" + reason}})

    def whole(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def settle(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | Decision:
        return body

    def settle_stream(
        self, job: Job, unsent: list[bytes], tail: list[dict[str, Any]]
    ) -> tuple[list[bytes], bool] | Decision:
        frames = [b"data: " + orjson.dumps(c) + b"\n\n" for c in tail]
        return [*unsent, *frames], any(c.get("choices") for c in tail)

    def stream_processor(self, job: Job) -> StreamProcessor | None:
        return self.processor()

    def on_usage(self, job: Job, usage: dict[str, Any]) -> None:
        self.asked.append(("usage", usage))

    def forward_usage(self, job: Job) -> bool:
        return False


def make_job(upstream: FakeUpstream, *, stream: bool, route: str = "chat") -> Job:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    if stream:
        body["stream"] = True
    return Job(
        upstream=upstream,  # type: ignore[arg-type]
        route=route,
        path="/chat/completions",
        raw=orjson.dumps(body),
        body=body,
        stream=stream,
        events=RequestEvents(request_id="r1", upstream="fake", model="m"),
    )


class FeedsEveryEvent:
    """For a test stream processor: nothing is taken in unread, so every event goes to `feed`."""

    def pass_texts(self, texts: list[str]) -> int:
        return 0

    def hold_texts(self, texts: list[str]) -> int:
        return 0

    def refuses_texts(self) -> bool:
        return True

    def add_arguments(self, call: int, texts: list[str]) -> int:
        return 0

    def pass_inert(self) -> bool:
        return False

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        return False
