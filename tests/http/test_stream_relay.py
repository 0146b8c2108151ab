"""The client's stream stays a well-formed SSE stream whatever the upstream sends: odd chunks,
an error into an open stream or after content, a whole answer to a stream request, and JSON
asked for in words with reasoning and usage alongside."""

from __future__ import annotations

import aiohttp
import openai
import orjson
import pytest

from proxy.state.latches import Refusal, endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion

MSG = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def sample(lg: Running, name: str, **labels: str) -> float:
    return lg.proxy.metrics.registry.get_sample_value(name, labels) or 0.0


def chat_requests(lg: Running, stream: str, status: str) -> float:
    """Client requests for model "m" on the fake upstream answered with `status`."""
    return sample(
        lg,
        "latchgate_requests_total",
        upstream="fake",
        model="m",
        route="chat",
        stream=stream,
        status=status,
    )


@pytest.mark.parametrize(
    "odd",
    [
        {"choices": [{"index": 0, "delta": "x"}]},
        {"choices": [{"index": [1], "delta": {"content": "x"}}]},
        {"choices": ["not a choice"]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": "a", "id": 5, "function": {"name": 5}}]},
                }
            ]
        },
    ],
)
async def test_odd_chunks_never_garble_the_stream(
    lg: Running, fake: FakeUpstream, odd: dict[str, object]
) -> None:
    # What the upstream sends wrong is relayed or reported, but the client's stream stays a
    # well-formed SSE stream that ends properly, and the request is counted once.
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": "ok "}),
                odd,
                chunk({"content": "done"}),
                chunk({}, "stop"),
                "[DONE]",
            ]
        )
    )
    body = {"model": "m", "messages": MSG, "tools": TOOLS, "stream": True}
    async with (
        aiohttp.ClientSession() as s,
        s.post(lg.base_url + "/chat/completions", json=body) as r,
    ):
        assert r.status == 200
        raw = await r.read()
    events = [e for e in raw.split(b"\n\n") if e.startswith(b"data: ")]
    assert events[-1] == b"data: [DONE]" or b'"error"' in events[-1]
    for event in events[:-1]:
        orjson.loads(event[6:])  # every event is one JSON document
    assert b"ok" in raw and b"done" in raw
    assert chat_requests(lg, "true", "200") + chat_requests(lg, "true", "500") == 1


async def test_a_pretty_printed_error_into_an_open_stream_stays_one_event(
    start_proxy: StartProxy, fake: FakeUpstream
) -> None:
    running = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "first_token_timeout": 0.3,
            "retries": 1,
        }
    )
    pretty = orjson.dumps(
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        option=orjson.OPT_INDENT_2,
    )
    fake.push(
        Stream([chunk({"role": "assistant", "content": ""})], then="hang"),
        Json(pretty, status=429, headers={"retry-after": "30"}),
    )
    stream = await running.client().chat.completions.create(model="m", messages=MSG, stream=True)
    with pytest.raises(openai.APIError, match="Rate limit reached"):
        async for _ in stream:
            pass


async def test_a_whole_answer_to_a_stream_request_is_streamed(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(Json(completion("whole answer")))
    stream = await lg.client().chat.completions.create(model="m", messages=MSG, stream=True)
    parts = [p async for p in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "whole answer"
    assert parts[-1].choices[0].finish_reason == "stop"
    assert len(fake.bodies()) == 1


@pytest.mark.parametrize("asked", [False, True], ids=["usage not asked", "usage asked"])
async def test_a_whole_completion_to_a_stream_request_is_streamed(
    lg: Running, fake: FakeUpstream, asked: bool
) -> None:
    # The completions route relays streams unread; a server that ignores `stream` there gave
    # the SDK a JSON body, in which it found no event: an empty answer and no error.
    text = {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "text": "whole\nanswer", "logprobs": None, "finish_reason": "stop"}
        ],
        "usage": USAGE,
    }
    fake.push(Json(orjson.dumps(text, option=orjson.OPT_INDENT_2)))
    extra: dict[str, object] = {"stream_options": {"include_usage": True}} if asked else {}
    stream = await lg.client().completions.create(
        model="m",
        prompt="Hi",
        stream=True,
        **extra,  # type: ignore[call-overload]
    )
    parts = [p async for p in stream]
    assert [(c.text, c.finish_reason) for p in parts for c in p.choices] == [
        ("whole\nanswer", "stop")
    ]
    # The usage as a stream carries it: in a chunk of its own, and only when asked.
    usages = [(p.choices, p.usage.model_dump(exclude_none=True)) for p in parts if p.usage]
    assert usages == ([([], USAGE)] if asked else [])
    assert sample(lg, "latchgate_tokens_total", upstream="fake", model="m", kind="completion") == 5


