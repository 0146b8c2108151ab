"""Fixtures that start real servers on 127.0.0.1: a scripted fake upstream and latchgate itself."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web
from hypothesis import settings as hypothesis_settings

from proxy import knowntools
from proxy.http.app import PROXY_KEY, Proxy
from proxy.http.server import start
from proxy.settings import Settings, parse_upstream
from tests.fakeupstream import FakeUpstream

# CI runs the property tests on a fixed sequence of examples, so a run is reproducible and a
# failure there is one anybody can replay; local runs keep exploring new examples each time.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


class Running:
    """A started latchgate: its URL, its Proxy object, and SDK clients pointed at it."""

    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self.runner = runner
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def proxy(self) -> Proxy:
        return self.runner.app[PROXY_KEY]

    def client(self, api_key: str = "unused", **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, **kw)

    def sync_client(self, api_key: str = "unused", **kw: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, **kw)


@pytest.fixture(autouse=True, scope="session")
def tools_lists_left_alone() -> Iterator[None]:
    """Every request of the run that declared a remembered tools list shared it: none of them
    may have changed it (`proxy.knowntools`)."""
    yield
    assert knowntools.KNOWN.intact(), "a request changed a shared tools list in place"


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    up = FakeUpstream()
    await up.start()
    yield up
    await up.close()


StartProxy = Callable[..., Awaitable[Running]]


@pytest.fixture
async def start_proxy(tmp_path: Path) -> AsyncIterator[StartProxy]:
    """Start latchgate in front of given upstreams; `upstream` tables as in the TOML config."""
    runners: list[web.AppRunner] = []

    async def _start(*upstreams: dict[str, Any], **server: Any) -> Running:
        ups = [parse_upstream(u, f"upstreams[{i}]") for i, u in enumerate(upstreams)]
        settings = Settings(
            upstreams=ups, port=0, state_file=tmp_path / "state.json", probe_interval=3600
        )
        for key, value in server.items():
            setattr(settings, key, value)
        runner, port = await start(settings)
        runners.append(runner)
        return Running(runner, port)

    yield _start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def lg(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    """latchgate in front of the fake upstream, kind generic, every model."""
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"})
