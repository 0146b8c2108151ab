"""compact: JSON text for any value latchgate builds, lone surrogates included."""

from __future__ import annotations

import orjson

from proxy.jsontext import compact


def test_compact_keeps_utf8_and_writes_no_spaces() -> None:
    assert compact({"a": [1, "é"]}) == '{"a":[1,"é"]}'


def test_compact_escapes_surrogates_instead_of_failing() -> None:
    assert orjson.loads(compact({"a": "\ud83d\ude42"})) == {"a": "\U0001f642"}
    lone = compact(["\ud83d"])
    assert lone == '["\\ud83d"]'
