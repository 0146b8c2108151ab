"""Header values built from any text: one printable ASCII line, and the notices list as JSON."""

from __future__ import annotations

import json
import string

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.headers import header_value

CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\r\n", "\u2028", "é"]


@pytest.mark.parametrize("bad", CONTROLS)
def test_header_value_is_one_printable_ascii_line(bad: str) -> None:
    value = header_value(f"model m{bad}x refused {bad}max_tokens")
    assert value.isascii() and value.isprintable(), value
    assert "\n" not in value and "\r" not in value


def test_header_value_keeps_what_the_bytes_were() -> None:
    assert header_value("a\x00b") == "a\\x00b"
    assert header_value("a\x1bb\x7f") == "a\\x1bb\\x7f"
    assert header_value("café") == "caf\\xe9"
    assert header_value("two\n lines") == "two lines"
    assert header_value("x" * 5000) == "x" * 1000


def test_notices_value_round_trips_any_text() -> None:
    from proxy.headers import notices_value

    said = ["a, b.", "c\x00d é", 'quote " and \\']
    value = notices_value(said)
    assert value.isascii() and value.isprintable()
    assert orjson.loads(value) == said


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(), st.text(alphabet=string.printable))))
def test_notices_value_is_what_json_dumps_writes(said: list[str]) -> None:
    """The header's bytes do not depend on which encoder wrote them (orjson for printable
    ASCII, the standard library's otherwise)."""
    from proxy.headers import notices_value

    flat = [" ".join(n.split()) for n in said]
    assert notices_value(said) == json.dumps(flat, ensure_ascii=True)


_SPACED = st.text(alphabet=st.sampled_from([*"ab é\t\n\r\x00\x1b", "\u3000", "\xa0", "\u2028"]))


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=string.printable), _SPACED), st.integers(1, 40))
def test_header_value_flattens_as_splitting_into_words_does(said: str, limit: int) -> None:
    """Printable text is kept as it is when its spaces are single and inside it; any text
    comes out as its words joined by one space, escaped, cut at the limit."""
    flat = " ".join(said.split())
    if not (flat.isascii() and flat.isprintable()):
        flat = flat.encode("ascii", "backslashreplace").decode("ascii")
        flat = "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in flat)
    assert header_value(said, limit) == flat[:limit]


def test_notice_values_mask_with_the_masker_they_are_given() -> None:
    # Kept for the notices seen last: a masker with other secrets must not read an answer
    # another one made, and the unmasked notice never reaches a header.
    from proxy.observe.masking import Masker
    from proxy.path.client import notice_values

    said = ("upstream sk-live-0123456789 refused\ntop_k", "Recovered 1 tool call (hermes).")
    plain, masked = Masker(), Masker(["sk-live-0123456789"])
    each, every = notice_values(plain, said)
    assert each == ("upstream sk-live-0123456789 refused top_k", said[1])
    assert orjson.loads(every) == list(each)
    each, every = notice_values(masked, said)
    assert each == ("upstream [REDACTED] refused top_k", said[1])
    assert "sk-live" not in every and orjson.loads(every) == list(each)
    assert notice_values(masked, said) == (each, every)
