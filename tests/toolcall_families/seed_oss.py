"""Seed-OSS (ByteDance-Seed/Seed-OSS-36B-*): Qwen3-Coder's XML calls in `<seed:tool_call>`
(label `seed_oss`, proxy/toolcalls/formats/seed_oss.py)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, TWO, Call, Case

SRC = "vLLM seed_oss_tool_parser.py; llama.cpp models/templates/ByteDance-Seed-OSS.jinja"
TEMPLATE = "llama.cpp models/templates/ByteDance-Seed-OSS.jinja"
THINK = "<seed:think>The user wants the weather. I'll call the tools.</seed:think>"


def _params(args: dict[str, Any]) -> str:
    # The template writes each value with `| string`: numbers bare, text unquoted.
    return "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in args.items())


def seed(calls: list[Call]) -> str:
    return "\n".join(f"<seed:tool_call>\n<function={n}>\n{_params(a)}</function>\n"
                     "</seed:tool_call>" for n, a in calls)


_CODE = 'def f(x):\n    return "<" + x  # </parameter> in a comment\n'

CASES: list[Case] = [
    Case("seed_oss_one", seed(ONE), None, ONE, "seed_oss", source=TEMPLATE),
    Case("seed_oss_two", seed(TWO), None, TWO, "seed_oss", source=TEMPLATE),
    Case("seed_oss_prose", f"{PROSE}\n{seed(TWO)}", PROSE, TWO, "seed_oss", source=TEMPLATE),
    Case("seed_oss_think", f"{THINK}\n{seed(TWO)}", THINK, TWO, "seed_oss", source=TEMPLATE),
    Case("seed_oss_think_budget",
         "<seed:think>Plan.<seed:cot_budget_reflect>I have used 20 tokens."
         "</seed:cot_budget_reflect></seed:think>" + seed(ONE),
         "<seed:think>Plan.<seed:cot_budget_reflect>I have used 20 tokens."
         "</seed:cot_budget_reflect></seed:think>", ONE, "seed_oss", source=TEMPLATE),
    Case("seed_oss_eos", seed(ONE) + "<seed:eos>", None, ONE, "seed_oss", source=TEMPLATE),
    Case("seed_oss_prose_after", seed(ONE) + "\nChecking now.", "Checking now.", ONE,
         "seed_oss", source=TEMPLATE),
    Case("seed_oss_two_functions_one_wrapper",
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
         "<parameter=days>3</parameter>\n</function>\n<function=get_time>\n"
         "<parameter=tz>Europe/Paris</parameter>\n</function>\n</seed:tool_call>",
         None, TWO, "seed_oss", source="vLLM seed_oss_tool_parser.py: several <function= a call"),
    # One trailing newline of a value is the template's, not the value's (vLLM trims one).
    Case("seed_oss_multiline_code",
         seed([("write_file", {"path": "a.py", "content": _CODE})]), None,
         [("write_file", {"path": "a.py", "content": _CODE[:-1]})], "seed_oss", source=SRC),
    Case("seed_oss_typed_by_schema",
         "<seed:tool_call>\n<function=run>\n<parameter=cmd>ls -l</parameter>\n"
         "<parameter=opts>{'all': True, \"depth\": 2}</parameter>\n"
         "<parameter=force>True</parameter>\n<parameter=limit>None</parameter>\n"
         "<parameter=ratio>0.5</parameter>\n</function>\n</seed:tool_call>",
         None, [("run", {"cmd": "ls -l", "opts": {"all": True, "depth": 2}, "force": True,
                         "limit": None, "ratio": 0.5})], "seed_oss",
         source="Seed-OSS template `arg_value | string` (Python reprs); vLLM typing by schema"),
    Case("seed_oss_undeclared_keeps_siblings",
         "<seed:tool_call>\n<function=book_flight>\n<parameter=to>NYC</parameter>\n</function>\n"
         "<function=get_time>\n<parameter=tz>UTC</parameter>\n</function>\n</seed:tool_call>",
         "<function=book_flight>\n<parameter=to>NYC</parameter>\n</function>",
         [("get_time", {"tz": "UTC"})], "seed_oss", source=SRC),
    # Negatives: the text stays as it was.
    Case("seed_oss_marker_in_prose", "Seed-OSS opens each call with <seed:tool_call> first.",
         "Seed-OSS opens each call with <seed:tool_call> first.", [], None, source=TEMPLATE),
    Case("seed_oss_undeclared",
         "<seed:tool_call>\n<function=book_flight>\n<parameter=to>NYC</parameter>\n</function>\n"
         "</seed:tool_call>",
         "<seed:tool_call>\n<function=book_flight>\n<parameter=to>NYC</parameter>\n</function>\n"
         "</seed:tool_call>", [], None, source=SRC),
    Case("seed_oss_cut_off",
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Par",
         "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Par", [], None, source=SRC),
    Case("seed_oss_call_in_think",
         "<seed:think>I could write <seed:tool_call>\n<function=get_time>\n"
         "<parameter=tz>UTC</parameter>\n</function>\n</seed:tool_call> but no.</seed:think>"
         "It is noon.",
         "<seed:think>I could write <seed:tool_call>\n<function=get_time>\n"
         "<parameter=tz>UTC</parameter>\n</function>\n</seed:tool_call> but no.</seed:think>"
         "It is noon.", [], None, source="BEHAVIOUR.md 4.1: nothing in a think block is a call"),
]
