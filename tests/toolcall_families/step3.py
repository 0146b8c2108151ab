"""StepFun Step3's `<｜tool_calls_begin｜>` blocks of `<｜tool_call_begin｜>function<｜tool_sep｜>`
steptml invokes (proxy/toolcalls/formats/step3.py), with the fullwidth bar and the ASCII `|` of
Step3's own system prompt; one and two calls, prose and a think block before, the `<|EOT|>` end
token, typed and multi-line values, the edges of issue 18, the residue of stripped tokens, calls
without `function<｜tool_sep｜>` or with the name again after it (vLLM's own tests), the
negatives, and DeepSeek V3 written with `_` for `▁` (whose `<｜tool_calls_begin｜>` is Step3's):
each must come out with its own label."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, TWO, Call, Case, block_basics, tool
from tests.toolcall_case import j as _j

SOURCE = (
    "vLLM vllm/entrypoints/openai/tool_parsers/step3_tool_parser.py; SGLang "
    "python/sglang/srt/function_call/step3_detector.py; stepfun-ai/step3 chat_template.json"
)


def _tok(name: str, bar: str = "｜") -> str:
    return f"<{bar}{name}{bar}>"


def _value(v: Any) -> str:
    return v if isinstance(v, str) else _j(v)


def _p(k: str, raw: str) -> str:
    return f'<steptml:parameter name="{k}">{raw}</steptml:parameter>'


def invoke(name: str, body: str) -> str:
    return f'<steptml:invoke name="{name}">{body}</steptml:invoke>'


def entry(name: str, body: str, bar: str = "｜") -> str:
    return (f"{_tok('tool_call_begin', bar)}function{_tok('tool_sep', bar)}{invoke(name, body)}"
            f"{_tok('tool_call_end', bar)}")  # fmt: skip


def entry_as(lead: str, name: str, body: str) -> str:
    """An entry with `lead` (not `function<｜tool_sep｜>`) between the call's begin token and
    its invoke."""
    return f"{_tok('tool_call_begin')}{lead}{invoke(name, body)}{_tok('tool_call_end')}"


def _params(args: dict[str, Any]) -> str:
    return "".join(_p(k, _value(v)) for k, v in args.items())


def block(*entries: str, bar: str = "｜") -> str:
    return (f"{_tok('tool_calls_begin', bar)}\n" + "\n".join(entries)
            + f"\n{_tok('tool_calls_end', bar)}")  # fmt: skip


def render(calls: list[Call], bar: str = "｜") -> str:
    return block(*(entry(n, _params(a), bar) for n, a in calls), bar=bar)


def _case(name: str, text: str, content: str | None, calls: list[Call], fmt: str = "step3",
          **kw: Any) -> Case:  # fmt: skip
    return Case(f"step3_{name}", text, content, calls, fmt, **{"source": SOURCE, **kw})


def _negative(name: str, text: str, **kw: Any) -> Case:
    return Case(f"step3_{name}", text, text, [], None, source=SOURCE, **kw)


CODE = "for i in range(3):\n    if i < 2:\n        print(i)\n\n"
RUN: list[Call] = [
    ("run", {"cmd": "ls", "opts": {"a": [1, {"b": "}"}]}, "force": False, "limit": 10,
             "ratio": 1.5}),
]  # fmt: skip
UTC: list[Call] = [("get_time", {"tz": "UTC"})]
PAY = (tool("pay", {"amount": {"type": ["string", "integer"]}}),)
DS_UNDERSCORE = (
    "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>get_time\n```json\n"
    '{"tz": "UTC"}\n```<｜tool_call_end｜><｜tool_calls_end｜>'
)

CASES: list[Case] = [
    *block_basics(_case, render),
    _case("end_token", render(ONE) + "<|EOT|>", None, ONE),
    _case("ascii_bars", render(TWO, "|"), None, TWO),
    # The system prompt's own layout: a newline after the call's begin token.
    _case("template_layout", "<|tool_calls_begin|>\n<|tool_call_begin|>\nfunction<|tool_sep|>"
          + invoke("get_time", _p("tz", "UTC")) + "<|tool_call_end|>\n<|tool_calls_end|>",
          None, UTC),
    _case("typed_values", render(RUN), None, RUN),
    _case("multiline_value", render([("write_file", {"path": "a.py", "content": CODE})]), None,
          [("write_file", {"path": "a.py", "content": CODE})]),
    _case("value_with_lt", render([("search", {"query": "a < b && c > d"})]), None,
          [("search", {"query": "a < b && c > d"})]),
    _case("missing_close_before_parameter", block(entry("get_weather",
          '<steptml:parameter name="city">Paris' + _p("days", "3"))), None, ONE),
    _case("missing_close_before_invoke_end", block(
          f'{_tok("tool_call_begin")}function{_tok("tool_sep")}<steptml:invoke name="get_time">'
          f'<steptml:parameter name="tz">UTC</steptml:invoke>{_tok("tool_call_end")}'), None, UTC),
    _case("literal_close_in_value", render([("write_file", {"path": "x.xml",
          "content": "<a></steptml:parameter> b</a>"})]), None,
          [("write_file", {"path": "x.xml", "content": "<a></steptml:parameter> b</a>"})]),
    # The bad entry's text stays; its sibling is recovered.
    _case("undeclared_sibling", block(entry("delete_all", _p("x", "1")), entry("get_time",
          _p("tz", "UTC"))), entry("delete_all", _p("x", "1")).strip(), UTC),
    _case("broken_sibling", block(f"{_tok('tool_call_begin')}function{_tok('tool_sep')}"
          f"get_weather{_tok('tool_call_end')}", entry("get_time", _p("tz", "UTC"))),
          f"{_tok('tool_call_begin')}function{_tok('tool_sep')}get_weather{_tok('tool_call_end')}",
          UTC),
    _case("union_type_text", render([("pay", {"amount": "2 dollars"})]), None,
          [("pay", {"amount": "2 dollars"})], tools=PAY),
    # The special tokens stripped by the server: `function` and the bare invoke remain.
    _case("stripped_tokens", f"{PROSE}\nfunction" + invoke("get_time", _p("tz", "UTC")),
          PROSE, UTC),
    _case("bare_invoke", invoke("get_time", _p("tz", "UTC")) + "\nDone.", "Done.", UTC),
    # DeepSeek V3 with `_` for `▁` opens with Step3's marker; it stays DeepSeek's.
    _case("deepseek_underscored", DS_UNDERSCORE, None, UTC, fmt="deepseek",
          source="formats/deepseek.py: the `▁` may come as `_`"),
    # vLLM's tests write calls with no `function<｜tool_sep｜>`, or with the name again after
    # it on a line of its own: the frame goes with the call either way.
    _case("no_lead", block(entry_as("", "get_time", _p("tz", "UTC"))), None, UTC),
    _case("no_lead_two_prose", f"{PROSE}\n\n" + block(*(entry_as("", n, _params(a))
          for n, a in TWO)) + "\nDone.", f"{PROSE}\nDone.", TWO),
    _case("name_after_sep", block(entry_as(f"function{_tok('tool_sep')}get_time\n", "get_time",
          _p("tz", "UTC"))), None, UTC),
    _case("no_lead_no_arguments", block(entry_as("", "get_time", "")), None,
          [("get_time", {})]),
    # The invoke's own name is the one its parameters go with.
    _case("name_after_sep_differs", block(entry_as(f"function{_tok('tool_sep')}get_weather\n",
          "get_time", _p("tz", "UTC"))), None, UTC),
    _negative("marker_in_prose", "Step3 opens its calls with <｜tool_calls_begin｜> tokens."),
    _negative("undeclared", render([("delete_all", {"path": "/"})])),
    _negative("stripped_undeclared", "function" + invoke("delete_all", _p("path", "/"))),
    _negative("stripped_cut_off", "function" + invoke("get_time", _p("tz", "UTC"))[:-20]),
    _negative("cut_off", f"{_tok('tool_calls_begin')}\n{_tok('tool_call_begin')}function"
              f'{_tok("tool_sep")}<steptml:invoke name="get_weather">{_p("city", "Paris")}'),
    _negative("name_and_json_after_sep", block(f"{_tok('tool_call_begin')}function"
              f'{_tok("tool_sep")}{{"name": "get_time"}}{_tok("tool_call_end")}')),
]
