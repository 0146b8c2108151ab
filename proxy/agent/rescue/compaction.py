"""Compaction: the oldest stretch of a conversation folded into a summary, by the package's rules.

When clearing old tool results is not enough, the messages between the system prompts and a kept
tail are replaced by a summary the model writes of them. The arithmetic is the package's
(`planCompaction`): act only once the request is past three quarters of the window; the kept
tail fills at most 35 % of it; leading system prompts are never folded; an earlier summary is
continued, not summarised again (the new fold starts where the old one did and reaches further).

The tail starts on a user message, because a transcript that resumes mid-exchange (a tool
result without its call, an assistant turn with no user turn before it) is one servers refuse.
The summary goes into that user message, beside its own words, rather than into a message of
its own: two user messages in a row, or a system message after the first, are what strict chat
templates (Gemma's, older Mistral's) refuse. In a long agent run there is often no user message
late enough to start a 35 % tail: then the tail starts on an assistant turn, and the last user
message before it (the task) is kept word for word at the head of the fold, with the summary of
the work since after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.agent.rescue.transcript import leading, role
from proxy.state.rescues import Fold

TRIGGER = 0.75  # act once the request is past this share of the window
TAIL = 0.35  # the kept tail fills at most this share of it

SUMMARY_HEAD = (
    "[latchgate: {count} earlier message(s) of this conversation were folded into this summary "
    "to fit the model's context window]"
)
SUMMARY_END = "[end of summary]"


@dataclass(frozen=True, slots=True)
class Cut:
    """Where to fold: messages `start` to `end` (exclusive) become one user message built on
    the user message at `anchor`."""

    start: int
    end: int
    anchor: int

    def summarised(self) -> list[int]:
        """The indices the summary stands for: the folded messages but the anchor."""
        return [i for i in range(self.start, self.end) if i != self.anchor]


def plan(
    messages: Sequence[Any],
    sizes: Sequence[int],
    window: int,
    total: int,
    earlier: Fold | None = None,
) -> Cut | None:
    """Where to fold `messages` (their sizes in tokens, the request `total` tokens) for a
    `window`-token model, or None: under three quarters of the window, no tail of at most 35 %
    that starts on a user message or an assistant turn, or (continuing `earlier`) no fold that
    reaches further than it did."""
    if total <= TRIGGER * window:
        return None
    start = leading(messages) if earlier is None else earlier.start
    budget = TAIL * window
    tail = [0] * (len(messages) + 1)  # tail[i]: tokens of messages[i:]
    for i in range(len(messages) - 1, -1, -1):
        tail[i] = tail[i + 1] + sizes[i]
    reach = earlier.end if earlier is not None else start  # a fold must end past this
    cut = _user_cut(messages, tail, start, budget, reach) or _turn_cut(
        messages, tail, start, budget, reach
    )
    return cut


def _user_cut(
    messages: Sequence[Any], tail: list[int], start: int, budget: float, reach: int
) -> Cut | None:
    """The earliest user message that starts a tail within `budget`, with something before it
    to fold and ending the fold past `reach`; the summary goes in front of its words."""
    for i in range(max(start + 1, reach), len(messages)):
        if role(messages[i]) == "user" and tail[i] <= budget:
            return Cut(start, i + 1, i)
    return None


def _turn_cut(
    messages: Sequence[Any], tail: list[int], start: int, budget: float, reach: int
) -> Cut | None:
    """The earliest assistant turn that starts a tail within `budget`, after a user message and
    something else to fold, and past `reach`; the summary goes after that user message's
    words."""
    anchor = None
    for i in range(start, len(messages)):
        kind = role(messages[i])
        if kind == "user":
            anchor = i
        elif (
            kind == "assistant"
            and anchor is not None
            and i - start >= 2
            and i > reach
            and tail[i] <= budget
        ):
            return Cut(start, i, anchor)
    return None


def folded_message(
    anchor: dict[str, Any], summary: str, count: int, before: bool
) -> dict[str, Any]:
    """The user message a fold becomes: the anchor's own content with the summary in front of
    it (`before`: the summary is of what came before the anchor) or after it."""
    note = f"{SUMMARY_HEAD.format(count=count)}\n{summary.strip()}\n{SUMMARY_END}"
    content = anchor.get("content")
    if isinstance(content, list):
        part = {"type": "text", "text": note}
        merged: Any = [part, *content] if before else [*content, part]
    else:
        text = content if isinstance(content, str) else ""
        merged = f"{note}\n\n{text}" if before else f"{text}\n\n{note}"
    return {**anchor, "content": merged}


def apply(messages: Sequence[Any], fold: Fold) -> list[Any]:
    """`messages` with `fold` applied (its range and digest already checked by the caller)."""
    anchor = messages[fold.anchor]
    before = fold.anchor == fold.end - 1
    merged = folded_message(anchor, fold.summary, fold.summarised, before)
    return [*messages[: fold.start], merged, *messages[fold.end :]]
