"""Rescue plans: what a transcript's messages are (`proxy.agent.rescue.transcript`), a plan made
for one turn applied byte for byte to the next (`proxy.agent.rescue.plans`), and where plans
are remembered (`proxy.state.rescues`)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import orjson
import pytest

from proxy.agent.rescue import plans
from proxy.agent.rescue.compaction import SUMMARY_END, SUMMARY_HEAD, Cut
from proxy.agent.rescue.transcript import (
    conversation_key,
    digest,
    leading,
    role,
    text_of,
)
from proxy.state.rescues import DEFAULT_CONVERSATIONS, PLANS_PER_KEY, Fold, MemoryPlans, Plan


def call(call_id: str, path: str) -> dict[str, Any]:
    function = {"name": "read_file", "arguments": orjson.dumps({"path": path}).decode()}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": "read_file", "content": text}


def turn_n() -> list[dict[str, Any]]:
    """A coding-agent transcript: 12 messages, long results at 3, 7 and 9."""
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in calc.py."},
        call("c1", "calc.py"),
        result("c1", "def add(a, b):\n    return a - b\n" * 300),
        {"role": "assistant", "content": "add() subtracts. Fixing it."},
        {"role": "user", "content": "Also check test_calc.py."},
        call("c2", "test_calc.py"),
        result("c2", "def test_add():\n    assert add(1, 2) == 3\n" * 300),
        call("c3", "README.md"),
        result("c3", "# calc\n" * 800),
        {"role": "assistant", "content": "Both look right now."},
        {"role": "user", "content": "Run them."},
    ]


def turn_n_plus_1() -> list[dict[str, Any]]:
    return [
        *turn_n(),
        call("c4", "pytest.ini"),
        result("c4", "[pytest]\n"),
        {"role": "assistant", "content": "All tests pass."},
        {"role": "user", "content": "Thanks. Now add a sub() function."},
    ]


def plan_for(messages: list[dict[str, Any]]) -> Plan:
    """What the path does: clear 3, 7 and 9, then fold 1..5 (which drops 3 from the plan)."""
    cleared = plans.pruned(Plan(), messages, [3, 7, 9])
    return plans.folded(cleared, messages, Cut(start=1, end=6, anchor=5), "- add() fixed")


# transcript


def test_role() -> None:
    assert role({"role": "tool"}) == "tool"
    assert role({"role": 3}) == ""
    assert role({}) == ""
    assert role("user") == ""
    assert role(None) == ""


def test_text_of() -> None:
    assert text_of("hi") == "hi"
    assert text_of("") == ""
    assert text_of([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert text_of([]) == ""
    assert text_of([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]) is None
    assert text_of([{"type": "text"}]) is None
    assert text_of([{"type": "text", "text": None}]) is None
    assert text_of(["a"]) is None
    assert text_of(None) is None
    assert text_of({"type": "text", "text": "a"}) is None


def test_leading_counts_the_system_prompts_at_the_start_only() -> None:
    system = {"role": "system", "content": "s"}
    developer = {"role": "developer", "content": "d"}
    user = {"role": "user", "content": "u"}
    assert leading([system, developer, system, user, system]) == 3
    assert leading([user, system]) == 0
    assert leading([system, developer]) == 2
    assert leading([]) == 0
    assert leading(["system", system]) == 0


def test_digest_sees_every_byte_and_the_order() -> None:
    a, b = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}
    assert digest([a, b]) == digest([copy.deepcopy(a), copy.deepcopy(b)])
    assert len(digest([a])) == 32 and int(digest([a]), 16) >= 0
    assert digest([a, b]) != digest([b, a])
    assert digest([a]) != digest([{"role": "user", "content": "a "}])
    assert digest([a]) != digest([{"content": "a", "role": "user"}])  # key order is bytes too
    assert digest(["ab"]) != digest(["a", "b"])  # each message is delimited
    assert digest([]) != digest([""])
    assert digest([a]) != digest([a, a])


def test_digest_of_what_json_cannot_encode_is_stable() -> None:
    lone = {"role": "user", "content": "\ud800"}
    assert digest([lone]) == digest([{"role": "user", "content": "\ud800"}])
    assert digest([lone]) != digest([{"role": "user", "content": "\ud801"}])
    assert digest([lone]) != digest([{"role": "user", "content": ""}])


def test_digest_delimits_what_json_cannot_encode() -> None:
    """An int too big for JSON is digested by its repr, which is not self-delimiting: the
    pieces are told apart by their lengths."""
    big = 2**70
    assert str(big) == "1180591620717411303424"
    assert digest([big]) != digest([11805916, 20717411303424])
    assert digest([big]) == digest([2**70])


def test_conversation_key_precedence() -> None:
    messages = turn_n()
    both = {"messages": messages, "prompt_cache_key": "pck", "user": "u1"}
    assert conversation_key(both, "o") == conversation_key(
        {"messages": [], "prompt_cache_key": "pck"}, "o"
    )
    assert conversation_key({"messages": messages, "user": "u1"}, "o") == conversation_key(
        {"user": "u1"}, "o"
    )
    # a `user` is not taken for a prompt_cache_key of the same value
    assert conversation_key({"user": "pck"}, "o") != conversation_key(
        {"prompt_cache_key": "pck"}, "o"
    )
    # empty or non-string values are ignored
    by_messages = conversation_key({"messages": messages}, "o")
    assert conversation_key({"messages": messages, "prompt_cache_key": ""}, "o") == by_messages
    assert conversation_key({"messages": messages, "user": 7}, "o") == by_messages
    assert by_messages != conversation_key({"messages": messages, "user": "u1"}, "o")


def test_conversation_key_by_leading_messages() -> None:
    first, second = {"messages": turn_n()}, {"messages": turn_n_plus_1()}
    assert conversation_key(first, "o") == conversation_key(second, "o")
    assert conversation_key(first, "o") != conversation_key(first, "other owner")
    other = copy.deepcopy(first)
    other["messages"][1]["content"] = "Fix the failing test in calc2.py."
    assert conversation_key(first, "o") != conversation_key(other, "o")
    other_system = copy.deepcopy(first)
    other_system["messages"][0]["content"] = "You are a careful coding agent."
    assert conversation_key(first, "o") != conversation_key(other_system, "o")
    later = copy.deepcopy(first)
    later["messages"][5]["content"] = "Also check setup.py."
    assert conversation_key(first, "o") == conversation_key(later, "o")


def test_conversation_key_per_owner_for_every_kind() -> None:
    for body in ({"prompt_cache_key": "k"}, {"user": "k"}, {"messages": turn_n()}, {}):
        assert conversation_key(body, "alice") != conversation_key(body, "bob")
        assert conversation_key(body, "alice") == conversation_key(copy.deepcopy(body), "alice")
    assert conversation_key({"messages": "no"}, "o") == conversation_key({}, "o")


# plans


def test_plan_for_a_turn_records_digests_of_the_clients_messages() -> None:
    messages = turn_n()
    plan = plan_for(messages)
    assert plan.pruned == ((7, digest([messages[7]])), (9, digest([messages[9]])))
    assert plan.fold == Fold(
        start=1,
        end=6,
        anchor=5,
        digest=digest(messages[1:6]),
        summary="- add() fixed",
        summarised=4,
    )


def test_apply_clears_then_folds() -> None:
    messages = turn_n()
    note = f"{SUMMARY_HEAD.format(count=4)}\n- add() fixed\n{SUMMARY_END}"
    assert plans.apply(plan_for(messages), messages) == [
        messages[0],
        {"role": "user", "content": f"{note}\n\nAlso check test_calc.py."},
        messages[6],
        {**messages[7], "content": "[result cleared, 12,600 chars]"},
        messages[8],
        {**messages[9], "content": "[result cleared, 5,600 chars]"},
        messages[10],
        messages[11],
    ]
    assert messages == turn_n()  # the client's messages are not changed


def test_apply_the_empty_plan_changes_nothing() -> None:
    messages = turn_n()
    assert plans.apply(Plan(), messages) == messages


def test_a_plan_applies_to_the_next_turn_byte_for_byte() -> None:
    plan = plan_for(turn_n())
    assert plans.matches(plan, turn_n_plus_1())
    before = plans.apply(plan, turn_n())
    after = plans.apply(plan, turn_n_plus_1())
    assert orjson.dumps(after[: len(before)]) == orjson.dumps(before)
    assert [orjson.dumps(m) for m in after[: len(before)]] == [orjson.dumps(m) for m in before]
    assert after[len(before) :] == turn_n_plus_1()[len(turn_n()) :]


def test_a_plan_applies_to_the_turn_it_was_made_from() -> None:
    assert plans.matches(plan_for(turn_n()), turn_n())
    assert plans.matches(Plan(), [])


@pytest.mark.parametrize(
    ("index", "field", "value"),
    [
        (7, "content", "def test_add():\n    assert add(1, 2) == 4\n" * 300),  # a cleared one
        (9, "tool_call_id", "c9"),  # a cleared one, another field
        (1, "content", "Fix the failing test in calc.py!"),  # folded
        (5, "content", "Also check test_calc.py"),  # the anchor
        (3, "content", "def add(a, b):\n    return a + b\n" * 300),  # folded, once cleared
    ],
)
def test_a_plan_does_not_apply_to_an_edited_history(index: int, field: str, value: str) -> None:
    plan = plan_for(turn_n())
    edited = turn_n_plus_1()
    edited[index][field] = value
    assert not plans.matches(plan, edited)


def test_a_plan_ignores_edits_of_messages_it_did_not_change() -> None:
    plan = plan_for(turn_n())
    edited = turn_n_plus_1()
    edited[8]["tool_calls"][0]["id"] = "c33"
    edited[0]["content"] = "You are a very good coding agent."
    assert plans.matches(plan, edited)


def test_a_plan_does_not_apply_to_a_shorter_transcript() -> None:
    plan = plan_for(turn_n())
    messages = turn_n()
    assert plans.matches(plan, messages[:10])  # 9 is the last message it needs
    assert not plans.matches(plan, messages[:9])
    fold_only = Plan(fold=plan.fold)
    assert plans.matches(fold_only, messages[:6])
    assert not plans.matches(fold_only, messages[:5])
    assert not plans.matches(fold_only, [])
    removed = [*messages[:2], *messages[3:]]  # a message taken out: everything moves
    assert not plans.matches(fold_only, removed)
    assert not plans.matches(Plan(pruned=plan.pruned), removed)


def test_best_is_the_most_recent_plan_that_applies() -> None:
    messages = turn_n_plus_1()
    first = plans.pruned(Plan(), messages, [3])
    second = plan_for(turn_n())
    other = copy.deepcopy(messages)
    other[3]["content"] = "Something else." * 100
    third = plans.pruned(Plan(), other, [3, 7])  # made from another history
    assert plans.best([third, second, first], messages) is second
    assert plans.best([third, first, second], messages) is first
    assert plans.best([third], messages) is None
    assert plans.best([], messages) is None
    assert plans.best([third, second], other) is third


def test_pruned_adds_sorted_without_repeats() -> None:
    messages = turn_n()
    fold = Fold(1, 2, 1, "d", "S", 0)
    plan = plans.pruned(Plan(fold=fold), messages, [9])
    assert plan == Plan(pruned=((9, digest([messages[9]])),), fold=fold)
    more = plans.pruned(plan, messages, [7, 3, 9])
    assert more.pruned == tuple((i, digest([messages[i]])) for i in (3, 7, 9))
    assert more.fold is fold
    assert plans.pruned(more, messages, []) == more


def test_folded_drops_the_cleared_results_it_covers() -> None:
    messages = turn_n_plus_1()
    plan = plans.pruned(Plan(), messages, [3, 7, 9, 13])
    plan = plans.folded(plan, messages, Cut(start=1, end=10, anchor=5), "notes")
    assert plan.pruned == ((13, digest([messages[13]])),)
    assert plan.fold == Fold(1, 10, 5, digest(messages[1:10]), "notes", 8)
    # the cut's end is exclusive: a result right at it stays cleared
    edge = plans.folded(plans.pruned(Plan(), messages, [3, 9]), messages, Cut(1, 9, 5), "notes")
    assert edge.pruned == ((9, digest([messages[9]])),)


def test_folded_replaces_the_earlier_fold() -> None:
    messages = turn_n_plus_1()
    earlier = plan_for(turn_n())
    later = plans.folded(earlier, messages, Cut(start=1, end=12, anchor=11), "more notes")
    assert later.pruned == ()
    assert later.fold == Fold(1, 12, 11, digest(messages[1:12]), "more notes", 10)
    assert plans.matches(later, messages)
    out = plans.apply(later, messages)
    assert out[0] == messages[0] and out[2:] == messages[12:]
    assert out[1]["content"].endswith(f"{SUMMARY_END}\n\nRun them.")


# the store


def numbered(n: int) -> Plan:
    return Plan(pruned=((n, f"digest-{n}"),))


def test_plan_and_fold_are_frozen_values() -> None:
    assert Plan().empty
    assert not Plan(pruned=((3, "d"),)).empty
    fold = Fold(1, 4, 3, "d", "S", 2)
    assert not Plan(fold=fold).empty
    assert Plan(pruned=((3, "d"),), fold=fold) == Plan(pruned=((3, "d"),), fold=fold)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fold.summary = "T"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Plan().pruned = ()  # type: ignore[misc]


def test_the_store_defaults() -> None:
    store = MemoryPlans()
    assert (store.max_keys, store.per_key) == (DEFAULT_CONVERSATIONS, PLANS_PER_KEY)
    assert (DEFAULT_CONVERSATIONS, PLANS_PER_KEY) == (2048, 8)


async def test_plans_most_recent_first_and_per_key() -> None:
    store = MemoryPlans()
    assert await store.plans("a") == []
    assert len(store) == 0  # asking does not make an entry
    await store.remember("a", numbered(1))
    await store.remember("a", numbered(2))
    await store.remember("b", numbered(3))
    assert await store.plans("a") == [numbered(2), numbered(1)]
    assert await store.plans("b") == [numbered(3)]
    assert len(store) == 2


async def test_plans_returns_a_copy() -> None:
    store = MemoryPlans()
    await store.remember("a", numbered(1))
    (await store.plans("a")).clear()
    assert await store.plans("a") == [numbered(1)]


async def test_remember_in_place_of_the_plan_it_extends() -> None:
    store = MemoryPlans()
    for n in (1, 2, 3):
        await store.remember("a", numbered(n))
    await store.remember("a", numbered(4), replaces=numbered(2))
    assert await store.plans("a") == [numbered(4), numbered(3), numbered(1)]
    await store.remember("a", numbered(5), replaces=numbered(9))  # not there: nothing dropped
    assert await store.plans("a") == [numbered(5), numbered(4), numbered(3), numbered(1)]


async def test_remember_a_known_plan_moves_it_first_once() -> None:
    store = MemoryPlans()
    for n in (1, 2, 3):
        await store.remember("a", numbered(n))
    await store.remember("a", numbered(1))
    assert await store.plans("a") == [numbered(1), numbered(3), numbered(2)]


async def test_plans_per_key_are_bounded_oldest_dropped() -> None:
    store = MemoryPlans(per_key=3)
    for n in range(1, 6):
        await store.remember("a", numbered(n))
    assert await store.plans("a") == [numbered(5), numbered(4), numbered(3)]
    await store.remember("a", numbered(6), replaces=numbered(4))
    assert await store.plans("a") == [numbered(6), numbered(5), numbered(3)]


async def test_keys_are_bounded_least_recently_used_first() -> None:
    store = MemoryPlans(max_keys=2)
    await store.remember("a", numbered(1))
    await store.remember("b", numbered(2))
    await store.remember("c", numbered(3))  # a is the oldest
    assert len(store) == 2
    assert await store.plans("a") == []
    assert await store.plans("b") == [numbered(2)]  # read: b is now the most recent
    await store.remember("d", numbered(4))  # so c goes
    assert await store.plans("c") == []
    assert await store.plans("b") == [numbered(2)]
    assert await store.plans("d") == [numbered(4)]
    await store.remember("b", numbered(5))  # written: b most recent again
    await store.remember("e", numbered(6))  # so d goes
    assert await store.plans("d") == []
    assert await store.plans("b") == [numbered(5), numbered(2)]
    assert len(store) == 2
