"""Muse Glimmer's ` to=NAME<|message|>` header and `<atem:function_calls>` block of
`<atem:invoke name=..>` with `<atem:parameter name=..>` values (proxy/toolcalls/formats/
glimmer.py): one and two calls, prose, a think block and an analysis message before, the
`<|start|>assistant` before a later message's header, end tokens, typed values with their
spaces kept, control-token text and a literal close in a value, an undeclared sibling, the
answer header ` to=user<|message|>` dropped before a call's words, and the negatives (markup
quoted in an answer or in prose, a header naming an undeclared tool, a block cut off or never
closed)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, tool
from tests.toolcall_case import j as _j

SOURCE = (
    "llama.cpp tests/test-chat.cpp muse-glimmer (MUSE_GLIMMER); Ollama "
    "model/parsers/glimmer_test.go"
)


def _value(v: Any) -> str:
    # Strings as they are (spaces kept), lists, objects and scalars as JSON.
    return v if isinstance(v, str) else _j(v)


def _p(k: str, raw: str) -> str:
    return f'<atem:parameter name="{k}">{raw}</atem:parameter>\n'


def invoke(name: str, args: dict[str, Any]) -> str:
    params = "".join(_p(k, _value(v)) for k, v in args.items())
    return f'<atem:invoke name="{name}">\n{params}</atem:invoke>\n'


def block(calls: list[Call]) -> str:
    return "<atem:function_calls>\n" + "".join(invoke(n, a) for n, a in calls) + (
        "</atem:function_calls>"
    )


def render(calls: list[Call], start: bool = False) -> str:
    lead = "<|start|>assistant" if start else ""
    return f"{lead} to={calls[0][0]}<|message|>{block(calls)}"


def _case(name: str, text: str, content: str | None, calls: list[Call], **kw: Any) -> Case:
    return Case(f"glimmer_{name}", text, content, calls, "glimmer", **{"source": SOURCE, **kw})


def _negative(name: str, text: str, **kw: Any) -> Case:
    return Case(f"glimmer_{name}", text, None, [], None, **{"source": SOURCE, **kw})


RUN: list[Call] = [
    ("run", {"cmd": " ls  -la ", "opts": {"a": [1, {"b": "}"}]}, "force": False, "limit": None,
             "ratio": 1.5}),
]  # fmt: skip
CODE = "for i in range(3):\n    if i < 2:\n        print(i)\n"
ECHO = [("search", {"query": "literal <|eot|> and <|start|>assistant to=user<|message|> text"})]
LITERAL = [("write_file", {"path": "x.xml", "content": "<a></atem:parameter> b</a>"})]
ANALYSIS = " to=self<|message|>I should look it up.<|eom|>"
UNDECLARED = '<atem:invoke name="delete_all">\n<atem:parameter name="x">1</atem:parameter>\n'
PAY = (tool("pay", {"amount": {"type": ["string", "integer"]}}),)

CASES: list[Case] = [
    _case("one", render(ONE), None, ONE),
    _case("two", render(TWO), None, TWO),
    _case("eom", render(ONE) + "<|eom|>", None, ONE),
    _case("eot", render(TWO) + "<|eot|>", None, TWO),
    _case("prose", f"{PROSE}{render(ONE, start=True)}", PROSE, ONE),
    _case("think", f"{THINK}\n\n{render(TWO)}", THINK, TWO),
    # An analysis message first (`to=self`): its text stays; the call's header goes with it.
    _case("after_analysis", ANALYSIS + render(ONE, start=True) + "<|eom|>",
          ANALYSIS, ONE),
    _case("typed_values", render(RUN), None, RUN),
    _case("multiline_value", render([("write_file", {"path": "a.py", "content": CODE})]), None,
          [("write_file", {"path": "a.py", "content": CODE})]),
    _case("control_tokens_in_value", render(ECHO) + "<|eot|>", None, ECHO),
    _case("literal_close_in_value", render(LITERAL), None, LITERAL),
    _case("union_type_text", render([("pay", {"amount": "2 dollars"})]), None,
          [("pay", {"amount": "2 dollars"})], tools=PAY),
    # An invoke naming an undeclared tool stays text; its sibling is recovered.
    _case("undeclared_sibling",
          " to=get_weather<|message|><atem:function_calls>\n" + UNDECLARED + "</atem:invoke>\n"
          + invoke(*ONE[0]) + "</atem:function_calls>",
          UNDECLARED + "</atem:invoke>", ONE),
    # The answer header opening the reply is the template's: dropped, the words stay.
    _case("answer_then_call", f" to=user<|message|>{PROSE}<|eom|>{render(ONE, start=True)}",
          f"{PROSE}<|eom|>", ONE),
]  # fmt: skip

NEGATIVES: list[Case] = [
    # Markup with no header is quoted, not a call (llama.cpp reads calls after a header only).
    _negative("block_without_header", "You invoke it like this:\n" + block(ONE)),
    _negative("prose_about_header", "Write to=get_weather then the block."),
    _negative("undeclared_header", " to=delete_all<|message|>" + block([("delete_all", {"x": 1})])),
    _negative("header_then_prose", " to=get_weather<|message|>Paris, 3 days."),
    # Cut off while finish was "stop": the block never closes, so no call.
    _negative("cut_off", render(ONE)[: -len("</atem:invoke>\n</atem:function_calls>")]),
    _negative("never_closed", " to=get_weather<|message|><atem:function_calls>\n"
              '<atem:invoke name="get_weather">\n<atem:parameter name="city">Par'),
]  # fmt: skip

CASES = [*CASES, *NEGATIVES]
