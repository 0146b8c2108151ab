"""A tools stream relays prose unread and holds a call's text unread (`path.text_events`,
`StreamToolProcessor.pass_texts` and `hold_texts`): the client must get exactly the bytes it gets
when every event is parsed and fed, for any text, any layout of the chunk JSON, any cut of the
stream and any hold-back limit."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.path import reask, text_events
from proxy.path.attempts import Pipeline
from proxy.path.chunks import adds_nothing
from proxy.path.holding import HoldingStream
from proxy.path.job import Job
from proxy.toolcalls.stream import StreamToolProcessor
from tests.unit.path.fakes import (
    FakeLayer,
    FakeUpstream,
    FeedsEveryEvent,
    Reply,
    Wire,
    client_request,
    make_job,
)
from tests.unit.path.test_attempts import run

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


class Around:
    """The processor, every call handed on to it (around it, not a subclass: the compiled build
    allows none)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.inner = StreamToolProcessor(*args, **kwargs)

    @property
    def events(self) -> list[Any]:
        return self.inner.events

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        return self.inner.feed(chunk)

    def pass_texts(self, texts: list[str]) -> int:
        return self.inner.pass_texts(texts)

    def hold_texts(self, texts: list[str]) -> int:
        return self.inner.hold_texts(texts)

    def refuses_texts(self) -> bool:
        return self.inner.refuses_texts()

    def add_arguments(self, call: int, texts: list[str]) -> int:
        return self.inner.add_arguments(call, texts)

    def pass_inert(self) -> bool:
        return self.inner.pass_inert()

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        return self.inner.pass_end(chunk)

    def finish(self) -> list[dict[str, Any]]:
        return self.inner.finish()


class Walked(FeedsEveryEvent, Around):
    """The same processor, asked never to take text in unread: every event is parsed and fed."""


class Counted(Around):
    """The processor, keeping every chunk it is fed."""

    def __init__(self, tools: list[dict[str, Any]], fed: list[dict[str, Any]]) -> None:
        super().__init__(tools)
        self.fed = fed

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self.fed.append(chunk)
        return super().feed(chunk)


def event(delta: dict[str, Any], layout: int, finish: str | None = None) -> bytes:
    """One chunk event, in one of the layouts servers write."""
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
    if layout == 1:  # llama.cpp: finish_reason first, created and the model after
        body = {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], "id": "c"}
    elif layout == 2:  # as Go's encoding/json (Ollama) writes it: `<` and non-ASCII escaped
        return _sse(json.dumps(body, ensure_ascii=True).replace("<", "\\u003c"))
    elif layout == 3:  # spaces after separators, `"tool_calls": null` and `"usage": null`
        delta = {**delta, "tool_calls": None}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse(json.dumps({**body, "choices": [choice], "usage": None}))
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _sse(data: str) -> bytes:
    return b"data: " + data.encode() + b"\n\n"


pieces = st.one_of(
    st.text(alphabet="acdt <>[]{}`\"\\|｜=.:\n\té😀", max_size=6),
    st.sampled_from(
        ["<tool_call>", "</tool_call>", "<think>", "</think>", "```", "```json\n", "to=functions.",
         "get_weather", "call:get_weather{", CALL, " the", "cat", "Hello", "\n\n", " "]
    ),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(st.tuples(pieces, st.integers(0, 3)), max_size=14),
    finish=st.sampled_from(["stop", "length", None]),
    cut=st.one_of(st.none(), st.integers(1, 120)),
    limit=st.sampled_from([256 * 1024, 24]),
    opening=st.tuples(st.sampled_from(["", None]), st.integers(0, 3)),
    later=st.one_of(st.none(), st.integers(0, 14)),
    end_layout=st.integers(0, 3),
)
async def test_passing_text_unread_sends_the_same_bytes(
    texts: list[tuple[str, int]],
    finish: str | None,
    cut: int | None,
    limit: int,
    opening: tuple[str | None, int],
    later: int | None,
    end_layout: int,
) -> None:
    # A role chunk opens the stream, in any layout; `later` puts another chunk that adds
    # nothing among the texts (where text may be held, it must be fed, not relayed as it came).
    items: list[Any] = [event({"role": "assistant", "content": opening[0]}, opening[1])]
    items += [event({"content": text}, layout) for text, layout in texts]
    if later is not None:
        items.insert(1 + min(later, len(texts)), event({"content": opening[0]}, opening[1]))
    if finish is not None:
        items.append(event({}, end_layout, finish))  # passed unfed or fed: as it came
    items.append("[DONE]")
    sent = []
    for processor in (StreamToolProcessor, Walked):
        layer = FakeLayer(processor=lambda p=processor: p(TOOLS, holdback_limit=limit))  # type: ignore[misc]
        _, wire, _ = await run(layer, FakeUpstream(Reply.events(*items, cut=cut)), stream=True)
        sent.append(wire.body)
    assert sent[0] == sent[1]


