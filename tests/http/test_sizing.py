"""Sizing and overflow through the real HTTP path (issue 6; BEHAVIOUR.md 5).

A request that cannot fit the model's window is refused before the upstream is called; every
window source of 5.1 is discovered through the fake server's own routes, in order, and cached;
and every overflow wording an upstream sends becomes OpenAI's one 400 shape, never retried.
"""

from __future__ import annotations

import math
from typing import Any

import openai
import orjson
import pytest

from proxy.agent.upstream_errors import parse_upstream_error
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, completion
from tests.unit.agent.test_overflow import NOT_OVERFLOWS, OVERFLOWS

MODEL = "fake-model"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def est_tokens(messages: list[dict[str, Any]], ratio: float = 4.0) -> int:
    """What latchgate estimates: compact JSON of the messages over the chars-per-token ratio."""
    return math.ceil(len(orjson.dumps(messages)) / ratio)


BIG = user("x" * 200_000)


def chat_posts(fake: FakeUpstream) -> int:
    return len([r for r in fake.requests if r.path.endswith("/chat/completions")])


def probes(fake: FakeUpstream, path: str) -> int:
    return len([p for p in fake.probes if p.path == path])


def overflows(lg: Running, where: str) -> float:
    value = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_context_overflow_total", {"upstream": "fake", "model": MODEL, "where": where}
    )
    return value or 0.0


async def start(start_proxy: StartProxy, fake: FakeUpstream, **cfg: Any) -> Running:
    table: dict[str, Any] = {"name": "fake", "base_url": fake.url, "kind": "generic", **cfg}
    return await start_proxy(table)


