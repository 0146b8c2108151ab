"""Masking configured secrets in everything that leaves latchgate.

Upstreams echo the key they were sent ("Incorrect API key provided: sk-...") in error bodies,
HTML error pages and mid-stream error events, and a client's or an admin's key can turn up in
text latchgate quotes back. Logs mask credentials by pattern (`proxy.logs`); this masks the
*configured* secrets exactly, wherever they appear, because a key need not look like one.

One `Masker` is built from the settings and applied where upstream bytes enter the request path
and where latchgate writes text of its own (notices, error messages, forwarded headers), so no
route has to remember it. A check is one substring search per secret (C speed), so it is cheap
enough to run on every streamed read.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

REDACTED = "[REDACTED]"
# Shorter values are not masked: a short client key such as "test" would turn every "test" in a
# model's answers into [REDACTED]. A secret that short protects nothing anyway; the proxy warns
# about one at start (see `short_secrets`).
MIN_SECRET = 8


def _forms(secret: str) -> list[str]:
    """The secret and, where JSON writes it differently (quotes, backslashes, controls, non-ASCII
    under ensure_ascii), its escaped forms, so it is found inside a JSON body too."""
    forms = [secret]
    escaped = orjson.dumps(secret).decode()[1:-1]
    ascii_escaped = escaped.encode("ascii", "backslashreplace").decode()
    for form in (escaped, ascii_escaped, escaped.replace("/", "\\/")):
        if form not in forms:
            forms.append(form)
    return forms


class Masker:
    """Replaces every configured secret in text and bytes with `[REDACTED]`."""

    __slots__ = ("_bytes", "_secrets", "_text")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = frozenset(s for s in secrets if s and len(s) >= MIN_SECRET)
        # Longest first: a key that contains another key is masked whole, not in pieces.
        forms = sorted({f for s in self._secrets for f in _forms(s)}, key=len, reverse=True)
        self._text = tuple(forms)
        self._bytes = tuple(f.encode("utf-8", "surrogatepass") for f in forms)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def with_secret(self, secret: str | None) -> Masker:
        """This masker and one more secret (a client's key forwarded to an upstream)."""
        if not secret or len(secret) < MIN_SECRET or secret in self._secrets:
            return self
        return Masker((*self._secrets, secret))

    def text(self, text: str) -> str:
        for secret in self._text:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        for secret in self._bytes:
            if secret in data:
                data = data.replace(secret, b"[REDACTED]")
        return data


def short_secrets(secrets: Iterable[str | None]) -> int:
    """How many of `secrets` are too short to be masked (worth a warning at start)."""
    return sum(1 for s in secrets if s and len(s) < MIN_SECRET)
