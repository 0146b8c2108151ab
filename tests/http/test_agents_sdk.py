"""The OpenAI Agents SDK, with its default model API (Responses), through latchgate.

An Agent with one function tool runs two turns against the scripted fake upstream: the first
answers with a call to the tool (as a native chat `tool_calls` answer, or written as text in
Hermes format, which latchgate recovers), the SDK runs the tool and sends its output back, and
the second turn answers in words. Both `Runner.run` and `Runner.run_streamed`, whichever of
whole or streamed the SDK asks the upstream for.

Nothing reaches the internet: the SDK's default client is latchgate's, tracing is off (and its
exporter made to fail loudly), and any OpenAI client built without latchgate's address would
point at a closed local port. The SDK's global settings are put back after each test.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.models import _openai_shared
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from agents.tracing import get_trace_provider
from agents.tracing.processors import BackendSpanExporter
from agents.tracing.provider import DefaultTraceProvider

from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Json, Recorded, Stream, chunk, completion, text_stream

WEATHER = "Sunny and 21 degrees in Paris."
FINAL = "It is sunny in Paris, 21 degrees."
HERMES = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


@pytest.fixture
async def sdk(lg: Running, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    """The Agents SDK's default client pointed at latchgate, for this test only."""
    # Any client the SDK would build on its own goes to a closed local port, not to OpenAI.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")

    def no_export(self: object, items: object) -> None:
        raise AssertionError("the Agents SDK tried to export traces")

    monkeypatch.setattr(BackendSpanExporter, "export", no_export)
    provider = get_trace_provider()
    saved_client = _openai_shared.get_default_openai_client()
    saved_responses = _openai_shared.get_use_responses_by_default()
    saved_key = _openai_shared.get_default_openai_key()
    saved_manual = getattr(provider, "_manual_disabled", None)

    set_default_openai_client(lg.client(api_key="x"), use_for_tracing=False)
    set_default_openai_api("responses")  # the default, said outright
    set_tracing_disabled(True)
    try:
        yield lg
    finally:
        _openai_shared.set_default_openai_client(saved_client)  # type: ignore[arg-type]
        _openai_shared.set_use_responses_by_default(saved_responses)
        if saved_key is not None:
            _openai_shared.set_default_openai_key(saved_key)
        else:
            _openai_shared._default_openai_key = None
        if isinstance(provider, DefaultTraceProvider):
            provider._manual_disabled = saved_manual
            provider._refresh_disabled_flag()


def weather_agent(ran: list[str]) -> Agent[Any]:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return WEATHER

    return Agent(
        name="weather",
        instructions="Answer questions about the weather with the get_weather tool.",
        model="fake-model",
        tools=[get_weather],
    )


# -- the fake upstream's two turns, whole or streamed as asked ---------------------------------


def native_call(stream: bool) -> Json | Stream:
    if not stream:
        call = {
            "id": "call_w1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        body = completion("", finish="tool_calls", tool_calls=[call], usage=USAGE)
        body["choices"][0]["message"]["content"] = None  # as servers send it beside calls
        return Json(body)
    head = {"index": 0, "id": "call_w1", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}  # fmt: skip
    return Stream([
        chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(choices=[], usage=USAGE),
        "[DONE]",
    ])  # fmt: skip


def hermes_call(stream: bool) -> Json | Stream:
    if not stream:
        return Json(completion(HERMES, usage=USAGE))
    return text_stream(HERMES[:20], HERMES[20:45], HERMES[45:])


def final_text(stream: bool) -> Json | Stream:
    if not stream:
        return Json(completion(FINAL, usage=USAGE))
    return text_stream("It is sunny ", "in Paris, ", "21 degrees.")


def whole_or_streamed(make: Any) -> Any:
    def reply(rec: Recorded) -> Json | Stream:
        return make(bool(rec.json.get("stream")))

    return reply


CALL_STYLES = {"native": native_call, "hermes": hermes_call}


def check_upstream_turns(fake: FakeUpstream) -> None:
    """Two chat requests; the second carries the call and the tool's output as a tool message."""
    bodies = fake.bodies()
    assert len(bodies) == 2, bodies
    first, second = bodies
    assert [t["function"]["name"] for t in first.get("tools", [])] == ["get_weather"]
    messages = second["messages"]
    calls = [
        call for m in messages if m.get("role") == "assistant" for call in m.get("tool_calls") or []
    ]
    assert len(calls) == 1, messages
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    tool_messages = [m for m in messages if m.get("role") == "tool"]
    assert len(tool_messages) == 1, messages
    assert tool_messages[0]["tool_call_id"] == calls[0]["id"]
    content = tool_messages[0]["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    assert WEATHER in text
    # The tool message answers the call right before it.
    at = messages.index(tool_messages[0])
    assert messages[at - 1].get("tool_calls") == calls


@pytest.mark.parametrize("style", sorted(CALL_STYLES))
async def test_runner_run_calls_the_tool_and_answers(
    sdk: Running, fake: FakeUpstream, style: str
) -> None:
    fake.push(whole_or_streamed(CALL_STYLES[style]), whole_or_streamed(final_text))
    ran: list[str] = []
    result = await Runner.run(
        weather_agent(ran),
        "What is the weather in Paris?",
        run_config=RunConfig(tracing_disabled=True),
    )
    assert result.final_output == FINAL
    assert ran == ["Paris"]
    check_upstream_turns(fake)
    assert len(fake.requests) == 2


@pytest.mark.parametrize("style", sorted(CALL_STYLES))
async def test_runner_run_streamed_calls_the_tool_and_answers(
    sdk: Running, fake: FakeUpstream, style: str
) -> None:
    fake.push(whole_or_streamed(CALL_STYLES[style]), whole_or_streamed(final_text))
    ran: list[str] = []
    result = Runner.run_streamed(
        weather_agent(ran),
        "What is the weather in Paris?",
        run_config=RunConfig(tracing_disabled=True),
    )
    raw_types: list[str] = []
    items: list[str] = []
    async for event in result.stream_events():
        if isinstance(event, RawResponsesStreamEvent):
            raw_types.append(event.data.type)
        elif isinstance(event, RunItemStreamEvent):
            items.append(event.name)
    assert result.final_output == FINAL
    assert ran == ["Paris"]
    assert "tool_called" in items and "tool_output" in items, items
    assert "message_output_created" in items, items
    assert raw_types.count("response.created") == 2, raw_types
    assert raw_types.count("response.completed") == 2, raw_types
    assert "response.output_text.delta" in raw_types
    check_upstream_turns(fake)
    assert all(body.get("stream") for body in fake.bodies())