def listing(**fields: Any) -> Json:
    return Json({"object": "list", "data": [
        {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake", **fields}]})


async def refused(lg: Running, messages: list[dict[str, Any]], **kw: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=messages, **kw)
    return info.value


# -- pre-flight refusal ------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
async def test_a_200k_prompt_never_reaches_an_8192_window(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, context_length={MODEL: 8192})
    err = await refused(lg, BIG, stream=stream)
    n = est_tokens(BIG)
    assert err.status_code == 400
    assert err.code == "context_length_exceeded"
    assert err.body == {
        "message": f"latchgate did not send this request: it is about {n} tokens, over this "
        "model's 8192-token context window. Shorten the messages (drop or summarise older "
        "turns, trim long tool results), or use a model with a larger context window.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
    }
    assert fake.requests == []
    assert overflows(lg, "preflight") == 1


async def test_the_reply_ceiling_counts(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake, context_length={MODEL: 8192})
    messages = user("y" * 24_000)  # about 6000 tokens: fits alone
    n = est_tokens(messages)
    ok = await lg.client().chat.completions.create(model=MODEL, messages=messages)
    assert ok.choices[0].message.content == "Hello!"
    ok = await lg.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8192 - n
    )
    assert ok.choices[0].message.content == "Hello!"
    assert chat_posts(fake) == 2
    err = await refused(lg, messages, max_tokens=4000)
    assert err.body["message"] == (  # type: ignore[index]
        f"latchgate did not send this request: it is about {n} tokens plus 4000 reserved for "
        f"the reply, over this model's 8192-token context window. Lower "
        f"max_tokens/max_completion_tokens to at most {8192 - n}, or shorten the messages."
    )
    # max_completion_tokens wins over max_tokens
    err = await refused(lg, messages, max_tokens=10, max_completion_tokens=3000)
    assert "plus 3000 reserved for the reply" in err.message
    assert chat_posts(fake) == 2


async def test_windows_under_8192_are_not_trusted(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, context_length={MODEL: 8191})
    reply = await lg.client().chat.completions.create(model=MODEL, messages=BIG)
    assert reply.choices[0].message.content == "Hello!"
    assert chat_posts(fake) == 1
    assert overflows(lg, "preflight") == 0


async def test_an_unknown_window_means_no_check(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    reply = await lg.client().chat.completions.create(model=MODEL, messages=BIG)
    assert reply.choices[0].message.content == "Hello!"
    assert chat_posts(fake) == 1


async def test_calibration_from_reported_prompt_tokens(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, context_length={MODEL: 8192})
    messages = user("z" * 24_000)
    chars = len(orjson.dumps(messages))
    assert chars / 4 < 8192 < chars / 2
    # The upstream counts 2 characters per token for this text.
    usage = {"prompt_tokens": chars // 2, "completion_tokens": 3, "total_tokens": chars // 2 + 3}
    fake.push(Json(completion(usage=usage)))
    ok = await lg.client().chat.completions.create(model=MODEL, messages=messages)
    assert ok.usage is not None and ok.usage.prompt_tokens == chars // 2
    err = await refused(lg, messages)
    assert chars % 2 == 0
    assert f"it is about {chars // 2} tokens, over this model's 8192-token" in err.message
    assert chat_posts(fake) == 1


async def test_calibration_ignores_implausible_ratios(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    """A report of 0.5 chars/token (a truncated or cached prompt) is not learned from."""
    lg = await start(start_proxy, fake, context_length={MODEL: 8192})
    messages = user("z" * 24_000)
    chars = len(orjson.dumps(messages))
    usage = {"prompt_tokens": chars * 2, "completion_tokens": 1, "total_tokens": chars * 2 + 1}
    fake.push(Json(completion(usage=usage)))
    await lg.client().chat.completions.create(model=MODEL, messages=messages)
    await lg.client().chat.completions.create(model=MODEL, messages=messages)
    assert chat_posts(fake) == 2


# -- window discovery, each source through HTTP ------------------------------------------------

async def test_vllm_listing_max_model_len(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/v1/models"] = listing(max_model_len=8192)
    lg = await start(start_proxy, fake, kind="vllm")
    await refused(lg, BIG)
    assert fake.requests == []
    before = probes(fake, "/v1/models")
    await refused(lg, BIG)
    assert probes(fake, "/v1/models") == before  # cached: not asked again
    # vLLM has no native routes: none is guessed
    assert [p.path for p in fake.probes if p.path != "/v1/models"] == []


async def test_llama_cpp_props(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/props"] = Json(
        {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
    )
    lg = await start(start_proxy, fake, kind="llama.cpp")
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message
    await refused(lg, BIG, stream=True)
    assert probes(fake, "/props") == 1
    assert fake.requests == []


async def test_lmstudio_loaded_context_length(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/api/v0/models"] = Json({"object": "list", "data": [
        {"id": MODEL, "object": "model", "type": "llm", "state": "loaded",
         "max_context_length": 131072, "loaded_context_length": 8192}]})
    lg = await start(start_proxy, fake, kind="lmstudio")
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message
    await refused(lg, BIG)
    assert probes(fake, "/api/v0/models") == 1
    assert probes(fake, "/props") == 0


async def test_ollama_show_num_ctx(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/api/show"] = Json({
        "parameters": "stop \"<|eot_id|>\"\nnum_ctx 8192",
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    })
    lg = await start(start_proxy, fake, kind="ollama")
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message
    await refused(lg, BIG)
    shows = [p for p in fake.probes if p.path == "/api/show"]
    assert [orjson.loads(p.raw) for p in shows] == [{"model": MODEL}]
    assert fake.requests == []


async def test_ollama_show_model_info_when_no_num_ctx(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    fake.routes["/api/show"] = Json({"model_info": {"qwen2.context_length": 8192}})
    lg = await start(start_proxy, fake, kind="ollama")
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message


async def test_config_wins_and_nothing_is_probed(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 131072}})
    lg = await start(start_proxy, fake, kind="llama.cpp", context_length={"fake-*": 8192})
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message
    assert probes(fake, "/props") == 0


async def test_served_listing_wins_over_props(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/v1/models"] = listing(meta={"n_ctx": 8192, "n_ctx_train": 131072})
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 131072}})
    lg = await start(start_proxy, fake)  # generic: every route may be guessed
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message
    assert probes(fake, "/props") == 0


async def test_props_wins_over_the_trained_window(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    fake.routes["/v1/models"] = listing(meta={"n_ctx_train": 262144})
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 8192}})
    lg = await start(start_proxy, fake)
    err = await refused(lg, BIG)
    assert "8192-token context window" in err.message


