"""What recovery reads as a call and what stays text: prose that looks like a marker, names the
tools do not declare, bare and fenced JSON without a whole call shape (BEHAVIOUR.md 4.1,
research section 13)."""

from __future__ import annotations

import pytest

from proxy.toolcalls.formats import triggers
from proxy.toolcalls.recovery import recover, tool_schemas
from tests.unit.toolcalls.whole_reply import TOOLS, run, stays_text

# -- GLM: a word after <tool_call> is not a call --------------------------------------------------


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


# -- <function=NAME> without parameters -----------------------------------------------------------


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


# -- Mistral name forms, and declared names for every marker --------------------------------------


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


# -- Bare and fenced JSON must be a whole call shape ----------------------------------------------

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


# -- "functools" is a marker only with its bracket ------------------------------------------------


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
