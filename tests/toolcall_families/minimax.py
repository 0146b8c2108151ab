"""MiniMax M2's `<minimax:tool_call>` blocks of `<invoke name=..>` with `<parameter name=..>`
values (proxy/toolcalls/formats/minimax.py): one and two calls, prose and a think block before,
the `[e~[` end token, typed and multi-line values, the edges of issue 18 (a missing
`</parameter>`, a literal `</parameter>` in a value, an invalid invoke among valid ones, a union
type) and the negatives."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, TWO, Call, Case, block_basics, tool
from tests.toolcall_case import j as _j

SOURCE = (
    "MiniMax-AI/MiniMax-M2.5 docs/tool_calling_guide.md; vLLM "
    "vllm/entrypoints/openai/tool_parsers/minimax_m2_tool_parser.py; SGLang "
    "test/srt/function_call streaming fuzz cases minimax-m2-*"
)


OPEN, CLOSE = "<minimax:tool_call>\n", "</minimax:tool_call>"


def _value(v: Any) -> str:
    # The template writes strings as they are and everything else as JSON.
    return v if isinstance(v, str) else _j(v)


def _p(k: str, raw: str) -> str:
    return f'<parameter name="{k}">{raw}</parameter>\n'


def invoke(name: str, args: dict[str, Any]) -> str:
    params = "".join(_p(k, _value(v)) for k, v in args.items())
    return f'<invoke name="{name}">\n{params}</invoke>\n'


def render(calls: list[Call]) -> str:
    return OPEN + "".join(invoke(n, a) for n, a in calls) + CLOSE


def _call(name: str, body: str) -> str:
    """A one-invoke block around parameters written by hand."""
    return f'{OPEN}<invoke name="{name}">\n{body}</invoke>\n{CLOSE}'


def _case(name: str, text: str, content: str | None, calls: list[Call], **kw: Any) -> Case:
    return Case(f"minimax_{name}", text, content, calls, "minimax", source=SOURCE, **kw)


def _negative(name: str, text: str, **kw: Any) -> Case:
    return Case(f"minimax_{name}", text, text, [], None, source=SOURCE, **kw)


CODE = 'def f(x):\n    if x < 1:\n        return "<b>"\n\n    return {"k": [1, 2]}\n'
LITERAL = "Close with </parameter> and then </invoke>, like this."
RUN: list[Call] = [
    ("run", {"cmd": "ls -la", "opts": {"env": {"A": "1"}, "dirs": ["a", "b"]}, "force": True,
             "limit": None, "ratio": 0.5}),
]  # fmt: skip
PAY = (tool("pay", {"amount": {"type": ["string", "integer"]}, "note": {"type": "string"}}),)
UTC: list[Call] = [("get_time", {"tz": "UTC"})]

CASES: list[Case] = [
    *block_basics(_case, render),
    _case("end_token", render(ONE) + "[e~[", None, ONE),
    _case("two_blocks_text_between", f"Lead.\n{render(ONE)}\nBetween.\n{render(TWO[1:])} After.",
          "Lead.\nBetween.\nAfter.", TWO),
    # The guide's system prompt shows the block without its close: `</invoke>` ends the call.
    _case("no_block_close", OPEN + invoke(*UTC[0]) + "[e~[", None, UTC),
    _case("typed_values", render(RUN), None, RUN),
    _case("typed_from_text", _call("run", _p("cmd", "echo \"hi\" 'there'") + _p("force", "false")
          + _p("limit", "null") + _p("ratio", "2") + _p("opts", '{"a": {"b": [1, {"c": "}"}]}}')),
          None, [("run", {"cmd": "echo \"hi\" 'there'", "force": False, "limit": None, "ratio": 2,
                          "opts": {"a": {"b": [1, {"c": "}"}]}}})]),
    # Whitespace inside a value is kept; only the framing newlines around it go.
    _case("multiline_value", _call("write_file", _p("path", "f.py") + _p("content", f"\n{CODE}\n")),
          None, [("write_file", {"path": "f.py", "content": CODE})]),
    _case("inner_whitespace_kept", _call("search", _p("query", "  two  spaces\t")), None,
          [("search", {"query": "  two  spaces\t"})]),
    # A missing `</parameter>`: the value ends at the next parameter, or at `</invoke>`.
    _case("missing_close_before_parameter", _call("get_weather", '<parameter name="city">Paris\n'
          + _p("days", "3")), None, ONE),
    _case("missing_close_before_invoke_end", _call("get_weather", _p("days", "3")
          + '<parameter name="city">Paris\n'), None,
          [("get_weather", {"days": 3, "city": "Paris"})]),
    # A value holding `</parameter>` followed by text that is no tag keeps it.
    _case("literal_close_in_value",
          _call("write_file", _p("path", "d.md") + _p("content", LITERAL)), None,
          [("write_file", {"path": "d.md", "content": LITERAL})]),
    _case("literal_tags_in_value", _call("write_file", _p("path", "m.md")
          + _p("content", f"Write {_p('k', 'v')} tags.")), None,
          [("write_file", {"path": "m.md", "content": f"Write {_p('k', 'v')} tags."})]),
    # One undeclared or broken invoke does not take its valid siblings with it, and its text
    # stays (nothing is lost), as in every family.
    _case("undeclared_sibling", OPEN + invoke("delete_all", {"x": "1"}) + invoke(*UTC[0]) + CLOSE,
          invoke("delete_all", {"x": "1"}).strip(), UTC),
    _case("broken_sibling", f'{OPEN}<invoke name="">\n{_p("x", "1")}</invoke>\n'
          + invoke(*UTC[0]) + CLOSE, f'<invoke name="">\n{_p("x", "1")}</invoke>', UTC),
    _case("junk_between_invokes", OPEN + invoke(*ONE[0]) + "OOPS stray text\n" + invoke(*TWO[1])
          + CLOSE, "OOPS stray text", TWO),
    _case("single_quoted_names", f"{OPEN}<invoke name='get_time'>\n<parameter name='tz'>UTC"
          f"</parameter>\n</invoke>\n{CLOSE}", None, UTC),
    # ["string", "integer"]: text that is no integer stays a string.
    _case("union_type_text", _call("pay", _p("amount", "2 dollars")), None,
          [("pay", {"amount": "2 dollars"})], tools=PAY),
    # The special tokens stripped by the server: a declared tool's bare invoke.
    _case("bare_invoke", f"{PROSE}\n" + invoke(*UTC[0]) + "Done.", f"{PROSE}\nDone.", UTC),
    _negative("marker_in_prose", "MiniMax wraps its calls in <minimax:tool_call> and "
              "</minimax:tool_call> tags."),
    _negative("invoke_in_prose", 'Write <invoke name="get_time"> to start a call.'),
    _negative("undeclared", render([("delete_all", {"path": "/"})])),
    _negative("bare_undeclared", invoke("delete_all", {"path": "/"})),
    _negative("cut_off", f'{OPEN}<invoke name="get_weather">\n{_p("city", "Paris")}'),
    _negative("cut_off_in_value", f'{OPEN}<invoke name="write_file">\n{_p("path", "a.txt")}'
              '<parameter name="content">hel'),
    _negative("no_tools", render(ONE), tools=()),
]
