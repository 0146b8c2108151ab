"""Recognising an upstream's "prompt too long for the context window" error, in every wording.

Each server words a context overflow its own way and wraps it in its own envelope (BEHAVIOUR.md
5.4; research/refusal-wordings.md items 0 and 8). latchgate answers all of them with OpenAI's one
400 `context_length_exceeded` shape, keeping the upstream's message, and never retries or latches
them. The rate limits that talk about tokens (OpenAI's per-request TPM 429, Groq's 413) and the
reply-ceiling value errors (`max_tokens is too large`) look similar and are not overflows: a
smaller prompt is not what fixes them.

Every function here reads an `UpstreamError` (upstream_errors.py), the one reading of the body.
"""

from __future__ import annotations

import re

from proxy.agent.upstream_errors import MAX_MESSAGE, UpstreamError

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


def is_overflow(error: UpstreamError) -> bool:
    """Whether an upstream error says the prompt does not fit the model's context window.

    A 429 never is (a token rate limit, however it is worded). Below 400 only a body with an
    error envelope counts: older llama.cpp sent the overflow inside a 200 stream.
    """
    if error.status == 429:
        return False
    if error.status < 400 and not (error.type or error.code):
        return False
    if error.code == "rate_limit_exceeded" or _RATE_LIMIT.search(error.message):
        return False
    if error.code in _CODES or error.type in _CODES:
        return True
    return _mentions_overflow(error.message)


# What an overflow message says of the window and of the prompt, where it says it: llama.cpp
# ("request (13919 tokens) exceeds the available context size (2048 tokens)"), vLLM and OpenAI
# ("maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the
# messages, ...)", newer vLLM "your request has 3000 input tokens").
_WINDOW_SAID = re.compile(
    r"maximum context length is (\d+) tokens|available context size \((\d+) tokens\)"
)
_PROMPT_SAID = re.compile(
    r"\((\d+) in the messages|request has (\d+) input tokens|request \((\d+) tokens\)"
)


def _field(error: UpstreamError, name: str) -> int | None:
    data = error.body
    inner = data.get("error") if isinstance(data, dict) else None
    value = inner.get(name) if isinstance(inner, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _said(pattern: re.Pattern[str], message: str) -> int | None:
    match = pattern.search(message)
    if match is None:
        return None
    value = int(next(group for group in match.groups() if group is not None))
    return value if value > 0 else None


def reported_window(error: UpstreamError) -> int | None:
    """The window an overflow error states outright: llama.cpp's `n_ctx` (per slot), else the
    figure its message gives (vLLM, OpenAI), else None.

    The caller can hand it to `WindowDiscovery.learn`, so the next oversized request is refused
    (or fitted) before it is sent.
    """
    return _field(error, "n_ctx") or _said(_WINDOW_SAID, error.message)


def reported_prompt(error: UpstreamError) -> int | None:
    """The prompt's size in tokens, as the overflow error counted it (llama.cpp's
    `n_prompt_tokens`, else the figure in the message), else None."""
    return _field(error, "n_prompt_tokens") or _said(_PROMPT_SAID, error.message)


def overflow_message(error: UpstreamError) -> str:
    """The upstream's own overflow message, to pass on to the client."""
    message = error.message.strip()
    return message[:MAX_MESSAGE] or "The request exceeds the model's context window."