class Holding(FakeLayer):
    """A layer whose tools streams are held as with healing on (`HoldingStream`), around
    `inner`; the holder of the last stream is kept, to compare what it noted of the reply."""

    def __init__(self, inner: Any, opening_json: bool) -> None:
        super().__init__()
        self.inner, self.opening_json = inner, opening_json
        self.held: HoldingStream | None = None

    def stream_processor(self, job: Job) -> HoldingStream:
        held = HoldingStream(
            self.inner(),
            job,
            hold_all=False,
            limit=256 * 1024,
            forces=False,
            opening_json=self.opening_json,
        )
        self.held = held
        return held


@settings(max_examples=300, deadline=None)
@example(texts=[("  ", 0), ("{", 0)], cut=None, opening_json=True, roles=1, recover=False)
@given(
    texts=st.lists(st.tuples(pieces | st.sampled_from(["{", ' {"a": 1}', "  "]), st.integers(0, 3)),
                   max_size=10),
    cut=st.one_of(st.none(), st.integers(1, 120)),
    opening_json=st.booleans(),
    roles=st.integers(0, 2),
    recover=st.booleans(),
)  # fmt: skip
async def test_a_held_reply_opened_unfed_sends_and_notes_the_same(
    texts: list[tuple[str, int]], cut: int | None, opening_json: bool, roles: int, recover: bool
) -> None:
    # The reply's opening (its role chunks, its first text) shown to a holding processor
    # without the walk (`StreamRelay._open_reply`) must send what feeding every event sends,
    # and leave the holder knowing the same of the reply: its text, and whether it opened
    # with `{` (held whole then).
    items: list[Any] = [event({"role": "assistant", "content": ""}, k % 4) for k in range(roles)]
    items += [event({"content": text}, layout) for text, layout in texts]
    items += [event({}, 0, "stop"), "[DONE]"]
    seen = []
    for kind in (StreamToolProcessor, Walked):
        inner = lambda kind=kind: kind(TOOLS, recover=recover)  # noqa: E731
        layer = Holding(inner, opening_json)
        _, wire, _ = await run(layer, FakeUpstream(Reply.events(*items, cut=cut)), stream=True)
        held = layer.held
        assert held is not None
        seen.append((wire.body, held.hold_all, held.opening, "".join(held.texts)))
    assert seen[0] == seen[1]


class Settled(FakeLayer):
    """The agent layer's own holder and settling for a request declaring TOOLS."""

    def stream_processor(self, job: Job) -> Any:
        return reask.holder(job, StreamToolProcessor(TOOLS), 256 * 1024)

    def settle_stream(self, job: Job, unsent: list[bytes], tail: list[dict[str, Any]]) -> Any:
        return reask.settle_stream(job, unsent, tail)


# How llama.cpp ends a stream: its own field (`timings`) beside the choice, and here the spaces
# Python's json writes, which a chunk latchgate wrote again would lose.
SERVER_END = (
    b'data: {"choices": [{"finish_reason": "stop", "index": 0, "delta": {}}], "id": "c", '
    b'"timings": {"predicted_n": 3, "predicted_ms": 41.5}}\n\n'
)


async def settled_stream(*items: Any, tool_choice: str = "auto", heal_retries: int = 1) -> bytes:
    upstream = FakeUpstream(Reply.events(*items), Reply.events(*items), heal_retries=heal_retries)
    job = make_job(upstream, stream=True)
    job.body["tools"], job.body["tool_choice"] = TOOLS, tool_choice
    wire = Wire()
    await Pipeline(Settled()).run(client_request(wire), job)
    return wire.body


async def test_a_reply_in_words_ends_with_the_servers_own_end_event() -> None:
    # Nothing about a reply in words changes when it is settled, so its end goes out as the
    # server wrote it instead of being held and written again (`StreamRelay._passes_end`).
    items = [event({"role": "assistant"}, 1), event({"content": "Hi"}, 1), SERVER_END, "[DONE]"]
    for retries in (1, 0):  # held for healing, or only the events reported
        body = await settled_stream(*items, heal_retries=retries)
        assert body.endswith(SERVER_END + b"data: [DONE]\n\n")


