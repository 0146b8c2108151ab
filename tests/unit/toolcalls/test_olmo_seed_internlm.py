"""OLMo 3, Apertus, Seed-OSS and InternLM2 beyond the corpus (tests/toolcall_families/): calls
cut off by max_tokens, what a truncated call becomes, and linear time on adversarial input."""

from __future__ import annotations

import json

import pytest

from proxy.observe.events import ARGUMENTS
from proxy.toolcalls.recovery import process_response, recover
from tests.steps import growth
from tests.unit.toolcalls.whole_reply import TOOLS, repeated, run, stays_text

WEATHER_CUT = {
    "olmo3": '<function_calls>get_weather(city="Par',
    "apertus": '<|tools_prefix|>[{"get_weather": {"city": "Par',
    "seed_oss": "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Par",
    "internlm2": '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Par',
}


@pytest.mark.parametrize("fmt", WEATHER_CUT)
def test_a_cut_off_call_is_text_when_the_reply_stopped(fmt: str) -> None:
    stays_text("Checking. " + WEATHER_CUT[fmt], "stop")


@pytest.mark.parametrize("fmt", WEATHER_CUT)
def test_a_cut_off_call_is_a_call_when_the_reply_was_truncated(fmt: str) -> None:
    content, calls, finish = run("Checking. " + WEATHER_CUT[fmt], "length")
    assert content == "Checking."
    assert [name for name, _ in calls] == ["get_weather"]
    assert finish == "length"  # the call is cut off: the client is told the reply hit its ceiling


def _events(text: str, finish: str) -> list[str]:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish}]}
    _, events = process_response(body, TOOLS)
    return [e.labels["outcome"] for e in events if e.kind == ARGUMENTS]


def test_truncated_apertus_arguments_are_flagged_as_truncated() -> None:
    # The element never closed: its arguments go to the repair as text, which says so.
    assert _events(WEATHER_CUT["apertus"], "length") == ["truncated"]


def test_truncated_olmo3_call_closes_its_open_string() -> None:
    assert run(WEATHER_CUT["olmo3"], "length")[1] == [("get_weather", '{"city":"Par"}')]


def test_truncated_olmo3_call_drops_a_keyword_without_its_value() -> None:
    text = '<function_calls>get_time(tz="UTC")\nget_weather(city="Paris", days='
    assert run(text, "length")[1] == [("get_time", '{"tz":"UTC"}'),
                                      ("get_weather", '{"city":"Paris"}')]


def test_truncated_olmo3_call_with_an_unmatched_bracket_stays_text() -> None:
    stays_text('<function_calls>get_weather(city="Paris"]', "length")


def test_truncated_call_before_a_later_marker_is_not_a_call() -> None:
    # A call that runs into the next wrapper did not run to the end of the reply.
    text = '<function_calls>get_weather(city="Par\n<function_calls>get_time(tz="UTC")'
    assert run(text, "length")[1] == [("get_time", '{"tz":"UTC"}')]


def test_seed_oss_parameters_are_typed_by_the_schema() -> None:
    text = ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>42</parameter>\n"
            "</function>\n</seed:tool_call>")
    # `city` is a string in the schema: 42 stays the text "42".
    assert run(text)[1] == [("get_weather", '{"city":"42"}')]


def test_seed_oss_unclosed_parameter_ends_at_the_next_wrapper() -> None:
    text = "<seed:tool_call>\n<function=search>\n<parameter=query>a\n" * 2
    text += "</parameter></function></seed:tool_call>"
    assert run(text) == (None, [("search", '{"query":"a"}')] * 2, "tool_calls")


def test_bare_function_tag_stays_qwen3_coder() -> None:
    text = "<function=get_time>\n<parameter=tz>UTC</parameter>\n</function>"
    rec = recover(text, TOOLS)
    assert rec is not None and rec.format == "qwen3_coder"


def test_olmo3_reads_json_literals_in_python_calls() -> None:
    text = '<function_calls>search(query="x", exact=true, page=null)</function_calls>'
    content, calls, _ = run(text)
    assert content is None
    assert [(n, json.loads(a)) for n, a in calls] == [
        ("search", {"query": "x", "exact": True, "page": None})]


# -- linear time, counted in steps as in test_recovery_linear_time.py -----------------------

SMALL = 2_000
LINEAR = 12
ADVERSARIAL = [
    "<function_calls>get_weather(",
    '<function_calls>\nget_time(tz="',
    "<function_calls>\nnot a call\n",
    "<function_calls>x\n</function_calls>",
    "<function_calls>[{ ",
    "<|tools_prefix|>[{ ",
    '<|tools_prefix|>[{"get_time": {',
    "<|tools_prefix|>[{}, ",
    "<seed:tool_call>\n<function=search>\n<parameter=query>",
    "<seed:tool_call><function=",
    "<|action_start|><|plugin|>{ ",
]
@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_adversarial_input_is_linear(unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish), SMALL) < LINEAR


# Not the Seed-OSS units: a parameter that never closes ends at the next tag, as Qwen3-Coder's
# do (test_seed_oss_unclosed_parameter_ends_at_the_next_wrapper).
@pytest.mark.parametrize("unit", [u for u in ADVERSARIAL if "<parameter=" not in u])
def test_adversarial_input_stays_text(unit: str) -> None:
    stays_text(unit * 2_000)
