"""Regressions from the tool-call recovery review: prose turned into calls, text swallowed into
arguments, and inputs that made the scan quadratic (BEHAVIOUR.md 4.1, research section 13)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from proxy.toolcalls import recovery as toolcalls
from proxy.toolcalls.recovery import find_calls, process_response, recover, tool_schemas, triggers
from tests.steps import Scanned, counting_patterns, growth


def _tool(name: str, props: dict[str, Any]) -> dict[str, Any]:
    params = {"type": "object", "properties": props}
    return {"type": "function", "function": {"name": name, "parameters": params}}


S = {"type": "string"}
TOOLS = [
    _tool("search", {"query": S}),
    _tool("get_time", {"tz": S}),
    _tool("get_weather", {"city": S}),
]

Result = tuple[str | None, list[tuple[str, str]], str]


def run(text: str, finish: str = "stop") -> Result:
    """(content, [(name, arguments)], finish_reason) as the client sees the whole response."""
    message = {"role": "assistant", "content": text}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    new, _ = process_response(body, TOOLS)
    choice = (new or body)["choices"][0]
    calls = [
        (c["function"]["name"], c["function"]["arguments"])
        for c in choice["message"].get("tool_calls") or []
    ]
    return choice["message"]["content"], calls, choice["finish_reason"]


def stays_text(text: str, finish: str = "stop") -> None:
    assert run(text, finish) == (text, [], finish)
    assert recover(text, TOOLS, finish) is None


# -- 1. GLM: a word after <tool_call> is not a call -----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Hermes-style models wrap each call in <tool_call> tags",
        "Wrap each call in <tool_call> and </tool_call>.",
        "<tool_call>delete_all<arg_key>path</arg_key><arg_value>/</arg_value></tool_call>",
    ],
)
def test_glm_prose_stays_text(text: str) -> None:
    stays_text(text)


def test_glm_calls_still_recovered() -> None:
    assert run("<tool_call>get_time</tool_call>") == (None, [("get_time", "{}")], "tool_calls")
    # A declared name with an explicit close is GLM's no-argument call, even amid prose.
    assert run("Wrap each call in <tool_call> search </tool_call>") == (
        "Wrap each call in",
        [("search", "{}")],
        "tool_calls",
    )
    text = "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"
    assert run(text) == (None, [("get_time", '{"tz":"UTC"}')], "tool_calls")


# -- 2. <function=NAME> without parameters ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Qwen3-Coder writes calls as `<function=NAME>` followed by `<parameter=..>` blocks.",
        "In HTML, <function=foo> is not a tag.",
        "In HTML, <function=search> is not a tag.",
        "<function=foo></function>",
        "<function=foo>\n<parameter=x>\n1\n</parameter>\n</function>",
    ],
)
def test_function_tag_prose_stays_text(text: str) -> None:
    stays_text(text)


def test_function_tag_without_parameters_needs_close_and_declared_name() -> None:
    assert run("<function=get_time></function>") == (None, [("get_time", "{}")], "tool_calls")
    assert run("<tool_call>\n<function=get_time>\n</function>\n</tool_call>") == (
        None,
        [("get_time", "{}")],
        "tool_calls",
    )


# -- 3. Mistral name forms, and declared names for every marker ----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'Mistral emits [TOOL_CALLS] then {"name": "search"} style JSON.',
        "When no tool is needed, [TOOL_CALLS] is null.",
        '[TOOL_CALLS]search {"query": "x"}',  # space between name and arguments, no [ARGS]
        "[TOOL_CALLS]get_time null",
        '[TOOL_CALLS]delete_all[ARGS]{"path": "/"}',
        '[TOOL_CALLS][{"name": "delete_all", "arguments": {}}]',
        '<tool_call>{"name": "delete_all", "arguments": {"path": "/"}}</tool_call>',
        "<|python_tag|>brave_search.call(query='x')",
        "<|start|>assistant<|channel|>commentary to=functions.delete_all json<|message|>{}",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>delete_all<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        "<start_function_call>call:delete_all{path:<escape>/<escape>}<end_function_call>",
    ],
)
def test_marker_forms_need_declared_names(text: str) -> None:
    stays_text(text)


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ('[TOOL_CALLS]search{"query": "x"}', [("search", '{"query":"x"}')]),
        ("[TOOL_CALLS]get_time[ARGS]null", [("get_time", "{}")]),
        ("[TOOL_CALLS]get_time null", None),
        ('[TOOL_CALLS]get_time[ARGS] {"tz": "UTC"}', [("get_time", '{"tz":"UTC"}')]),
    ],
)
def test_mistral_named_forms(text: str, calls: list[tuple[str, str]] | None) -> None:
    if calls is None:
        stays_text(text)
    else:
        assert run(text) == (None, calls, "tool_calls")


def test_one_undeclared_call_leaves_only_its_span_as_text() -> None:
    text = (
        '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>'
    )
    assert run(text) == (
        '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>',
        [("get_time", '{"tz":"UTC"}')],
        "tool_calls",
    )


# -- 4. An unclosed value does not swallow the rest of the reply ----------------------------------

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
    assert run(text, "length") == ("Sure.", [("search", '{"query": "long text')], "tool_calls")
    schemas = tool_schemas(TOOLS)
    assert find_calls(text, schemas, truncated=False) is None
    found = find_calls(text, schemas)  # the default: a caller that does not know yet
    assert found is not None and found.calls == [("search", '{"query": "long text', False)]


def test_unclosed_harmony_and_function_json_need_truncation() -> None:
    harmony = '<|channel|>commentary to=functions.search json<|message|>{"query": "x'
    stays_text(harmony)
    assert run(harmony, "length") == (None, [("search", '{"query": "x')], "tool_calls")
    function = '<function=search>{"query": "x'
    stays_text(function)
    assert run(function, "length") == (None, [("search", '{"query": "x')], "tool_calls")


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


# -- 5. Qwen3-Coder: prose after the last </parameter> stays content -----------------------------


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
        "tool_calls",
    )


# -- 6. Bare and fenced JSON must be a whole call shape -------------------------------------------

ECHOED_TOOLS = (
    '[{"type":"function","function":{"name":"search",'
    '"parameters":{"type":"object","properties":{}}}}]'
)


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "search"}',
        '{"tool": "search"}',
        '[{"id": 1, "name": "search", "type": "builtin"}, {"id": 2, "name": "get_time", '
        '"type": "builtin"}]',
        '{"name": "search", "type": "builtin", "arguments": {"query": "x"}}',
        '{"search": {"enabled": true, "max_results": 5}}',
        '{"search": {}}',
        ECHOED_TOOLS,
        '{"name": "search", "parameters": {"type": "object", "properties": {"query": {}}}}',
        '```json\n{"id": "call_1", "type": "function", "function": {"name": "search"}}\n```\n'
        "That is what the API returns for a tool call.",
        '```json\n{"tool_calls": [{"name": "get_time"}]}\n```\nThe response looks like this.',
    ],
)
def test_bare_forms_without_arguments_stay_text(text: str) -> None:
    stays_text(text)


@pytest.mark.parametrize(
    ("text", "fmt", "calls"),
    [
        (
            '{"name": "search", "arguments": {"query": "x"}}',
            "bare_json",
            [("search", '{"query":"x"}')],
        ),
        ('{"name": "search", "input": {"query": "x"}}', "bare_json", [("search", '{"query":"x"}')]),
        ('{"name": "get_time", "args": {}}', "bare_json", [("get_time", "{}")]),
        ('{"search": {"query": "x"}}', "bare_json", [("search", '{"query":"x"}')]),
        (
            '{"type": "function", "function": {"name": "search", "parameters": {"query": "x"}}}',
            "bare_json",
            [("search", '{"query":"x"}')],
        ),
        (
            '```json\n[{"name": "get_time", "arguments": {"tz": "UTC"}}]\n```\nCalling it now.',
            "fenced_json",
            [("get_time", '{"tz":"UTC"}')],
        ),
    ],
)
def test_bare_call_shapes_still_recovered(
    text: str, fmt: str, calls: list[tuple[str, str]]
) -> None:
    content = "Calling it now." if text.startswith("```") else None
    assert run(text) == (content, calls, "tool_calls")
    rec = recover(text, TOOLS)
    assert rec is not None and rec.format == fmt


def test_marker_forms_keep_name_only_calls() -> None:
    # With a marker the model's intent is explicit: a name alone is a call without arguments.
    assert run('<tool_call>{"name": "get_time"}</tool_call>') == (
        None,
        [("get_time", "{}")],
        "tool_calls",
    )


# -- 7. Linear time on adversarial input ----------------------------------------------------------

# Steps are counted, not timed (tests/steps.py): a 0.5 s limit failed on a loaded 2-core machine
# (issue 13, item 16). Linear work grows with the input, here 8 times; a quadratic scan grows
# 64 times (a _Next without its cache measured 40, a _Scan without its budget 60).
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
]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Charge the finders' searches over the scanned text, and their regex scans, to the count."""
    split = toolcalls.split_think

    def scanned(text: str) -> tuple[str, str, str]:
        head, scan, rest = split(text)
        return head, Scanned(scan), rest

    monkeypatch.setattr(toolcalls, "split_think", scanned)
    for name, pattern in counting_patterns(toolcalls).items():
        monkeypatch.setattr(toolcalls, name, pattern)


