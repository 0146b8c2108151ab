"""XML-parameter values typed by the tool's schema (values.typed_value: union types, null,
non-finite numbers), and the truncated and linear-time behaviour of the XML-parameter (Qwen3-
Coder, GLM) and Functionary finders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.toolcalls.values import schema_type, typed_value
from tests.steps import growth
from tests.unit.toolcalls.test_recovery_linear_time import LINEAR, SMALL
from tests.unit.toolcalls.whole_reply import repeated, run

INT, NUM, STR = {"type": "integer"}, {"type": "number"}, {"type": "string"}


@pytest.mark.parametrize(
    ("raw", "prop", "value"),
    [
        ("42", {"type": ["string", "integer"]}, 42),  # a string is tried last: it fits all
        ("42", {"type": ["integer", "string"]}, 42),
        ("2 dollars", {"type": ["integer", "string"]}, "2 dollars"),
        ("2 dollars", INT, "2 dollars"),
        ('{"a": 1}', {"type": ["string", "object"]}, {"a": 1}),
        ('{"a": 1}', {"type": ["object", "string"]}, {"a": 1}),
        ('{"a": 1}', {"anyOf": [{"type": "object"}, {"type": "string"}]}, {"a": 1}),
        ("[1]", {"anyOf": [{"type": "object"}, {"type": "array"}]}, [1]),
        ("x", {"anyOf": [{"type": "object"}, {"type": "integer"}]}, "x"),
        ("7", {"oneOf": [{"type": "boolean"}, {"type": "integer"}]}, 7),
        ("true", {"type": ["integer", "boolean"]}, True),
        ("null", STR, "null"),
        ("null", {"type": ["string", "null"]}, None),
        (" None ", INT, None),
        ("null", {}, "null"),
        ("3.0", INT, 3),
        ("3.5", INT, "3.5"),
        ("1e3", INT, 1000),
        ("2.0", NUM, 2),
        ("-0.25", NUM, -0.25),
        ("1_000", INT, "1_000"),
        ("0x1F", INT, "0x1F"),
        ("٣", INT, "٣"),
        ("  padded  ", STR, "  padded  "),
        (" 5 ", INT, 5),
        ("2", {"enum": [1, 2, 3]}, 2),
        ("b", {"enum": ["a", "b"]}, "b"),
        ("x", None, "x"),
        ("[1, 2]", {"type": "list"}, [1, 2]),
        ("{1, 2}", {"type": "array"}, "{1, 2}"),
        ("NaN", {"type": ["number", "string"]}, "NaN"),
        ("1" * 30, INT, int("1" * 30)),
    ],
)
def test_typed_value(raw: str, prop: dict[str, Any] | None, value: Any) -> None:
    got = typed_value(raw, prop, strict=True)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("raw", "prop"),
    [
        ("1e999", NUM),
        ("-1e999", INT),
        ("NaN", NUM),
        ("Infinity", NUM),
        ("-inf", {"type": ["number", "null"]}),
        ("[1, 1e999]", {"type": "array"}),
        ('{"a": -1e400}', {"type": "object"}),
    ],
)
def test_non_finite_rejects_when_strict_and_stays_text_otherwise(
    raw: str, prop: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        typed_value(raw, prop, strict=True)
    assert typed_value(raw, prop) == raw  # never inf, never null


def test_schema_type_keeps_its_contract() -> None:
    assert schema_type({"type": ["null", "integer"]}) == ("integer", True)
    assert schema_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == ("string", True)
    assert schema_type({"description": "anything"}) == ("string", False)
    assert schema_type(None) == ("", False)


def _args(calls: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    return [(n, json.loads(a)) for n, a in calls]


_TWO = '>>>get_time\n{"tz": "UTC"}>>>search\n{"query": "a b"}'


# A call that never closes is a call only when the reply was cut off (finish "length") and it
# runs to the end of the text; with "stop" it stays text, and the calls before it stand.
@pytest.mark.parametrize(
    ("text", "before", "cut"),
    [
        ("<tool_call>\n<function=search>\n<parameter=query>\nhalf a que", "",
         ("search", {"query": "half a que"})),
        ("<tool_call>get_time</tool_call><tool_call>search<arg_key>query</arg_key><arg_value>ha",
         "<tool_call>get_time</tool_call>", ("search", {"query": "ha"})),
        (_TWO + '>>>get_time\n{"tz": "CE', _TWO, ("get_time", '{"tz": "CE')),
    ],
)  # fmt: skip
def test_cut_off_call_counts_only_when_truncated(
    text: str, before: str, cut: tuple[str, Any]
) -> None:
    content, calls, finish = run(text, "length")
    assert (content, finish) == (None, "length")  # the last call is cut: the client is told
    earlier = run(before, "stop")[1] if before else []
    name, args = cut
    assert calls[:-1] == earlier and calls[-1][0] == name
    assert (json.loads(calls[-1][1]) if isinstance(args, dict) else calls[-1][1]) == args
    stopped = run(text, "stop")
    assert stopped[1] == earlier
    assert stopped[0] == (text[len(before) :].strip() if before else text)


def test_functionary_cut_off_call_keeps_raw_arguments() -> None:
    content, calls, finish = run('>>>search\n{"query": "a b', "length")
    assert (content, finish) == (None, "length")
    assert calls == [("search", '{"query": "a b')]


def test_an_invalid_call_among_several_leaves_its_siblings() -> None:
    bad = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n"  # never closed
    good = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n"
    _, calls, _ = run(good + "</tool_call>\n" + bad + "</nothing>", "stop")
    assert _args(calls) == [("search", {"query": "x"})]


def test_literal_think_close_in_a_value_is_kept() -> None:
    text = ("<tool_call>\n<function=search>\n<parameter=query>\nwhy </think>?\n</parameter>\n"
            "</function>\n</tool_call>")
    assert _args(run(text)[1]) == [("search", {"query": "why </think>?"})]


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("finish", ["stop", "length"])
@pytest.mark.parametrize(
    ("prefix", "unit"),
    [
        ("", ">>>search\n{ "),
        ("", ">>>search\n"),
        ("", "search\n{ "),
        ("", '>>>search\n{"query": ">>>'),
        ("", "<tool_call>search<arg_key>query</arg_key><arg_value>"),
        ("", "<tool_call>search<arg_key>query</arg_key><arg_value>x</arg_value>y"),
        ("<tool_call>search", "<arg_key>query</arg_key><arg_value>a</arg_value>b"),
        ("<tool_call>search<arg_key>query</arg_key><arg_value>", "<arg_key>query</arg_key>"),
        ("", "<tool_call>\n<function=search>\n<parameter=query>\n<tool_call>"),
        ("<function=search>\n", "<parameter=query>\na</parameter>b\n"),
        ("<function=search>\n", "<parameter=query>\nx\n"),
        ("<function=search>\n<parameter=query>\n", "x <parameter=query>"),
    ],
)
def test_adversarial_input_is_linear(prefix: str, unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish, prefix), SMALL) < LINEAR
