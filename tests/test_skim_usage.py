"""Reading a whole answer's usage without parsing it: the same result as a parse, or None."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.pipeline import skim_usage
from tests.fakeupstream import completion


def _answer(content: str, usage: Any = None, **extra: Any) -> bytes:
    body = {k: v for k, v in completion(content).items() if k != "usage"} | extra
    if usage is not None:
        body["usage"] = usage
    return orjson.dumps(body)


def test_usage_and_cache_n_read_as_a_parse_would() -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 3,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 8, "audio_tokens": None},
    }
    raw = _answer("hi", usage, timings={"cache_n": 8, "prompt_n": 4, "predicted_ms": 1.5})
    assert skim_usage(raw) == (usage, 8)
    assert skim_usage(_answer("hi")) == (None, None)  # no usage at all
    # pretty-printed by the server: spaces and newlines around keys
    pretty = orjson.dumps(orjson.loads(raw), option=orjson.OPT_INDENT_2)
    assert skim_usage(pretty) == (usage, 8)


def test_content_that_mentions_usage_is_not_a_key() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2}
    raw = _answer('the "usage": {"prompt_tokens": 999} and "cache_n": 5', usage)
    assert skim_usage(raw) == (usage, None)


def test_anything_unsure_is_left_to_a_parse() -> None:
    # a string value inside usage, a second "usage" key elsewhere, odd cache_n
    assert skim_usage(_answer("x", {"prompt_tokens": 1, "note": "a}b"})) is None
    assert skim_usage(_answer("x", {"prompt_tokens": 1}, extra={"usage": {"a": 1}})) is None
    assert skim_usage(_answer("x", timings={"cache_n": "8"})) is None
    assert skim_usage(_answer("x", [1, 2])) is None


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
        st.one_of(
            st.integers(min_value=0, max_value=10**9),
            st.none(),
            st.dictionaries(
                st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
                st.integers(min_value=0, max_value=10**6) | st.none(),
                max_size=3,
            ),
        ),
        max_size=6,
    ),
    st.text(max_size=40),
)
def test_skim_agrees_with_a_parse(usage: dict[str, Any], content: str) -> None:
    raw = _answer(content, usage or {"prompt_tokens": 0})
    got = skim_usage(raw)
    if got is not None:  # when it answers, it answers what a parse would
        assert got == (orjson.loads(raw)["usage"], None)
    else:  # and it only gives up when content repeats a key name
        assert '"usage"' in orjson.dumps(content).decode() or "usage" in usage
