"""Fitting one request into its window: the remembered rewrite, then pruning, then compaction.

Run by the agent layer's pre-flight check when a request would not fit and its upstream (or
the client's `x-latchgate-context` header) asks for `prune` or `compact` instead of a refusal,
and on every request of a conversation that was rewritten before, so each turn after a rewrite
is rewritten the same way (`proxy.agent.rescue.plans`). The pure pieces decide; this module asks
the plan store, asks the model for a summary, and reports what was done as one event. Asking for
a summary never fails the client's request: a summary that cannot be had falls back to what
pruning alone achieved, or to the refusal the request would have had.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.agent.rescue import compaction, plans, pruning, summary
from proxy.agent.rescue.transcript import conversation_key
from proxy.agent.sizing import estimate_chars, message_chars
from proxy.observe import events as ev
from proxy.path.job import Job
from proxy.state.rescues import Plan, PlanStore

# Sends one summary request (a chat body) and gives the answer's JSON, or a `Failed` saying why
# there is none (an error status, a timeout, a broken connection).
Summarise = Callable[[Job, dict[str, Any]], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Failed:
    """A summary request that got no answer to read, and why (for the notice and the log)."""

    why: str


@dataclass(frozen=True, slots=True)
class Budget:
    """What a request must fit: the window, the tokens the reply reserves, the chars per token."""

    window: int
    ceiling: int
    ratio: float
    tools: object = None
    prompt: int | None = None  # the request's tokens as the client sent it, when measured

    def tokens(self, messages: Sequence[Any]) -> int:
        return math.ceil(estimate_chars(messages, self.tools) / self.ratio)

    def size(self, message: object) -> int:
        return math.ceil(message_chars(message) / self.ratio)

    def sizes(self, messages: Sequence[Any]) -> list[int]:
        return [self.size(m) for m in messages]

    def fits(self, tokens: int) -> bool:
        return tokens + self.ceiling <= self.window

    @property
    def room(self) -> int:
        """Tokens the prompt may take once rewritten: the window less the reply's ceiling, or
        an eighth of the window when the client set none (a reply needs room to be written)."""
        return self.window - (self.ceiling or self.window // 8)


@dataclass(frozen=True, slots=True)
class Options:
    """The upstream's rescue settings."""

    mode: str
    keep_last: int = 5
    max_chars: int = 256
    summary_tokens: int = 1024


@dataclass(slots=True)
class Fitted:
    """What fitting did: the messages to send (None: the request is refused), the plan, the
    sizes before and after, and whether the plan is new or repeated from an earlier turn."""

    messages: list[Any] | None
    plan: Plan
    before: int
    after: int
    repeated: bool = False
    compact_failed: str = ""  # why compaction fell back, if it did
    refusal: str = ""  # the refusal's explanation, when `messages` is None


