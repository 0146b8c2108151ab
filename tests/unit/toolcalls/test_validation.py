"""Tool calls checked against the request's tools (proxy/toolcalls/validation.py): each kind of
problem and the wording a model reads, the schema keywords agents use, the schema cache (bounded,
an uncompilable schema compiled once and skipped), and totality on arbitrary input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.agent_tools import AGENT_TOOLS
from proxy.toolcalls import validation
from proxy.toolcalls.validation import (
    INVALID,
    NOT_OBJECT,
    UNKNOWN_TOOL,
    UNPARSEABLE,
    Checked,
    Problem,
    check_calls,
)

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "array", "items": {"type": "integer"}},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat"],
            "additionalProperties": False,
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


def tool(name: str, parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": "A tool."}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def call(name: str, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


TOOLS = [tool("get_weather", WEATHER), tool("free")]


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    validation.clear_caches()
    yield
    validation.clear_caches()


def only(checked: Checked) -> Problem:
    assert len(checked.problems) == 1, checked
    return checked.problems[0]


# -- valid calls ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Paris"},
        {"city": "Paris", "unit": "celsius", "days": [1, 2], "where": {"lat": 48.8}},
        {"city": "Paris", "where": {"lat": 1, "lon": 2}},
    ],
)
def test_a_valid_call_has_no_problem(arguments: dict[str, Any]) -> None:
    checked = check_calls([call("get_weather", arguments)], TOOLS)
    assert checked == Checked((), ())
    assert checked.ok


def test_a_tool_without_parameters_accepts_any_object_but_only_an_object() -> None:
    assert check_calls([call("free", {"anything": [1, {"x": None}]})], TOOLS).ok
    assert check_calls([call("free", "")], TOOLS).ok  # "" is "no arguments", as repaired
    assert only(check_calls([call("free", "[1, 2]")], TOOLS)).kind == NOT_OBJECT


def test_arguments_already_an_object_are_validated_as_such() -> None:
    assert check_calls([call("get_weather", {})], TOOLS).problems  # JSON text of {}
    odd = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    assert check_calls([odd], TOOLS).ok


# -- each kind of problem ------------------------------------------------------------------------


def test_an_undeclared_tool_is_named_with_the_declared_ones() -> None:
    problem = only(check_calls([call("get_wether", {"city": "Paris"})], TOOLS))
    assert (problem.index, problem.name, problem.kind) == (0, "get_wether", UNKNOWN_TOOL)
    assert "'get_wether'" in problem.detail
    assert "get_weather, free" in problem.detail


def test_no_tools_declared_makes_every_call_unknown() -> None:
    no_tools: list[list[Any] | None] = [None, []]
    for tools in no_tools:
        problem = only(check_calls([call("get_weather", {"city": "Paris"})], tools))
        assert problem.kind == UNKNOWN_TOOL
        assert "declares no tools" in problem.detail


def test_many_declared_tools_are_listed_up_to_a_limit() -> None:
    tools = [tool(f"tool_{i:03}", {"type": "object"}) for i in range(150)]
    detail = only(check_calls([call("nope", {})], tools)).detail
    assert "tool_000" in detail
    assert f"tool_{validation.MAX_LISTED - 1:03}" in detail
    assert f"tool_{validation.MAX_LISTED:03}" not in detail
    assert f"and {150 - validation.MAX_LISTED} more" in detail
    assert len(detail) < 600


def test_unparseable_arguments() -> None:
    problem = only(check_calls([call("get_weather", "{'city': 'Paris'")], TOOLS))
    assert (problem.name, problem.kind) == ("get_weather", UNPARSEABLE)
    assert "not valid JSON" in problem.detail


@pytest.mark.parametrize(("arguments", "shown"), [("[1, 2]", "[1, 2]"), ('"Paris"', '"Paris"'),
                                                  ("42", "42"), ("null", "null")])
def test_json_that_is_no_object(arguments: str, shown: str) -> None:
    problem = only(check_calls([call("get_weather", arguments)], TOOLS))
    assert problem.kind == NOT_OBJECT
    assert shown in problem.detail


def test_a_long_non_object_is_clipped_in_the_detail() -> None:
    problem = only(check_calls([call("get_weather", json.dumps(["x" * 5000]))], TOOLS))
    assert problem.kind == NOT_OBJECT
    assert len(problem.detail) < 200


@pytest.mark.parametrize(
    ("arguments", "wanted"),
    [
        ({}, ['"city"', "required"]),
        ({"city": "Paris", "unit": "kelvin"}, ["at 'unit'", '"kelvin"', '"celsius"',
                                               '"fahrenheit"']),
        ({"city": 12}, ["at 'city'", "12", '"string"']),
        ({"city": "Paris", "days": [1, "two"]}, ["at 'days[1]'", '"two"', '"integer"']),
        ({"city": "Paris", "where": {"lon": 2}}, ["at 'where'", '"lat"', "required"]),
        ({"city": "Paris", "where": {"lat": "north"}}, ["at 'where.lat'", '"north"', '"number"']),
        ({"city": "Paris", "where": {"lat": 1, "alt": 3}}, ["at 'where'", "'alt'", "unexpected"]),
        ({"city": "Paris", "country": "FR"}, ["'country'", "unexpected"]),
    ],
)
def test_a_schema_error_names_the_path_and_the_offending_value(
    arguments: dict[str, Any], wanted: list[str]
) -> None:
    problem = only(check_calls([call("get_weather", arguments)], TOOLS))
    assert (problem.name, problem.kind) == ("get_weather", INVALID)
    for part in wanted:
        assert part in problem.detail, problem.detail


def test_at_most_a_few_errors_are_named_per_call() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(10)}}
    arguments = {f"p{i}": "x" for i in range(10)}
    detail = only(check_calls([call("t", arguments)], [tool("t", schema)])).detail
    assert detail.count("is not of type") == validation.MAX_ERRORS
    assert "(and more)" in detail


def test_exactly_max_errors_says_no_more() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"}
                                               for i in range(validation.MAX_ERRORS)}}
    arguments = {f"p{i}": "x" for i in range(validation.MAX_ERRORS)}
    detail = only(check_calls([call("t", arguments)], [tool("t", schema)])).detail
    assert detail.count("is not of type") == validation.MAX_ERRORS
    assert "more" not in detail


def test_a_huge_offending_value_is_clipped_but_the_problem_stays() -> None:
    problem = only(check_calls([call("get_weather", {"city": "x" * 10_000})],
                               [tool("get_weather", {"properties": {"city": {"maxLength": 5}}})]))
    assert len(problem.detail) < 400
    assert problem.detail.rstrip(".").endswith("is longer than 5 characters")


def test_problems_carry_the_index_of_their_call() -> None:
    calls: list[Any] = [call("get_weather", {"city": "Paris"}), "not a call", call("nope", {}),
             call("get_weather", "[]"), call("free", {})]
    checked = check_calls(calls, TOOLS)
    assert [(p.index, p.kind) for p in checked.problems] == [
        (1, UNKNOWN_TOOL), (2, UNKNOWN_TOOL), (3, NOT_OBJECT)]
    assert checked.problems[0].name == ""
    assert "names no tool" in checked.problems[0].detail


# -- schemas as clients write them ---------------------------------------------------------------


def test_refs_drafts_and_2020_12_keywords_are_honoured() -> None:
    tools = [
        tool("defs", {"$defs": {"N": {"type": "integer"}},
                      "properties": {"n": {"$ref": "#/$defs/N"}}}),
        tool("d7", {"$schema": "http://json-schema.org/draft-07/schema#",
                    "definitions": {"N": {"type": "integer"}},
                    "properties": {"t": {"items": [{"type": "string"}, {"type": "integer"}]}}}),
        tool("dep", {"type": "object", "dependentRequired": {"a": ["b"]}}),
    ]
    checked = check_calls([call("defs", {"n": "1"}), call("d7", {"t": ["a", "b"]}),
                           call("dep", {"a": 1})], tools)
    assert [(p.name, p.kind) for p in checked.problems] == [
        ("defs", INVALID), ("d7", INVALID), ("dep", INVALID)]
    assert checked.skipped == ()


def test_formats_are_annotations_even_unknown_ones() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "mail": {"type": "string", "format": "email"},
        "odd": {"type": "string", "format": "my-own-format"}}}
    checked = check_calls([call("t", {"when": "next tuesday", "mail": "bob", "odd": "?"})],
                          [tool("t", schema)])
    assert checked == Checked((), ())


def test_javascript_regex_patterns_compile() -> None:
    schema = {"properties": {"word": {"type": "string", "pattern": "^\\p{L}+$"}}}
    assert check_calls([call("t", {"word": "été"})], [tool("t", schema)]).ok
    assert only(check_calls([call("t", {"word": "été1"})], [tool("t", schema)])).kind == INVALID


def test_the_agent_tool_set_compiles() -> None:
    for declared in AGENT_TOOLS:
        name = declared["function"]["name"]
        checked = check_calls([call(name, "{}")], AGENT_TOOLS)
        assert checked.skipped == (), name
    assert validation.cache_stats().failed == 0


# -- uncompilable schemas and the cache ----------------------------------------------------------

UNCOMPILABLE = [
    {"properties": {"a": {"$ref": "#/$defs/Missing"}}},
    {"properties": {"a": {"$ref": "https://example.invalid/schema.json"}}},  # never fetched
    {"properties": {"a": {"type": "strin"}}},
    {"type": "object", "required": "a"},
    {"properties": {"a": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}},
    "string",
]


@pytest.mark.parametrize("schema", UNCOMPILABLE)
def test_an_uncompilable_schema_is_skipped_not_failed(schema: Any) -> None:
    checked = check_calls([call("t", {"a": 1}), call("t", {"a": 2})], [tool("t", schema)])
    assert checked == Checked((), ("t",))
    # a call's shape is still checked: only the schema part is skipped
    assert only(check_calls([call("t", "[1]")], [tool("t", schema)])).kind == NOT_OBJECT


def test_an_uncompilable_schema_is_compiled_once() -> None:
    tools = [tool("t", UNCOMPILABLE[0]), tool("get_weather", WEATHER)]
    for _ in range(5):
        check_calls([call("t", {"a": 1}), call("get_weather", {"city": "Paris"})], tools)
    stats = validation.cache_stats()
    assert (stats.compiled, stats.failed, stats.entries) == (2, 1, 2)


def test_equal_schemas_share_one_compilation_whatever_their_key_order() -> None:
    reordered = json.loads(json.dumps(WEATHER, sort_keys=True))
    reordered = dict(reversed(list(reordered.items())))
    tools = [tool("a", WEATHER), tool("b", reordered)]
    check_calls([call("a", {"city": "P"}), call("b", {"city": "P"})], tools)
    assert validation.cache_stats().compiled == 1


def test_the_cache_is_bounded_and_least_recently_used_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(validation._CACHE, "size", 4)

    def schema(i: int) -> dict[str, Any]:
        return {"properties": {"n": {"maximum": i}}}

    for i in range(4):
        check_calls([call("t", {"n": 0})], [tool("t", schema(i))])
    check_calls([call("t", {"n": 0})], [tool("t", schema(0))])  # 0 is now the most recent
    for i in range(4, 20):
        check_calls([call("t", {"n": 0})], [tool("t", schema(i))])
        assert validation.cache_stats().entries <= 4
    assert validation.cache_stats().compiled == 20
    check_calls([call("t", {"n": 0})], [tool("t", schema(19))])
    assert validation.cache_stats().compiled == 20  # a recent one is still cached
    check_calls([call("t", {"n": 0})], [tool("t", schema(0))])
    assert validation.cache_stats().compiled == 21  # evicted long ago: compiled again


def test_the_default_cache_bound() -> None:
    for i in range(validation.CACHE_SIZE + 50):
        check_calls([call("t", {})], [tool("t", {"properties": {"n": {"maximum": i}}})])
    assert validation.cache_stats().entries == validation.CACHE_SIZE


# -- odd input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "calls",
    [
        [None], [1], ["x"], [[]], [{}], [{"function": None}], [{"function": "f"}],
        [{"function": {}}], [{"function": {"name": 3, "arguments": "{}"}}],
        [{"function": {"name": "get_weather"}}],
        [{"function": {"name": "get_weather", "arguments": None}}],
        [{"function": {"name": "get_weather", "arguments": 12}}],
        [{"function": {"name": "get_weather", "arguments": ["city"]}}],
    ],
)
def test_odd_calls_are_reported_not_raised(calls: list[Any]) -> None:
    problem = only(check_calls(calls, TOOLS))
    assert problem.kind in {UNKNOWN_TOOL, UNPARSEABLE}
    assert problem.detail.endswith(".")


@pytest.mark.parametrize(
    "tools",
    [[None, 1, "x", {}, {"function": None}, {"function": {"name": 5}}, {"function": {"name": ""}},
      tool("get_weather", WEATHER)]],
)
def test_odd_tool_entries_are_ignored(tools: list[Any]) -> None:
    checked = check_calls([call("get_weather", {}), call("x", {}), call("", {})], tools)
    assert [(p.index, p.kind) for p in checked.problems] == [
        (0, INVALID), (1, UNKNOWN_TOOL), (2, UNKNOWN_TOOL)]
    assert checked.problems[1].detail.endswith("the declared tools are: get_weather.")


def test_odd_tool_entries_do_not_count_as_declared() -> None:
    tools: list[Any] = [None, {"function": {"name": 5}}, tool("get_weather", WEATHER)]
    detail = only(check_calls([call("5", {})], tools)).detail
    assert detail.endswith("the declared tools are: get_weather.")


def test_the_first_of_two_tools_of_one_name_wins() -> None:
    tools = [tool("t", {"required": ["a"]}), tool("t", {"required": ["b"]})]
    assert check_calls([call("t", {"a": 1})], tools).ok


def test_calls_not_a_list() -> None:
    assert check_calls(None, TOOLS) == Checked((), ())  # type: ignore[arg-type]
    assert check_calls({"a": 1}, "tools") == Checked((), ())  # type: ignore[arg-type]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["type", "properties", "name", "function", "arguments",
                                       "parameters", "items", "required", "enum", "$ref", "x"])
                      | st.text(max_size=5), inner, max_size=5),
    max_leaves=20,
)
SCHEMA_TYPES = st.sampled_from(["object", "string", "integer", "array", "strin", None])
SCHEMA = st.fixed_dictionaries(
    {"type": SCHEMA_TYPES},
    optional={"properties": st.dictionaries(st.text(max_size=3), JSONISH, max_size=3),
              "required": JSONISH, "items": JSONISH, "enum": JSONISH, "$ref": st.text(max_size=6)},
)
TOOL = st.one_of(JSONISH, st.builds(tool, st.sampled_from(["a", "b", ""]), SCHEMA | JSONISH))
ARGUMENTS = st.one_of(JSONISH, JSONISH.map(json.dumps), st.text(max_size=20))
CALL = st.one_of(JSONISH, st.builds(call, st.sampled_from(["a", "b", "c"]), ARGUMENTS))


@settings(max_examples=300, deadline=None)
@given(calls=st.lists(CALL, max_size=4), tools=st.none() | st.lists(TOOL, max_size=4))
def test_check_calls_never_raises(calls: list[Any], tools: list[Any] | None) -> None:
    checked = check_calls(calls, tools)
    assert all(isinstance(p, Problem) and p.detail for p in checked.problems)
    assert [p.index for p in checked.problems] == sorted({p.index for p in checked.problems})
    assert all(0 <= p.index < len(calls) for p in checked.problems)
    assert len(set(checked.skipped)) == len(checked.skipped)
