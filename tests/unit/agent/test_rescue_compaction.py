"""Compaction (`proxy.agent.rescue.compaction`): where a fold cuts (the trigger, the 35 % tail,
the user or assistant turn it starts on, an earlier fold continued), the message a fold becomes,
and the transcript it leaves."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.agent.rescue.compaction import (
    SUMMARY_END,
    SUMMARY_HEAD,
    TAIL,
    TRIGGER,
    Cut,
    apply,
    folded_message,
    plan,
)
from proxy.agent.rescue.transcript import digest
from proxy.state.rescues import Fold

WINDOW = 1000  # so the trigger is 750 tokens and the tail at most 350


def transcript(roles: str) -> list[dict[str, Any]]:
    """Messages from a role string: s(ystem) d(eveloper) u(ser) a(ssistant) t(ool)."""
    names = {"s": "system", "d": "developer", "u": "user", "a": "assistant", "t": "tool"}
    return [{"role": names[c], "content": f"{names[c]} {i}"} for i, c in enumerate(roles)]


def tails(sizes: list[int]) -> list[int]:
    return [sum(sizes[i:]) for i in range(len(sizes))]


def note(count: int, summary: str) -> str:
    return f"{SUMMARY_HEAD.format(count=count)}\n{summary}\n{SUMMARY_END}"


def fold_of(messages: list[dict[str, Any]], cut: Cut, summary: str = "S") -> Fold:
    return Fold(
        start=cut.start,
        end=cut.end,
        anchor=cut.anchor,
        digest=digest(messages[cut.start : cut.end]),
        summary=summary,
        summarised=len(cut.summarised()),
    )


def test_the_package_constants() -> None:
    assert TRIGGER == 0.75
    assert TAIL == 0.35


def test_nothing_below_the_trigger() -> None:
    messages = transcript("suauaua")
    sizes = [100] * 7
    assert plan(messages, sizes, WINDOW, 700) is None
    assert plan(messages, sizes, WINDOW, 750) is None  # exactly three quarters: not past it
    assert plan(messages, sizes, WINDOW, 751) == Cut(1, 6, 5)


def test_the_largest_user_tail_within_35_percent() -> None:
    messages = transcript("suauauaua")
    sizes = [50, 100, 100, 100, 100, 100, 100, 100, 50]
    assert tails(sizes) == [800, 750, 650, 550, 450, 350, 250, 150, 50]
    cut = plan(messages, sizes, WINDOW, 800)
    # the user message at 5 starts a tail of exactly 350 (allowed); the one at 3 one of 550
    assert cut == Cut(start=1, end=6, anchor=5)
    assert cut.anchor == cut.end - 1
    assert messages[cut.anchor]["role"] == "user"
    assert cut.summarised() == [1, 2, 3, 4]


def test_a_tail_one_token_over_moves_to_the_next_user_message() -> None:
    messages = transcript("suauauaua")
    sizes = [50, 100, 100, 100, 100, 101, 100, 100, 50]
    assert tails(sizes)[5] == 351
    assert plan(messages, sizes, WINDOW, 800) == Cut(start=1, end=8, anchor=7)


def test_system_and_developer_prompts_are_never_folded() -> None:
    messages = transcript("sduauaua")
    sizes = [200, 200, 100, 100, 100, 100, 50, 50]
    cut = plan(messages, sizes, WINDOW, 900)
    assert cut == Cut(start=2, end=5, anchor=4)
    assert all(i >= 2 for i in cut.summarised())


def test_no_system_prompt_folds_from_the_first_message() -> None:
    messages = transcript("uauaua")
    sizes = [300, 300, 100, 100, 100, 50]
    assert plan(messages, sizes, WINDOW, 950) == Cut(start=0, end=3, anchor=2)


def test_a_user_message_with_nothing_before_it_is_no_cut() -> None:
    """The first user message starts a short tail, but there is nothing before it to fold."""
    messages = transcript("sua")
    assert plan(messages, [700, 50, 50], WINDOW, 800) is None


def test_a_long_agent_run_keeps_the_task_and_starts_on_an_assistant_turn() -> None:
    # one task message, then call/result pairs
    messages = transcript("suatatatata")
    sizes = [50, 50, 50, 100, 50, 100, 50, 100, 50, 100, 50]
    assert tails(sizes) == [750, 700, 650, 600, 500, 450, 350, 300, 200, 150, 50]
    cut = plan(messages, sizes, WINDOW, 800)
    # the result at 5 would start a longer tail than the assistant turn at 6: never a tool
    assert cut == Cut(start=1, end=6, anchor=1)
    assert messages[cut.end]["role"] == "assistant"
    assert tails(sizes)[cut.end] <= TAIL * WINDOW
    assert cut.summarised() == [2, 3, 4, 5]


def test_a_long_agent_run_after_several_user_turns_anchors_on_the_last() -> None:
    messages = transcript("suauatatatata")
    sizes = [50, 50, 50, 50, 50, 100, 50, 100, 50, 100, 50, 100, 50]
    cut = plan(messages, sizes, WINDOW, 850)
    assert cut == Cut(start=1, end=8, anchor=3)
    assert messages[cut.anchor]["role"] == "user"
    assert cut.summarised() == [1, 2, 4, 5, 6, 7]


def test_a_user_tail_is_preferred_to_a_longer_assistant_tail() -> None:
    messages = transcript("suatatatua")
    sizes = [50, 50, 50, 100, 50, 100, 50, 100, 50, 50]
    assert tails(sizes)[6] == 250  # the assistant turn at 6 would keep more than the user's 100
    assert plan(messages, sizes, WINDOW, 800) == Cut(start=1, end=9, anchor=8)


def test_an_assistant_turn_needs_two_messages_to_fold() -> None:
    """A fold must stand for something: an assistant turn right after the task is no cut."""
    messages = transcript("suat")
    assert plan(messages, [600, 50, 50, 50], WINDOW, 800) is None


def test_nothing_when_the_last_turn_alone_is_over_35_percent() -> None:
    assert plan(transcript("suauat"), [50, 50, 50, 50, 50, 351], WINDOW, 800) is None
    assert plan(transcript("suaua"), [50, 100, 100, 100, 351], WINDOW, 800) is None
    assert plan(transcript("suauu"), [50, 100, 100, 100, 351], WINDOW, 800) is None


def test_a_huge_last_user_message_folds_into_an_assistant_tail() -> None:
    """The last user message is too long to keep in the tail, the answer after it is not."""
    messages = transcript("suauata")
    sizes = [50, 100, 100, 400, 50, 50, 50]
    cut = plan(messages, sizes, WINDOW, 800)
    assert cut == Cut(start=1, end=4, anchor=3)
    assert cut.summarised() == [1, 2]


def test_an_earlier_fold_is_continued_from_its_start() -> None:
    messages = transcript("suauauauaua")
    sizes = [50, 100, 100, 100, 100, 100, 100, 100, 100, 50, 50]
    earlier = Fold(start=1, end=4, anchor=3, digest="d", summary="S", summarised=2)
    cut = plan(messages, sizes, WINDOW, 900, earlier=earlier)
    assert cut == Cut(start=1, end=8, anchor=7)
    assert cut.end > earlier.end


def test_a_continued_fold_starts_where_the_earlier_one_did() -> None:
    """The new fold starts at the earlier fold's start, not after the system prompts."""
    messages = transcript("suauauaua")
    sizes = [50, 100, 100, 100, 100, 100, 100, 100, 50]
    assert plan(messages, sizes, WINDOW, 800) == Cut(1, 6, 5)
    earlier = Fold(start=3, end=5, anchor=3, digest="d", summary="S", summarised=1)
    assert plan(messages, sizes, WINDOW, 800, earlier=earlier) == Cut(3, 6, 5)


