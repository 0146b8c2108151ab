"""Real traffic through a running latchgate moves each metric by the right amount, with the right
labels, and nothing else: checked on the registry and on the `GET /metrics` text.

Each `Scenario` drives one kind of event (a refusal and latch, a dropped field, a retry, a
watchdog firing, an overflow, a recovered tool call, a repaired argument...) with the openai SDK
against the scripted fake upstream, and states every counter sample it must move. The whole table
is also driven in one run, which is what the Prometheus dashboard test reuses (`drive_all`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Hang, Json, Stream, chunk, completion

UPSTREAM_NAME = "fake"
# Typed Any: the SDK wants its TypedDicts, and these are plain JSON on purpose.
MSG: Any = [{"role": "user", "content": "hi"}]
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
# A tool whose schema has a `pattern`: relaxing it (after a strict_schemas latch) removes that.
PATTERN_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]+$"}},
            },
        },
    }
]
USAGE = {"prompt": 10, "completion": 3}  # what fakeupstream.completion() and text_stream report

# Verbatim wordings from research/refusal-wordings.md.
MAX_TOKENS_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}
TOP_K_REFUSAL = {
    "error": {
        "message": "Unrecognized request argument supplied: top_k",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size. try increasing the context "
        "size or enable context shift",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 14429,
        "n_ctx": 8192,
    }
}
LLAMA_SCHEMA_REFUSAL = (
    b'{"error":{"code":400,"message":"JSON schema conversion failed:\\nUnrecognized schema: '
    b'{\\"pattern\\":\\"^[A-Z][a-z]+$\\"}","type":"invalid_request_error"}}'
)


def upstream_table(fake: FakeUpstream) -> dict[str, Any]:
    """The upstream every scenario runs against: short watchdogs, a known 8192-token window."""
    return {
        "name": UPSTREAM_NAME,
        "base_url": fake.url,
        "kind": "generic",
        "retries": 2,
        "first_token_timeout": 0.3,
        "idle_timeout": 0.3,
        "context_length": {"fake-*": 8192},
    }


# -- samples -------------------------------------------------------------------------------

Key = tuple[str, frozenset[tuple[str, str]]]
Samples = dict[Key, float]


def key(name: str, **labels: str) -> Key:
    return name, frozenset(labels.items())


def _counters(families: Iterable[Any]) -> Samples:
    """Every latchgate counter sample (`*_total`), by name and labels."""
    out: Samples = {}
    for family in families:
        for s in family.samples:
            if s.name.startswith("latchgate_") and s.name.endswith("_total"):
                out[key(s.name, **s.labels)] = s.value
    return out


def registry_counters(registry: CollectorRegistry) -> Samples:
    return _counters(registry.collect())


def text_counters(text: str) -> Samples:
    return _counters(text_string_to_metric_families(text))


async def metrics_text(lg: Running) -> str:
    async with aiohttp.ClientSession() as s, s.get(lg.url + "/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return await resp.text()


def moved(before: Samples, after: Samples) -> Samples:
    """The samples whose value changed, by how much (a new sample moved from 0)."""
    out: Samples = {}
    for k, value in after.items():
        delta = value - before.get(k, 0.0)
        if delta:
            out[k] = delta
    return out


def add(total: Samples, more: Samples) -> Samples:
    out = dict(total)
    for k, v in more.items():
        out[k] = out.get(k, 0.0) + v
    return out


# -- expected moves ------------------------------------------------------------------------


def requests(model: str, status: int, stream: bool = False, n: float = 1) -> Samples:
    s = "true" if stream else "false"
    labels = {"upstream": UPSTREAM_NAME, "model": model, "route": "chat", "stream": s}
    return {key("latchgate_requests_total", **labels, status=str(status)): n}


def attempts(model: str, *statuses: str) -> Samples:
    out: Samples = {}
    for status in statuses:
        k = key("latchgate_upstream_requests_total", upstream=UPSTREAM_NAME, model=model,
                status=status)
        out[k] = out.get(k, 0.0) + 1
    return out


def tokens(model: str, times: int = 1) -> Samples:
    return {
        key("latchgate_tokens_total", upstream=UPSTREAM_NAME, model=model, kind=kind): n * times
        for kind, n in USAGE.items()
    }


def um(name: str, model: str, **labels: str) -> Samples:
    return {key(name, upstream=UPSTREAM_NAME, model=model, **labels): 1}


def u(name: str, **labels: str) -> Samples:
    return {key(name, upstream=UPSTREAM_NAME, **labels): 1}


def merged(*parts: Samples) -> Samples:
    out: Samples = {}
    for part in parts:
        out = add(out, part)
    return out


# -- scenarios -----------------------------------------------------------------------------

Driver = Callable[[Running, FakeUpstream, str], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    drive: Driver
    expected: Callable[[str], Samples]


async def refusal_and_latch(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Json(MAX_TOKENS_REFUSAL, status=400), Json(completion(model=model)))
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG, max_tokens=10)
    assert r.choices[0].message.content == "Hello!"
    resent = fake.bodies()[-1]
    assert "max_tokens" not in resent and resent["max_completion_tokens"] == 10


async def dropped_field(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Json(TOP_K_REFUSAL, status=400), Json(completion(model=model)))
    async with lg.client() as c:
        raw = await c.chat.completions.with_raw_response.create(
            model=model, messages=MSG, extra_body={"top_k": 5}
        )
    assert raw.headers["x-latchgate-dropped-fields"] == "top_k"
    assert "top_k" not in fake.bodies()[-1]


async def retry_5xx(lg: Running, fake: FakeUpstream, model: str) -> None:
    busy = {"error": {"message": "Service Unavailable", "type": "server_error"}}
    fake.push(
        Json(busy, status=503, headers={"Retry-After": "0"}), Json(completion(model=model))
    )
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG)
    assert r.choices[0].message.content == "Hello!"


async def watchdog_first_token(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Hang(5.0))  # then the fake's default stream answers the retry
    async with lg.client() as c:
        stream = await c.chat.completions.create(model=model, messages=MSG, stream=True)
        text = "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])
    assert text == "Hello!"


async def watchdog_idle(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Stream([chunk({"role": "assistant", "content": "a"}, model=model)], then="hang"))
    async with lg.client() as c:
        stream = await c.chat.completions.create(model=model, messages=MSG, stream=True)
        with pytest.raises(openai.APIError, match="went silent"):
            async for _ in stream:
                pass


async def preflight_overflow(lg: Running, fake: FakeUpstream, model: str) -> None:
    sent_before = len(fake.requests)
    async with lg.client() as c:
        with pytest.raises(openai.BadRequestError) as caught:
            await c.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "x" * 200_000}]
            )
    assert caught.value.code == "context_length_exceeded"
    assert len(fake.requests) == sent_before, "a preflight overflow must not reach the upstream"


async def upstream_overflow(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Json(LLAMA_OVERFLOW, status=400))
    async with lg.client() as c:
        with pytest.raises(openai.BadRequestError) as caught:
            await c.chat.completions.create(model=model, messages=MSG)
    assert caught.value.code == "context_length_exceeded"


# What the x-latchgate-context header of each model's pruned request said: (before, after).
PRUNED: dict[str, tuple[int, int]] = {}


async def context_pruned(lg: Running, fake: FakeUpstream, model: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read them all"}]
    for k in range(10):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"c{k}", "type": "function",
                "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "a" * 4000},
        ]
    fake.push(Json(completion(model=model)))
    async with lg.client() as c:
        raw = await c.chat.completions.with_raw_response.create(
            model=model, messages=messages, extra_headers={"x-latchgate-context": "prune"}
        )
    told = re.fullmatch(r"pruned \d+ results?, ([\d,]+) -> ([\d,]+) tokens(?: \(as on .*\))?",
                        raw.headers["x-latchgate-context"])
    assert told is not None, raw.headers["x-latchgate-context"]
    before, after = (int(n.replace(",", "")) for n in told.groups())
    PRUNED[model] = (before, after)


def context_pruned_moves(model: str) -> Samples:
    before, after = PRUNED[model]
    removed = {key("latchgate_context_tokens_removed_total", upstream=UPSTREAM_NAME,
                   model=model): before - after}
    return merged(
        um("latchgate_context_rescues_total", model, action="pruned", outcome="new"), removed,
        attempts(model, "200"), requests(model, 200), tokens(model),
    )


async def recovered_tool_call(lg: Running, fake: FakeUpstream, model: str) -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    fake.push(Json(completion(text, model=model)))
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG, tools=TOOLS)
    call: Any
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert orjson.loads(call.function.arguments) == {"city": "Paris"}


async def repaired_arguments(lg: Running, fake: FakeUpstream, model: str) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{'city': 'Paris'}"},
    }
    reply = completion("", model=model, finish="tool_calls", tool_calls=[call])
    reply["choices"][0]["message"]["content"] = None  # as OpenAI sends it with tool calls
    fake.push(Json(reply))
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG, tools=TOOLS)
    got: Any
    (got,) = r.choices[0].message.tool_calls or []
    assert orjson.loads(got.function.arguments) == {"city": "Paris"}


def _calls_reply(model: str, name: str, arguments: str) -> Json:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    reply = completion("", model=model, finish="tool_calls", tool_calls=[call])
    reply["choices"][0]["message"]["content"] = None
    return Json(reply)


async def healed_tool_call(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(_calls_reply(model, "weather", '{"city": "Paris"}'),
              _calls_reply(model, "get_weather", '{"city": "Paris"}'))
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG, tools=TOOLS)
    (got,) = r.choices[0].message.tool_calls or []
    assert got.function.name == "get_weather"  # type: ignore[union-attr]


async def tool_choice_none(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(_calls_reply(model, "get_weather", '{"city": "Paris"}'))
    async with lg.client() as c:
        r = await c.chat.completions.create(
            model=model, messages=MSG, tools=TOOLS, tool_choice="none")
    assert not r.choices[0].message.tool_calls
    assert "get_weather" in (r.choices[0].message.content or "")


JINJA_REFUSAL = {"error": {"code": 500, "message": "tools param requires --jinja flag",
                           "type": "server_error"}}


async def tools_emulated(lg: Running, fake: FakeUpstream, model: str) -> None:
    written = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    fake.push(Json(JINJA_REFUSAL, status=500), Json(completion(written, model=model)))
    async with lg.client() as c:
        r = await c.chat.completions.create(model=model, messages=MSG, tools=TOOLS)
    (got,) = r.choices[0].message.tool_calls or []
    assert got.function.name == "get_weather"  # type: ignore[union-attr]
    assert "tools" not in fake.bodies()[-1]


async def strict_schemas_relaxed(lg: Running, fake: FakeUpstream, model: str) -> None:
    fake.push(Json(LLAMA_SCHEMA_REFUSAL, status=400), Json(completion(model=model)))
    async with lg.client() as c:
        await c.chat.completions.create(model=model, messages=MSG, tools=PATTERN_TOOLS)
    city = fake.bodies()[-1]["tools"][0]["function"]["parameters"]["properties"]["city"]
    assert "pattern" not in city


async def client_disconnect(lg: Running, fake: FakeUpstream, model: str) -> None:
    before = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_client_disconnects_total", {"upstream": UPSTREAM_NAME}
    ) or 0.0
    fake.push(Stream([chunk({"role": "assistant", "content": "a"}, model=model)], then="hang"))
    async with aiohttp.ClientSession() as s:
        body = {"model": model, "messages": MSG, "stream": True}
        resp = await s.post(lg.base_url + "/chat/completions", json=body)
        await resp.content.readline()
        resp.close()
    for _ in range(200):  # the proxy notices the disconnect a moment later
        now = lg.proxy.metrics.registry.get_sample_value(
            "latchgate_client_disconnects_total", {"upstream": UPSTREAM_NAME}
        )
        if now is not None and now > before:
            break
        await asyncio.sleep(0.005)


SCENARIOS = [
    Scenario(
        "refusal_and_latch",
        refusal_and_latch,
        lambda m: merged(
            um("latchgate_refusals_total", m, capability="legacy_token_limit"),
            attempts(m, "400", "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "dropped_field",
        dropped_field,
        lambda m: merged(
            um("latchgate_refusals_total", m, capability="refused_field"),
            u("latchgate_fields_dropped_total", field="top_k"),
            attempts(m, "400", "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "retry_5xx",
        retry_5xx,
        lambda m: merged(
            u("latchgate_retries_total", reason="status_5xx"),
            attempts(m, "503", "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "watchdog_first_token",
        watchdog_first_token,
        lambda m: merged(
            u("latchgate_endpoint_silent_total", phase="first_token"),
            u("latchgate_retries_total", reason="silent"),
            # the silent attempt is an attempt too, with no status to report
            attempts(m, "error", "200"), requests(m, 200, stream=True), tokens(m),
        ),
    ),
    Scenario(
        "watchdog_idle",
        watchdog_idle,
        lambda m: merged(
            u("latchgate_endpoint_silent_total", phase="idle"),
            attempts(m, "200"), requests(m, 504, stream=True),
        ),
    ),
    Scenario(
        "preflight_overflow",
        preflight_overflow,
        lambda m: merged(
            um("latchgate_context_overflow_total", m, where="preflight"), requests(m, 400)
        ),
    ),
    Scenario(
        "upstream_overflow",
        upstream_overflow,
        lambda m: merged(
            um("latchgate_context_overflow_total", m, where="upstream"),
            attempts(m, "400"), requests(m, 400),
        ),
    ),
    Scenario("context_pruned", context_pruned, context_pruned_moves),
    Scenario(
        "recovered_tool_call",
        recovered_tool_call,
        lambda m: merged(
            um("latchgate_tool_calls_recovered_total", m, format="hermes"),
            attempts(m, "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "repaired_arguments",
        repaired_arguments,
        lambda m: merged(
            um("latchgate_tool_arguments_repaired_total", m, outcome="repaired"),
            attempts(m, "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "healed_tool_call",
        healed_tool_call,
        lambda m: merged(
            um("latchgate_tool_calls_healed_total", m, outcome="healed"),
            attempts(m, "200", "200"), requests(m, 200), tokens(m, 2),
        ),
    ),
    Scenario(
        "tool_choice_none",
        tool_choice_none,
        lambda m: merged(
            um("latchgate_tool_choice_enforced_total", m, choice="none", outcome="converted"),
            attempts(m, "200"), requests(m, 200), tokens(m),
        ),
    ),
    Scenario(
        "client_disconnect",
        client_disconnect,
        lambda m: merged(
            u("latchgate_client_disconnects_total"),
            attempts(m, "200"), requests(m, 499, stream=True),
        ),
    ),
    # Last on purpose: the strict_schemas latch relaxes every later tool request's schemas too.
    Scenario(
        "strict_schemas_relaxed",
        strict_schemas_relaxed,
        lambda m: merged(
            um("latchgate_refusals_total", m, capability="strict_schemas"),
            u("latchgate_schemas_relaxed_total"),
            attempts(m, "400", "200"), requests(m, 200), tokens(m),
        ),
    ),
    # After it, for the same reason: every later tool request's tools would go into the prompt.
    Scenario(
        "tools_emulated",
        tools_emulated,
        lambda m: merged(
            um("latchgate_refusals_total", m, capability="native_tools"),
            um("latchgate_tools_emulated_total", m),
            um("latchgate_tool_calls_recovered_total", m, format="hermes"),
            attempts(m, "500", "200"), requests(m, 200), tokens(m),
        ),
    ),
]


async def drive_all(lg: Running, fake: FakeUpstream, model: str) -> Samples:
    """Every scenario in order against one running latchgate; returns the expected moves."""
    expected: Samples = {}
    for scenario in SCENARIOS:
        await scenario.drive(lg, fake, model)
        expected = add(expected, scenario.expected(model))
    return expected


# -- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_each_event_moves_exactly_its_metrics(
    scenario: Scenario, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(upstream_table(fake))
    registry = lg.proxy.metrics.registry
    before, before_text = registry_counters(registry), text_counters(await metrics_text(lg))
    await scenario.drive(lg, fake, "fake-model")
    expected = scenario.expected("fake-model")
    assert moved(before, registry_counters(registry)) == expected
    assert moved(before_text, text_counters(await metrics_text(lg))) == expected
    assert registry.get_sample_value("latchgate_inflight_requests", {"upstream": "fake"}) == 0


async def test_all_events_in_one_run(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(upstream_table(fake))
    before = text_counters(await metrics_text(lg))
    expected = await drive_all(lg, fake, "fake-a")
    assert moved(before, text_counters(await metrics_text(lg))) == expected
    # one latch per capability learned for the one model
    latches = {
        cap: lg.proxy.metrics.registry.get_sample_value(
            "latchgate_latches", {"upstream": "fake", "capability": cap}
        )
        for cap in ("legacy_token_limit", "refused_field", "strict_schemas")
    }
    assert latches == {"legacy_token_limit": 1, "refused_field": 1, "strict_schemas": 1}


async def test_latches_gauge_counts_models(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(upstream_table(fake))
    for model in ("fake-a", "fake-b"):
        await refusal_and_latch(lg, fake, model)
    text = await metrics_text(lg)
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "latchgate_latches"]
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"upstream": "fake", "capability": "legacy_token_limit"}, 2.0)
    ]


async def test_histograms_observe_each_request(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(upstream_table(fake))
    await retry_5xx(lg, fake, "fake-model")
    await watchdog_first_token(lg, fake, "fake-model")
    reg = lg.proxy.metrics.registry
    um_ = {"upstream": "fake", "model": "fake-model"}
    assert reg.get_sample_value(
        "latchgate_request_duration_seconds_count", {**um_, "stream": "false"}) == 1
    assert reg.get_sample_value(
        "latchgate_request_duration_seconds_count", {**um_, "stream": "true"}) == 1
    assert reg.get_sample_value("latchgate_time_to_first_token_seconds_count", um_) == 1
    # the first token came after the 0.3 s watchdog fired and the retry was answered
    ttft = reg.get_sample_value("latchgate_time_to_first_token_seconds_sum", um_)
    assert ttft is not None and 0.3 <= ttft < 3.0
    assert reg.get_sample_value("latchgate_overhead_seconds_count", {"route": "chat"}) == 2


@pytest.mark.parametrize(
    "scenario",
    [
        s
        for s in SCENARIOS
        if s.name in ("watchdog_first_token", "watchdog_idle", "client_disconnect")
    ],
    ids=lambda s: s.name,
)
async def test_waiting_on_the_upstream_is_not_latchgate_overhead(
    scenario: Scenario, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # The watchdogs wait 0.3 s on a silent upstream, and the silent retry then backs off
    # 0.25-0.5 s: time the upstream cost. latchgate's own overhead for one such request is a few
    # milliseconds, so anything near the waits means they were counted as proxy cost.
    lg = await start_proxy(upstream_table(fake))
    await scenario.drive(lg, fake, "fake-model")
    reg = lg.proxy.metrics.registry
    assert reg.get_sample_value("latchgate_overhead_seconds_count", {"route": "chat"}) == 1
    overhead = reg.get_sample_value("latchgate_overhead_seconds_sum", {"route": "chat"})
    assert overhead is not None and overhead < 0.05
