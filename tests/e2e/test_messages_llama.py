"""The Messages front's count_tokens against the real llama-server (issue 16).

latchgate counts a Messages body with the server's own tokenizer where it has one: the chat
template rendered by llama-server (`/apply-template`) and tokenized (`/tokenize`). The count
must be exactly what the server itself says for the same conversation, and grow with it; the
Anthropic SDK reads it as `input_tokens`.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from tests.conftest import StartProxy
from tests.e2e.conftest import LlamaServer
from tests.e2e.test_llama import front

pytestmark = pytest.mark.e2e

MODEL = "qwen2.5-coder-0.5b-instruct"


async def server_count(server: LlamaServer, messages: list[dict[str, Any]]) -> int:
    """What the server says the conversation is, asked directly."""
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.url}/apply-template", json={"messages": messages}) as r:
            prompt = (await r.json())["prompt"]
        async with session.post(f"{server.url}/tokenize", json={"content": prompt}) as r:
            return len((await r.json())["tokens"])


async def test_count_tokens_is_the_servers_own_count(
    llama_wide: LlamaServer, start_proxy: StartProxy
) -> None:
    lg = await front(start_proxy, llama_wide)
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="x", max_retries=0)
    short = [{"role": "user", "content": "Hi"}]
    long = [{"role": "user", "content": "Tell me about foxes. " * 40}]
    counted = await sdk.messages.count_tokens(model=MODEL, system="Be brief.", messages=short)
    expected = await server_count(llama_wide, [{"role": "system", "content": "Be brief."}, *short])
    assert counted.input_tokens == expected > 0
    longer = await sdk.messages.count_tokens(model=MODEL, messages=long)
    assert longer.input_tokens == await server_count(llama_wide, long)
    assert longer.input_tokens > counted.input_tokens + 100
