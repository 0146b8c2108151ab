"""An upstream error answer is parsed once, whatever is decided about it; a 2xx never is.

Every decision about an error (overflow, refusal, retry, the client's error body, the log line)
reads the one `UpstreamError` that `parse_upstream_error` made of it. (One exception, pinned
below: an error given back into a stream already open is read once more to go out as one SSE
line, as it was before.) These tests count the calls
through the real server in front of the scripted fake, so a new reader of the bytes anywhere on
the path shows up here. (They open sockets on 127.0.0.1 like tests/test_http_*.py; they live here
because they pin a property of one function's callers.)
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
import orjson
import pytest

from proxy.agent import upstream_errors
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Reply, Stream, chunk, text_stream
from tests.refusal_cases import openai

MSG = [{"role": "user", "content": "hi"}]
REFUSAL = openai(
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
    "'max_completion_tokens' instead.",
    type="invalid_request_error", param="max_tokens", code="unsupported_parameter",
)  # fmt: skip
TEMPERATURE = openai(
    "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default "
    "(1) value is supported.",
    type="invalid_request_error", param="temperature", code="unsupported_value",
)  # fmt: skip
VALUE_ERROR = openai("max_tokens is too large: 8192. This model supports at most 4096.")
OVERFLOW = (
    b'{"error":{"code":400,"message":"request (13919 tokens) exceeds the available context size '
    b'(2048 tokens), try increasing it","type":"exceed_context_size_error","n_ctx":2048}}'
)
BUSY = b'{"error":{"message":"server busy","type":"server_error"}}'


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes]]:
    """Every call of parse_upstream_error, wherever on the path it was imported."""
    calls: list[tuple[int, bytes]] = []
    original = upstream_errors.parse_upstream_error

    def counting(status: int, raw: bytes) -> upstream_errors.UpstreamError:
        calls.append((status, raw))
        return original(status, raw)

    for name, module in list(sys.modules.items()):
        if name.startswith("proxy") and getattr(module, "parse_upstream_error", None) is original:
            monkeypatch.setattr(module, "parse_upstream_error", counting)
    return calls


@pytest.fixture
def json_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes | str]:
    """Every orjson.loads of anything, to count those of one error body."""
    calls: list[bytes | str] = []
    loads = orjson.loads

    def counting(data: Any) -> Any:
        calls.append(data)
        return loads(data)

    monkeypatch.setattr(orjson, "loads", counting)
    return calls


async def start(start_proxy: StartProxy, fake: FakeUpstream, retries: int = 0) -> Running:
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic",
                              "retries": retries, "loading_timeout": 0})  # fmt: skip


async def send(
    lg: Running, fake: FakeUpstream, replies: list[Reply], **body: Any
) -> httpx.Response:
    fake.push(*replies)
    async with httpx.AsyncClient() as client:
        return await client.post(
            lg.base_url + "/chat/completions", json={"model": "m", "messages": MSG, **body}
        )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_parsed_once(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]], stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    answer = await send(lg, fake, [Json(REFUSAL, status=400)], max_tokens=100, stream=stream)
    assert answer.status_code == 200
    assert len(fake.bodies()) == 2  # the refusal, then the resent request's answer
    assert parses == [(400, REFUSAL)]  # latched and resent: one parse; the 200 none


async def test_the_refusal_bytes_reach_the_json_parser_once(
    start_proxy: StartProxy,
    fake: FakeUpstream,
    parses: list[tuple[int, bytes]],
    json_reads: list[bytes | str],
) -> None:
    lg = await start(start_proxy, fake)
    answer = await send(lg, fake, [Json(REFUSAL, status=400)], max_tokens=100)
    assert answer.status_code == 200
    assert [data for data in json_reads if data in (REFUSAL, REFUSAL.decode())] == [REFUSAL]


async def test_refusals_in_a_row_are_parsed_once_each(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    lg = await start(start_proxy, fake)
    replies: list[Reply] = [Json(REFUSAL, status=400), Json(TEMPERATURE, status=400)]
    answer = await send(lg, fake, replies, max_tokens=100, temperature=0.2)
    assert answer.status_code == 200
    assert parses == [(400, REFUSAL), (400, TEMPERATURE)]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_given_back_is_parsed_once(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]], stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    answer = await send(lg, fake, [Json(VALUE_ERROR, status=400)], max_tokens=100, stream=stream)
    assert answer.status_code == 400
    assert answer.content == VALUE_ERROR
    assert parses == [(400, VALUE_ERROR)]


async def test_an_overflow_is_parsed_once(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    lg = await start(start_proxy, fake)
    answer = await send(lg, fake, [Json(OVERFLOW, status=400)])
    assert answer.json()["error"]["code"] == "context_length_exceeded"
    assert parses == [(400, OVERFLOW)]


async def test_a_retried_error_is_parsed_once_per_answer(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    lg = await start(start_proxy, fake, retries=1)
    answer = await send(lg, fake, [Json(BUSY, status=500)])
    assert answer.status_code == 200
    assert parses == [(500, BUSY)]


async def test_an_error_event_before_content_is_parsed_once(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    lg = await start(start_proxy, fake)
    event = orjson.loads(REFUSAL)
    answer = await send(lg, fake, [Stream([event])], max_tokens=100, stream=True)
    assert answer.status_code == 200
    assert b"Hel" in answer.content  # latched, resent, streamed
    assert parses == [(500, orjson.dumps(event))]  # an event's status is its code, else 500


async def test_an_error_event_after_content_is_parsed_once(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    lg = await start(start_proxy, fake)
    event = {"error": {"message": "the model crashed", "type": "server_error", "code": 500}}
    stream = Stream([chunk({"role": "assistant", "content": "Hel"}), event])
    answer = await send(lg, fake, [stream], stream=True)
    assert b"the model crashed" in answer.content
    assert parses == [(500, orjson.dumps(event))]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_is_never_parsed_as_an_error(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]], stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    replies: list[Reply] = [text_stream("Hel", "lo")] if stream else []
    answer = await send(lg, fake, replies, stream=stream)
    assert answer.status_code == 200
    assert parses == []


async def test_an_error_given_back_into_an_open_stream_is_read_once_more(
    start_proxy: StartProxy, fake: FakeUpstream, parses: list[tuple[int, bytes]]
) -> None:
    # A role chunk opened the client's stream, then the error came: the answer is parsed once,
    # and `proxy.path.client.give` reads the body it gives back (here the upstream's, kept as
    # it was) once more, to write it as one SSE line. Carrying the parsed value in the Decision
    # would save that read; the Decision is the attempt loop's (issue 14).
    lg = await start(start_proxy, fake)
    event = orjson.loads(VALUE_ERROR)
    role = chunk({"role": "assistant", "content": ""})
    answer = await send(lg, fake, [Stream([role, event])], max_tokens=100, stream=True)
    assert answer.content.endswith(b"data: " + VALUE_ERROR + b"\n\n")
    assert parses == [(500, VALUE_ERROR), (500, VALUE_ERROR)]
