"""parse_upstream_error: every envelope of docs/research/refusal-wordings.md section 0, and the
bodies no server means to send (empty, cut off, not UTF-8), read into one UpstreamError."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.agent.upstream_errors import MAX_MESSAGE, UpstreamError, parse_upstream_error
from tests.refusal_cases import CASES, Case, openai


def fields(error: UpstreamError) -> tuple[str, str, str, str]:
    return (error.message, error.type, error.code, error.param)


def test_the_value_is_frozen_and_slotted() -> None:
    error = parse_upstream_error(400, b"x")
    assert not hasattr(error, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        error.message = "y"  # type: ignore[misc]


# --- JSON error objects --------------------------------------------------------------------------


def test_openai_error_object() -> None:
    raw = b'{"error":{"message":"m","type":"t","param":"p","code":"c"}}'
    error = parse_upstream_error(400, raw)
    assert error == UpstreamError(
        status=400, message="m", type="t", code="c", param="p", text="m",
        body={"error": {"message": "m", "type": "t", "param": "p", "code": "c"}}, raw=raw,
    )  # fmt: skip
    assert error.is_error_object


def test_llama_cpp_int_code_and_n_ctx() -> None:
    raw = (
        b'{"error":{"code":400,"message":"request (13919 tokens) exceeds the available context '
        b'size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
        b'"n_prompt_tokens":13919,"n_ctx":2048}}'
    )
    error = parse_upstream_error(400, raw)
    assert fields(error) == (
        "request (13919 tokens) exceeds the available context size (2048 tokens), try "
        "increasing it",
        "exceed_context_size_error",
        "400",
        "",
    )
    assert error.body["error"]["n_ctx"] == 2048


def test_vllm_int_code_and_null_param() -> None:
    raw = b'{"error":{"message":"m","type":"BadRequestError","param":null,"code":400}}'
    assert fields(parse_upstream_error(400, raw)) == ("m", "BadRequestError", "400", "")


def test_anthropic_envelope() -> None:
    raw = (
        b'{"type":"error","error":{"type":"invalid_request_error","message":"m"},'
        b'"request_id":"r"}'
    )
    error = parse_upstream_error(400, raw)
    assert fields(error) == ("m", "invalid_request_error", "", "")
    assert error.text == "m"


def test_litellm_string_code() -> None:
    raw = openai("litellm.UnsupportedParamsError: x", type="invalid_request_error", code="400")
    assert fields(parse_upstream_error(400, raw)) == (
        "litellm.UnsupportedParamsError: x", "invalid_request_error", "400", "",
    )  # fmt: skip


# --- `error` as a plain string ---------------------------------------------------------------


def test_plain_string_error() -> None:  # LM Studio, Ollama native
    raw = b'{"error":"llama3 does not support tools"}'
    error = parse_upstream_error(400, raw)
    assert fields(error) == ("llama3 does not support tools", "", "", "")
    assert error.text == "llama3 does not support tools"
    assert not error.is_error_object


# --- top-level message / detail --------------------------------------------------------------


def test_vllm_older_top_level_fields() -> None:
    raw = b'{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}'
    error = parse_upstream_error(400, raw)
    assert fields(error) == ("m", "BadRequestError", "400", "")
    assert not error.is_error_object


def test_top_level_message_and_detail_are_both_text() -> None:
    raw = orjson.dumps({"object": "error", "message": "one", "detail": "two"})
    error = parse_upstream_error(400, raw)
    assert error.text == "one\ntwo"
    assert error.message == "one"


def test_fastapi_detail_is_the_message_when_there_is_none() -> None:
    assert parse_upstream_error(404, b'{"detail": "Not Found"}').message == "Not Found"


def test_mistral_detail_items_keep_their_loc() -> None:
    item = {"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs"}
    raw = orjson.dumps({"object": "error", "message": {"detail": [item]},
                        "type": "invalid_request_error", "param": None, "code": None})
    error = parse_upstream_error(422, raw)
    assert error.text == (
        '{"type":"extra_forbidden","loc":["body","seed"],"msg":"Extra inputs"}\nExtra inputs'
    )
    assert fields(error) == (
        '{"detail":[{"type":"extra_forbidden","loc":["body","seed"],"msg":"Extra inputs"}]}',
        "invalid_request_error", "", "",
    )  # fmt: skip


def test_mistral_newer_envelope_reads_detail_for_an_empty_message() -> None:
    raw = b'{"object": "error", "message": [], "detail": [{"msg": "Extra inputs"}]}'
    error = parse_upstream_error(422, raw)
    assert error.message == '[{"msg":"Extra inputs"}]'
    assert error.text == "Extra inputs"


def test_pydantic_echoed_input_is_not_text() -> None:
    # the client's own words, echoed back, must not be read as the server's refusal
    item = {"type": "extra_forbidden", "loc": ["body", "x"], "msg": "Extra inputs",
            "input": {"messages": [{"content": "unknown parameter: 'top_k'"}]}}
    error = parse_upstream_error(422, orjson.dumps({"detail": [item]}))
    assert "top_k" not in error.text


def test_python_repr_error_list_is_read_as_the_list() -> None:  # old vLLM
    raw = (
        b'{"object":"error","message":"[{\'type\': \'extra_forbidden\', \'loc\': (\'body\', '
        b"'top_k'), 'msg': 'Extra inputs are not permitted', 'input': 'secret words'}]\"}"
    )
    error = parse_upstream_error(400, raw)
    assert error.text == (
        '{"type":"extra_forbidden","loc":["body","top_k"],"msg":"Extra inputs are not permitted"}'
        "\nExtra inputs are not permitted"
    )
    assert "secret words" in error.message  # the envelope keeps the message as it came


# --- Gemini: an array body ----------------------------------------------------------------------


def test_gemini_array_fields_from_the_first_element() -> None:
    raw = b'[{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[]}}]'
    error = parse_upstream_error(400, raw)
    assert fields(error) == ("m", "INVALID_ARGUMENT", "400", "")
    assert not error.is_error_object


def test_gemini_array_text_keeps_every_element() -> None:
    raw = orjson.dumps([{"error": {"message": "first"}}, {"error": {"message": "second"}}])
    error = parse_upstream_error(400, raw)
    assert error.text == "first\nsecond"
    assert error.message == "first"


def test_gemini_field_violations_are_text() -> None:
    raw = orjson.dumps([{"error": {"code": 400, "message": "m", "details": [
        {"fieldViolations": [{"description": "Unknown name \"top_k\""}]}]}}])
    assert parse_upstream_error(400, raw).text == 'm\nUnknown name "top_k"'


def test_an_array_without_objects_is_kept_as_text() -> None:
    assert fields(parse_upstream_error(400, b"[1, 2]")) == ("[1, 2]", "", "", "")


# --- OpenRouter: the provider's error in metadata.raw -----------------------------------------


def test_openrouter_metadata_raw_gives_the_provider_fields() -> None:
    inner = openai("inner words", type="invalid_request_error", code="c", param="p").decode()
    raw = orjson.dumps(
        {"error": {"message": "Provider returned error", "code": 400,
                   "metadata": {"raw": inner, "provider_name": "Azure"}}}
    )  # fmt: skip
    error = parse_upstream_error(400, raw)
    assert fields(error) == ("inner words", "invalid_request_error", "c", "p")
    assert error.text == f"Provider returned error\n{inner}\ninner words"


def test_openrouter_metadata_raw_without_a_message_keeps_the_outer_fields() -> None:
    raw = orjson.dumps(
        {"error": {"message": "Provider returned error", "code": 502, "metadata": {"raw": ""}}}
    )
    assert fields(parse_upstream_error(502, raw)) == ("Provider returned error", "", "502", "")


# --- not JSON ----------------------------------------------------------------------------------


def test_html_page() -> None:
    raw = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"
    error = parse_upstream_error(502, raw)
    assert fields(error) == ("<html><body><h1>502 Bad Gateway</h1></body></html>", "", "", "")
    assert error.text == raw.decode()  # the text is the body as it came, not stripped
    assert error.body is None


def test_plain_text_message_is_stripped_and_bounded() -> None:
    assert parse_upstream_error(500, b"  plain words  ").message == "plain words"
    long = parse_upstream_error(500, b"x" * 10_000)
    assert len(long.message) == MAX_MESSAGE
    assert len(long.text) == 10_000  # the classifier reads all of it


def test_python_repr_body_is_text() -> None:  # llama.cpp, once: not JSON, matched as text
    raw = b"{'code': 400, 'message': 'too long', 'type': 'exceed_context_size_error'}"
    error = parse_upstream_error(400, raw)
    assert fields(error) == (raw.decode(), "", "", "")
    assert error.text == raw.decode()


def test_an_sse_data_line_is_read_as_its_json() -> None:  # older llama.cpp, in a 200 stream
    raw = b'data: {"error":{"code":400,"message":"m","type":"invalid_request_error"}}\n\n'
    error = parse_upstream_error(200, raw)
    assert fields(error) == ("m", "invalid_request_error", "400", "")
    assert error.body is None  # the body itself is not JSON
    assert error.text == raw.decode()


def test_empty_body() -> None:
    error = parse_upstream_error(503, b"")
    assert error == UpstreamError(503, "", "", "", "", "", None, b"")


def test_truncated_json() -> None:
    raw = b'{"error":{"message":"Unsupported parameter: \'max_tokens\' is not sup'
    error = parse_upstream_error(400, raw)
    assert fields(error) == (raw.decode(), "", "", "")
    assert error.text == raw.decode()
    assert error.body is None and not error.is_error_object


def test_bytes_that_are_not_utf8() -> None:
    error = parse_upstream_error(500, b"\xff\xfe bad")
    assert error.text == "\ufffd\ufffd bad"
    assert error.message == "\ufffd\ufffd bad"
    assert error.body is None


def test_json_with_bytes_that_are_not_utf8_still_has_its_envelope() -> None:
    # orjson refuses the bytes; the text they decode to, with replacement characters, is JSON
    raw = b'{"error":{"message":"caf\xe9 closed","code":"c"}}'
    error = parse_upstream_error(500, raw)
    assert fields(error) == ("caf\ufffd closed", "", "c", "")
    assert error.body is None
    assert error.text == raw.decode("utf-8", "replace")


def test_a_json_string_body() -> None:
    error = parse_upstream_error(400, b'"just words"')
    assert error.text == "just words"
    assert error.message == '"just words"'


def test_json_null_is_json() -> None:
    error = parse_upstream_error(500, b"null")
    assert (error.text, error.message, error.body) == ("", "null", None)


# --- every research wording ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_research_body_is_read(case: Case) -> None:
    error = parse_upstream_error(case.status, case.body)
    assert (error.status, error.raw) == (case.status, case.body)
    assert error.text  # every refusal has words to classify
    try:
        parsed = orjson.loads(case.body)
    except orjson.JSONDecodeError:
        assert error.body is None
        assert error.text == case.body.decode("utf-8", "replace")
        assert error.message == error.text.strip()[:MAX_MESSAGE]
        return
    assert error.body == parsed
    assert error.message  # every envelope in the research carries a message
    # the envelope's message is part of the text, unless it was an object (Mistral)
    # or the Python repr of one (old vLLM), which the text reads item by item
    if not error.message.startswith(("{", "[")):
        assert error.message in error.text


@given(st.binary(max_size=200), st.integers(100, 599))
def test_any_bytes_give_a_value(raw: bytes, status: int) -> None:
    error = parse_upstream_error(status, raw)
    assert error.raw == raw and error.status == status
    assert isinstance(error.text, str) and isinstance(error.message, str)


def test_parts_nested_past_what_orjson_writes_are_read() -> None:
    # A server echoing a deep value in its error (300 levels; orjson writes 254) was a 500.
    deep: Any = "context length"
    for _ in range(300):
        deep = [deep]
    body = {"detail": [{"loc": ["body"], "msg": "too long", "extra": deep}], "message": {"x": deep}}
    error = parse_upstream_error(422, json.dumps(body).encode())
    assert error.status == 422 and "too long" in error.text
