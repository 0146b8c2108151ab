"""Non-finite numbers and unreadable siblings (issue 18): `1e999`, `NaN` and `Infinity` make a
JSON value unreadable instead of becoming null, "NaN" or inf; a JSON call holding one is no call;
and inside a marker one unreadable call does not drop the readable ones beside it (a marker
vouches for its calls), whole and streamed. With no marker a list must be nothing but calls.
"""

from __future__ import annotations

import json

import pytest

from proxy.toolcalls.arguments import loads_lenient, repair_arguments
from proxy.toolcalls.recovery import process_response
from tests.toolcall_case import Case
from tests.unit.toolcalls.test_recovery import whole_result
from tests.unit.toolcalls.test_stream import client_view, run, split_random

NON_FINITE = [
    '{"x": 1e999}',
    '{"x": -1e999}',
    '{"x": NaN}',
    '{"x": Infinity}',
    '{"x": -Infinity}',
    '{"x": inf}',
    "{'x': nan}",
    '{"x": [1, 2, 1e400]}',
    '{"x": {"y": NaN}}',
]


@pytest.mark.parametrize("text", NON_FINITE)
def test_non_finite_numbers_make_the_value_unreadable(text: str) -> None:
    assert loads_lenient(text) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"x": 1e308}', {"x": 1e308}),
        ('{"x": 1e-999}', {"x": 0.0}),  # underflow is a finite zero
        ('{"x": "NaN", "y": "Infinity"}', {"x": "NaN", "y": "Infinity"}),  # strings stay
        ("{NaN: 1, inf: 2}", {"NaN": 1, "inf": 2}),  # bare keys, not numbers
        ("{'x': -2.5, 'y': 10}", {"x": -2.5, "y": 10}),
    ],
)
def test_finite_values_still_read(text: str, value: object) -> None:
    parsed = loads_lenient(text)
    assert parsed is not None and parsed[0] == value


@pytest.mark.parametrize("text", NON_FINITE[:5])
def test_native_arguments_with_non_finite_numbers_pass_unchanged_and_flagged(text: str) -> None:
    assert repair_arguments(text, "stop").outcome == "unparseable"
    assert repair_arguments(text, "stop").arguments == text
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": text}}
    body = {"choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    new, events = process_response(body, [])
    assert new is None  # nothing to change: the arguments go on as the model wrote them
    assert [e.labels for e in events] == [{"outcome": "unparseable"}]


GOOD = '{"name": "get_time", "arguments": {"tz": "UTC"}}'
GOOD2 = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
BAD = '{"name": "run", "arguments": {"cmd": "x", "ratio": NaN}}'
HUGE = '{"name": "run", "arguments": {"cmd": "x", "ratio": 1e999}}'
TIME = ("get_time", {"tz": "UTC"})
PARIS = ("get_weather", {"city": "Paris"})

CASES = [
    # A marker vouches for its calls: the unreadable one is dropped, the others kept.
    Case("nonfinite_mistral_array_sibling", f"[TOOL_CALLS] [{GOOD}, {BAD}, {GOOD2}]",
         None, [TIME, PARIS], "mistral"),
    Case("nonfinite_granite_array_sibling", f"<|tool_call|>[{HUGE}, {GOOD}]",
         None, [TIME], "granite"),
    Case("nonfinite_llama3_sequence_sibling",
         f"<|python_tag|>{GOOD}; {BAD}; {GOOD2}".replace('"arguments"', '"parameters"'),
         None, [TIME, PARIS], "llama3"),
    Case("nonfinite_hermes_two_objects_in_one_tag",
         f"<tool_call>\n{HUGE}\n{GOOD}\n</tool_call>", None, [TIME], "hermes"),
    # After the last readable call an unreadable value stays text, as it did.
    Case("nonfinite_llama3_trailing_bad_stays_text",
         f"<|python_tag|>{GOOD}; {BAD}", f"; {BAD}", [TIME], "llama3"),
    # A marker with no readable call stays text; the next marker's call is still read.
    Case("nonfinite_hermes_bad_tag_then_good_tag",
         f"<tool_call>{BAD}</tool_call>\n<tool_call>{GOOD}</tool_call>",
         f"<tool_call>{BAD}</tool_call>", [TIME], "hermes"),
    # Negatives: the text stays as it was.
    Case("nonfinite_hermes_alone", f"<tool_call>{HUGE}</tool_call>", None, [], None),
    Case("nonfinite_bare_alone", BAD, None, [], None),
    Case("nonfinite_bare_list_sibling", f"[{GOOD}, {BAD}]", None, [], None),
    Case("nonfinite_bare_sequence_sibling", f"{GOOD}\n{HUGE}", None, [], None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_whole(case: Case) -> None:
    content, calls, finish = whole_result(case)
    if case.format is None:
        assert (content, calls, finish) == (case.text, [], "stop")
        return
    assert content == case.content
    assert [(n, json.loads(a)) for _, n, a in calls] == case.calls
    assert all("NaN" not in a and "Infinity" not in a for _, _, a in calls)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_streamed_like_whole(case: Case, seed: int | None) -> None:
    pieces = list(case.text) if seed is None else split_random(case.text, seed)
    out, _ = run(pieces, list(case.tools))
    assert client_view(out) == whole_result(case)
