"""A Responses body as a chat body (`proxy.fronts.responses.request`): every field of the mapping,
the 400s that name a field, the notices for what has no chat meaning, the echoed settings, and the
three request bodies Codex CLI 0.169 really sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.errors import ProxyError
from proxy.fronts.common import Options
from proxy.fronts.responses.request import Translated, as_items, echo, translate
from proxy.fronts.responses.tools import Origin

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"


def run(
    body: dict[str, Any],
    history: list[dict[str, Any]] | None = None,
    options: Options | None = None,
    *,
    openai: bool = False,
) -> Translated:
    return translate({"model": "m", **body}, history or [], options or Options(), openai=openai)


def refused(body: dict[str, Any], *, openai: bool = False) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        run(body, openai=openai)
    assert caught.value.status == 400
    return caught.value


def noted(notices: list[str], *words: str) -> bool:
    return any(all(w in n for w in words) for n in notices)


def fn(name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


# -- the basics ------------------------------------------------------------------------------------


def test_minimal_request() -> None:
    t = run({"input": "hello"})
    assert t.chat == {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    assert t.notices == []
    assert t.stream is False
    assert t.store is True
    assert t.encrypted_reasoning is False
    assert t.tools.chat == []


def test_instructions_lead_the_messages() -> None:
    t = run({"input": "hi", "instructions": "Be brief."})
    assert t.chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert refused({"input": "hi", "instructions": 3}).param == "instructions"


def test_missing_input_is_400() -> None:
    error = refused({})
    assert error.param == "input"
    assert error.code == "missing_required_parameter"


def test_missing_input_is_fine_after_history() -> None:
    history = [{"type": "message", "role": "user", "content": "old", "id": "msg_1"}]
    t = run({}, history)
    assert t.chat["messages"] == [{"role": "user", "content": "old"}]


def test_history_is_prepended() -> None:
    history = [
        {"type": "message", "role": "user", "content": "q1", "id": "msg_1"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"},
    ]
    t = run(
        {
            "input": [{"type": "function_call_output", "call_id": "c1", "output": "r"}],
            "tools": [fn("f")],
        },
        history,
    )
    assert [m["role"] for m in t.chat["messages"]] == ["user", "assistant", "tool"]
    assert t.chat["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "r"}


def test_an_error_in_new_input_is_named_past_the_history() -> None:
    history = [{"type": "message", "role": "user", "content": "q1", "id": "msg_1"}]
    with pytest.raises(ProxyError) as caught:
        run(
            {"input": [{"type": "message", "role": "user", "content": "x"}, {"type": "bogus"}]},
            history,
        )
    assert caught.value.param == "input[1].type"


def test_as_items() -> None:
    assert as_items(None) == []
    assert as_items("hi") == [{"type": "message", "role": "user", "content": "hi"}]
    items = [{"type": "message", "role": "user", "content": "x"}]
    assert as_items(items) is items
    for bad in (3, {"role": "user"}, True):
        with pytest.raises(ProxyError) as caught:
            as_items(bad)
        assert caught.value.param == "input"


# -- sampling and limits ---------------------------------------------------------------------------


def test_max_output_tokens_becomes_max_tokens() -> None:
    assert run({"input": "x", "max_output_tokens": 256}).chat["max_tokens"] == 256
    for bad in (0, -1, 1.5, "9", True):
        assert refused({"input": "x", "max_output_tokens": bad}).param == "max_output_tokens"


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("temperature", [0, 0.7, 2], [-0.1, 2.01, "1", True]),
        ("top_p", [0, 0.5, 1], [-0.5, 1.01, "1", False]),
    ],
)
def test_temperature_and_top_p_ranges(name: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert run({"input": "x", name: value}).chat[name] == value
    for value in bad:
        assert refused({"input": "x", name: value}).param == name


def test_user_is_passed_and_max_tool_calls_noted() -> None:
    t = run({"input": "x", "user": "u-1", "max_tool_calls": 3})
    assert t.chat["user"] == "u-1"
    assert "max_tool_calls" not in t.chat
    assert noted(t.notices, "max_tool_calls")
    assert refused({"input": "x", "user": 5}).param == "user"


# -- reasoning and text ----------------------------------------------------------------------------


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high", "xhigh", "max"])
def test_reasoning_effort(effort: str) -> None:
    t = run({"input": "x", "reasoning": {"effort": effort}})
    assert t.chat["reasoning_effort"] == effort
    assert t.notices == []


def test_bad_reasoning_is_400() -> None:
    assert refused({"input": "x", "reasoning": {"effort": "ultra"}}).param == "reasoning.effort"
    assert refused({"input": "x", "reasoning": "high"}).param == "reasoning"


def test_reasoning_summary_is_noted_not_sent() -> None:
    t = run({"input": "x", "reasoning": {"effort": "low", "summary": "auto"}})
    assert t.chat["reasoning_effort"] == "low"
    assert "summary" not in json.dumps(t.chat)
    assert noted(t.notices, "reasoning.summary")


def test_reasoning_null_is_nothing() -> None:
    t = run({"input": "x", "reasoning": None})
    assert "reasoning_effort" not in t.chat and t.notices == []


def test_json_schema_format_becomes_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    fmt = {
        "type": "json_schema",
        "name": "Answer",
        "schema": schema,
        "strict": True,
        "description": "the answer",
    }
    t = run({"input": "x", "text": {"format": fmt}})
    assert t.chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Answer",
            "schema": schema,
            "strict": True,
            "description": "the answer",
        },
    }


def test_json_schema_without_strict_has_no_strict() -> None:
    fmt = {"type": "json_schema", "name": "A", "schema": {"type": "object"}}
    spec = run({"input": "x", "text": {"format": fmt}}).chat["response_format"]["json_schema"]
    assert spec == {"name": "A", "schema": {"type": "object"}}


def test_json_object_and_text_formats() -> None:
    t = run({"input": "x", "text": {"format": {"type": "json_object"}}})
    assert t.chat["response_format"] == {"type": "json_object"}
    t = run({"input": "x", "text": {"format": {"type": "text"}}})
    assert "response_format" not in t.chat


@pytest.mark.parametrize(
    ("text", "param"),
    [
        ("json", "text"),
        ({"format": "json_schema"}, "text.format"),
        ({"format": {"type": "xml"}}, "text.format.type"),
        ({"format": {"type": "json_schema", "name": "A"}}, "text.format.schema"),
        ({"format": {"type": "json_schema", "name": "A", "schema": "{}"}}, "text.format.schema"),
        ({"format": {"type": "json_schema", "schema": {}}}, "text.format.name"),
        ({"format": {"type": "json_schema", "name": "", "schema": {}}}, "text.format.name"),
        (
            {"format": {"type": "json_schema", "name": "A", "schema": {}, "strict": "yes"}},
            "text.format.strict",
        ),
        (
            {"format": {"type": "json_schema", "name": "A", "schema": {}, "description": 1}},
            "text.format.description",
        ),
        ({"verbosity": "loud"}, "text.verbosity"),
    ],
)
def test_bad_text_is_400_naming_the_field(text: object, param: str) -> None:
    assert refused({"input": "x", "text": text}).param == param


def test_verbosity_is_noted_for_model_servers_and_passed_to_openai() -> None:
    local = run({"input": "x", "text": {"verbosity": "low"}})
    assert "verbosity" not in local.chat
    assert noted(local.notices, "verbosity")
    remote = run({"input": "x", "text": {"verbosity": "low"}}, openai=True)
    assert remote.chat["verbosity"] == "low"
    assert not noted(remote.notices, "verbosity")


# -- include, metadata, unsupported and unknown fields ---------------------------------------------


def test_include_logprobs() -> None:
    t = run({"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 5})
    assert t.chat["logprobs"] is True
    assert t.chat["top_logprobs"] == 5
    assert t.notices == []
    assert (
        refused(
            {"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 21}
        ).param
        == "top_logprobs"
    )


def test_top_logprobs_without_the_include_is_not_sent() -> None:
    t = run({"input": "x", "top_logprobs": 5})
    assert "logprobs" not in t.chat and "top_logprobs" not in t.chat


def test_include_encrypted_reasoning() -> None:
    t = run({"input": "x", "include": ["reasoning.encrypted_content"]})
    assert t.encrypted_reasoning is True
    assert t.notices == []
    assert "include" not in t.chat


def test_unknown_include_is_noted() -> None:
    t = run({"input": "x", "include": ["file_search_call.results"]})
    assert noted(t.notices, "file_search_call.results")
    assert refused({"input": "x", "include": "reasoning.encrypted_content"}).param == "include"
    assert refused({"input": "x", "include": [1]}).param == "include"


def test_metadata_limits() -> None:
    sixteen = {f"k{i}": "v" for i in range(16)}
    t = run({"input": "x", "metadata": sixteen})
    assert "metadata" not in t.chat
    assert t.echo["metadata"] == sixteen
    for bad in (
        {f"k{i}": "v" for i in range(17)},
        {"k" * 65: "v"},
        {"k": "v" * 513},
        {"k": 1},
        ["k", "v"],
    ):
        assert refused({"input": "x", "metadata": bad}).param == "metadata"
    assert run({"input": "x", "metadata": {"k" * 64: "v" * 512}}).notices == []


def test_background_true_is_400_and_false_is_fine() -> None:
    error = refused({"input": "x", "background": True})
    assert error.param == "background"
    assert error.code == "unsupported_parameter"
    assert "not supported" in error.message
    assert run({"input": "x", "background": False}).notices == []


@pytest.mark.parametrize(
    ("name", "value"), [("conversation", "conv_1"), ("prompt", {"id": "pmpt_1"})]
)
def test_server_side_state_is_400(name: str, value: object) -> None:
    error = refused({"input": "x", name: value})
    assert error.param == name
    assert error.code == "unsupported_parameter"


def test_stream_asks_for_usage() -> None:
    t = run({"input": "x", "stream": True})
    assert t.stream is True
    assert t.chat["stream"] is True
    assert t.chat["stream_options"] == {"include_usage": True}
    t = run({"input": "x", "stream": False})
    assert t.stream is False and "stream" not in t.chat and "stream_options" not in t.chat
    assert refused({"input": "x", "stream": "yes"}).param == "stream"


def test_responses_stream_options_are_noted_not_sent() -> None:
    t = run({"input": "x", "stream": True, "stream_options": {"include_obfuscation": False}})
    assert t.chat["stream_options"] == {"include_usage": True}
    assert noted(t.notices, "stream_options")


def test_store_defaults_to_true() -> None:
    assert run({"input": "x"}).store is True
    assert run({"input": "x", "store": True}).store is True
    assert run({"input": "x", "store": False}).store is False
    assert run({"input": "x", "store": False}).echo["store"] is False
    assert refused({"input": "x", "store": "no"}).param == "store"


def test_unknown_fields_are_noted_and_not_sent() -> None:
    t = run({"input": "x", "frobnicate": 1, "zeta": {"a": 1}})
    assert "frobnicate" not in t.chat and "zeta" not in t.chat
    assert noted(t.notices, "frobnicate", "zeta")


def test_truncation() -> None:
    assert run({"input": "x", "truncation": "disabled"}).notices == []
    assert noted(run({"input": "x", "truncation": "auto"}).notices, "truncation")
    assert refused({"input": "x", "truncation": "middle"}).param == "truncation"


def test_openai_only_fields() -> None:
    body = {
        "input": "x",
        "service_tier": "priority",
        "prompt_cache_key": "k",
        "safety_identifier": "s",
    }
    remote = run(body, openai=True)
    assert remote.chat["service_tier"] == "priority"
    assert remote.chat["prompt_cache_key"] == "k"
    assert remote.chat["safety_identifier"] == "s"
    local = run(body)
    for name in ("service_tier", "prompt_cache_key", "safety_identifier"):
        assert name not in local.chat
    assert noted(local.notices, "service_tier")
    assert refused({"input": "x", "prompt_cache_key": 1}).param == "prompt_cache_key"


# -- tools through translate -----------------------------------------------------------------------


def test_tools_choice_and_parallel_calls() -> None:
    t = run(
        {
            "input": "x",
            "tools": [fn("f"), fn("g")],
            "tool_choice": "required",
            "parallel_tool_calls": False,
        }
    )
    assert [c["function"]["name"] for c in t.chat["tools"]] == ["f", "g"]
    assert t.chat["tool_choice"] == "required"
    assert t.chat["parallel_tool_calls"] is False


def test_named_tool_choice() -> None:
    t = run(
        {
            "input": "x",
            "tools": [fn("f"), fn("g")],
            "tool_choice": {"type": "function", "name": "g"},
        }
    )
    assert t.chat["tool_choice"] == {"type": "function", "function": {"name": "g"}}


def test_only_hosted_tools_leaves_no_tools_and_a_notice() -> None:
    t = run(
        {
            "input": "x",
            "tools": [{"type": "web_search"}],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
        }
    )
    assert "tools" not in t.chat and "tool_choice" not in t.chat
    assert "parallel_tool_calls" not in t.chat
    assert noted(t.notices, "web_search")


def test_tool_choice_required_without_tools_is_400() -> None:
    assert refused({"input": "x", "tool_choice": "required"}).param == "tool_choice"


def test_forcing_a_hosted_tool_is_400() -> None:
    error = refused(
        {
            "input": "x",
            "tools": [fn("f"), {"type": "web_search"}],
            "tool_choice": {"type": "web_search"},
        }
    )
    assert error.param == "tool_choice"


def test_malformed_tool_is_400_naming_it() -> None:
    error = refused({"input": "x", "tools": [fn("a"), fn("b"), {"type": "function"}]})
    assert error.param == "tools[2].name"


def test_additional_tools_in_input_are_declared() -> None:
    items = [
        {
            "type": "additional_tools",
            "role": "developer",
            "tools": [{"type": "namespace", "name": "clock", "tools": [fn("sleep")]}],
        },
        {"type": "message", "role": "user", "content": "x"},
    ]
    t = run({"input": items, "tools": [fn("f")]})
    assert [c["function"]["name"] for c in t.chat["tools"]] == ["f", "clock__sleep"]
    assert t.tools.origin("clock__sleep") == Origin("function", "sleep", "clock")
    assert t.chat["messages"] == [{"role": "user", "content": "x"}]


def test_malformed_additional_tools_are_400_naming_them() -> None:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "x"},
        {"type": "additional_tools", "tools": "exec"},
    ]
    assert refused({"input": items}).param == "input[1].tools"
    items[1] = {"type": "additional_tools", "tools": [fn("ok"), {"type": "function"}]}
    assert refused({"input": items}).param == "input[1].tools[1].name"


# -- echo ------------------------------------------------------------------------------------------


def test_echo_defaults() -> None:
    e = echo({"model": "m", "input": "x"}, True)
    assert e["tool_choice"] == "auto"
    assert e["tools"] == []
    assert e["text"] == {"format": {"type": "text"}, "verbosity": None}
    assert e["truncation"] == "disabled"
    assert e["store"] is True
    assert e["parallel_tool_calls"] is True
    assert e["metadata"] == {}
    assert e["background"] is False
    assert e["reasoning"] == {"effort": None, "summary": None}
    for name in (
        "instructions",
        "temperature",
        "top_p",
        "max_output_tokens",
        "previous_response_id",
        "user",
        "prompt_cache_key",
    ):
        assert e[name] is None, name
    assert echo({"model": "m"}, False)["store"] is False


def test_echo_repeats_the_settings_sent() -> None:
    tools = [fn("f")]
    fmt = {"type": "json_schema", "name": "A", "schema": {"type": "object"}, "strict": True}
    body = {
        "model": "m",
        "input": "x",
        "instructions": "I",
        "tools": tools,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.3,
        "top_p": 0.9,
        "max_output_tokens": 99,
        "previous_response_id": "resp_1",
        "reasoning": {"effort": "high", "summary": "auto"},
        "text": {"format": fmt, "verbosity": "low"},
        "truncation": "auto",
        "metadata": {"a": "b"},
        "user": "u",
        "prompt_cache_key": "pck",
    }
    e = echo(body, False)
    assert e["instructions"] == "I"
    assert e["tools"] == tools  # as the client declared them, flat
    assert e["tool_choice"] == "required"
    assert e["parallel_tool_calls"] is False
    assert (e["temperature"], e["top_p"], e["max_output_tokens"]) == (0.3, 0.9, 99)
    assert e["previous_response_id"] == "resp_1"
    assert e["reasoning"] == {"effort": "high", "summary": "auto"}
    assert e["text"] == {"format": fmt, "verbosity": "low"}
    assert e["truncation"] == "auto"
    assert e["metadata"] == {"a": "b"}
    assert e["user"] == "u" and e["prompt_cache_key"] == "pck"
    assert e["store"] is False


def test_an_agents_tools_are_echoed_as_their_stored_bytes() -> None:
    # Codex CLI declares the same ~60 KB of tools every turn, and a stream writes the Response
    # three times: a list `knowntools` remembers is echoed as its stored bytes, so it is not
    # serialised again, and the Response's bytes are the same as with the list itself.
    import orjson

    from proxy import knowntools
    from proxy.fronts.responses.output import Context, response_object
    from proxy.fronts.responses.tools import translate_tools

    tools = [{**fn(f"tool_{i}"), "description": "does one careful thing " * 20} for i in range(12)]
    raw = orjson.dumps({"model": "m", "input": "hi", "tools": tools})
    body = knowntools.parse(raw)
    assert knowntools.shared(body["tools"])
    echoed = echo(body, False)
    assert isinstance(echoed["tools"], orjson.Fragment)
    ctx = Context("m", echoed, translate_tools(body["tools"], []))
    plain = Context("m", {**echoed, "tools": tools}, ctx.tools, id=ctx.id, created_at=1)
    ctx.created_at = 1
    for status in ("in_progress", "completed"):
        written = orjson.dumps(response_object(ctx, status, [], None))
        assert written == orjson.dumps(response_object(plain, status, [], None))
        assert orjson.loads(written)["tools"] == tools
    assert echo({"model": "m", "tools": list(tools)}, False)["tools"] == tools  # not remembered


def test_translate_echo_matches_store() -> None:
    assert run({"input": "x"}).echo["store"] is True
    assert run({"input": "x", "store": False}).echo["store"] is False


# -- what Codex CLI sends --------------------------------------------------------------------------


def codex(name: str) -> dict[str, Any]:
    body = json.loads((FIXTURES / f"{name}.json").read_text())
    if "input" not in body:  # the request body may sit under a key
        body = next(v for v in body.values() if isinstance(v, dict) and "input" in v)
    return dict(body)


def codex_translate(name: str) -> Translated:
    return translate(codex(name), [], Options(reasoning_field="reasoning_content"), openai=False)


def names(t: Translated) -> list[str]:
    return [c["function"]["name"] for c in t.chat.get("tools", [])]


def developer_texts(body: dict[str, Any]) -> list[str]:
    return [
        "".join(p["text"] for p in item["content"])
        for item in body["input"]
        if item.get("role") == "developer" and item.get("type") == "message"
    ]


def assert_one_leading_system(t: Translated, body: dict[str, Any]) -> None:
    messages = t.chat["messages"]
    assert messages[0]["role"] == "system"
    assert [m["role"] for m in messages].count("system") == 1
    texts = developer_texts(body)
    assert len(texts) >= 2
    assert messages[0]["content"] == "\n\n".join(texts)
    assert all(not str(m.get("content")).startswith("[developer]") for m in messages)


def test_codex_unknown_model_request() -> None:
    body = codex("unknown_model_request")
    t = codex_translate("unknown_model_request")
    assert "exec_command" in names(t)
    exec_command = next(
        c["function"] for c in t.chat["tools"] if c["function"]["name"] == "exec_command"
    )
    assert exec_command["strict"] is False
    assert exec_command["parameters"]["properties"]["cmd"]["type"] == "string"
    for member in ("close_agent", "resume_agent", "send_input", "spawn_agent", "wait_agent"):
        assert f"multi_agent_v1__{member}" in names(t)
        assert t.tools.origin(f"multi_agent_v1__{member}") == Origin(
            "function", member, "multi_agent_v1"
        )
    assert "web_search" not in names(t)
    assert noted(t.notices, "web_search")
    assert_one_leading_system(t, body)
    assert [m["role"] for m in t.chat["messages"]] == ["system", "user", "user"]
    assert t.chat["messages"][-1]["content"] == "say hi"
    assert t.stream is True and t.chat["stream_options"] == {"include_usage": True}
    assert t.store is False
    assert t.encrypted_reasoning is True
    assert t.chat["tool_choice"] == "auto"
    assert t.chat["parallel_tool_calls"] is True
    assert noted(t.notices, "reasoning.summary")
    assert "client_metadata" not in t.chat and "prompt_cache_key" not in t.chat
    assert not noted(t.notices, "client_metadata")


def test_codex_tool_turn_request() -> None:
    body = codex("tool_turn_request")
    t = codex_translate("tool_turn_request")
    assert_one_leading_system(t, body)
    messages = t.chat["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool"]
    turn = messages[3]
    assert turn["content"] is None
    assert turn["tool_calls"] == [
        {
            "id": "call_001",
            "type": "function",
            "function": {"name": "exec_command", "arguments": '{"cmd": "echo hello-from-codex"}'},
        }
    ]
    assert messages[4]["tool_call_id"] == "call_001"
    assert "hello-from-codex" in messages[4]["content"]


def test_codex_known_model_request() -> None:
    body = codex("known_model_request")
    t = codex_translate("known_model_request")
    declared = names(t)
    assert "functions__exec" in declared
    assert "functions__wait" in declared
    assert "clock__sleep" in declared
    assert "collaboration__spawn_agent" in declared
    assert len(declared) == len(set(declared)) == 11
    assert t.tools.origin("functions__exec") == Origin("custom", "exec", "functions")
    exec_tool = next(
        c["function"] for c in t.chat["tools"] if c["function"]["name"] == "functions__exec"
    )
    assert exec_tool["parameters"]["required"] == ["input"]
    assert_one_leading_system(t, body)
    assert [m["role"] for m in t.chat["messages"]] == ["system", "user", "user"]
    assert t.chat["reasoning_effort"] == "low"
    assert noted(t.notices, "reasoning.context")
    assert noted(t.notices, "verbosity")
    assert "verbosity" not in t.chat
    assert t.chat["parallel_tool_calls"] is False
    assert t.store is False and t.stream is True and t.encrypted_reasoning is True
