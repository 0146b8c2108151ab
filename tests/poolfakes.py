"""Fake pool members for `http/test_pools.py`: model servers that report their prompt cache, and
that can die and come back on the same port.

`Member` is the scripted fake upstream (`tests.fakeupstream.FakeUpstream`; `push` still scripts
replies) whose default answer names the member in its content and carries a usage report sized
by the conversation: `TOKENS_PER_MESSAGE` prompt tokens per message, of which the prefix shared
with the previous request on the same slot counts as cached. A llama.cpp-like member (`llama`)
says so in `timings` (`prompt_n`, `cache_n`), keeps one cache per `id_slot` it is sent, and
answers `GET /health` and `GET /props` (`total_slots`) as llama-server does; the others report
OpenAI's `prompt_tokens_details.cached_tokens` from one cache. `kill` stops a member the way a
crashed server stops (the port refuses connections, every open connection is cut), `revive`
starts it again on its port.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakeupstream import FakeUpstream, Json, Recorded, Reply, Stream, chunk, completion

TOKENS_PER_MESSAGE = 10
NO_SLOT = -1  # the cache of requests sent without an `id_slot`
N_CTX = 32768


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Member(FakeUpstream):
    """One fake server of a pool. `await start()`; read `requests`, `served`, `prompt_total`."""

    def __init__(
        self, name: str, *, llama: bool = False, slots: int = 2, userinfo: str = ""
    ) -> None:
        super().__init__()
        self.name = name
        self.llama = llama
        self.userinfo = userinfo  # "user:password@" in the URL latchgate is given
        # Set: every reply waits for it first (holds requests in flight on this member).
        self.gate: asyncio.Event | None = None
        # Given: asked first for each request without a scripted reply; None means the default.
        self.hook: Callable[[Recorded], Reply | None] | None = None
        self.served: list[dict[str, Any]] = []  # the bodies answered by the default answer
        self.prompt_total = 0  # prompt tokens reported by the default answer
        self.cached_total = 0  # of which cached
        self._caches: dict[int, list[Any]] = {}  # slot -> messages of its last request
        self._site: web.TCPSite | None = None
        if llama:
            self.routes["/health"] = Json({"status": "ok"})
            self.routes["/props"] = Json(
                {"total_slots": slots, "default_generation_settings": {"n_ctx": N_CTX}}
            )

    @property
    def url(self) -> str:
        return f"http://{self.userinfo}127.0.0.1:{self.port}/v1"

    @property
    def label(self) -> str:
        """The member's name in latchgate's metrics and logs (host:port)."""
        return f"127.0.0.1:{self.port}"

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests if r.path.endswith("/chat/completions")]

    async def start(self) -> Member:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A short shutdown: a killed member's cut connections leave nothing worth waiting for.
        self.runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await self.runner.setup()
        await self._listen(0)
        return self

    async def _listen(self, port: int) -> None:
        assert self.runner is not None
        site = web.TCPSite(self.runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self._site = site
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def kill(self) -> None:
        """Stop listening and cut every open connection, mid-answer or idle."""
        if self._site is not None:
            await self._site.stop()
            self._site = None
        assert self.runner is not None and self.runner.server is not None
        for handler in self.runner.server.connections:
            if handler.transport is not None:
                handler.transport.abort()

    async def revive(self) -> None:
        """Listen again on the same port, as a restarted server would."""
        await self._listen(self.port)

    async def _play(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        if self.gate is not None:
            await self.gate.wait()
        return await super()._play(request, reply)

    def _default(self, rec: Recorded) -> Reply:
        if self.hook is not None and (hooked := self.hook(rec)) is not None:
            return hooked
        body = rec.json
        if not rec.path.endswith("/chat/completions") or not isinstance(body, dict):
            return super()._default(rec)
        return self.answer(body)

    def answer(self, body: dict[str, Any]) -> Reply:
        """A chat completion (whole or streamed as asked) naming this member, with its usage."""
        messages = body.get("messages") or []
        slot = body.get("id_slot", NO_SLOT) if self.llama else NO_SLOT
        before = self._caches.get(slot, [])
        shared = 0
        while shared < min(len(before), len(messages)) and before[shared] == messages[shared]:
            shared += 1
        self._caches[slot] = messages
        prompt, cached = TOKENS_PER_MESSAGE * len(messages), TOKENS_PER_MESSAGE * shared
        self.served.append(body)
        self.prompt_total += prompt
        self.cached_total += cached
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": 2,
            "total_tokens": prompt + 2,
        }
        extra: dict[str, Any] = {}
        if self.llama:
            extra["timings"] = {"prompt_n": prompt - cached, "cache_n": cached}
        else:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        content = f"{self.name} answered"
        if not body.get("stream"):
            return Json({**completion(content, usage=usage), **extra})
        return Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": f"{self.name} "}),
                chunk({"content": "answered"}),
                chunk({}, "stop"),
                {**chunk(choices=[], usage=usage), **extra},
                "[DONE]",
            ]
        )
