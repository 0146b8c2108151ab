"""Latches shared with other processes: what a process tells its peers when its latches change.

A refusal learned by one worker or replica must apply in every other, or each would pay for it
again. The proxy tells the `LatchSync` it holds what changed here (a latch learned, an operator's
reset or expiry), and the sync carries it to the other processes and merges what they learned
into the local store. Two implementations: Redis pub/sub between replicas
(`proxy.state.redis`) and unix sockets between the workers of one machine
(`proxy.http.siblings`).

Merging is `LatchStore.merge_snapshot`, which only ever latches off or grows sets: the order in
which processes hear of each other's latches does not matter, and hearing twice is harmless.
Resets and expiries are the only moves back; they are carried as operations, not as state.
"""

from __future__ import annotations

from typing import Protocol


class LatchSync(Protocol):
    """Carries this process's latch changes to its peers, and theirs into its store."""

    async def start(self) -> None:
        """Connect and take in what the peers already know (never fails: a peer or Redis that
        is not there yet is tried again in the background)."""
        ...

    def learned(self, eid: str) -> None:
        """A latch on endpoint `eid` was learned here: share it. Never waits."""
        ...

    def forgot(self, eid: str | None, model: str | None) -> None:
        """An operator reset latches here (`LatchStore.reset`'s arguments): reset them
        everywhere."""
        ...

    def expired(self, older_than: float, now: float) -> None:
        """An operator expired latches here (`LatchStore.expire`'s arguments)."""
        ...

    async def close(self) -> None: ...


class NoSync:
    """One process alone: nothing to share."""

    async def start(self) -> None:
        return None

    def learned(self, eid: str) -> None:
        return None

    def forgot(self, eid: str | None, model: str | None) -> None:
        return None

    def expired(self, older_than: float, now: float) -> None:
        return None

    async def close(self) -> None:
        return None
