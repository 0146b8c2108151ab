"""Retries: which failures are transient, the server's wait, backoff bounds, giving up."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from proxy.agent.retry import (
    RetryPolicy,
    Transient,
    backoff,
    classify_status,
    is_loading,
    next_wait,
    server_wait,
)
from proxy.agent.upstream_errors import parse_upstream_error as parse

NO_HEADERS: dict[str, str] = {}


def error(message: str, **fields: object) -> bytes:
    return orjson.dumps({"error": {"message": message, **fields}})


LLAMA_LOADING = b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
OPENAI_RATE_LIMIT = error(
    "Rate limit reached for gpt-4o in organization X on tokens per min (TPM): Limit 30000, "
    "Used 14567, Requested 24754. Please try again in 1.642s. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.",
    type="tokens",
    code="rate_limit_exceeded",
)
OPENAI_RATE_LIMIT_LONG = error(
    "Rate limit reached for default-gpt-3.5-turbo in organization org-1 on requests per min. "
    "Limit: 3 / min. Please try again in 20s.",
    type="requests",
)
OPENAI_TPM_TOO_LARGE = error(
    "Request too large for gpt-4o in organization org-2 on tokens per min (TPM): Limit 30000, "
    "Requested 36278. The input or output tokens must be reduced in order to run successfully.",
    type="tokens",
    code="rate_limit_exceeded",
)
QUOTA = (
    b'{"error":{"message":"You exceeded your current quota, please check your plan and billing '
    b'details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)
QUOTA_OLD = error(
    "You exceeded your current quota, please check your plan and billing details.", code=None
)
AZURE_DAY = orjson.dumps(
    {
        "error": {
            "code": "429",
            "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
            "version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 "
            "pricing tier. Please retry after 86400 seconds.",
        }
    }
)
ANTHROPIC_OVERLOADED = (
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"}'
)
OLLAMA_BUSY = b'{"error":"server busy, please try again.  maximum pending requests exceeded"}'
OVERFLOW_500 = (
    b'{"error":{"code":500,"message":"the request exceeds the available context size. try '
    b'increasing the context size or enable context shift","type":"exceed_context_size_error"}}'
)


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (408, NO_HEADERS, b"", Transient("timeout")),
        (409, NO_HEADERS, b"", Transient("status_4xx")),
        (429, NO_HEADERS, b"", Transient("status_429")),
        (500, NO_HEADERS, error("Internal server error"), Transient("status_5xx")),
        (502, NO_HEADERS, b"<html>Bad Gateway</html>", Transient("status_5xx")),
        (503, NO_HEADERS, OLLAMA_BUSY, Transient("status_5xx")),
        (504, NO_HEADERS, b"", Transient("status_5xx")),
        (529, {"x-should-retry": "true"}, ANTHROPIC_OVERLOADED, Transient("status_5xx")),
        (400, NO_HEADERS, error("bad"), None),
        (401, NO_HEADERS, error("bad key"), None),
        (404, NO_HEADERS, error("no such model"), None),
        (413, NO_HEADERS, error("Request too large for model : Limit 6000, Requested 7591"), None),
        (501, NO_HEADERS, error("not supported"), None),
        (200, NO_HEADERS, b"{}", None),
        # loading: its own reason, which does not spend the retry budget
        (503, NO_HEADERS, LLAMA_LOADING, Transient("loading")),
        (503, {"Retry-After": "3"}, LLAMA_LOADING, Transient("loading", 3.0)),
        # 429s that will not clear
        (429, NO_HEADERS, QUOTA, None),
        (429, NO_HEADERS, QUOTA_OLD, None),
        (429, NO_HEADERS, OPENAI_TPM_TOO_LARGE, None),
        # 429s that will, with the wait the body names
        (429, NO_HEADERS, OPENAI_RATE_LIMIT, Transient("status_429", 1.642)),
        (429, NO_HEADERS, OPENAI_RATE_LIMIT_LONG, Transient("status_429", 20.0)),
        (429, NO_HEADERS, AZURE_DAY, Transient("status_429", 86400.0)),
        # headers beat the body's wait
        (429, {"retry-after-ms": "250"}, OPENAI_RATE_LIMIT, Transient("status_429", 0.25)),
        (503, {"Retry-After": "2"}, b"", Transient("status_5xx", 2.0)),
        # x-should-retry decides over the status
        (503, {"x-should-retry": "false"}, b"", None),
        (429, {"X-Should-Retry": "false"}, b"", None),
        (400, {"x-should-retry": "true"}, error("try later"), Transient("status_4xx")),
        # an overflow is never transient, whatever the status or header
        (500, NO_HEADERS, OVERFLOW_500, None),
        (500, {"x-should-retry": "true"}, OVERFLOW_500, None),
    ],
)
def test_classify_status(
    status: int, headers: dict[str, str], body: bytes, expected: Transient | None
) -> None:
    assert classify_status(parse(status, body), headers) == expected


def test_classify_status_reads_a_case_insensitive_multidict() -> None:
    headers = CIMultiDict({"Retry-After-Ms": "1500", "X-Should-Retry": "true"})
    assert classify_status(parse(503, b""), headers) == Transient("status_5xx", 1.5)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (503, LLAMA_LOADING, True),
        (503, b'{"error":{"message":"Loading model","type":"unavailable_error","code":503}}', True),
        (503, b'{"error":"Model bigscience/bloom is currently loading","estimated_time":20}', True),
        (503, error("model is loading, please wait"), True),
        (503, OLLAMA_BUSY, False),
        (503, b"", False),
        (500, LLAMA_LOADING, False),
        (200, LLAMA_LOADING, False),
    ],
)
def test_is_loading(status: int, body: bytes, expected: bool) -> None:
    assert is_loading(parse(status, body)) is expected


NOW = 1_700_000_000.0


def http_date(moment: float) -> str:
    return format_datetime(datetime.fromtimestamp(moment, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after": " 7 "}, 7.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "later"}, None),
        ({"retry-after": http_date(NOW + 30)}, 30.0),
        ({"retry-after": http_date(NOW - 30)}, 0.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00"}, None),  # a date without a zone
    ],
)
def test_server_wait(headers: dict[str, str], expected: float | None) -> None:
    assert server_wait(headers, now=NOW) == expected


def test_backoff_doubles_up_to_the_cap_within_the_jitter() -> None:
    rng = random.Random(7)
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (60, 8.0)]:
        delay = backoff(attempt, rng=rng)
        assert full * 0.5 <= delay <= full


def test_backoff_is_reproducible_with_a_seeded_rng() -> None:
    first = [backoff(a, rng=random.Random(3)) for a in range(4)]
    second = [backoff(a, rng=random.Random(3)) for a in range(4)]
    assert first == second
    assert backoff(0, base=1.0, cap=1.0, rng=random.Random(3)) == random.Random(3).uniform(0.5, 1)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=0, max_value=5000),
    st.floats(min_value=0.01, max_value=5),
    st.floats(min_value=0.01, max_value=60),
    st.integers(),
)
def test_backoff_never_exceeds_the_cap(attempt: int, base: float, cap: float, seed: int) -> None:
    delay = backoff(attempt, base=base, cap=cap, rng=random.Random(seed))
    full = min(cap, base * 2 ** min(attempt, 64))
    assert full * 0.5 <= delay <= full


POLICY = RetryPolicy()


def test_policy_defaults() -> None:
    expected = RetryPolicy(budget=2, base=0.5, cap=8.0, loading_timeout=120.0, loading_poll=2.0)
    assert expected == POLICY


def test_next_wait_backs_off_until_the_budget_is_spent() -> None:
    transient = Transient("status_5xx")
    first = next_wait(POLICY, 0, transient, random.Random(1))
    second = next_wait(POLICY, 1, transient, random.Random(1))
    assert first is not None and 0.25 <= first <= 0.5
    assert second is not None and 0.5 <= second <= 1.0
    assert next_wait(POLICY, 2, transient) is None


def test_next_wait_honours_the_server_wait_up_to_the_cap() -> None:
    assert next_wait(POLICY, 0, Transient("status_429", 2.0)) == 2.0
    assert next_wait(POLICY, 0, Transient("status_429", 8.0)) == 8.0
    assert next_wait(POLICY, 0, Transient("status_429", 8.5)) is None  # returned, not waited
    assert next_wait(POLICY, 0, Transient("status_429", 86400.0)) is None
    assert next_wait(POLICY, 2, Transient("status_429", 1.0)) is None  # budget still applies


def test_next_wait_zero_budget_never_retries() -> None:
    assert next_wait(RetryPolicy(budget=0), 0, Transient("connect")) is None


def test_loading_is_polled_without_spending_retries_until_the_timeout() -> None:
    loading = Transient("loading")
    assert next_wait(POLICY, 5, loading, loading_waited=0.0) == 2.0
    assert next_wait(POLICY, 5, loading, loading_waited=119.0) == 1.0
    assert next_wait(POLICY, 0, loading, loading_waited=120.0) is None


def test_a_loading_model_is_polled_then_served() -> None:
    """The caller's loop as the pipeline runs it: loading twice, then a 200."""
    answers = [(503, LLAMA_LOADING), (503, LLAMA_LOADING), (200, b"{}")]
    waits: list[float] = []
    attempt, waited = 0, 0.0
    for status, body in answers:
        transient = classify_status(parse(status, body), NO_HEADERS)
        if transient is None:
            break
        wait = next_wait(POLICY, attempt, transient, loading_waited=waited)
        assert wait is not None
        waits.append(wait)
        waited += wait
        attempt += transient.reason != "loading"
    assert (status, waits, attempt) == (200, [2.0, 2.0], 0)
