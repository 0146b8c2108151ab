"""SSE splitting: whole events from bytes cut anywhere, with every line end the standard allows."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.sse import SSEEvent, SSEParser, comment, frame, parse_block


def split_all(raw: bytes, cuts: list[int]) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    last = 0
    for cut in [*sorted(cuts), len(raw)]:
        for block in parser.blocks(raw[last:cut]):
            event = parse_block(block)
            if event is not None:
                events.append(event)
        last = cut
    return events + parser.close()


def test_events_cut_anywhere_come_back_whole() -> None:
    raw = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    for cut in range(len(raw) + 1):
        got = [e.data for e in split_all(raw, [cut])]
        assert got == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"], cut


def test_crlf_and_cr_line_ends_even_split_between_cr_and_lf() -> None:
    raw = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n"
    for cut in range(len(raw) + 1):
        assert [e.data for e in split_all(raw, [cut])] == [b"one", b"two", b"three"], cut


def test_multiline_data_comments_names_and_ignored_fields() -> None:
    raw = (
        b': keep-alive\n\nevent: error\ndata: {"error":\ndata:  {}}\n\n'
        b"id: 7\nretry: 100\ndata:x\n\n"
    )
    events = split_all(raw, [])
    assert events[0] == SSEEvent(comment=b"keep-alive")
    assert events[1] == SSEEvent(data=b'{"error":\n {}}', event="error")
    assert events[2] == SSEEvent(data=b"x")  # no space after the colon is allowed too


def test_a_last_event_without_its_blank_line_is_not_lost() -> None:
    assert [e.data for e in split_all(b"data: a\n\ndata: b", [])] == [b"a", b"b"]
    assert split_all(b"\n\n\n", []) == []


def test_framing() -> None:
    assert frame(b"{}") == b"data: {}\n\n"
    assert comment("two\nlines") == b": latchgate: two lines\n\n"


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(
        st.binary(min_size=1, max_size=30).filter(lambda b: b"\n" not in b and b"\r" not in b),
        min_size=1,
        max_size=8,
    ),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    seed=st.integers(0, 2**16),
)
def test_property_any_chunking_any_line_end(
    payloads: list[bytes], ending: bytes, seed: int
) -> None:
    raw = b"".join(b"data: " + p + ending + ending for p in payloads)
    rng = random.Random(seed)
    cuts = [rng.randrange(len(raw) + 1) for _ in range(rng.randrange(6))]
    assert [e.data for e in split_all(raw, cuts)] == payloads
