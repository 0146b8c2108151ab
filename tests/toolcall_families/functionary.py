"""Functionary: v3.2's `>>>NAME\\n{json}` blocks (label functionary) and v3.1's
`<function=NAME>{json}</function>` (label function_tag, read by formats/qwen3_coder.py).

v3.2 from meetkai-functionary-medium-v3.2.jinja (llama.cpp models/templates) and llama.cpp's
test-chat cases ("all\\nHello, world!\\nnono\\nWhat's up?>>>special_function\\n{...}"). Its
generation prompt ends with `>>>`, so a reply's first block comes without it: `NAME\\n{json}` (a
call, at the reply's start only) or `all\\ntext`, whose `all\\n` is dropped from the content as
llama.cpp's common_chat_parse_functionary_v3_2 drops it (replies that are only framed text, no
call, are in tests/unit/toolcalls/test_functionary.py). v3.1 from
meetkai-functionary-medium-v3.1.jinja: calls back to back, then `<|eom_id|>`.
"""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, THINK, TOOLS, TWO, Call, Case, j, tool

V32 = "llama.cpp models/templates/meetkai-functionary-medium-v3.2.jinja, test-chat functionary_v3_2"
V31 = "llama.cpp models/templates/meetkai-functionary-medium-v3.1.jinja"


def _v32(calls: list[Call]) -> str:
    return "".join(f">>>{n}\n{j(a)}" for n, a in calls)


def _v31(calls: list[Call]) -> str:
    return "".join(f"<function={n}>{j(a)}</function>" for n, a in calls)


_CODE = {"path": "a.py", "content": 'def f():\n    return {"k": ">>>x\\n"}  # }\n'}
_NESTED = {"cmd": "echo \"a\" 'b'", "opts": {"a": {"b": [1, {"c": "}"}]}}}

_V32 = [
    Case("functionary_one", _v32(ONE), None, ONE, "functionary", source=V32),
    Case("functionary_two", _v32(TWO), None, TWO, "functionary", source=V32),
    Case("functionary_think", f"{THINK}\n\n{_v32(TWO)}", THINK, TWO, "functionary",
         source=V32),
    # The words before the calls lose their `all\n` framing, as llama.cpp reads them.
    Case("functionary_all_then_calls",
         "all\nHello, world!\nnono\nWhat's up?" + _v32(ONE) + "\n",
         "Hello, world!\nnono\nWhat's up?", ONE, "functionary", source=V32),
    Case("functionary_framed_all_then_call", ">>>all\nLet me check." + _v32(ONE),
         PROSE, ONE, "functionary", source=V32),
    # The reply's first block with no `>>>` (the generation prompt wrote it).
    Case("functionary_opening_call", _v32(ONE)[3:], None, ONE, "functionary", source=V32),
    Case("functionary_opening_two", _v32(TWO)[3:], None, TWO, "functionary", source=V32),
    Case("functionary_opening_then_all", _v32(ONE)[3:] + ">>>all\nI'll report back.",
         "I'll report back.", ONE, "functionary", source=V32),
    Case("functionary_opening_after_think", f"{THINK}\n\n{_v32(TWO)[3:]}", THINK, TWO,
         "functionary", source=V32),
    Case("functionary_opening_eot", 'get_time\n{"tz": "UTC"}<|eot_id|>', None,
         [("get_time", {"tz": "UTC"})], "functionary", source=V32),
    # Words after the opening call stay content, as after any block (llama.cpp reads on after
    # the JSON).
    Case("functionary_opening_then_prose", 'search\n{"query": "x"} is how it is called.',
         "is how it is called.", [("search", {"query": "x"})], "functionary", source=V32),
    Case("functionary_opening_nested", _v32([("run", _NESTED)])[3:], None, [("run", _NESTED)],
         "functionary", source=V32),
    Case("functionary_prose", f"{PROSE}{_v32(TWO)}", PROSE, TWO, "functionary", source=V32),
    # A `>>>all\n` block after a call: its framing goes with the call, its text stays.
    Case("functionary_all_after_call", _v32(ONE) + ">>>all\nI'll report back.",
         "I'll report back.", ONE, "functionary", source=V32),
    Case("functionary_all_between_calls",
         f">>>get_weather\n{j(ONE[0][1])}>>>all\nAnd the time:{_v32(TWO[1:])}",
         "And the time:", TWO, "functionary", source=V32),
    Case("functionary_two_eot", _v32(TWO) + "<|eot_id|>", None, TWO, "functionary", source=V32),
    Case("functionary_eot", '>>>get_time\n{"tz": "UTC"}<|eot_id|>', None,
         [("get_time", {"tz": "UTC"})], "functionary", source=V32),
    Case("functionary_code_with_markers_in_strings", _v32([("write_file", _CODE)]), None,
         [("write_file", _CODE)], "functionary", source=V32),
    Case("functionary_nested_json_and_quotes", _v32([("run", _NESTED)]), None,
         [("run", _NESTED)], "functionary", source=V32),
    Case("functionary_pretty_json", '>>>get_weather\n{\n  "city": "Paris",\n  "days": 3\n}',
         None, ONE, "functionary", source=V32),
    # An undeclared recipient among the calls: the declared ones are still recovered.
    Case("functionary_undeclared_sibling_stays",
         '>>>delete_all\n{"force": true}>>>get_time\n{"tz": "UTC"}',
         '>>>delete_all\n{"force": true}', [("get_time", {"tz": "UTC"})], "functionary",
         source=V32),
]

