"""Overflow recognition: every wording in research item 8 is one, the look-alikes are not."""

from __future__ import annotations

from typing import NamedTuple

import orjson
import pytest

from proxy.agent.overflow import is_overflow, overflow_message, reported_window
from proxy.agent.upstream_errors import UpstreamError
from proxy.agent.upstream_errors import parse_upstream_error as parse


class Fields(NamedTuple):
    """The envelope's fields of an UpstreamError, in the order the expectations below list them."""

    message: str
    type: str = ""
    code: str = ""
    param: str = ""


def fields(error: UpstreamError) -> Fields:
    return Fields(error.message, error.type, error.code, error.param)


def openai(message: str, code: object = "context_length_exceeded", **extra: object) -> bytes:
    error = {"message": message, "type": "invalid_request_error", "param": "messages", "code": code}
    return orjson.dumps({"error": {**error, **extra}})


def plain(message: str, **fields: object) -> bytes:
    return orjson.dumps({"error": {"message": message, **fields}})


LLAMA_NOW = (
    b'{"error":{"code":400,"message":"request (13919 tokens) exceeds the available context size '
    b'(2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13919,'
    b'"n_ctx":2048}}'
)

OVERFLOWS: list[tuple[str, int, bytes]] = [
    (
        "openai-messages",
        400,
        openai(
            "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 8227 tokens. Please reduce the length of the messages."
        ),
    ),
    (
        "openai-with-max-tokens",
        400,
        b'{"error":{"message":"This model\'s maximum context length is 8192 tokens. However, you '
        b"requested 8256 tokens (64 in the messages, 8192 in the completion). Please reduce the "
        b'length of the messages or completion.","type":"invalid_request_error","param":"messages",'
        b'"code":"context_length_exceeded"}}',
    ),
    (
        "openai-gpt5-no-code",
        400,
        plain(
            "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in "
            "289650 tokens. Please reduce the length of the messages."
        ),
    ),
    ("openai-code-only", 400, openai("Something else entirely.")),
    ("llama-current", 400, LLAMA_NOW),
    (
        "llama-pr-15780-code-500",
        500,
        b'{"error":{"code":500,"message":"the request exceeds the available context size. try '
        b'increasing the context size or enable context shift","type":"exceed_context_size_error",'
        b'"n_prompt_tokens":14429,"n_ctx":8192}}',
    ),
    (
        "llama-before-type",
        400,
        orjson.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size. try increasing "
                    "the context size or enable context shift",
                    "type": "invalid_request_error",
                }
            }
        ),
    ),
    (
        "llama-quoted",
        400,
        plain("the request exceeds the available context size, try increasing it"),
    ),
    (
        "llama-no-suffix",
        400,
        b"{'code': 400, 'message': 'request (4476 tokens) exceeds the available context size "
        b"(4096 tokens)', 'type': 'exceed_context_size_error'}",  # not JSON: matched as text
    ),
    (
        "llama-embedding-slot",
        400,
        plain(
            "input (9000 tokens) is larger than the max context size (8192 tokens). skipping",
            type="exceed_context_size_error",
        ),
    ),
    (
        "llama-in-200-stream",
        200,
        b'data: {"error":{"code":400,"message":"the request exceeds the available context size. '
        b'try increasing the context size or enable context shift",'
        b'"type":"invalid_request_error"}}',
    ),
    (
        "vllm-0.5",
        400,
        b'{"object":"error","message":"This model\'s maximum context length is 8192 tokens. '
        b"However, you requested 8203 tokens (7691 in the messages, 512 in the completion). Please "
        b'reduce the length of the messages or completion.","type":"BadRequestError","param":null,'
        b'"code":400}',
    ),
    (
        "vllm-0.5-messages",
        400,
        b'{"object":"error","message":"This model\'s maximum context length is 4096 tokens. '
        b"However, you requested 5000 tokens in the messages, Please reduce the length of the "
        b'messages.","type":"BadRequestError","param":null,"code":400}',
    ),
    (
        "vllm-0.10-input",
        400,
        orjson.dumps(
            {
                "error": {
                    "message": "This model's maximum context length is 32768 tokens. However, "
                    "your request has 33413 input tokens. Please reduce the length of the input "
                    "messages. (parameter=input_tokens, value=33413)",
                    "type": "BadRequestError",
                    "param": "input_tokens",
                    "code": 400,
                }
            }
        ),
    ),
    (
        # prompt plus reply over the window: the same situation as OpenAI's
        # "(64 in the messages, 8192 in the completion)", which OpenAI codes as an overflow
        "vllm-0.10-prompt-plus-reply",
        400,
        plain(
            "'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum "
            "context length is 65536 tokens and your request has 52189 input tokens (16384 > "
            "65536 - 52189). (parameter=max_tokens, value=16384)",
            type="BadRequestError",
            param="max_tokens",
            code=400,
        ),
    ),
    (
        "vllm-newer",
        400,
        plain(
            "This model's maximum context length is 4096 tokens. However, you requested 1000 "
            "output tokens and your prompt contains 3500 input tokens, for a total of 4500 tokens "
            "(3500 + 1000 = 4500 > 4096). Please reduce the length of the input prompt or the "
            "number of requested output tokens."
        ),
    ),
    (
        "ollama-now",
        400,
        b'{"error":"the prompt is longer than the context length currently available to the model; '
        b"shorten the prompt, adjust the context length in settings, or use a model with a longer "
        b'context length"}',
    ),
    (
        "ollama-v0.30.9",
        400,
        orjson.dumps(
            {
                "error": {
                    "message": "the prompt is longer than the context length currently available "
                    "to the model; shorten the prompt or adjust the context length in settings",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
    ),
    ("ollama-embeddings", 400, b'{"error":"the input length exceeds the context length"}'),
    (
        "lmstudio-n-keep",
        400,
        b'{"error":"The number of tokens to keep from the initial prompt is greater than the '
        b"context length (n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger "
        b'context length, or provide a shorter input."}',
    ),
    (
        "lmstudio-older",
        400,
        b'{"error":"Trying to keep the first 111490 tokens when context the overflows. However, '
        b"the model is loaded with context length of only 32768 tokens, which is not enough. Try "
        b'to load the model with a larger context length, or provide a shorter input."}',
    ),
    (
        "lmstudio-newer",
        400,
        b'{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}',
    ),
    (
        "anthropic",
        400,
        b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: '
        b'208310 tokens > 200000 maximum"},"request_id":"req_1"}',
    ),
    (
        "gemini",
        400,
        b'{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum '
        b'number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}',
    ),
    (
        "gemini-array",
        400,
        b'[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum '
        b'number of tokens allowed (1048576).","status":"INVALID_ARGUMENT","details":[]}}]',
    ),
    ("groq", 400, plain("Please reduce the length of the messages or completion.")),
    (
        "openrouter",
        400,
        plain(
            "This endpoint's maximum context length is 32768 tokens. However, you requested more"
        ),
    ),
    (
        "openrouter-wrapped",
        400,
        orjson.dumps(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 400,
                    "metadata": {"raw": LLAMA_NOW.decode(), "provider_name": "Azure"},
                }
            }
        ),
    ),
    (
        "together",
        400,
        plain("The input (9000 tokens) is longer than the model's context length (8192 tokens)."),
    ),
    (
        "mistral",
        400,
        plain(
            "Prompt contains 40000 tokens, too large for model with 32768 maximum context length"
        ),
    ),
    ("kimi", 400, plain("Your request exceeded model token limit: 131072 (requested: 200000)")),
    (
        "poolside",
        400,
        plain("Input length 5000 exceeds the maximum allowed input length of 4096 tokens."),
    ),
    ("cerebras", 400, plain("Current length is 9000 while limit is 8192")),
    ("tgi", 422, plain("`inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000")),
    ("bedrock", 400, plain("Too many input tokens. Max input tokens: 200000, request: 210000")),
    ("ai21", 400, plain("Prompt has too many tokens")),
    ("plain-text", 400, b"the request exceeds the available context size, try increasing it"),
]

