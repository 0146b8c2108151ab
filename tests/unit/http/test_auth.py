"""Reading a client's key from its headers, and comparing it with the configured keys."""

from __future__ import annotations

from proxy.http.auth import bearer, key_matches


def test_bearer_reads_each_spelling() -> None:
    assert bearer({"Authorization": "Bearer  k1 "}) == "k1"
    assert bearer({"Authorization": "bearer k2"}) == "k2"
    assert bearer({"x-api-key": "k3"}) == "k3"
    assert bearer({"api-key": "k4"}) == "k4"
    assert bearer({"Authorization": "Bearer "}) is None
    assert bearer({"Authorization": "Basic abc"}) is None
    assert bearer({}) is None


def test_key_matches_refuses_what_cannot_be_encoded() -> None:
    assert key_matches("k1", ["k0", "k1"])
    assert not key_matches("k2", ["k0", "k1"])
    assert not key_matches(None, ["k1"])
    assert not key_matches("", [""])
    assert not key_matches("k1\udcff", ["k1"])  # a surrogate: what aiohttp makes of 0xff