async def test_an_end_that_settling_may_change_is_held_and_written_again() -> None:
    # A forced call answered in words is judged at the end (the reply is asked for again, and
    # the last answer flagged), and a reply opening with `{` may be a call written out: their
    # ends are fed and held as before, so they come out as latchgate writes a chunk.
    forced = [event({"role": "assistant"}, 1), event({"content": "Hi"}, 1), SERVER_END, "[DONE]"]
    braced = [event({"content": '{"a": 1}'}, 1), SERVER_END, "[DONE]"]
    for items, choice in ((forced, "required"), (braced, "auto")):
        body = await settled_stream(*items, tool_choice=choice)
        assert SERVER_END not in body
        assert b'"timings":{"predicted_n":3,"predicted_ms":41.5}' in body


def test_prose_between_markers_is_passed_unread() -> None:
    # The point of it all: after the first word, plain prose never reaches `feed`.
    proc = StreamToolProcessor(TOOLS)
    proc.feed({"choices": [{"index": 0, "delta": {"content": "Sure"}, "finish_reason": None}]})
    assert proc.pass_texts([" thing", ", here", " it is."]) == 3
    # From the first with a possible marker start at its end, trailing whitespace, or a marker,
    # they are fed instead.
    assert proc.pass_texts([" one", " <tool", "_call>"]) == 1
    assert proc.pass_texts([" two", "", " three", "ok ", " four"]) == 3
    assert proc.pass_texts(["a<think>b", " five"]) == 0
    assert proc.pass_texts(["fine", "x\x00y"]) == 0


def test_a_text_delta_shape_is_learnt_only_from_plain_text_deltas() -> None:
    def shape(raw: bytes) -> text_events.TextShape | None:
        data = raw[6:-2]
        return text_events.learn(data, orjson.loads(data))

    for layout in (0, 1, 3):
        assert shape(event({"content": "Hi"}, layout)) is not None
    assert shape(event({"role": "assistant", "content": "x"}, 1)) is not None
    # Anything else is parsed each time: a finish, a call fragment, a second choice, usage, a
    # text written otherwise than orjson writes it, or found twice in the event.
    assert shape(event({"content": "x"}, 0, "stop")) is None
    assert shape(event({"tool_calls": [{"index": 0, "id": "a"}], "content": "x"}, 0)) is None
    assert shape(b'data: {"choices":[{"index":0,"delta":{"content":"a"}},{"index":1}]}\n\n') is None
    assert shape(b'data: {"choices":[{"index":1,"delta":{"content":"a"}}]}\n\n') is None
    assert shape(b'data: {"choices":[{"delta":{"content":"a"}}],"usage":{"x":1}}\n\n') is None
    assert shape(b'data: {"choices":[{"delta":{"content":"\\u003c"}}]}\n\n') is None
    assert shape(b'data: {"id":"a","choices":[{"delta":{"content":"a"}}]}\n\n') is None


def test_no_shape_is_learnt_whose_joint_holds_its_cut_before_its_end() -> None:
    # `read` splits a run at the joint's last bytes and checks the pieces with one compare,
    # which tells them apart only if those bytes occur in a joint at its end alone. An event
    # whose other fields repeat the bytes before its text is parsed each time instead.
    data = b'{"choices":[{"index":0,"delta":{"content":"x"}}],"extra":{"delta":{"content":"y"}}}'
    assert text_events.learn(data, orjson.loads(data)) is None
    plain = b'{"choices":[{"index":0,"delta":{"content":"x"}}],"extra":{"delta":{"text":"y"}}}'
    assert text_events.learn(plain, orjson.loads(plain)) is not None


def test_events_of_a_shape_are_read_up_to_the_first_of_another() -> None:
    first = event({"content": "seen"}, 0)
    learnt = text_events.learn(first[6:-2], orjson.loads(first[6:-2]))
    assert learnt is not None
    texts = [" a", ' "quoted" \\ é', "<b>", ""]
    run = b"".join(event({"content": t}, 0) for t in texts)
    odd = [
        event({"content": "x"}, 1),  # another layout
        event({}, 0, "stop"),
        b": a comment\n\n",
        event({"content": "x"}, 0).replace(b'"x"', b'"\\ud800"'),  # a lone surrogate
        event({"content": "x"}, 0).replace(b'"x"', b'"a"b"'),  # a raw quote: not one string
        event({"content": "x"}, 0).replace(b'"x"', b'"\t"'),  # a raw control character
    ]
    for after in odd:
        region = run + after + event({"content": "later"}, 0)
        bodies, got = text_events.read(learnt, region, 0)
        assert got == texts and text_events.end(learnt, 0, bodies, len(got)) == len(run)
        assert text_events.read(learnt, region, len(run)) == ([], [])


