"""Exact prompt counting through llama.cpp's /apply-template and /tokenize, when configured."""

from __future__ import annotations

import openai
import pytest

from tests.conftest import StartProxy
from tests.fakeupstream import FakeUpstream, Json

MSG = [{"role": "user", "content": "x" * 20000}]  # about 5000 tokens at 4 chars a token


def llama_routes(fake: FakeUpstream, tokens: int) -> None:
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1})
    fake.routes["/apply-template"] = Json({"prompt": "<|im_start|>user\n..."})
    fake.routes["/tokenize"] = Json({"tokens": list(range(tokens))})


async def test_exact_count_refuses_what_the_estimate_lets_through(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    llama_routes(fake, tokens=9000)  # the server's own count: over the 8192 window
    running = await start_proxy(
        {"name": "llama", "base_url": fake.url, "kind": "llama.cpp", "exact_token_count": True}
    )
    with pytest.raises(openai.BadRequestError) as info:
        await running.client().chat.completions.create(model="m", messages=MSG, max_tokens=100)
    assert info.value.code == "context_length_exceeded"
    assert "9000" in info.value.message
    assert fake.bodies() == []  # refused before sending


async def test_exact_count_lets_through_what_fits(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    llama_routes(fake, tokens=3000)
    running = await start_proxy(
        {"name": "llama", "base_url": fake.url, "kind": "llama.cpp", "exact_token_count": True}
    )
    # The estimate (~5000 + 3000 reserved) is near the window; the exact 3000 + 3000 fits.
    got = await running.client().chat.completions.create(model="m", messages=MSG, max_tokens=3000)
    assert got.choices[0].message.content == "Hello!"


async def test_without_the_setting_the_estimate_decides(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    llama_routes(fake, tokens=9000)
    running = await start_proxy({"name": "llama", "base_url": fake.url, "kind": "llama.cpp"})
    got = await running.client().chat.completions.create(model="m", messages=MSG, max_tokens=100)
    assert got.choices[0].message.content == "Hello!"
