"""Kimi K2/K3, Command R, Hunyuan's `<tool_calls>` list and DeepSeek's ASCII markers: what the
corpus cannot say (proxy/toolcalls/formats/kimi.py, command_r.py, hunyuan.py, deepseek.py,
pieces.py): cut-off calls under finish "length", argument typing, name forms, sibling calls,
and linear time on adversarial input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.observe.events import ARGUMENTS
from proxy.toolcalls.recovery import process_response, recover
from tests.steps import growth
from tests.unit.toolcalls.test_recovery_linear_time import LINEAR, SMALL
from tests.unit.toolcalls.whole_reply import TOOLS, repeated, run, stays_text

K2_CALL = "<|tool_call_begin|>functions.{}:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
K2_SECTION = "<|tool_calls_section_begin|>{}<|tool_calls_section_end|>"


def _k3(name: str, args: str) -> str:
    return (f'<|open|>tools<|sep|><|open|>call tool="{name}" index="1"<|sep|>{args}'
            "<|close|>call<|sep|><|close|>tools<|sep|>")


def _arg(key: str, kind: str, value: str) -> str:
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


def _tool(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": name, "parameters": {"type": "object", "properties": props}}}


# Cut off inside the last call's arguments: with finish "length" the complete calls and the cut
# one are recovered, the cut one's arguments relayed raw and flagged "truncated" (BEHAVIOUR 4.2);
# with "stop" the cut call stays text and the complete one before it is still a call.
K3_HEAD = '<|open|>tools<|sep|><|open|>call tool="get_time" index="1"<|sep|>'
CUT = [
    ("<|tool_calls_section_begin|>" + K2_CALL.format("get_time", '{"tz": "UTC"}'),
     '<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"query": "lo',
     '{"query": "lo'),
    ('<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_time", "parameters": {"tz": '
     '"UTC"}}, ', '{"tool_call_id": "1", "tool_name": "search", "parameters": {"query": "lo',
     '{"query": "lo'),
    ('<tool_calls>[{"name": "get_time", "arguments": {"tz": "UTC"}}, ',
     '{"name": "search", "arguments": {"query": "lo', '{"query": "lo'),
    ('<|tool▁calls▁begin|><|tool▁call▁begin|>get_time<|tool▁sep|>{"tz": "UTC"}'
     "<|tool▁call▁end|>", '<|tool▁call▁begin|>search<|tool▁sep|>{"query": "lo',
     '{"query": "lo'),
    (K3_HEAD + _arg("tz", "string", "UTC") + "<|close|>call<|sep|>",
     '<|open|>call tool="search" index="2"<|sep|>' + _arg("query", "string", "x")
     + '<|open|>argument key="n" type="number"<|sep|>4', '{"query":"x"'),
]


@pytest.mark.parametrize(("head", "cut", "raw"), CUT,
                         ids=["kimi_k2", "command_r", "hunyuan", "deepseek_ascii", "kimi_k3"])
def test_cut_off_last_call_is_a_call_only_when_truncated(head: str, cut: str, raw: str) -> None:
    text = head + cut
    assert run(text, "length")[1] == [("get_time", '{"tz":"UTC"}'), ("search", raw)]
    body = {"choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": text}}]}
    _, events = process_response(body, TOOLS)
    assert [e.labels["outcome"] for e in events if e.kind == ARGUMENTS] == ["truncated"]
    assert run(text, "stop") == (cut, [("get_time", '{"tz":"UTC"}')], "tool_calls")
    stays_text(cut, "stop")


def test_k3_arguments_are_typed_by_their_type_attribute() -> None:
    tools = [_tool("run", {"cmd": {"type": "string"}, "n": {"type": "integer"}})]
    args = (_arg("cmd", "string", "42") + _arg("n", "number", "7") + _arg("ok", "boolean", "true")
            + _arg("opts", "object", '{"a": [1, null]}') + _arg("none", "null", "null")
            + _arg("raw", "string", "  keeps\nits spacing "))
    rec = recover(_k3("run", args), tools)
    assert rec is not None and rec.format == "kimi_k3"
    assert json.loads(rec.calls[0]["function"]["arguments"]) == {
        "cmd": "42", "n": 7, "ok": True, "opts": {"a": [1, None]}, "none": None,
        "raw": "  keeps\nits spacing "}


def test_k3_unreadable_json_block_stays_text_and_spares_its_sibling() -> None:
    bad = ('<|open|>call tool="get_time" index="1"<|sep|><|open|>json type="object"<|sep|>'
           '{"tz": <|close|>json<|sep|><|close|>call<|sep|>')
    good = '<|open|>call tool="search" index="2"<|sep|>' + _arg("query", "string", "q")
    text = f"<|open|>tools<|sep|>{bad}{good}<|close|>call<|sep|><|close|>tools<|sep|>"
    content, calls, _ = run(text)
    assert (content, calls) == (bad, [("search", '{"query":"q"}')])


@pytest.mark.parametrize(
    ("call_id", "name"),
    [("functions.get_time:0", "get_time"), ("get_time:3", "get_time"), ("get_time", "get_time"),
     ("functions.ns.get_time:0", "ns.get_time"), ("functions.other.get_time:1", "get_time")],
)
def test_k2_call_ids_name_the_tool(call_id: str, name: str) -> None:
    tools = [*TOOLS, _tool("ns.get_time", {})]
    text = f'<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{{}}<|tool_call_end|>'
    rec = recover(text, tools)
    assert rec is not None and [c["function"]["name"] for c in rec.calls] == [name]


def test_k2_arguments_repaired_when_almost_json() -> None:
    text = K2_CALL.format("get_time", "{'tz': 'UTC',}")
    assert run(text)[1] == [("get_time", '{"tz":"UTC"}')]


def test_tool_calls_object_form_is_still_tagged_py_s() -> None:
    text = '<tool_calls>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_calls>'
    rec = recover(text, TOOLS)
    assert rec is not None and rec.format == "tool_calls_tag"
    assert [c["function"]["name"] for c in rec.calls] == ["get_time"]


def test_command_r_response_before_the_action_keeps_its_markers() -> None:
    # Relayed before the action shows, so a stream could not take it back; a whole reply agrees.
    text = ('<|START_RESPONSE|>Checking.<|END_RESPONSE|><|START_ACTION|>[{"tool_call_id": "0", '
            '"tool_name": "get_time", "parameters": {}}]<|END_ACTION|>')
    assert run(text)[:2] == ("<|START_RESPONSE|>Checking.<|END_RESPONSE|>", [("get_time", "{}")])


def test_deepseek_closed_but_unreadable_call_stays_text() -> None:
    bad = "<|tool▁call▁begin|>get_time<|tool▁sep|>{not json at all}<|tool▁call▁end|>"
    good = '<|tool▁call▁begin|>search<|tool▁sep|>{"query": "q"}<|tool▁call▁end|>'
    assert run(bad + good)[:2] == (bad, [("search", '{"query":"q"}')])


def test_many_calls_in_one_section_all_recovered() -> None:
    body = "".join(K2_CALL.format("search", json.dumps({"query": str(k)})) for k in range(300))
    calls = run(K2_SECTION.format(body))[1]
    assert [json.loads(a)["query"] for _, a in calls] == [str(k) for k in range(300)]


ADVERSARIAL = [
    "<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{ ",
    "<|tool_call_begin|>functions.search:0 ",
    "<|tool_calls_section_begin|><|tool_call_begin|>search",
    '<|open|>tools<|sep|><|open|>call tool="search" index="1"<|sep|><|open|>argument key="q" ',
    '<|open|>tools<|sep|><|open|>call tool="search"<|sep|><|open|>json<|sep|>{ ',
    "<|START_ACTION|>[{ ",
    '<|START_ACTION|>[{"tool_name": "search", "parameters": {}}, <|START_RESPONSE|>',
    "<answer>\n<tool_calls>[{ ",
    "<|tool▁call▁begin|>search<|tool▁sep|>{ ",
    "<|tool_calls_begin|><|tool_call_begin|>function<|tool_sep|>search\n```json\n{ ",
    "<|tool_call_begin|>search<|tool_sep|>",
]


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_adversarial_input_is_linear(unit: str, finish: str) -> None:
    assert growth(repeated(unit, finish), SMALL) < LINEAR


@pytest.mark.usefixtures("counted")
def test_many_good_calls_are_linear() -> None:
    unit = K2_CALL.format("search", '{"query": "x"}')

    def make(size: int) -> Callable[[], object]:
        text = K2_SECTION.format(unit * (size // len(unit)))
        return lambda: run(text)

    assert growth(make, SMALL) < LINEAR
