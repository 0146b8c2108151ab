"""Which upstream failures are worth another try, and how long to wait before it.

A transient failure (a connection error, a timeout, an overloaded or loading server) is retried
with capped exponential backoff and jitter, honouring the wait the server asks for; everything
else goes back to the client at once (BEHAVIOUR.md 6; research/refusal-wordings.md item 9). The
caller owns the loop, the clock and the sleeping; this module only decides.

Capability refusals are not recognised here: the caller classifies an error as a refusal (and
latches it) before asking `classify_status`, so a 500 that llama.cpp uses to refuse a schema is
never retried as if the server were down. Overflows are recognised here, through
`overflow.is_overflow`, because the transient statuses include codes some servers overflow with.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from proxy.agent.overflow import is_overflow
from proxy.agent.upstream_errors import UpstreamError

CONNECT = "connect"
TIMEOUT = "timeout"
SILENT = "silent"
STATUS_429 = "status_429"
STATUS_5XX = "status_5xx"
STATUS_4XX = "status_4xx"  # 409, or any 4xx the server marked `x-should-retry: true`
LOADING = "loading"

TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class Transient:
    """A failure worth retrying: why (a `RETRY` event's reason label) and the server's wait.

    `wait` is the server's own wait in seconds, as asked (not capped here): `next_wait` compares
    it with the policy's cap, and a wait longer than the cap means the error goes back instead.
    """

    reason: str
    wait: float | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Per-upstream retry settings (BEHAVIOUR.md 6 defaults)."""

    budget: int = 2
    base: float = 0.5
    cap: float = 8.0
    loading_timeout: float = 120.0
    loading_poll: float = 2.0


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works on plain dicts as well as CIMultiDicts."""
    value = headers.get(name)
    if value is not None:
        return value
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def server_wait(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked to wait: `retry-after-ms`, else `Retry-After` (seconds or date)."""
    millis = _header(headers, "retry-after-ms")
    if millis is not None and (value := _seconds(millis.strip())) is not None:
        return value / 1000
    after = _header(headers, "retry-after")
    if after is None:
        return None
    if (value := _seconds(after.strip())) is not None:
        return value
    try:
        moment = parsedate_to_datetime(after.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


# "Please try again in 18.642s", "try again in 20s", "Please retry after 86400 seconds".
_BODY_WAIT = re.compile(
    r"(?:try again in|retry after)\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?)\b",
    re.IGNORECASE,
)
# "Limit 30000, Requested 36278" (one request over the whole limit) vs "Limit 30000, Used 14567,
# Requested 24754" (the window is busy; it clears).
_LIMIT_REQUESTED = re.compile(
    r"limit:?\s*([\d,]+)\s*,\s*(?:used:?\s*[\d,]+\s*,\s*)?requested:?\s*([\d,]+)", re.IGNORECASE
)


def _body_wait(message: str) -> float | None:
    match = _BODY_WAIT.search(message)
    if match is None:
        return None
    value, unit = float(match.group(1)), match.group(2).lower()
    if unit == "ms":
        return value / 1000
    return value * 60 if unit.startswith("m") else value


def _never_clears(error: UpstreamError) -> bool:
    """A 429 that retrying cannot fix: no quota left, or one request bigger than the limit."""
    if "insufficient_quota" in (error.type, error.code):
        return True
    if "exceeded your current quota" in error.message.lower():
        return True
    match = _LIMIT_REQUESTED.search(error.message)
    if match is None or "used" in match.group(0).lower():
        return False
    limit, requested = (int(group.replace(",", "")) for group in match.groups())
    return requested > limit


def is_loading(error: UpstreamError) -> bool:
    """Whether a 503 says the model is still loading (llama.cpp `Loading model`, TGI, others)."""
    if error.status != 503:
        return False
    message = error.message.lower()
    return (
        error.type == "unavailable_error"
        or "loading model" in message
        or "model is loading" in message
        or "is currently loading" in message
    )


def _reason(status: int) -> str:
    if status == 429:
        return STATUS_429
    if status == 408:
        return TIMEOUT
    return STATUS_5XX if status >= 500 else STATUS_4XX


def classify_status(error: UpstreamError, headers: Mapping[str, str]) -> Transient | None:
    """The transient this error is, or None when it must go back to the client.

    Order: an overflow is never transient; a loading model is (reason `loading`); then the
    server's `x-should-retry` decides; then a 429 that will not clear is final; then the status.
    The error is read from `error`; only the retry headers are read here.
    """
    status = error.status
    if status < 400 or is_overflow(error):
        return None
    if is_loading(error):
        return Transient(LOADING, server_wait(headers))
    should_retry = (_header(headers, "x-should-retry") or "").strip().lower()
    if should_retry == "false":
        return None
    if status == 429 and _never_clears(error):
        return None
    if should_retry != "true" and status not in TRANSIENT_STATUSES:
        return None
    wait = server_wait(headers)
    return Transient(_reason(status), wait if wait is not None else _body_wait(error.message))


def backoff(
    attempt: int, *, base: float = 0.5, cap: float = 8.0, rng: random.Random | None = None
) -> float:
    """`min(cap, base * 2**attempt)` scaled by a jitter in [0.5, 1.0]; `attempt` counts from 0."""
    # Clamp the exponent: 2**2000 does not fit a float, and the cap is reached long before.
    delay = min(cap, base * 2 ** min(max(attempt, 0), 64))
    return delay * (rng or random).uniform(0.5, 1.0)


def next_wait(
    policy: RetryPolicy,
    attempt: int,
    transient: Transient,
    rng: random.Random | None = None,
    loading_waited: float = 0.0,
) -> float | None:
    """Seconds to wait before the next try, or None to give up and return the error.

    `attempt` is the number of retries already spent. A loading model does not spend retries:
    it is polled every `loading_poll` seconds until `loading_waited` (the caller's running total
    of loading waits) reaches `loading_timeout`. Otherwise a spent budget gives up, a server
    wait longer than `cap` gives up, a shorter one is honoured, and no wait means backoff.
    """
    if transient.reason == LOADING:
        left = policy.loading_timeout - loading_waited
        return min(policy.loading_poll, left) if left > 0 else None
    if attempt >= policy.budget:
        return None
    if transient.wait is not None:
        return transient.wait if transient.wait <= policy.cap else None
    return backoff(attempt, base=policy.base, cap=policy.cap, rng=rng)