async def test_json_in_words_stream_keeps_reasoning_and_usage(
    lg: Running, fake: FakeUpstream
) -> None:
    store = lg.proxy.store
    store.learn(endpoint_id(fake.url, None), "m", Refusal("structured_output"), upstream="fake")
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    fake.push(
        Stream(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"reasoning_content": "thinking hard"}),
                chunk({"content": 'Sure: {"a": '}),
                chunk({"content": "1}"}),
                chunk({}, "stop", usage=usage),
                "[DONE]",
            ]
        )
    )
    stream = await lg.client().chat.completions.create(
        model="m",
        messages=MSG,
        stream=True,
        stream_options={"include_usage": True},
        response_format={"type": "json_object"},
    )
    parts = [p async for p in stream]
    deltas = [p.choices[0].delta for p in parts if p.choices]
    assert "".join(d.content or "" for d in deltas) == '{"a":1}'
    assert any(getattr(d, "reasoning_content", None) == "thinking hard" for d in deltas)
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 15


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
USAGE_ONLY = {"id": "u", "object": "chat.completion.chunk", "created": 1, "model": "m"}


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no tools", "tools"])
@pytest.mark.parametrize("where", ["own chunk", "finish chunk"])
@pytest.mark.parametrize("asked", [False, True], ids=["not asked", "asked"])
async def test_the_usage_report_reaches_only_a_client_that_asked(
    lg: Running, fake: FakeUpstream, tools: object, where: str, asked: bool
) -> None:
    # latchgate asks every upstream for usage (its metrics); a client that did not ask gets no
    # usage, and no chunk with empty `choices` (clients read `choices[0]`). A tools stream holds
    # its end (the finish chunk on) to judge the reply, and that held end is filtered too.
    end = (
        [chunk({}, "stop"), {**USAGE_ONLY, "choices": [], "usage": USAGE}]
        if where == "own chunk"
        else [chunk({}, "stop", usage=USAGE)]
    )
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hi!"}), *end, "[DONE]"]
        )
    )
    extra: dict[str, object] = {"tools": tools} if tools else {}
    if asked:
        extra["stream_options"] = {"include_usage": True}
    stream = await lg.client().chat.completions.create(
        model="m",
        messages=MSG,
        stream=True,
        **extra,  # type: ignore[call-overload]
    )
    parts = [p async for p in stream]
    assert fake.bodies()[-1]["stream_options"] == {"include_usage": True}
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "Hi!"
    assert [p.choices[0].finish_reason for p in parts if p.choices][-1] == "stop"
    usages = [p.usage.model_dump(exclude_none=True) for p in parts if p.usage is not None]
    assert usages == ([USAGE] if asked else [])
    if not asked:
        assert all(p.choices for p in parts)
    assert sample(lg, "latchgate_tokens_total", upstream="fake", model="m", kind="completion") == 5


NAMED_ERROR = b'event: error\ndata: {"message": "overloaded, try again later"}\n\n'


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no tools", "tools"])
async def test_an_error_sent_as_a_named_event_ends_the_stream_with_its_words(
    lg: Running, fake: FakeUpstream, tools: object
) -> None:
    # Some servers send `event: error` with a bare message. Its data is no chunk: it must not
    # go out as one (with the upstream's words lost behind latchgate's "incomplete" error).
    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": "par"})]
    fake.push(Stream([*events, NAMED_ERROR], then="hang"))
    extra: dict[str, object] = {"tools": tools} if tools else {}
    stream = await lg.client().chat.completions.create(
        model="m",
        messages=MSG,
        stream=True,
        **extra,  # type: ignore[call-overload]
    )
    got = []
    with pytest.raises(openai.APIError) as info:
        async for part in stream:
            got.append(part)
    assert "overloaded, try again later" in str(info.value.message)
    assert "".join(p.choices[0].delta.content or "" for p in got if p.choices) == "par"


async def test_an_error_sent_as_a_named_event_before_content_is_an_http_error(
    start_proxy: StartProxy, fake: FakeUpstream
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 0})
    fake.push(Stream([NAMED_ERROR], then="hang"))
    with pytest.raises(openai.InternalServerError) as info:
        await lg.client().chat.completions.create(model="m", messages=MSG, stream=True)
    assert "overloaded, try again later" in str(info.value.message)


async def test_an_upstream_error_after_content_ends_the_stream(
    lg: Running, fake: FakeUpstream
) -> None:
    error = {"error": {"message": "boom: backend crashed", "type": "server_error", "code": 500}}
    fake.push(
        Stream(
            [chunk({"role": "assistant", "content": "par"}), error, chunk({"content": "never"})],
            then="hang",
        )
    )
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/chat/completions", json={"model": "m", "messages": MSG, "stream": True}
        ) as r,
    ):
        raw = await r.read()
    assert b"boom: backend crashed" in raw
    assert b"[DONE]" not in raw and b"never" not in raw  # it ended at the error
    assert chat_requests(lg, "true", "500") == 1
