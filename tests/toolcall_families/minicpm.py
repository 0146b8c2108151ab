"""MiniCPM5 cases: `<function name="NAME"><param name="K">v</param></function>`, values typed by
the schema and CDATA kept as written (label `minicpm`, proxy/toolcalls/formats/minicpm.py)."""

from __future__ import annotations

from typing import Any

from tests.toolcall_case import ONE, PROSE, THINK, TWO, Call, Case

LLAMA = "llama.cpp tests/test-chat.cpp, openbmb-MiniCPM5-1B (format MINICPM5)"


def fn(name: str, params: str) -> str:
    return f'<function name="{name}">{params}</function>'


def params(args: dict[str, Any]) -> str:
    return "".join(f'<param name="{k}">{v}</param>' for k, v in args.items())


def calls(cs: list[Call]) -> str:
    return "".join(fn(n, params(a)) for n, a in cs)


CODE = 'print("</param> is a tag")'
MARKUP = '<p>a</param></function><function name="x"></p>'
WRITE_CODE: list[Call] = [("write_file", {"path": "a.py", "content": CODE})]
WRITE_CDATA: list[Call] = [("write_file", {"path": "a.html", "content": f"\n{MARKUP}\n"})]
LINES = ('<function name="get_weather">\n<param name="city">\nParis\n</param>\n'
         '<param name="days">3</param>\n</function>')

CASES: list[Case] = [
    Case("minicpm_call", calls(ONE), None, ONE, "minicpm", source=LLAMA),
    Case("minicpm_two_calls", calls(TWO), None, TWO, "minicpm"),
    Case("minicpm_newlines_between_tags", LINES, None, ONE, "minicpm"),
    Case("minicpm_prose_before", f"{PROSE}\n{calls(ONE)}", PROSE, ONE, "minicpm"),
    Case("minicpm_after_think", f"{THINK}\n{calls(TWO)}", THINK, TWO, "minicpm"),
    Case("minicpm_cdata_kept_as_written",
         fn("write_file", '<param name="path">a.html</param>'
            f'<param name="content"><![CDATA[\n{MARKUP}\n]]></param>'),
         None, WRITE_CDATA, "minicpm", source=LLAMA),
    Case("minicpm_param_close_inside_value", calls(WRITE_CODE), None, WRITE_CODE, "minicpm"),
    Case("minicpm_no_parameters", fn("get_time", ""), None, [("get_time", {})], "minicpm"),
    Case("minicpm_then_im_end", calls(ONE) + "<|im_end|>", None, ONE, "minicpm"),
    # Negatives
    Case("minicpm_unclosed_stop", '<function name="get_weather"><param name="city">Paris',
         None, [], None),
    Case("minicpm_no_function_close", '<function name="get_weather"><param name="city">Paris'
         "</param>", None, [], None),
    Case("minicpm_undeclared", calls([("delete_all", {"force": "true"})]), None, [], None),
    Case("minicpm_key_twice", fn("get_weather", params({"city": "Paris"}) * 2), None, [], None),
    Case("minicpm_non_finite_number", fn("run", params({"cmd": "ls", "ratio": "1e999"})), None,
         [], None),
    Case("minicpm_cdata_unclosed",
         fn("write_file", '<param name="content"><![CDATA[<p>a</p></param>'), None, [], None),
    Case("minicpm_tag_in_prose", 'Write <function name="get_weather"> to start a call.', None,
         [], None),
    Case("minicpm_html_param_in_prose",
         'Embed it as <object><param name="movie" value="a.swf"></object>.', None, [], None),
]
