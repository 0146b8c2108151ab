"""Answers that look successful but are not: each becomes an error the SDK raises.

A 200 whose body is not what the route promises (HTML, random bytes, cut-off JSON, an error
object), a plain stream that ends without finishing, and a stream with no event separator at
all must never reach a client as a success.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from proxy.path.answers import BadAnswer, judge
from proxy.path.sse import MAX_EVENT_BYTES, EventTooLarge, SSEParser
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk

MSG = [{"role": "user", "content": "Hi"}]
BROKEN = {
    "html": (b"<html><body>502 Bad Gateway</body></html>", "text/html", "an HTML page"),
    "bytes": (b"\x00\x9f\x12garbage\xff", "application/octet-stream", "not JSON"),
    "truncated": (
        b'{"id": "x", "choices": [{"index": 0, "message": {"con',
        "application/json",
        "does not parse",
    ),
    "list": (b"[1, 2]", "application/json", "a JSON list"),
    "empty": (b"", "application/json", "an empty body"),
    "no choices": (b'{"id": "x", "object": "chat.completion"}', "application/json", "without a"),
}
ROUTES = {
    "/chat/completions": {"model": "m", "messages": MSG},
    "/completions": {"model": "m", "prompt": "Hi"},
    "/embeddings": {"model": "m", "input": "Hi"},
}


@pytest.fixture
async def lg0(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    return await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 0}
    )


async def post(lg: Running, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as s, s.post(lg.base_url + path, json=body) as resp:
        return resp.status, await resp.read()


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("path", list(ROUTES))
async def test_a_200_that_is_not_an_answer_is_a_502(
    lg0: Running, fake: FakeUpstream, case: str, path: str
) -> None:
    body, ctype, what = BROKEN[case]
    fake.push(Json(body, headers={"Content-Type": ctype}))
    status, raw = await post(lg0, path, ROUTES[path])
    assert status == 502, raw
    error = orjson.loads(raw)["error"]
    assert error["code"] == "upstream_bad_answer"
    assert what in error["message"] and "fake" in error["message"]
    assert len(fake.requests) == 1  # the server did answer: not retried


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", ROUTES["/chat/completions"]),
        ("/completions", ROUTES["/completions"]),
        ("/responses", {"model": "m", "input": "Hi"}),
        ("/messages", {"model": "m", "max_tokens": 10, "messages": MSG}),
    ],
)
async def test_an_answer_with_no_choice_at_all_is_a_502(
    lg0: Running, fake: FakeUpstream, path: str, body: dict[str, Any]
) -> None:
    # `choices: []` answers nothing: a chat client reads choices[0], and the fronts made it a
    # successful empty answer (Responses `completed` with no output, Messages `end_turn`).
    fake.push(Json({"id": "x", "object": "chat.completion", "choices": []}))
    status, raw = await post(lg0, path, body)
    assert status == 502, raw
    error = orjson.loads(raw)["error"]
    assert "an empty 'choices' list" in error["message"]
    if path == "/messages":
        assert orjson.loads(raw)["type"] == "error"
    else:
        assert error["code"] == "upstream_bad_answer"


@pytest.mark.parametrize("case", list(BROKEN))
async def test_the_sdk_raises_instead_of_returning_a_broken_completion(
    lg0: Running, fake: FakeUpstream, case: str
) -> None:
    body, ctype, _ = BROKEN[case]
    fake.push(Json(body, headers={"Content-Type": ctype}))
    with pytest.raises(openai.InternalServerError) as err:
        await lg0.client().chat.completions.create(model="m", messages=MSG)
    assert err.value.status_code == 502


@pytest.mark.parametrize("path", list(ROUTES))
async def test_an_error_object_in_a_200_is_the_error_it_is(
    lg0: Running, fake: FakeUpstream, path: str
) -> None:
    fake.push(Json({"error": {"message": "The model 'm' does not exist", "code": 404}}))
    status, raw = await post(lg0, path, ROUTES[path])
    assert status == 404
    assert orjson.loads(raw)["error"]["message"] == "The model 'm' does not exist"


async def test_an_overflow_reported_in_a_200_is_a_context_length_error(
    lg0: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Json(
            {
                "error": {
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "code": 400,
                }
            }
        )
    )
    with pytest.raises(openai.BadRequestError) as err:
        await lg0.client().chat.completions.create(model="m", messages=MSG)
    assert err.value.code == "context_length_exceeded"


async def test_an_error_object_without_a_status_is_retried_as_a_502(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 1})
    fake.push(Json({"error": "worker crashed"}))  # then the default answer
    reply = await lg.client().chat.completions.create(model="m", messages=MSG)
    assert reply.choices[0].message.content == "Hello!"
    assert len(fake.requests) == 2


def completion_event(text: str, finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def read_stream(lg: Running) -> tuple[int, bytes]:
    return await post(lg, "/completions", {"model": "m", "prompt": "Hi", "stream": True})


async def test_a_completions_stream_cut_short_ends_with_an_error_event(
    lg0: Running, fake: FakeUpstream
) -> None:
    fake.push(Stream([completion_event("Hel"), completion_event("lo")]))  # clean end, no finish
    status, raw = await read_stream(lg0)
    assert status == 200
    events = [e for e in raw.split(b"\n\n") if e]
    assert events[:2] == [completion_event("Hel")[:-2], completion_event("lo")[:-2]]
    error = orjson.loads(events[-1][len(b"data: ") :])["error"]
    assert error["code"] == "upstream_incomplete"
    assert "without finishing" in error["message"]


async def test_the_openai_sdk_raises_on_a_cut_completions_stream(
    lg0: Running, fake: FakeUpstream
) -> None:
    fake.push(Stream([completion_event("Hel")]))
    with pytest.raises(openai.APIError):
        async for _ in await lg0.client().completions.create(model="m", prompt="Hi", stream=True):
            pass


async def test_an_empty_completions_stream_is_retried(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 1})
    fake.push(Stream([]), Stream([completion_event("Hi", "stop"), "[DONE]"]))
    status, raw = await read_stream(lg)
    assert status == 200 and raw.endswith(b"data: [DONE]\n\n") and b"error" not in raw
    assert len(fake.requests) == 2


@pytest.mark.parametrize("end", ["done", "finish"])
async def test_a_finished_completions_stream_ends_cleanly(
    lg0: Running, fake: FakeUpstream, end: str
) -> None:
    events: list[Any] = [completion_event("Hi")]
    events += (
        [completion_event("", "stop"), "[DONE]"]
        if end == "done"
        else [completion_event("", "length")]
    )
    fake.push(Stream(events, split=5))
    status, raw = await read_stream(lg0)
    assert status == 200 and b'"error"' not in raw
    assert raw.count(b"data: ") == len(events)


@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
async def test_a_stream_without_event_separators_is_refused_at_the_limit(
    lg0: Running, fake: FakeUpstream, path: str
) -> None:
    # One "event" that never ends: MAX_EVENT_BYTES and more, in 64 KiB writes.
    piece = b"data: " + b"x" * (64 * 1024 - 6)
    fake.push(Stream([piece] * (MAX_EVENT_BYTES // len(piece) + 2)))
    status, raw = await post(lg0, path, {**ROUTES[path], "stream": True})
    assert status == 502, raw[:200]
    error = orjson.loads(raw)["error"]
    assert error["code"] == "upstream_bad_stream"
    assert str(MAX_EVENT_BYTES) in error["message"]
    assert len(fake.requests) == 1  # never retried: the next try would read it all again


async def test_a_stream_without_separators_after_content_ends_with_an_error(
    lg0: Running, fake: FakeUpstream
) -> None:
    first = b"data: " + orjson.dumps(chunk({"role": "assistant", "content": "Hi"})) + b"\n\n"
    piece = b"data: " + b"x" * (64 * 1024 - 6)
    fake.push(Stream([first] + [piece] * (MAX_EVENT_BYTES // len(piece) + 2)))
    status, raw = await post(
        lg0, "/chat/completions", {**ROUTES["/chat/completions"], "stream": True}
    )
    assert status == 200
    last = [e for e in raw.split(b"\n\n") if e][-1]
    assert orjson.loads(last[len(b"data: ") :])["error"]["code"] == "upstream_bad_stream"


def test_the_parser_keeps_an_unfinished_event_without_copying_it() -> None:
    # Linear: each read is kept as it came (no joined buffer rebuilt per read); the pieces
    # are joined once, when the event ends.
    parser = SSEParser()
    pieces = [b"data: " + b"a" * 100] + [b"b" * 100 for _ in range(1000)]
    for piece in pieces:
        assert parser.feed(piece) == b""
    assert len(parser._pending) == len(pieces)
    assert all(kept is fed for kept, fed in zip(parser._pending, pieces, strict=True))
    assert parser.feed(b"\n\n") == b"".join(pieces) + b"\n\n"
    assert parser._pending == []


def test_the_parser_finds_a_blank_line_split_across_reads() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n") == b""
    assert parser.feed(b"\ndata: 2") == b"data: 1\n\n"
    assert parser.feed(b"\r") == b""
    assert parser.feed(b"\n\r\n") == b"data: 2\n\n"


def test_the_parser_refuses_an_event_past_its_limit() -> None:
    parser = SSEParser(limit=1000)
    parser.feed(b"data: " + b"x" * 900)
    with pytest.raises(EventTooLarge) as err:
        parser.feed(b"x" * 200)
    assert err.value.limit == 1000
    # Whole events of any size in one read are not limited: only what waits for its end is.
    assert parser.feed(b"data: " + b"y" * 5000 + b"\n\n").endswith(b"y\n\n")


@pytest.mark.parametrize(
    ("route", "body", "bad"),
    [
        ("chat", {"choices": []}, BadAnswer("an empty 'choices' list")),
        ("chat", {"choices": None}, BadAnswer("a JSON object without a 'choices' list")),
        ("embeddings", {"data": []}, None),
        ("embeddings", {"error": {"code": 429}}, BadAnswer("an error object", status=429)),
        ("chat", {"error": {"code": "oops"}}, BadAnswer("an error object", status=502)),
        ("chat", {"error": {"status": 503}}, BadAnswer("an error object", status=503)),
        ("chat", {"error": {"code": True}}, BadAnswer("an error object", status=502)),
    ],
)
def test_judge(route: str, body: Any, bad: BadAnswer | None) -> None:
    assert judge(route, body, orjson.dumps(body), "application/json") == bad


async def test_a_body_too_deep_to_re_encode_is_a_400(lg0: Running, fake: FakeUpstream) -> None:
    # 300 levels inside a message part: parsed fine (orjson reads 1024), but the body must be
    # re-encoded (a schema is sanitised) and orjson writes at most 254 levels.
    deep: Any = "x"
    for _ in range(300):
        deep = {"a": deep}
    lg0.proxy.upstreams["fake"].config.schema_mode = "sanitise"
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "x": deep}]}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": ["string", "null"]}},
            }
        ],
    }
    status, raw = await post(lg0, "/chat/completions", body)
    assert status == 400, raw
    assert "254 levels" in orjson.loads(raw)["error"]["message"]
    assert fake.requests == []
