"""Stored responses: what `previous_response_id`, `item_reference` and `GET /v1/responses/{id}`
read back.

Each response is stored whole, with the input it answered already resolved (the chain before it
included), so continuing a conversation is one lookup, and evicting an old response never cuts
the history of a newer one short. Every entry belongs to the client key that made it (`owner`,
a digest: no key is ever stored); another key's entry is looked up exactly like a missing one.

`ResponseStore` is the interface the HTTP layer uses; `MemoryStore` is the one-process store,
bounded by entries, bytes and age (the oldest go first). A store that replicas share (Redis)
implements the same four coroutines.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response: the Response object and the input items it answered (with ids)."""

    owner: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return str(self.response["id"])

    def items(self) -> list[dict[str, Any]]:
        """Input and output items: the history a response continuing this one starts from."""
        output = self.response.get("output")
        return [*self.input_items, *(output if isinstance(output, list) else [])]


class ResponseStore(Protocol):
    """Where stored responses live."""

    async def put(self, stored: StoredResponse) -> None: ...

    async def get(self, owner: str, response_id: str) -> StoredResponse | None: ...

    async def delete(self, owner: str, response_id: str) -> bool: ...

    async def item(self, owner: str, item_id: str) -> dict[str, Any] | None: ...


@dataclass(slots=True)
class _Entry:
    stored: StoredResponse
    at: float
    size: int


class MemoryStore:
    """Responses kept in this process, oldest evicted first past `max_entries` or `max_bytes`,
    and forgotten after `max_age` seconds."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        # (owner, item id) -> the responses holding it, oldest first (ids come from clients, so
        # two keys may use the same one, and a conversation's later responses repeat it)
        self._items: dict[tuple[str, str], list[str]] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def put(self, stored: StoredResponse) -> None:
        try:
            size = len(orjson.dumps(stored.response)) + len(orjson.dumps(stored.input_items))
        except orjson.JSONEncodeError:
            # Input nested deeper than orjson writes (254 levels; it reads 1024): it could be
            # neither sized nor shared, so, like a response larger than the store, it is kept
            # nowhere, and a client continuing it is told it is not stored.
            return
        if size > self.max_bytes or self.max_entries == 0:
            return  # larger than the whole store: kept nowhere (the caller's id just expires)
        self._drop(stored.id)
        self._entries[stored.id] = _Entry(stored, self._clock(), size)
        self.bytes += size
        for item_id in _item_ids(stored):
            self._items.setdefault((stored.owner, item_id), []).append(stored.id)
        self._evict()

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        entry = self._entries.get(response_id)
        if entry is None or entry.stored.owner != owner:
            return None
        if self._clock() - entry.at > self.max_age:
            self._drop(response_id)
            return None
        return entry.stored

    async def delete(self, owner: str, response_id: str) -> bool:
        if await self.get(owner, response_id) is None:
            return False
        self._drop(response_id)
        return True

    async def item(self, owner: str, item_id: str) -> dict[str, Any] | None:
        for holder in reversed(self._items.get((owner, item_id), [])):
            stored = await self.get(owner, holder)
            if stored is not None:
                return next(i for i in stored.items() if i.get("id") == item_id)
        return None

    def _drop(self, response_id: str) -> None:
        entry = self._entries.pop(response_id, None)
        if entry is None:
            return
        self.bytes -= entry.size
        owner = entry.stored.owner
        for item_id in _item_ids(entry.stored):
            holders = self._items.get((owner, item_id))
            if holders is not None and response_id in holders:
                holders.remove(response_id)
                if not holders:
                    del self._items[(owner, item_id)]

    def _evict(self) -> None:
        now = self._clock()
        while self._entries:
            oldest_id, oldest = next(iter(self._entries.items()))
            expired = now - oldest.at > self.max_age
            if (
                not expired
                and len(self._entries) <= self.max_entries
                and self.bytes <= self.max_bytes
            ):
                return
            self._drop(oldest_id)


def _item_ids(stored: StoredResponse) -> set[str]:
    return {i["id"] for i in stored.items() if isinstance(i.get("id"), str)}