async def test_a_tools_stream_feeds_only_what_is_not_plain_prose() -> None:
    fed: list[dict[str, Any]] = []
    words = ["Sure", " thing", ", here", " it is", " <tool", "_call>", CALL, "</tool_call>"]
    items: list[Any] = [event({"role": "assistant", "content": ""}, 0)]
    items += [event({"content": w}, 0) for w in words] + [event({}, 0, "stop"), "[DONE]"]
    layer = FakeLayer(processor=lambda: Counted(TOOLS, fed))
    _, wire, _ = await run(layer, FakeUpstream(Reply.events(*items)), stream=True)
    contents = [c["choices"][0]["delta"].get("content") for c in fed]
    # The marker and the finish: the role chunk before them is relayed unfed, the first word
    # shown to the processor unfed (the reply's start judged as `feed` judges it), the prose
    # after it passed on unread, the call after the marker held unread.
    assert contents == [" <tool", "_call>", None]
    sent = [orjson.loads(b[6:]) for b in wire.body.split(b"\n\n") if b[6:7] == b"{"]
    deltas = [c["choices"][0]["delta"] for c in sent]
    assert "".join(d.get("content") or "" for d in deltas) == "Sure thing, here it is"
    assert [d["tool_calls"][0]["function"]["name"] for d in deltas if "tool_calls" in d] == [
        "get_weather"
    ]


def fragment(index: int, arguments: str, start: bool, layout: int) -> bytes:
    """A native tool-call fragment: the first of a call carries its id and name."""
    frag: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if start:
        frag = {**frag, "id": f"call_{index}", "type": "function"}
        frag["function"] = {"name": "get_weather", "arguments": arguments}
    return event({"tool_calls": [frag]}, layout)


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.lists(st.text(alphabet='{}":, ab\\é', max_size=5), min_size=1, max_size=6),
        min_size=1,
        max_size=3,
    ),
    layouts=st.lists(st.integers(0, 3), min_size=24, max_size=24),
    prose=st.booleans(),
    cut=st.one_of(st.none(), st.integers(1, 150)),
)
async def test_arguments_taken_unread_send_the_same_bytes(
    calls: list[list[str]], layouts: list[int], prose: bool, cut: int | None
) -> None:
    items: list[Any] = [event({"role": "assistant", "content": None}, 0)]
    if prose:
        items.append(event({"content": "Checking."}, 0))
    n = 0
    for index, pieces in enumerate(calls):
        for k, piece in enumerate(pieces):
            items.append(fragment(index, piece, k == 0, layouts[n % len(layouts)]))
            n += 1
    items += [event({}, 0, "tool_calls"), "[DONE]"]
    sent = []
    for processor in (StreamToolProcessor, Walked):
        layer = FakeLayer(processor=lambda p=processor: p(TOOLS))  # type: ignore[misc]
        _, wire, _ = await run(layer, FakeUpstream(Reply.events(*items, cut=cut)), stream=True)
        sent.append(wire.body)
    assert sent[0] == sent[1]


async def test_argument_fragments_after_the_first_two_are_not_fed() -> None:
    fed: list[dict[str, Any]] = []
    pieces = ['{"ci', 'ty": ', '"Par', 'is"}']
    items: list[Any] = [event({"role": "assistant", "content": None}, 0)]
    items += [fragment(0, p, k == 0, 0) for k, p in enumerate(pieces)]
    items += [event({}, 0, "tool_calls"), "[DONE]"]
    layer = FakeLayer(processor=lambda: Counted(TOOLS, fed))
    _, wire, _ = await run(layer, FakeUpstream(Reply.events(*items)), stream=True)
    # The call's first fragment (its name), the second (its shape is learnt from it), then the
    # finish: the role chunk before them is relayed unfed, the other argument fragments are
    # appended unread.
    assert len(fed) == 3
    sent = [orjson.loads(b[6:]) for b in wire.body.split(b"\n\n") if b[6:7] == b"{"]
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in sent
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert calls == [[{"index": 0, "id": "call_0", "type": "function", "function": function}]]


def _read_one_by_one(
    shape: text_events.TextShape, region: bytes, pos: int, most: int
) -> tuple[list[int], list[str]]:
    """`text_events.read` as a loop of finds, event by event: where each event ends, and its
    text; what its one split must equal."""
    ends: list[int] = []
    bodies: list[bytes] = []
    while len(ends) < most and region.startswith(shape.head, pos):
        at = region.find(shape.tail, pos + len(shape.head))
        if at < 0:
            break
        bodies.append(region[pos + len(shape.head) : at])
        pos = at + len(shape.tail)
        ends.append(pos)
    texts = text_events._strings(bodies)
    return ends[: len(texts)], texts


