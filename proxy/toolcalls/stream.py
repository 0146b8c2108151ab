"""Tool-call recovery and repair on streams, without delaying ordinary text (BEHAVIOUR.md 4.3, 4.4).

A stream cannot be recovered after the fact: by the time a reply turns out to hold a call, its
first words are on the client's screen. So text is relayed as it comes, and only what could still
become part of a call is held: a tail that could be the start of a marker, everything from a
marker on, trailing whitespace (it goes with a call that follows it), a reply that opens with
`{`, `[` or a fence until it can be judged, a fence or a line-opening `{`/`[` after prose until it
can be judged (the reply's one fenced block, or its one run of bare calls, may be its call), a
run of bare calls followed by prose to the end (only the whole reply tells whether it is the one
run), a reply's opening while it may still become a family's opener or framing
(Functionary's `NAME\n{` and `all\n`, whose framing is dropped), and end-of-turn tokens or
closing tags while they may end the reply (a reply loses those it ends with; text after them
releases them). When the choice finishes, the
held text goes through the same `find_calls` as a whole reply, so a stream and a whole response
always agree.

Upstream tool-call fragments are reassembled (4.4) and relayed whole, arguments repaired, when the
choice finishes: relaying them fragment by fragment would send arguments before they can be
repaired.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from proxy.jsontext import compact
from proxy.observe.events import HOLDBACK_RELEASED, Event
from proxy.toolcalls.arguments import argument_event, repair_arguments
from proxy.toolcalls.formats import (
    FENCE,
    FENCE_INFO_MAX,
    FRAMING,
    framing_start,
    openers,
    triggers,
)
from proxy.toolcalls.recovery import (
    LEFT_OVER,
    REASONING_KEYS,
    Found,
    build_calls,
    find_calls,
    finish_after,
    past_left_over,
    recovered_event,
    tool_schemas,
)
from proxy.toolcalls.scan import (
    END_TOKENS,
    THINK_CLOSE,
    THINK_CLOSE_AT,
    THINK_ENDERS,
    THINK_ENDS_AT,
    THINK_OPEN,
    THINK_OPEN_AT,
    closed_set,
    first_match,
    first_of,
    past_end_tokens,
    skip,
    skip_back,
    value_end,
)
from proxy.toolcalls.spans import Schemas
from proxy.toolcalls.values import json_calls

_TEMPLATE_KEYS = ("id", "object", "created", "model", "system_fingerprint", "service_tier")
_JUDGE_CHARS = frozenset("}])`>;")
_THINK_ENDS = (*THINK_CLOSE, *THINK_ENDERS)
_LEFT_OVER_SET = frozenset(LEFT_OVER)


def _with_extras(made: dict[str, Any], chunk: dict[str, Any]) -> dict[str, Any]:
    """`made`, the chunk that carries a finish reason, with the finishing upstream `chunk`'s
    own fields beside the few every made chunk copies (`_TEMPLATE_KEYS`): llama.cpp's
    `timings`, a vendor's extras, a usage report (the relay keeps it for a client that asked)."""
    extra = {k: v for k, v in chunk.items() if k not in made}
    return {**made, **extra} if extra else made


def _has_reasoning(delta: dict[str, Any]) -> bool:
    return "reasoning_content" in delta or "reasoning" in delta  # REASONING_KEYS, unrolled


# Keys a call object can open with (BEHAVIOUR 4.1's shapes and their common variants), besides a
# declared tool's own name: a JSON reply whose first key is none of these is an answer, not a call.
_FIRST_KEYS = frozenset({
    "name", "arguments", "parameters", "args", "id", "type", "function", "tool", "tool_input",
    "tool_name", "tool_call_id", "input", "call", "tool_calls", "tool_call", "function_call",
})  # fmt: skip
# Under this many held characters a value is re-judged whenever it may have closed; past it,
# only after the held text grew by an eighth, so judging a long reply stays linear overall.
_SMALL_HOLD = 4096


@dataclass(frozen=True, slots=True)
class Markers:
    """The marker tables of one set of declared tool names, shared by every stream declaring
    them: an agent sends the same tools every turn, and building the tables (every beginning of
    every marker) cost more than relaying a short answer."""

    triggers: tuple[str, ...]  # where a call can start
    # Where the first of them begins, in one scan, and what may begin there: the shortest
    # trigger found (`first_match` ends at it) -> the triggers it begins, in order
    # (`StreamToolProcessor._first_trigger`). A find per trigger, over a hundred for every tool
    # set, cost more than the rest of judging a held call's text; so did trying every trigger
    # with the same first character (`<`: nearly all of them).
    trigger_at: re.Pattern[str]
    trigger_by_start: dict[str, tuple[str, ...]] = field(compare=False)  # kept hashable
    # The triggers that a think tag, a fence or a left-over begins (`_next_mark`): none today.
    outranked: frozenset[str]
    prefixes: frozenset[str]  # every proper beginning of every marker the stream watches for
    longest: int  # the longest marker's length
    anywhere: re.Pattern[str]  # any whole marker
    starts: re.Pattern[str]  # any marker's first character
    # In texts joined by NULs, with a NUL after the last: the first text that ends with
    # whitespace or with a marker's beginning (the match ends at its NUL). See
    # `StreamToolProcessor.pass_texts`: one C-speed scan of a whole read's texts instead of a
    # Python step for each. (Searched forwards: the reverse of the texts, matched with a
    # leading `.*`, cost twice as much in backtracking.)
    open_end: re.Pattern[str]
    openers: tuple[str, ...]  # what a call may open a reply with, no marker (Family.openers)
    framing: tuple[str, ...]  # a template's framing a reply may open with (Family.framing)
    # Every beginning of an opener or a framing: a reply's first text is judged on each chunk
    # while it may still become one, so this is one set lookup, not a scan of them all.
    opening_prefixes: frozenset[str]
    opening_firsts: frozenset[str]  # their first characters
    left_over: re.Pattern[str] | None  # an end-of-turn token or closing tag (None: not watched)
    # Texts `pass_texts` found clean (no marker in them, none beginning or whitespace at their
    # end), a pure verdict on the text alone: a model streams the same few thousand tokens, and
    # a set lookup costs a tenth of the two scans. Bounded by `_CLEAN_MAX`, then started over.
    clean: set[str] = field(default_factory=set, compare=False)


