"""Keepalives while a front's stream waits for its first token (`proxy.path.keepalive`).

A local server can read a long prompt for minutes before its first token. On the Messages front
latchgate then sends `ping` events after `message_start`, as Anthropic's API does, and on the
Responses front repeated `response.in_progress` events (Codex's idle timer counts events, not
comments); the chat route sends nothing, as before. The answer that follows is whole.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic

from tests.conftest import StartProxy
from tests.fakeupstream import FakeUpstream, text_stream

MODEL = "fake-model"


async def events_of(url: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        assert resp.status == 200
        raw = (await resp.read()).decode()
    out = []
    for block in raw.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if len(lines) == 2:
            out.append((lines[0].removeprefix("event: "), json.loads(lines[1][6:])))
    return out


async def test_messages_pings_while_the_first_token_is_slow(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"},
                           keepalive=0.05)  # fmt: skip
    fake.push(text_stream("Hel", "lo", first_delay=0.6))
    body = {"model": MODEL, "max_tokens": 50, "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    events = await events_of(f"{lg.url}/v1/messages", body)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "message_start" and kinds.count("message_start") == 1
    first_block = kinds.index("content_block_start")
    assert kinds[1:first_block] and set(kinds[1:first_block]) == {"ping"}
    assert kinds[-1] == "message_stop"
    # The SDK reads the same stream whole.
    fake.push(text_stream("Hel", "lo", first_delay=0.3))
    client = anthropic.AsyncAnthropic(base_url=lg.url, api_key="x", max_retries=0)
    async with client.messages.stream(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].text == "Hello"  # type: ignore[union-attr]


async def test_responses_repeat_in_progress_and_chat_sends_nothing(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"},
                           keepalive=0.05)  # fmt: skip
    fake.push(text_stream("Hel", "lo", first_delay=0.6))
    events = await events_of(f"{lg.url}/v1/responses",
                             {"model": MODEL, "input": "Hi", "stream": True})  # fmt: skip
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.in_progress") >= 2  # the first comes with created
    assert kinds[-1] == "response.completed"
    numbers = [data["sequence_number"] for _, data in events]
    assert numbers == list(range(len(numbers)))
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "Hello"
    fake.push(text_stream("Hel", "lo", first_delay=0.6))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{lg.url}/v1/chat/completions",
            json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]},
        ) as resp,
    ):
        raw = await resp.read()
    assert b"keepalive" not in raw and raw.startswith(b"data: ")
