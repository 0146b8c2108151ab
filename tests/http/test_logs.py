"""A real run's logs: one JSON line per request with what operators need, and no key anywhere.

latchgate runs with every kind of key set (client keys, an upstream key from the environment, an
admin key) and serves traffic that includes errors: a wrong client key, an upstream that echoes
its key back in an error, retries, a refusal, an exhausted retry budget, admin calls. The captured
JSON log output must not contain any key, in any form the run could have seen it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import aiohttp
import openai
import orjson
import pytest
import structlog

from proxy.observe import logs
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, completion
from tests.http.test_metrics import MAX_TOKENS_REFUSAL, MSG

CLIENT_KEY = "lgc-client-7Q2x9Wd1"
OTHER_CLIENT_KEY = "lgc-second-client-Ab83"
WRONG_CLIENT_KEY = "lgc-wrong-guess-P0o9"
# One upstream key shaped like OpenAI's and one that no text pattern would recognise, so the test
# proves the keys are never logged at all rather than masked by luck.
UPSTREAM_KEY = "sk-proj-Up5treamSecret9x8y7z"
PLAIN_UPSTREAM_KEY = "plainUpstreamSecret4242"
ADMIN_KEY = "adm-Secret-31337-admin"
WRONG_ADMIN_KEY = "adm-wrong-guess-00000"
SECRETS = (
    CLIENT_KEY, OTHER_CLIENT_KEY, WRONG_CLIENT_KEY, UPSTREAM_KEY, PLAIN_UPSTREAM_KEY,
    ADMIN_KEY, WRONG_ADMIN_KEY,
)
REQUEST_FIELDS = {
    "request_id", "upstream", "model", "status", "attempts", "duration_ms", "tokens", "notices",
}


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("debug", json=True, stream=out)
    yield out
    structlog.reset_defaults()


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    parsed = []
    for line in out.getvalue().splitlines():
        item = orjson.loads(line)  # every line is one JSON object, nothing else
        assert isinstance(item, dict), line
        parsed.append(item)
    return parsed


async def admin_calls(lg: Running) -> list[int]:
    statuses = []
    async with aiohttp.ClientSession() as s:
        for key in (ADMIN_KEY, WRONG_ADMIN_KEY):
            headers = {"Authorization": f"Bearer {key}"}
            async with s.get(lg.url + "/admin/latches", headers=headers) as resp:
                statuses.append(resp.status)
    return statuses


async def traffic(lg: Running, fake: FakeUpstream) -> list[tuple[int, str]]:
    """Requests that reach an upstream decision, as (status, model) in order; plus rejections."""
    async with lg.client(api_key=WRONG_CLIENT_KEY) as wrong:
        with pytest.raises(openai.AuthenticationError):
            await wrong.chat.completions.create(model="m-denied", messages=MSG)
    done: list[tuple[int, str]] = []
    async with lg.client(api_key=CLIENT_KEY) as c, lg.client(api_key=OTHER_CLIENT_KEY) as c2:
        await c.chat.completions.create(model="m-plain", messages=MSG)
        done.append((200, "m-plain"))
        stream = await c2.chat.completions.create(model="m-stream", messages=MSG, stream=True)
        _ = [chunk async for chunk in stream]
        done.append((200, "m-stream"))
        # The upstream echoes both keys back in its error, as some servers do in full.
        echo = f"Incorrect API key provided: {UPSTREAM_KEY} (also tried {PLAIN_UPSTREAM_KEY})."
        fake.push(Json({"error": {"message": echo, "type": "invalid_request_error"}}, status=401))
        with pytest.raises(openai.AuthenticationError):
            await c.chat.completions.create(model="m-echo", messages=MSG)
        done.append((401, "m-echo"))
        fake.push(Json(MAX_TOKENS_REFUSAL, status=400), Json(completion()))
        await c.chat.completions.create(model="m-latch", messages=MSG, max_tokens=5)
        done.append((200, "m-latch"))
        busy = {"error": {"message": "busy", "type": "server_error"}}
        fake.push(*[Json(busy, status=503, headers={"Retry-After": "0"})] * 3)
        with pytest.raises(openai.InternalServerError):
            await c.chat.completions.create(model="m-busy", messages=MSG)
        done.append((503, "m-busy"))
    return done


async def test_logs_carry_no_key_and_one_line_per_request(
    fake: FakeUpstream,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
    captured: io.StringIO,
) -> None:
    # The configured key is the plain one, which only latchgate's own masking can catch; the
    # sk- one in the echo is unknown to latchgate and must be caught by the text patterns.
    monkeypatch.setenv("LG_TEST_UPSTREAM_KEY", PLAIN_UPSTREAM_KEY)
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 2,
         "api_key_env": "LG_TEST_UPSTREAM_KEY"},
        client_keys=[CLIENT_KEY, OTHER_CLIENT_KEY],
        admin_key=ADMIN_KEY,
    )
    done = await traffic(lg, fake)
    assert await admin_calls(lg) == [200, 401]
    # the upstream did get its key: the run really had it in hand
    assert fake.requests[0].headers["Authorization"] == f"Bearer {PLAIN_UPSTREAM_KEY}"

    text = captured.getvalue()
    leaked = [key for key in SECRETS if key in text]
    assert leaked == []
    assert "Bearer" not in text

    request_lines = [line for line in lines(captured) if line.get("event") == "request"]
    # The two admin calls have their lines too (route admin, no upstream), also keyless.
    admin = [line for line in request_lines if line.get("route") == "admin"]
    assert [(line["status"], line["path"]) for line in admin] == [
        (200, "/admin/latches"), (401, "/admin/latches")
    ]
    request_lines = [line for line in request_lines if line.get("route") != "admin"]
    # The wrong client key was refused before routing: still one line, with no upstream.
    rejected, request_lines = request_lines[0], request_lines[1:]
    assert (rejected["status"], rejected["upstream"], rejected["attempts"]) == (401, "none", 0)
    assert [(line["status"], line["model"]) for line in request_lines] == done
    for line in request_lines:
        assert set(line) >= REQUEST_FIELDS, line
        assert line["upstream"] == "fake"
        assert line["request_id"].startswith("lg-")
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    by_model = {line["model"]: line for line in request_lines}
    assert by_model["m-plain"]["tokens"] == {"prompt": 10, "completion": 3, "cached": 0}
    assert by_model["m-plain"]["level"] == "info"
    assert by_model["m-plain"]["attempts"] == 1 and by_model["m-plain"]["notices"] == []
    assert by_model["m-echo"]["tokens"] is None
    # the upstream's error is on the line, with the configured key masked
    assert by_model["m-echo"]["upstream_error"].startswith("HTTP 401: Incorrect API key provided")
    assert "[REDACTED]" in by_model["m-echo"]["upstream_error"]
    latch = by_model["m-latch"]
    assert (latch["level"], latch["attempts"], latch["latched"]) == (
        "warning", 2, ["legacy_token_limit"]
    )
    assert any("max_completion_tokens" in n for n in latch["notices"])
    busy = by_model["m-busy"]
    assert (busy["level"], busy["attempts"]) == ("error", 3)
    assert [n.split(" on ")[0] for n in busy["notices"]] == ["Retry 1 of 2", "Retry 2 of 2"]