def test_an_earlier_fold_that_cannot_be_extended_is_no_cut() -> None:
    messages = transcript("suaua")
    sizes = [400, 100, 100, 100, 100]
    assert plan(messages, sizes, WINDOW, 800) == Cut(1, 4, 3)
    earlier = Fold(start=1, end=4, anchor=3, digest="d", summary="S", summarised=2)
    assert plan(messages, sizes, WINDOW, 800, earlier=earlier) is None
    further = Fold(start=1, end=5, anchor=3, digest="d", summary="S", summarised=3)
    assert plan(messages, sizes, WINDOW, 800, earlier=further) is None


def test_an_earlier_fold_is_extended_when_a_later_user_message_allows_it() -> None:
    messages = transcript("suauaua")
    sizes = [300, 100, 100, 100, 100, 50, 50]
    assert tails(sizes)[3] == 300 and tails(sizes)[5] == 100  # both within 350
    earlier = Fold(start=1, end=4, anchor=3, digest="d", summary="S" * 900, summarised=2)
    assert plan(messages, sizes, WINDOW, 900, earlier=earlier) == Cut(1, 6, 5)


def test_folded_message_with_string_content() -> None:
    anchor = {"role": "user", "content": "Now fix the tests.", "name": "alice"}
    assert folded_message(anchor, "  - did A\n- did B\n", 4, before=True) == {
        "role": "user",
        "name": "alice",
        "content": note(4, "- did A\n- did B") + "\n\nNow fix the tests.",
    }
    assert folded_message(anchor, "- did A", 4, before=False) == {
        "role": "user",
        "name": "alice",
        "content": "Now fix the tests.\n\n" + note(4, "- did A"),
    }
    assert anchor["content"] == "Now fix the tests."  # the client's message is not changed


