"""Headers built from client or upstream text stay valid HTTP, whatever bytes that text holds."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Json, completion
from tests.rawhttp import raw_request

CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\r\n", "\u2028", "é"]
MAX_TOKENS_REFUSAL = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


@pytest.mark.parametrize("bad", CONTROLS)
async def test_a_notice_quoting_a_model_name_with_control_characters(
    lg: Running, fake: FakeUpstream, bad: str
) -> None:
    model = f"m{bad}odel"
    fake.push(Json(MAX_TOKENS_REFUSAL, status=400), Json(completion("Hi", model=model)))
    body = orjson.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5}
    )
    got = await raw_request(
        lg.port, "POST", "/v1/chat/completions", [b"Content-Type: application/json"], body
    )
    assert got.status == 200, got.body
    assert got.json["choices"][0]["message"]["content"] == "Hi"  # type: ignore[index]
    notices = got.all("x-latchgate-notice")
    assert any("max_completion_tokens" in n for n in notices), notices
    for notice in notices:
        assert notice.isascii() and notice.isprintable()


@pytest.mark.parametrize("bad", CONTROLS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_notice_quoting_a_schema_property_name_with_control_characters(
    lg: Running, fake: FakeUpstream, bad: str, stream: bool
) -> None:
    # Contradictory bounds under a property whose name holds the bytes: in sanitise mode they are
    # dropped, with a notice that names where.
    name = f"p{bad}q"
    params = {
        "type": "object",
        "properties": {name: {"type": "array", "minItems": 5, "maxItems": 2}},
    }
    lg.proxy.upstreams["fake"].config.schema_mode = "sanitise"
    body = orjson.dumps(
        {
            "model": "m",
            "stream": stream,
            "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}],
        }
    )
    got = await raw_request(
        lg.port, "POST", "/v1/chat/completions", [b"Content-Type: application/json"], body
    )
    assert got.status == 200, got.body
    notices = got.all("x-latchgate-notice")
    assert any("minItems" in n or "maxItems" in n for n in notices), notices
    for notice in notices:
        assert notice.isascii() and notice.isprintable()


async def test_dropped_fields_lists_every_field_not_sent(lg: Running, fake: FakeUpstream) -> None:
    # A temperature latched off and a stream_options refused: both are removed, both listed.
    fake.push(
        Json({"error": {"message": "Unsupported value: 'temperature' does not support 0.2 with "
                        "this model. Only the default (1) value is supported."}}, status=400),
        Json({"error": {"message": "Unrecognized request argument supplied: stream_options"}},
             status=400),
    )
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                         "temperature": 0.2, "stream": True,
                         "stream_options": {"include_usage": True}})
    got = await raw_request(lg.port, "POST", "/v1/chat/completions",
                            [b"Content-Type: application/json"], body)
    assert got.status == 200, got.body
    assert got.header("x-latchgate-dropped-fields") == "temperature, stream_options"
    sent = fake.bodies()[-1]
    assert "temperature" not in sent and "stream_options" not in sent


async def test_the_learning_request_says_each_change_once_and_in_a_splittable_header(
    lg: Running, fake: FakeUpstream
) -> None:
    fake.push(
        Json({"error": {"message": "Unsupported value: 'temperature' does not support 0.2 with "
                        "this model. Only the default (1) value is supported."}}, status=400),
        Json(MAX_TOKENS_REFUSAL, status=400),
    )
    client = lg.client()
    raw = await client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], temperature=0.2, max_tokens=5
    )
    first = raw.headers.get_list("x-latchgate-notice")
    assert len(first) == 2, first  # one per change: not the refusal's and the rebuild's
    assert any("temperature" in n for n in first) and any("max_tokens" in n for n in first)
    # What an HTTP library that joins repeated headers sees: the JSON list survives it.
    assert orjson.loads(raw.headers["x-latchgate-notices"]) == first
    again = await client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], temperature=0.2, max_tokens=5
    )
    later = again.headers.get_list("x-latchgate-notice")
    assert len(later) == 2 and later != first  # now the "was sent" forms, once each
    assert orjson.loads(again.headers["x-latchgate-notices"]) == later
