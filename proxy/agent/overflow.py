"""Recognising an upstream's "prompt too long for the context window" error, in every wording.

Each server words a context overflow its own way and wraps it in its own envelope (BEHAVIOUR.md
5.4; research/refusal-wordings.md items 0 and 8). latchgate answers all of them with OpenAI's one
400 `context_length_exceeded` shape, keeping the upstream's message, and never retries or latches
them. The rate limits that talk about tokens (OpenAI's per-request TPM 429, Groq's 413) and the
reply-ceiling value errors (`max_tokens is too large`) look similar and are not overflows: a
smaller prompt is not what fixes them.

`parse_error` is the envelope reader; the retry classifier uses it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

_MAX_MESSAGE = 2000


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """The fields of an upstream error body, whatever envelope carried them (all strings)."""

    message: str = ""
    type: str = ""
    code: str = ""
    param: str = ""


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()  # Mistral puts a dict in `message`


def _from_object(data: dict[str, object]) -> UpstreamError:
    inner = data.get("error")
    if isinstance(inner, str):  # LM Studio, Ollama native: {"error": "<string>"}
        return UpstreamError(message=inner)
    source = inner if isinstance(inner, dict) else data  # vLLM <= 0.9: fields at the top level
    metadata = source.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
        # OpenRouter wraps the provider's own error as a JSON string; its outer message is
        # only "Provider returned error", so the provider's fields are the useful ones.
        wrapped = parse_error(metadata["raw"].encode())
        if wrapped.message:
            return wrapped
    message = source.get("message")
    if not message:
        # FastAPI/pydantic bodies carry `detail` (a string, or a list of errors); Mistral's
        # newer envelope sends `"message": []` with the list there too.
        message = source.get("detail") or data.get("detail")
    return UpstreamError(
        message=_text(message),
        type=_text(source.get("type") or source.get("status")),
        code=_text(source.get("code")),
        param=_text(source.get("param")),
    )


def parse_error(body: bytes) -> UpstreamError:
    """Read an error body in any known envelope; text that is not JSON becomes the message."""
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("data:"):  # an error sent as an SSE event (older llama.cpp streams)
        text = text[5:].strip()
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return UpstreamError(message=text[:_MAX_MESSAGE])
    if isinstance(data, list):  # Gemini: [{"error": {...}}]
        data = next((item for item in data if isinstance(item, dict)), None)
    if isinstance(data, dict):
        return _from_object(data)
    return UpstreamError(message=text[:_MAX_MESSAGE])


# Lowercase substrings, each seen in a real overflow body (research item 8 and LiteLLM's table).
_PHRASES = (
    "maximum context length",  # OpenAI, Azure, vLLM, Groq, OpenRouter, Mistral, Aleph Alpha
    "exceeds the available context size",  # llama.cpp, all eras
    "is larger than the max context size",  # llama.cpp non-causal slots
    "input tokens exceed the configured limit",  # OpenAI gpt-5
    "prompt is longer than the context length",  # Ollama
    "input length exceeds the context length",  # Ollama embeddings
    "is greater than the context length",  # LM Studio (n_keep)
    "cannot truncate prompt with n_keep",  # LM Studio, newer
    "model is loaded with context length of only",  # LM Studio, older
    "prompt is too long",  # Anthropic, Bedrock
    "exceeds the maximum number of tokens allowed",  # Gemini
    "is longer than the model's context length",  # Together
    "exceeded model token limit",  # Kimi
    "exceeds the maximum allowed input length",  # Poolside
    "model's maximum context limit",
    "exceed context limit",
    "`inputs` tokens + `max_new_tokens` must be",  # TGI, SageMaker, Together
    "too many input tokens",  # Bedrock
    "prompt has too many tokens",  # AI21
    "please reduce the length of the messages",  # OpenAI, Groq
)
_CODES = ("context_length_exceeded", "exceed_context_size_error")
# Two-part patterns: Cerebras ("current length is ... while limit is ...") and a generic one.
_PAIRS = (("current length is", "while limit is"), ("maximum input length is", "tokens"))
# A rate limit talks about tokens too; these markers rule an overflow out.
_RATE_LIMIT = re.compile(
    r"rate[ _-]?limit|per min|tokens per|\btpm\b|quota|request too large for", re.IGNORECASE
)


def _mentions_overflow(text: str) -> bool:
    lowered = text.lower()
    if any(phrase in lowered for phrase in _PHRASES):
        return True
    return any(first in lowered and second in lowered for first, second in _PAIRS)


def is_overflow(status: int, body: bytes) -> bool:
    """Whether an upstream error says the prompt does not fit the model's context window.

    A 429 never is (a token rate limit, however it is worded). Below 400 only a body with an
    error envelope counts: older llama.cpp sent the overflow inside a 200 stream.
    """
    if status == 429:
        return False
    error = parse_error(body)
    if status < 400 and not (error.type or error.code):
        return False
    if error.code == "rate_limit_exceeded" or _RATE_LIMIT.search(error.message):
        return False
    if error.code in _CODES or error.type in _CODES:
        return True
    return _mentions_overflow(error.message)


def reported_window(body: bytes) -> int | None:
    """The window an overflow error states outright: llama.cpp's `n_ctx` (per slot), else None.

    The caller can hand it to `WindowDiscovery.learn`, so the next oversized request is refused
    before it is sent.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    n_ctx = error.get("n_ctx") if isinstance(error, dict) else None
    if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
        return n_ctx
    return None


def overflow_message(body: bytes) -> str:
    """The upstream's own overflow message, to pass on to the client."""
    message = parse_error(body).message.strip()
    return message[:_MAX_MESSAGE] or "The request exceeds the model's context window."
