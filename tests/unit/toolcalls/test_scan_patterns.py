"""The regex builders of `toolcalls.scan`: a trie must match what the set it was built from
says, no more (the stream's marker checks rely on it to relay text unparsed)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from proxy.toolcalls.scan import closed_set, first_match

_WORDS = st.sets(st.text(alphabet="<>/tc_a{`|\\.", min_size=1, max_size=6), max_size=8)


def _beginnings(words: set[str]) -> set[str]:
    return {w[:k] for w in words for k in range(1, len(w) + 1)}


@given(_WORDS, st.text(alphabet="<>/tc_a{`|\\.x", max_size=8))
def test_a_closed_set_matches_exactly_its_strings(words: set[str], text: str) -> None:
    strings = _beginnings(words)
    pattern = re.compile(closed_set(strings))
    assert (pattern.fullmatch(text) is not None) == (text in strings)


@given(_WORDS, st.text(alphabet="<>/tc_a{`|\\.x", max_size=12))
def test_first_match_finds_where_the_first_string_begins(words: set[str], text: str) -> None:
    found = re.compile(first_match(words)).search(text)
    starts = [i for i in range(len(text)) if any(text.startswith(w, i) for w in words)]
    assert (found.start() if found else None) == (starts[0] if starts else None)


def test_an_empty_set_matches_nothing() -> None:
    assert re.compile(closed_set(set())).search("anything") is None
    assert re.compile(first_match(set())).search("anything") is None


def test_a_string_far_longer_than_the_recursion_limit_is_built_without_nesting_calls() -> None:
    # A marker is as long as a tool name the client chose; compiled, a call per character
    # would crash the process past the C stack (proxy/compiled.py), not raise.
    long = "ab" * 50_000
    assert first_match({long}) == long
    assert closed_set({long[:k] for k in range(1, 6)}) == "a(?:b(?:a(?:b(?:a)?)?)?)?"
    assert closed_set({long}).count("(?:") == len(long) - 1  # its trie: that of its beginnings


def test_every_think_tag_holds_a_word_that_tells_a_reply_may_think() -> None:
    """`may_think` answers no think tag for a reply without any of THINK_WORDS: every tag must
    hold one, or a block opened with it would be read as the reply's text."""
    from proxy.toolcalls.scan import THINK_CLOSE, THINK_OPEN, THINK_WORDS, may_think

    for tag in (*THINK_OPEN, *THINK_CLOSE):
        assert any(word in tag for word in THINK_WORDS), tag
        assert may_think(f"prose {tag} prose")
    assert not may_think('<tool_call>{"name": "get_weather"}</tool_call> Thinking? no.')