# Texts remembered clean per marker table, at most, and the longest remembered: a stream's
# tokens, not its longer pieces (at most about 100 KB a table, 256 tables).
_CLEAN_MAX = 1024
_CLEAN_TEXT = 32


@lru_cache(maxsize=256)
def markers(names: tuple[str, ...], recover: bool) -> Markers:
    """The tables for streams declaring tools `names` (recovering calls or not)."""
    marks = tuple(triggers(names)) if recover else ()
    # The fence is in the tags for the tail it may begin (a trailing "`" or "``"), so that a
    # fence split across chunks is still seen whole.
    # The end-of-turn tokens and closing tags a template leaves are held while they may end
    # the reply (a reply with no call loses them, 4.1): text after them releases them.
    left = LEFT_OVER if recover else ()
    opens = tuple(openers(names)) if recover else ()
    framing = FRAMING if recover else ()
    tags = [*marks, *THINK_OPEN, *_THINK_ENDS, *left, *([FENCE] if recover else [])]
    watched = [*tags, FENCE]  # _release looks for a fence even where no tail may begin one
    beginnings = {t[:k] for t in tags for k in range(1, len(t))}
    return Markers(
        triggers=marks,
        trigger_at=re.compile(first_match(set(marks))),
        trigger_by_start=_by_start(marks),
        outranked=frozenset(
            mark
            for mark in marks
            for tag in (*THINK_OPEN, *THINK_CLOSE, FENCE, *left)
            if mark.startswith(tag) and mark != tag
        ),
        prefixes=frozenset(beginnings),
        longest=max((len(t) for t in tags), default=0),
        anywhere=re.compile(
            "|".join([first_match(set(watched)), *([_LINE_AFTER.pattern] if recover else [])])
        ),
        starts=re.compile("[" + "".join(sorted({re.escape(t[0]) for t in tags})) + "]"),
        open_end=re.compile(r"(?:\s|" + closed_set(beginnings) + r")\x00"),
        openers=opens,
        framing=framing,
        opening_prefixes=frozenset(o[:k] for o in (*opens, *framing) for k in range(1, len(o) + 1)),
        opening_firsts=frozenset(o[0] for o in (*opens, *framing) if o),
        left_over=re.compile(first_match(set(left))) if left else None,
    )


