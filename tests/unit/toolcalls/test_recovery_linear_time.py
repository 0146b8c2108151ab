"""Recovery scans adversarial replies in linear time, counted in steps, not timed (BEHAVIOUR.md
4.1, research section 13); the step count itself is checked to see a quadratic scan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from proxy.toolcalls import scan
from tests.steps import growth, needs_traced_scans
from tests.unit.toolcalls.whole_reply import repeated, run

# Steps are counted, not timed (tests/steps.py): a 0.5 s limit failed on a loaded 2-core machine
# (issue 13, item 16). Linear work grows with the input, here 8 times; a quadratic scan grows
# 64 times (a Next without its cache measured 40, a Scan without its budget 60).
SMALL = 2_000
LINEAR = 12  # 8 for linear work, with room for constant costs; far below quadratic
ADVERSARIAL = [
    "<tool_call>{ oops ",
    "<tool_call>{ oops </tool_call>",
    "[TOOL_CALLS]{ ",
    "[TOOL_CALLS]search{ ",
    "<function=search>{ ",
    "<function=search>\n<parameter=query>\n",
    "<function=search><parameter=query>x</parameter>y",
    "<function=",
    '<tool_call>{"a": "',
    "<tool_call>search<arg_key>",
    "to=functions.search{ ",
    "<start_function_call>call:search{",
    "call:search{query:<escape>",
    "<|python_tag|>search.call(",
    "functools[{ ",
    "<｜tool▁call▁begin｜>search<｜tool▁sep｜>{ ",
    '<function name="search"><param name="query"><![CDATA[',
    '<function name="search"><param name="query">x</param>y',
    '<function name="search"><param name="query">',
    "<|function_call|>{ ",
    "<|message_sep|>function call<|role_sep|>\n{ ",
]


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_adversarial_input_is_linear(unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish), SMALL) < LINEAR


@pytest.mark.usefixtures("counted")
def test_nested_openers_are_linear_and_not_calls() -> None:
    def make(size: int) -> Callable[[], object]:
        text = "<tool_call>{ " * (size // 13) + "}" * (size // 13)
        return lambda: run(text)

    assert growth(make, SMALL) < LINEAR
    text = "<tool_call>{ " * 15_000 + "}" * 15_000
    assert run(text) == (text, [], "stop")


@needs_traced_scans
def test_the_step_count_sees_a_quadratic_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The yardstick itself: with the Scan budget removed, a value opened after each marker is
    # rescanned to the end of the text, and the count must say so.
    def unbounded(self: Any, i: int) -> int | None:
        limit = self.limit(i)
        end = scan.value_end(self.s, i, limit)
        return scan.value_end(self.s, i) if end is None and limit < len(self.s) else end

    monkeypatch.setattr(scan.Scan, "value", unbounded)
    assert growth(repeated("<tool_call>{ oops ", "stop"), SMALL) > 4 * LINEAR


@needs_traced_scans
def test_the_step_count_sees_a_repeated_search(
    counted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # And with Next's cache removed, each opener searches to the end for a close tag that never
    # comes: C-level work that only the counted searches show.
    monkeypatch.setattr(scan.Next, "at", lambda self, pos: self._find(pos))
    assert growth(repeated("<tool_call>{ oops ", "stop"), SMALL) > 2 * LINEAR


@pytest.mark.parametrize(
    ("unit", "finish"),
    [("<tool_call>{ oops ", "stop"), ("[TOOL_CALLS]{ ", "length"), ("<tool_call>{ ", "length")],
)
def test_adversarial_input_stays_text(unit: str, finish: str) -> None:
    text = unit * 10_000
    assert run(text, finish) == (text, [], finish)
