"""Self-healing tool calls and enforced tool_choice through a running latchgate (issue 19).

The scripted upstream answers first with a call that is there but wrong (a tool that was never
declared, arguments that do not validate), or with prose when `tool_choice` forced a call, then
with whatever the test scripts for the second ask. Read back with the real openai SDK, whole and
streamed (the SDK's stream helper and manual accumulation), and through the Responses and
Messages fronts: the client must see only the healed answer, the upstream must have been asked
again once with the model's own reply and a correction naming what was wrong and the tools that
exist, and every heal, enforcement and conversion must be a notice and a counter.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, completion, text_stream
from tests.http.test_logs import captured, lines
from tests.http.test_responses import calls_stream, tool_call
from tests.http.test_toolcalls import accumulate, one_char_stream

__all__ = ["captured"]  # a fixture of test_logs', used here
MODEL = "fake-model"
TOOLS: Any = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
]
MSG: Any = [{"role": "user", "content": "Show me src/main.py."}]
GOOD = ("call_1", "read_file", '{"path": "src/main.py"}')
UNKNOWN = ("call_1", "main.py", '{"path": "src/main.py"}')
INVALID = ("call_1", "get_weather", '{"city": "Paris", "unit": "kelvin"}')


def calls_reply(*calls: tuple[str, str, str], content: str | None = None) -> Json:
    return Json(completion(content, finish="tool_calls",  # type: ignore[arg-type]
                           tool_calls=[tool_call(*c) for c in calls]))


def reply(stream: bool, *calls: tuple[str, str, str]) -> Json | Stream:
    return calls_stream(*calls) if stream else calls_reply(*calls)


@pytest.fixture
async def api(lg: Running) -> AsyncIterator[Any]:
    client = lg.client()
    yield client
    await client.close()


def sample(lg: Running, name: str, **labels: str) -> float:
    full = {"upstream": "fake", "model": MODEL, **labels}
    return lg.proxy.metrics.registry.get_sample_value(name, full) or 0.0


Got = tuple[str | None, list[tuple[str, Any]], str | None]


async def ask(api: Any, how: str, **extra: Any) -> tuple[Got, list[str]]:
    """One chat turn, whole or streamed ("helper": the SDK's stream helper; "manual": deltas
    accumulated by hand): (content, [(name, arguments)], finish), and the notices."""
    kw: dict[str, Any] = {"model": MODEL, "messages": MSG, "tools": TOOLS, **extra}
    if how == "whole":
        raw = await api.chat.completions.with_raw_response.create(**kw)
        choice = raw.parse().choices[0]
        calls = [(c.function.name, json.loads(c.function.arguments))
                 for c in choice.message.tool_calls or []]
        got: Got = (choice.message.content, calls, choice.finish_reason)
        return got, raw.headers.get_list("x-latchgate-notice")
    if how == "helper":
        # The helper parses only strict tools (a client-side check; latchgate sends them on).
        kw["tools"] = [{**t, "function": {**t["function"], "strict": True}} for t in TOOLS]
        async with api.chat.completions.stream(**kw) as stream:
            final = await stream.get_final_completion()
        choice = final.choices[0]
        calls = [(c.function.name, json.loads(c.function.arguments))
                 for c in choice.message.tool_calls or []]
        return (choice.message.content or None, calls, choice.finish_reason), []
    stream = await api.chat.completions.create(stream=True, **kw)
    content, raw_calls, finish = accumulate([c async for c in stream])
    return (content, [(n, a) for _, n, a in raw_calls], finish), []


HOWS = ["whole", "helper", "manual"]


# -- calls that are there but wrong ----------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
async def test_unknown_tool_is_healed(how: str, fake: FakeUpstream, lg: Running, api: Any) -> None:
    stream = how != "whole"
    fake.push(reply(stream, UNKNOWN), reply(stream, GOOD))
    got, notices = await ask(api, how)
    assert got == (None, [("read_file", {"path": "src/main.py"})], "tool_calls")
    first, second = fake.bodies()
    assert first["messages"] == MSG
    # The second ask: the conversation, the model's own reply, and the error per call.
    assert second["messages"][:1] == MSG
    # (the reply as the text the model would write, then a user turn saying what was wrong)
    said, correction = second["messages"][1:]
    assert said["role"] == "assistant"
    assert json.loads(said["content"]) == {"name": "main.py", "arguments": {"path": "src/main.py"}}
    assert correction["role"] == "user"
    assert correction["content"].startswith("The tool 'main.py' does not exist.")
    assert "- read_file: Read a file of the project. Required: path (string)." in (
        correction["content"])
    assert "- get_weather:" in correction["content"]
    assert [t["function"]["name"] for t in second["tools"]] == ["read_file", "get_weather"]
    if how == "whole":
        assert any("asked again" in n and "second answer is valid" in n for n in notices)
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="healed") == 1


@pytest.mark.parametrize("how", HOWS)
async def test_invalid_arguments_are_healed(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    stream = how != "whole"
    fixed = ("call_2", "get_weather", '{"city": "Paris", "unit": "celsius"}')
    fake.push(reply(stream, INVALID), reply(stream, fixed))
    got, _ = await ask(api, how)
    assert got == (None, [("get_weather", {"city": "Paris", "unit": "celsius"})], "tool_calls")
    correction = fake.bodies()[1]["messages"][-1]
    assert correction["role"] == "user"
    assert "'unit'" in correction["content"] and '"kelvin"' in correction["content"]
    # Only the tool whose arguments were wrong is listed, with its enum spelt out.
    assert "Call 'get_weather' again with these parameters:" in correction["content"]
    assert 'unit (one of "celsius", "fahrenheit")' in correction["content"]
    assert "read_file" not in correction["content"]
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="healed") == 1


@pytest.mark.parametrize("how", HOWS)
async def test_a_second_failure_is_flagged_not_looped(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    stream = how != "whole"
    other = ("call_9", "src_main.py", "{}")
    fake.push(reply(stream, UNKNOWN), reply(stream, other), reply(stream, GOOD))
    got, notices = await ask(api, how)
    # Two asks, not three; equally bad answers: the first (what the model said unprompted).
    assert len(fake.bodies()) == 2
    assert got == (None, [("main.py", {"path": "src/main.py"})], "tool_calls")
    if how == "whole":
        assert any("not valid either" in n for n in notices)
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="failed") == 1


@pytest.mark.parametrize("first_streamed", [True, False])
@pytest.mark.parametrize("how", ["helper", "manual"])
async def test_a_stream_and_a_whole_answer_to_it_keep_the_first_of_two_failures(
    how: str, first_streamed: bool, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # A streamed request one of whose attempts the server answers whole (latchgate streams
    # that answer itself): the first answer, kept while the model is asked again, goes out as
    # a stream whichever way it came.
    other = ("call_9", "src_main.py", "{}")
    fake.push(reply(first_streamed, UNKNOWN), reply(not first_streamed, other))
    got, _ = await ask(api, how)
    assert len(fake.bodies()) == 2
    assert got == (None, [("main.py", {"path": "src/main.py"})], "tool_calls")
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="failed") == 1


@pytest.mark.parametrize("how", HOWS)
async def test_a_request_too_deep_to_write_again_passes_the_reply_on_flagged(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # 300 levels of nesting: orjson reads the request (its own bytes go upstream) but cannot
    # write the body that would ask again (254 levels at most). That was a 500.
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    stream = how != "whole"
    fake.push(reply(stream, UNKNOWN), reply(stream, GOOD))
    got, notices = await ask(api, how, extra_body={"metadata": deep})
    assert got == (None, [("main.py", {"path": "src/main.py"})], "tool_calls")
    assert len(fake.bodies()) == 1
    if how == "whole":
        assert any("more than 254 levels deep" in n and "passed it on" in n for n in notices)
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="flagged") == 1


async def test_the_better_of_two_failures_is_returned(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    two_bad = calls_reply(UNKNOWN, ("call_2", "nope", "{}"))
    fake.push(two_bad, calls_reply(("call_3", "get_weather", '{"unit": "celsius"}')))
    got, _ = await ask(api, "whole")
    assert got == (None, [("get_weather", {"unit": "celsius"})], "tool_calls")


async def test_one_bad_call_of_two_is_reported_and_both_are_sent_back(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(calls_reply(GOOD, ("call_2", "weather", '{"city": "Oslo"}')),
              calls_reply(GOOD, ("call_3", "get_weather", '{"city": "Oslo"}')))
    got, _ = await ask(api, "whole")
    assert [name for name, _ in got[1]] == ["read_file", "get_weather"]
    said, correction = fake.bodies()[1]["messages"][-2:]
    assert [json.loads(line)["name"] for line in said["content"].split("\n")] == [
        "read_file", "weather"]
    assert correction["content"].startswith("The tool 'weather' does not exist.")


async def test_heal_retries_zero_passes_the_reply_on(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "heal_retries": 0})
    api = lg.client()
    fake.push(calls_reply(UNKNOWN))
    got, notices = await ask(api, "whole")
    await api.close()
    assert got[1] == [("main.py", {"path": "src/main.py"})]
    assert len(fake.bodies()) == 1
    assert not any("asked again" in n for n in notices)


async def test_heal_retries_two_asks_twice(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "heal_retries": 2})
    api = lg.client()
    fake.push(calls_reply(UNKNOWN), calls_reply(("c2", "main", "{}")), calls_reply(GOOD))
    got, _ = await ask(api, "whole")
    await api.close()
    assert got[1] == [("read_file", {"path": "src/main.py"})]
    third = fake.bodies()[2]["messages"]
    # Each ask carries the earlier ones: the conversation grows by a reply and its errors.
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]


async def test_text_after_it_reached_the_client_is_flagged_not_healed(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # The call comes only once the client has the text.
    seen = asyncio.Event()
    paused = calls_stream(UNKNOWN, content="Let me look at that file.")
    paused.events.insert(2, seen)
    fake.push(paused, reply(True, GOOD))
    stream = await api.chat.completions.create(
        model=MODEL, messages=MSG, tools=TOOLS, stream=True)
    chunks = []
    async for c in stream:
        chunks.append(c)
        if c.choices and c.choices[0].delta.content:
            seen.set()
    content, raw_calls, finish = accumulate(chunks)
    got = (content, [(n, a) for _, n, a in raw_calls], finish)
    assert got == ("Let me look at that file.", [("main.py", {"path": "src/main.py"})],
                   "tool_calls")
    assert len(fake.bodies()) == 1
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="flagged") == 1


async def test_a_text_reply_is_never_re_asked(fake: FakeUpstream, lg: Running, api: Any) -> None:
    fake.push(Json(completion("I cannot read files.")), text_stream("I cannot", " read files."))
    assert (await ask(api, "whole"))[0] == ("I cannot read files.", [], "stop")
    assert (await ask(api, "manual"))[0] == ("I cannot read files.", [], "stop")
    assert len(fake.bodies()) == 2


async def test_a_call_cut_off_at_the_ceiling_is_not_re_asked(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    cut = Json(completion(None, finish="length",  # type: ignore[arg-type]
                          tool_calls=[tool_call("c1", "read_file", '{"path": "src/ma')]))
    fake.push(cut)
    raw = await api.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=TOOLS, max_tokens=5)
    assert raw.parse().choices[0].finish_reason == "length"
    assert len(fake.bodies()) == 1
    assert any("max_tokens" in n for n in raw.headers.get_list("x-latchgate-notice"))


async def test_a_recovered_call_to_an_invalid_enum_is_healed(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    written = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome", "unit": "K"}}'
    written += "</tool_call>"
    fake.push(Json(completion(written)), calls_reply(
        ("c2", "get_weather", '{"city": "Rome", "unit": "celsius"}')))
    got, _ = await ask(api, "whole")
    assert got[1] == [("get_weather", {"city": "Rome", "unit": "celsius"})]
    said = fake.bodies()[1]["messages"][1]
    assert json.loads(said["content"])["arguments"] == {"city": "Rome", "unit": "K"}


async def test_a_schema_that_cannot_be_compiled_is_skipped_with_a_notice(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    odd: Any = [{"type": "function", "function": {
        "name": "odd", "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}}]
    fake.push(calls_reply(("c1", "odd", '{"a": 1}')))
    raw = await api.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=odd)
    assert raw.status_code == 200
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "odd"
    assert len(fake.bodies()) == 1
    assert any("could not be compiled" in n for n in raw.headers.get_list("x-latchgate-notice"))


# -- tool_choice -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
async def test_required_tool_choice_answered_in_prose_is_re_asked(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    stream = how != "whole"
    prose = text_stream("The file ", "is probably fine.") if stream else Json(
        completion("The file is probably fine."))
    fake.push(prose, reply(stream, GOOD))
    got, _ = await ask(api, how, tool_choice="required")
    # The prose never reached the client: held while the choice forced a call.
    assert got == (None, [("read_file", {"path": "src/main.py"})], "tool_calls")
    said, correction = fake.bodies()[1]["messages"][1:]
    assert said == {"role": "assistant", "content": "The file is probably fine."}
    assert correction["role"] == "user"
    assert correction["content"].startswith(
        "You must call one of these tools now instead of answering in text:")
    assert "- read_file:" in correction["content"]
    # Restated in words, not resent: llama-server runs a "required" turn it cannot force to
    # max_tokens (bench/RESULTS.md), and the answer is judged again anyway.
    assert "tool_choice" not in fake.bodies()[1]
    assert sample(lg, "latchgate_tool_choice_enforced_total", choice="required",
                  outcome="enforced") == 1


@pytest.mark.parametrize("how", ["whole", "manual"])
async def test_named_tool_choice_answered_with_another_call_is_re_asked(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    stream = how != "whole"
    weather = ("c2", "get_weather", '{"city": "Paris"}')
    fake.push(reply(stream, GOOD), reply(stream, weather))
    named = {"type": "function", "function": {"name": "get_weather"}}
    got, _ = await ask(api, how, tool_choice=named)
    assert got[1] == [("get_weather", {"city": "Paris"})]
    last = fake.bodies()[1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"].startswith("You must call the tool 'get_weather' now:")
    assert "- get_weather:" in last["content"] and "- read_file" not in last["content"]
    assert sample(lg, "latchgate_tool_choice_enforced_total", choice="function",
                  outcome="enforced") == 1


async def test_required_choice_still_unmet_is_flagged_with_the_prose(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(text_stream("No."), text_stream("Still no."))
    got, _ = await ask(api, "manual", tool_choice="required")
    assert got == ("No.", [], "stop")  # equally bad: the first answer
    assert sample(lg, "latchgate_tool_choice_enforced_total", choice="required",
                  outcome="failed") == 1


@pytest.mark.parametrize("how", HOWS)
async def test_none_tool_choice_turns_calls_into_text(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    stream = how != "whole"
    fake.push(reply(stream, GOOD))
    got, _ = await ask(api, how, tool_choice="none")
    content, calls, finish = got
    assert calls == [] and finish == "stop"
    assert content is not None
    assert json.loads(content) == {"name": "read_file", "arguments": {"path": "src/main.py"}}
    assert len(fake.bodies()) == 1
    assert sample(lg, "latchgate_tool_choice_enforced_total", choice="none",
                  outcome="converted") == 1


@pytest.mark.parametrize("how", HOWS)
async def test_none_tool_choice_puts_the_calls_text_on_a_line_after_the_reply(
    how: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # Whole, `reply_text` joins the content and the calls' lines with a newline; streamed, the
    # text went out before the calls came, and their line must still start on a line of its own.
    stream = how != "whole"
    fake.push(calls_stream(GOOD, content="Let me check.") if stream
              else calls_reply(GOOD, content="Let me check."))
    got, _ = await ask(api, how, tool_choice="none")
    assert got == (
        'Let me check.\n{"name": "read_file", "arguments": {"path":"src/main.py"}}', [], "stop"
    )


async def test_none_tool_choice_leaves_a_written_call_as_text(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    written = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
    fake.push(Json(completion(written)))
    got, _ = await ask(api, "whole", tool_choice="none")
    assert got == (written, [], "stop")


async def messages_stream(lg: Running) -> Any:
    """One streamed Messages turn declaring read_file, as the anthropic SDK's helper sends it."""
    sdk = anthropic.AsyncAnthropic(base_url=lg.url, api_key="x", max_retries=0)
    tool: Any = {"name": "read_file", "description": "Read a file.",
                 "input_schema": TOOLS[0]["function"]["parameters"]}
    try:
        async with sdk.messages.stream(
            model=MODEL, max_tokens=100, tools=[tool],
            messages=[{"role": "user", "content": "Show src/main.py"}],
        ) as stream:
            return await stream.get_final_message()
    finally:
        await sdk.close()


