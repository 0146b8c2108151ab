"""Tool emulation: the rewrite of a tools request for a model whose server refuses `tools`."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.agent.emulation import (
    DROPPED,
    WORDING,
    choice_note,
    choice_of,
    emulate,
    openai_tools,
    tool_block,
)
from proxy.toolcalls.recovery import process_response

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
READ = {"type": "function", "function": {
    "name": "read_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}}}}
TOOLS = [WEATHER, READ]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def _emulate(body: dict[str, Any]) -> dict[str, Any]:
    before = copy.deepcopy(body)
    out = emulate(body)
    assert body == before, "the client's body was mutated"
    return out


def _body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, "tools": TOOLS, **extra}


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _system(out: dict[str, Any]) -> str:
    first = out["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def _reply(content: str, finish: str = "stop") -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": finish,
         "message": {"role": "assistant", "content": content}}]}


# --- the instruction ---------------------------------------------------------------------------


def test_tools_are_listed_in_a_system_message_put_first_with_the_format() -> None:
    out = _emulate(_body([{"role": "user", "content": "hi"}]))
    system = _system(out)
    lines = system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].split("\n")
    assert [json.loads(line) for line in lines] == [
        {"name": "get_weather", "description": "Get the weather for a city.",
         "parameters": WEATHER["function"]["parameters"]},
        {"name": "read_file", "parameters": READ["function"]["parameters"]}]
    assert "<tool_call>" in system and "</tool_call>" in system
    assert WORDING.format in system
    assert out["messages"][1:] == [{"role": "user", "content": "hi"}]


def test_instruction_is_appended_to_the_clients_system_prompt() -> None:
    out = _emulate(_body([{"role": "user", "content": "hi"},
                          {"role": "developer", "content": "Be brief."}]))
    assert out["messages"][0] == {"role": "user", "content": "hi"}
    developer = out["messages"][1]
    assert developer["role"] == "developer"
    assert developer["content"].startswith("Be brief.\n\n# Tools")
    assert len(out["messages"]) == 2


def test_tool_fields_are_removed_and_the_rest_kept_in_order() -> None:
    body = _body([{"role": "user", "content": "hi"}], tool_choice="auto",
                 parallel_tool_calls=True, temperature=0, functions=[], function_call="auto")
    out = _emulate(body)
    assert not DROPPED & set(out)
    assert list(out) == ["model", "messages", "temperature"]


def test_legacy_functions_are_described_too() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "functions": [READ["function"], {"name": "get_weather"}], "tools": [WEATHER]}
    out = _emulate(body)
    names = [json.loads(line)["name"] for line in
             _system(out).split("<tools>\n")[1].split("\n</tools>")[0].split("\n")]
    assert names == ["get_weather", "read_file"]  # `tools` first, a repeated name once
    assert [t["function"]["name"] for t in openai_tools(body)] == names


def test_the_same_body_gives_the_same_bytes() -> None:
    body = _body([{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [_call("c1", "get_weather", '{"city": "Paris"}')]},
                  {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
                 tool_choice="required")
    assert orjson.dumps(emulate(body)) == orjson.dumps(emulate(copy.deepcopy(body)))


def test_system_prompt_is_the_same_on_every_turn_whatever_tool_choice() -> None:
    turn1 = _body([{"role": "system", "content": "S"}, {"role": "user", "content": "weather?"}],
                  tool_choice="required")
    turn2 = _body([*turn1["messages"],
                   {"role": "assistant", "content": None,
                    "tool_calls": [_call("c1", "get_weather", '{"city":"Oslo"}')]},
                   {"role": "tool", "tool_call_id": "c1", "content": "rain"}],
                  tool_choice="none")
    turn3 = _body([*turn2["messages"], {"role": "assistant", "content": "It rains."},
                   {"role": "user", "content": "thanks"}])
    systems = {_system(_emulate(body)) for body in (turn1, turn2, turn3)}
    assert len(systems) == 1
    # and the history before the last user message is rendered the same on each later turn
    out2, out3 = _emulate(turn2), _emulate(turn3)
    assert out3["messages"][:3] == out2["messages"][:3]


# --- tool_choice -------------------------------------------------------------------------------


def _last_user_text(out: dict[str, Any]) -> str:
    users = [m for m in out["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"])


def test_auto_or_absent_adds_no_note() -> None:
    for extra in ({}, {"tool_choice": "auto"}, {"tool_choice": None}):
        out = _emulate(_body([{"role": "user", "content": "hi"}], **extra))
        assert _last_user_text(out) == "hi"


def test_required_says_a_call_is_required_on_the_last_user_message() -> None:
    out = _emulate(_body([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                          {"role": "user", "content": "c"}], tool_choice="required"))
    assert out["messages"][1] == {"role": "user", "content": "a"}
    assert _last_user_text(out) == f"c\n\n{WORDING.required}"
    assert WORDING.required not in _system(out)


def test_named_function_is_named() -> None:
    choice = {"type": "function", "function": {"name": "read_file"}}
    out = _emulate(_body([{"role": "user", "content": "x"}], tool_choice=choice))
    assert _last_user_text(out) == "x\n\n" + WORDING.named.format(name="read_file")
    legacy = {"model": "m", "messages": [{"role": "user", "content": "x"}],
              "functions": [READ["function"]], "function_call": {"name": "read_file"}}
    assert _last_user_text(_emulate(legacy)) == _last_user_text(out)


def test_none_keeps_the_tools_listed_and_forbids_a_call() -> None:
    out = _emulate(_body([{"role": "user", "content": "x"}], tool_choice="none"))
    assert "get_weather" in _system(out)
    assert _last_user_text(out) == f"x\n\n{WORDING.none}"


def test_parallel_false_and_allowed_tools_are_noted() -> None:
    choice = {"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "read_file"}}]}}
    assert choice_of({"tool_choice": choice, "parallel_tool_calls": False}).allowed == (
        "read_file",)
    note = choice_note(choice_of({"tool_choice": choice, "parallel_tool_calls": False}))
    assert note == " ".join([WORDING.required, WORDING.allowed.format(names="read_file"),
                             WORDING.single])


def test_note_goes_on_a_list_content_as_a_text_part() -> None:
    out = _emulate(_body([{"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}],
                         tool_choice="required"))
    assert out["messages"][1]["content"] == [
        {"type": "text", "text": "see"}, IMAGE, {"type": "text", "text": WORDING.required}]


# --- history -----------------------------------------------------------------------------------


def test_assistant_calls_become_text_blocks_after_the_content() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            _call("c1", "get_weather", '{"city": "Paris"}'),
            _call("c2", "read_file", "not json"),
            _call("c3", "read_file", {"path": "a"}),
            _call("c4", "read_file", "")]}]))
    assistant = out["messages"][2]
    assert set(assistant) == {"role", "content"}
    assert assistant["content"] == "\n".join([
        "Checking.",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>\n{"name": "read_file", "arguments": "not json"}\n</tool_call>',
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>',
        '<tool_call>\n{"name": "read_file", "arguments": {}}\n</tool_call>'])


def test_assistant_content_is_never_left_null() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            _call("c1", "get_weather", '{"city":"Paris"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": None, "tool_calls": []}]))
    assistants = [m for m in out["messages"] if m["role"] == "assistant"]
    assert assistants[0]["content"].startswith("<tool_call>\n")
    assert assistants[1:] == [{"role": "assistant", "content": ""}] * 2


def test_legacy_function_call_in_history_is_a_block_too() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "read_file", "arguments": '{"path": "x"}'}},
        {"role": "function", "name": "read_file", "content": "data"}]))
    assert out["messages"][2] == {"role": "assistant", "content": tool_block(
        "read_file", {"path": "x"})}
    assert out["messages"][3] == {
        "role": "user", "content": '<tool_response name="read_file">\ndata\n</tool_response>'}


def test_tool_results_become_one_user_message_with_the_names() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            _call("c1", "get_weather", '{"city":"Paris"}'),
            _call("c2", "read_file", '{"path":"a"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "tool", "tool_call_id": "c2", "content": "text of a"},
        {"role": "tool", "tool_call_id": "unknown", "content": "?"},
        {"role": "user", "content": "and now?"}]))
    assert [m["role"] for m in out["messages"]] == ["system", "user", "assistant", "user"]
    assert out["messages"][3]["content"] == "\n\n".join([
        '<tool_response name="get_weather">\nsun\n</tool_response>',
        '<tool_response name="read_file">\ntext of a\n</tool_response>',
        "<tool_response>\n?\n</tool_response>",
        "and now?"])


def test_a_name_comes_only_from_earlier_calls() -> None:
    out = _emulate(_body([
        {"role": "tool", "tool_call_id": "c1", "content": "early"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "read_file", "{}")]}]))
    assert out["messages"][1]["content"] == "<tool_response>\nearly\n</tool_response>"


def test_two_real_user_messages_stay_apart() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert _emulate(_body(messages))["messages"][1:] == messages


def test_list_content_keeps_images_and_joins_text_only() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "Look."}],
         "tool_calls": [_call("c1", "read_file", '{"path":"p.png"}')]},
        {"role": "tool", "tool_call_id": "c1",
         "content": [{"type": "text", "text": "the image:"}, IMAGE]},
        {"role": "user", "content": [{"type": "text", "text": "what is it?"}, IMAGE]}]))
    assert out["messages"][2]["content"] == "Look.\n" + tool_block("read_file", {"path": "p.png"})
    assert out["messages"][3] == {"role": "user", "content": [
        {"type": "text", "text": '<tool_response name="read_file">\nthe image:'},
        IMAGE,
        {"type": "text", "text": "</tool_response>\n\nwhat is it?"},
        IMAGE]}


def test_unreadable_calls_are_left_as_they_are() -> None:
    odd = {"role": "assistant", "content": "x", "tool_calls": [_call("c1", "read_file", "{}"), 7]}
    not_a_list = {"role": "assistant", "content": None, "tool_calls": "nope"}
    out = _emulate(_body([{"role": "user", "content": "q"}, odd, not_a_list]))
    assert out["messages"][2] == odd
    assert out["messages"][3] == {**not_a_list, "content": ""}


def test_without_tools_history_is_rewritten_and_nothing_is_described() -> None:
    body = {"model": "m", "tools": [], "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "read_file", "{}")]}]}
    out = _emulate({**body, "tool_choice": "required"})
    assert [m["role"] for m in out["messages"]] == ["user", "assistant"]
    assert out["messages"][0] == {"role": "user", "content": "q"}


# --- round trip through the recovery -------------------------------------------------------------


def test_a_reply_in_the_format_comes_back_as_tool_calls() -> None:
    body = _body([{"role": "user", "content": "weather in Paris, and read a.txt"}])
    reply = _reply("Let me look.\n" + tool_block("get_weather", {"city": "Paris"}) + "\n"
                   + tool_block("read_file", {"path": "a.txt"}))
    fixed, events = process_response(reply, openai_tools(body))
    assert fixed is not None and events
    choice = fixed["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me look."
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("read_file", {"path": "a.txt"})]


def test_the_history_blocks_themselves_are_recoverable() -> None:
    out = _emulate(_body([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            _call("c1", "get_weather", '{"city": "Oslo"}')]}]))
    fixed, _ = process_response(_reply(out["messages"][2]["content"]), TOOLS)
    assert fixed is not None
    call = fixed["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Oslo"})


# --- total on odd bodies -----------------------------------------------------------------------


def test_messages_not_a_list_are_left_alone() -> None:
    assert _emulate({"model": "m", "messages": "hi", "tools": TOOLS}) == {
        "model": "m", "messages": "hi"}
    assert _emulate({"tools": "x", "tool_choice": 3}) == {}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=12)
ROLE = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", 3, None])
CONTENT = st.none() | st.text(max_size=10) | st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]),
                           "text": st.text(max_size=5) | JSON}) | JSON, max_size=3) | JSON
CALL = st.fixed_dictionaries({"id": st.sampled_from(["c1", "c2", 5]),
                              "function": st.fixed_dictionaries(
                                  {"name": st.sampled_from(["get_weather", "", None, 1]),
                                   "arguments": st.text(max_size=10) | JSON})}) | JSON
MESSAGE = st.fixed_dictionaries(
    {"role": ROLE, "content": CONTENT},
    optional={"tool_calls": st.lists(CALL, max_size=3) | JSON, "tool_call_id": JSON,
              "function_call": JSON, "name": JSON}) | JSON
BODY = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=6) | JSON},
    optional={"tools": st.lists(st.just(WEATHER) | JSON, max_size=2) | JSON,
              "tool_choice": st.sampled_from(["auto", "none", "required"]) | JSON,
              "functions": JSON, "function_call": JSON, "parallel_tool_calls": JSON})


@settings(max_examples=300, deadline=None)
@given(BODY)
def test_odd_bodies_never_raise_and_stay_unmutated(body: dict[str, Any]) -> None:
    out = _emulate(body)
    assert not DROPPED & set(out)
    orjson.dumps(out)
    if isinstance(out.get("messages"), list):
        for message in out["messages"]:
            if isinstance(message, dict) and message.get("role") == "assistant":
                assert message.get("content", "") is not None