async def test_the_trained_window_is_the_last_resort(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    fake.routes["/v1/models"] = listing(meta={"n_ctx_train": 16384})
    lg = await start(start_proxy, fake)
    err = await refused(lg, BIG)
    assert "16384-token context window" in err.message
    # every native route was tried once, answered 404, and is not asked again
    await refused(lg, BIG)
    assert [probes(fake, p) for p in ("/props", "/api/v0/models", "/api/show")] == [1, 1, 1]


async def test_no_source_is_remembered_as_unknown(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    for _ in range(3):
        await lg.client().chat.completions.create(model=MODEL, messages=BIG)
    assert chat_posts(fake) == 3
    assert [probes(fake, p) for p in ("/props", "/api/v0/models", "/api/show")] == [1, 1, 1]


async def test_a_failed_probe_is_asked_again(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    fake.routes["/props"] = Json({"error": {"message": "busy"}}, status=503)
    lg = await start(start_proxy, fake, kind="llama.cpp")
    reply = await lg.client().chat.completions.create(model=MODEL, messages=BIG)
    assert reply.choices[0].message.content == "Hello!"  # no window: no check this time
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 8192}})
    await refused(lg, BIG)
    assert probes(fake, "/props") == 2
    assert chat_posts(fake) == 1


async def test_models_listing_shows_known_windows(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    fake.routes["/props"] = Json({"default_generation_settings": {"n_ctx": 32768}})
    lg = await start(start_proxy, fake, kind="llama.cpp", models=[MODEL, "configured-model"],
                     context_length={"configured-model": 65536})
    client = lg.client()
    before = {m.id: m.model_extra for m in (await client.models.list()).data}
    assert "context_length" not in (before[MODEL] or {})
    assert (before["configured-model"] or {}).get("context_length") == 65536
    await client.chat.completions.create(model=MODEL, messages=user("hi"))
    after = {m.id: m.model_extra for m in (await client.models.list()).data}
    assert (after[MODEL] or {}).get("context_length") == 32768
    one = await client.models.retrieve(MODEL)
    assert (one.model_extra or {}).get("context_length") == 32768


async def test_models_listing_shows_a_glob_configured_window_by_name(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, context_length={"fake-*": 16384})
    listed = {m.id: m.model_extra for m in (await lg.client().models.list()).data}
    assert (listed[MODEL] or {}).get("context_length") == 16384


# -- upstream overflow -------------------------------------------------------------------------

HTTP_OVERFLOWS = [o for o in OVERFLOWS if o[1] >= 400]


@pytest.mark.parametrize(("name", "status", "body"), HTTP_OVERFLOWS,
                         ids=[o[0] for o in HTTP_OVERFLOWS])
async def test_every_overflow_wording_becomes_one_shape(
    lg: Running, fake: FakeUpstream, name: str, status: int, body: bytes
) -> None:
    fake.push(Json(body, status=status))
    err = await refused(lg, user("hi"))
    assert err.status_code == 400
    assert err.body == {
        "message": parse_upstream_error(status, body).message.strip(),
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
    }
    assert chat_posts(fake) == 1  # never retried
    assert lg.proxy.store.held() == {}  # never latched
    assert overflows(lg, "upstream") == 1


async def test_overflow_message_is_kept_verbatim(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(
        b'{"error":{"code":400,"message":"request (13919 tokens) exceeds the available context '
        b'size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
        b'"n_prompt_tokens":13919,"n_ctx":2048}}', status=400))
    err = await refused(lg, user("hi"), stream=True)
    assert err.body["message"] == (  # type: ignore[index]
        "request (13919 tokens) exceeds the available context size (2048 tokens), try "
        "increasing it"
    )
    assert err.code == "context_length_exceeded"


async def test_streamed_overflow_is_the_same_shape(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(b'{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}',
                   status=400))
    err = await refused(lg, user("hi"), stream=True)
    assert err.body == {
        "message": "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
    }
    assert chat_posts(fake) == 1


LOOK_ALIKES = [o for o in NOT_OVERFLOWS if o[0] in ("openai-tpm-429", "groq-413", "groq-413-bare")]


@pytest.mark.parametrize(("name", "status", "body"), LOOK_ALIKES,
                         ids=[o[0] for o in LOOK_ALIKES])
async def test_token_rate_limits_are_passed_on(
    lg: Running, fake: FakeUpstream, name: str, status: int, body: bytes
) -> None:
    fake.push(Json(body, status=status))
    with pytest.raises(openai.APIStatusError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=user("hi"))
    assert info.value.status_code == status
    assert info.value.response.content == body
    assert chat_posts(fake) == 1  # a limit the request itself exceeds does not clear
    assert overflows(lg, "upstream") == 0


async def test_an_overflow_stating_n_ctx_is_learned(lg: Running, fake: FakeUpstream) -> None:
    """llama.cpp's overflow names its window: the next oversized request is refused early."""
    fake.push(Json(
        b'{"error":{"code":400,"message":"request (50010 tokens) exceeds the available context '
        b'size (16384 tokens), try increasing it","type":"exceed_context_size_error",'
        b'"n_prompt_tokens":50010,"n_ctx":16384}}', status=400))
    await refused(lg, BIG)
    assert chat_posts(fake) == 1
    err = await refused(lg, BIG)
    assert "over this model's 16384-token context window" in err.body["message"]  # type: ignore[index]
    assert chat_posts(fake) == 1
    assert overflows(lg, "preflight") == 1 and overflows(lg, "upstream") == 1
    listed = {m.id: m.model_extra for m in (await lg.client().models.list()).data}
    assert (listed[MODEL] or {}).get("context_length") == 16384


async def test_an_overflow_inside_a_200_stream_reaches_the_sdk(
    lg: Running, fake: FakeUpstream
) -> None:
    """Older llama.cpp sent the overflow as an SSE event in a 200 stream."""
    message = ("the request exceeds the available context size. try increasing the context size "
               "or enable context shift")
    fake.push(Stream([{"error": {"code": 400, "message": message,
                                 "type": "invalid_request_error"}}]))
    # Nothing was relayed yet, so it comes back as the one 400 overflow shape, not as a stream.
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=user("hi"), stream=True)
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"] == message
    assert info.value.code == "context_length_exceeded"
    assert chat_posts(fake) == 1


async def test_ollama_small_windows_are_trusted_because_ollama_truncates_silently(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # A 4096 window is under the 8192 trust threshold, but Ollama would cut the prompt and let
    # the model answer the rest: latchgate refuses instead (BEHAVIOUR 5.4).
    fake.routes["/api/show"] = Json({"parameters": "num_ctx 4096"})
    lg = await start(start_proxy, fake, kind="ollama")
    err = await refused(lg, user("x" * 20000))
    assert "4096-token context window" in err.message
    assert fake.requests == []
    # the same window on another kind of server is not trusted
    other = FakeUpstream()
    await other.start()
    try:
        other.routes["/api/show"] = Json({"parameters": "num_ctx 4096"})
        lg2 = await start(start_proxy, other, kind="generic")
        got = await lg2.client().chat.completions.create(model=MODEL, messages=user("x" * 20000))
        assert got.choices[0].message.content == "Hello!"
    finally:
        await other.close()
