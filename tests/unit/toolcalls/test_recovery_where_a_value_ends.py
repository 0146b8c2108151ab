"""Where a recovered call's value ends: an unclosed value does not swallow the rest of the reply
or the next call, and runs to the end only when the reply was truncated (BEHAVIOUR.md 4.1,
research section 13)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observe.events import ARGUMENTS
from proxy.toolcalls.recovery import find_calls, process_response, tool_schemas
from proxy.toolcalls.scan import Scan
from tests.unit.toolcalls.whole_reply import TOOLS, run, stays_text

# -- An unclosed value does not swallow the rest of the reply -------------------------------------

PROSE = "I will summarise the results once they arrive."
MISSING_BRACE = '<tool_call>{"name": "search", "arguments": {"query": "x"}</tool_call>'
GOOD = '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>'


def test_unclosed_value_ends_at_close_tag() -> None:
    assert run(f"{MISSING_BRACE}\n{PROSE}") == (PROSE, [("search", '{"query":"x"}')], "tool_calls")


def test_unclosed_value_does_not_merge_with_next_call() -> None:
    assert run(f"{MISSING_BRACE}\n{GOOD}\n{PROSE}") == (
        PROSE,
        [("search", '{"query":"x"}'), ("get_time", '{"tz":"UTC"}')],
        "tool_calls",
    )


def test_unclosed_value_without_close_tag_before_next_marker() -> None:
    text = '<tool_call>{"name": "search", "arguments": {"query": "x"}\n' + GOOD
    assert run(text) == (
        '<tool_call>{"name": "search", "arguments": {"query": "x"}',
        [("get_time", '{"tz":"UTC"}')],
        "tool_calls",
    )


NESTED_NAME = '<tool_call>{"arguments": {"user": {"name": "Bob"}, "content": "long text'


def test_nested_name_is_not_the_call_name() -> None:
    stays_text(NESTED_NAME)
    stays_text(NESTED_NAME, "length")


def test_value_runs_to_end_only_when_truncated() -> None:
    text = 'Sure.\n<tool_call>{"name": "search", "arguments": {"query": "long text'
    stays_text(text)
    # Cut off at the ceiling, the client is told so: "length", not "tool_calls" (issue 18).
    assert run(text, "length") == ("Sure.", [("search", '{"query": "long text')], "length")
    schemas = tool_schemas(TOOLS)
    assert find_calls(text, schemas, truncated=False) is None
    found = find_calls(text, schemas)  # the default: a caller that does not know yet
    assert found is not None and found.calls == [("search", '{"query": "long text', False)]


def test_unclosed_harmony_and_function_json_need_truncation() -> None:
    harmony = '<|channel|>commentary to=functions.search json<|message|>{"query": "x'
    stays_text(harmony)
    assert run(harmony, "length") == (None, [("search", '{"query": "x')], "length")
    function = '<function=search>{"query": "x'
    stays_text(function)
    assert run(function, "length") == (None, [("search", '{"query": "x')], "length")


def test_literal_marker_inside_argument_string_still_read() -> None:
    text = (
        '<tool_call>{"name": "search", "arguments": {"query": "what is <tool_call>?"}}'
        "</tool_call> and "
        '<tool_call>{"name": "search", "arguments": {"query": "<tool_call>"}}</tool_call>'
    )
    assert run(text) == (
        "and",
        [("search", '{"query":"what is <tool_call>?"}'), ("search", '{"query":"<tool_call>"}')],
        "tool_calls",
    )


# -- Qwen3-Coder: prose after the last </parameter> stays content ---------------------------------


def test_qwen_value_ends_at_last_close_parameter() -> None:
    text = (
        "<function=search>\n<parameter=query>\ncats\n</parameter>\n"
        "I'll report back once I have results."
    )
    assert run(text) == (
        "I'll report back once I have results.",
        [("search", '{"query":"cats"}')],
        "tool_calls",
    )


def test_qwen_value_without_any_close_needs_truncation() -> None:
    text = "Checking.\n<function=search>\n<parameter=query>\ncats and dogs"
    stays_text(text)
    assert run(text, "length") == (
        "Checking.",
        [("search", '{"query":"cats and dogs"}')],
        "length",
    )


# -- Cut off at the ceiling: "length" stays, and the cut call is flagged (issue 18) ------------


def _outcomes(text: str, finish: str) -> tuple[str, list[str]]:
    body = {"choices": [{"index": 0, "message": {"content": text}, "finish_reason": finish}]}
    new, events = process_response(body, TOOLS)
    assert new is not None
    outcomes = [e.labels["outcome"] for e in events if e.kind == ARGUMENTS]
    return new["choices"][0]["finish_reason"], outcomes


def test_a_cut_off_xml_call_is_flagged_though_its_value_reads_whole() -> None:
    # Typed parameters read as a complete object, but the reply stopped inside the call.
    text = "<function=search>\n<parameter=query>\ncats and dogs"
    assert _outcomes(text, "length") == ("length", ["truncated"])


def test_complete_calls_at_the_ceiling_still_say_tool_calls() -> None:
    # The reply stopped at its ceiling right after a closed call: nothing of it is cut.
    text = '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    assert _outcomes(text, "length") == ("tool_calls", [])


def test_only_the_cut_call_is_flagged_among_several() -> None:
    text = (
        '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"query": "long'
    )
    assert run(text, "length") == (
        None,
        [("get_time", '{"tz":"UTC"}'), ("search", '{"query": "long')],
        "length",
    )
    assert _outcomes(text, "length") == ("length", ["truncated"])


# -- A tag that holds one JSON value: parsed, not scanned ---------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# What a model writes between the tag and its value, and what may come after the value: text
# that turns the body into something other than one value (a second value, prose, a bracket).
AROUND = st.sampled_from(["", " ", "\n", "; {}", " x", "}", "]", ")", "'", '"', "</tool_call>"])


@settings(max_examples=500, deadline=None)
@given(
    value=JSON_VALUES.filter(lambda v: isinstance(v, list | dict)),
    indent=st.booleans(),
    ascii_only=st.booleans(),
    after=AROUND,
    tail=st.sampled_from(["", "</tool_call>", "</tool_call> then <tool_call>{}", "<tool_call>"]),
)
def test_a_tag_holding_one_json_value_ends_where_the_scan_ends_it(
    value: object, indent: bool, ascii_only: bool, after: str, tail: str
) -> None:
    """`Scan.value` parses the text up to the close tag when that is one JSON object or array,
    and scans it otherwise: where the value ends is the same either way (a Scan without the
    close tag scans only)."""
    body = json.dumps(value, indent=1 if indent else None, ensure_ascii=ascii_only)
    s = f"<tool_call>{body}{after}{tail}"
    i = len("<tool_call>")
    parsed = Scan(s, "<tool_call>", "</tool_call>").value(i)
    scanned = Scan(s, "<tool_call>", None).value(i)
    assert parsed == scanned
    if not after.strip() and tail.startswith("</tool_call>"):
        assert parsed == i + len(body)  # the case parsed, not scanned
