"""The invoke/parameter XML reader (proxy/toolcalls/formats/invoke_xml.py) and its three families,
MiniMax M2, DeepSeek V3.2's DSML and Step3, beyond the corpus cases: a cut-off reply (finish
"length"), the typing of values, where a value ends, each finder on the others' text (Step3's
`<｜tool_calls_begin｜>` is also a spelling of DeepSeek V3's marker), the registry, and linear time
on adversarial replies, counted in steps (tests/steps.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.toolcalls.formats import FAMILIES, deepseek, dsml, invoke_xml, minimax, step3, triggers
from proxy.toolcalls.formats.invoke_xml import Param, Reader, Tags, header, read_invoke
from proxy.toolcalls.recovery import recover
from proxy.toolcalls.spans import Ctx
from tests.steps import growth
from tests.toolcall_case import TOOLS, tool
from tests.toolcall_families import dsml as dsml_cases
from tests.toolcall_families import minimax as mm_cases
from tests.toolcall_families import step3 as step3_cases
from tests.unit.toolcalls.test_recovery_linear_time import LINEAR, SMALL
from tests.unit.toolcalls.whole_reply import repeated, run

W = "｜"


def _calls(text: str, finish: str = "stop", tools: Any = TOOLS) -> tuple[str | None, list[Any]]:
    rec = recover(text, list(tools), finish)
    if rec is None:
        return text, []
    return rec.content, [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                         for c in rec.calls]  # fmt: skip


# --- cut off: a call that never closes is one only when the reply was cut (finish "length") ---

CUT_IN_VALUE = {
    "minimax": '<minimax:tool_call>\n<invoke name="write_file">\n<parameter name="path">a.txt'
    '</parameter>\n<parameter name="content">hel',
    "dsml": f'<{W}DSML{W}function_calls>\n<{W}DSML{W}invoke name="write_file">\n'
    f'<{W}DSML{W}parameter name="path" string="true">a.txt</{W}DSML{W}parameter>\n'
    f'<{W}DSML{W}parameter name="content" string="true">hel',
    "step3": f"<{W}tool_calls_begin{W}>\n<{W}tool_call_begin{W}>function<{W}tool_sep{W}>"
    '<steptml:invoke name="write_file"><steptml:parameter name="path">a.txt'
    '</steptml:parameter><steptml:parameter name="content">hel',
}


@pytest.mark.parametrize("fmt", CUT_IN_VALUE)
def test_a_call_cut_in_a_value_is_a_call_only_when_truncated(fmt: str) -> None:
    text = CUT_IN_VALUE[fmt]
    assert _calls(text, "stop") == (text, [])
    assert _calls(text, "length") == (None, [("write_file", {"path": "a.txt", "content": "hel"})])
    assert recover(text, TOOLS, "length").format == fmt  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", CUT_IN_VALUE)
def test_a_call_cut_after_its_parameters_is_a_call_only_when_truncated(fmt: str) -> None:
    text = CUT_IN_VALUE[fmt].rsplit("<", 1)[0]  # the last parameter's opening tag cut away
    assert _calls(text, "stop") == (text, [])
    assert _calls(text, "length") == (None, [("write_file", {"path": "a.txt"})])


@pytest.mark.parametrize(
    "text",
    [
        '<minimax:tool_call>\n<invoke name="get_time">\n',
        '<minimax:tool_call>\n<invoke name="get_ti',
        f'<{W}DSML{W}function_calls>\n<{W}DSML{W}invoke name="get_time">',
        f"<{W}tool_calls_begin{W}><{W}tool_call_begin{W}>function<{W}tool_sep{W}>"
        '<steptml:invoke name="get_time">',
    ],
)
def test_a_call_cut_before_any_parameter_is_no_call(text: str) -> None:
    assert _calls(text, "length") == (text, [])


def test_a_cut_call_after_a_complete_one() -> None:
    cut = ('<invoke name="write_file">\n<parameter name="path">a</parameter>\n'
           '<parameter name="content">lo')  # fmt: skip
    text = mm_cases.OPEN + mm_cases.invoke("get_time", {"tz": "UTC"}) + cut
    # Finish "stop": the complete call is one, the cut one stays text.
    assert _calls(text, "stop") == (cut, [("get_time", {"tz": "UTC"})])
    assert _calls(text, "length") == (
        None, [("get_time", {"tz": "UTC"}), ("write_file", {"path": "a", "content": "lo"})])


def test_a_call_cut_before_the_next_block_is_no_call_even_when_truncated() -> None:
    cut = '<minimax:tool_call>\n<invoke name="write_file">\n<parameter name="content">lo\n'
    text = cut + mm_cases.render([("get_time", {"tz": "UTC"})])
    assert _calls(text, "length") == (cut.rstrip(), [("get_time", {"tz": "UTC"})])


# --- typing ---

TYPED = (tool("t", {"n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
                    "o": {"type": "object"}, "a": {"type": "array"}, "s": {"type": "string"},
                    "u": {"type": ["integer", "string"]}, "z": {"type": ["null", "integer"]},
                    "v": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}),)  # fmt: skip


def _mm(args: dict[str, str]) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in args.items())
    return f'<minimax:tool_call>\n<invoke name="t">\n{body}</invoke>\n</minimax:tool_call>'


def test_values_are_typed_from_the_schema() -> None:
    text = _mm({"n": "42", "x": "2.5", "b": "True", "o": '{"k": [1]}', "a": "[1, \"x\"]",
                "s": "007", "z": "null", "v": "null", "extra": "7"})  # fmt: skip
    assert _calls(text, tools=TYPED)[1] == [("t", {
        "n": 42, "x": 2.5, "b": True, "o": {"k": [1]}, "a": [1, "x"], "s": "007", "z": None,
        "v": None, "extra": "7"})]  # fmt: skip


def test_text_that_fits_no_declared_type_stays_text() -> None:
    text = _mm({"n": "forty", "b": "maybe", "u": "2 dollars", "o": "not json"})
    assert _calls(text, tools=TYPED)[1] == [
        ("t", {"n": "forty", "b": "maybe", "u": "2 dollars", "o": "not json"})]


def test_a_union_takes_the_first_type_listed_that_fits() -> None:
    assert _calls(_mm({"u": "2"}), tools=TYPED)[1] == [("t", {"u": 2})]


def test_a_union_with_string_first_still_takes_an_integer() -> None:
    pay = (tool("pay", {"amount": {"type": ["string", "integer"]}}),)
    text = mm_cases.render([("pay", {"amount": "2"})])
    assert _calls(text, tools=pay)[1] == [("pay", {"amount": 2})]


def _dsml_params(**params: tuple[str, str | None]) -> dict[str, Param]:
    return {k: Param(v, {} if f is None else {"string": f}) for k, (v, f) in params.items()}


def test_dsml_string_true_is_the_raw_text_and_false_is_json() -> None:
    ctx = Ctx({"t": TYPED[0]["function"]["parameters"], "free": {}}, False)
    params = _dsml_params(n=("42", "true"), s=(" a ", "true"), b=("true", "false"),
                          o=('{"k": 1}', "false"), x=("1.5", None))  # fmt: skip
    got = dsml.dsml_typed("t", params, ctx)
    assert got == {"n": "42", "s": " a ", "b": True, "o": {"k": 1}, "x": 1.5}
    # A parameter the schema does not type: "false" is JSON, else the text as written.
    free = dsml.dsml_typed("free", _dsml_params(j=('[1, "a"]', "false"), bad=("{x", "false"),
                                                raw=("[1]", None)), ctx)
    assert free == {"j": [1, "a"], "bad": "{x", "raw": "[1]"}


def test_dsml_a_lone_arguments_parameter_is_unwrapped_only_when_it_wraps_the_schema() -> None:
    weather = {"type": "object", "properties": {"city": {"type": "string"}, "days": {}}}
    wrapped = {"type": "object", "properties": {"arguments": {"type": "object"}}}
    ctx = Ctx({"w": weather, "a": wrapped, "free": {}}, False)
    obj = '{"city": "Paris", "days": 3}'
    assert dsml.dsml_typed("w", _dsml_params(arguments=(obj, "false")), ctx) == {
        "city": "Paris", "days": 3}  # fmt: skip
    assert dsml.dsml_typed("w", _dsml_params(arguments=(obj, None)), ctx) == {
        "city": "Paris", "days": 3}  # fmt: skip
    kept = [
        ("w", _dsml_params(arguments=(obj, "true"))),  # said to be text
        ("w", _dsml_params(arguments=('{"town": "Paris"}', "false"))),  # not the schema's keys
        ("w", _dsml_params(arguments=(obj, "false"), city=("Rome", "true"))),  # not alone
        ("a", _dsml_params(arguments=('{"city": "Paris"}', "false"))),  # the schema's own
        ("free", _dsml_params(arguments=('{"city": "Paris"}', "false"))),  # no schema fields
    ]
    for name, params in kept:
        assert "arguments" in dsml.dsml_typed(name, params, ctx), params


# --- an invoke's body that is no parameter ---

TAGS = Tags("<invoke name=", "</invoke>", "<parameter name=", "</parameter>", ("</block>",))

JSON_TAGS = Tags("<invoke name=", "</invoke>", "<parameter name=", "</parameter>", ("</block>",),
                 json_body=True)  # fmt: skip


def _body(text: str, tags: Tags, truncated: bool = False) -> tuple[bool, object]:
    inv = read_invoke(text, 0, Reader(text, tags, len(text)), truncated)
    if inv is None or not invoke_xml.accepted(inv, text, truncated):
        return False, None
    return True, inv.body if inv.body is not None else {k: p.text for k, p in inv.params.items()}


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ('\n{"a": 1, "b": {"c": [2]}}\n', (True, {"a": 1, "b": {"c": [2]}})),
        ("{}", (True, {})),
        ("  ", (True, {})),
        ('{"a": 1', (False, None)),
        ("[1, 2]", (False, None)),
        ('"text"', (False, None)),
        ("please call it", (False, None)),
        # Parameters are read as they are: a JSON object beside them is stray text.
        ('{"a": 1}<parameter name="b">2</parameter>', (True, {"b": "2"})),
    ],
)
def test_an_invoke_holding_json_in_a_json_body_dialect(body: str, want: object) -> None:
    assert _body(f'<invoke name="f">{body}</invoke>', JSON_TAGS) == want


def test_a_json_body_ended_by_the_block_close_is_a_call_and_cut_off_is_none() -> None:
    assert _body('<invoke name="f">{"a": 1}\n</block>', JSON_TAGS) == (True, {"a": 1})
    assert _body('<invoke name="f">{"a": 1}', JSON_TAGS, truncated=True) == (False, None)


@pytest.mark.parametrize("body", ['{"a": 1}', "please call it"])
def test_text_as_an_invokes_only_body_is_no_call_elsewhere(body: str) -> None:
    assert _body(f'<invoke name="f">{body}</invoke>', TAGS) == (False, None)
    text = f'<minimax:tool_call>\n<invoke name="get_time">{body}</invoke>\n</minimax:tool_call>'
    assert _calls(text) == (text, [])


# --- where a value ends ---

def _invoke(text: str, truncated: bool = False) -> tuple[str, dict[str, str], int] | None:
    inv = read_invoke(text, 0, Reader(text, TAGS, len(text)), truncated)
    if inv is None or not invoke_xml.accepted(inv, text, truncated):
        return None
    return inv.name, {k: p.text for k, p in inv.params.items()}, inv.end


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ('<parameter name="a">1</parameter><parameter name="b">2</parameter>',
         {"a": "1", "b": "2"}),
        ('<parameter name="a">1\n<parameter name="b">2</parameter>', {"a": "1", "b": "2"}),
        ('<parameter name="a">x</parameter> y</parameter>', {"a": "x</parameter> y"}),
        ('<parameter name="a">see <parameter name="k">v</parameter> here</parameter>',
         {"a": 'see <parameter name="k">v</parameter> here'}),
        ('<parameter name="a">x</parameter>y\n<parameter name="b">2</parameter>',
         {"a": "x", "b": "2"}),
        ('<parameter name="a">1</parameter>\nstray words\n<parameter name="b">2</parameter>',
         {"a": "1", "b": "2"}),
        ('<parameter name="a"> \n spaced \t</parameter>', {"a": " \n spaced \t"}),
        ('<parameter name="a">1</invoke> b</parameter>', {"a": "1</invoke> b"}),
    ],
)
def test_value_ends(body: str, want: dict[str, str]) -> None:
    text = f'<invoke name="f">{body}</invoke> after'
    assert _invoke(text) == ("f", want, len(text) - len(" after"))


def test_a_value_ends_before_the_block_closes() -> None:
    text = '<invoke name="f"><parameter name="a">1\n</block> prose </parameter>'
    assert _invoke(text) == ("f", {"a": "1"}, text.index("</block>"))


def test_framing_newlines_go_only_where_the_dialect_frames_values() -> None:
    assert not TAGS.frame and invoke_xml.trim_frame("\nx\n", TAGS.frame) == "\nx\n"
    assert invoke_xml.trim_frame("\n\nx\n\n") == "\nx\n"
    text = '<minimax:tool_call>\n<invoke name="search">\n<parameter name="query">\n\nq\n\n' \
           "</parameter>\n</invoke>\n</minimax:tool_call>"  # fmt: skip
    assert _calls(text)[1] == [("search", {"query": "\nq\n"})]
    step = step3_cases.render([("search", {"query": "\nq\n"})])
    assert _calls(step)[1] == [("search", {"query": "\nq\n"})]


@pytest.mark.parametrize(
    ("tag", "want"),
    [
        ('"get_time">', ("get_time", {})),
        ("get_time>", ("get_time", {})),
        ("'get_time'>", ("get_time", {})),
        ('"k" string="true">', ("k", {"string": "true"})),
        ("\"k\" string='false' x=1>", ("k", {"string": "false", "x": "1"})),
    ],
)
def test_header(tag: str, want: tuple[str, dict[str, str]]) -> None:
    got = header(tag + "rest", 0, len(tag) + 4)
    assert got is not None and got[:2] == want and got[2] == len(tag)


@pytest.mark.parametrize("tag", ['"">', "\"a\nb\">", '"get_time"\n<parameter name="x">', '"x"'])
def test_broken_header(tag: str) -> None:
    assert header(tag, 0, len(tag)) is None


# --- each finder on the others' text ---

DEEPSEEK_TEXTS = [
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
    '{"tz": "UTC"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    step3_cases.DS_UNDERSCORE,
    '<｜tool_calls_begin｜><｜tool_call_begin｜>get_time<｜tool_sep｜>{"tz": "UTC"}'
    "<｜tool_call_end｜><｜tool_calls_end｜>",
]
# Kimi K2's ASCII tokens are near Step3's ASCII spelling: neither is the other's.
KIMI_K2 = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
    '<|tool_call_argument_begin|>{"tz": "UTC"}<|tool_call_end|><|tool_calls_section_end|>'
)
STEP3_TEXTS = [c.text for c in step3_cases.CASES if c.format == "step3"]
FOREIGN = {
    "minimax": [c.text for c in [*dsml_cases.CASES, *step3_cases.CASES] if c.format],
    "dsml": [c.text for c in [*mm_cases.CASES, *step3_cases.CASES] if c.format],
    "step3": [*DEEPSEEK_TEXTS, KIMI_K2,
              *(c.text for c in [*mm_cases.CASES, *dsml_cases.CASES] if c.format)],
}
FINDERS = {"minimax": minimax.FAMILY, "dsml": dsml.FAMILY, "step3": step3.FAMILY}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.mark.parametrize("truncated", [False, True])
@pytest.mark.parametrize("fmt", FOREIGN)
def test_a_finder_reads_nothing_in_the_other_families_text(fmt: str, truncated: bool) -> None:
    for text in FOREIGN[fmt]:
        assert FINDERS[fmt].find(text, Ctx(SCHEMAS, truncated)) == [], text


@pytest.mark.parametrize("truncated", [False, True])
def test_the_deepseek_finder_reads_no_declared_call_in_step3_text(truncated: bool) -> None:
    for text in STEP3_TEXTS:
        spans = deepseek.FAMILY.find(text, Ctx(SCHEMAS, truncated))
        assert not [c for sp in spans for c in sp.calls if c[0] in SCHEMAS], text


@pytest.mark.parametrize("text", DEEPSEEK_TEXTS)
def test_deepseek_calls_keep_their_label(text: str) -> None:
    rec = recover(text, TOOLS)
    assert rec is not None and rec.format == "deepseek"
    assert [json.loads(c["function"]["arguments"]) for c in rec.calls] == [{"tz": "UTC"}]


# --- the registry ---


def test_the_families_are_registered_with_their_markers() -> None:
    names = [f.name for f in FAMILIES]
    assert {"minimax", "dsml", "step3"} <= set(names)
    marks = triggers(["get_time"])
    for m in ("<minimax:tool_call>", '<invoke name="get_time">', f"<{W}DSML{W}function_calls>",
              "<|DSML|function_calls>", f"<{W}DSML{W}invoke name=", f"<{W}tool_calls_begin{W}>",
              "<|tool_calls_begin|>", "function<steptml:invoke name=", "<steptml:invoke name="):
        assert m in marks, m
    assert '<invoke name="' not in marks  # the bare `<invoke` is too common: declared names only


# --- linear time ---

ADVERSARIAL = [
    '<minimax:tool_call><invoke name="search"><parameter name="query">',
    '<minimax:tool_call><invoke name="search">',
    '<invoke name="search"><parameter name="query">x</parameter>y',
    '<invoke name="search"><parameter name=',
    "<minimax:tool_call><invoke name=",
    f'<{W}DSML{W}function_calls><{W}DSML{W}invoke name="search">'
    f'<{W}DSML{W}parameter name="query" string="true">',
    '<|DSML|invoke name="search"><|DSML|parameter name="query" string="true">a</|DSML|parameter>b',
    f"<{W}tool_calls_begin{W}><{W}tool_call_begin{W}>function<{W}tool_sep{W}>"
    '<steptml:invoke name="s',
    'function<steptml:invoke name="search"><steptml:parameter name="query">a</steptml:parameter>',
]
# One block whose inside repeats: the value scans must not restart at every parameter.
ONE_BLOCK = [
    ('<minimax:tool_call><invoke name="search">', '<parameter name="query">a'),
    ('<minimax:tool_call><invoke name="search">', '<parameter name="query">a</parameter>b'),
    ('<minimax:tool_call><invoke name="search">', '<parameter name="query">a</invoke>'),
    ("<minimax:tool_call>", '<invoke name="search"><parameter name="query">a</parameter>\n'),
    (f"<{W}tool_calls_begin{W}>", f"<{W}tool_call_begin{W}>function<{W}tool_sep{W}>x"),
]


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_adversarial_input_is_linear(unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish), SMALL) < LINEAR


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize(("head", "unit"), ONE_BLOCK)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_one_long_block_is_linear(head: str, unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish, head), SMALL) < LINEAR


@pytest.mark.parametrize("unit", ADVERSARIAL[:2] + ADVERSARIAL[4:6])
def test_adversarial_input_stays_text(unit: str) -> None:
    text = unit * 2_000
    assert run(text) == (text, [], "stop")
