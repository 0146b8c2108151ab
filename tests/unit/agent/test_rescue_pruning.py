"""Pruning (`proxy.agent.rescue.pruning`): which tool results may be cleared, in what order, how
many, and what a cleared result says."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.agent.rescue.pruning import STUB, Pruning, candidates, is_stub, plan, stub


def tool(text: Any, call: str = "c", name: str = "read_file") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "name": name, "content": text}


def call(call_id: str = "c") -> dict[str, Any]:
    function = {"name": "read_file", "arguments": '{"path":"a.py"}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def agent_run(*texts: str) -> list[dict[str, Any]]:
    """A system prompt, a task, then one call and its result per text."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent. " * 20},
        {"role": "user", "content": "Fix the bug. " * 20},
    ]
    for n, text in enumerate(texts):
        out += [call(f"c{n}"), tool(text, f"c{n}")]
    return out


BIG = "x" * 500


def test_stub_format_has_a_thousands_separator() -> None:
    assert STUB.format(chars=10412) == "[result cleared, 10,412 chars]"
    assert STUB.format(chars=7) == "[result cleared, 7 chars]"
    assert STUB.format(chars=1234567) == "[result cleared, 1,234,567 chars]"


def test_stub_keeps_the_call_id_and_name_and_counts_the_chars() -> None:
    original = tool("y" * 10412, call="call_42", name="grep")
    cleared = stub(original)
    assert cleared == {
        "role": "tool",
        "tool_call_id": "call_42",
        "name": "grep",
        "content": "[result cleared, 10,412 chars]",
    }
    assert original["content"] == "y" * 10412  # the client's message is not changed


def test_stub_of_text_parts_counts_the_joined_text() -> None:
    parts = [{"type": "text", "text": "a" * 1000}, {"type": "text", "text": "b" * 999}]
    # the parts are joined with one newline: 1000 + 1 + 999
    assert stub(tool(parts))["content"] == "[result cleared, 2,000 chars]"


def test_stub_of_a_message_with_no_text() -> None:
    assert stub({"role": "tool", "tool_call_id": "c"}) == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "[result cleared, 0 chars]",
    }


def test_is_stub() -> None:
    assert is_stub(stub(tool(BIG)))
    assert is_stub(tool("[result cleared, 3 chars]"))
    assert is_stub(tool([{"type": "text", "text": "[result cleared, 3 chars]"}]))
    assert not is_stub(tool(BIG))
    assert not is_stub(tool("[result cleared, by the user]"))
    assert not is_stub(tool("see [result cleared, 3 chars]"))
    assert not is_stub(tool(None))
    assert not is_stub("[result cleared, 3 chars]")
    assert not is_stub(None)


def test_only_tool_messages_are_candidates() -> None:
    messages = [
        {"role": "system", "content": BIG},
        {"role": "developer", "content": BIG},
        {"role": "user", "content": BIG},
        {"role": "assistant", "content": BIG},
        tool(BIG),
        {"role": "function", "content": BIG},
        {"content": BIG},
        "not a message",
    ]
    assert candidates(messages, keep_last=0, max_chars=100) == [4]


def test_the_latest_results_are_kept() -> None:
    messages = agent_run(BIG, BIG, BIG, BIG, BIG)  # results at 3, 5, 7, 9, 11
    assert candidates(messages, keep_last=0, max_chars=100) == [3, 5, 7, 9, 11]
    assert candidates(messages, keep_last=1, max_chars=100) == [3, 5, 7, 9]
    assert candidates(messages, keep_last=3, max_chars=100) == [3, 5]
    assert candidates(messages, keep_last=5, max_chars=100) == []
    assert candidates(messages, keep_last=50, max_chars=100) == []


def test_keep_last_counts_short_results_too() -> None:
    """The latest `keep_last` tool results are kept whatever their size: a short latest result
    does not let an older long one be cleared in its place."""
    messages = agent_run(BIG, BIG, "ok")  # results at 3, 5, 7
    assert candidates(messages, keep_last=1, max_chars=100) == [3, 5]
    assert candidates(messages, keep_last=2, max_chars=100) == [3]


def test_short_results_are_not_candidates() -> None:
    messages = agent_run("x" * 99, "x" * 100, "x" * 101, BIG)
    assert candidates(messages, keep_last=1, max_chars=100) == [5, 7]
    assert candidates(messages, keep_last=1, max_chars=101) == [7]
    assert candidates(messages, keep_last=1, max_chars=1) == [3, 5, 7]


