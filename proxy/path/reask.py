"""The agent layer's healing step: judge a finished reply, ask the model again, or pass it on.

`proxy.agent.healing` says what is wrong with a reply and writes the turn that asks again; this
module applies it to one request (BEHAVIOUR 10): a whole answer or the end of a stream is judged
against the request's tools and `tool_choice`; a failing reply that has not reached the client
is asked for again up to the upstream's `heal_retries` (the next attempt is built from the
conversation, the reply and the correction); the best answer goes to the client, and every heal,
enforcement and conversion is an event. Calls the client forbade (`tool_choice: "none"`) are
turned back into text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.agent.healing import (
    Choice,
    Verdict,
    calls_as_text,
    heal_messages,
    judge,
    read_choice,
    reply_text,
    summary,
    tool_calls,
)
from proxy.agent.negotiate import client_wants_usage
from proxy.observe import events as ev
from proxy.path import usage
from proxy.path.chunks import chunk_has_content, completion_to_chunks, finish_reason
from proxy.path.holding import EventsStream, HoldingStream, ToolProcessor
from proxy.path.job import Decision, Job, StreamProcessor
from proxy.path.sse import Unwritable, encoded
from proxy.toolcalls import leading
from proxy.toolcalls.recovery import recovered_event
from proxy.toolcalls.validation import declared_names


def tools_of(job: Job) -> list[dict[str, Any]] | None:
    """The request's tools, when it declared any: as the upstream was sent them, when it was.

    Calls are judged against the schemas the server saw (sanitised: a contradictory bound the
    client wrote dropped, refs resolved), not the client's own: a `minItems` above `maxItems`
    that no call can satisfy would otherwise send every call back. With tools emulated the
    server saw none, and the client's are the ones.
    """
    tools = job.body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    sent = job.sent.get("tools") if job.sent is not None else None
    return sent if isinstance(sent, list) and sent else tools


def choice_of(job: Job) -> Choice:
    return read_choice(job.body.get("tool_choice"))


def holder(job: Job, inner: ToolProcessor, limit: int, emulated: bool = False) -> StreamProcessor:
    """The stream processor for a tools stream: `inner`, its calls held back until the reply is
    judged (`settle_stream`), or with its events reported only when nothing will be judged
    (healing is off and calls are allowed, or the request asks for several choices)."""
    retries = job.upstream.config.heal_retries
    choice = choice_of(job)
    if not _single(job.body) or (retries <= 0 and choice.mode != "none" and not emulated):
        return EventsStream(inner, job)
    # Text is held only while the reply can still be asked for again: on the last attempt it
    # flows, and only the calls wait to be judged.
    hold_all = choice.forces and job.heal.asked < retries
    # A reply that opens with `{` may be a call to an undeclared tool written as JSON (which
    # recovery releases as text once it reads the name) or, emulated, call lines followed by
    # text: held whole while it can still be asked for again or read so.
    opening_json = choice.mode != "none" and (emulated or job.heal.asked < retries)
    held = HoldingStream(
        inner, job, hold_all=hold_all, limit=limit, opening_json=opening_json, forces=choice.forces
    )
    job.heal.stream = held
    return held


def settle(job: Job, body: dict[str, Any]) -> dict[str, Any] | list[bytes] | Decision:
    """A whole answer: the body to send, or the decision to ask again."""
    tools = tools_of(job)
    message = _message(body)
    if tools is None or message is None or not _single(job.body):
        return body
    choice = choice_of(job)
    if choice.mode == "none":
        return _with_message(body, _unforbidden(job, message)) if tool_calls(message) else body
    if job.upstream.config.heal_retries <= 0 or _cut_off(_finish(body), message):
        return body
    settled: dict[str, Any] | list[bytes] | Decision = _settled(
        job,
        Judged(message, tools, choice, _judge(job, message, tools, choice), body),
        may_ask=True,
    )
    return settled


def settle_stream(
    job: Job, unsent: list[bytes], tail: list[dict[str, Any]]
) -> tuple[list[bytes], bool] | Decision:
    """The end of a complete stream: the events to send and whether they carry content, or the
    decision to ask again."""
    held = job.heal.stream
    carries = any(chunk_has_content(c) for c in tail)
    if held is None:
        return [*unsent, *_frames(tail)], carries
    job.heal.stream = None
    if held.in_words():
        # A reply in words (the common case): nothing to change, and nothing to judge.
        return [*unsent, *_frames(tail)], carries
    choice = choice_of(job)
    tools = tools_of(job) or []
    message = held.message()
    if choice.mode == "none":
        if tool_calls(message):
            tail = _tail_as_text(job, tail, message)
        return [*unsent, *_frames(tail)], carries
    if job.negotiation.emulated and not tool_calls(message):
        tail, message = _opening_calls(job, tail, message, tools)
    if job.upstream.config.heal_retries <= 0:
        return [*unsent, *_frames(tail)], carries or bool(tool_calls(message))
    answer = [*unsent, *_frames(tail)]
    if _cut_off(held.finish_reason, message):
        return answer, carries
    judged = Judged(message, tools, choice, _judge(job, message, tools, choice), answer)
    outcome = _settled(job, judged, may_ask=held.may_heal)
    if isinstance(outcome, Decision):
        return outcome
    return outcome, carries or outcome is not answer


def _judge(
    job: Job, message: dict[str, Any], tools: list[dict[str, Any]], choice: Choice
) -> Verdict:
    return judge(message, tools, choice, asked=job.heal.asked > 0)


@dataclass(frozen=True, slots=True, init=False)  # its own __init__: see proxy/compiled.py
class Judged:
    """One finished reply, judged: what it said, against which tools and choice, what is wrong
    with it, and the answer that goes to the client if it is kept (a whole body, or a stream's
    unsent events)."""

    message: dict[str, Any]
    tools: list[dict[str, Any]]
    choice: Choice
    verdict: Verdict
    answer: Any

    def __init__(
        self,
        message: dict[str, Any],
        tools: list[dict[str, Any]],
        choice: Choice,
        verdict: Verdict,
        answer: Any,
    ) -> None:
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "choice", choice)
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "answer", answer)


def _settled(job: Job, judged: Judged, *, may_ask: bool) -> Any:
    """The answer to send (this one, or a better earlier one), or the decision to ask again."""
    heal, verdict, answer = job.heal, judged.verdict, judged.answer
    _note_skipped(job, verdict)
    if verdict.ok:
        if heal.asked:
            _resolved(job, "healed", "the second answer is valid")
        return answer
    if may_ask and heal.asked < job.upstream.config.heal_retries and not job.relayed:
        asked = _ask_again(job, judged)
        if asked is not None:
            return asked
    if not heal.asked:
        _flagged(job, verdict, _why_not_asked(job, may_ask))
        return answer
    # A tie goes to the first answer, the one the model gave unprompted: healing never returns
    # something worse than what the client would have had without it.
    better = heal.best is not None and heal.best_score <= verdict.score and not job.relayed
    _resolved(
        job,
        "failed",
        f"the second answer is not valid either ({summary(verdict)}), so "
        + ("the first answer was returned" if better else "it was returned"),
    )
    return heal.best if better else answer


# Why a reply that fails cannot be asked for again when the request or the reply cannot be
# written out: orjson reads JSON nested 1024 levels deep but writes only 254, and both came in
# as bytes that went on untouched.
_TOO_DEEP = (
    "the conversation nests JSON more than 254 levels deep, too deep for latchgate to write "
    "it again with the correction"
)


def _ask_again(job: Job, judged: Judged) -> Decision | None:
    """Keep the answer if it is the best so far, and build the next attempt's body: the
    conversation, the reply and the correction. None when either cannot be written."""
    heal, verdict = job.heal, judged.verdict
    keep = heal.best is None or verdict.score < heal.best_score
    source = _next_source(job, judged)
    try:
        source_raw = orjson.dumps(source)
        kept = _kept(job, judged.answer) if keep else heal.best
    except (orjson.JSONEncodeError, Unwritable):
        return None  # nothing changed: the reply is passed on, flagged (`_settled`)
    if keep:
        heal.best, heal.best_score = kept, verdict.score
    heal.first = heal.first or summary(verdict)
    heal.forced = heal.forced or bool(verdict.choice)
    heal.calls_bad = heal.calls_bad or bool(verdict.problems)
    heal.source, heal.source_raw = source, source_raw
    heal.asked += 1
    usage.set_aside(job)
    return Decision("resend", reason="heal")


def _next_source(job: Job, judged: Judged) -> dict[str, Any]:
    """The body the next attempt is built from: the conversation so far, the reply, and the
    correction."""
    base = job.heal.source or job.body
    messages = base.get("messages")
    history = messages if isinstance(messages, list) else []
    # tool_choice is restated in the correction's words, not sent again: llama-server accepts a
    # "required" it cannot force and then runs the turn to max_tokens (bench/RESULTS.md), and
    # the answer is judged against the client's choice all the same.
    body = {k: v for k, v in base.items() if k != "tool_choice"}
    body["messages"] = [
        *history,
        *heal_messages(judged.message, judged.verdict, judged.tools, judged.choice),
    ]
    return body


def _kept(job: Job, answer: Any) -> Any:
    """An answer kept while the model is asked again, in the shape every answer to the request
    takes where it is sent: a stream's events for a streamed request (whose attempts a server
    may answer whole, which the stream relay then streams itself), else a whole body. A kept
    body sent as events, or events as a body, broke the stream or the response (a 500).
    Raises when the answer cannot be written (nested over 254 levels): it is not kept then,
    and the model is not asked again."""
    if job.stream and isinstance(answer, dict):
        return _frames(completion_to_chunks(answer, usage=client_wants_usage(job.body)))
    if isinstance(answer, dict):
        orjson.dumps(answer)  # it is written if returned (`WholeRelay.respond`): can it be?
    return answer


def gave_up(job: Job, why: str) -> Any:
    """Asking again failed outright (`why`: the error): the first answer, and the notice."""
    _resolved(job, "failed", f"that failed ({why}), so the first answer was returned")
    return job.heal.best


def _resolved(job: Job, outcome: str, what: str) -> None:
    """The re-asked request has its answer: one notice, and each re-ask's kind counted."""
    heal = job.heal
    notice = (
        f"{job.events.model}'s reply was not usable ({heal.first}); latchgate asked again "
        f"and {what}."
    )
    if heal.calls_bad:
        job.events.emit(ev.TOOL_HEALED, notice, outcome=outcome)
        notice = ""  # one sentence for both counts
    if heal.forced:
        choice = choice_of(job)
        job.events.emit(
            ev.TOOL_CHOICE_ENFORCED,
            notice,
            choice=choice.mode,
            outcome="enforced" if outcome == "healed" else "failed",
        )


