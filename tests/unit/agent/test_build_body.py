"""build_body: one test per latch, key order, no mutation, and the unchanged fast path."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.agent.negotiate import DEFAULT_DROPPABLE, BuiltBody, build_body, client_wants_usage
from proxy.state.latches import EndpointLatches, ModelLatches

MSGS = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def build(
    client: dict[str, Any],
    endpoint: EndpointLatches | None = None,
    model: ModelLatches | None = None,
) -> BuiltBody:
    before = copy.deepcopy(client)
    built = build_body(
        client,
        endpoint or EndpointLatches(upstream="local"),
        model or ModelLatches(),
        droppable=DEFAULT_DROPPABLE,
    )
    assert client == before  # never mutated
    return built


def test_nothing_to_change_returns_same_object() -> None:
    client = {"model": "m", "messages": MSGS, "max_tokens": 5, "temperature": 0.2}
    built = build(client)
    assert built.body is client
    assert (built.changed, built.dropped, built.notices, built.structured_in_words) == (
        False,
        (),
        [],
        False,
    )


def test_max_completion_tokens_goes_out_as_max_tokens_in_place() -> None:
    client = {"model": "m", "max_completion_tokens": 64, "messages": MSGS}
    built = build(client)
    assert list(built.body.items()) == [("model", "m"), ("max_tokens", 64), ("messages", MSGS)]
    assert built.changed is True
    assert built.notices == []


def test_legacy_token_limit_latched_sends_max_completion_tokens() -> None:
    client = {"model": "m", "max_tokens": 64, "messages": MSGS}
    built = build(client, model=ModelLatches(legacy_token_limit=False))
    assert list(built.body) == ["model", "max_completion_tokens", "messages"]
    assert built.body["max_completion_tokens"] == 64
    assert built.notices == [
        "Model m refuses max_tokens, so the reply ceiling was sent as max_completion_tokens."
    ]


def test_legacy_latched_and_client_already_uses_new_name_is_unchanged() -> None:
    client = {"model": "m", "max_completion_tokens": 64}
    assert build(client, model=ModelLatches(legacy_token_limit=False)).body is client


def test_both_ceilings_sent_become_one() -> None:
    client = {"model": "m", "max_tokens": 10, "stop": ["x"], "max_completion_tokens": 20}
    built = build(client)
    assert list(built.body.items()) == [("model", "m"), ("max_tokens", 20), ("stop", ["x"])]


def test_chosen_temperature_latched_removes_temperature() -> None:
    client = {"model": "m", "temperature": 0.2, "top_p": 0.9}
    built = build(client, model=ModelLatches(chosen_temperature=False))
    assert built.body == {"model": "m", "top_p": 0.9}
    assert built.notices == ["Model m accepts only its default temperature, so none was sent."]


def test_reasoning_effort_field_refused_removes_any_value() -> None:
    for value in ("none", "", "high", "xhigh"):
        client = {"model": "m", "reasoning_effort": value}
        built = build(client, model=ModelLatches(reasoning_effort=False))
        assert built.body == {"model": "m"}


def test_refused_effort_gets_next_rung_up() -> None:
    client = {"model": "m", "reasoning_effort": "minimal", "messages": MSGS}
    built = build(client, model=ModelLatches(refused_efforts={"minimal"}))
    assert list(built.body.items())[1] == ("reasoning_effort", "low")
    assert built.notices == [
        "Model m refuses reasoning_effort 'minimal', so 'low' was sent instead."
    ]


def test_refused_effort_respects_published_list() -> None:
    latches = ModelLatches(refused_efforts={"none"}, supported_efforts=["minimal", "high"])
    client = {"reasoning_effort": "none"}
    assert build(client, model=latches).body == {"reasoning_effort": "minimal"}
    # `low` is not in the published list, so it counts as refused: next supported is `high`.
    assert build({"reasoning_effort": "low"}, model=latches).body == {"reasoning_effort": "high"}


def test_effort_never_steps_down_and_off_ladder_passes() -> None:
    latches = ModelLatches(refused_efforts={"high"})
    client = {"reasoning_effort": "high"}
    assert build(client, model=latches).body is client
    client = {"reasoning_effort": "xhigh"}
    assert build(client, model=ModelLatches(refused_efforts={"none"})).body is client


def test_effort_with_tools_added_when_tools_present() -> None:
    latches = ModelLatches(effort_with_tools="none")
    client = {"model": "m", "tools": TOOLS}
    built = build(client, model=latches)
    assert built.body == {"model": "m", "tools": TOOLS, "reasoning_effort": "none"}
    client = {"model": "m", "reasoning_effort": "high", "tools": TOOLS}
    assert list(build(client, model=latches).body.items())[1] == ("reasoning_effort", "none")
    client = {"model": "m", "reasoning_effort": "high"}
    assert build(client, model=latches).body is client  # no tools: the client's effort stands


def test_stream_asks_for_usage_and_keeps_client_options() -> None:
    client = {"model": "m", "stream": True, "stream_options": {"x": 1}, "messages": MSGS}
    built = build(client)
    assert list(built.body.items()) == [
        ("model", "m"),
        ("stream", True),
        ("stream_options", {"x": 1, "include_usage": True}),
        ("messages", MSGS),
    ]
    assert built.notices == []
    client = {"model": "m", "stream": True}
    assert build(client).body == {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_stream_with_usage_already_asked_is_unchanged() -> None:
    client = {"stream": True, "stream_options": {"include_usage": True}}
    assert build(client).body is client


def test_usage_in_stream_latched_removes_stream_options() -> None:
    endpoint = EndpointLatches(usage_in_stream=False, upstream="fw")
    client = {"stream": True, "stream_options": {"include_usage": True}}
    built = build(client, endpoint=endpoint)
    assert built.body == {"stream": True}
    assert built.notices == [
        "fw refuses stream_options, so it was removed and the stream carries no usage report."
    ]
    client = {"stream": True}
    assert build(client, endpoint=endpoint).body is client


def test_non_stream_request_loses_stream_options_quietly() -> None:
    built = build({"stream": False, "stream_options": {"include_usage": True}})
    assert (built.body, built.notices) == ({"stream": False}, [])


def test_refused_fields_dropped_with_one_notice() -> None:
    latches = ModelLatches(refused_fields={"top_k", "min_p"})
    client = {"model": "m", "top_k": 3, "messages": MSGS, "min_p": 0.1, "seed": 1}
    built = build(client, model=latches)
    assert built.body == {"model": "m", "messages": MSGS, "seed": 1}
    assert built.dropped == ("top_k", "min_p")
    assert built.notices == ["Model m on local refused top_k, min_p, so latchgate removed them."]


def test_refused_field_no_longer_droppable_is_kept() -> None:
    client = {"model": "m", "top_k": 3}
    built = build_body(
        client, EndpointLatches(), ModelLatches(refused_fields={"top_k"}), droppable=frozenset()
    )
    assert built.body is client


def test_structured_output_latched_asks_in_words() -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    client = {"model": "m", "messages": MSGS, "response_format": rf}
    built = build(client, model=ModelLatches(structured_output=False))
    assert "response_format" not in built.body
    assert built.structured_in_words is True
    assert built.body["messages"][0]["role"] == "system"
    assert built.body["messages"][1:] == MSGS
    assert built.notices == [
        "Model m takes no response_format, so latchgate asked for JSON in the system prompt "
        "and will extract it from the reply."
    ]


def test_structured_output_latched_leaves_text_format_alone() -> None:
    client = {"model": "m", "response_format": {"type": "text"}}
    assert build(client, model=ModelLatches(structured_output=False)).body is client


def test_client_wants_usage() -> None:
    assert client_wants_usage({"stream_options": {"include_usage": True}}) is True
    assert client_wants_usage({"stream_options": {"include_usage": False}}) is False
    assert client_wants_usage({"stream_options": "yes"}) is False
    assert client_wants_usage({}) is False


_values = st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none())
_keys = st.sampled_from(
    [
        "model",
        "messages",
        "top_k",
        "min_p",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "reasoning_effort",
        "stream",
        "stream_options",
        "seed",
        "x",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    client=st.dictionaries(_keys, _values, max_size=8),
    legacy=st.booleans(),
    temp=st.booleans(),
    usage=st.booleans(),
)
def test_property_never_mutates_and_keeps_untouched_keys_in_order(
    client: dict[str, Any], legacy: bool, temp: bool, usage: bool
) -> None:
    model = ModelLatches(
        legacy_token_limit=legacy, chosen_temperature=temp, refused_fields={"top_k"}
    )
    built = build(client, endpoint=EndpointLatches(usage_in_stream=usage), model=model)
    assert built.changed is (built.body is not client)
    untouched = [k for k in client if k in ("model", "messages", "min_p", "seed", "x")]
    assert [k for k in built.body if k in untouched] == untouched
    assert all(built.body[k] == client[k] for k in untouched)
    assert "top_k" not in built.body


def test_structured_output_schema_goes_through_the_sanitiser() -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": ["string"]}}}
    built = build_body(
        {"messages": [], "response_format": rf},
        EndpointLatches(),
        ModelLatches(structured_output=False),
        sanitise=lambda schema: {"type": "string"},
    )
    assert built.body["messages"][0]["content"].endswith('JSON schema: {"type":"string"}')


# -- the body's bytes: the client's own whenever possible ---------------------------------------


def test_encode_reuses_the_client_s_bytes() -> None:
    from proxy.path.layer import _encode

    raw = b'{"model": "m",\n "messages": [], "temperature": 0.50}  \n'
    client = orjson.loads(raw)
    assert _encode(raw, client, client) is raw
    # one key added at the end: spliced into the client's bytes
    added = {**client, "stream_options": {"include_usage": True}}
    out = _encode(raw, client, added)
    assert out == raw.rstrip()[:-1] + b',"stream_options":{"include_usage":true}}'
    assert orjson.loads(out) == added
    # anything else changed: serialised afresh
    for other in (
        {**client, "temperature": 0.7, "x": 1},  # a value changed as well
        {k: v for k, v in client.items() if k != "temperature"} | {"x": 1, "y": 2},
        {"x": 1, **client},  # the new key is not last
        {**client, "messages": [], "x": 1},  # an equal but different object
    ):
        assert _encode(raw, client, other) == orjson.dumps(other)


def test_an_agents_sanitised_tools_are_one_list_written_as_its_stored_bytes() -> None:
    # An agent declares the same tools every turn. When sanitising changes them, every turn gets
    # the same sanitised list, keyed once, and the body sent is written with those bytes (an
    # `orjson.Fragment`) instead of serialising tens of KB of schemas again: byte for byte
    # what serialising the body gives.
    from proxy import knowntools
    from proxy.agent.schemas import apply_to_request
    from proxy.path.layer import _encode

    nullable = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d" * 300,
                                          "parameters": nullable}}
        for i in range(8)
    ]  # fmt: skip
    messages = [{"role": "user", "content": "hi " * 2000}]
    raw = orjson.dumps({"model": "m", "messages": messages, "tools": tools, "stream": True})
    sent = []
    for _ in range(3):
        client = knowntools.parse(raw)
        body = {**client, "stream_options": {"include_usage": True}}
        result = apply_to_request(body, mode="sanitise", relaxed=False)
        assert result.body["tools"] != tools  # `["string", "null"]` is written otherwise
        assert _encode(raw, client, result.body) == orjson.dumps(result.body)
        sent.append(result.body["tools"])
    assert sent[0] is sent[1] is sent[2]
    assert knowntools.stored_key(sent[0]) == orjson.dumps(sent[0])
    assert knowntools.KNOWN.intact()


@settings(max_examples=200, deadline=None)
@given(
    client=st.dictionaries(
        _keys | st.sampled_from(["response_format", "tools"]),
        _values | st.sampled_from([{"type": "json_object"}, [{"type": "function"}]]),
        max_size=9,
    ),
    usage=st.booleans(),
)
def test_property_the_shortcut_for_unlatched_models_matches_the_full_walk(
    client: dict[str, Any], usage: bool
) -> None:
    from proxy.agent.negotiate import _build_full

    model, endpoint = ModelLatches(), EndpointLatches(usage_in_stream=usage)
    assert model.permissive()
    fast = build_body(client, endpoint, model)
    full = _build_full(
        client, endpoint, model, str(client.get("model", "")), [], DEFAULT_DROPPABLE, None
    )
    assert (fast.body, fast.changed, fast.dropped, fast.structured_in_words, fast.notices) == (
        full.body,
        full.changed,
        full.dropped,
        full.structured_in_words,
        full.notices,
    )


def test_any_latch_makes_a_model_not_permissive() -> None:
    for change in (
        {"reasoning_effort": False},
        {"legacy_token_limit": False},
        {"chosen_temperature": False},
        {"structured_output": False},
        {"native_tools": False},
        {"refused_fields": {"top_k"}},
        {"refused_efforts": {"low"}},
        {"supported_efforts": ["low"]},
        {"effort_with_tools": "low"},
    ):
        assert not ModelLatches(**change).permissive(), change
