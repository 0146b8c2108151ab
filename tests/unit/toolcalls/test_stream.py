"""Streams (BEHAVIOUR.md 4.3, 4.4): every corpus case streamed gives the whole-response result."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from proxy.observe.events import ARGUMENTS, HOLDBACK_RELEASED, TOOL_RECOVERED
from proxy.toolcalls.scan import (
    END_TOKENS,
    THINK_CLOSE,
    THINK_CLOSE_AT,
    THINK_ENDERS,
    THINK_ENDS_AT,
    THINK_OPEN,
    THINK_OPEN_AT,
    first_of,
)
from proxy.toolcalls.spans import NAME_MAX
from proxy.toolcalls.stream import StreamToolProcessor, _Choice, _first
from tests.steps import growth
from tests.toolcall_case import TOOLS
from tests.toolcall_corpus import CASES, END_OF_TURN, Case
from tests.unit.toolcalls.test_recovery import whole_result

TEMPLATE = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "system_fingerprint": "fp",
}


def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {**TEMPLATE, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def run(
    pieces: list[str],
    tools: list[dict[str, Any]] | None = TOOLS,
    extra: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    **kw: Any,
) -> tuple[list[dict[str, Any]], StreamToolProcessor]:
    proc = StreamToolProcessor(tools, **kw)
    upstream = [chunk({"role": "assistant", "content": ""})]
    upstream += [chunk({"content": p}) for p in pieces] + (extra or [])
    upstream.append(chunk({}, finish))
    out: list[dict[str, Any]] = []
    for c in upstream:
        out.extend(proc.feed(c))
    out.extend(proc.finish())
    return out, proc


def client_view(out: list[dict[str, Any]]) -> tuple[str | None, list[tuple[str, str, str]], str]:
    """What the openai SDK's stream helper assembles from the chunks."""
    state = ChatCompletionStreamState()
    for c in out:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    choice = state.current_completion_snapshot.choices[0]
    calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    # The upstream role chunk carries content "", so an empty stream reply reads "" not None.
    return choice.message.content or None, calls, choice.finish_reason


def expected(case: Case) -> tuple[str | None, list[tuple[str, str, str]], str]:
    content, calls, finish = whole_result(case)
    return content, calls, finish


def split_random(text: str, seed: int) -> list[str]:
    rnd = random.Random(seed)
    pieces, i = [], 0
    while i < len(text):
        k = rnd.randint(1, 12)
        pieces.append(text[i : i + k])
        i += k
    return pieces


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_one_char_per_chunk(case: Case) -> None:
    out, _ = run(list(case.text), list(case.tools))
    assert client_view(out) == expected(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_whole_text_in_one_chunk(case: Case) -> None:
    out, _ = run([case.text], list(case.tools))
    assert client_view(out) == expected(case)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CASES), st.integers(0, 10**6))
def test_random_chunking(case: Case, seed: int) -> None:
    out, _ = run(split_random(case.text, seed), list(case.tools))
    assert client_view(out) == expected(case)


_MARKED = [
    c for c in CASES if c.format and c.format not in ("bare_json", "fenced_json", "pythonic")
]


@pytest.mark.parametrize("case", _MARKED[::3], ids=lambda c: c.name)
def test_marker_split_at_every_position(case: Case) -> None:
    want = expected(case)
    for cut in range(1, len(case.text)):
        out, _ = run([case.text[:cut], case.text[cut:]], list(case.tools))
        assert client_view(out) == want, cut


def test_plain_text_passes_through_same_objects_and_hold_is_bounded() -> None:
    text = (
        "Paris is sunny, 21 degrees. Use a hat; the UV index is 7 (high). "
        "Functions like f(x) and tags like <b> or [note] are fine.\nBye!"
    )
    proc = StreamToolProcessor(TOOLS)
    longest = proc.longest_marker
    sent = []
    for ch in text:
        c = chunk({"content": ch})
        out = proc.feed(c)
        assert proc.held() < longest
        sent.extend(out)
    sent.extend(proc.feed(chunk({}, "stop")))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in sent) == text
    assert proc.events == []


