"""SSE splitting: whole events from bytes cut anywhere, with every line end the standard allows."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.path.sse import SSEEvent, SSEParser, comment, frame, parse_block, plain_run


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


# -- feed and plain_run: the relay's unread fast path ------------------------------------------

C1 = b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n'
C2 = b'data: {"choices":[{"delta":{"content":"b \\"usage\\" {x}"},"finish_reason":null}]}\n\n'
FIN = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3}}\n\n'
# OpenAI's chunks when usage was asked for: `"usage":null` on all but the last
CN = b'data: {"choices":[{"delta":{"content":"c"},"finish_reason":null}],"usage":null}\n\n'
CN2 = b'data: {"choices":[{"delta":{"content":"d"},"finish_reason":null}],"usage" : null}\n\n'
C3 = b'data: {"choices":[{"delta":{"content":"say [DONE]\\n\\n"},"finish_reason":null}]}\n\n'
DONE_EV = b"data: [DONE]\n\n"


def test_feed_returns_whole_events_and_keeps_the_tail() -> None:
    parser = SSEParser()
    assert parser.feed(C1[:10]) == b""
    assert parser.feed(C1[10:] + C2[:5]) == C1
    assert parser.feed(C2[5:-1]) == b""  # one newline of the blank line is not an end
    assert parser.feed(C2[-1:]) == C2
    assert parser.feed(b"data: x\r\n\r\ndata: y\r") == b"data: x\n\n"
    assert parser.feed(b"\n\r\n") == b"data: y\n\n"


def test_plain_run_covers_ordinary_events_and_stops_before_notable_ones() -> None:
    region = C1 + C2 + FIN + USAGE + DONE_EV
    # an escaped "usage" inside content is not a key: the run goes on through C2 and FIN
    assert plain_run(region, 0) == len(C1 + C2 + FIN)
    assert plain_run(region, len(C1)) == len(C1 + C2 + FIN)
    assert plain_run(region, len(C1 + C2 + FIN)) == len(C1 + C2 + FIN)  # usage: none
    assert plain_run(C1 + C2 + DONE_EV, 0) == len(C1 + C2)
    # a null usage is no usage report
    assert plain_run(CN + CN2 + C1 + USAGE, 0) == len(CN + CN2 + C1)
    assert plain_run(CN + USAGE + CN, 0) == len(CN)
    # `[DONE]` is only the end as an event of its own, not as words in the content
    assert plain_run(C3 + C1 + DONE_EV, 0) == len(C3 + C1)
    assert plain_run(C1 + C2, 0) == len(C1 + C2)
    assert plain_run(DONE_EV, 0) == 0
    assert plain_run(b"", 0) == 0


ODD = (
    b": keep-alive\n\n",  # a comment
    b"event: message\n" + C1,  # a named event
    b"data: {\n" + b'data: "a": 1}\n\n',  # multi-line data
    b'data:{"a":1}\n\n',  # no space after the colon
    b"data:[DONE]\n\n",  # the end, spelled without the space
    b"\n\n",  # an empty event
    b"id: 7\n" + C1,  # a field the relay drops
)


def test_plain_run_stops_before_anything_but_one_line_data_events() -> None:
    for odd in ODD:
        assert plain_run(C1 + odd + C2, 0) == len(C1), odd
        assert plain_run(C1 + C2 + odd, 0) == len(C1 + C2), odd
        assert plain_run(odd + C1, 0) == 0, odd
    assert plain_run(b'data: {"error":{"message":"x"}}\n\n', 0) == 0
    assert plain_run(C1 + b'data: {"error":{"message":"x"}}\n\n', 0) == len(C1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([C1, C2, C3, CN, FIN, USAGE, DONE_EV, *ODD]), max_size=8))
def test_plain_run_never_swallows_a_notable_or_odd_event(parts: list[bytes]) -> None:
    region = b"".join(parts)
    end = plain_run(region, 0)
    covered = region[:end]
    # what the run covers is exactly a prefix of whole ordinary events
    n = 0
    taken = b""
    while taken != covered:
        assert parts[n] in (C1, C2, C3, CN, FIN), parts
        taken += parts[n]
        n += 1
    # and it stops only where the next event is notable or odd (or at the end)
    assert n == len(parts) or parts[n] not in (C1, C2, C3, CN, FIN)


def test_finishes_finds_a_finish_reason_in_any_event_of_a_run() -> None:
    from proxy.path.chunks import finishes as _finishes

    spaced = b'data: {"choices":[{"delta":{},"finish_reason" : "length"}]}\n\n'
    for region, want in (
        (C1 + C2 + FIN, True),  # the usual place: the last event
        (C1 + FIN + C2, True),  # one choice finished, another still talking
        (FIN + C1, True),
        (C1 + C2, False),  # `"finish_reason":null` is no finish
        (C1 + spaced, True),
        (C2, False),
    ):
        assert _finishes(region, 0, len(region)) is want, region
    # only the run counts, not what lies outside it
    region = FIN + C1 + C2
    assert _finishes(region, len(FIN), len(region)) is False


def test_next_block_skips_empty_events_and_stray_newlines() -> None:
    from proxy.path.sse import next_block

    region = b"\n\ndata: a\n\n\n\ndata: b\n\n\n"
    assert next_block(region, 0) == (b"data: a", 11)
    assert next_block(region, 11) == (b"data: b", len(region) - 1)
    assert next_block(region, len(region) - 1) is None  # one stray newline: nothing
    assert next_block(b"", 0) is None