# -- the other fronts ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_front_gets_the_healed_call(
    stream: bool, fake: FakeUpstream, lg: Running
) -> None:
    fake.push(reply(stream, UNKNOWN), reply(stream, GOOD))
    client = lg.client()
    tools: Any = [{"type": "function", **{k: v for k, v in TOOLS[0]["function"].items()}}]
    kw: Any = {"model": MODEL, "input": "Show src/main.py", "tools": tools}
    if stream:
        async with client.responses.stream(**kw) as events:
            response = await events.get_final_response()
    else:
        response = await client.responses.create(**kw)
    await client.close()
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("read_file", {"path": "src/main.py"})]
    assert len(fake.bodies()) == 2


async def test_messages_front_stream_gets_the_healed_call(
    fake: FakeUpstream, lg: Running
) -> None:
    fake.push(calls_stream(UNKNOWN), calls_stream(GOOD))
    message = await messages_stream(lg)
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [("read_file", {"path": "src/main.py"})]
    assert message.stop_reason == "tool_use"
    assert len(fake.bodies()) == 2


async def test_usage_only_chunk_after_a_held_call_still_reaches_the_client(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(calls_stream(GOOD))
    stream = await api.chat.completions.create(
        model=MODEL, messages=MSG, tools=TOOLS, stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 17
    assert accumulate(chunks)[1][0][1] == "read_file"


async def test_the_log_line_says_what_was_healed_and_enforced(
    fake: FakeUpstream, lg: Running, api: Any, captured: io.StringIO
) -> None:
    fake.push(calls_reply(UNKNOWN), calls_reply(GOOD))
    await ask(api, "whole")
    fake.push(Json(completion("Fine.")), calls_reply(GOOD))
    await ask(api, "whole", tool_choice="required")
    fake.push(calls_reply(GOOD))
    await ask(api, "whole", tool_choice="none")
    requests = [line for line in lines(captured) if line.get("event") == "request"]
    assert [r.get("tool_heal") for r in requests] == ["healed", None, None]
    assert [r.get("tool_choice_enforced") for r in requests] == [
        None, "required: enforced", "none: converted"]
    assert [r["attempts"] for r in requests] == [2, 2, 1]


BARE = '{"name": "main.py", "arguments": {"path": "src/main.py"}}'
FENCED = '```json\n{"name": "src/main.py", "parameters": {}}\n```'
HERMES = '<tool_call>\n{"name": "cat", "arguments": {"file": "src/main.py"}}\n</tool_call>'


# A stream relays a fenced block once its first lines show it is no call to a declared tool:
# that one is healed only whole (streamed, the fence reaches the client as the text it is).
@pytest.mark.parametrize(("how", "text"), [
    ("whole", BARE), ("manual", BARE), ("whole", FENCED), ("whole", HERMES), ("manual", HERMES),
    ("manual", BARE + "\n"), ("helper", BARE),
])
async def test_a_written_call_to_an_undeclared_tool_is_healed(
    how: str, text: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # Recovery keeps calls to undeclared tools as text (only declared tools count); the reply is
    # nonetheless a call to a tool that does not exist, and is asked for again.
    first = one_char_stream(text) if how != "whole" else Json(completion(text))
    fake.push(first, reply(how != "whole", GOOD))
    got, _ = await ask(api, how)
    assert got == (None, [("read_file", {"path": "src/main.py"})], "tool_calls")
    said, correction = fake.bodies()[1]["messages"][1:]
    assert said == {"role": "assistant", "content": text}
    assert correction["role"] == "user"
    assert correction["content"].startswith("The tool ")
    assert "does not exist." in correction["content"]


async def test_prose_with_json_in_it_is_not_a_written_call(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    text = 'Use it like this: {"name": "main.py", "arguments": {}} and you are done.'
    fake.push(Json(completion(text)))
    assert (await ask(api, "whole"))[0] == (text, [], "stop")
    assert len(fake.bodies()) == 1


# A streamed request's first answer may come whole (a server that ignored `stream`): it is
# kept, and sent, as a stream all the same.
@pytest.mark.parametrize(
    ("how", "first_streamed"),
    [("whole", False), ("manual", True), ("manual", False), ("helper", False)],
)
async def test_when_asking_again_fails_the_first_answer_is_returned(
    how: str, first_streamed: bool, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 0})
    api = lg.client()
    overflow = Json({"error": {"code": 400, "type": "exceed_context_size_error",
                               "message": "the request exceeds the available context size, "
                               "try increasing it", "n_prompt_tokens": 5000, "n_ctx": 4096}},
                    status=400)
    fake.push(reply(first_streamed, UNKNOWN), overflow)
    got, notices = await ask(api, how)
    await api.close()
    assert got == (None, [("main.py", {"path": "src/main.py"})], "tool_calls")
    if how == "whole":
        assert any("that failed (HTTP 400)" in n for n in notices)
    assert sample(lg, "latchgate_tool_calls_healed_total", outcome="failed") == 1


async def test_a_forced_choice_run_to_the_ceiling_in_prose_is_re_asked(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # llama-server accepts a "required" it cannot force and runs the turn to max_tokens.
    fake.push(Json(completion("Hello! Hello! Hello!", finish="length")), calls_reply(GOOD))
    got, _ = await ask(api, "whole", tool_choice="required", max_tokens=8)
    assert got == (None, [("read_file", {"path": "src/main.py"})], "tool_calls")
    assert len(fake.bodies()) == 2


async def test_a_second_answer_that_copies_the_example_is_not_taken(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(Json(completion("It is fine.")),
              calls_reply(("c2", "read_file", '{"path": "..."}')))
    got, notices = await ask(api, "whole", tool_choice="required")
    assert got == ("It is fine.", [], "stop")  # one problem each: the first answer
    assert any("placeholder" in n for n in notices)


async def test_calls_are_judged_against_the_schema_the_server_was_sent(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # The client's schema cannot be satisfied (minItems above maxItems); latchgate sent the
    # server a sanitised one, and a call that fits it is not asked for again.
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "schema_mode": "sanitise"})
    tools: Any = [{"type": "function", "function": {"name": "tag", "parameters": {
        "type": "object", "properties": {"labels": {
            "type": "array", "items": {"type": "string"}, "minItems": 5, "maxItems": 2}}}}}]
    fake.push(calls_reply(("c1", "tag", '{"labels": ["bug"]}')))
    api = lg.client()
    raw = await api.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=tools)
    await api.close()
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "tag"
    assert len(fake.bodies()) == 1
    assert "minItems" not in fake.bodies()[0]["tools"][0]["function"]["parameters"][
        "properties"]["labels"]