def _by_start(marks: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`Markers.trigger_by_start`: each trigger under the shortest trigger it begins with."""
    by_start: dict[str, list[str]] = {}
    for mark in marks:
        shortest = next(mark[:k] for k in range(1, len(mark) + 1) if mark[:k] in marks)
        by_start.setdefault(shortest, []).append(mark)
    return {start: tuple(found) for start, found in by_start.items()}


@dataclass(init=False)  # its own __init__: one a streamed call (proxy/compiled.py)
class _Call:
    index: int | None
    order: int
    id: str
    name: str
    arguments: str

    def __init__(self, index: int | None, order: int) -> None:
        self.index = index
        self.order = order
        self.id = ""
        self.name = ""
        self.arguments = ""


@dataclass(init=False)  # its own __init__: one a stream (proxy/compiled.py)
class _Choice:
    index: int
    released: list[str]
    held: str
    at_tail_start: bool
    in_think: bool
    triggered: bool
    judged: int  # held length already judged "could be a bare call" (-1: not judged)
    fence_open: bool  # the tail is a fence whose first line has not ended yet
    fence_tail: bool  # the tail start being judged is a fence after prose
    fences_done: bool  # a fence was judged not a call: no later one can be (4.1)
    after_run: bool  # the tail judged is a complete run of calls: any word decides
    opening: bool  # the tail start is the reply's start or right after a think block
    # The framing dropped at the reply's start (Family.framing): where, in the text sent and
    # held, and what, so the end reads the reply as it came.
    dropped: tuple[int, str] | None
    given_up: bool
    native: list[_Call]
    finished: bool
    # The reasoning deltas, up to the hold-back limit (None past it): a call written there
    # while the content stays empty is read when the choice finishes.
    reasoning: list[str] | None
    reasoning_size: int
    in_reasoning: Found | None  # the calls found there, once the choice finishes

    def __init__(self, index: int) -> None:
        self.index = index
        self.released = []
        self.held = ""
        self.at_tail_start = True
        self.in_think = False
        self.triggered = False
        self.judged = -1
        self.fence_open = False
        self.fence_tail = False
        self.fences_done = False
        self.after_run = False
        self.opening = True
        self.dropped = None
        self.given_up = False
        self.native = []
        self.finished = False
        self.reasoning = []
        self.reasoning_size = 0
        self.in_reasoning = None


class StreamToolProcessor:
    """Feed parsed upstream chunks in, get the chunks to send the client out."""

    def __init__(
        self,
        tools: list[dict[str, Any]] | None,
        *,
        recover: bool = True,
        holdback_limit: int = 256 * 1024,
    ) -> None:
        self._schemas: Schemas = tool_schemas(tools) if recover else {}
        self._recover = bool(self._schemas)
        self._limit = holdback_limit
        self._marks = markers(tuple(self._schemas), self._recover)
        self._triggers = self._marks.triggers
        self.longest_marker = self._marks.longest
        self._choices: dict[int, _Choice] = {}
        # The latest chunk with choices: the chunks made here take its id, model and the like.
        self._latest: dict[str, Any] = {}
        self.events: list[Event] = []

    # -- public -----------------------------------------------------------------------------

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """One upstream chunk -> the chunks to send now (the same object when unchanged)."""
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return [chunk]
        self._latest = chunk  # its fields are copied only if a chunk is made (rarely)
        results = []
        unchanged = True
        for choice in choices:
            if not isinstance(choice, dict):
                continue  # not a choice at all: nothing in it can be relayed
            produced = self._feed_choice(choice, chunk)
            unchanged = unchanged and produced is None
            results.append((choice, produced))
        if unchanged:
            return [chunk]
        # An unchanged choice beside a changed one goes out in a chunk of its own; wrapped only
        # now, as most chunks change nothing and would build it for nothing.
        out: list[dict[str, Any]] = []
        for choice, produced in results:
            out.extend([self._wrap(choice)] if produced is None else produced)
        return out

    def finish(self) -> list[dict[str, Any]]:
        """At the upstream's end: flush whatever every unfinished choice still holds."""
        out: list[dict[str, Any]] = []
        for state in self._choices.values():
            if not state.finished:
                out.extend(self._finalize(state, None, None))
        return out

    def pass_texts(self, texts: list[str]) -> int:
        """How many of the chunks that add `texts` to the first choice's content (one text a
        chunk, in order) go out as they came, from the first; those are taken in as `feed` would
        take them, and the caller feeds the rest. The first may be the reply's first text.

        The relay asks this of prose it has not parsed (`path.text_events`), so that a
        tools stream relays plain text as cheaply as a stream without tools. A chunk counts only
        where `feed` would return it unchanged: nothing held or assembled, and a text with no
        marker in it and no marker's beginning or whitespace at its end. Two scans of all the
        texts at once decide it, whatever their number.
        """
        state = self._choices.get(0)
        if state is None:
            return self._pass_opening(texts)
        # Held text or calls go out later in chunks built from the latest chunk's fields, so
        # while there are any, every chunk is fed (`feed` keeps them).
        if state.held or state.native or state.finished or len(self._choices) > 1:
            return 0
        if state.given_up:
            return len(texts)
        passing = len(texts)
        if self._recover:
            if state.triggered or state.in_think or state.at_tail_start:
                return 0
            clean = self._marks.clean
            if not all(map(clean.__contains__, texts)):
                passing = self._clean_run(texts)
        state.released.extend(texts[:passing])
        return passing

    def _pass_opening(self, texts: list[str]) -> int:
        """`pass_texts` before anything was fed for the first choice: the reply's first text is
        judged as `feed` judges it (a call may open a reply), on a new choice that is kept only
        when that text goes out whole. Else nothing is taken in, and `feed` starts afresh."""
        first = texts[0]
        if self._choices or not first:
            return 0  # another choice came first, or an empty text `feed` would not push
        marks = self._marks
        if self._recover and (
            first in marks.prefixes  # the open end's commonest case, without the two scans
            or marks.anywhere.search(first)
            or marks.open_end.search(first + "\x00")
        ):
            return 0  # a marker, or what may begin one at its end: `feed` judges it, once
        state = _Choice(0)
        if self._recover and self._opens_prose(state, first, 0):
            # What `_push_text` makes of it, without its steps: a text with no marker, none
            # beginning and no whitespace at its end, opening a reply in words, goes out whole.
            state.at_tail_start = state.opening = False
            state.released.append(first)
        else:
            seen = len(self.events)
            if self._push_text(state, first) != first or state.held or len(self.events) > seen:
                del self.events[seen:]  # the hold-back limit's release: `feed` reports it
                return 0
        self._choices[0] = state
        return 1 + (self.pass_texts(texts[1:]) if len(texts) > 1 else 0)

    def _clean_run(self, texts: list[str]) -> int:
        """How many of `texts`, from the first, are clean (see `Markers.clean`), which are then
        remembered so."""
        joined = "\x00".join(texts)
        passing = len(texts)
        if joined.count("\x00") != passing - 1:
            return 0  # a text with a NUL of its own: fed one by one
        marks = self._marks
        if (found := marks.anywhere.search(joined)) is not None:
            passing = joined.count("\x00", 0, found.start())
        if (open_end := marks.open_end.search(joined + "\x00")) is not None:
            later = joined.count("\x00", open_end.end() - 1)  # texts after the one found
            passing = min(passing, len(texts) - 1 - later)
        if len(marks.clean) > _CLEAN_MAX:
            marks.clean.clear()
        marks.clean.update([text for text in texts[:passing] if len(text) <= _CLEAN_TEXT])
        return passing

    def pass_inert(self) -> bool:
        """Whether a chunk that adds nothing to the first choice goes out without being fed
        (`path.chunks.adds_nothing`). `feed` would send it unchanged and only note it as the
        latest chunk, which matters where chunks are made at the end from the latest one's
        fields: while text or calls are held, or reasoning is kept that may hold a call."""
        for state in self._choices.values():
            if state.held or state.native or state.reasoning:
                return False
        return True

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        """Whether a chunk that only ends the first choice (`path.chunks.only_end`) goes out
        without being fed: when that choice holds no text and assembled no call, and no call
        may be in its reasoning, `feed` would only note it (as here) and send it unchanged."""
        state = self._choices.get(0)
        if (
            state is None
            or len(self._choices) > 1
            or state.finished
            or state.held
            or state.native
            or self._reasoning_may_call(state)
        ):
            return False
        self._latest = chunk
        state.finished = True
        return True

    def hold_texts(self, texts: list[str]) -> int:
        """How many of the chunks that add `texts` to the first choice's content are taken in
        with nothing to send, from the first: inside a call (a marker went by), `feed` holds
        every text back until the choice finishes. Up to the hold-back limit, where `feed`
        releases what it held.

        Only for chunks whose delta is the text alone (else `feed` sends the rest of the delta)
        and whose other fields equal the last chunk fed (the chunks made later copy them).
        """
        state = self._choices.get(0)
        if (
            state is None
            or not state.triggered
            or state.given_up
            or state.native
            or state.finished
            or len(self._choices) > 1
        ):
            return 0
        room = self._limit - len(state.held)
        taken = 0
        for text in texts:
            room -= len(text)
            if room < 0 or not text:
                # Past the limit `feed` gives up; an empty text it relays as it came.
                break
            taken += 1
        state.held += "".join(texts[:taken])
        return taken

    def refuses_texts(self) -> bool:
        """Whether `pass_texts` and `hold_texts` would both take none of any texts now (their
        first checks, together): the first choice holds text that may begin a call but is not
        inside one yet, or assembles calls, or there are several. A text call's first chunks:
        the relay read every event after the first for nothing (issue 17)."""
        state = self._choices.get(0)
        if state is None:
            return False
        if state.native or state.finished or len(self._choices) > 1:
            return True
        return bool(state.held) and (not state.triggered or state.given_up)

    def add_arguments(self, call: int, texts: list[str]) -> int:
        """How many of the chunks that add `texts` to the arguments of tool call `call` (the
        fragments' index; fragments with an index and arguments alone) are taken in, from the
        first: `feed` appends them to that call and sends nothing (calls go out whole, repaired,
        when the choice finishes). None while no call has that index yet."""
        state = self._choices.get(0)
        if state is None or state.finished or len(self._choices) > 1:
            return 0
        same = [c for c in state.native if c.index == call]
        if not same:
            return 0
        same[-1].arguments += "".join(texts)
        return len(texts)

    def held(self, index: int = 0) -> int:
        """How many characters of choice `index` are held back right now."""
        state = self._choices.get(index)
        return len(state.held) if state else 0

    # -- one choice -------------------------------------------------------------------------

    def _feed_choice(
        self, choice: dict[str, Any], chunk: dict[str, Any]
    ) -> list[dict[str, Any]] | None:
        """What one choice of a chunk becomes; None when it goes out unchanged."""
        index = choice.get("index", 0)
        if not isinstance(index, int):
            index = 0  # servers send ints; anything else is read as the first choice
        state = self._choices.get(index)
        if state is None:  # not setdefault: that would build a _Choice for every chunk
            state = self._choices[index] = _Choice(index)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        fragments = delta.get("tool_calls")
        content = delta.get("content")
        changed = bool(fragments)
        if fragments:
            self._assemble_all(state, fragments)
        text_out: str | None = content
        if isinstance(content, str) and content and not state.given_up:
            text_out = self._push_text(state, content)
            changed = changed or text_out != content
        if self._recover and state.reasoning is not None and _has_reasoning(delta):
            self._keep_reasoning(state, delta)
        finish = choice.get("finish_reason")
        needs_final = finish is not None and self._needs_final(state, finish)
        if not changed and not needs_final:
            if finish is not None:
                state.finished = True
            return None
        rest = {k: v for k, v in delta.items() if k not in ("content", "tool_calls")}
        if text_out:
            rest["content"] = text_out
        return self._changed_choice(state, choice, chunk, rest, finish, needs_final)

    def _assemble_all(self, state: _Choice, fragments: Any) -> None:
        for frag in fragments if isinstance(fragments, list) else ():
            if isinstance(frag, dict):
                self._assemble(state, frag)

    def _changed_choice(
        self,
        state: _Choice,
        choice: dict[str, Any],
        chunk: dict[str, Any],
        rest: dict[str, Any],
        finish: Any,
        needs_final: bool,
    ) -> list[dict[str, Any]]:
        """The chunks for a choice whose delta changed (`rest`: what is left of it to send)."""
        out: list[dict[str, Any]] = []
        if rest:
            passed = None if needs_final else finish
            made = self._chunk(choice, rest, passed)
            out.append(made if passed is None else _with_extras(made, chunk))
        if finish is not None:
            if needs_final:
                out.extend(self._finalize(state, finish, chunk.get("usage"), (choice, chunk)))
            elif not rest:
                out.append(_with_extras(self._chunk(choice, {}, finish), chunk))
            state.finished = True
        return out

    def _needs_final(self, state: _Choice, finish: Any) -> bool:
        if state.held or state.native:
            return True
        if self._reasoning_may_call(state):
            # Only a call found there changes the end; a reasoning reply without one ends as
            # it came (its finish chunk is not rebuilt).
            state.in_reasoning = self._find_in_reasoning(state, finish)
            return state.in_reasoning is not None
        return False

    def _keep_reasoning(self, state: _Choice, delta: dict[str, Any]) -> None:
        text = next((delta[k] for k in REASONING_KEYS if isinstance(delta.get(k), str)), "")
        if text and state.reasoning is not None:
            state.reasoning_size += len(text)
            state.reasoning.append(text)
            if state.reasoning_size > self._limit:
                state.reasoning = None  # like held text past the limit: no longer judged

    def _reasoning_may_call(self, state: _Choice) -> bool:
        """Whether the choice's calls may be in its reasoning: there is some, and no content."""
        return (
            self._recover
            and bool(state.reasoning)
            and not state.given_up
            and not state.held.strip()
            and not "".join(state.released).strip()
        )

    def _push_text(self, state: _Choice, delta: str) -> str:
        state.held += delta
        if state.triggered or not self._recover:
            released = "" if self._recover else state.held
        else:
            released = self._release(state)
        if released:
            state.held = state.held[len(released) :]
            state.released.append(released)
        if len(state.held) > self._limit:
            released += self._give_up(state)
        return released

    def _give_up(self, state: _Choice) -> str:
        text = state.held
        state.released.append(text)
        state.held = ""
        state.given_up = True
        self.events.append(
            Event(
                HOLDBACK_RELEASED,
                f"Released {len(text)} characters held back as a possible tool call: past the "
                f"{self._limit}-character hold-back limit they are relayed as text.",
            )
        )
        return text

    def _release(self, state: _Choice) -> str:
        """The prefix of `state.held` that can go to the client now; updates the scan state."""
        held = state.held
        pos = 0
        lines = 0  # where a line-opening value may begin a tail (past one judged not a call)
        while True:
            if state.in_think:
                pos = self._past_think(state, held, pos)
                if pos < 0:
                    return held[: len(held) - self._overlap(held)]
                continue
            if state.at_tail_start:
                if self._opens_prose(state, held, pos):
                    # What `_still_possible` would judge no call, framing nor fence (`_judge`
                    # gives `_NO`), told by its first character alone: the common reply.
                    state.opening, state.after_run, state.fence_open = False, False, False
                else:
                    if state.opening and state.dropped is None and self._marks.framing:
                        held = self._drop_framing(state, held, pos)
                    if self._still_possible(state, held, pos):
                        return held[:pos]
                    if state.fence_tail or held[pos:].lstrip().startswith("`"):
                        state.fences_done = True
                state.at_tail_start, state.fence_tail, state.judged = False, False, -1
                lines = skip(held, pos) + 1  # its own `{` starts no other tail
            first = self._marks.anywhere.search(held, pos)
            if first is None:
                # The usual chunk of prose: no marker in it at all (one scan for all of them).
                return _rstrip_to(held, len(held) - self._overlap(held), pos)
            mark = self._next_mark(state, held, pos, max(pos, lines), first)
            if mark is None:
                return _rstrip_to(held, len(held) - self._overlap(held), pos)
            at, tag = mark
            if tag in THINK_OPEN:
                state.in_think, pos = True, at + len(tag)
            elif tag in THINK_CLOSE:
                state.at_tail_start, state.judged, pos = True, -1, at + len(tag)
                state.opening = True
            elif tag in _LEFT_OVER_SET:
                run = past_left_over(held, at)
                if self._may_end(held[run:]):
                    return _rstrip_to(held, at, pos)  # the reply may end with them
                pos = run  # text follows: they are the model's words
            elif tag in (FENCE, _LINE):
                arriving = self._marker_arriving(held, at, pos)
                if arriving is not None:
                    return arriving
                # A fence after prose may hold the reply's one fenced call, and a `{` or `[`
                # opening a line its one run of bare calls (4.1): judge it as a tail start,
                # with the whitespace before it, which goes with a call.
                pos = len(_rstrip_to(held, at, pos))
                state.at_tail_start, state.fence_tail, state.judged = True, tag == FENCE, -1
            else:
                state.triggered = True
                return _rstrip_to(held, at, pos)

    def _opens_prose(self, state: _Choice, held: str, pos: int) -> bool:
        """Whether the tail starting at `pos` opens with a character no call, fence, opener or
        framing can begin with (a word): then it is prose, whatever follows."""
        if state.judged >= 0 or state.fence_tail:
            return False
        k = skip(held, pos)
        if k == len(held):
            return False  # whitespace so far: the next character decides
        first = held[k]
        return first not in "`{[" and not (state.opening and first in self._marks.opening_firsts)

    def _past_think(self, state: _Choice, held: str, pos: int) -> int:
        """Where the think block open at `pos` ends (and the tail after it starts); -1 while it
        is still open."""
        close = first_of(held, pos, THINK_ENDS_AT)
        if close is None:
            return -1
        state.in_think, state.at_tail_start, state.judged = False, True, -1
        state.opening = True
        # A call section that ends the block is the call's marker: read on from it
        # (the block's text, whitespace and all, was relayed as it came).
        return close[0] + (0 if close[1] in THINK_ENDERS else len(close[1]))

    def _may_end(self, after: str) -> bool:
        """Whether the reply may end with the end tokens or closers just read (`after`: the
        text after them): nothing but whitespace, or a marker's beginning, follows yet."""
        return not after.strip() or after.lstrip() in self._marks.prefixes

    def _marker_arriving(self, held: str, at: int, pos: int) -> str | None:
        """What to release when a marker that holds a fence (Command R+'s "Action:\n```json")
        may still be arriving from before the fence at `at`: the text before its beginning,
        held from there until it shows. None when no marker is arriving across the fence."""
        begins = len(held) - self._overlap(held)
        return _rstrip_to(held, begins, pos) if pos <= begins < at else None

    def _drop_framing(self, state: _Choice, held: str, pos: int) -> str:
        """`held` without the framing the reply opens with at `pos` (after whitespace), as
        recovery drops it (formats/functionary.py's `all\\n`); the held text itself changes."""
        k = skip(held, pos)
        for framing in self._marks.framing:
            if held.startswith(framing, k):
                # The whitespace its template writes before it goes too (not before `pos`).
                start = max(pos, framing_start(held, k, framing))
                state.dropped = (sum(map(len, state.released)) + start, held[start:k] + framing)
                state.held = held = held[:start] + held[k + len(framing) :]
                break
        return held

    def _next_mark(
        self, state: _Choice, held: str, pos: int, lines: int, first: re.Match[str]
    ) -> tuple[int, str] | None:
        """The first marker, think tag, fence or line-opening value in `held` from `pos`
        (`first`: where `Markers.anywhere` matched from `pos`)."""
        # When the scan for any tag matched a trigger there (the shortest tag there), no trigger
        # begins earlier: no second scan for it.
        trigger = self._trigger_of(held, first) or self._first_trigger(held, pos)
        if trigger is not None and trigger[0] == pos and trigger[1] not in self._marks.outranked:
            # Where a call opens a held text. Nothing begins before `pos`, and a tag of another
            # kind beginning there too comes first only if it is shorter (tuples compare by
            # text), which `outranked` rules out: one scan, not six (a test holds them equal).
            return trigger
        return self._every_mark(state, held, pos, lines, trigger)

    def _every_mark(
        self,
        state: _Choice,
        held: str,
        pos: int,
        lines: int,
        trigger: tuple[int, str] | None,
    ) -> tuple[int, str] | None:
        """`_next_mark`, each kind searched for (`trigger`: the first trigger from `pos`)."""
        left_over = self._marks.left_over
        marks = [
            m
            for m in (
                trigger,
                first_of(held, pos, THINK_OPEN_AT),
                first_of(held, pos, THINK_CLOSE_AT),
                # After a fence judged not a call, no fenced block or bare run can be one: the
                # prose around them holds a fence (formats/bare.py).
                None if state.fences_done else _first(held, (FENCE,), pos),
                None if state.fences_done else _line_open(held, lines),
                None if left_over is None else first_of(held, pos, left_over),
            )
            if m is not None
        ]
        return min(marks) if marks else None

    def _first_trigger(self, held: str, pos: int) -> tuple[int, str] | None:
        """`_first(held, self._triggers, pos)`: where the first trigger begins, and of those
        beginning there the first in order."""
        found = self._marks.trigger_at.search(held, pos)
        return None if found is None else self._trigger_of(held, found)

    def _trigger_of(self, held: str, found: re.Match[str]) -> tuple[int, str] | None:
        """The first trigger in order beginning where `found` matched the shortest trigger
        there (every trigger beginning there begins with it); None when it matched no trigger."""
        begun = self._marks.trigger_by_start.get(found.group())
        if begun is None:
            return None
        at = found.start()
        return at, next(t for t in begun if held.startswith(t, at))

    def _still_possible(self, state: _Choice, held: str, pos: int) -> bool:
        # Re-judging only when a character that can close a value arrived keeps a long held
        # call linear instead of quadratic. After a complete run, any word decides.
        if state.judged >= 0 and not state.fence_open:
            grown = len(held) - pos - state.judged
            new = held[pos + state.judged :]
            quiet = not _JUDGE_CHARS.intersection(new) and not (state.after_run and new.strip())
            if quiet or (state.judged >= _SMALL_HOLD and grown < state.judged // 8):
                if quiet:
                    state.judged = len(held) - pos
                return True
        verdict = self._judge(held[pos:], state.opening)
        state.opening = state.opening and verdict in (_SPACE, _UNSURE)
        if verdict == _TO_END:
            # A run of calls, then prose on a line of its own: whether the run is the reply's
            # one run with no fence around it is known only at the end (formats/bare.py).
            state.triggered = True
            return True
        possible = verdict in (_OPEN, _COMPLETE, _UNSURE)
        # Unsure: the next character may decide (a first key closing, a name's value): judged
        # again on every chunk while the tail is short, then like any held value.
        unsure = verdict == _UNSURE and len(held) - pos < _UNSURE_MAX
        state.judged = len(held) - pos if possible and not unsure else -1
        state.after_run = verdict == _COMPLETE
        # Until a fence's first line ends, any character may decide it (`json` then a newline
        # then `{`, or prose): judge again on every chunk, which the line's bound keeps cheap.
        state.fence_open = possible and _fence_line_open(held, pos)
        return verdict != _NO

    def _judge(self, text: str, opening: bool = False) -> str:
        """Could `text` (a tail start) still be a bare or fenced call? `_SPACE` (whitespace so
        far), `_NO`, `_OPEN` (it may be), `_UNSURE` (it may be, and the next character may
        decide), `_COMPLETE` (a complete run of calls: what follows decides) or `_TO_END` (a
        run, then prose on its own line: the end decides). At the reply's `opening`, what a
        call or a framing may open a reply with is judged too (Family.openers, .framing)."""
        s = text.lstrip()
        if not s:
            return _SPACE
        if s[0] == "`":
            return self._judge_fence(s)
        if s[0] not in "{[":
            return self._judge_opener(s) if opening else _NO
        verdict, end = self._read_run(s, 0)
        if verdict != _COMPLETE or skip(s, end, ";") == len(s):
            return verdict
        # The run is over: prose may follow it on a line of its own, not on the run's last line
        # (`{...} is how you would call it` is an example), as in values.bare_run's callers.
        return _TO_END if _ends_line(s, end) else _NO

    def _judge_opener(self, s: str) -> str:
        """`s` opens with an opener (a call: the end decides), or may still become one or a
        framing (the next character may decide), or neither."""
        marks = self._marks
        if s.startswith(marks.openers):
            return _TO_END
        if len(s) < _UNSURE_MAX and s in marks.opening_prefixes:
            return _UNSURE
        return _NO

    def _read_run(self, s: str, i: int) -> tuple[str, int]:
        """Read calls one after another from s[i] (a `{` or `[`) as values.bare_run does:
        (`_OPEN`, _) while the text ends inside the run, (`_NO`, _) when a value in it is no
        call, (`_COMPLETE`, end) when the run's last item ends at `end` and something else, or
        nothing yet, follows."""
        end = i
        while True:
            k = skip(s, end, ";")
            if k == len(s):
                return _COMPLETE, end
            stray = next((t for t in _STRAY_CLOSERS if s.startswith(t, k)), None)
            if stray is not None:  # LFM2's opener-less list: formats/tagged.py decides
                end = k + len(stray)
                continue
            if (after := past_end_tokens(s, k)) > k:
                end = after  # <|eot_id|> after Llama's JSON call, and the like
                continue
            if any(tag.startswith(s[k:]) for tag in _CLOSERS):
                return _UNSURE, end  # an end token may be arriving: its next character decides
            if s[k] not in "{[":
                return _COMPLETE, end
            opens = self._may_open_a_call(s, k)
            if not opens:
                return (_NO if opens is False else _UNSURE), end
            v = value_end(s, k)
            if v is None:
                return _OPEN, end
            if not self._declared_calls(s[k:v]):
                return _NO, end
            end = v

    def _declared_calls(self, value: str) -> bool:
        """Whether a complete value is calls to declared tools, as values.bare_run reads it."""
        found = json_calls(value, self._schemas, strict=True)
        return bool(found) and all(name in self._schemas for name, _, _ in found or ())

    def _may_open_a_call(self, s: str, i: int) -> bool | None:
        """Decide early on JSON answers: an object whose first key no call has, or an array of
        anything but objects (or pythonic calls), is text, however long it grows. None while
        the text so far cannot tell (the first key or the name still arriving)."""
        j = skip(s, i + 1)
        if j == len(s):
            return None
        if s[i] == "[":
            if s[j] != "{":
                return _may_be_pythonic(s, j)  # `[f(a=1)]`; `[1, 2]`, `[note]` are text
            end = value_end(s, j)
            if end is not None:  # the first element is whole: it decides for the array
                return self._declared_calls(s[j:end])
            i, j = j, skip(s, j + 1)
            if j == len(s):
                return None
        key = _first_key(s, j)
        if key is None:
            return None
        if key == "name":
            name = _string_value(s, j)
            return None if name is None else name in self._schemas
        return key in _FIRST_KEYS or key in self._schemas

    def _judge_fence(self, s: str) -> str:
        """Could `s`, a tail opening with a backtick, still be the reply's one fenced call?

        The same rules as formats/bare.py's `_fenced`, decided as early as the text allows: the
        first line is a short info string, the block's text must open like calls, read
        string-aware (a fence inside their arguments closes nothing), the closing fence follows
        them, and a second fence after the block makes it an example.
        """
        if len(s) < len(FENCE) or not s.startswith(FENCE):
            return _OPEN if FENCE.startswith(s) else _NO
        nl = s.find("\n")
        info = s[len(FENCE) : nl if nl >= 0 else len(s)]
        if len(info) > FENCE_INFO_MAX or FENCE in info:
            return _NO
        i = skip(s, nl + 1) if nl >= 0 else len(s)
        if i == len(s):
            return _OPEN
        if s[i] not in "{[":
            return self._fenced_marker(s[i:])
        verdict, end = self._read_run(s, i)
        if verdict != _COMPLETE:
            return verdict
        close = skip(s, end, ";")
        if not s.startswith(FENCE, close):
            return _OPEN if FENCE.startswith(s[close:]) else _NO
        return _NO if FENCE in s[close + len(FENCE) :] else _OPEN

    def _fenced_marker(self, body: str) -> str:
        """A fence whose text opens with a marker (```` ```xml\n<response>{..} ````: Hermes 2
        Pro's fenced tagged call, formats/tagged.py) holds a call the end decides, fence and
        all; while the text may still become a marker the next character decides."""
        if body.startswith(self._triggers):
            return _TO_END
        short = body[: self._marks.longest]
        return _UNSURE if short in self._marks.prefixes and short == body else _NO

    def _overlap(self, text: str) -> int:
        """How many characters at the end of `text` could begin a marker (the longest such)."""
        marks = self._marks
        tail = text[-marks.longest + 1 :] if marks.longest > 1 else ""
        if tail in marks.prefixes:
            return len(tail)  # what the loop finds first (a marker's text held whole), unscanned
        # A marker's beginning starts with a marker's first character: only those places of
        # the tail are tried, earliest (longest) first, instead of every length.
        for found in marks.starts.finditer(tail):
            if tail[found.start() :] in marks.prefixes:
                return len(tail) - found.start()
        return 0

    # -- reassembly (4.4) -------------------------------------------------------------------

    def _assemble(self, state: _Choice, frag: dict[str, Any]) -> None:
        fn = frag.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name = fn.get("name")
        name = name if isinstance(name, str) else ""
        args = fn.get("arguments")
        args = args if isinstance(args, str) else ("" if args is None else compact(args))
        frag_id = frag.get("id")
        frag_id = str(frag_id) if frag_id else ""
        index = frag.get("index")
        index = index if isinstance(index, int) else None
        call = self._target(state, index, frag_id, name)
        if call is None:
            call = _Call(index, len(state.native))
            state.native.append(call)
        if frag_id:
            call.id = frag_id
        call.name += name
        call.arguments += args

    def _target(self, state: _Choice, index: Any, frag_id: str, name: str) -> _Call | None:
        calls = state.native
        if index is not None:
            same = [c for c in calls if c.index == index]
            if not same:
                return None
            last = same[-1]
            if (frag_id and last.id and frag_id != last.id) or (name and last.arguments):
                return None
            return last
        if frag_id:
            return next((c for c in calls if c.id == frag_id), None)
        if not name:
            return calls[-1] if calls else None
        return None

    # -- the end of a choice ----------------------------------------------------------------

    def _finalize(
        self,
        state: _Choice,
        finish: str | None,
        usage: Any,
        ending: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """The chunks that end a choice: its held text, its calls, its finish reason. `ending`:
        the upstream's finishing choice and chunk, whose own fields the last chunk keeps."""
        state.finished = True
        out: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        text = state.held
        if state.native:
            calls = self._native_calls(state, finish)
        elif state.in_reasoning is not None or self._reasoning_may_call(state):
            calls, finish = self._reasoning_calls(state, finish)
        elif state.held and self._recover and not state.given_up:
            sent = "".join(state.released)
            found = find_calls(_as_came(state, sent), self._schemas, finish == "length")
            if found is not None and (found.content or "").startswith(sent):
                text = (found.content or "")[len(sent) :]
                calls = self._recovered(found, finish)
                finish = finish_after(found) if calls else finish
        if calls and finish is None:
            # The upstream ended without a finish reason: the client still gets one (4.3).
            finish = "tool_calls"
        state.held = ""
        base = {"index": state.index}
        if text:
            out.append(self._make(base, {"content": text}, None))
        for k, call in enumerate(calls):
            out.append(self._make(base, {"tool_calls": [{"index": k, **call}]}, None))
        if finish is not None:
            out.append(self._final(base, finish, usage, ending))
        return out

    def _final(
        self,
        base: dict[str, Any],
        finish: str,
        usage: Any,
        ending: tuple[dict[str, Any], dict[str, Any]] | None,
    ) -> dict[str, Any]:
        """The chunk that carries a choice's finish reason (see `_finalize`)."""
        if ending is None:
            final = self._make(base, {}, finish)
        else:
            # Not its logprobs: they are of the text, which went in a chunk of its own.
            skip = ("delta", "finish_reason", "logprobs")
            kept = {k: v for k, v in ending[0].items() if k not in skip}
            final = _with_extras(self._make({**kept, **base}, {}, finish), ending[1])
        if usage is not None:
            final["usage"] = usage
        return final

    def _recovered(self, found: Found, finish: str | None) -> list[dict[str, Any]]:
        """The calls found in the text, their events noted (none when only framing was)."""
        if not found.calls:
            return []
        calls, arg_events = build_calls(found.calls, finish, found.cut)
        self.events.append(recovered_event(len(calls), found.format))
        self.events.extend(arg_events)
        return calls

    def _reasoning_calls(
        self, state: _Choice, finish: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The calls written in a choice's reasoning (its content empty), as a whole reply's."""
        found = state.in_reasoning or self._find_in_reasoning(state, finish)
        if found is None:
            return [], finish
        calls, arg_events = build_calls(found.calls, finish, found.cut)
        self.events.append(recovered_event(len(calls), found.format, in_reasoning=True))
        self.events.extend(arg_events)
        return calls, finish_after(found)

    def _find_in_reasoning(self, state: _Choice, finish: Any) -> Found | None:
        found = find_calls("".join(state.reasoning or ()), self._schemas, finish == "length")
        return found if found is not None and found.calls else None  # framing alone: no call

    def _native_calls(self, state: _Choice, finish: str | None) -> list[dict[str, Any]]:
        ordered = sorted(
            state.native, key=lambda c: (c.index if c.index is not None else 0, c.order)
        )
        calls: list[dict[str, Any]] = []
        used: set[str] = set()
        for call in ordered:
            if not call.name.strip():
                continue  # a call whose name stays empty is dropped
            n = len(calls)
            call_id = call.id or f"call_{n}"
            while call_id in used:
                call_id = f"{call_id}_{n}"
            used.add(call_id)
            result = repair_arguments(call.arguments, finish)
            event = argument_event(call.name, result.outcome)
            if event is not None:
                self.events.append(event)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": result.arguments},
                }
            )
        return calls

    # -- chunks -----------------------------------------------------------------------------

    def _chunk(
        self, choice: dict[str, Any], delta: dict[str, Any], finish: str | None
    ) -> dict[str, Any]:
        base = {k: v for k, v in choice.items() if k not in ("delta", "finish_reason")}
        return self._make(base, delta, finish)

    def _make(
        self, base: dict[str, Any], delta: dict[str, Any], finish: str | None
    ) -> dict[str, Any]:
        return {**self._template(), "choices": [{**base, "delta": delta, "finish_reason": finish}]}

    def _wrap(self, choice: dict[str, Any]) -> dict[str, Any]:
        return {**self._template(), "choices": [choice]}

    def _template(self) -> dict[str, Any]:
        latest = self._latest
        return {k: latest[k] for k in _TEMPLATE_KEYS if k in latest}


_OPEN_LINE_MAX = len(FENCE) + FENCE_INFO_MAX + 64
# A `{` or `[` opening a line after prose (formats/bare.LINE_OPEN, its newline in the text), and
# its tag among the marks: it sorts after every marker, so a marker opening with `[` wins a tie.
_LINE_AFTER = re.compile(r"\n[ \t]*[{\[]")
_LINE = "\uffffline"
# The judge's verdicts on a tail start (`StreamToolProcessor._judge`).
_SPACE, _NO, _OPEN, _COMPLETE, _TO_END = "space", "no", "open", "complete", "to_end"
_UNSURE = "unsure"  # it may be, and the next character may decide
_UNSURE_MAX = 256  # a tail judged unsure is judged again on every chunk up to this length
# What may follow a complete call in a bare or fenced reply, seen while it may still be arriving.
# Closers a run may be followed by whose opening tag a server ate.
_STRAY_CLOSERS = ("</tool_call>", "<|tool_call_end|>")
_CLOSERS = (*_STRAY_CLOSERS, *END_TOKENS)


def _as_came(state: _Choice, sent: str) -> str:
    """The choice's text as the upstream sent it: what went out and what is held, with the
    framing the stream dropped put back."""
    text = sent + state.held
    if state.dropped is None:
        return text
    at, framing = state.dropped
    return text[:at] + framing + text[at:]


def _fence_line_open(held: str, pos: int) -> bool:
    """Whether the tail from `pos` is a fence whose first line has not ended, or whose text has
    not begun (nothing but whitespace after the first line)."""
    tail = held[pos:].lstrip()
    if not tail.startswith(FENCE) or len(tail) > _OPEN_LINE_MAX:
        # Past the bound (blank lines without end) it is judged like any held value, when a
        # character that can close one arrives: a delay in a pathological reply, never a
        # wrong answer, and no judging of the whole tail on every chunk.
        return False
    nl = tail.find("\n")
    return nl < 0 or not tail[nl + 1 :].strip()


def _first(text: str, tags: list[str] | tuple[str, ...], start: int) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for tag in tags:
        k = text.find(tag, start)
        if k >= 0 and (best is None or k < best[0]):
            best = (k, tag)
    return best


def _rstrip_to(text: str, end: int, floor: int) -> str:
    """text[:end] without the whitespace right before `end` (kept from `floor` on)."""
    return text[: skip_back(text, end, floor)]


def _line_open(held: str, start: int) -> tuple[int, str] | None:
    """The first `{` or `[` opening a line in `held` after `start` (its newline at or after
    `start`), tagged `_LINE`."""
    m = _LINE_AFTER.search(held, start)
    return None if m is None else (m.end() - 1, _LINE)


def _ends_line(s: str, i: int) -> bool:
    """Whether only spaces stand between s[i] and the line's end (formats/bare.py's rule)."""
    while i < len(s) and s[i] in " \t\r":
        i += 1
    return i == len(s) or s[i] == "\n"


def _may_be_pythonic(s: str, j: int) -> bool | None:
    """Whether `s[j:]`, after a list's `[`, can still open a pythonic call: a dotted name, then
    `(` (pythonic.pythonic_calls); None while the name may still be arriving."""
    if not (s[j].isalpha() or s[j] == "_"):
        return False
    k = j + 1
    while k < len(s) and (s[k].isalnum() or s[k] in "_."):
        k += 1
    k = skip(s, k)
    return None if k == len(s) else s[k] == "("


def _string_value(s: str, j: int) -> str | None:
    """The string value of the key starting at `s[j]`; None while incomplete (or not a string,
    which the full judge then decides)."""
    end = _quoted_end(s, j)
    if end is None:
        return None
    k = skip(s, end + 1)
    if k >= len(s) or s[k] != ":":
        return None
    k = skip(s, k + 1)
    if k >= len(s) or s[k] not in "\"'":
        return None
    close = _quoted_end(s, k)
    return None if close is None else s[k + 1 : close]


def _quoted_end(s: str, j: int) -> int | None:
    """Where the quoted string starting at `s[j]` closes; None while it is still open."""
    if j >= len(s) or s[j] not in "\"'":
        return None
    k = j + 1
    while k < len(s):
        if s[k] == "\\":
            k += 2
            continue
        if s[k] == s[j]:
            return k
        k += 1
    return None


def _first_key(s: str, j: int) -> str | None:
    """The key starting at `s[j]` (quoted, or bare as in almost-JSON); None while incomplete;
    "" when no key can start there (`{}`, `{1`)."""
    quote = s[j]
    if quote in "\"'":
        end = _quoted_end(s, j)
        return None if end is None else s[j + 1 : end]
    if quote.isalpha() or quote == "_":
        k = j
        while k < len(s) and (s[k].isalnum() or s[k] in "_-"):
            k += 1
        return None if k == len(s) else s[j:k]
    return ""