NOT_OVERFLOWS: list[tuple[str, int, bytes]] = [
    (
        "openai-tpm-429",
        429,
        b'{"error":{"message":"Request too large for gpt-4o in organization '
        b"org-2itOgSdqw0DhUYp0QyLhttLL on tokens per min (TPM): Limit 30000, Requested 36278. "
        b"The input or output tokens must be reduced in order to run successfully.\","
        b'"type":"tokens","param":null,'
        b'"code":"rate_limit_exceeded"}}',
    ),
    (
        "openai-tpm-as-400",  # the same text under another status is still a rate limit
        400,
        b'{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per '
        b'min (TPM): Limit 30000, Requested 36278.","type":"tokens","param":null,'
        b'"code":"rate_limit_exceeded"}}',
    ),
    (
        "groq-413",
        413,
        plain(
            "Request too large for model `llama3-70b-8192` in organization `org_1` on tokens "
            "per minute (TPM): Limit 6000, Requested 7591, please reduce your message size "
            "and try again.",
            type="tokens",
            code="rate_limit_exceeded",
        ),
    ),
    ("groq-413-bare", 413, plain("Request too large for model : Limit 6000, Requested 7591")),
    (
        "max-tokens-too-large",
        400,
        b'{"error":{"message":"max_tokens is too large: 8192. This model supports at most 4096 '
        b'completion tokens, whereas you provided 8192.","type":"invalid_request_error",'
        b'"param":"max_tokens","code":null}}',
    ),
    (
        "anthropic-output-cap",
        400,
        plain(
            "max_tokens: 21333 > 4096, which is the maximum allowed number of output tokens "
            "for claude-3-opus-20240229",
            type="invalid_request_error",
        ),
    ),
    (
        "groq-max-completion",
        400,
        plain(
            "max_completion_tokens must be less than or equal to 40960, the maximum value for "
            "max_completion_tokens is less than the context_window for this model",
            type="invalid_request_error",
            param="max_completion_tokens",
        ),
    ),
    (
        "string-above-max-length",
        400,
        openai(
            "Invalid 'messages[17].content': string too long. Expected a string with maximum "
            "length 1048576, but got a string with length 1744259 instead.",
            code="string_above_max_length",
        ),
    ),
    (
        "anthropic-rate-limit",
        429,
        b'{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed '
        b"the rate limit for your organization of 20,000 input tokens per minute. Please reduce "
        b'the prompt length or the maximum tokens requested, or try again later."}}',
    ),
    (
        "llama-batch-too-small",
        500,
        plain(
            "input (9000 tokens) is too large to process. increase the physical batch size "
            "(current batch size: 512)",
            type="server_error",
        ),
    ),
    (
        "llama-loading",
        503,
        b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}',
    ),
    (
        "unsupported-param",
        400,
        openai(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            code="unsupported_parameter",
        ),
    ),
    (
        "a-completion-mentioning-the-phrase",
        200,
        b'{"choices":[{"message":{"content":"This model\'s maximum context length is 8192"}}]}',
    ),
    ("empty", 400, b""),
    # a 429 is a rate limit whatever its words say
    ("any-429", 429, plain("This model's maximum context length is 8192 tokens.")),
]