_V32_NEGATIVE = [
    # Framing only at the reply's start: "all good" is words.
    Case("functionary_all_good", "all good, thanks!", None, [], None, source=V32),
    Case("functionary_all_mid_prose", "Fine, thanks.\nall\nof it.", None, [], None,
         source=V32),
    Case("functionary_opening_undeclared", 'delete_all\n{"force": true}', None, [], None,
         source=V32),
    Case("functionary_opening_cut_off_stop", 'get_weather\n{"city": "Par', None, [], None,
         source=V32),
    Case("functionary_opening_name_then_prose", "get_weather\nis the tool for that.", None, [],
         None, source=V32),
    Case("functionary_python_repl_prose",
         "In the REPL:\n>>> get_weather('Paris')\n{'city': 'Paris'}\n>>> 1 + 1\n2", None, [],
         None),
    Case("functionary_marker_then_no_json", "Type >>>search\nthen your words.", None, [], None),
    Case("functionary_undeclared", '>>>delete_all\n{"force": true}', None, [], None,
         source=V32),
    Case("functionary_cut_off_stop", '>>>get_weather\n{"city": "Par', None, [], None,
         source=V32),
    Case("functionary_bare_name_mid_reply", 'I would run\nsearch\n{"query": "x"}', None, [],
         None),
]

_V31 = [
    Case("functionary_v31_one", _v31(ONE) + "<|eom_id|>", None, ONE, "function_tag",
         source=V31),
    Case("functionary_v31_two", _v31(TWO) + "<|eom_id|>", None, TWO, "function_tag",
         source=V31),
    Case("functionary_v31_prose", f"{PROSE}{_v31(ONE)}<|eom_id|>", PROSE, ONE, "function_tag",
         source=V31),
    Case("functionary_v31_think", f"{THINK}\n\n{_v31(TWO)}", THINK, TWO, "function_tag",
         source=V31),
    Case("functionary_v31_tags_in_strings",
         _v31([("write_file", {"path": "a.html", "content": '<function=x>"q"</function>\n'})]),
         None, [("write_file", {"path": "a.html", "content": '<function=x>"q"</function>\n'})],
         "function_tag", source=V31),
    Case("functionary_v31_nested", _v31([("run", _NESTED)]) + "<|eot_id|>", None,
         [("run", _NESTED)], "function_tag", source=V31),
]

_V31_NEGATIVE = [
    Case("functionary_v31_undeclared", '<function=delete_all>{"force": true}</function>', None,
         [], None, source=V31),
    Case("functionary_v31_cut_off_stop", '<function=get_weather>{"city": "Par', None, [], None,
         source=V31),
    Case("functionary_v31_marker_in_prose", "Write <function=get_time> then the JSON.", None,
         [], None, source=V31),
]

CASES: list[Case] = [*_V32, *_V32_NEGATIVE, *_V31, *_V31_NEGATIVE]

# v3.2's raw-code python call opening the reply (llama.cpp test-chat "python raw code"): a call
# only with a `python` tool declared; without one the reply is text.
_PY_TOOLS = (*TOOLS, tool("python", {"code": {"type": "string"}}))
_RAW = "python\n# This is a program:\nprint('hey')"
CASES += [
    Case("functionary_python_raw_code", _RAW, None,
         [("python", {"code": "# This is a program:\nprint('hey')"})], "functionary",
         tools=_PY_TOOLS, source=V32),
    Case("functionary_python_raw_code_then_all", _RAW + "\n>>>all\nDone.", "Done.",
         [("python", {"code": "# This is a program:\nprint('hey')"})], "functionary",
         tools=_PY_TOOLS, source=V32),
    Case("functionary_python_word_without_python_tool", "python\nis a language.",
         "python\nis a language.", [], None, source=V32),
]  # fmt: skip