def test_unchanged_chunk_is_same_object() -> None:
    proc = StreamToolProcessor(TOOLS)
    c = chunk({"content": "Hello"})
    assert proc.feed(c)[0] is c
    usage = {**TEMPLATE, "choices": [], "usage": {"prompt_tokens": 1}}
    assert proc.feed(usage) == [usage] and proc.feed(usage)[0] is usage


def test_recovered_stream_events_and_template() -> None:
    text = 'Sure.\n<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>'
    out, proc = run(list(text))
    assert all(c["id"] == "chatcmpl-1" and c["system_fingerprint"] == "fp" for c in out)
    assert [e.kind for e in proc.events] == [TOOL_RECOVERED]
    assert proc.events[0].labels == {"format": "hermes"}


def test_held_text_past_limit_is_released() -> None:
    text = "<tool_call>" + "x" * 300
    out, proc = run(list(text), holdback_limit=100)
    assert client_view(out) == (text, [], "stop")
    assert [e.kind for e in proc.events] == [HOLDBACK_RELEASED]


def test_recover_off_passes_text() -> None:
    text = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    out, _ = run(list(text), recover=False)
    assert client_view(out) == (text, [], "stop")


def test_n2_choices_independent() -> None:
    proc = StreamToolProcessor(TOOLS)
    call = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    out: list[dict[str, Any]] = []
    plain = "plain text here" + "." * (len(call) - 15)
    for a, b in zip(call, plain, strict=True):
        out += proc.feed(
            {
                **TEMPLATE,
                "choices": [
                    {"index": 0, "delta": {"content": a}, "finish_reason": None},
                    {"index": 1, "delta": {"content": b}, "finish_reason": None},
                ],
            }
        )
    out += proc.feed(chunk({}, "stop", 0)) + proc.feed(chunk({}, "stop", 1)) + proc.finish()
    by_index: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    for c in out:
        for ch in c["choices"]:
            by_index[ch["index"]].append(ch)
    assert "".join(ch["delta"].get("content") or "" for ch in by_index[1]) == plain
    assert [ch["finish_reason"] for ch in by_index[0] if ch["finish_reason"]] == ["tool_calls"]


# -- 4.4 reassembly -------------------------------------------------------------------------


def _calls(
    fragments: list[dict[str, Any]], finish: str = "tool_calls"
) -> tuple[list[tuple[str, str, str]], StreamToolProcessor]:
    out, proc = run([], extra=[chunk({"tool_calls": [f]}) for f in fragments], finish=finish)
    return client_view(out)[1], proc


def test_reassembly_by_index() -> None:
    frags = [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "get_time"}},
        {"index": 1, "id": "b", "type": "function", "function": {"name": "search"}},
        {"index": 0, "function": {"arguments": '{"tz": '}},
        {"index": 1, "function": {"arguments": '{"query": "x"}'}},
        {"index": 0, "function": {"arguments": '"UTC"}'}},
    ]
    assert _calls(frags)[0] == [
        ("a", "get_time", '{"tz": "UTC"}'),
        ("b", "search", '{"query": "x"}'),
    ]


def test_reassembly_id_only_and_nameless_continuation() -> None:
    frags = [
        {"id": "a", "function": {"name": "get_time", "arguments": "{'tz'"}},
        {"function": {"arguments": ": 'UTC'}"}},
        {"id": "b", "function": {"name": "search", "arguments": "{}"}},
        {"id": "a", "function": {"arguments": ""}},
    ]
    calls, proc = _calls(frags)
    assert calls == [("a", "get_time", '{"tz":"UTC"}'), ("b", "search", "{}")]
    assert [e.labels for e in proc.events if e.kind == ARGUMENTS] == [{"outcome": "repaired"}]


