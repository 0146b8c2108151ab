"""Rescue plans: how a conversation's transcript was made to fit its window, remembered.

Pruning old tool results and folding old turns into a summary (`proxy.agent.rescue`) both
rewrite a conversation's prefix, so a server's prompt cache is lost. It is lost once, not on
every turn, because the rewrite is remembered here and the next turn of the same conversation is
rewritten the same way: its prefix stays byte-identical and the server's cache holds. A plan
records, for each message it changed, the digest of the message as the client sent it, so a plan
is only ever applied to the transcript it was made from (a client that edited its history gets a
new plan, never a wrong one).

`PlanStore` is the interface the path uses; `MemoryPlans` is the one-process store, bounded by
conversations (the least recently used go first) and by plans per conversation key (a coarse key
such as a `user` field is shared by several conversations, told apart by their digests). A store
that replicas share implements the same two coroutines. Defined here, below the agent layer that
makes and applies plans, like the latch store's `Refusal`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

DEFAULT_CONVERSATIONS = 2048
PLANS_PER_KEY = 8


@dataclass(frozen=True, slots=True)
class Fold:
    """Messages `start` to `end` (exclusive) replaced by one user message: the user message at
    `anchor` (inside the range, kept word for word) with `summary` of the others beside it."""

    start: int
    end: int
    anchor: int
    digest: str  # of the folded messages as the client sent them
    summary: str
    summarised: int  # messages the summary stands for (the anchor is not one of them)


@dataclass(frozen=True, slots=True)
class Plan:
    """One conversation's rewrite: the tool results cleared (index, digest of the original) and
    at most one fold."""

    pruned: tuple[tuple[int, str], ...] = ()
    fold: Fold | None = None

    @property
    def empty(self) -> bool:
        return not self.pruned and self.fold is None


class PlanStore(Protocol):
    """Where rescue plans live, per conversation key."""

    async def plans(self, key: str) -> list[Plan]:
        """The plans remembered under `key`, most recent first."""
        ...

    async def remember(self, key: str, plan: Plan, replaces: Plan | None = None) -> None:
        """Remember `plan` under `key` as the most recent, in place of `replaces` (the plan it
        extends, which no later turn of that conversation needs)."""
        ...


class MemoryPlans:
    """Plans kept in this process: `max_keys` conversation keys, `per_key` plans each."""

    def __init__(self, max_keys: int = DEFAULT_CONVERSATIONS, per_key: int = PLANS_PER_KEY):
        self.max_keys = max_keys
        self.per_key = per_key
        self._plans: OrderedDict[str, list[Plan]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._plans)

    async def plans(self, key: str) -> list[Plan]:
        found = self._plans.get(key)
        if found is None:
            return []
        self._plans.move_to_end(key)
        return list(found)

    async def remember(self, key: str, plan: Plan, replaces: Plan | None = None) -> None:
        kept = [p for p in self._plans.pop(key, []) if p != replaces and p != plan]
        self._plans[key] = [plan, *kept][: self.per_key]
        while len(self._plans) > self.max_keys:
            self._plans.popitem(last=False)