@pytest.mark.parametrize(("name", "status", "body"), OVERFLOWS, ids=[o[0] for o in OVERFLOWS])
def test_every_overflow_wording_is_recognised(name: str, status: int, body: bytes) -> None:
    assert is_overflow(parse(status, body)) is True


@pytest.mark.parametrize(
    ("name", "status", "body"), NOT_OVERFLOWS, ids=[o[0] for o in NOT_OVERFLOWS]
)
def test_look_alikes_are_not_overflows(name: str, status: int, body: bytes) -> None:
    assert is_overflow(parse(status, body)) is False


def test_overflow_message_keeps_the_upstream_text() -> None:
    assert overflow_message(parse(400, LLAMA_NOW)) == (
        "request (13919 tokens) exceeds the available context size (2048 tokens), try increasing it"
    )
    assert overflow_message(
        parse(400, b'{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}')
    ) == ("Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)")
    assert overflow_message(parse(400, b"  plain words  ")) == "plain words"


def test_overflow_message_unwraps_openrouter() -> None:
    wrapped = orjson.dumps(
        {
            "error": {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {"raw": LLAMA_NOW.decode(), "provider_name": "x"},
            }
        }
    )
    assert overflow_message(parse(400, wrapped)).startswith("request (13919 tokens) exceeds")


def test_overflow_message_has_a_fallback_and_a_bound() -> None:
    assert overflow_message(parse(400, b"")) == "The request exceeds the model's context window."
    assert len(overflow_message(parse(400, b"x" * 10_000))) == 2000


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"error":{"message":"m","type":"t","param":"p","code":"c"}}',
            Fields("m", "t", "c", "p"),
        ),
        (b'{"error":{"code":503,"message":"m","type":"t"}}', Fields("m", "t", "503", "")),
        (b'{"error":"just text"}', Fields("just text")),
        (
            b'{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}',
            Fields("m", "BadRequestError", "400", ""),
        ),
        (
            b'[{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT"}}]',
            Fields("m", "INVALID_ARGUMENT", "400", ""),
        ),
        (
            b'{"object":"error","message":{"detail":[{"msg":"x"}]},"type":"invalid_request_error"}',
            Fields('{"detail":[{"msg":"x"}]}', "invalid_request_error", "", ""),
        ),
        (b"<html>Bad gateway</html>", Fields("<html>Bad gateway</html>")),
        (b"[1, 2]", Fields("[1, 2]")),
    ],
)
def test_upstream_error_reads_every_envelope(body: bytes, expected: Fields) -> None:
    assert fields(parse(400, body)) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (LLAMA_NOW, 2048),
        (b'{"error":{"message":"x","n_ctx":0}}', None),
        (b'{"error":{"message":"x","n_ctx":true}}', None),
        (b'{"error":"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}', None),
        (b"not json", None),
        (b"[1]", None),
    ],
)
def test_reported_window_reads_llama_n_ctx(body: bytes, expected: int | None) -> None:
    assert reported_window(parse(400, body)) == expected


def test_upstream_error_reads_detail_when_there_is_no_message() -> None:
    # FastAPI's {"detail": "..."} and Mistral's newer {"message": [], "detail": [...]}.
    assert parse(404, b'{"detail": "Not Found"}').message == "Not Found"
    mistral = b'{"object": "error", "message": [], "detail": [{"msg": "Extra inputs"}]}'
    assert parse(422, mistral).message == '[{"msg":"Extra inputs"}]'