def _why_not_asked(job: Job, may_ask: bool) -> str:
    """Why a failing reply went out as it was, the first time it was judged."""
    if job.relayed:
        return "part of it had already reached the client"
    if not may_ask:
        return "its text passed the hold-back limit"
    return _TOO_DEEP  # asking was allowed (heal_retries is at least 1 here): it could not be


def _flagged(job: Job, verdict: Verdict, why: str) -> None:
    """A failing reply that could not be asked for again (`why`): passed on, flagged."""
    notice = f"{job.events.model}'s reply is not usable ({summary(verdict)}); {why}, so "
    notice += "latchgate passed it on as it was."
    if verdict.problems:
        job.events.emit(ev.TOOL_HEALED, notice, outcome="flagged")
        notice = ""
    if verdict.choice:
        job.events.emit(
            ev.TOOL_CHOICE_ENFORCED, notice, choice=choice_of(job).mode, outcome="flagged"
        )


def _note_skipped(job: Job, verdict: Verdict) -> None:
    for name in verdict.skipped:
        job.events.emit(
            ev.INFO,
            f"The parameters schema of tool {name} could not be compiled, so its calls were "
            "not validated.",
        )


def _unforbidden(job: Job, message: dict[str, Any]) -> dict[str, Any]:
    """`tool_choice: "none"` answered with calls: the calls, as text."""
    _note_unforbidden(job, message)
    return calls_as_text(message)


