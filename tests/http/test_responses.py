"""The Responses front through a running latchgate, read back with the real openai SDK (issue 15).

latchgate stands in front of the scripted fake chat upstream; the client speaks the Responses
API (`responses.create`, `responses.stream`, `responses.parse`, the store's routes). What is
checked is what a Responses client relies on: the Response object and its items, the streamed
events in the order the SDK replays them, calls recovered from text and custom tools unwrapped,
refusals latched and resent, overflows and cut streams raised, conversations continued both by
resending items and by `previous_response_id`, stored responses visible only to their key, and
the passthrough of OpenAI upstreams.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from pydantic import BaseModel

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion, text_stream
from tests.http.test_toolcalls import _FORMAT_CASES
from tests.toolcall_corpus import Case

MODEL = "fake-model"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
PATCH_GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR},
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"


def call_chunk(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    fragment = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return chunk({"tool_calls": [fragment]})


def calls_stream(*calls: tuple[str, str, str], content: str = "") -> Stream:
    """A stream answering with native tool calls (after some text, if given)."""
    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    if content:
        events.append(chunk({"content": content}))
    events += [call_chunk(i, cid, name, args) for i, (cid, name, args) in enumerate(calls)]
    events += [chunk({}, "tool_calls"), usage_chunk(), "[DONE]"]
    return Stream(events)


def usage_chunk(prompt: int = 12, completion_tokens: int = 5) -> dict[str, Any]:
    return chunk(
        choices=[],
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    )


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def sse_events(lg: Running, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a streamed Responses request and parse every event (name and data must agree)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{lg.base_url}/responses", json=body) as resp,
    ):
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = await resp.read()
    events = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        name = lines[0].removeprefix("event: ")
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == name
        events.append(data)
    return events


# -- whole answers -----------------------------------------------------------------------


async def test_a_whole_text_answer_is_a_response_object(lg: Running, fake: FakeUpstream) -> None:
    response = await lg.client().responses.create(
        model=MODEL, input="Hi", instructions="Be brief.", temperature=0.2, max_output_tokens=50
    )
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status == "completed" and response.output_text == "Hello!"
    assert response.instructions == "Be brief." and response.temperature == 0.2
    assert response.max_output_tokens == 50 and response.tool_choice == "auto"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 3)
    assert response.usage.total_tokens == 13
    message = response.output[0]
    assert message.type == "message" and message.id.startswith("msg_")
    assert fake.bodies()[-1] == {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 50,
        "temperature": 0.2,
    }
    requests = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_requests_total",
        {
            "upstream": "fake",
            "model": MODEL,
            "route": "responses",
            "status": "200",
            "stream": "false",
        },
    )
    assert requests == 1


async def test_reasoning_becomes_a_reasoning_item_before_the_message(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(completion("Paris.", reasoning_content="The capital of France.")))
    response = await lg.client().responses.create(
        model=MODEL, input="Capital of France?", include=["reasoning.encrypted_content"]
    )
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and reasoning.summary == []
    assert reasoning.content is not None
    assert reasoning.content[0].text == "The capital of France."
    assert reasoning.encrypted_content and reasoning.encrypted_content.startswith("lg1:")
    assert message.type == "message" and response.output_text == "Paris."


async def test_a_length_cut_is_incomplete(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(completion("Once upon a", finish="length")))
    response = await lg.client().responses.create(model=MODEL, input="Tell a story")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[-1].status == "incomplete"


async def test_tool_calls_whole_keep_the_text_and_get_their_own_ids(
    lg: Running, fake: FakeUpstream
) -> None:
    calls = [
        tool_call("call_a", "get_weather", '{"city":"Paris"}'),
        tool_call("call_b", "get_weather", '{"city":"Rome"}'),
    ]
    fake.push(Json(completion("Checking.", finish="tool_calls", tool_calls=calls)))
    response = await lg.client().responses.create(model=MODEL, input="Weather?", tools=[WEATHER])
    message, first, second = response.output
    assert message.type == "message" and response.output_text == "Checking."
    assert first.type == second.type == "function_call"
    assert (first.call_id, first.name, first.arguments) == (
        "call_a",
        "get_weather",
        '{"city":"Paris"}',
    )
    assert second.call_id == "call_b" and first.id != second.id and first.id.startswith("fc_")
    sent = fake.bodies()[-1]["tools"]
    assert sent == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER["parameters"],
                "strict": True,
            },
        }
    ]


@pytest.mark.parametrize("case", _FORMAT_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("stream", [False, True])
async def test_calls_written_as_text_are_recovered_in_every_format(
    lg: Running, fake: FakeUpstream, case: Case, stream: bool
) -> None:
    tools = [{"type": "function", **t["function"]} for t in case.tools]
    if stream:
        fake.push(text_stream(*[case.text[i : i + 7] for i in range(0, len(case.text), 7)]))
        async with lg.client().responses.stream(model=MODEL, input="go", tools=tools) as events:
            response = await events.get_final_response()
    else:
        fake.push(Json(completion(case.text)))
        response = await lg.client().responses.create(model=MODEL, input="go", tools=tools)
    calls = [
        (i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"
    ]
    assert calls == [(name, args) for name, args in case.calls]
    call_ids = [i.call_id for i in response.output if i.type == "function_call"]
    assert all(c.startswith("call_") and "recovered" not in c for c in call_ids)
    assert len(set(call_ids)) == len(call_ids)
    text = "".join(i.content[0].text for i in response.output if i.type == "message")
    assert text == (case.content or "")


async def test_a_custom_tool_round_trips_as_a_custom_tool_call(
    lg: Running, fake: FakeUpstream
) -> None:
    arguments = orjson.dumps({"input": PATCH}).decode()
    fake.push(
        Json(
            completion(
                None,
                finish="tool_calls",
                tool_calls=[tool_call("call_p", "apply_patch", arguments)],
            )
        )
    )
    response = await lg.client().responses.create(
        model=MODEL, input="Add hello.txt", tools=[APPLY_PATCH]
    )
    (item,) = response.output
    assert item.type == "custom_tool_call"
    assert (item.name, item.input, item.call_id) == ("apply_patch", PATCH, "call_p")
    (function,) = fake.bodies()[-1]["tools"]
    assert function["function"]["parameters"]["required"] == ["input"]
    assert PATCH_GRAMMAR in function["function"]["description"]
    # The next turn sends the call and its output back, as Codex does (store: false).
    fake.push(Json(completion("Done.")))
    await lg.client().responses.create(
        model=MODEL,
        store=False,
        tools=[APPLY_PATCH],
        input=[
            {"role": "user", "content": "Add hello.txt"},
            {
                "type": "custom_tool_call",
                "call_id": "call_p",
                "name": "apply_patch",
                "input": PATCH,
            },
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success."},
        ],
    )
    messages = fake.bodies()[-1]["messages"]
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": arguments,
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "call_p", "content": "Success."}


async def test_a_namespaced_tool_is_flattened_and_named_back(
    lg: Running, fake: FakeUpstream
) -> None:
    namespace = {
        "type": "namespace",
        "name": "files",
        "description": "File tools",
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
    }
    fake.push(
        Json(
            completion(
                None, finish="tool_calls", tool_calls=[tool_call("call_r", "files__read", "{}")]
            )
        )
    )
    response = await lg.client().responses.create(model=MODEL, input="x", tools=[namespace])
    (item,) = response.output
    assert item.type == "function_call" and item.name == "read"
    assert item.namespace == "files"
    assert fake.bodies()[-1]["tools"][0]["function"]["name"] == "files__read"


async def test_hosted_tools_are_removed_with_a_notice_and_forcing_one_is_a_400(
    lg: Running, fake: FakeUpstream
) -> None:
    raw = await lg.client().responses.with_raw_response.create(
        model=MODEL, input="x", tools=[WEATHER, {"type": "web_search"}]
    )
    assert [t["function"]["name"] for t in fake.bodies()[-1]["tools"]] == ["get_weather"]
    notices = raw.headers.get_list("x-latchgate-notice")
    assert any("web_search" in n for n in notices)
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().responses.create(
            model=MODEL,
            input="x",
            tools=[{"type": "web_search"}],
            tool_choice={"type": "web_search"},  # type: ignore[typeddict-item]
        )
    assert info.value.body["param"] == "tool_choice"  # type: ignore[index]
    assert len(fake.requests) == 1


class Answer(BaseModel):
    city: str
    temperature: float


async def test_parse_with_a_pydantic_text_format(lg: Running, fake: FakeUpstream) -> None:
    fake.push(Json(completion('{"city": "Paris", "temperature": 18.5}')))
    response = await lg.client().responses.parse(model=MODEL, input="x", text_format=Answer)
    assert response.output_parsed == Answer(city="Paris", temperature=18.5)
    sent = fake.bodies()[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Answer"
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["city", "temperature"]


# -- streams -----------------------------------------------------------------------------


async def test_a_streamed_answer_comes_in_the_order_the_sdk_replays(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(text_stream("Hel", "lo", " there"))
    events = await sse_events(lg, {"model": MODEL, "input": "Hi", "stream": True})
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    # Text that reaches latchgate in one read goes out as one delta: however many there are,
    # they come between the part's opening and the text's end, and add up to the text.
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Hello there" and 1 <= len(deltas) <= 3
    assert [k for k in kinds if k != "response.output_text.delta"] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    first, last = (
        kinds.index("response.output_text.delta"),
        len(kinds) - 1 - kinds[::-1].index("response.output_text.delta"),
    )
    assert kinds[first - 1] == "response.content_part.added"
    assert kinds[last + 1] == "response.output_text.done"
    done = events[-2]["item"]
    final = events[-1]["response"]
    assert final["output"] == [done] and done["content"][0]["text"] == "Hello there"
    assert events[2]["item"]["id"] == done["id"]
    assert final["usage"]["output_tokens"] == 3 and final["status"] == "completed"
    assert fake.bodies()[-1]["stream_options"] == {"include_usage": True}


async def test_stream_reasoning_then_text_then_a_call_are_three_items_in_turn(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"reasoning_content": "Need the "}),
                chunk({"reasoning_content": "weather."}),
                chunk({"content": "Checking."}),
                call_chunk(0, "call_w", "get_weather", '{"city":'),
                call_chunk(0, "", "", '"Paris"}'),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    )
    async with lg.client().responses.stream(model=MODEL, input="x", tools=[WEATHER]) as stream:
        kinds = [event.type async for event in stream]
        response = await stream.get_final_response()
    reasoning, message, call = response.output
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == "Need the weather."
    assert message.type == "message" and response.output_text == "Checking."
    assert call.type == "function_call" and call.call_id == "call_w"
    assert json.loads(call.arguments) == {"city": "Paris"}
    added = [i for i, k in enumerate(kinds) if k == "response.output_item.added"]
    done = [i for i, k in enumerate(kinds) if k == "response.output_item.done"]
    assert len(added) == len(done) == 3
    assert all(a < d < b for a, d, b in zip(added, done, [*added[1:], len(kinds)], strict=True))
    assert "response.reasoning_text.delta" in kinds


async def test_two_streamed_calls_go_out_one_after_the_other(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        calls_stream(
            ("call_1", "get_weather", '{"city":"Paris"}'),
            ("call_2", "get_weather", '{"city":"Rome"}'),
        )
    )
    events = await sse_events(
        lg, {"model": MODEL, "input": "x", "stream": True, "tools": [WEATHER]}
    )
    final = events[-1]["response"]
    assert [(i["call_id"], json.loads(i["arguments"])) for i in final["output"]] == [
        ("call_1", {"city": "Paris"}),
        ("call_2", {"city": "Rome"}),
    ]
    open_item = None
    for event in events:
        if event["type"] == "response.output_item.added":
            assert open_item is None
            open_item = event["item"]["id"]
        elif event["type"] == "response.output_item.done":
            assert event["item"]["id"] == open_item
            open_item = None
        elif "item_id" in event:
            assert event["item_id"] == open_item


async def test_a_streamed_custom_call_carries_the_unwrapped_input(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(calls_stream(("call_p", "apply_patch", orjson.dumps({"input": PATCH}).decode())))
    events = await sse_events(
        lg, {"model": MODEL, "input": "x", "stream": True, "tools": [APPLY_PATCH]}
    )
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" not in kinds
    done = next(e for e in events if e["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == PATCH
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "custom_tool_call" and item["input"] == PATCH


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_calls_keep_the_models_order_when_a_custom_call_comes_first(
    lg: Running, fake: FakeUpstream, stream: bool
) -> None:
    # Codex runs calls in the order it reads them: "patch, then run the tests" must not become
    # "run the tests, then patch" because the custom call goes out whole at the end.
    calls = [
        ("call_p", "apply_patch", orjson.dumps({"input": PATCH}).decode()),
        ("call_w", "get_weather", '{"city": "Paris"}'),
    ]
    if stream:
        fake.push(calls_stream(*calls))
        async with lg.client().responses.stream(
            model=MODEL, input="x", tools=[APPLY_PATCH, WEATHER]
        ) as events:
            done = [e.item.call_id async for e in events if e.type == "response.output_item.done"]
            response = await events.get_final_response()
        assert done == ["call_p", "call_w"]
    else:
        fake.push(Json(completion(None, finish="tool_calls",
                                  tool_calls=[tool_call(*c) for c in calls])))  # fmt: skip
        response = await lg.client().responses.create(
            model=MODEL, input="x", tools=[APPLY_PATCH, WEATHER]
        )
    assert [(i.type, i.call_id) for i in response.output] == [
        ("custom_tool_call", "call_p"),
        ("function_call", "call_w"),
    ]


async def test_an_upstream_cut_mid_stream_fails_the_response_and_the_sdk_raises(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"})],
            then="drop",
        )
    )
    with pytest.raises(openai.APIError) as info:
        async with lg.client().responses.stream(model=MODEL, input="x") as stream:
            async for _ in stream:
                pass
    assert "incomplete" in info.value.message
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"})],
            then="drop",
        )
    )
    events = await sse_events(lg, {"model": MODEL, "input": "x", "stream": True})
    failed, error = events[-2], events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"]["code"] == "upstream_disconnected"
    assert error["type"] == "error" and error["error"]["code"] == "upstream_disconnected"
    assert not any(e["type"] == "response.completed" for e in events)


@pytest.mark.parametrize(
    "bad",
    [
        b'data: {"choices":[{"index":0,"delta":{"content":"forty-two"}}]\n\n',
        b"data: [1, 2]\n\n",
        b'data: {"choices": "x"}\n\n',
    ],
    ids=["cut JSON", "not an object", "choices not a list"],
)
async def test_an_unreadable_stream_event_fails_the_response(
    lg: Running, fake: FakeUpstream, bad: bytes
) -> None:
    # Not dropped with the answer then reported completed without what the event held.
    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer is "})]
    fake.push(Stream([*events, bad, chunk({}, "stop"), "[DONE]"]))
    with pytest.raises(openai.APIError) as info:
        async with lg.client().responses.stream(model=MODEL, input="x") as stream:
            async for _ in stream:
                pass
    assert "not a chat chunk" in info.value.message


async def test_a_refusal_latches_and_is_resent(lg: Running, fake: FakeUpstream) -> None:
    refusal = {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with "
            "this model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    fake.push(Json(refusal, status=400))
    async with lg.client().responses.stream(model=MODEL, input="x", max_output_tokens=20) as s:
        response = await s.get_final_response()
    assert response.output_text == "Hello!"
    first, second = fake.bodies()
    assert first["max_tokens"] == 20 and "max_tokens" not in second
    assert second["max_completion_tokens"] == 20
    await lg.client().responses.create(model=MODEL, input="x", max_output_tokens=20)
    assert fake.bodies()[-1]["max_completion_tokens"] == 20  # latched: right the first time
    assert len(fake.requests) == 3


async def test_an_overflow_is_a_400_whole_and_a_failed_response_streamed(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "context_length": {MODEL: 8192}}
    )
    big = "word " * 40_000
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().responses.create(model=MODEL, input=big)
    assert info.value.code == "context_length_exceeded"
    events = await sse_events(lg, {"model": MODEL, "input": big, "stream": True})
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.failed",
        "error",
    ]
    assert events[2]["response"]["error"]["code"] == "context_length_exceeded"
    assert fake.requests == []


# -- conversations and the store ---------------------------------------------------------


async def test_function_call_outputs_continue_a_conversation(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(completion("It is sunny.")))
    await lg.client().responses.create(
        model=MODEL,
        tools=[WEATHER],
        input=[
            {"role": "developer", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "get_weather",
                "arguments": '{"city":"Rome"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "rain"}],
            },
        ],
    )
    messages = fake.bodies()[-1]["messages"]
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["c1", "c2"]
    assert messages[3:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
    ]


async def test_a_dangling_call_id_is_a_400_naming_it(lg: Running, fake: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": "x"},
                {"type": "function_call_output", "call_id": "nope", "output": "y"},
            ],
        )
    assert info.value.body["param"] == "input[1].call_id"  # type: ignore[index]
    assert fake.requests == []


async def test_previous_response_id_continues_and_the_store_serves_it(
    lg: Running, fake: FakeUpstream
) -> None:
    client = lg.client(api_key="key-one-12345")
    fake.push(
        Json(
            completion(
                None,
                finish="tool_calls",
                tool_calls=[tool_call("call_w", "get_weather", '{"city":"Paris"}')],
            )
        )
    )
    first = await client.responses.create(
        model=MODEL, input="Weather in Paris?", tools=[WEATHER], instructions="Be terse."
    )
    fake.push(Json(completion("Sunny, 18°C.")))
    second = await client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": "call_w", "output": "18C sunny"}],
    )
    assert second.output_text == "Sunny, 18°C." and second.previous_response_id == first.id
    messages = fake.bodies()[-1]["messages"]
    # The stored history, without the first request's instructions (they are not inherited).
    assert messages[0] == {"role": "user", "content": "Weather in Paris?"}
    assert messages[1]["tool_calls"][0]["id"] == "call_w"
    assert messages[2] == {"role": "tool", "tool_call_id": "call_w", "content": "18C sunny"}

    got = await client.responses.retrieve(second.id)
    assert got.output_text == "Sunny, 18°C." and got.id == second.id
    items = await client.responses.input_items.list(second.id, order="asc")
    kinds = [i.type for i in items.data]
    assert kinds == ["message", "function_call", "function_call_output"]
    assert all(i.id for i in items.data)

    stranger = lg.client(api_key="key-two-67890")
    with pytest.raises(openai.NotFoundError) as info:
        await stranger.responses.retrieve(second.id)
    assert info.value.body["message"] == f"Response with id '{second.id}' not found."  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        await stranger.responses.create(model=MODEL, previous_response_id=second.id, input="x")
    assert bad.value.code == "previous_response_not_found"
    message = bad.value.body["message"]  # type: ignore[index]
    assert message == f"Previous response with id '{second.id}' not found."

    await client.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(second.id)


async def test_store_false_keeps_nothing(lg: Running, fake: FakeUpstream) -> None:
    response = await lg.client().responses.create(model=MODEL, input="x", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        await lg.client().responses.retrieve(response.id)


async def test_a_streamed_response_is_stored_as_it_completed(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(text_stream("Str", "eamed"))
    async with lg.client().responses.stream(model=MODEL, input="x") as stream:
        final = await stream.get_final_response()
    got = await lg.client().responses.retrieve(final.id)
    assert got.output_text == "Streamed" and got.output[0].id == final.output[0].id


async def test_item_references_resolve_from_the_store(lg: Running, fake: FakeUpstream) -> None:
    first = await lg.client().responses.create(model=MODEL, input="Say hello")
    fake.push(Json(completion("Again.")))
    await lg.client().responses.create(
        model=MODEL,
        input=[
            {"type": "item_reference", "id": first.output[0].id},
            {"role": "user", "content": "Once more"},
        ],
    )
    assert fake.bodies()[-1]["messages"] == [
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Once more"},
    ]


# -- passthrough -------------------------------------------------------------------------


async def test_an_openai_upstream_gets_the_responses_body_as_it_came(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "openai", "base_url": fake.url, "kind": "openai", "api_key_env": "PATH"}
    )
    upstream_response = {
        "id": "resp_up1",
        "object": "response",
        "status": "completed",
        "output": [],
        "model": MODEL,
        "created_at": 1,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    }
    fake.push(Json(upstream_response))
    body = {"model": MODEL, "input": "Hi", "tools": [{"type": "web_search"}], "store": True}
    response = await lg.client().responses.create(**body)  # type: ignore[call-overload]
    assert response.id == "resp_up1"
    (sent,) = [r for r in fake.requests if r.path == "/v1/responses"]
    assert sent.json == body
    assert sent.headers["Authorization"] != "Bearer unused"  # latchgate's own key went
    # Its stored responses are OpenAI's, under latchgate's key: not asked for, or every client
    # key would reach every one of them.
    fake.routes["/v1/responses/resp_up1"] = Json(upstream_response)
    with pytest.raises(openai.NotFoundError):
        await lg.client().responses.retrieve("resp_up1")
    assert not [p for p in fake.probes if p.path.startswith("/v1/responses/")]


async def test_a_passthrough_upstream_with_the_clients_key_serves_its_stored_responses(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "openai", "base_url": fake.url, "kind": "openai", "forward_client_auth": True}
    )
    stored = {"id": "resp_up2", "object": "response", "status": "completed", "output": [],
              "model": MODEL, "created_at": 1, "tools": [], "tool_choice": "auto",
              "parallel_tool_calls": True}  # fmt: skip
    fake.routes["/v1/responses/resp_up2"] = Json(stored)
    got = await lg.client(api_key="client-key-123").responses.retrieve("resp_up2")
    assert got.id == "resp_up2"
    (asked,) = [p for p in fake.probes if p.path == "/v1/responses/resp_up2"]
    assert asked.headers["Authorization"] == "Bearer client-key-123"
    # The path is rebuilt from a checked id: an encoded slash cannot reach another route.
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{lg.base_url}/responses/..%2Ffiles", headers={"Authorization": "Bearer k-1234567"}
        ) as resp,
    ):
        assert resp.status == 404
    assert not [p for p in fake.probes if "files" in p.path]


async def test_input_items_page_and_order_and_cancel_is_refused(
    lg: Running, fake: FakeUpstream
) -> None:
    client = lg.client()
    conversation = [{"role": "user", "content": f"message {n}"} for n in range(5)]
    response = await client.responses.create(model=MODEL, input=conversation)  # type: ignore[arg-type]
    newest_first = await client.responses.input_items.list(response.id, limit=2)
    texts = [item.content[0].text for item in newest_first.data]  # type: ignore[union-attr]
    assert texts == ["message 4", "message 3"] and newest_first.has_more is True
    rest = await client.responses.input_items.list(
        response.id, limit=10, order="asc", after=newest_first.data[0].id
    )
    assert rest.data == [] and rest.has_more is False  # message 4 is the last in asc order
    everything = await client.responses.input_items.list(response.id, order="asc")
    assert [i.content[0].text for i in everything.data] == [  # type: ignore[union-attr]
        f"message {n}" for n in range(5)
    ]
    assert everything.first_id == everything.data[0].id
    with pytest.raises(openai.BadRequestError):
        await client.responses.input_items.list(response.id, limit=500)
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.cancel(response.id)
    assert "background" in info.value.message


async def test_a_passthrough_stream_ends_at_its_terminal_event_and_a_cut_one_is_an_error(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy(
        {"name": "openai", "base_url": fake.url, "kind": "openai", "api_key_env": "PATH"}
    )
    created = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_p"}}
    completed = {"type": "response.completed", "sequence_number": 1, "response": {"id": "resp_p"}}
    events = [b"event: response.created\ndata: " + orjson.dumps(created) + b"\n\n",
              b"event: response.completed\ndata: " + orjson.dumps(completed) + b"\n\n"]  # fmt: skip
    fake.push(Stream(events))
    body = {"model": MODEL, "input": "Hi", "stream": True}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{lg.base_url}/responses", json=body) as resp,
    ):
        raw = await resp.read()
    assert raw == b"".join(events)  # as it came, and nothing after (no [DONE] to wait for)
    fake.push(Stream(events[:1], then="drop"))
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{lg.base_url}/responses", json=body) as resp,
    ):
        raw = await resp.read()
    assert raw.startswith(events[0]) and b'"error"' in raw[len(events[0]) :]
