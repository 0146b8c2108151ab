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


async def test_a_claude_code_shaped_request_is_answered(
    llama_wide: LlamaServer, start_proxy: StartProxy
) -> None:
    # What Claude Code adds to every request (adaptive thinking, an effort, a system message
    # inside messages, cache_control) must not make the server refuse a short one: it is sent as
    # llama.cpp's own switches, which the server takes or latchgate learns to leave out.
    lg = await front(start_proxy, llama_wide)
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="x", max_retries=0)
    async with sdk.messages.stream(
        model=MODEL,
        max_tokens=16,
        system=[
            {"type": "text", "text": "Answer in one word.", "cache_control": {"type": "ephemeral"}}
        ],
        messages=[
            {"role": "user", "content": "Say hello."},
            {"role": "system", "content": "The user is testing."},  # type: ignore[typeddict-item]
        ],
        extra_body={"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason in ("end_turn", "max_tokens")
    texts = [block.text for block in final.content if block.type == "text"]
    assert texts and texts[0].strip()
    assert final.usage.output_tokens > 0
