"""Responses input items as chat messages (`proxy.fronts.responses.items`): roles and the merged
system message, content parts, calls grouped into one assistant turn, outputs, reasoning, hosted
history, errors that name the item, and the ids the store gives items."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from proxy.errors import ProxyError
from proxy.fronts.responses.items import (
    Options,
    identified,
    item_param,
    reasoning_token,
    to_messages,
)
from proxy.fronts.responses.tools import Tools, translate_tools

REASONING = Options(reasoning_field="reasoning_content")


def user(content: object) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": content}


def msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def call(call_id: str, name: str = "exec_command", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, out: object = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": out}


def convert(
    items: list[Any],
    *,
    instructions: str | None = None,
    tools: Tools | None = None,
    options: Options | None = None,
    notices: list[str] | None = None,
    history: int = 0,
) -> list[dict[str, Any]]:
    return to_messages(
        items,
        instructions,
        tools or Tools(),
        options or Options(),
        notices if notices is not None else [],
        history,
    )


def refused(items: list[Any], options: Options | None = None, history: int = 0) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        convert(items, options=options, history=history)
    assert caught.value.status == 400
    return caught.value


# -- messages and roles ----------------------------------------------------------------------------


def test_string_content_user_message() -> None:
    assert convert([user("hi")]) == [{"role": "user", "content": "hi"}]


def test_message_type_is_optional() -> None:
    assert convert([{"role": "user", "content": "hi"}]) == [{"role": "user", "content": "hi"}]


def test_instructions_alone_become_a_system_message() -> None:
    assert convert([user("hi")], instructions="Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_leading_developer_and_system_merge_into_one_system_message_after_instructions() -> None:
    notices: list[str] = []
    messages = convert(
        [msg("developer", "base"), msg("system", "sys"), msg("developer", "skills"), user("go")],
        instructions="INSTR",
        notices=notices,
    )
    assert messages == [
        {"role": "system", "content": "INSTR\n\nbase\n\nsys\n\nskills"},
        {"role": "user", "content": "go"},
    ]
    assert notices == []


def test_a_later_developer_message_becomes_a_marked_user_message_with_a_notice() -> None:
    notices: list[str] = []
    messages = convert(
        [msg("developer", "base"), user("go"), said("ok"), msg("developer", "now stop")],
        notices=notices,
    )
    assert messages == [
        {"role": "system", "content": "base"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "[developer] now stop"},
    ]
    assert len(notices) == 1
    assert "input[3]" in notices[0] and "[developer]" in notices[0]
    assert [m["role"] for m in messages].count("system") == 1


def test_a_later_system_message_is_marked_system() -> None:
    messages = convert([user("go"), msg("system", "late")])
    assert messages[-1] == {"role": "user", "content": "[system] late"}


def test_assistant_text_parts_are_joined() -> None:
    item = {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": "a", "annotations": []},
            {"type": "refusal", "refusal": "b"},
        ],
    }
    assert convert([user("q"), item])[-1] == {"role": "assistant", "content": "ab"}


def test_user_text_parts_collapse_to_a_string() -> None:
    content = [{"type": "input_text", "text": "a"}, {"type": "output_text", "text": "b"}]
    assert convert([user(content)]) == [{"role": "user", "content": "ab"}]


def test_input_image_becomes_an_image_url_part_with_detail() -> None:
    content = [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
        {"type": "input_image", "image_url": "https://x/y.png", "detail": "original"},
    ]
    assert convert([user(content)]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"},
                },
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        }
    ]


def test_input_image_with_only_a_file_id_is_400_naming_the_part() -> None:
    content = [{"type": "input_text", "text": "x"}, {"type": "input_image", "file_id": "file_1"}]
    error = refused([user("first"), user(content)])
    assert error.param is not None
    assert error.param.startswith("input[1].content[1]")


def test_input_file_is_400_unless_the_upstream_takes_files() -> None:
    part = {
        "type": "input_file",
        "file_data": "data:application/pdf;base64,AA",
        "filename": "a.pdf",
    }
    error = refused([user([part])])
    assert error.param == "input[0].content[0]"
    messages = convert([user([part])], options=Options(files=True))
    assert messages == [
        {
            "role": "user",
            "content": [
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"},
                }
            ],
        }
    ]


@pytest.mark.parametrize(
    ("items", "param"),
    [
        ([{"type": "message", "role": "tool", "content": "x"}], "input[0].role"),
        ([{"type": "message", "content": "x"}], "input[0].role"),
        ([user(3)], "input[0].content"),
        ([user([{"type": "input_text"}])], "input[0].content[0].text"),
        ([user(["x"])], "input[0].content[0]"),
        ([user([{"type": "input_audio", "data": "x"}])], "input[0].content[0].type"),
        ([user("a"), {"role": "developer", "content": 5}], "input[1].content"),
        ([{"role": "assistant", "content": [{"type": "input_image"}]}], "input[0].content[0]"),
    ],
)
def test_malformed_messages_are_400_naming_the_field(items: list[Any], param: str) -> None:
    assert refused(items).param == param


# -- calls and outputs -----------------------------------------------------------------------------


def test_consecutive_calls_and_the_text_before_them_are_one_assistant_message() -> None:
    messages = convert(
        [
            user("do it"),
            said("Running both."),
            call("call_a", arguments='{"cmd":"ls"}'),
            call("call_b", arguments='{"cmd":"pwd"}'),
            output("call_a", "a-out"),
            output("call_b", "b-out"),
        ]
    )
    assert messages == [
        {"role": "user", "content": "do it"},
        {
            "role": "assistant",
            "content": "Running both.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd":"ls"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd":"pwd"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "a-out"},
        {"role": "tool", "tool_call_id": "call_b", "content": "b-out"},
    ]


def test_a_call_after_an_output_opens_a_new_assistant_message() -> None:
    messages = convert([user("q"), call("c1"), output("c1"), call("c2"), output("c2")])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[1]["content"] is None
    assert [c["id"] for c in messages[3]["tool_calls"]] == ["c2"]


def test_text_after_an_output_is_a_new_assistant_message() -> None:
    messages = convert([user("q"), call("c1"), output("c1"), said("done")])
    assert messages[-1] == {"role": "assistant", "content": "done"}


def test_namespaced_call_uses_the_flattened_name() -> None:
    tools = translate_tools(
        [{"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}], []
    )
    item = {**call("c1", name="f"), "namespace": "ns"}
    messages = convert([user("q"), item, output("c1")], tools=tools)
    assert messages[1]["tool_calls"][0]["function"]["name"] == "ns__f"


def test_output_parts_are_joined_as_text() -> None:
    parts = [{"type": "input_text", "text": "line 1"}, {"type": "output_text", "text": "line 2"}]
    messages = convert([user("q"), call("c1"), output("c1", parts)])
    assert messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "line 1\nline 2"}


def test_output_with_an_image_is_a_text_note_never_a_400() -> None:
    notices: list[str] = []
    parts = [
        {"type": "input_text", "text": "the screenshot:"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
    ]
    messages = convert(
        [user("q"), call("c1", name="view_image"), output("c1", parts)], notices=notices
    )
    tool = messages[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "c1"
    assert isinstance(tool["content"], str)
    assert tool["content"].startswith("the screenshot:\n")
    assert "image" in tool["content"] and "AAAA" not in tool["content"]
    assert len(notices) == 1 and "input_image" in notices[0]


@pytest.mark.parametrize(
    ("items", "param"),
    [
        ([user("q"), output("call_x")], "input[1].call_id"),
        ([user("q"), call("c1"), output("c1"), output("c2")], "input[3].call_id"),
        ([user("q"), output("c1"), call("c1")], "input[1].call_id"),
        ([user("q"), {"type": "function_call_output", "output": "x"}], "input[1].call_id"),
        (
            [user("q"), {"type": "custom_tool_call_output", "call_id": "z", "output": "x"}],
            "input[1].call_id",
        ),
        (
            [user("q"), {"type": "function_call", "name": "f", "arguments": "{}"}],
            "input[1].call_id",
        ),
        (
            [user("q"), {"type": "function_call", "call_id": "c", "arguments": "{}"}],
            "input[1].name",
        ),
        (
            [user("q"), {"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}],
            "input[1].arguments",
        ),
        (
            [user("q"), {"type": "custom_tool_call", "call_id": "c", "name": "f", "input": 3}],
            "input[1].input",
        ),
        (
            [user("q"), {"type": "local_shell_call", "call_id": "c", "action": "ls"}],
            "input[1].action",
        ),
        ([user("q"), call("c1"), output("c1", 42)], "input[2].output"),
        ([user("q"), call("c1"), output("c1", [{"type": "weird"}])], "input[2].output[0]"),
    ],
)
def test_bad_calls_and_outputs_are_400_naming_the_field(items: list[Any], param: str) -> None:
    assert refused(items).param == param


def test_custom_tool_call_and_output() -> None:
    tools = translate_tools([{"type": "custom", "name": "apply_patch"}], [])
    patch = "*** Begin Patch\n*** End Patch\n"
    items = [
        user("patch it"),
        {"type": "custom_tool_call", "call_id": "ctc_1", "name": "apply_patch", "input": patch},
        {"type": "custom_tool_call_output", "call_id": "ctc_1", "output": "Done!"},
    ]
    messages = convert(items, tools=tools)
    tool_call = messages[1]["tool_calls"][0]
    assert tool_call["id"] == "ctc_1"
    assert tool_call["function"]["name"] == "apply_patch"
    assert json.loads(tool_call["function"]["arguments"]) == {"input": patch}
    assert messages[2] == {"role": "tool", "tool_call_id": "ctc_1", "content": "Done!"}


def test_local_shell_call_and_its_output() -> None:
    tools = translate_tools([{"type": "local_shell"}], [])
    action = {"type": "exec", "command": ["ls", "-l"], "env": {}, "timeout_ms": 1000}
    items = [
        user("list"),
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "c1",
            "status": "completed",
            "action": action,
        },
        {"type": "local_shell_call_output", "call_id": "c1", "output": "total 0"},
    ]
    messages = convert(items, tools=tools)
    function = messages[1]["tool_calls"][0]["function"]
    assert function["name"] == "local_shell"
    assert json.loads(function["arguments"]) == {
        "command": ["ls", "-l"],
        "env": {},
        "timeout_ms": 1000,
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "total 0"}


# -- reasoning -------------------------------------------------------------------------------------


def reasoning(text: str | None = None, token: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "summary": []}
    if text is not None:
        item["content"] = [{"type": "reasoning_text", "text": text}]
    if token is not None:
        item["encrypted_content"] = token
    return item


def test_reasoning_content_goes_on_the_next_assistant_message() -> None:
    messages = convert([user("q"), reasoning("think"), said("answer")], options=REASONING)
    assert messages[-1] == {"role": "assistant", "content": "answer", "reasoning_content": "think"}


def test_reasoning_goes_on_the_next_call_turn() -> None:
    messages = convert(
        [user("q"), reasoning("plan"), call("c1"), output("c1"), said("done")], options=REASONING
    )
    assert messages[1]["reasoning_content"] == "plan"
    assert "tool_calls" in messages[1]
    assert "reasoning_content" not in messages[3]


def test_reasoning_between_calls_stays_on_the_turn() -> None:
    messages = convert(
        [
            user("q"),
            reasoning("one"),
            call("c1"),
            reasoning("two"),
            call("c2"),
            output("c1"),
            output("c2"),
        ],
        options=REASONING,
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["reasoning_content"] == "one\ntwo"
    assert len(messages[1]["tool_calls"]) == 2


def test_reasoning_is_dropped_when_the_upstream_reads_none() -> None:
    messages = convert([user("q"), reasoning("think"), said("answer")])
    assert messages[-1] == {"role": "assistant", "content": "answer"}


def test_reasoning_from_latchgates_token_round_trips() -> None:
    token = reasoning_token("secret plan ✓")
    assert token.startswith("lg1:")
    messages = convert([user("q"), reasoning(token=token), said("a")], options=REASONING)
    assert messages[-1]["reasoning_content"] == "secret plan ✓"


def test_reasoning_content_wins_over_the_token() -> None:
    item = reasoning("from content", token=reasoning_token("from token"))
    messages = convert([user("q"), item, said("a")], options=REASONING)
    assert messages[-1]["reasoning_content"] == "from content"


def test_summary_is_not_used_as_reasoning() -> None:
    item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "sum"}]}
    messages = convert([user("q"), item, said("a")], options=REASONING)
    assert "reasoning_content" not in messages[-1]


def test_openai_ciphertext_is_dropped_with_a_notice() -> None:
    notices: list[str] = []
    messages = convert(
        [user("q"), reasoning(token="gAAAAABopaque=="), said("a")],
        options=REASONING,
        notices=notices,
    )
    assert messages[-1] == {"role": "assistant", "content": "a"}
    assert len(notices) == 1 and "encrypted_content" in notices[0]


def test_damaged_token_is_400() -> None:
    error = refused([user("q"), reasoning(token="lg1:!!!not base64!!!")], options=REASONING)
    assert error.param == "input[1].encrypted_content"
    bad_json = "lg1:" + base64.urlsafe_b64encode(b"not json").decode()
    assert refused([reasoning(token=bad_json)], options=REASONING).param == (
        "input[0].encrypted_content"
    )


def test_reasoning_with_null_encrypted_content_and_no_text_is_silent() -> None:
    notices: list[str] = []
    item: dict[str, Any] = {"type": "reasoning", "summary": [], "encrypted_content": None}
    messages = convert([user("q"), item, said("a")], options=REASONING, notices=notices)
    assert messages[-1] == {"role": "assistant", "content": "a"}
    assert notices == []


# -- other items -----------------------------------------------------------------------------------


def test_hosted_tool_history_is_dropped_with_one_notice() -> None:
    notices: list[str] = []
    items = [
        user("q"),
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {}},
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "x"},
        said("found it"),
    ]
    messages = convert(items, notices=notices)
    assert messages == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "found it"},
    ]
    assert len(notices) == 1
    assert "web_search_call" in notices[0] and "image_generation_call" in notices[0]


def test_additional_tools_items_are_ignored() -> None:
    notices: list[str] = []
    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "function", "name": "f"}],
    }
    messages = convert([item, msg("developer", "base"), user("q")], notices=notices)
    assert messages == [{"role": "system", "content": "base"}, {"role": "user", "content": "q"}]
    assert notices == []


def test_unknown_item_type_is_400_on_its_type() -> None:
    error = refused([user("q"), {"type": "telepathy_call"}])
    assert error.param == "input[1].type"
    assert "telepathy_call" in error.message


def test_non_string_item_type_is_400() -> None:
    assert refused([{"type": 5}]).param == "input[0].type"


@pytest.mark.parametrize("item", ["hello", 3, None, ["x"]])
def test_non_dict_item_is_400(item: object) -> None:
    assert refused([user("q"), item]).param == "input[1]"


def test_unresolved_item_reference_is_400_on_its_id() -> None:
    assert refused([{"type": "item_reference", "id": "msg_1"}]).param == "input[0].id"
    assert refused([user("q"), {"id": "msg_1"}]).param == "input[1].id"


# -- errors in stored history, and item_param ------------------------------------------------------


def test_item_param_counts_from_the_history() -> None:
    assert item_param(0, 0) == "input[0]"
    assert item_param(4, 0) == "input[4]"
    assert item_param(1, 2) == "previous_response_id (its item 1)"
    assert item_param(2, 2) == "input[0]"
    assert item_param(5, 2) == "input[3]"


def test_an_error_after_the_history_names_its_place_in_input() -> None:
    history = [user("old"), said("reply")]
    error = refused([*history, user("new"), output("nope")], history=2)
    assert error.param == "input[1].call_id"


def test_an_output_may_answer_a_call_from_the_history() -> None:
    messages = convert([user("old"), call("c1"), output("c1", "x")], history=2)
    assert messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "x"}


# -- identified ------------------------------------------------------------------------------------


def test_identified_gives_each_item_an_id_and_a_type() -> None:
    items = [
        {"role": "user", "content": "hi"},
        call("c1"),
        output("c1"),
        {"type": "custom_tool_call", "call_id": "c2", "name": "p", "input": "x"},
        {"type": "reasoning", "summary": []},
        {"type": "future_kind"},
    ]
    out = identified(items)
    assert [i["type"] for i in out] == [
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "reasoning",
        "future_kind",
    ]
    prefixes = ["msg_", "fc_", "fco_", "ctc_", "rs_", "item_"]
    for item, prefix in zip(out, prefixes, strict=True):
        assert item["id"].startswith(prefix)
    assert len({i["id"] for i in out}) == len(out)
    # A message's string content is listed as parts, as OpenAI lists input items.
    assert out[0]["content"] == [{"type": "input_text", "text": "hi"}]
    assert out[1]["call_id"] == "c1"
    assert "id" not in items[0] and items[0]["content"] == "hi"  # the client's items unchanged


def test_identified_keeps_given_ids_and_skips_non_objects() -> None:
    kept = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}],
            "id": "msg_given"}  # fmt: skip
    untyped = {"role": "assistant", "content": "y", "id": "msg_untyped"}
    out = identified([kept, "junk", untyped, 7])
    assert out[0] is kept
    assert out[1] == {"role": "assistant", "content": [{"type": "output_text", "text": "y"}],
                      "id": "msg_untyped", "type": "message"}  # fmt: skip
    assert len(out) == 2


def test_local_shell_call_output_as_the_sdk_types_it() -> None:
    # The SDK's LocalShellCallOutput has `id` (the model's id of the call) and no `call_id`.
    tools = translate_tools([{"type": "local_shell"}], [])
    items = [
        user("list"),
        {
            "type": "local_shell_call",
            "id": "c1",
            "call_id": "c1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "id": "c1", "output": "total 0"},
    ]
    messages = convert(items, tools=tools)
    assert messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "total 0"}
