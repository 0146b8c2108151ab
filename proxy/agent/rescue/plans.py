"""Applying a remembered rescue plan to a later turn, and making the plan for a new rewrite.

A plan (`proxy.state.rescues.Plan`) names the messages it changed by position and digest. A
later turn of the same conversation repeats those messages (clients resend the whole transcript
and append to it), so the plan applies to it as it did before and the rewritten prefix is the
same bytes. A turn that does not repeat them, because the client edited or shortened its history,
matches no plan and is planned afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.agent.rescue import compaction, pruning
from proxy.agent.rescue.transcript import digest
from proxy.state.rescues import Fold, Plan


def matches(plan: Plan, messages: Sequence[Any]) -> bool:
    """Whether every message `plan` changed is in `messages`, as it was when planned."""
    count = len(messages)
    for index, seen in plan.pruned:
        if index >= count or digest([messages[index]]) != seen:
            return False
    fold = plan.fold
    if fold is None:
        return True
    return fold.end <= count and digest(messages[fold.start : fold.end]) == fold.digest


def best(plans: Sequence[Plan], messages: Sequence[Any]) -> Plan | None:
    """The most recent plan that applies to `messages`, if any."""
    return next((plan for plan in plans if matches(plan, messages)), None)


def apply(plan: Plan, messages: Sequence[Any]) -> list[Any]:
    """`messages` rewritten by `plan` (which `matches` them): results cleared, then the fold."""
    out = list(messages)
    for index, _ in plan.pruned:
        out[index] = pruning.stub(out[index])
    return compaction.apply(out, plan.fold) if plan.fold is not None else out


def pruned(plan: Plan, messages: Sequence[Any], indices: Sequence[int]) -> Plan:
    """`plan` with the results at `indices` cleared too (digests of the client's messages)."""
    added = tuple((i, digest([messages[i]])) for i in indices)
    return Plan(pruned=tuple(sorted({*plan.pruned, *added})), fold=plan.fold)


def folded(plan: Plan, messages: Sequence[Any], cut: compaction.Cut, summary: str) -> Plan:
    """`plan` with `cut` folded into `summary` (replacing an earlier fold it continues); the
    results it cleared inside the fold are dropped from it, as the fold covers them."""
    fold = Fold(
        start=cut.start,
        end=cut.end,
        anchor=cut.anchor,
        digest=digest(messages[cut.start : cut.end]),
        summary=summary,
        summarised=len(cut.summarised()),
    )
    kept = tuple((i, d) for i, d in plan.pruned if not cut.start <= i < cut.end)
    return Plan(pruned=kept, fold=fold)