class Rescuer:
    """Fits requests for the agent layer, remembering each conversation's plan."""

    def __init__(self, store: PlanStore, summarise: Summarise) -> None:
        self.store = store
        self.summarise = summarise

    async def fit(
        self, job: Job, options: Options, budget: Budget, *, needed: bool
    ) -> Fitted | None:
        """The request's messages fitted to `budget`, or None when nothing needed doing: no
        earlier plan applies, and the request is not `needed` to be made smaller (it would not
        be refused as it is)."""
        messages = job.body.get("messages")
        if not isinstance(messages, list):
            return None
        key = conversation_key(job.body, job.client_auth or "")
        earlier = plans.best(await self.store.plans(key), messages)
        if earlier is None and not needed:
            return None
        before = budget.tokens(messages) if budget.prompt is None else budget.prompt
        if earlier is None:
            fitted = Fitted(list(messages), Plan(), before, before)
        else:
            fitted = Fitted(plans.apply(earlier, messages), earlier, before, before, repeated=True)
            fitted.after = budget.tokens(fitted.messages or [])
            if budget.fits(fitted.after):
                return fitted
        fitted = await self._extend(job, options, budget, messages, fitted)
        if fitted.messages is not None and fitted.plan != earlier:
            await self.store.remember(key, fitted.plan, replaces=earlier)
        return fitted

    async def _extend(
        self, job: Job, options: Options, budget: Budget, messages: list[Any], fitted: Fitted
    ) -> Fitted:
        """A new plan: more results cleared, then (compact) a fold; or a refusal.

        `prune` clears only as many results as fitting needs. `compact` clears as many as
        bring the request under three quarters of the window, and folds when clearing cannot:
        both rewrites lose the prompt cache, so the one that is done leaves room for many more
        turns (cleared to just under the window, the next turn would need another rewrite).
        """
        fitted.repeated = False
        compact = options.mode == "compact"
        goal = min(budget.room, int(compaction.TRIGGER * budget.window)) if compact else budget.room
        plan = fitted.plan
        for _ in range(4):  # per-message sizes round apart from the whole's: a second look
            more = _prune(options, budget, messages, plan, fitted.after - goal)
            if more == plan:
                break
            plan = more
            fitted.messages = plans.apply(plan, messages)
            fitted.after = budget.tokens(fitted.messages)
            if fitted.after <= goal:
                break
        fitted.plan = plan
        if compact and fitted.after > compaction.TRIGGER * budget.window:
            folded = await self._fold(job, options, budget, messages, plan, fitted.after)
            if isinstance(folded, str):
                fitted.compact_failed = folded  # what pruning achieved is what there is
            else:
                rewritten = plans.apply(folded, messages)
                after = budget.tokens(rewritten)
                if budget.fits(after) or not budget.fits(fitted.after):
                    fitted.plan, fitted.messages, fitted.after = folded, rewritten, after
        if budget.fits(fitted.after):
            return fitted
        fitted.messages = None
        fitted.refusal = _not_enough(fitted.plan, fitted.compact_failed)
        return fitted

    async def _fold(
        self,
        job: Job,
        options: Options,
        budget: Budget,
        messages: list[Any],
        plan: Plan,
        total: int,
    ) -> Plan | str:
        """`plan` with the oldest stretch folded into a summary, or why it could not be."""
        view = _pruned_view(plan, messages)
        cut = compaction.plan(view, budget.sizes(view), budget.window, total, earlier=plan.fold)
        if cut is None:
            return "no older stretch could be folded (the latest turns alone fill the window)"
        earlier = plan.fold
        indices = cut.summarised()
        if earlier is not None:  # continued: only what its summary does not cover yet
            indices = [i for i in indices if i >= earlier.end or i == earlier.anchor]
        ceiling = max(min(options.summary_tokens, budget.window // 8), 64)
        said = earlier.summary if earlier is not None else None
        overhead = len(summary.INSTRUCTIONS) + len(summary.CONTINUE) + len(said or "")
        room = budget.window - ceiling - math.ceil(overhead / budget.ratio) - 64
        # The ratio was learnt on the request's JSON, whose escapes and keys make more characters
        # a token than the plain transcript a summary pass sends: a margin keeps it in the window.
        pieces = summary.passes(messages, indices, int(room * budget.ratio * 0.7))
        if not pieces or room <= 0:
            return "the older turns are too long to summarise in this window"
        for piece in pieces:
            got = await self._summary(job, summary.request(job.events.model, piece, said, ceiling))
            if isinstance(got, Failed):
                return f"the model gave no summary ({got.why})"
            said = got
        return plans.folded(plan, messages, cut, said or "")

    async def _summary(self, job: Job, body: dict[str, Any]) -> str | Failed:
        """One summary pass, asked twice at most: the side request carries no temperature (a
        hosted reasoning model refuses one), so a small model's sampling may end it before it
        wrote anything, and a second sample usually does."""
        failed = Failed("no answer")
        for _ in range(2):
            answer = await self.summarise(job, body)
            if isinstance(answer, Failed):
                failed = answer
                continue
            said = summary.read(answer)
            if said is not None:
                return said
            failed = Failed("an empty answer")
        return failed


def _pruned_view(plan: Plan, messages: list[Any]) -> list[Any]:
    """`messages` with `plan`'s results cleared but no fold: positions as the client sent them."""
    return plans.apply(Plan(pruned=plan.pruned), messages)


def _prune(options: Options, budget: Budget, messages: list[Any], plan: Plan, excess: int) -> Plan:
    """`plan` with as many more results cleared (outside its fold) as free `excess` tokens."""
    view = _pruned_view(plan, messages)
    start = plan.fold.end if plan.fold is not None else 0
    found = pruning.plan(
        view[start:],
        budget.sizes(view[start:]),
        excess,
        keep_last=options.keep_last,
        max_chars=options.max_chars,
        measure=budget.size,
    )
    if not found.indices:
        return plan
    return plans.pruned(plan, messages, [start + i for i in found.indices])


def _not_enough(plan: Plan, compact_failed: str) -> str:
    """Why a rescued request is still refused, as the end of the refusal's first sentence."""
    cleared = len(plan.pruned)
    if plan.fold is not None:
        done = f"even with {plan.fold.summarised} older messages folded into a summary"
    elif cleared:
        done = f"even with {cleared} old tool result(s) cleared"
    else:
        done = "and no old tool result was large enough to clear"
    return f"{done}; compaction failed: {compact_failed}" if compact_failed else done


def refusal(fitted: Fitted, budget: Budget) -> str:
    """The message of the refusal of a request rescue could not fit: what it tried, and what
    the client can do."""
    reply = f" plus {budget.ceiling} reserved for the reply" if budget.ceiling else ""
    return (
        f"latchgate did not send this request: it is about {fitted.after:,} tokens{reply}, "
        f"over this model's {budget.window:,}-token context window, {fitted.refusal}. "
        'Shorten the messages, lower max_tokens, set on_overflow = "compact" (or send '
        "x-latchgate-context: compact) to fold older turns into a summary, or use a model with "
        "a larger context window."
    )


def describe(fitted: Fitted) -> str:
    """What was done, for the response header and the log: `pruned 7 results, folded 12
    messages into a summary, 31,200 -> 6,900 tokens`."""
    parts = []
    if fitted.plan.pruned:
        count = len(fitted.plan.pruned)
        parts.append(f"pruned {count} result{'' if count == 1 else 's'}")
    if fitted.plan.fold is not None:
        parts.append(f"folded {fitted.plan.fold.summarised} messages into a summary")
    parts.append(f"{fitted.before:,} -> {fitted.after:,} tokens")
    said = ", ".join(parts)
    return f"{said} (as on the previous turn)" if fitted.repeated else said


def report(job: Job, fitted: Fitted, window: int) -> None:
    """The event (metric, log field, notice) and the response header for what was done."""
    action = "compacted" if fitted.plan.fold is not None else "pruned"
    if fitted.compact_failed:
        then = "the request is refused" if fitted.messages is None else "it was pruned instead"
        job.events.emit(
            ev.CONTEXT_RESCUED,
            f"Compaction failed ({fitted.compact_failed}); {then}.",
            action="compacted",
            outcome="failed",
        )
    if fitted.messages is None:
        job.events.emit(ev.CONTEXT_RESCUED, "", action=action, outcome="refused")
        return
    told = describe(fitted)
    job.rescue.told = told
    outcome = "repeated" if fitted.repeated else "new"
    notice = (
        f"The conversation was rewritten to fit {job.upstream.name}'s {window:,}-token window: "
        f"{told}."
    )
    job.events.emit(
        ev.CONTEXT_RESCUED,
        notice,
        action=action,
        outcome=outcome,
        before=str(fitted.before),
        after=str(fitted.after),
    )
