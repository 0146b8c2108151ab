"""Responses tools as chat tools (`proxy.fronts.responses.tools`): function, custom, namespace,
local_shell, hosted tools removed, malformed tools refused by path, and `tool_choice`."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import ProxyError
from proxy.fronts.responses.tools import (
    Origin,
    Tools,
    flat_name,
    translate_choice,
    translate_tools,
)

GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF'


def fn(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, **extra}


def chat_names(tools: Tools) -> list[str]:
    return [t["function"]["name"] for t in tools.chat]


def by_name(tools: Tools, name: str) -> dict[str, Any]:
    found = [t for t in tools.chat if t["function"]["name"] == name]
    assert len(found) == 1, chat_names(tools)
    assert found[0]["type"] == "function"
    return dict(found[0]["function"])


def refused(tools: object, extra: list[tuple[str, object]] | None = None) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        translate_tools(tools, [], extra=extra)
    assert caught.value.status == 400
    return caught.value


# -- function --------------------------------------------------------------------------------------


def test_function_flat_becomes_nested_with_every_field() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    notices: list[str] = []
    tools = translate_tools(
        [fn("get_weather", description="Weather", parameters=params, strict=True)], notices
    )
    assert tools.chat == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "parameters": params,
                "strict": True,
            },
        }
    ]
    assert notices == []
    assert tools.origin("get_weather") == Origin("function", "get_weather", None)


def test_strict_absent_stays_absent() -> None:
    tools = translate_tools([fn("f", parameters={"type": "object"})], [])
    assert "strict" not in by_name(tools, "f")


def test_strict_null_stays_absent() -> None:
    tools = translate_tools([fn("f", strict=None)], [])
    assert "strict" not in by_name(tools, "f")


def test_strict_false_stays_false() -> None:
    tools = translate_tools([fn("f", strict=False)], [])
    assert by_name(tools, "f")["strict"] is False


def test_function_without_parameters_or_description_has_neither() -> None:
    function = by_name(translate_tools([fn("ping")], []), "ping")
    assert function == {"name": "ping"}


def test_no_tools_gives_empty_tools_and_no_notice() -> None:
    notices: list[str] = []
    tools = translate_tools(None, notices)
    assert tools.chat == [] and tools.origins == {} and tools.removed == []
    assert notices == []
    assert translate_tools([], notices).chat == []
    assert notices == []


# -- custom ----------------------------------------------------------------------------------------


def test_custom_with_grammar_becomes_one_string_parameter_function() -> None:
    tool = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Apply a patch.",
        "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
    }
    tools = translate_tools([tool], [])
    function = by_name(tools, "apply_patch")
    assert function["parameters"]["type"] == "object"
    assert list(function["parameters"]["properties"]) == ["input"]
    assert function["parameters"]["properties"]["input"]["type"] == "string"
    assert function["parameters"]["required"] == ["input"]
    assert function["parameters"]["additionalProperties"] is False
    assert function["description"].startswith("Apply a patch.")
    assert GRAMMAR in function["description"]
    assert "lark" in function["description"]
    assert tools.origin("apply_patch") == Origin("custom", "apply_patch", None)


def test_custom_regex_grammar_names_its_syntax() -> None:
    tool = {
        "type": "custom",
        "name": "pick",
        "format": {"type": "grammar", "syntax": "regex", "definition": "(yes|no)"},
    }
    description = by_name(translate_tools([tool], []), "pick")["description"]
    assert "regex" in description and "(yes|no)" in description


def test_custom_text_format_or_none_has_plain_description() -> None:
    plain = {"type": "custom", "name": "note", "description": "Write a note."}
    text = {**plain, "name": "note2", "format": {"type": "text"}}
    tools = translate_tools([plain, text], [])
    assert by_name(tools, "note")["description"] == "Write a note."
    assert by_name(tools, "note2")["description"] == "Write a note."
    assert by_name(tools, "note")["parameters"]["required"] == ["input"]
    assert tools.origin("note2").kind == "custom"


# -- namespaces ------------------------------------------------------------------------------------


def test_namespace_members_are_flattened_and_map_back() -> None:
    ns = {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "agents",
        "tools": [
            fn("spawn_agent", parameters={"type": "object"}, strict=False),
            {"type": "custom", "name": "exec"},
        ],
    }
    tools = translate_tools([ns], [])
    assert chat_names(tools) == ["multi_agent_v1__spawn_agent", "multi_agent_v1__exec"]
    assert tools.origin("multi_agent_v1__spawn_agent") == Origin(
        "function", "spawn_agent", "multi_agent_v1"
    )
    assert tools.origin("multi_agent_v1__exec") == Origin("custom", "exec", "multi_agent_v1")
    assert tools.chat_name("spawn_agent", "multi_agent_v1") == "multi_agent_v1__spawn_agent"
    assert by_name(tools, "multi_agent_v1__spawn_agent")["strict"] is False


def test_flat_name_sanitises_and_caps_at_64() -> None:
    assert flat_name("ns", "tool") == "ns__tool"
    assert flat_name("my.ns", "do it!") == "my_ns__do_it_"
    long = flat_name("n" * 40, "t" * 40)
    assert len(long) == 64
    assert long.startswith("n" * 40 + "__")


def test_namespace_name_collisions_are_kept_apart() -> None:
    one = {"type": "namespace", "name": "a", "tools": [fn("b__c")]}
    two = {"type": "namespace", "name": "a__b", "tools": [fn("c")]}
    tools = translate_tools([one, two], [])
    names = chat_names(tools)
    assert len(names) == 2 and len(set(names)) == 2
    assert names[0] == "a__b__c"
    assert tools.origin(names[0]) == Origin("function", "b__c", "a")
    assert tools.origin(names[1]) == Origin("function", "c", "a__b")
    assert tools.chat_name("b__c", "a") == names[0]
    assert tools.chat_name("c", "a__b") == names[1]


def test_top_level_function_colliding_with_a_flattened_name_is_kept_apart() -> None:
    tools = translate_tools(
        [{"type": "namespace", "name": "x", "tools": [fn("y")]}, fn("x__y")], []
    )
    names = chat_names(tools)
    assert len(set(names)) == 2
    assert tools.origin(names[0]) == Origin("function", "y", "x")
    assert tools.origin(names[1]) == Origin("function", "x__y", None)


def test_chat_name_of_an_undeclared_tool() -> None:
    tools = translate_tools([fn("a")], [])
    assert tools.chat_name("a") == "a"
    assert tools.chat_name("zzz") == "zzz"
    assert tools.chat_name("zzz", "ns") == "ns__zzz"
    assert tools.origin("zzz") == Origin("function", "zzz", None)


def test_extra_tools_are_declared_after_the_list() -> None:
    tools = translate_tools([fn("a")], [], extra=[("input[0].tools[0]", fn("b"))])
    assert chat_names(tools) == ["a", "b"]


# -- local shell, hosted, unknown ------------------------------------------------------------------


def test_local_shell_becomes_a_function_taking_argv() -> None:
    tools = translate_tools([{"type": "local_shell"}], [])
    function = by_name(tools, "local_shell")
    assert function["parameters"]["properties"]["command"]["type"] == "array"
    assert function["parameters"]["properties"]["command"]["items"] == {"type": "string"}
    assert function["parameters"]["required"] == ["command"]
    assert tools.origin("local_shell").kind == "local_shell"


HOSTED_TOOLS: list[dict[str, Any]] = [
    {"type": "web_search"},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
    {"type": "code_interpreter", "container": {"type": "auto"}},
    {"type": "image_generation"},
    {"type": "computer_use_preview", "display_width": 1, "display_height": 1},
    {"type": "mcp", "server_label": "x", "server_url": "https://x"},
    {"type": "tool_search", "execution": "client", "description": "d", "parameters": {}},
]


def test_hosted_tools_are_removed_with_one_notice() -> None:
    notices: list[str] = []
    tools = translate_tools([fn("keep"), *HOSTED_TOOLS], notices)
    assert chat_names(tools) == ["keep"]
    assert len(notices) == 1
    for tool in HOSTED_TOOLS:
        assert tool["type"] in notices[0]
    assert sorted(tools.removed) == sorted(t["type"] for t in HOSTED_TOOLS)


@pytest.mark.parametrize("tool", HOSTED_TOOLS, ids=lambda t: t["type"])
def test_each_hosted_tool_alone_is_removed(tool: dict[str, Any]) -> None:
    notices: list[str] = []
    tools = translate_tools([tool], notices)
    assert tools.chat == []
    assert len(notices) == 1 and tool["type"] in notices[0]


def test_unknown_tool_type_is_removed_with_a_notice() -> None:
    notices: list[str] = []
    tools = translate_tools([{"type": "teleport", "name": "x"}, fn("f")], notices)
    assert chat_names(tools) == ["f"]
    assert len(notices) == 1 and "teleport" in notices[0]


# -- malformed tools -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        ({"type": "function"}, "tools"),
        ("web_search", "tools"),
        ([fn("a"), "b"], "tools[1]"),
        ([{"name": "a"}], "tools[0].type"),
        ([{"type": 3, "name": "a"}], "tools[0].type"),
        ([fn("a"), fn("b"), {"type": "function"}], "tools[2].name"),
        ([fn("")], "tools[0].name"),
        ([fn("a"), fn(7)], "tools[1].name"),  # type: ignore[arg-type]
        ([fn("a", description=3)], "tools[0].description"),
        ([fn("a", parameters="{}")], "tools[0].parameters"),
        ([fn("a", strict="yes")], "tools[0].strict"),
        ([{"type": "custom"}], "tools[0].name"),
        ([{"type": "custom", "name": "c", "description": 1}], "tools[0].description"),
        ([{"type": "custom", "name": "c", "format": {"type": "json"}}], "tools[0].format"),
        ([{"type": "custom", "name": "c", "format": "lark"}], "tools[0].format"),
        (
            [{"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "lark"}}],
            "tools[0].format.definition",
        ),
        ([{"type": "namespace", "tools": []}], "tools[0].name"),
        ([{"type": "namespace", "name": "ns"}], "tools[0].tools"),
        ([{"type": "namespace", "name": "ns", "tools": {}}], "tools[0].tools"),
        ([{"type": "namespace", "name": "ns", "tools": [fn("a"), "x"]}], "tools[0].tools[1]"),
        (
            [
                fn("z"),
                {"type": "namespace", "name": "ns", "tools": [fn("a"), {"type": "function"}]},
            ],
            "tools[1].tools[1].name",
        ),
    ],
)
def test_malformed_tools_are_400_naming_the_field(tools: object, param: str) -> None:
    assert refused(tools).param == param


def test_malformed_extra_tool_is_named_by_its_path() -> None:
    error = refused([fn("a")], extra=[("input[0].tools[3]", {"type": "function"})])
    assert error.param == "input[0].tools[3].name"


# -- tool_choice -----------------------------------------------------------------------------------


def declared() -> Tools:
    return translate_tools(
        [
            fn("get_weather"),
            fn("get_time"),
            {"type": "custom", "name": "apply_patch"},
            {"type": "namespace", "name": "agents", "tools": [fn("spawn"), fn("wait")]},
            {"type": "web_search"},
        ],
        [],
    )


def choice_error(choice: object, tools: Tools | None = None) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        translate_choice(choice, tools or declared())
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize("mode", ["auto", "none", "required", None])
def test_string_choices_pass_unchanged(mode: str | None) -> None:
    tools = declared()
    before = list(tools.chat)
    assert translate_choice(mode, tools) == mode
    assert tools.chat == before


def test_named_function_becomes_chat_form() -> None:
    assert translate_choice({"type": "function", "name": "get_time"}, declared()) == {
        "type": "function",
        "function": {"name": "get_time"},
    }


def test_named_namespaced_function_becomes_its_flat_name() -> None:
    tools = declared()
    with_ns = translate_choice({"type": "function", "name": "wait", "namespace": "agents"}, tools)
    assert with_ns == {"type": "function", "function": {"name": "agents__wait"}}
    without_ns = translate_choice({"type": "function", "name": "spawn"}, tools)
    assert without_ns == {"type": "function", "function": {"name": "agents__spawn"}}


def test_named_custom_tool_forces_its_wrapper() -> None:
    assert translate_choice({"type": "custom", "name": "apply_patch"}, declared()) == {
        "type": "function",
        "function": {"name": "apply_patch"},
    }


def test_unknown_name_is_400() -> None:
    error = choice_error({"type": "function", "name": "nope"})
    assert error.param == "tool_choice.name"
    assert "nope" in error.message


def test_named_choice_without_name_is_400() -> None:
    assert choice_error({"type": "function"}).param == "tool_choice.name"


def test_allowed_tools_narrows_and_returns_the_mode() -> None:
    tools = declared()
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [
            {"type": "function", "name": "get_time"},
            {"type": "function", "name": "wait", "namespace": "agents"},
            {"type": "web_search"},
        ],
    }
    assert translate_choice(choice, tools) == "required"
    assert chat_names(tools) == ["get_time", "agents__wait"]


def test_allowed_tools_mode_defaults_to_auto() -> None:
    tools = declared()
    choice = {"type": "allowed_tools", "tools": [{"type": "custom", "name": "apply_patch"}]}
    assert translate_choice(choice, tools) == "auto"
    assert chat_names(tools) == ["apply_patch"]


@pytest.mark.parametrize(
    ("choice", "param"),
    [
        ({"type": "allowed_tools", "mode": "none", "tools": []}, "tool_choice.mode"),
        ({"type": "allowed_tools", "mode": "auto"}, "tool_choice.tools"),
        ({"type": "allowed_tools", "tools": [{"type": "function"}]}, "tool_choice.tools[0]"),
        ({"type": "allowed_tools", "tools": [{"name": "get_time"}, "x"]}, "tool_choice.tools[1]"),
    ],
)
def test_malformed_allowed_tools_is_400(choice: dict[str, Any], param: str) -> None:
    assert choice_error(choice).param == param


@pytest.mark.parametrize(
    "kind",
    [
        "web_search",
        "web_search_preview",
        "file_search",
        "computer_use_preview",
        "image_generation",
        "code_interpreter",
        "mcp",
        "shell",
        "apply_patch",
    ],
)
def test_forcing_a_hosted_tool_is_400_on_tool_choice(kind: str) -> None:
    error = choice_error({"type": kind})
    assert error.param == "tool_choice"
    assert kind in error.message


@pytest.mark.parametrize("choice", ["sometimes", 3, ["auto"], {"name": "x"}, {"type": 1}])
def test_malformed_choice_is_400(choice: object) -> None:
    assert choice_error(choice).param == "tool_choice"


def test_unknown_choice_type_is_400() -> None:
    assert choice_error({"type": "telepathy"}).param == "tool_choice.type"


def test_function_fields_chat_has_no_word_for_are_not_sent() -> None:
    tool = fn(
        "f",
        parameters={"type": "object"},
        strict=True,
        defer_loading=True,
        allowed_callers=["x"],
        output_schema={"type": "string"},
    )
    assert by_name(translate_tools([tool], []), "f") == {
        "name": "f",
        "parameters": {"type": "object"},
        "strict": True,
    }


def test_an_agents_tools_are_translated_once_and_shared_turn_after_turn() -> None:
    # Codex CLI declares the same ~60 KB of tools every turn: for a list `knowntools` remembers,
    # every turn gets the same `Tools` (its chat list keyed once, written as its stored bytes)
    # and the same notices; a list it does not remember is translated afresh each time.
    import orjson

    from proxy import knowntools

    described = [
        fn(f"tool_{i}", description="does one careful thing " * 20, parameters={"type": "object"})
        for i in range(12)
    ]
    tools = [*described, {"type": "web_search"}, {"type": "custom", "name": "apply_patch"}]
    raw = orjson.dumps({"model": "m", "input": "hi", "tools": tools})
    seen, said = [], []
    for _ in range(3):
        body = knowntools.parse(raw)
        notices: list[str] = []
        seen.append(translate_tools(body["tools"], notices))
        said.append(notices)
    assert seen[0] is seen[1] is seen[2]
    assert said[0] == said[1] == said[2] and "web_search" in said[0][0]
    assert seen[0].chat == translate_tools(list(tools), []).chat  # what a fresh one makes
    chat = {"model": "m", "messages": [], "tools": seen[0].chat}
    assert knowntools.stored_key(seen[0].chat) is not None
    assert knowntools.dumps(chat) == orjson.dumps(chat)
    assert translate_tools(list(tools), []) is not translate_tools(list(tools), [])
    assert knowntools.KNOWN.intact()
