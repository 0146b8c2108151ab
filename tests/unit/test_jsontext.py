"""compact: JSON text for any value latchgate builds, lone surrogates and any depth included."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.jsontext import _deep, compact


def test_compact_keeps_utf8_and_writes_no_spaces() -> None:
    assert compact({"a": [1, "é"]}) == '{"a":[1,"é"]}'


def test_compact_escapes_surrogates_instead_of_failing() -> None:
    assert orjson.loads(compact({"a": "\ud83d\ude42"})) == {"a": "\U0001f642"}
    lone = compact(["\ud83d"])
    assert lone == '["\\ud83d"]'


def nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for k in range(levels):
        value = [value, k] if k % 2 else {"k": value, "é": "\ud83d"}
    return value


def written(levels: int) -> str:
    """What `nested(levels, "x")` is as compact JSON, built as text."""
    text = '"x"'
    for k in range(levels):
        text = f"[{text},{k}]" if k % 2 else '{"k":' + text + ',"\\u00e9":"\\ud83d"}'
    return text


@pytest.mark.parametrize("levels", [300, 2000])
def test_compact_writes_any_depth(levels: int) -> None:
    # orjson writes 254 levels, the standard library up to its recursion limit: 2000 is past
    # both (a model's arguments can be nested that deep; nothing here may recurse to check it).
    assert compact(nested(levels, "x")) == written(levels)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=20,
)


@given(_JSON)
def test_the_loop_writes_what_the_standard_library_writes(value: Any) -> None:
    assert _deep(value) == json.dumps(value, separators=(",", ":"))
