"""Holding a tools stream's calls until the reply is judged, so a bad call can be asked again.

Self-healing (`proxy.agent.healing`) re-asks the model when a reply's calls are wrong, which is
only allowed while nothing of the reply has reached the client. The tool-call stream processor
already sends each call whole, at the end of its choice; `HoldingStream` takes what it would
send and holds, from the first chunk carrying a call or a finish reason on, all of it, until the
relay asks the agent layer to settle the reply (`Layer.settle_stream`). Both it and
`EventsStream` (used when nothing will be judged) put the processor's events on the request as
they happen. Plain text before the calls
still flows as it comes. When the client forced a call (`tool_choice` required or a function),
text is held too, up to the hold-back limit: a reply in prose is then the failure to re-ask;
and so is a reply that opens with `{`, which may be a call written out.

It also keeps the reply as a chat message (its text while nothing was relayed, and its calls),
which is what the layer judges and, when it re-asks, sends back to the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from proxy.path.chunks import finish_reason
from proxy.path.job import StreamProcessor

if TYPE_CHECKING:
    from proxy.path.job import Job


class ToolProcessor(StreamProcessor, Protocol):
    """What the streams here wrap: a stream processor that also lists what it did (`events`),
    as `proxy.toolcalls.stream.StreamToolProcessor` does. An interface, not that class, so that
    a test can hand in its own (and the compiled build checks no class at the call)."""

    events: list[Any]


class EventsStream:
    """The tool-call stream processor, its events landing on the request as they happen."""

    __slots__ = ("_seen", "inner", "job")

    def __init__(self, inner: ToolProcessor, job: Job) -> None:
        self.inner = inner
        self.job = job
        self._seen = 0

    def _drain(self) -> None:
        for event in self.inner.events[self._seen :]:
            self.job.events.add(event)
        self._seen = len(self.inner.events)

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.inner.feed(chunk)
        if len(self.inner.events) > self._seen:
            self._drain()
        return out

    def pass_texts(self, texts: list[str]) -> int:
        return self.inner.pass_texts(texts)  # no events: text that passes changes nothing

    def hold_texts(self, texts: list[str]) -> int:
        return self.inner.hold_texts(texts)  # no events: past the limit, `feed` gives up

    def refuses_texts(self) -> bool:
        # What `HoldingStream` adds to `pass_texts` only refuses more, and it leaves
        # `hold_texts` to the processor: the processor's refusal is the stream's.
        return self.inner.refuses_texts()

    def pass_inert(self) -> bool:
        return self.inner.pass_inert()

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        return self.inner.pass_end(chunk)  # no events: nothing was held to judge

    def add_arguments(self, call: int, texts: list[str]) -> int:
        return self.inner.add_arguments(call, texts)  # events come with the calls, at the end

    def finish(self) -> list[dict[str, Any]]:
        out = self.inner.finish()
        self._drain()
        return out


class HoldingStream(EventsStream):
    """An `EventsStream` that holds the calls (and, forced, the text) back until judged.

    One class, not a wrapper around `EventsStream`: every event the relay walks goes through
    `feed`, and a second layer of calls there was measurable on the plain tools stream.
    """

    __slots__ = (
        "began",
        "calls",
        "finish_reason",
        "forces",
        "gave_up",
        "held",
        "hold_all",
        "holding",
        "limit",
        "opening",
        "size",
        "texts",
    )  # fmt: skip

    def __init__(
        self,
        inner: ToolProcessor,
        job: Job,
        *,
        hold_all: bool,
        limit: int,
        forces: bool,
        opening_json: bool = False,
    ) -> None:
        super().__init__(inner, job)
        self.hold_all = hold_all  # the client forced a call: hold the text as well
        self.forces = forces  # the client forced a call (held text or not: on the last try)
        # A reply that opens with `{` is held whole: it may be a call to an undeclared tool
        # written out, or (tools emulated) call lines followed by text. Decided by its first
        # character, so any other reply flows as before.
        self.opening = opening_json
        self.limit = limit  # bytes of text held at most (the upstream's holdback_limit)
        self.holding = False  # a call or a finish reason came: everything from it on is held
        self.gave_up = False  # past the limit, the held text was let go: no re-ask possible
        self.held: list[dict[str, Any]] = []
        self.texts: list[str] = []  # the reply's text, while none of it reached the client
        self.calls: list[dict[str, Any]] = []  # the calls, as they would go to the client
        self.size = 0
        self.finish_reason: str | None = None
        self.began = False  # a chunk was fed

    # -- StreamProcessor --------------------------------------------------------------------

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.inner.feed(chunk)
        if len(self.inner.events) > self._seen:
            self._drain()
        if self.opening:
            self.began = True
            self._open(out)
        if self.hold_all or self.holding:
            return self._hold(out)
        # One pass, as every event the relay walks comes here: whether the end came (a call or
        # a finish reason), and the text, while none of it reached the client.
        noting = not self.job.relayed
        seen: list[str] = []
        for item in out:
            choices = item.get("choices")
            if type(choices) is not list:
                continue
            for choice in choices:
                if type(choice) is not dict:
                    continue
                delta = choice.get("delta")
                if choice.get("finish_reason") or (type(delta) is dict and delta.get("tool_calls")):
                    # All of it, the text before the call too: text that comes out with the end
                    # is what the processor held back to judge (an undeclared tool, say).
                    self.holding = True
                    self._hold(out)
                    return []
                if noting and type(delta) is dict and type(delta.get("content")) is str:
                    seen.append(delta["content"])
        if seen:
            self.texts += seen
        return out

    def pass_texts(self, texts: list[str]) -> int:
        if self.hold_all or self.holding:
            return 0  # through `feed`, to be held
        if self.opening:
            return self._pass_opening(texts)
        passed = self.inner.pass_texts(texts)
        if passed and not self.job.relayed:
            self.texts.extend(texts[:passed])
        return passed

    def _pass_opening(self, texts: list[str]) -> int:
        """`pass_texts` while the reply's first character is unknown: only for its first texts
        (once a chunk was fed, the character is in text the processor holds, and every chunk
        is fed until it shows), up to the first that is `{`, held with all after it (`_open`)."""
        if self.began:
            return 0
        if texts and texts[0][:1].isalnum():
            shown: int | None = 0  # the common opening, a word: no scan for the first character
        else:
            shown = next((k for k, text in enumerate(texts) if text.strip()), None)
        if shown is not None and texts[shown].lstrip()[0] == "{":
            texts = texts[:shown]
        passed = self.inner.pass_texts(texts) if texts else 0
        if shown is not None and passed > shown:
            self.opening = False  # as `_open` decides on them, each going out as it came
        if passed and not self.job.relayed:
            self.texts.extend(texts[:passed])
        return passed

    def pass_inert(self) -> bool:
        return not (self.hold_all or self.holding) and self.inner.pass_inert()  # else held

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        """The reply's end goes out at once when settling will leave the reply as it is (one
        in words: `in_words`); else it is fed, and held with everything after it."""
        if self.hold_all or self.holding or self.opening or not self.in_words():
            return False
        if not self.inner.pass_end(chunk):
            return False
        self.holding = True  # what comes after the end is held, as after a fed one
        self.finish_reason = finish_reason(chunk)
        return True

    def finish(self) -> list[dict[str, Any]]:
        """Everything held, and what the processor still had: the reply's unsent end."""
        tail = self.inner.finish()
        self._drain()
        self._note(tail)
        held, self.held = [*self.held, *tail], []
        return held

    # -- the reply --------------------------------------------------------------------------

    def message(self) -> dict[str, Any]:
        """The reply as a chat message: its text (what is known of it) and its calls."""
        text = "".join(self.texts)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.calls:
            message["tool_calls"] = self.calls
        return message

    def in_words(self) -> bool:
        """Whether the reply is, as far as it is known, one in words that settling leaves as it
        is (`reask.settle_stream`): no call, none forced, not a second answer, tools not
        emulated, and not opening like a call written out unless some of it was relayed."""
        job = self.job
        return (
            not self.calls
            and not self.forces
            and not job.heal.asked
            and not job.negotiation.emulated
            and (job.relayed or not self.may_be_call())
        )

    def may_be_call(self) -> bool:
        """Whether the text known of the reply could be a call written out (it opens with `{`,
        a code fence or a tag: see proxy.agent.healing.written_call)."""
        first = _first_char(self.texts)
        return bool(first) and first in "{`<"

    @property
    def may_heal(self) -> bool:
        """Whether the reply can still be asked for again: none of it reached the client."""
        return not self.job.relayed and not self.gave_up

    def _open(self, out: list[dict[str, Any]]) -> None:
        """Until the reply's first character is known: whether it opens with `{` (then all of
        it is held, like a forced call's text)."""
        first = _first_char(_contents(out))
        if first:
            self.opening = False
            self.hold_all = self.hold_all or first == "{"

    def _note(self, out: list[dict[str, Any]]) -> None:
        """Note the finish reason, calls and text of chunks held (or sent at the end): one
        pass, each chunk's first choice read once (a pass for each cost a µs on every call)."""
        for item in out:
            choice = _choice(item)
            if choice is None:
                continue
            finish = choice.get("finish_reason")
            if finish and isinstance(finish, str):
                self.finish_reason = finish
            delta = choice.get("delta")
            if type(delta) is not dict:
                continue
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                self.calls.extend(
                    {k: v for k, v in call.items() if k != "index"}
                    for call in calls
                    if isinstance(call, dict)
                )
            content = delta.get("content")
            if isinstance(content, str):
                self.texts.append(content)

    def _hold(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._note(out)
        self.held.extend(out)
        if self.hold_all and not self.holding:
            self.size += sum(len(t) for t in _contents(out))
            if self.size > self.limit:
                # Past the limit the text goes out as it is: the reply can no longer be asked
                # for again, and is judged and flagged at its end like any other.
                self.hold_all, self.gave_up = False, True
                released, self.held = self.held, []
                return released
        return []


def _choice(item: dict[str, Any]) -> dict[str, Any] | None:
    """A chunk's first choice, when it has a readable one."""
    choices = item.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None
    return choices[0]


def _delta(item: dict[str, Any]) -> dict[str, Any] | None:
    choice = _choice(item)
    delta = choice.get("delta") if choice is not None else None
    return delta if type(delta) is dict else None


def _first_char(texts: list[str]) -> str:
    """The first character of the text that is not white space ("": none yet)."""
    for text in texts:
        start = text.lstrip()
        if start:
            return start[0]
    return ""


def _contents(out: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for item in out:
        delta = _delta(item)
        for key in ("content", "reasoning_content", "reasoning"):
            value = delta.get(key) if delta is not None else None
            if isinstance(value, str):
                found.append(value)
    return found
