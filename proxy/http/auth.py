"""Client credentials: reading the key a request carries and comparing it with the allowed keys.

One parser for every route (API, admin, listings), so a header no route can decode is refused the
same way everywhere: a 401, never a server error. Header values arrive as text that aiohttp
decoded leniently; bytes that were not UTF-8 come through as lone surrogates, which cannot be
encoded back, so the comparison works on bytes and treats what cannot be encoded as no key.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping


def bearer(headers: Mapping[str, str]) -> str | None:
    """The credential a request carries: `Authorization: Bearer ...`, else `x-api-key` or
    `api-key` (the Anthropic and Azure spellings); None when there is none."""
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def _as_bytes(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a header that was not UTF-8: surrogates cannot be encoded
        return None


def key_matches(given: str | None, keys: Iterable[str]) -> bool:
    """Whether `given` is one of `keys`, compared with every key in constant time (so timing
    says nothing about which key, or how much of one, matched)."""
    raw = _as_bytes(given) if given else None
    if raw is None:  # no key, or one that is not text: refusing at once says nothing of the keys
        return False
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(raw, key.encode("utf-8"))
    return ok
