"""Whether an upstream's successful answer is what the route promises the client.

A server behind a load balancer, a misconfigured base URL or a crashing worker can answer HTTP 200
with an HTML page, random bytes, truncated JSON or an `{"error": ...}` object. Relayed as it came,
the openai SDK hands the caller a `str`, or a completion with `choices=None`: a failure that looks
like success. Each route's answer is judged here, once, before it is relayed; a pure function of
the parsed body, so every case is a plain test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The key a route's answer must carry, as a list, for the answer to be one.
EXPECTED = {
    "chat": "choices",
    "completions": "choices",
    "embeddings": "data",
    "responses": "output",
}
_WHAT = {
    "chat": "a chat completion",
    "completions": "a completion",
    "embeddings": "embeddings",
    "responses": "a Response object",
}


@dataclass(frozen=True, slots=True)
class BadAnswer:
    """A 2xx answer that is not one. `status` is set when the body is an error object that says
    what it stands for (then it is judged like an HTTP error of that status: mapped, latched or
    retried); otherwise it is broken, and `what` says how, for the client's message."""

    what: str
    status: int | None = None


def error_status(error: Any, default: int, keys: tuple[str, ...] = ("code", "status")) -> int:
    """The HTTP status an error object stands for: its `code` (or `status`) when that is an HTTP
    error status, else `default`."""
    if isinstance(error, dict):
        for key in keys:
            value = error.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
                return value
    return default


def judge(route: str, parsed: Any, raw: bytes, ctype: str) -> BadAnswer | None:
    """None when `parsed` (the JSON of `raw`, or None when it is not JSON) is an answer of
    `route`; otherwise what is wrong with it."""
    key = EXPECTED.get(route)
    if key is None:
        return None
    if isinstance(parsed, dict):
        found = parsed.get(key)
        if isinstance(found, list):
            # No choice at all is no answer (a client reads choices[0]); an empty list of
            # embeddings or models can be one.
            return None if found or key != "choices" else BadAnswer("an empty 'choices' list")
        if "error" in parsed:
            return BadAnswer("an error object", status=error_status(parsed["error"], 502))
        return BadAnswer(f"a JSON object without a {key!r} list")
    if parsed is not None:
        return BadAnswer(f"a JSON {type(parsed).__name__}")
    if not raw.strip():
        return BadAnswer("an empty body")
    if "html" in ctype.lower() or raw.lstrip()[:1] == b"<":
        return BadAnswer("an HTML page")
    if raw.lstrip()[:1] in (b"{", b"["):
        return BadAnswer("JSON that does not parse (cut off or garbled)")
    return BadAnswer(f"a body that is not JSON ({ctype or 'no content type'})")


def message(upstream: str, route: str, bad: BadAnswer) -> str:
    """The client's message for a broken answer."""
    return (
        f"The upstream {upstream} answered with {bad.what} instead of {_WHAT.get(route, 'JSON')}, "
        "so latchgate did not pass it on. Check the server (and that the upstream's base URL "
        "points at its OpenAI-compatible API)."
    )
