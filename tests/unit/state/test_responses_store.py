"""Stored responses (`proxy.state.responses`): owners kept apart, the bounds by entries, bytes and
age (oldest first, with an injected clock), items found by id, and the item index kept right."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.state.responses import MemoryStore, StoredResponse

ALICE, BOB = "owner-alice", "owner-bob"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stored(
    response_id: str,
    owner: str = ALICE,
    *,
    inputs: list[str] | None = None,
    outputs: list[str] | None = None,
    pad: int = 0,
) -> StoredResponse:
    output = [
        {"id": i, "type": "message", "role": "assistant", "content": []} for i in outputs or []
    ]
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "output": output,
        "pad": "x" * pad,
    }
    items = [{"id": i, "type": "message", "role": "user", "content": "hi"} for i in inputs or []]
    return StoredResponse(owner, response, items)


def size(s: StoredResponse) -> int:
    return len(orjson.dumps(s.response)) + len(orjson.dumps(s.input_items))


def store(
    max_entries: int = 100, max_bytes: int = 1_000_000, max_age: float = 3600.0
) -> tuple[MemoryStore, Clock]:
    clock = Clock()
    return MemoryStore(max_entries, max_bytes, max_age, clock=clock), clock


def test_stored_response_id_and_items() -> None:
    s = stored("resp_1", inputs=["msg_in"], outputs=["msg_out"])
    assert s.id == "resp_1"
    assert [i["id"] for i in s.items()] == ["msg_in", "msg_out"]
    assert StoredResponse(ALICE, {"id": "r", "output": None}, []).items() == []


async def test_put_then_get() -> None:
    st, _ = store()
    s = stored("resp_1", inputs=["msg_1"])
    await st.put(s)
    assert await st.get(ALICE, "resp_1") is s
    assert len(st) == 1
    assert st.bytes == size(s)
    assert await st.get(ALICE, "resp_nope") is None


async def test_another_owner_sees_nothing() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_in"], outputs=["msg_out"]))
    assert await st.get(BOB, "resp_1") is None
    assert await st.item(BOB, "msg_in") is None
    assert await st.item(BOB, "msg_out") is None
    assert await st.delete(BOB, "resp_1") is False
    # and the owner's entry is untouched by the attempts
    assert await st.get(ALICE, "resp_1") is not None
    assert await st.item(ALICE, "msg_in") is not None
    assert len(st) == 1


async def test_item_finds_input_and_output_items() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_a", "msg_b"], outputs=["msg_c"]))
    a = await st.item(ALICE, "msg_a")
    c = await st.item(ALICE, "msg_c")
    assert a is not None and a["id"] == "msg_a" and a["role"] == "user"
    assert c is not None and c["id"] == "msg_c" and c["role"] == "assistant"
    assert await st.item(ALICE, "msg_zzz") is None


async def test_delete() -> None:
    st, _ = store()
    s = stored("resp_1", inputs=["msg_a"], outputs=["msg_b"])
    await st.put(s)
    assert await st.delete(ALICE, "resp_1") is True
    assert await st.get(ALICE, "resp_1") is None
    assert await st.delete(ALICE, "resp_1") is False
    assert len(st) == 0
    assert st.bytes == 0


async def test_delete_removes_its_items_from_the_index() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_a"], outputs=["msg_b"]))
    await st.put(stored("resp_2", inputs=["msg_c"]))
    await st.delete(ALICE, "resp_1")
    assert await st.item(ALICE, "msg_a") is None
    assert await st.item(ALICE, "msg_b") is None
    assert "msg_a" not in st._items and "msg_b" not in st._items
    assert await st.item(ALICE, "msg_c") is not None


async def test_deleting_an_older_response_keeps_an_item_a_newer_one_holds() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_a"]))
    await st.put(stored("resp_2", inputs=["msg_a", "msg_b"]))  # the chain resent in full
    await st.delete(ALICE, "resp_1")
    found = await st.item(ALICE, "msg_a")
    assert found is not None and found["id"] == "msg_a"


async def test_put_again_replaces_without_double_counting() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_old"]))
    replacement = stored("resp_1", inputs=["msg_new"], pad=10)
    await st.put(replacement)
    assert len(st) == 1
    assert st.bytes == size(replacement)
    assert await st.get(ALICE, "resp_1") is replacement
    assert await st.item(ALICE, "msg_old") is None
    assert await st.item(ALICE, "msg_new") is not None


async def test_eviction_by_entries_oldest_first() -> None:
    st, _ = store(max_entries=2)
    for n in (1, 2, 3):
        await st.put(stored(f"resp_{n}", inputs=[f"msg_{n}"]))
    assert len(st) == 2
    assert await st.get(ALICE, "resp_1") is None
    assert await st.item(ALICE, "msg_1") is None
    assert await st.get(ALICE, "resp_2") is not None
    assert await st.get(ALICE, "resp_3") is not None
    await st.put(stored("resp_4"))
    assert await st.get(ALICE, "resp_2") is None
    assert await st.get(ALICE, "resp_3") is not None


async def test_eviction_by_bytes_oldest_first() -> None:
    one = stored("resp_1", pad=100)
    st, _ = store(max_bytes=2 * size(one) + 10)
    await st.put(one)
    await st.put(stored("resp_2", pad=100))
    assert len(st) == 2
    await st.put(stored("resp_3", pad=100))
    assert len(st) == 2
    assert await st.get(ALICE, "resp_1") is None
    assert await st.get(ALICE, "resp_2") is not None
    assert await st.get(ALICE, "resp_3") is not None
    assert st.bytes <= st.max_bytes
    assert st.bytes == size(stored("resp_2", pad=100)) + size(stored("resp_3", pad=100))


async def test_one_big_entry_evicts_several_small_ones() -> None:
    small = stored("resp_1")
    big = stored("resp_big", pad=3 * size(small))
    st, _ = store(max_bytes=size(big) + size(small))
    for n in (1, 2, 3):
        await st.put(stored(f"resp_{n}"))
    await st.put(big)
    assert await st.get(ALICE, "resp_big") is big
    assert await st.get(ALICE, "resp_3") is not None
    assert await st.get(ALICE, "resp_1") is None and await st.get(ALICE, "resp_2") is None
    assert st.bytes <= st.max_bytes


async def test_an_entry_larger_than_the_store_is_not_stored() -> None:
    st, _ = store(max_bytes=200)
    await st.put(stored("resp_small"))
    huge = stored("resp_huge", inputs=["msg_huge"], pad=500)
    assert size(huge) > 200
    await st.put(huge)
    assert await st.get(ALICE, "resp_huge") is None
    assert await st.item(ALICE, "msg_huge") is None
    assert await st.get(ALICE, "resp_small") is not None  # nothing evicted for it
    assert len(st) == 1


async def test_zero_entries_stores_nothing() -> None:
    st, _ = store(max_entries=0)
    await st.put(stored("resp_1"))
    assert len(st) == 0 and st.bytes == 0
    assert await st.get(ALICE, "resp_1") is None


async def test_age_expiry_with_an_injected_clock() -> None:
    st, clock = store(max_age=60.0)
    await st.put(stored("resp_1", inputs=["msg_1"]))
    clock.now += 60.0
    assert await st.get(ALICE, "resp_1") is not None  # exactly max_age: still kept
    clock.now += 0.5
    assert await st.item(ALICE, "msg_1") is None
    assert await st.get(ALICE, "resp_1") is None
    assert await st.delete(ALICE, "resp_1") is False
    assert len(st) == 0 and st.bytes == 0


async def test_expired_entries_go_when_something_new_is_put() -> None:
    st, clock = store(max_age=60.0)
    await st.put(stored("resp_old"))
    clock.now += 30
    await st.put(stored("resp_mid"))
    clock.now += 31  # resp_old is 61 s old, resp_mid 31 s
    await st.put(stored("resp_new"))
    assert len(st) == 2
    assert await st.get(ALICE, "resp_mid") is not None
    assert await st.get(ALICE, "resp_new") is not None


async def test_age_counts_from_the_put_not_from_reads() -> None:
    st, clock = store(max_age=10.0)
    await st.put(stored("resp_1"))
    for _ in range(3):
        clock.now += 4
        await st.get(ALICE, "resp_1")
    assert await st.get(ALICE, "resp_1") is None


async def test_an_item_id_another_owner_also_uses_does_not_hide_mine() -> None:
    # Item ids come from clients (input items keep the ids they were sent with).
    st, _ = store()
    await st.put(stored("resp_alice", ALICE, inputs=["msg_1"]))
    await st.put(stored("resp_bob", BOB, inputs=["msg_1"]))
    mine = await st.item(ALICE, "msg_1")
    assert mine is not None and mine["id"] == "msg_1"
    theirs = await st.item(BOB, "msg_1")
    assert theirs is not None


async def test_deleting_the_newer_holder_of_an_item_keeps_the_older_holders() -> None:
    st, _ = store()
    await st.put(stored("resp_1", inputs=["msg_a"]))
    await st.put(stored("resp_2", inputs=["msg_a"]))
    await st.delete(ALICE, "resp_2")
    assert await st.get(ALICE, "resp_1") is not None
    found = await st.item(ALICE, "msg_a")
    assert found is not None and found["id"] == "msg_a"