def test_folded_message_note_wording() -> None:
    assert note(3, "x").startswith(
        "[latchgate: 3 earlier message(s) of this conversation were folded into this summary "
        "to fit the model's context window]\n"
    )
    assert note(3, "x").endswith("\nx\n[end of summary]")


def test_folded_message_with_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = [{"type": "text", "text": "Look at this."}, image]
    anchor = {"role": "user", "content": parts}
    summary_part = {"type": "text", "text": note(2, "S")}
    assert folded_message(anchor, "S", 2, before=True)["content"] == [summary_part, *parts]
    assert folded_message(anchor, "S", 2, before=False)["content"] == [*parts, summary_part]
    assert anchor["content"] == parts and len(parts) == 2


def test_folded_message_without_content() -> None:
    anchor: dict[str, Any] = {"role": "user", "content": None}
    assert folded_message(anchor, "S", 1, before=True)["content"] == note(1, "S") + "\n\n"
    assert folded_message({"role": "user"}, "S", 1, before=False)["content"] == "\n\n" + note(
        1, "S"
    )


def test_apply_a_user_tail_fold() -> None:
    messages = transcript("suauaua")
    fold = Fold(start=1, end=6, anchor=5, digest="d", summary="S", summarised=4)
    assert apply(messages, fold) == [
        messages[0],
        {"role": "user", "content": note(4, "S") + "\n\nuser 5"},
        messages[6],
    ]


def test_apply_an_assistant_tail_fold() -> None:
    messages = transcript("suatatata")
    fold = Fold(start=1, end=6, anchor=1, digest="d", summary="S", summarised=4)
    out = apply(messages, fold)
    assert out == [
        messages[0],
        {"role": "user", "content": "user 1\n\n" + note(4, "S")},
        *messages[6:],
    ]
    assert out[2] is messages[6]  # the tail is kept as the client sent it


def test_apply_a_huge_last_user_message_puts_the_summary_first() -> None:
    """An assistant-tail cut whose anchor is the last folded message: what the summary stands
    for all came before the anchor, so it goes in front, as for a user tail."""
    messages = transcript("suauata")
    fold = Fold(start=1, end=4, anchor=3, digest="d", summary="S", summarised=2)
    assert apply(messages, fold)[1] == {"role": "user", "content": note(2, "S") + "\n\nuser 3"}


ROLE_TURNS = st.lists(
    st.tuples(st.integers(1, 200), st.lists(st.integers(1, 3), max_size=4)),
    min_size=1,
    max_size=6,
)


def agent_transcript(systems: int, turns: list[tuple[int, list[int]]]) -> str:
    """A well-formed role string: system prompts, then user turns, each answered by zero or
    more tool rounds (a call and its results) and a final assistant message."""
    roles = "s" * systems
    for _, rounds in turns:
        roles += "u" + "".join("a" + "t" * results for results in rounds) + "a"
    return roles


@given(
    systems=st.integers(0, 2),
    turns=ROLE_TURNS,
    sizes=st.lists(st.integers(1, 300), min_size=64, max_size=64),
    extra=st.integers(0, 400),
)
def test_every_cut_follows_the_rules(
    systems: int, turns: list[tuple[int, list[int]]], sizes: list[int], extra: int
) -> None:
    roles = agent_transcript(systems, turns)
    messages = transcript(roles)
    sizes = sizes[: len(roles)] + [1] * max(len(roles) - len(sizes), 0)
    tail = [*tails(sizes), 0]
    total = sum(sizes) + extra
    budget = TAIL * WINDOW
    cut = plan(messages, sizes, WINDOW, total)
    if total <= TRIGGER * WINDOW:
        assert cut is None
        return
    after = range(systems + 1, len(roles))  # something before each to fold
    users = [i for i in after if roles[i] == "u" and tail[i] <= budget]
    answers = [i for i in after if roles[i] == "a" and tail[i] <= budget and i - systems >= 2]
    if users:  # the largest tail that starts on a user message
        assert cut == Cut(systems, users[0] + 1, users[0])
    elif answers:  # else on an assistant turn, the last user message before it kept
        assert cut == Cut(systems, answers[0], roles.rindex("u", 0, answers[0]))
    else:
        assert cut is None
    if cut is None:
        return
    out = apply(messages, fold_of(messages, cut))
    assert out[:systems] == messages[:systems]
    assert out[systems]["role"] == "user"
    assert out[systems + 1 :] == messages[cut.end :]
    kinds = [m["role"] for m in out]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(kinds))
    assert systems + 1 == len(out) or kinds[systems + 1] == "assistant"