def _repeated(unit: str, finish: str) -> Callable[[int], Callable[[], object]]:
    def make(size: int) -> Callable[[], object]:
        text = unit * (size // len(unit) + 1)
        return lambda: run(text, finish)

    return make


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_adversarial_input_is_linear(unit: str, finish: str) -> None:
    assert growth(_repeated(unit, finish), SMALL) < LINEAR


@pytest.mark.usefixtures("counted")
def test_nested_openers_are_linear_and_not_calls() -> None:
    def make(size: int) -> Callable[[], object]:
        text = "<tool_call>{ " * (size // 13) + "}" * (size // 13)
        return lambda: run(text)

    assert growth(make, SMALL) < LINEAR
    text = "<tool_call>{ " * 15_000 + "}" * 15_000
    assert run(text) == (text, [], "stop")


def test_the_step_count_sees_a_quadratic_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The yardstick itself: with the _Scan budget removed, a value opened after each marker is
    # rescanned to the end of the text, and the count must say so.
    def unbounded(self: Any, i: int) -> int | None:
        limit = self.limit(i)
        end = toolcalls.value_end(self.s, i, limit)
        return toolcalls.value_end(self.s, i) if end is None and limit < len(self.s) else end

    monkeypatch.setattr(toolcalls._Scan, "value", unbounded)
    assert growth(_repeated("<tool_call>{ oops ", "stop"), SMALL) > 4 * LINEAR


def test_the_step_count_sees_a_repeated_search(
    counted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # And with _Next's cache removed, each opener searches to the end for a close tag that never
    # comes: C-level work that only the counted searches show.
    monkeypatch.setattr(toolcalls._Next, "at", lambda self, pos: self._find(pos))
    assert growth(_repeated("<tool_call>{ oops ", "stop"), SMALL) > 2 * LINEAR


@pytest.mark.parametrize(
    ("unit", "finish"),
    [("<tool_call>{ oops ", "stop"), ("[TOOL_CALLS]{ ", "length"), ("<tool_call>{ ", "length")],
)
def test_adversarial_input_stays_text(unit: str, finish: str) -> None:
    text = unit * 10_000
    assert run(text, finish) == (text, [], finish)


# -- 8. "functools" is a marker only with its bracket ---------------------------------------------


def test_functools_trigger_needs_bracket() -> None:
    marks = triggers(tool_schemas(TOOLS))
    assert "functools[" in marks
    assert "functools" not in marks
    stays_text("Use functools.lru_cache here; functools is in the standard library.")
    assert run('functools[{"name": "get_time", "arguments": {"tz": "UTC"}}]') == (
        None,
        [("get_time", '{"tz":"UTC"}')],
        "tool_calls",
    )
