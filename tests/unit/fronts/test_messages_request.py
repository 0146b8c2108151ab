"""A Messages body as a chat body (`proxy.fronts.messages.request`): system text, every content
block, tool calls and results, tools and tool_choice, the settings, the reasoning switch per
upstream kind, the notices for what has no chat meaning, and the 400s that name a field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.errors import ProxyError
from proxy.fronts.common import Options
from proxy.fronts.messages.request import Translated, chat_call_id, translate

USER = {"role": "user", "content": "hi"}
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
LLAMA = Options.for_kind("llama.cpp")


def run(body: dict[str, Any], options: Options | None = None) -> Translated:
    full = {"model": "m", "max_tokens": 100, "messages": [USER], **body}
    return translate({k: v for k, v in full.items() if v is not ...}, options or Options())


def refused(body: dict[str, Any], options: Options | None = None) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        run(body, options)
    assert caught.value.status == 400
    return caught.value


def noted(notices: list[str], *words: str) -> bool:
    return any(all(w in n for w in words) for n in notices)


def messages(*content: Any, role: str = "user") -> dict[str, Any]:
    return {"messages": [{"role": role, "content": list(content)}]}


def chat_messages(body: dict[str, Any], options: Options | None = None) -> list[dict[str, Any]]:
    return run(body, options).chat["messages"]


# -- the basics ------------------------------------------------------------------------------


def test_minimal_request() -> None:
    t = run({})
    assert t.chat == {"model": "m", "messages": [USER], "max_tokens": 100}
    assert t.stream is False and t.notices == []


def test_stream_asks_for_usage() -> None:
    t = run({"stream": True})
    assert t.stream is True
    assert t.chat["stream"] is True and t.chat["stream_options"] == {"include_usage": True}
    assert "stream" not in run({"stream": False}).chat
    assert refused({"stream": "yes"}).param == "stream"


def test_max_tokens_is_required() -> None:
    error = refused({"max_tokens": ...})
    assert error.param == "max_tokens" and error.code == "missing_required_parameter"
    for wrong in (0, -1, 1.5, "100", True):
        assert refused({"max_tokens": wrong}).param == "max_tokens", wrong


# -- system --------------------------------------------------------------------------------


def test_system_string_leads() -> None:
    assert chat_messages({"system": "Be brief."}) == [
        {"role": "system", "content": "Be brief."},
        USER,
    ]


def test_system_blocks_are_joined_and_cache_control_ignored() -> None:
    system = [
        {"type": "text", "text": "x-billing: 123"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ]
    t = run({"system": system})
    assert t.chat["messages"][0] == {
        "role": "system",
        "content": "x-billing: 123\n\nYou are Claude Code.",
    }
    assert "cache_control" not in json.dumps(t.chat)
    assert t.notices == []


def test_empty_system_sends_none() -> None:
    assert chat_messages({"system": ""}) == [USER]
    assert chat_messages({"system": []}) == [USER]


@pytest.mark.parametrize(
    ("system", "param"),
    [
        (5, "system"),
        ({"type": "text", "text": "x"}, "system"),
        ([{"type": "image"}], "system[0]"),
        (["plain"], "system[0]"),
        ([{"type": "text", "text": 3}], "system[0].text"),
    ],
)
def test_bad_system_names_it(system: Any, param: str) -> None:
    assert refused({"system": system}).param == param


def test_a_system_message_inside_messages_becomes_a_marked_user_message() -> None:
    t = run(
        {
            "messages": [
                USER,
                {"role": "system", "content": [{"type": "text", "text": "Reminder: be safe."}]},
            ]
        }
    )
    assert t.chat["messages"] == [USER, {"role": "user", "content": "[system] Reminder: be safe."}]
    assert noted(t.notices, "messages[1]", "[system]")


# -- content blocks ---------------------------------------------------------------------------


def test_text_blocks_join_into_one_user_message() -> None:
    body = messages({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    assert chat_messages(body) == [{"role": "user", "content": "a\nb"}]


def test_images_base64_and_url() -> None:
    body = messages(
        {"type": "text", "text": "What are these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://e.x/a.jpg"}},
    )
    assert chat_messages(body) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What are these?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                {"type": "image_url", "image_url": {"url": "https://e.x/a.jpg"}},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("block", "param"),
    [
        ({"type": "image"}, "messages[0].content[0].source"),
        ({"type": "image", "source": {"type": "file", "file_id": "f"}}, ".source.type"),
        ({"type": "image", "source": {"type": "base64", "data": "A"}}, ".source.media_type"),
        ({"type": "image", "source": {"type": "url", "url": 5}}, ".source.url"),
    ],
)
def test_bad_images_name_the_field(block: dict[str, Any], param: str) -> None:
    error = refused(messages(block))
    assert error.param is not None and error.param.endswith(param), error.param


def test_documents_text_source_is_text_base64_refused_unless_files() -> None:
    text = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                           "data": "The report."}}  # fmt: skip
    assert chat_messages(messages(text)) == [{"role": "user", "content": "The report."}]
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
    }
    error = refused(messages(pdf))
    assert error.param == "messages[0].content[0].source"
    assert "document" in str(error)
    (message,) = chat_messages(messages(pdf), Options(files=True))
    assert message["content"] == [
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}}
    ]


def test_unknown_block_types_name_the_type() -> None:
    assert refused(messages({"type": "bogus"})).param == "messages[0].content[0].type"
    error = refused(messages({"type": "tool_result", "tool_use_id": "x"}, role="assistant"))
    assert error.param == "messages[0].content[0].type"
    assert refused(messages({"type": "tool_use"})).param == "messages[0].content[0].type"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": ...}, "messages"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": ["x"]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages[0].content[0]"),
        (messages({"type": "text", "text": 5}), "messages[0].content[0].text"),
        (messages({"type": "thinking"}, role="assistant"), "messages[0].content[0].thinking"),
        ({"messages": [{"role": "system", "content": 7}]}, "messages[0].content"),
    ],
)
def test_malformed_messages_name_the_field(body: dict[str, Any], param: str) -> None:
    assert refused(body).param == param


# -- tool calls and results ----------------------------------------------------------------------


def conversation(*results: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    user: list[Any] = list(results)
    if text is not None:
        user.insert(0, {"type": "text", "text": text})
    return {
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_call_a",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "plain_b",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {"role": "user", "content": user},
        ]
    }


def test_tool_use_becomes_tool_calls_with_the_prefix_stripped() -> None:
    out = chat_messages(conversation({"type": "tool_result", "tool_use_id": "toolu_call_a"}))
    assert out[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "plain_b", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
        ],
    }  # fmt: skip
    assert json.loads(out[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}


def test_chat_call_id() -> None:
    assert chat_call_id("toolu_abc") == "abc"
    assert chat_call_id("call_1") == "call_1"


def test_a_call_without_input_sends_empty_arguments() -> None:
    body = {"messages": [USER, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_x", "name": "f"}]}]}  # fmt: skip
    (call,) = chat_messages(body)[1]["tool_calls"]
    assert call["function"]["arguments"] == "{}"
    assert chat_messages(body)[1]["content"] is None


def test_tool_results_go_first_in_call_order_then_the_text() -> None:
    out = chat_messages(
        conversation(
            {"type": "tool_result", "tool_use_id": "toolu_call_a", "content": "sunny"},
            {
                "type": "tool_result",
                "tool_use_id": "plain_b",
                "content": [{"type": "text", "text": "rain"}, {"type": "text", "text": "cold"}],
            },
            text="And tomorrow?",
        )
    )
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "plain_b", "content": "rain\ncold"},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_an_error_result_says_so_and_images_become_a_note() -> None:
    out = chat_messages(
        conversation(
            {"type": "tool_result", "tool_use_id": "toolu_call_a", "content": "no such city",
             "is_error": True},
            {"type": "tool_result", "tool_use_id": "plain_b", "content": [
                {"type": "text", "text": "chart:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAA"}}]},
        )
    )  # fmt: skip
    assert out[2] == {"role": "tool", "tool_call_id": "call_a", "content": "Error: no such city"}
    tool = out[3]
    assert tool["role"] == "tool" and tool["content"].startswith("chart:\n")
    assert "image" in tool["content"] and "AAA" not in tool["content"]


def test_a_result_without_content_is_empty() -> None:
    out = chat_messages(conversation({"type": "tool_result", "tool_use_id": "plain_b"}))
    assert out[2] == {"role": "tool", "tool_call_id": "plain_b", "content": ""}


@pytest.mark.parametrize(
    ("block", "param"),
    [
        ({"type": "tool_result"}, "messages[2].content[0].tool_use_id"),
        ({"type": "tool_result", "tool_use_id": 7}, "messages[2].content[0].tool_use_id"),
        ({"type": "tool_result", "tool_use_id": "plain_b", "content": 5},
         "messages[2].content[0].content"),
        ({"type": "tool_result", "tool_use_id": "plain_b", "content": [5]},
         "messages[2].content[0].content[0]"),
        ({"type": "tool_result", "tool_use_id": "plain_b", "content": [{"type": "bogus"}]},
         "messages[2].content[0].content[0]"),
    ],
)  # fmt: skip
def test_malformed_results_name_the_field(block: dict[str, Any], param: str) -> None:
    assert refused(conversation(block)).param == param


@pytest.mark.parametrize(
    ("block", "param"),
    [
        ({"type": "tool_use", "name": "f", "input": {}}, ".id"),
        ({"type": "tool_use", "id": "toolu_1", "input": {}}, ".name"),
        ({"type": "tool_use", "id": "toolu_1", "name": "f", "input": "{}"}, ".input"),
        ({"type": "tool_use", "id": 3, "name": "f", "input": {}}, ".id"),
    ],
)
def test_malformed_tool_use_names_the_field(block: dict[str, Any], param: str) -> None:
    body = {"messages": [USER, {"role": "assistant", "content": [block]}]}
    assert refused(body).param == "messages[1].content[0]" + param


def test_a_dangling_tool_use_id_is_a_400_naming_it() -> None:
    body = {"messages": [USER, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}]}  # fmt: skip
    assert refused(body).param == "messages[1].content[0].tool_use_id"


def test_results_given_out_of_order_go_in_the_order_the_calls_were_made() -> None:
    out = chat_messages(
        conversation(
            {"type": "tool_result", "tool_use_id": "plain_b", "content": "rain"},
            {"type": "tool_result", "tool_use_id": "toolu_call_a", "content": "sunny"},
        )
    )
    assert [m.get("tool_call_id") for m in out[2:]] == ["call_a", "plain_b"]


# -- thinking in the history ------------------------------------------------------------------


HISTORY_THINKING = {
    "messages": [
        USER,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Hello."},
            ],
        },
        {"role": "user", "content": "More."},
    ]
}


def test_thinking_goes_back_as_reasoning_content_where_read() -> None:
    t = run(HISTORY_THINKING, LLAMA)
    assert t.chat["messages"][1] == {
        "role": "assistant",
        "content": "Hello.",
        "reasoning_content": "Let me think.",
    }
    assert noted(t.notices, "redacted_thinking")
    assert not noted(t.notices, "types thinking")


def test_thinking_is_dropped_with_a_notice_elsewhere() -> None:
    t = run(HISTORY_THINKING)
    assert t.chat["messages"][1] == {"role": "assistant", "content": "Hello."}
    assert noted(t.notices, "redacted_thinking", "thinking")


# -- tools and tool_choice ------------------------------------------------------------------------


def test_tools_become_functions() -> None:
    t = run({"tools": [WEATHER, {"name": "now", "input_schema": {"type": "object"}}]})
    assert t.chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER["input_schema"],
            },
        },
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
    ]
    assert "tool_choice" not in t.chat and t.notices == []


def test_cache_control_on_a_tool_is_not_sent() -> None:
    t = run({"tools": [{**WEATHER, "cache_control": {"type": "ephemeral"}}]})
    assert "cache_control" not in json.dumps(t.chat)


@pytest.mark.parametrize(
    "server_tool",
    [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250124", "name": "str_replace_editor"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ],
)
def test_server_tools_are_removed_with_a_notice(server_tool: dict[str, Any]) -> None:
    t = run({"tools": [server_tool, WEATHER]})
    assert [f["function"]["name"] for f in t.chat["tools"]] == ["get_weather"]
    assert noted(t.notices, server_tool["type"])


def test_only_server_tools_send_no_tools() -> None:
    t = run({"tools": [{"type": "web_search_20250305", "name": "web_search"}]})
    assert "tools" not in t.chat
    assert noted(t.notices, "web_search_20250305")


@pytest.mark.parametrize(
    ("choice", "sent", "parallel"),
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any"}, "required", None),
        ({"type": "none"}, "none", None),
        ({"type": "tool", "name": "get_weather"},
         {"type": "function", "function": {"name": "get_weather"}}, None),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto", False),
        ({"type": "any", "disable_parallel_tool_use": False}, "required", True),
    ],
)  # fmt: skip
def test_tool_choice(choice: dict[str, Any], sent: Any, parallel: bool | None) -> None:
    t = run({"tools": [WEATHER], "tool_choice": choice})
    assert t.chat["tool_choice"] == sent
    if parallel is False:
        assert t.chat["parallel_tool_calls"] is False
    else:
        assert "parallel_tool_calls" not in t.chat


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": {"name": "x"}}, "tools"),
        ({"tools": ["x"]}, "tools[0]"),
        ({"tools": [{"input_schema": {}}]}, "tools[0].name"),
        ({"tools": [{"name": "", "input_schema": {}}]}, "tools[0].name"),
        ({"tools": [{"name": 5, "input_schema": {}}]}, "tools[0].name"),
        ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
        ({"tools": [{"name": "f", "input_schema": "object"}]}, "tools[0].input_schema"),
        ({"tools": [{**WEATHER, "description": 5}]}, "tools[0].description"),
        ({"tools": [WEATHER, {"type": 5}]}, "tools[1].type"),
        ({"tools": [WEATHER], "tool_choice": "auto"}, "tool_choice.type"),
        ({"tools": [WEATHER], "tool_choice": {"type": "required"}}, "tool_choice.type"),
        ({"tools": [WEATHER], "tool_choice": {"type": "tool"}}, "tool_choice.name"),
        ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
        ({"tools": [WEATHER], "tool_choice": {"type": "auto", "disable_parallel_tool_use": "y"}},
         "tool_choice.disable_parallel_tool_use"),
        ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ],
)  # fmt: skip
def test_malformed_tools_name_the_field(body: dict[str, Any], param: str) -> None:
    assert refused(body).param == param


# -- settings ------------------------------------------------------------------------------------


def test_sampling_settings_are_sent() -> None:
    t = run(
        {
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop_sequences": ["\n\nHuman:", "END"],
            "metadata": {"user_id": '{"device_id": "abc"}'},
        }
    )
    assert t.chat == {
        "model": "m",
        "messages": [USER],
        "max_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "stop": ["\n\nHuman:", "END"],
        "user": '{"device_id": "abc"}',
    }


def test_top_k_is_not_sent_to_openai() -> None:
    assert "top_k" not in run({"top_k": 40}, Options.for_kind("openai")).chat
    assert run({"top_k": 40}, LLAMA).chat["top_k"] == 40


def test_edges_and_empties() -> None:
    assert run({"temperature": 0, "top_p": 1}).chat["temperature"] == 0
    assert run({"temperature": 1.0}).chat["temperature"] == 1.0
    assert "stop" not in run({"stop_sequences": []}).chat
    assert "user" not in run({"metadata": {}}).chat


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", 1.5),
        ("temperature", -0.1),
        ("temperature", "hot"),
        ("temperature", True),
        ("top_p", 1.01),
        ("top_p", [1]),
        ("top_k", -1),
        ("top_k", 2.5),
        ("top_k", "40"),
        ("stop_sequences", "END"),
        ("stop_sequences", ["END", 5]),
        ("metadata", "user"),
        ("metadata", {"user_id": 5}),
        ("mcp_servers", [{"type": "url", "url": "https://mcp.example", "name": "x"}]),
        ("container", "c_1"),
        ("thinking", "enabled"),
        ("thinking", {"type": "on"}),
        ("thinking", {"type": "enabled", "budget_tokens": "lots"}),
        ("output_config", "high"),
        ("output_config", {"effort": "extreme"}),
    ],
)
def test_out_of_range_settings_name_the_field(field: str, value: Any) -> None:
    param = refused({field: value}).param
    assert param == field or (param or "").startswith(field + "."), param


def test_mcp_servers_are_refused_with_a_reason() -> None:
    error = refused({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]})
    assert error.param == "mcp_servers" and "MCP" in str(error)


def test_context_management_and_unknown_fields_are_notices() -> None:
    t = run(
        {
            "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
            "service_tier": "priority",
            "mystery": 1,
        }
    )
    assert "context_management" not in t.chat and "mystery" not in t.chat
    assert noted(t.notices, "context_management")
    assert noted(t.notices, "service_tier")
    assert noted(t.notices, "mystery")


# -- the reasoning switch ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "thinking", "expected"),
    [
        ("llama.cpp", {"type": "enabled", "budget_tokens": 2000},
         {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"}),
        ("vllm", {"type": "disabled"}, {"chat_template_kwargs": {"enable_thinking": False}}),
        ("llama.cpp", {"type": "adaptive"}, {"chat_template_kwargs": {"enable_thinking": True}}),
        ("ollama", {"type": "enabled", "budget_tokens": 8000},
         {"think": True, "reasoning_effort": "medium"}),
        ("ollama", {"type": "disabled"}, {"think": False}),
        ("generic", {"type": "enabled", "budget_tokens": 20000}, {"reasoning_effort": "high"}),
        ("generic", {"type": "disabled"}, {}),
        ("openai", {"type": "enabled", "budget_tokens": 1024}, {"reasoning_effort": "low"}),
    ],
)  # fmt: skip
def test_thinking_per_kind(kind: str, thinking: dict[str, Any], expected: dict[str, Any]) -> None:
    chat = run({"thinking": thinking}, Options.for_kind(kind)).chat
    switches = {k: chat[k] for k in ("chat_template_kwargs", "think", "reasoning_effort")
                if k in chat}  # fmt: skip
    assert switches == expected


@pytest.mark.parametrize(
    ("effort", "sent"), [("low", "low"), ("medium", "medium"), ("high", "high"), ("max", "high")]
)
def test_output_config_effort(effort: str, sent: str) -> None:
    chat = run({"thinking": {"type": "adaptive"}, "output_config": {"effort": effort}}, LLAMA).chat
    assert chat["reasoning_effort"] == sent
    assert chat["chat_template_kwargs"] == {"enable_thinking": True}


def test_effort_wins_over_budget_and_disabled_sends_no_effort() -> None:
    chat = run(
        {
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "output_config": {"effort": "high"},
        }
    ).chat
    assert chat["reasoning_effort"] == "high"
    chat = run({"thinking": {"type": "disabled"}, "output_config": {"effort": "high"}}).chat
    assert "reasoning_effort" not in chat


def test_no_thinking_sends_no_switch() -> None:
    chat = run({}, LLAMA).chat
    assert "chat_template_kwargs" not in chat and "reasoning_effort" not in chat