_SEEN = event({"content": "seen"}, 0)
_SHAPE = text_events.learn(_SEEN[6:-2], orjson.loads(_SEEN[6:-2]))
_EVENTS = st.one_of(
    st.builds(lambda t: event({"content": t}, 0), pieces),
    st.builds(lambda t, layout: event({"content": t}, layout), pieces, st.integers(1, 3)),
    st.sampled_from(
        [
            event({}, 0, "stop"),
            event({"role": "assistant", "content": "x"}, 0),
            # The same head, another tail: the split's piece does not end with the joint.
            event({"content": "x", "refusal": None}, 0),
            event({"content": '{"content":"x'}, 0),
            b": a comment\n\n",
            event({"content": "x"}, 0).replace(b'"x"', b'"a\\"b"'),
            event({"content": "x"}, 0).replace(b'"x"', b'"a"b"'),
            event({"content": "x"}, 0).replace(b'"x"', b'"\\ud800"'),
            event({"content": "x"}, 0).replace(b'"x"', b'"a\\\\"'),
        ]
    ),
)


@given(st.lists(_EVENTS, max_size=12), st.integers(0, 4), st.integers(0, 70))
def test_reading_a_run_in_one_split_finds_what_event_by_event_finds(
    events: list[bytes], start: int, most: int
) -> None:
    assert _SHAPE is not None
    region = b"".join(events)
    pos = sum(map(len, events[:start]))
    bodies, texts = text_events.read(_SHAPE, region, pos, most)
    ends = [text_events.end(_SHAPE, pos, bodies, k) for k in range(1, len(texts) + 1)]
    assert (ends, texts) == _read_one_by_one(_SHAPE, region, pos, most)


def test_a_chunk_adds_nothing_when_it_carries_a_role_or_empty_values_alone() -> None:
    def chunk(delta: Any, **more: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": None, **more}]}

    assert adds_nothing(chunk({"role": "assistant", "content": None}))
    assert adds_nothing(chunk({"role": "assistant", "content": "", "tool_calls": None}))
    assert adds_nothing(chunk({}))
    assert not adds_nothing(chunk({"content": " "}))
    assert not adds_nothing(chunk({"reasoning_content": "hm"}))
    assert not adds_nothing(chunk({}, finish_reason="stop"))
    assert not adds_nothing(chunk({}, index=1))
    assert not adds_nothing(chunk(None))
    assert not adds_nothing({**chunk({}), "usage": {"prompt_tokens": 1}})
    two = chunk({})
    two["choices"] = two["choices"] * 2
    assert not adds_nothing(two)


def test_the_processor_lets_a_chunk_that_adds_nothing_by_only_while_it_holds_nothing() -> None:
    proc = StreamToolProcessor(TOOLS)
    assert proc.pass_inert()
    proc.feed({"choices": [{"index": 0, "delta": {"content": "Sure"}, "finish_reason": None}]})
    assert proc.pass_inert()
    # A possible marker is held: chunks made from it later copy the latest chunk's fields.
    proc.feed({"choices": [{"index": 0, "delta": {"content": " <tool"}, "finish_reason": None}]})
    assert not proc.pass_inert()
    thinking = StreamToolProcessor(TOOLS)
    delta = {"reasoning_content": "call it"}
    thinking.feed({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    assert not thinking.pass_inert()  # a call may be read from the reasoning at the end


def _one_at_a_time(bodies: list[bytes]) -> list[str]:
    """The bodies decoded each on its own, up to the first that is no JSON string's body."""
    out: list[str] = []
    for body in bodies:
        try:
            out.append(orjson.loads(b'"%s"' % body))
        except orjson.JSONDecodeError:
            break
    return out


_BODIES = st.one_of(
    # What a server writes: any text, its quotes and backslashes escaped.
    st.builds(lambda t: orjson.dumps(t)[1:-1], st.text(alphabet='ab "\\\n{}:', max_size=8)),
    # What a slice that is no string's body may hold: a raw quote, a lone backslash at the end.
    st.sampled_from([b'a"b', b"a\\", b'\\\\"', b'"', b"\\", b'\\"', b'x\\\\\\"y', b"\\q"]),
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_BODIES, max_size=8))
def test_bodies_decoded_together_are_what_each_decoded_alone_is(bodies: list[bytes]) -> None:
    """Read as one array (escaped quotes counted out) or body by body, the texts are the same:
    every body up to the first that is no string's."""
    assert text_events._strings(bodies) == _one_at_a_time(bodies)
