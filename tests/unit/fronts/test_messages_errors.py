"""Errors in Anthropic's shape (`proxy.fronts.messages.errors`): the status to type table the
Anthropic SDK maps, OpenAI-shaped bodies rewritten, and overflows in Anthropic's own words."""

from __future__ import annotations

import orjson
import pytest

from proxy.fronts.messages.errors import (
    anthropic_error,
    error_type,
    overflow_message,
    shaped_body,
)

PREFLIGHT = (
    "latchgate did not send this request: it is about 18753 tokens, over this model's "
    "8192-token context window. Shorten the messages (drop or summarise older turns, trim long "
    "tool results), or use a model with a larger context window."
)
WITH_REPLY = (
    "latchgate did not send this request: it is about 6001 tokens plus 4000 reserved for the "
    "reply, over this model's 8192-token context window. Lower max_tokens/max_completion_tokens "
    "to at most 2191, or shorten the messages."
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (405, "invalid_request_error"),
        (409, "invalid_request_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "api_error"),
        (529, "overloaded_error"),
    ],
)
def test_status_to_type(status: int, kind: str) -> None:
    assert error_type(status) == kind


def test_an_openai_error_body_is_reshaped() -> None:
    raw = orjson.dumps(
        {
            "error": {
                "message": "The model 'nope' does not exist.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        }
    )
    assert orjson.loads(shaped_body(404, raw)) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "The model 'nope' does not exist."},
    }


def test_an_anthropic_body_is_kept_as_it_came() -> None:
    raw = orjson.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    assert shaped_body(529, raw) == raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"upstream exploded", "upstream exploded"),
        (b'{"error": "plain string"}', "plain string"),
        (b'{"detail": "x"}', '{"detail": "x"}'),
        (b'["a"]', '["a"]'),
    ],
)
def test_bodies_that_are_not_openai_errors_still_get_the_shape(raw: bytes, message: str) -> None:
    body = orjson.loads(shaped_body(502, raw))
    assert body == {"type": "error", "error": {"type": "api_error", "message": message}}


def test_an_empty_message_is_never_empty() -> None:
    body = orjson.loads(shaped_body(500, orjson.dumps({"error": {"message": ""}})))
    assert body["error"]["message"]
    assert anthropic_error(400, {"message": 5})["error"]["message"]


def test_an_overflow_error_is_worded_as_anthropic_words_it() -> None:
    raw = orjson.dumps(
        {
            "error": {
                "message": PREFLIGHT,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    )
    body = orjson.loads(shaped_body(400, raw))
    assert body["error"]["type"] == "invalid_request_error"
    assert (
        body["error"]["message"] == f"prompt is too long: 18753 tokens > 8192 maximum. {PREFLIGHT}"
    )


def test_overflow_message_preflight_without_a_reply_ceiling() -> None:
    assert overflow_message(PREFLIGHT).startswith("prompt is too long: 18753 tokens > 8192 maximum")


def test_overflow_message_with_the_reply_ceiling() -> None:
    message = overflow_message(WITH_REPLY)
    assert message.startswith(
        "input length and `max_tokens` exceed context limit: 6001 + 4000 > 8192, decrease "
        "input length or `max_tokens` and try again"
    )
    assert message.endswith(WITH_REPLY)


def test_overflow_message_when_the_prompt_alone_is_over_despite_a_reply_ceiling() -> None:
    text = WITH_REPLY.replace("6001 tokens", "9000 tokens")
    assert overflow_message(text).startswith("prompt is too long: 9000 tokens > 8192 maximum")


def test_overflow_message_from_an_upstream_without_sizes() -> None:
    upstream = "request (18753 tokens) exceeds the available context size"
    message = overflow_message(upstream)
    assert message.startswith("prompt is too long") and upstream in message