def _note_unforbidden(job: Job, message: dict[str, Any]) -> None:
    count = len(tool_calls(message))
    job.events.emit(
        ev.TOOL_CHOICE_ENFORCED,
        f"{job.events.model} called {count} tool(s) although tool_choice was none; latchgate "
        "turned the call(s) into text.",
        choice="none",
        outcome="converted",
    )


def _tail_as_text(
    job: Job, tail: list[dict[str, Any]], message: dict[str, Any]
) -> list[dict[str, Any]]:
    """A stream's held end with its call chunks replaced by one text chunk holding them."""
    text = reply_text({"tool_calls": tool_calls(message)})
    if message.get("content"):
        # The reply's text went out before its calls: their lines start on a line of their
        # own, as `reply_text` joins a whole reply's.
        text = "\n" + text
    _note_unforbidden(job, message)
    out: list[dict[str, Any]] = []
    placed = False
    for chunk in tail:
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and delta.get("tool_calls"):
            if not placed:
                placed = True
                out.append(_rechoice(chunk, {"content": text}, None))
            continue
        if isinstance(choice, dict) and choice.get("finish_reason") == "tool_calls":
            chunk = _rechoice(chunk, choice.get("delta") or {}, "stop")
        out.append(chunk)
    return out


def _opening_calls(
    job: Job, tail: list[dict[str, Any]], message: dict[str, Any], tools: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """An emulated stream's held reply that opens with call lines (proxy.toolcalls.leading):
    its end rewritten to send them as calls, the text after them as text."""
    content = message.get("content")
    found = leading.leading_calls(content, set(declared_names(tools))) if content else None
    if found is None:
        return tail, message
    job.events.add(recovered_event(len(found.calls), "bare_json"))
    template = next((c for c in tail if c.get("choices")), None)
    if template is None:
        return tail, message
    out: list[dict[str, Any]] = []
    if found.rest:
        out.append(_rechoice(template, {"content": found.rest}, None))
    for k, call in enumerate(found.calls):
        out.append(_rechoice(template, {"tool_calls": [{"index": k, **call}]}, None))
    final = _rechoice(template, {}, "tool_calls")
    ends = [c for c in tail if finish_reason(c)]
    if ends and "usage" in ends[-1]:
        final["usage"] = ends[-1]["usage"]
    out.append(final)
    out += [c for c in tail if not c.get("choices")]  # a usage-only chunk keeps its place last
    return out, {**message, "content": found.rest, "tool_calls": found.calls}


def _rechoice(chunk: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    choice = chunk["choices"][0]
    return {**chunk, "choices": [{**choice, "delta": delta, "finish_reason": finish}]}


def _message(body: dict[str, Any]) -> dict[str, Any] | None:
    """The one choice's message of a whole answer (None: not exactly one readable choice)."""
    choices = body.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    message = choices[0].get("message")
    return message if type(message) is dict else None


def _cut_off(finish: object, message: dict[str, Any]) -> bool:
    """Whether the reply's calls were cut off at the reply ceiling: flagged as such (BEHAVIOUR
    4.2, raise max_tokens), never asked for again, which would be cut off the same way. A reply
    with no call that ran to the ceiling (llama-server runs a "required" turn it cannot force
    to max_tokens) is judged as usual."""
    return finish == "length" and bool(tool_calls(message))


def _finish(body: dict[str, Any]) -> object:
    choice = body["choices"][0]
    return choice.get("finish_reason")


def _with_message(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    choice = body["choices"][0]
    finish = choice.get("finish_reason")
    if finish == "tool_calls":
        finish = "stop"
    return {**body, "choices": [{**choice, "message": message, "finish_reason": finish}]}


def _single(body: dict[str, Any]) -> bool:
    """Whether the request asks for one choice (a re-ask of several is not attempted)."""
    n = body.get("n")
    return n is None or n == 1


def _frames(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [encoded(c) for c in chunks]
