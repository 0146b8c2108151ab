"""No configured secret leaves latchgate: not in bodies, SSE events, headers or notices.

Upstreams echo the key they were sent (OpenAI: "Incorrect API key provided: sk-..."), in JSON
errors, HTML error pages and mid-stream error events, on every route. Each test has the fake
upstream echo a key into what the client would see, and checks that the client sees
`[REDACTED]` instead, while the rest of the answer is intact.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from proxy.observe.masking import Masker
from proxy.settings import Settings, configured_secrets, parse_upstream
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion

UPSTREAM_KEY = "sk-proj-Up5treamSecret9x8y7z"
PLAIN_KEY = "plainUpstreamSecret4242"  # looks like no key pattern: only exact masking finds it
CLIENT_KEY = "lgc-client-7Q2x9Wd1"
ADMIN_KEY = "adm-Secret-31337-admin"
MSG = [{"role": "user", "content": "Hi"}]


def echo(key: str) -> dict[str, Any]:
    return {
        "error": {
            "message": f"Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


@pytest.fixture
async def keyed(
    fake: FakeUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> Running:
    monkeypatch.setenv("LG_TEST_UPSTREAM_KEY", UPSTREAM_KEY)
    return await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "api_key_env": "LG_TEST_UPSTREAM_KEY",
            "retries": 0,
        },
        client_keys=[CLIENT_KEY],
        admin_key=ADMIN_KEY,
    )


def leaks(blob: bytes | str) -> list[str]:
    text = blob if isinstance(blob, str) else blob.decode("utf-8", "replace")
    return [k for k in (UPSTREAM_KEY, PLAIN_KEY, CLIENT_KEY, ADMIN_KEY) if k in text]


async def post(lg: Running, path: str, body: dict[str, Any]) -> tuple[int, Any, bytes]:
    async with aiohttp.ClientSession() as s:
        headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
        async with s.post(lg.base_url + path, json=body, headers=headers) as resp:
            raw = await resp.read()
            return resp.status, resp.headers, raw


@pytest.mark.parametrize("key", [UPSTREAM_KEY, CLIENT_KEY, ADMIN_KEY])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_key_echoed_in_a_chat_error_is_masked(
    keyed: Running, fake: FakeUpstream, key: str, stream: bool
) -> None:
    fake.push(Json(echo(key), status=401))
    client = keyed.client(api_key=CLIENT_KEY)
    with pytest.raises(openai.AuthenticationError) as err:
        if stream:
            async for _ in await client.chat.completions.create(
                model="m", messages=MSG, stream=True
            ):
                pass
        else:
            await client.chat.completions.create(model="m", messages=MSG)
    message = err.value.body["message"]  # type: ignore[index]
    assert "Incorrect API key provided: [REDACTED]." in message
    assert not leaks(message)


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/embeddings"])
async def test_a_key_in_an_html_error_page_is_masked(
    keyed: Running, fake: FakeUpstream, path: str
) -> None:
    page = f"<html><body><h1>500</h1><p>auth header was Bearer {UPSTREAM_KEY}</p></body></html>"
    fake.push(Json(page.encode(), status=500, headers={"Content-Type": "text/html"}))
    body = {"model": "m", "messages": MSG, "prompt": "Hi", "input": "Hi"}
    status, _, raw = await post(keyed, path, body)
    assert status == 500
    assert not leaks(raw), raw
    assert b"[REDACTED]" in raw


@pytest.mark.parametrize("path", ["/completions", "/embeddings"])
async def test_a_key_echoed_on_the_plain_routes_is_masked(
    keyed: Running, fake: FakeUpstream, path: str
) -> None:
    fake.push(Json(echo(UPSTREAM_KEY), status=401))
    status, _, raw = await post(keyed, path, {"model": "m", "prompt": "Hi", "input": "Hi"})
    assert status == 401
    assert not leaks(raw), raw
    assert orjson.loads(raw)["error"]["code"] == "invalid_api_key"


async def test_a_key_in_a_mid_stream_error_event_is_masked(
    keyed: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": "Hel"}),
                chunk({"content": "lo"}),
                {"error": {"message": f"upstream auth lost for key {PLAIN_KEY}", "code": 500}},
            ]
        )
    )
    monkey = keyed.proxy
    monkey.masker = Masker([*configured_secrets(monkey.settings), PLAIN_KEY])
    status, _, raw = await post(
        keyed, "/chat/completions", {"model": "m", "messages": MSG, "stream": True}
    )
    assert status == 200
    assert b"Hel" in raw and b"lo" in raw
    assert b"[REDACTED]" in raw
    assert not leaks(raw), raw


async def test_a_key_in_a_completions_stream_is_masked_even_when_split_across_reads(
    keyed: Running, fake: FakeUpstream
) -> None:
    event = orjson.dumps({"error": {"message": f"bad key {UPSTREAM_KEY}"}})
    events: list[Any] = [
        orjson.dumps({"choices": [{"index": 0, "text": "Hi", "finish_reason": None}]}),
        event,
        "[DONE]",
    ]
    framed = [b"data: " + e + b"\n\n" if isinstance(e, bytes) else e for e in events]
    fake.push(Stream(framed, split=7))  # 7-byte writes: the key arrives in pieces
    status, _, raw = await post(
        keyed, "/completions", {"model": "m", "prompt": "Hi", "stream": True}
    )
    assert status == 200
    assert not leaks(raw), raw
    assert b"[REDACTED]" in raw


async def test_a_key_in_a_forwarded_header_is_masked(keyed: Running, fake: FakeUpstream) -> None:
    fake.push(
        Json(
            completion("Hi"),
            headers={"x-request-id": f"req-{UPSTREAM_KEY}", "x-ratelimit-key": UPSTREAM_KEY},
        )
    )
    status, headers, raw = await post(keyed, "/chat/completions", {"model": "m", "messages": MSG})
    assert status == 200
    assert headers["x-request-id"] == "req-[REDACTED]"
    assert headers["x-ratelimit-key"] == "[REDACTED]"
    assert orjson.loads(raw)["choices"][0]["message"]["content"] == "Hi"


async def test_a_forwarded_client_key_is_masked_in_what_comes_back(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "forward_client_auth": True,
            "retries": 0,
        }
    )
    own = "client-own-key-Zz91xx"
    fake.push(Json(echo(own), status=401))
    client = lg.client(api_key=own)
    with pytest.raises(openai.AuthenticationError) as err:
        await client.chat.completions.create(model="m", messages=MSG)
    assert own not in str(err.value.body)
    assert fake.requests[0].headers["Authorization"] == f"Bearer {own}"


@pytest.mark.parametrize("model", [UPSTREAM_KEY, f"gpt-{CLIENT_KEY}", "m" * 5000])
async def test_a_key_or_a_huge_name_sent_as_the_model_stays_out_of_the_metrics(
    keyed: Running, fake: FakeUpstream, model: str
) -> None:
    # Clients do paste a key where the model goes. The answer and the log are masked; the
    # `model` label, sent on every scrape (which needs no key), must be too, and a name no
    # model has (thousands of characters) is not made a label at all.
    fake.push(Json(completion("ok")))
    status, _, raw = await post(keyed, "/chat/completions", {"model": model, "messages": MSG})
    assert status == 200 and not leaks(raw)
    async with aiohttp.ClientSession() as s, s.get(keyed.url + "/metrics") as resp:
        scrape = await resp.text()
    assert not leaks(scrape)
    series = [line for line in scrape.splitlines() if line.startswith("latchgate_requests_total{")]
    assert len(series) == 1
    label = (
        "other"
        if len(model) > 1000
        else model.replace(UPSTREAM_KEY, "[REDACTED]").replace(CLIENT_KEY, "[REDACTED]")
    )
    assert f'model="{label}"' in series[0]


def test_configured_secrets_cover_urls_keys_and_env() -> None:
    up = parse_upstream(
        {"name": "u", "base_url": "http://user:pa55-word-xyz@h:1/v1?api_key=q-key-123456789&x=1"},
        "u",
    )
    settings = Settings(upstreams=[up], client_keys=["c-key-12345678"], admin_key="a-key-1234567")
    found = configured_secrets(settings)
    assert {"pa55-word-xyz", "q-key-123456789", "c-key-12345678", "a-key-1234567"} <= set(found)
    assert "1" not in found


def test_masker_masks_every_form_and_leaves_short_keys() -> None:
    masker = Masker(['abc/def"ghi', "short", "longer-key-1", "longer-key-12"])
    assert masker.text("x longer-key-12 y") == "x [REDACTED] y"  # the longer key whole
    assert masker.bytes(b'{"m": "abc/def\\"ghi"}') == b'{"m": "[REDACTED]"}'
    assert masker.bytes(b'abc\\/def\\"ghi') == b"[REDACTED]"
    assert masker.text("a short word") == "a short word"
    assert not Masker(["short"])
    assert Masker().bytes(b"anything") == b"anything"
