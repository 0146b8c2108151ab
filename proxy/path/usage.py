"""Token usage, in one place: reading the reports an answer carries, and the counts they give.

Usage arrives on a whole answer's body, on a stream's usage chunk (llama.cpp reports it
cumulatively, so the last report wins) and, for llama.cpp, as `timings.cache_n`. Every relay
hands what it parsed to `record`; the request's metrics read `token_counts` once it is over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.path.job import Job


def record(job: Job, body: dict[str, Any], on_usage: Callable[[Job, dict[str, Any]], None]) -> bool:
    """Note the usage report and cache count `body` carries, if any; whether it had a report."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return False
    job.usage = usage
    timings = body.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        job.cache_n = timings["cache_n"]  # llama.cpp: how much of the prompt came from cache
    on_usage(job, usage)
    return True


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def token_counts(job: Job) -> dict[str, int] | None:
    """Prompt, completion and cached tokens of the last report (cached: OpenAI's details,
    DeepSeek's cache hits, else llama.cpp's `timings.cache_n`), plus those of the answers the
    model was asked again for (self-healing); None without a report."""
    usage = job.usage
    spent = job.heal.spent
    if type(usage) is not dict:
        return dict(spent) if spent else None
    cached = 0
    details = usage.get("prompt_tokens_details")
    if type(details) is dict:
        cached = _count(details.get("cached_tokens"))
    if not cached:
        cached = _count(usage.get("prompt_cache_hit_tokens")) or _count(job.cache_n)
    counts = {
        "prompt": _count(usage.get("prompt_tokens")),
        "completion": _count(usage.get("completion_tokens")),
        "cached": cached,
    }
    if spent:
        for kind, n in spent.items():
            counts[kind] += n
    return counts


def set_aside(job: Job) -> None:
    """The attempt's answer is replaced by another (self-healing asks again): its tokens are
    kept for the request's count, and its report cleared for the next attempt's."""
    counts = token_counts(job)
    if counts:
        job.heal.spent = counts  # token_counts included what was set aside before
    job.usage = None
    job.cache_n = None
