"""The attempt loop and the relays, driven by a fake layer and scripted upstream responses,
without sockets: what each kind of attempt returns, and what the client's wire receives."""

from __future__ import annotations

from collections import deque
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProxyError
from proxy.path.attempts import Pipeline
from proxy.path.job import Decision
from tests.unit.path.fakes import (
    FakeLayer,
    FakeUpstream,
    FeedsEveryEvent,
    Reply,
    Wire,
    client_request,
    make_job,
)


def chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    if content is not None:
        delta["content"] = content
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


ANSWER = [
    chunk(role="assistant", content=""),
    chunk("Hel"),
    chunk("lo"),
    chunk(finish="stop"),
    "[DONE]",
]
COMPLETION = {
    "id": "x",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def events(wire: Wire) -> list[Any]:
    out: list[Any] = []
    for block in wire.body.split(b"\n\n"):
        if block.startswith(b"data: "):
            data = block[6:]
            out.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return out


async def run(
    layer: FakeLayer, upstream: FakeUpstream, *, stream: bool, route: str = "chat"
) -> tuple[Any, Wire, Any]:
    wire = Wire()
    job = make_job(upstream, stream=stream, route=route)
    answer = await Pipeline(layer).run(client_request(wire), job)
    return answer, wire, job


# -- whole ----------------------------------------------------------------------------------


async def test_a_whole_answer_goes_out_as_it_came_with_its_usage_noted() -> None:
    layer = FakeLayer()
    answer, _, job = await run(layer, FakeUpstream(Reply.json(COMPLETION)), stream=False)
    assert answer.status == 200 and orjson.loads(answer.body) == COMPLETION
    assert job.usage == COMPLETION["usage"] and ("usage", COMPLETION["usage"]) in layer.asked


async def test_a_resend_rebuilds_and_a_retry_waits_then_the_answer_comes() -> None:
    refusal = {"error": {"message": "no"}}
    layer = FakeLayer(errors=deque([Decision("resend"), Decision("retry", wait=0.0)]))
    upstream = FakeUpstream(
        Reply.json(refusal, 400), Reply.json(refusal, 503), Reply.json(COMPLETION)
    )
    answer, _, job = await run(layer, upstream, stream=False)
    assert answer.status == 200
    assert [a for a in layer.asked if a[0] == "prepare"] == [
        ("prepare", 0),
        ("prepare", 1),
        ("prepare", 2),
    ]
    assert job.attempts == 3 and len(upstream.sent) == 3


async def test_a_returned_decision_is_the_client_s_error() -> None:
    layer = FakeLayer(errors=deque([Decision.give(401, {"error": {"message": "bad key"}})]))
    answer, _, job = await run(layer, FakeUpstream(Reply.json({"e": 1}, 401)), stream=False)
    assert answer.status == 401 and job.status == 401
    assert orjson.loads(answer.body)["error"]["message"] == "bad key"


async def test_an_unreachable_upstream_is_a_failure_for_the_layer() -> None:
    layer = FakeLayer()
    upstream = FakeUpstream(aiohttp.ClientConnectionError("refused"))
    answer, _, _ = await run(layer, upstream, stream=False)
    assert ("failure", "connect") in layer.asked
    assert answer.status == 502


@pytest.mark.parametrize("body", [b"<html>oops</html>", b'{"id": "x"}', b"[1]", b""])
async def test_a_200_that_is_not_an_answer_is_a_502_without_asking_the_layer(body: bytes) -> None:
    layer = FakeLayer()
    answer, _, _ = await run(layer, FakeUpstream(Reply([body], ctype="text/html")), stream=False)
    assert answer.status == 502
    assert orjson.loads(answer.body)["error"]["code"] == "upstream_bad_answer"
    assert not [a for a in layer.asked if a[0] in ("error", "failure")]


# -- chat streams ---------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [None, 1, 7, 64])
async def test_a_stream_reaches_the_client_whole_at_any_cut(cut: int | None) -> None:
    _, wire, job = await run(FakeLayer(), FakeUpstream(Reply.events(*ANSWER, cut=cut)), stream=True)
    assert job.status == 200 and wire.ended and job.relayed
    assert events(wire) == ANSWER


async def test_one_read_goes_out_in_one_write() -> None:
    _, wire, _ = await run(FakeLayer(), FakeUpstream(Reply.events(*ANSWER)), stream=True)
    assert len(wire.writes) == 1  # events, [DONE] and the end of the body together


async def test_an_error_event_before_content_is_judged_like_an_error_status() -> None:
    error = {"error": {"message": "the request exceeds the available context size", "code": 400}}
    layer = FakeLayer()
    answer, wire, _ = await run(layer, FakeUpstream(Reply.events(error)), stream=True)
    assert ("error", (400, orjson.dumps(error))) in layer.asked
    assert answer.status == 400 and wire.headers is None  # a JSON answer, no stream opened


async def test_an_error_event_after_content_ends_the_stream_and_nothing_is_resent() -> None:
    error = {"error": {"message": "boom", "code": 500}}
    layer = FakeLayer(errors=deque([Decision("resend")]))
    upstream = FakeUpstream(Reply.events(chunk("Hel"), error))
    _, wire, job = await run(layer, upstream, stream=True)
    assert events(wire) == [chunk("Hel"), error]
    assert job.status == 500 and len(upstream.sent) == 1
    assert not [a for a in layer.asked if a[0] == "error"]  # after content: not judged


async def test_a_stream_that_stops_short_after_content_ends_with_an_error_event() -> None:
    _, wire, job = await run(FakeLayer(), FakeUpstream(Reply.events(chunk("Hel"))), stream=True)
    last = events(wire)[-1]
    assert last["error"]["code"] == "upstream_incomplete" and job.status == 502


async def test_a_stream_cut_before_content_is_retried() -> None:
    layer = FakeLayer(failures=deque([Decision("retry")]))
    broken = aiohttp.ClientPayloadError("cut")
    upstream = FakeUpstream(
        Reply.events(chunk(role="assistant"), then=broken), Reply.events(*ANSWER)
    )
    _, wire, job = await run(layer, upstream, stream=True)
    assert ("failure", "connect") in layer.asked and job.attempts == 2
    # The role chunk of the failed attempt did open the stream; the retry wrote on to it.
    assert events(wire)[-4:] == ANSWER[1:]


async def test_a_whole_answer_to_a_stream_request_is_streamed() -> None:
    _, wire, _ = await run(FakeLayer(), FakeUpstream(Reply.json(COMPLETION)), stream=True)
    got = events(wire)
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hi"}
    assert got[-1] == "[DONE]"


class Upper(FeedsEveryEvent):
    """A stream processor that changes every content delta."""

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        out = orjson.loads(orjson.dumps(chunk))
        for choice in out.get("choices") or []:
            if isinstance(choice.get("delta", {}).get("content"), str):
                choice["delta"]["content"] = choice["delta"]["content"].upper()
        return [out]

    def finish(self) -> list[dict[str, Any]]:
        return []


async def test_a_stream_processor_sees_every_event() -> None:
    layer = FakeLayer(processor=Upper)
    _, wire, _ = await run(layer, FakeUpstream(Reply.events(*ANSWER, cut=5)), stream=True)
    contents = [e["choices"][0]["delta"].get("content") for e in events(wire)[:-1]]
    assert contents == ["", "HEL", "LO", None]


class Same(FeedsEveryEvent):
    """A stream processor that changes nothing: forces the per-event walk."""

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        return [chunk]

    def finish(self) -> list[dict[str, Any]]:
        return []


stream_items = st.lists(
    st.one_of(
        st.text(max_size=6).map(lambda t: chunk(t)),
        st.just(chunk(finish="stop")),
        st.just(b": a comment\n\n"),
        st.just(b'event: ping\ndata: {"x": 1}\n\n'),
        st.just(b"data: not json\n\n"),
        st.just({"choices": [], "usage": {"prompt_tokens": 1}}),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(items=stream_items, cut=st.integers(1, 80))
async def test_skimming_and_walking_send_the_same_bytes(items: list[Any], cut: int) -> None:
    # The skim relays runs of ordinary events unread; the walk reads each. For any stream cut
    # anywhere, the client must get the same bytes either way.
    whole = [chunk(role="assistant", content="x"), *items, chunk(finish="stop"), "[DONE]"]
    _, skimmed, _ = await run(FakeLayer(), FakeUpstream(Reply.events(*whole, cut=cut)), stream=True)
    _, walked, _ = await run(
        FakeLayer(processor=Same), FakeUpstream(Reply.events(*whole, cut=cut)), stream=True
    )
    assert skimmed.body == walked.body


# -- plain streams --------------------------------------------------------------------------


def text_event(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


async def test_a_plain_stream_is_relayed_as_it_came() -> None:
    reply = Reply.events(text_event("Hi"), text_event("", "stop"), "[DONE]", cut=3)
    _, wire, job = await run(FakeLayer(), FakeUpstream(reply), stream=True, route="completions")
    assert events(wire) == [text_event("Hi"), text_event("", "stop"), "[DONE]"]
    assert job.status == 200


async def test_a_plain_stream_that_is_one_event_without_its_blank_line_is_relayed() -> None:
    # Found by bench/compare_trees.py: the stream's only event lacked its blank line, nothing
    # had been written when it ended, and the relay asserted a client stream (a 500).
    for body in (b"data: [DONE]", b'data: {"choices":[{"text":"Hi","finish_reason":"stop"}]}'):
        reply = Reply([body])
        _, wire, job = await run(FakeLayer(), FakeUpstream(reply), stream=True, route="completions")
        assert job.status == 200 and wire.body == body + b"\n\n"


async def test_a_plain_stream_cut_short_ends_with_an_error_event() -> None:
    reply = Reply.events(text_event("Hi"))
    _, wire, job = await run(FakeLayer(), FakeUpstream(reply), stream=True, route="completions")
    assert events(wire)[-1]["error"]["code"] == "upstream_incomplete" and job.status == 502


# -- refit: the upstream said the request overflows ------------------------------------------


class RefittingLayer(FakeLayer):
    """A layer whose pre-flight is counted, and refuses from its `refuse_at`-th call on."""

    def __init__(self, refuse_at: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.preflights = 0
        self.refuse_at = refuse_at

    async def preflight(self, job: Any) -> Any:
        self.preflights += 1
        if self.refuse_at and self.preflights >= self.refuse_at:
            return ProxyError(400, "still too long", code="context_length_exceeded")
        job.body = {**job.body, "messages": [{"role": "user", "content": "fitted"}]}
        job.raw = orjson.dumps(job.body)
        return None

    def prepare(self, job: Any) -> tuple[dict[str, Any], bytes]:
        self.asked.append(("prepare", job.attempts))
        return job.body, job.raw


async def test_a_refit_checks_the_request_again_and_resends_what_it_made() -> None:
    layer = RefittingLayer(errors=deque([Decision("refit", reason="overflow")]))
    upstream = FakeUpstream(Reply.json({"error": {"message": "too long"}}, 400),
                            Reply.json(COMPLETION))
    answer, _, _ = await run(layer, upstream, stream=False)
    assert answer.status == 200 and orjson.loads(answer.body) == COMPLETION
    assert layer.preflights == 2
    assert orjson.loads(upstream.sent[1])["messages"] == [{"role": "user", "content": "fitted"}]


async def test_a_refit_that_cannot_fit_answers_the_refusal_without_sending_again() -> None:
    layer = RefittingLayer(refuse_at=2, errors=deque([Decision("refit", reason="overflow")]))
    upstream = FakeUpstream(Reply.json({"error": {"message": "too long"}}, 400))
    answer, _, job = await run(layer, upstream, stream=True)
    assert answer.status == 400 and job.status == 400
    assert orjson.loads(answer.body)["error"]["code"] == "context_length_exceeded"
    assert len(upstream.sent) == 1
