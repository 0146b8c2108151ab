"""Apertus (swiss-ai/Apertus-*): `<|tools_prefix|>[{"NAME": {args}}, ...]<|tools_suffix|>`
(label `apertus`, proxy/toolcalls/formats/apertus.py)."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case, j

SRC = "vLLM apertus_tool_parser.py; SGLang apertus2509_detector.py"
OLLAMA = "Ollama model/parsers/apertus15_test.go"


def apertus(calls: list[Call]) -> str:
    return "<|tools_prefix|>" + j([{n: a} for n, a in calls]) + "<|tools_suffix|>"


_CODE = 'def f(x):\n    return "<" + x\n'

CASES: list[Case] = [
    Case("apertus_one", apertus(ONE), None, ONE, "apertus", source=SRC),
    Case("apertus_two", apertus(TWO), None, TWO, "apertus", source=SRC),
    Case("apertus_prose", f"{PROSE} {apertus(TWO)}", PROSE, TWO, "apertus", source=SRC),
    Case("apertus_think", f"{THINK}\n{apertus(TWO)}", THINK, TWO, "apertus", source=SRC),
    Case("apertus_assistant_end", apertus(ONE) + "<|assistant_end|>", None, ONE, "apertus",
         source=OLLAMA),
    Case("apertus_compact_and_no_arguments",
         '<|tools_prefix|>[{"get_weather":{"city":"Zurich"}},{"get_time":{}}]<|tools_suffix|>',
         None, [("get_weather", {"city": "Zurich"}), ("get_time", {})], "apertus", source=OLLAMA),
    Case("apertus_nested_quotes_newlines",
         apertus([("write_file", {"path": "a.py", "content": _CODE}),
                  ("run", {"cmd": 'echo "}]"', "opts": {"env": {"A": [1, {"b": None}]}}})]),
         None, [("write_file", {"path": "a.py", "content": _CODE}),
                ("run", {"cmd": 'echo "}]"', "opts": {"env": {"A": [1, {"b": None}]}}})],
         "apertus", source=SRC),
    Case("apertus_envelopes_with_prose",
         f"Before.{apertus(ONE)}Between.{apertus(TWO[1:])}After.",
         "Before.\nBetween.\nAfter.", TWO, "apertus", source=OLLAMA),
    Case("apertus_suffix_missing", '<|tools_prefix|>[{"get_time": {"tz": "UTC"}}]', None,
         [("get_time", {"tz": "UTC"})], "apertus",
         source="vLLM apertus_tool_parser.py: the suffix is optional; " + OLLAMA),
    Case("apertus_name_arguments_objects",
         '<|tools_prefix|>[{"name": "get_time", "arguments": {"tz": "UTC"}}]<|tools_suffix|>',
         None, [("get_time", {"tz": "UTC"})], "apertus", source=SRC),
    Case("apertus_invalid_element_keeps_siblings",
         '<|tools_prefix|>[{"get_weather": "Paris"}, {"get_time": {"tz": "UTC"}}]'
         "<|tools_suffix|>",
         '{"get_weather": "Paris"},', [("get_time", {"tz": "UTC"})], "apertus", source=OLLAMA),
    Case("apertus_undeclared_element_keeps_siblings",
         '<|tools_prefix|>[{"get_time": {"tz": "UTC"}}, {"book_flight": {"to": "NYC"}}]'
         "<|tools_suffix|>",
         '{"book_flight": {"to": "NYC"}}', [("get_time", {"tz": "UTC"})], "apertus", source=SRC),
    # Negatives: the text stays as it was.
    Case("apertus_marker_in_prose",
         "Apertus writes <|tools_prefix|> before its list of calls.",
         "Apertus writes <|tools_prefix|> before its list of calls.", [], None, source=SRC),
    Case("apertus_undeclared", '<|tools_prefix|>[{"book_flight": {"to": "NYC"}}]<|tools_suffix|>',
         '<|tools_prefix|>[{"book_flight": {"to": "NYC"}}]<|tools_suffix|>', [], None,
         source=SRC),
    Case("apertus_cut_off", '<|tools_prefix|>[{"get_weather": {"city": "Par',
         '<|tools_prefix|>[{"get_weather": {"city": "Par', [], None, source=SRC),
    Case("apertus_malformed", '<|tools_prefix|>[{"get_time":<|tools_suffix|>',
         '<|tools_prefix|>[{"get_time":<|tools_suffix|>', [], None, source=OLLAMA),
    Case("apertus_two_names_one_object",
         '<|tools_prefix|>[{"get_time": {}, "search": {}}]<|tools_suffix|>',
         '<|tools_prefix|>[{"get_time": {}, "search": {}}]<|tools_suffix|>', [], None,
         source=OLLAMA),
    Case("apertus_inner_think_block",
         '<|inner_prefix|>I could call <|tools_prefix|>[{"get_time": {"tz": "UTC"}}]'
         '<|tools_suffix|><|inner_suffix|>It is noon.',
         None, [], None, source="Apertus chat template: reasoning in <|inner_prefix|>..."),
]