def test_whole_calls_all_at_index_0_and_minted_unique_ids() -> None:
    frags = [
        {"index": 0, "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}},
        {"index": 0, "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}},
        {"index": 0, "id": "call_0", "function": {"name": "search", "arguments": "{}"}},
    ]
    calls, _ = _calls(frags)
    assert [(n, a) for _, n, a in calls] == [
        ("get_time", '{"tz": "UTC"}'),
        ("get_time", '{"tz": "CET"}'),
        ("search", "{}"),
    ]
    ids = [i for i, _, _ in calls]
    assert ids[:2] == ["call_0", "call_1"] and len(set(ids)) == 3


def test_different_id_same_index_is_new_call_and_empty_name_dropped() -> None:
    frags = [
        {"index": 0, "id": "x", "function": {"name": "get_time", "arguments": "{}"}},
        {"index": 0, "id": "y", "function": {"name": "", "arguments": "{}"}},
        {"index": 1, "id": "z", "function": {"name": "search"}},
    ]
    calls, _ = _calls(frags)
    assert calls == [("x", "get_time", "{}"), ("z", "search", "{}")]


def test_truncated_native_call_flagged() -> None:
    frags = [{"index": 0, "id": "a", "function": {"name": "write_file", "arguments": '{"a": "lo'}}]
    calls, proc = _calls(frags, finish="length")
    assert calls == [("a", "write_file", '{"a": "lo')]
    assert [e.labels for e in proc.events] == [{"outcome": "truncated"}]


def test_calls_get_a_finish_reason_when_the_upstream_gave_none() -> None:
    # The upstream ends with [DONE] but no finish chunk: the client still gets "tool_calls".
    proc = StreamToolProcessor(TOOLS)
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    out: list[dict[str, Any]] = []
    upstream = [chunk({"role": "assistant", "content": ""})]
    for c in upstream + [chunk({"content": ch}) for ch in text]:
        out.extend(proc.feed(c))
    out.extend(proc.finish())
    content, calls, finish = client_view(out)
    assert content in (None, "")
    assert [name for _, name, _ in calls] == ["get_weather"]
    assert finish == "tool_calls"


def _answers(size: int) -> list[str]:
    """JSON replies that are answers, not calls, of about `size` characters."""
    n = max(size // 50, 1)
    return [
        json.dumps([{"id": i, "title": f"record {i}", "tags": ["a"]} for i in range(n)]),
        json.dumps({"name": "report", "sections": [{"t": "x" * 40}] * n}),
        json.dumps({"title": "x", "body": "y" * size}),
    ]


def _in_chunks(text: str, tools: list[dict[str, Any]] = TOOLS) -> tuple[list[dict[str, Any]], int]:
    """Stream `text` in 8-character chunks: every chunk sent, and the offset of the chunk at
    which the first content reached the client (-1: none before the end)."""
    proc = StreamToolProcessor(tools)
    released_at = -1
    everything: list[dict[str, Any]] = []
    for k in range(0, len(text), 8):
        for out in proc.feed(chunk({"content": text[k : k + 8]})):
            everything.append(out)
            if released_at < 0 and out.get("choices") and out["choices"][0]["delta"].get("content"):
                released_at = k
    everything += proc.feed(chunk({}, "stop")) + proc.finish()
    return everything, released_at


def test_json_answers_are_released_early() -> None:
    # A JSON reply that is an answer, not a call, must not be held to the end.
    for text in _answers(200_000):
        everything, released_at = _in_chunks(text)
        assert 0 <= released_at < 200, released_at
        assert client_view(everything) == (text, [], "stop")


@pytest.mark.parametrize("shape", range(3))
def test_json_answers_are_judged_in_linear_time(shape: int) -> None:
    # Nor judged again from the start on every chunk (quadratic: a 228 KB array once took
    # 44 s). Counted, not timed: a 2 s limit is a benchmark's business (issue 13, item 16).
    def make(size: int) -> Callable[[], object]:
        text = _answers(size)[shape]
        return lambda: _in_chunks(text)

    assert growth(make, 4_000) < 12  # 8 for linear work; quadratic would be about 64


def test_a_long_held_call_is_judged_in_linear_time() -> None:
    # A bare call is held until it can be judged; re-judging the whole held text on every
    # chunk would be quadratic in the call's length.
    def make(size: int) -> Callable[[], object]:
        content = "def f(x):\n    return {'a': [x]}  # } ] `\n" * (size // 40)
        text = json.dumps({"name": "write_file", "arguments": {"path": "a", "content": content}})
        return lambda: _in_chunks(text)

    assert growth(make, 4_000) < 12
    content = "x = {'a': [1]}\n" * 2000
    text = json.dumps({"name": "write_file", "arguments": {"path": "a", "content": content}})
    everything, released_at = _in_chunks(text)
    assert released_at == -1  # held to the end: it is a call
    assert client_view(everything)[1][0][1:] == (
        "write_file",
        json.dumps({"path": "a", "content": content}, separators=(",", ":")),
    )


# -- end-of-turn tokens and prose before a fenced call (issue 13, item 24) -----------------------

_ITEM_24 = [c for c in END_OF_TURN if c.format]


def _wanted(case: Case) -> tuple[str | None, list[tuple[str, str, str]], str]:
    """What the client must see: the corpus's expectation, not merely the whole-reply result."""
    calls = [
        (f"call_recovered_{k}", name, json.dumps(args, separators=(",", ":"), ensure_ascii=False))
        for k, (name, args) in enumerate(case.calls)
    ]
    return case.content, calls, "tool_calls"


def _chunkings(text: str) -> list[list[str]]:
    fixed = [list(text), [text], [text[i : i + 8] for i in range(0, len(text), 8)]]
    return fixed + [split_random(text, seed) for seed in range(5)]


@pytest.mark.parametrize("case", _ITEM_24, ids=lambda c: c.name)
def test_end_tokens_and_fenced_calls_recovered_at_every_chunking(case: Case) -> None:
    want = _wanted(case)
    for pieces in _chunkings(case.text):
        out, _ = run(pieces, list(case.tools))
        assert client_view(out) == want, pieces
    for cut in range(1, len(case.text)):
        out, _ = run([case.text[:cut], case.text[cut:]], list(case.tools))
        assert client_view(out) == want, cut


def _released_before(text: str, until: str) -> str:
    """The content sent to the client, one character a chunk, before `until` has arrived."""
    proc = StreamToolProcessor(TOOLS)
    sent = ""
    for k, ch in enumerate(text):
        if text[: k + 1].endswith(until):
            return sent
        for c in proc.feed(chunk({"content": ch})):
            sent += c["choices"][0]["delta"].get("content") or "" if c.get("choices") else ""
    return sent


def test_prose_before_a_fenced_call_is_not_delayed() -> None:
    text = "I'll check the weather.\n```json\n" + '{"name": "get_weather", "parameters": {}}\n```'
    assert _released_before(text, "```json") == "I'll check the weather."


def test_a_fenced_block_that_is_not_a_call_is_released_before_it_closes() -> None:
    text = "Run this:\n```bash\nls -la\n```\nThen tell me."
    assert _released_before(text, "la\n```").startswith("Run this:\n```bash\nls")
    answer = '```json\n{"city": "Paris", "days": 3, "notes": "x"}\n```'
    assert _released_before(answer, "\n```").startswith('```json\n{"city"')


@pytest.mark.parametrize(
    "unit",
    [
        "Some prose with ``` in it and more words. ",
        'Text.\n```json\n{"a": 1}\n```\n',
        "Text.\n```\n",
        "``",
    ],
    ids=["inline-fences", "json-blocks", "open-fences", "backticks"],
)
def test_fences_in_a_long_reply_are_judged_in_linear_time(unit: str) -> None:
    def make(size: int) -> Callable[[], object]:
        text = unit * (size // len(unit) + 1)
        return lambda: _in_chunks(text)

    assert growth(make, 4_000) < 12


def test_a_long_call_in_a_fence_after_prose_is_judged_in_linear_time() -> None:
    def make(size: int) -> Callable[[], object]:
        content = "def f(x):\n    return {'a': [x]}  # } ] `\n" * (size // 40)
        call = json.dumps({"name": "write_file", "arguments": {"path": "a", "content": content}})
        text = f"I'll write it.\n```json\n{call}\n```"
        return lambda: _in_chunks(text)

    assert growth(make, 4_000) < 12


@pytest.mark.parametrize("tag", ["<response>", "<xml>", "<json>", "<tool>"])
def test_markup_tags_in_prose_are_relayed_as_they_come(tag: str) -> None:
    """Hermes 2 Pro's wrappers are markers only with the JSON they open: the same tags in
    markup are prose, relayed as they come instead of held to the end (formats/tagged.py)."""
    text = f"Wrap it as {tag}ok{tag.replace('<', '</')} and then say more words here."
    proc = StreamToolProcessor(TOOLS)
    sent = []
    for piece in [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": c}) for c in text),
    ]:
        for c in proc.feed(piece):
            sent.append(c["choices"][0]["delta"].get("content") or "")
    # Before the upstream finishes, all but a possible marker's beginning has gone out.
    assert "".join(sent).startswith(f"Wrap it as {tag}ok{tag.replace('<', '</')} and then say")


def _opened(tools: list[dict[str, Any]] | None = TOOLS) -> StreamToolProcessor:
    """A processor past a reply's opening, nothing held: where `pass_texts` judges texts."""
    processor = StreamToolProcessor(tools)
    assert processor.feed(chunk({"content": "Well"})) != []
    assert processor.pass_texts([" then"]) == 1
    return processor


_PIECES = [*"ab t<|[]`{\n_=:>.", "to=", "<tool_call>", "\u3000"]
_PROSE = st.lists(
    st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), min_size=1, max_size=6
)


@settings(max_examples=300, deadline=None)
@given(first=_PROSE, second=_PROSE)
def test_texts_remembered_clean_are_judged_as_the_scans_judge_them(
    first: list[str], second: list[str]
) -> None:
    # A table's memo of clean texts is shared by every stream declaring the tools: whatever an
    # earlier stream left in it, a stream passes the texts the two scans alone would pass.
    opened = _opened()
    opened._marks.clean.clear()
    scanned = opened._clean_run(second)
    _opened().pass_texts(first)  # another stream, filling the shared memo
    warm = _opened()
    assert warm._marks is opened._marks
    assert warm.pass_texts(second) == scanned
    assert "".join(warm._choices[0].released[2:]) == "".join(second[:scanned])


def test_a_text_with_a_marker_or_an_open_end_is_never_remembered_clean() -> None:
    processor = _opened()
    texts = [" fine", " <tool_call>", " end "]
    assert processor.pass_texts(texts) == 1
    clean = processor._marks.clean
    assert " fine" in clean and " <tool_call>" not in clean and " end " not in clean
    assert _opened().pass_texts([" end "]) == 0  # whitespace at its end: held with what follows


_TRIGGER_PIECES = [*StreamToolProcessor(TOOLS)._triggers, *"ab <[{|\nt_=:", "to=functions."]


@settings(max_examples=500, deadline=None)
@given(
    held=st.lists(st.sampled_from(_TRIGGER_PIECES), max_size=10).map("".join),
    pos=st.integers(0, 40),
)
def test_the_first_trigger_is_found_in_one_scan_as_a_find_per_trigger_finds_it(
    held: str, pos: int
) -> None:
    # The earliest trigger, and of several beginning there the first in the table's order (a
    # tie with a think tag or a fence at the same place is broken by the tag).
    processor = StreamToolProcessor(TOOLS)
    expected = _first(held, processor._triggers, pos)
    assert processor._first_trigger(held, pos) == expected


_MARK_PIECES = [
    *_TRIGGER_PIECES,
    *THINK_OPEN,
    *THINK_CLOSE,
    *END_TOKENS,
    "</tool_call>",
    "```",
    "\n{",
]


@settings(max_examples=500, deadline=None)
@given(
    held=st.lists(st.sampled_from(_MARK_PIECES), max_size=8).map("".join),
    pos=st.integers(0, 30),
    after=st.integers(0, 6),
    fences_done=st.booleans(),
)
def test_a_mark_where_the_search_begins_is_the_one_every_search_finds(
    held: str, pos: int, after: int, fences_done: bool
) -> None:
    # `_next_mark` reads only what begins at `pos` when a trigger does: what searching for
    # every kind of mark finds.
    processor = StreamToolProcessor(TOOLS)
    state = _Choice(0)
    state.fences_done = fences_done
    lines = pos + after
    expected = processor._every_mark(state, held, pos, lines, processor._first_trigger(held, pos))
    first = processor._marks.anywhere.search(held, pos)  # as `_release` asks it first
    if first is None:
        assert expected is None  # every mark is one `anywhere` matches
    else:
        assert processor._next_mark(state, held, pos, lines, first) == expected


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(st.sampled_from(_MARK_PIECES), max_size=6).map("".join), cut=st.integers(0, 30)
)
def test_what_may_begin_a_marker_at_a_texts_end_is_its_longest_such_tail(
    text: str, cut: int
) -> None:
    # `_overlap`: the longest end of the text (under the longest marker) that is a marker's
    # beginning, whether the text is one whole or ends inside a marker.
    processor = StreamToolProcessor(TOOLS)
    marks = processor._marks
    text = text[: len(text) - cut]
    most = min(len(text), marks.longest - 1)
    expected = next((k for k in range(most, 0, -1) if text[-k:] in marks.prefixes), 0)
    assert processor._overlap(text) == expected


_THINK_KINDS = [
    (THINK_OPEN_AT, THINK_OPEN),
    (THINK_CLOSE_AT, THINK_CLOSE),
    (THINK_ENDS_AT, (*THINK_CLOSE, *THINK_ENDERS)),
]
_TAG_PIECES = [*THINK_OPEN, *THINK_CLOSE, *THINK_ENDERS, *"<|/think>[]_ ab", "<|tool_call"]


@settings(max_examples=500, deadline=None)
@given(
    held=st.lists(st.sampled_from(_TAG_PIECES), max_size=10).map("".join),
    pos=st.integers(0, 40),
    kind=st.sampled_from(_THINK_KINDS),
)
def test_a_think_tag_is_found_in_one_scan_as_a_find_per_tag_finds_it(
    held: str, pos: int, kind: tuple[Any, tuple[str, ...]]
) -> None:
    # The earliest tag of the kind, and of several beginning there the first in its order.
    pattern, tags = kind
    assert first_of(held, pos, pattern) == _first(held, tags, pos)


@pytest.mark.parametrize("length", [NAME_MAX + 1, 5_000])
def test_a_tool_name_no_api_takes_is_recovered_from_markers_only(length: int) -> None:
    # Markers that begin with a name this long would build tables Python's `re` cannot parse
    # (RecursionError from about 500 characters): such a name gets none of its own.
    name = "t" * length
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]
    call = f'<tool_call>{{"name": "{name}", "arguments": {{"q": 1}}}}</tool_call>'
    out, _ = run(["Sure. ", call[:40], call[40:]], tools)
    assert client_view(out) == ("Sure.", [(ANY, name, '{"q":1}')], "tool_calls")
    prose = f"I will call {name} next."
    out, _ = run([prose[:100], prose[100:]], tools)
    assert client_view(out) == (prose, [], "stop")