def test_stubbed_results_are_not_candidates_again() -> None:
    messages = agent_run(BIG, BIG, BIG, BIG)
    messages[5] = stub(messages[5])
    # a stub of a huge result is itself long enough to pass a small max_chars
    assert len(messages[5]["content"]) >= 20
    assert candidates(messages, keep_last=1, max_chars=20) == [3, 7]


def test_text_parts_count_and_other_parts_are_not_clearable() -> None:
    text_parts = [{"type": "text", "text": "a" * 300}, {"type": "text", "text": "b" * 300}]
    image = [
        {"type": "text", "text": "a" * 600},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    malformed = [{"type": "text", "text": 5}]
    messages = agent_run(BIG, BIG, BIG, BIG, BIG)
    messages[3]["content"] = text_parts
    messages[5]["content"] = image
    messages[7]["content"] = malformed
    messages[9]["content"] = None
    assert candidates(messages, keep_last=1, max_chars=500) == [3]


def test_plan_clears_the_oldest_first_and_stops_when_enough() -> None:
    messages = agent_run(BIG, BIG, BIG, BIG, BIG)
    sizes = [100] * len(messages)
    sizes[3], sizes[5], sizes[7], sizes[9] = 112, 212, 312, 412
    # 100 freed by the first, 300 by two, 600 by three
    assert plan(messages, sizes, 1, keep_last=1, max_chars=100) == Pruning((3,), 100)
    assert plan(messages, sizes, 100, keep_last=1, max_chars=100) == Pruning((3,), 100)
    assert plan(messages, sizes, 101, keep_last=1, max_chars=100) == Pruning((3, 5), 300)
    assert plan(messages, sizes, 300, keep_last=1, max_chars=100) == Pruning((3, 5), 300)
    assert plan(messages, sizes, 301, keep_last=1, max_chars=100) == Pruning((3, 5, 7), 600)


def test_plan_with_nothing_to_free_clears_nothing() -> None:
    messages = agent_run(BIG, BIG, BIG)
    sizes = [200] * len(messages)
    assert plan(messages, sizes, 0, keep_last=1, max_chars=100) == Pruning((), 0)
    assert plan(messages, sizes, -50, keep_last=1, max_chars=100) == Pruning((), 0)


def test_plan_returns_every_candidate_when_not_enough() -> None:
    messages = agent_run(BIG, BIG, BIG, BIG)
    sizes = [150] * len(messages)
    assert plan(messages, sizes, 10_000, keep_last=1, max_chars=100) == Pruning(
        (3, 5, 7), 3 * (150 - 12)
    )
    assert plan(messages, sizes, 10_000, keep_last=9, max_chars=100) == Pruning((), 0)


def test_plan_counts_a_dozen_tokens_per_stub_by_default() -> None:
    messages = agent_run(BIG, BIG)
    assert plan(messages, [100] * 6, 10_000, keep_last=1, max_chars=100) == Pruning((3,), 88)
    assert plan(messages, [5] * 6, 10_000, keep_last=1, max_chars=100) == Pruning((3,), 0)


def test_plan_measures_the_stub_it_would_leave() -> None:
    messages = agent_run("x" * 1000, "x" * 2000, BIG)
    seen: list[dict[str, Any]] = []

    def measure(message: dict[str, Any]) -> int:
        seen.append(message)
        return len(message["content"])

    found = plan(messages, [100] * 8, 10_000, keep_last=1, max_chars=100, measure=measure)
    # the stubs are "[result cleared, 1,000 chars]" (29) and "[result cleared, 2,000 chars]"
    assert found == Pruning((3, 5), (100 - 29) * 2)
    assert seen == [stub(messages[3]), stub(messages[5])]


@pytest.mark.parametrize(("cost", "freed"), [(0, 100), (99, 1), (100, 0), (500, 0)])
def test_plan_never_counts_a_stub_as_growing_the_request(cost: int, freed: int) -> None:
    messages = agent_run(BIG, BIG)
    found = plan(messages, [100] * 6, 10_000, keep_last=1, max_chars=100, measure=lambda _: cost)
    assert found == Pruning((3,), freed)
