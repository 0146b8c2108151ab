"""Structured logs: JSON lines, level filtering, the request line, and keys never written."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import structlog
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proxy.observe import events as ev
from proxy.observe import logs
from proxy.observe.events import RequestEvents
from proxy.observe.logs import REDACTED, configure, get_logger, is_secret_name, redact, request_line

KEY = "sk-proj-Abc123def456GHI789"


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def json_logs(level: str = "info") -> io.StringIO:
    out = io.StringIO()
    configure(level, json=True, stream=out)
    return out


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def finished(**kw: Any) -> dict[str, Any]:
    return {"status": 200, "duration": 0.25, "attempts": 1, "route": "chat", "stream": False, **kw}


def test_json_lines_parse_with_level_time_and_logger() -> None:
    out = json_logs()
    get_logger().info("started", port=8787)
    get_logger("latchgate.upstream").warning("slow", seconds=3.5)
    first, second = lines(out)
    assert first["event"] == "started"
    assert first["port"] == 8787
    assert first["level"] == "info"
    assert first["logger"] == "latchgate"
    assert first["timestamp"].endswith("Z")
    assert second["logger"] == "latchgate.upstream"
    assert second["level"] == "warning"


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("info", ["info", "warning", "error"]),
        ("WARNING", ["warning", "error"]),
        ("warn", ["warning", "error"]),
        ("error", ["error"]),
    ],
)
def test_level_filter(level: str, expected: list[str]) -> None:
    out = json_logs(level)
    log = get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["level"] for line in lines(out)] == expected


def test_unknown_level_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="'verbose' is not one of: debug, info, warning"):
        configure("verbose", json=True, stream=io.StringIO())


def test_reconfigure_applies_to_loggers_taken_before() -> None:
    out = json_logs("error")
    log = get_logger()
    log.info("hidden")
    configure("info", json=True, stream=out)
    log.info("shown")
    assert [line["event"] for line in lines(out)] == ["shown"]


def test_console_rendering_when_not_json() -> None:
    out = io.StringIO()
    configure("info", json=False, stream=out)
    get_logger().info("hello", authorization=f"Bearer {KEY}", prompt_tokens=12)
    text = out.getvalue()
    assert "hello" in text
    assert "prompt_tokens=12" in text
    assert KEY not in text
    assert "\x1b[" not in text  # no colour codes when the stream is not a terminal
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


def test_auto_mode_is_json_off_a_tty() -> None:
    out = io.StringIO()  # isatty() is False
    configure("info", stream=out)
    get_logger().info("x")
    assert lines(out)[0]["event"] == "x"


def test_secret_fields_redacted_in_nested_structures() -> None:
    out = json_logs()
    get_logger().info(
        "upstream call",
        headers={"Authorization": f"Bearer {KEY}", "X-Api-Key": KEY, "Accept": "text/plain"},
        config={"upstreams": [{"name": "cloud", "api_key": KEY, "base_url": "https://x/v1"}]},
        pairs=[("authorization", "Basic dXNlcjpwYXNz"), ("content-type", "application/json")],
        access_token="eyJhbGciOi",
        key=KEY,
    )
    line = lines(out)[0]
    assert line["headers"] == {
        "Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "text/plain"}
    assert line["config"] == {
        "upstreams": [{"name": "cloud", "api_key": REDACTED, "base_url": "https://x/v1"}]}
    assert line["pairs"] == [["authorization", REDACTED], ["content-type", "application/json"]]
    assert line["access_token"] == REDACTED
    assert line["key"] == REDACTED
    assert KEY not in out.getvalue()


def test_secrets_in_text_redacted() -> None:
    out = json_logs()
    get_logger().error(
        "upstream said",
        message="Incorrect API key provided: Bearer sk-abc. Check https://x/v1?key=AIzaSy123&a=1",
        detail=f"sent {KEY} to the server",
    )
    line = lines(out)[0]
    assert line["message"] == (
        "Incorrect API key provided: Bearer [REDACTED]. Check https://x/v1?key=[REDACTED]&a=1")
    assert line["detail"] == "sent sk-[REDACTED] to the server"


def test_exception_text_redacted() -> None:
    out = json_logs()
    try:
        raise RuntimeError(f"auth failed for {KEY}")
    except RuntimeError:
        get_logger().exception("crash")
    line = lines(out)[0]
    assert "RuntimeError: auth failed for sk-[REDACTED]" in line["exception"]
    assert KEY not in out.getvalue()


def test_token_counts_are_not_redacted() -> None:
    out = json_logs()
    usage = {
        "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    get_logger().info(
        "usage", usage=usage, max_tokens=256, max_completion_tokens=128, tokens=15,
        token_count=3, first_token_ms=42.0,
    )
    line = lines(out)[0]
    assert line["usage"] == usage
    assert (line["max_tokens"], line["max_completion_tokens"], line["tokens"]) == (256, 128, 15)
    assert (line["token_count"], line["first_token_ms"]) == (3, 42.0)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("Authorization", True), ("proxy-authorization", True), ("api_key", True),
        ("OPENAI_API_KEY", True), ("x-api-key", True), ("key", True), ("token", True),
        ("access_token", True), ("X-Auth-Token", True), ("client_secret", True),
        ("prompt_tokens", False), ("max_tokens", False), ("tokens", False),
        ("prompt_tokens_details", False), ("first_token", False), ("token_count", False),
        ("model", False), ("keys_held", False), ("upstream", False), ("tokenizer", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_redact_does_not_mutate_input() -> None:
    data = {"headers": {"authorization": "Bearer x"}, "list": ["Bearer y"]}
    copy = orjson.loads(orjson.dumps(data))
    assert redact(data) == {"headers": {"authorization": REDACTED}, "list": [f"Bearer {REDACTED}"]}
    assert data == copy


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
               min_size=8, max_size=40), st.text(max_size=20), st.text(max_size=20))
def test_bearer_and_sk_keys_never_survive(secret: str, before: str, after: str) -> None:
    assume(secret not in REDACTED)
    for text in (f"{before} Bearer {secret} {after}", f"{before} sk-{secret} {after}"):
        assert secret not in logs.redact_text(text) or secret in before + after


def req_with(*events: tuple[str, str, dict[str, str]]) -> RequestEvents:
    req = RequestEvents("req-7", upstream="local", model="qwen3")
    for kind, notice, labels in events:
        req.emit(kind, notice, **labels)
    return req


def test_request_line_fields() -> None:
    out = json_logs()
    req = req_with(
        (ev.FIELD_DROPPED, "dropped top_k: the server refused it", {"field": "top_k"}),
        (ev.RETRY, "retried after 429", {"reason": "status_429"}),
        (ev.RETRY, "retried after 429", {"reason": "status_429"}),
    )
    request_line(req, **finished(attempts=3, stream=True),
                 tokens={"prompt": 100, "completion": 7, "cached": 0})
    line = lines(out)[0]
    assert line["level"] == "info"
    assert line["event"] == "request"
    expected = {
        "request_id": "req-7", "upstream": "local", "model": "qwen3", "route": "chat",
        "stream": True, "status": 200, "duration_ms": 250.0, "attempts": 3,
        "tokens": {"prompt": 100, "completion": 7, "cached": 0},
        "notices": ["dropped top_k: the server refused it", "retried after 429"],
    }
    assert {k: line[k] for k in expected} == expected
    assert "latched" not in line


def test_request_line_without_tokens() -> None:
    out = json_logs()
    request_line(req_with(), **finished(status=400))
    line = lines(out)[0]
    assert (line["level"], line["tokens"], line["notices"]) == ("info", None, [])


def test_request_line_warns_when_a_latch_was_learned() -> None:
    out = json_logs()
    req = req_with((ev.REFUSAL, "learned: no strict schemas", {"capability": "strict_schemas"}))
    request_line(req, **finished())
    line = lines(out)[0]
    assert line["level"] == "warning"
    assert line["latched"] == ["strict_schemas"]


def test_request_line_errors_on_5xx_with_extra_fields_redacted() -> None:
    out = json_logs()
    request_line(req_with(), **finished(status=502),
                 error=f"upstream 401: Incorrect API key provided: {KEY}")
    line = lines(out)[0]
    assert line["level"] == "error"
    assert line["error"] == "upstream 401: Incorrect API key provided: sk-[REDACTED]"


def test_request_line_filtered_at_warning_level() -> None:
    out = json_logs("warning")
    request_line(req_with(), **finished())
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("level", "status", "kinds", "expected"),
    [
        ("warning", 200, [], False),
        ("warning", 200, [ev.TOOL_RECOVERED, ev.ARGUMENTS], False),
        ("warning", 200, [ev.TOOL_RECOVERED, ev.REFUSAL], True),  # a latch: a warning line
        ("warning", 502, [], True),
        ("info", 200, [], True),
    ],
)
def test_wanted_only_when_the_line_would_be_written(
    level: str, status: int, kinds: list[str], expected: bool
) -> None:
    configure(level, json=True, stream=io.StringIO())
    req = req_with(*[(kind, "a notice", {}) for kind in kinds])
    assert req.has(ev.REFUSAL) is (ev.REFUSAL in kinds)
    assert logs.wanted(status, req) is expected
