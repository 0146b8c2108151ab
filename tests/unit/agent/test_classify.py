"""classify, the error text it reads and refused_names: every research wording, and unseen ones."""

from __future__ import annotations

import orjson
import pytest

from proxy.agent.negotiate import (
    DEFAULT_DROPPABLE,
    classify,
    is_droppable,
    next_effort,
    refused_names,
)
from proxy.agent.upstream_errors import parse_upstream_error as parse
from proxy.state.latches import ModelLatches, Refusal
from tests.refusal_cases import CASES, TOOLS, Case, openai, req
from tests.refusal_cases import SCHEMA_FORMAT as SCHEMA


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_research_wording(case: Case) -> None:
    got = classify(parse(case.status, case.body), case.sent, droppable=DEFAULT_DROPPABLE)
    if case.capability is None:
        assert got is None
        return
    expected = Refusal(
        case.capability,
        fields=case.fields,
        refused_effort=case.refused_effort,
        next_effort=case.next_effort,
        supported_efforts=case.supported,
        effort_with_tools=case.effort_with_tools,
    )
    assert got == expected


def test_case_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


# --- the text classify reads: UpstreamError.text -----------------------------------------------


def test_error_text_read_from_openai_message() -> None:
    assert parse(400, openai("Unknown parameter: 'x'.", param="x")).text == (
        "Unknown parameter: 'x'."
    )


def test_error_text_read_from_plain_string_error() -> None:
    assert parse(400, b'{"error":"llama3 does not support tools"}').text == (
        "llama3 does not support tools"
    )


def test_error_text_read_from_top_level_message_and_detail() -> None:
    body = orjson.dumps({"object": "error", "message": "one", "detail": "two"})
    assert parse(400, body).text == "one\ntwo"


def test_error_text_read_from_gemini_array_keeps_each_element() -> None:
    body = orjson.dumps([{"error": {"message": "first"}}, {"error": {"message": "second"}}])
    assert parse(400, body).text == "first\nsecond"


def test_error_text_read_from_openrouter_metadata_raw_is_opened() -> None:
    raw = openai("inner words").decode()
    body = orjson.dumps({"error": {"message": "Provider returned error", "metadata": {"raw": raw}}})
    assert parse(400, body).text == f"Provider returned error\n{raw}\ninner words"


def test_error_text_read_from_mistral_detail_items_keep_loc() -> None:
    item = {"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs"}
    body = orjson.dumps({"message": {"detail": [item]}})
    assert parse(400, body).text == (
        '{"type":"extra_forbidden","loc":["body","seed"],"msg":"Extra inputs"}\nExtra inputs'
    )


def test_error_text_read_from_not_json_is_raw() -> None:
    assert parse(400, b"500 tools param requires --jinja flag").text == (
        "500 tools param requires --jinja flag"
    )


def test_error_text_read_from_invalid_utf8_does_not_raise() -> None:
    assert parse(400, b"\xff\xfe bad").text == "\ufffd\ufffd bad"


def test_error_text_read_from_json_string_body() -> None:
    assert parse(400, b'"just words"').text == "just words"


# --- refused_names: forms beyond the research -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Unrecognized request arguments supplied: min_p, top_k", ("min_p", "top_k")),
        ("Unrecognized request argument(s) supplied: a, b and c", ("a", "b", "c")),
        ("Unknown parameters: 'mirostat', \"dry_multiplier\" and `xtc_probability`",
         ("mirostat", "dry_multiplier", "xtc_probability")),
        ("Unknown parameter: 'reasoning'.", ("reasoning",)),
        ('Unknown name "a": Cannot find field.', ("a",)),
        ("Unsupported parameter: 'a' is not supported with this model.", ("a",)),
        ("does not support parameters: ['x', 'y'], for model=m", ("x", "y")),
        ("Extra inputs are not permitted, field: 'stream_options'", ("stream_options",)),
        ("'chat_template_kwargs.enable_thinking' is not supported",
         ("chat_template_kwargs.enable_thinking",)),
        ("The field `typical_p` is unknown to this server", ("typical_p",)),
        ("unexpected field: repeat_penalty", ("repeat_penalty",)),
        ("Unsupported param (--jinja mode required for tool call): tools", ("tools",)),
        ("{'type': 'extra_forbidden', 'loc': ('body', 'seed'), 'msg': 'x'}", ("seed",)),
        ('{"loc":["body","n_probs"],"msg":"Extra inputs are not permitted"}', ("n_probs",)),
        ("1 validation error\nsamplers\n  Extra inputs are not permitted", ("samplers",)),
        # A value error names fields but not in refusal position.
        ("max_tokens is too large: 8192", ()),
        ("Invalid 'user': string too long.", ()),
        ("'x' must be positive", ()),
        # A loc that is not an extra-field error is not a refusal of the field.
        ("{'type': 'int_parsing', 'loc': ('body', 'seed'), 'msg': 'x'}", ()),
        # Without a colon, bare words after a head are prose, not names.
        ("unsupported parameter combination here", ()),
    ],
)
def test_refused_names(text: str, names: tuple[str, ...]) -> None:
    assert refused_names(text) == names


def test_classify_unseen_wording_several_fields_one_refusal() -> None:
    body = openai("Unknown fields: 'min_p', 'dry_multiplier' and 'mirostat_tau'")
    sent = req(min_p=0.1, dry_multiplier=0.8, mirostat_tau=5.0, temperature=0.7)
    assert classify(parse(400, body), sent, droppable=DEFAULT_DROPPABLE) == Refusal(
        "refused_field", fields=("min_p", "dry_multiplier", "mirostat_tau")
    )


def test_classify_dotted_name_drops_top_level_field() -> None:
    body = openai("Unsupported parameter: 'chat_template_kwargs.enable_thinking'")
    sent = req(chat_template_kwargs={"enable_thinking": False})
    assert classify(parse(400, body), sent, droppable=DEFAULT_DROPPABLE) == Refusal(
        "refused_field", fields=("chat_template_kwargs",)
    )


def test_classify_field_not_sent_is_not_latched() -> None:
    body = openai("Unrecognized request argument supplied: top_k")
    assert classify(parse(400, body), req(min_p=0.1), droppable=DEFAULT_DROPPABLE) is None


def test_classify_only_droppable_fields_latch_when_mixed() -> None:
    body = openai("Unrecognized request arguments supplied: system_prompt, top_k")
    sent = req(system_prompt="x", top_k=3)
    assert classify(parse(400, body), sent, droppable=DEFAULT_DROPPABLE) == Refusal(
        "refused_field", fields=("top_k",)
    )


def test_classify_config_can_add_droppable_names() -> None:
    body = openai("Unsupported parameter: 'top_p' is not supported with this model.")
    droppable = DEFAULT_DROPPABLE | {"top_p"}
    assert classify(parse(400, body), req(top_p=0.9), droppable=droppable) == Refusal(
        "refused_field", fields=("top_p",)
    )


def test_classify_config_can_remove_droppable_names() -> None:
    body = openai("Unrecognized request argument supplied: top_k")
    droppable = DEFAULT_DROPPABLE - {"top_k"}
    assert classify(parse(400, body), req(top_k=3), droppable=droppable) is None


def test_classify_field_name_matched_case_insensitively_to_sent_key() -> None:
    body = openai("Unknown parameter: 'Top_K'")
    assert classify(parse(400, body), req(top_k=3), droppable=DEFAULT_DROPPABLE) == Refusal(
        "refused_field", fields=("top_k",)
    )


def test_classify_tools_refusal_without_tools_sent_is_none() -> None:
    body = openai("llama3 does not support tools")
    assert classify(parse(400, body), req(), droppable=DEFAULT_DROPPABLE) is None


def test_classify_stream_options_not_sent_is_none() -> None:
    body = openai("Unrecognized request argument supplied: stream_options")
    assert classify(parse(400, body), req(stream=True), droppable=DEFAULT_DROPPABLE) is None


def test_classify_status_is_not_a_gate() -> None:
    body = b"tools param requires --jinja flag"
    for status in (400, 422, 500, 501):
        got = classify(parse(status, body), req(tools=TOOLS), droppable=DEFAULT_DROPPABLE)
        assert got == Refusal("native_tools")


@pytest.mark.parametrize("status", [401, 403, 429])
def test_classify_auth_and_rate_limit_never_latch(status: int) -> None:
    body = openai("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                  "'max_completion_tokens' instead.")
    assert classify(parse(status, body), req(max_tokens=5), droppable=DEFAULT_DROPPABLE) is None


def test_classify_grammar_rule_wins_over_tools_rule() -> None:
    body = openai("Unable to generate parser for this template. Automatic parser generation "
                  "failed: JSON schema conversion failed:\nUnrecognized schema: {}")
    assert classify(parse(400, body), req(tools=TOOLS), droppable=DEFAULT_DROPPABLE) == Refusal(
        "strict_schemas"
    )


# --- the effort ladder --------------------------------------------------------------------------


def _effort_refusal(value: str, supported: str | None = None) -> bytes:
    text = f"Unsupported value: 'reasoning_effort' does not support '{value}' with this model."
    if supported:
        text += f" Supported values are: {supported}."
    return openai(text, code="unsupported_value")


def test_ladder_without_list_steps_to_next_rung() -> None:
    got = classify(parse(400, _effort_refusal("none")), req(reasoning_effort="none"))
    assert got == Refusal("effort_value", refused_effort="none", next_effort="minimal")


def test_ladder_skips_values_already_refused() -> None:
    known = ModelLatches(refused_efforts={"none", "minimal"})
    got = classify(parse(400, _effort_refusal("low")), req(reasoning_effort="low"), known=known)
    assert got == Refusal("effort_value", refused_effort="low", next_effort="medium")


def test_ladder_published_list_in_refusal_order_keeps_ladder_values_only() -> None:
    body = _effort_refusal("minimal", "'high', 'xhigh', 'medium'")
    got = classify(parse(400, body), req(reasoning_effort="minimal"))
    assert got == Refusal(
        "effort_value", refused_effort="minimal", next_effort="medium",
        supported_efforts=("high", "medium"),
    )


def test_ladder_never_steps_down() -> None:
    body = _effort_refusal("high", "'low', 'medium'")
    assert classify(parse(400, body), req(reasoning_effort="high")) is None


def test_ladder_nothing_above_top_rung() -> None:
    assert classify(parse(400, _effort_refusal("high")), req(reasoning_effort="high")) is None


def test_ladder_value_off_the_ladder() -> None:
    assert classify(parse(400, _effort_refusal("xhigh")), req(reasoning_effort="xhigh")) is None


def test_ladder_repeated_refusal_with_nothing_new() -> None:
    known = ModelLatches(refused_efforts={"none"})
    error = parse(400, _effort_refusal("none"))
    assert classify(error, req(reasoning_effort="none"), known=known) is None


def test_ladder_repeated_refusal_with_a_new_list_is_new() -> None:
    known = ModelLatches(refused_efforts={"none"})
    body = _effort_refusal("none", "'low', 'high'")
    got = classify(parse(400, body), req(reasoning_effort="none"), known=known)
    assert got == Refusal(
        "effort_value", refused_effort="none", next_effort="low", supported_efforts=("low", "high")
    )


def test_ladder_uses_held_list_when_refusal_gives_none() -> None:
    known = ModelLatches(supported_efforts=["medium", "high"])
    got = classify(parse(400, _effort_refusal("low")), req(reasoning_effort="low"), known=known)
    assert got == Refusal("effort_value", refused_effort="low", next_effort="medium")


def test_ladder_value_taken_from_sent_body_when_text_names_none() -> None:
    body = openai("reasoning_effort: Input should be 'low', 'medium' or 'high'")
    got = classify(parse(400, body), req(reasoning_effort="minimal"))
    assert got == Refusal(
        "effort_value", refused_effort="minimal", next_effort="low",
        supported_efforts=("low", "medium", "high"),
    )


def test_ollama_invalid_value_with_list_steps_up() -> None:
    body = openai('invalid reasoning value: "none" (must be "low", "medium", or "high")')
    got = classify(parse(400, body), req(reasoning_effort="none"))
    assert got == Refusal(
        "effort_value", refused_effort="none", next_effort="low",
        supported_efforts=("low", "medium", "high"),
    )


def test_next_effort() -> None:
    assert next_effort("none", ("minimal", "low"), {"none"}) == "minimal"
    assert next_effort("low", ("high", "medium", "none"), {"low", "medium"}) == "high"
    assert next_effort("high", ("none", "low"), set()) is None


# --- droppable ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "droppable"),
    [
        ("top_k", True), ("mirostat", True), ("mirostat_eta", True), ("dry_base", True),
        ("xtc_threshold", True), ("seed", True), ("model", False), ("messages", False),
        ("stream", False), ("tools", False), ("tool_choice", False), ("response_format", False),
        ("n", False), ("stop", False), ("top_p", False), ("dry", False), ("xtc", False),
    ],
)
def test_is_droppable_default(name: str, droppable: bool) -> None:
    assert is_droppable(name, DEFAULT_DROPPABLE) is droppable


def test_is_droppable_never_for_protected_names_even_if_configured() -> None:
    assert is_droppable("tools", frozenset({"tools", "t*"})) is False


# --- "only this value is allowed" for temperature (issue 13, item 23) ---------------------------

# Ways of saying it that no server in the research uses yet, but the next one may: the rule must
# recognise the meaning (one value, about temperature), not a sentence.
ONE_VALUE = [
    "temperature must be 1",
    "temperature must be 1.0",
    "Only temperature=1 is supported for this model",
    "'temperature' only supports 1.0",
    "Invalid temperature: only 1 is allowed",
    "temperature is fixed at 1.0 for this model",
    "The temperature of this model is fixed to 0.6",
    "Temperature must be equal to 1 for reasoning models.",
    "temperature can only be 1 for this model",
    "This model only accepts temperature 1.",
    "temperature: only the default value 1 is supported",
    "Unsupported value: temperature must be exactly 1.0, got 0.2",
    "temperature=0.2 is not supported; only temperature=1 is allowed",
    "Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) "
    "value is supported.",
]
NOT_ONE_VALUE = [
    "Unsupported value: 'temperature' does not support 5. Supported values are between 0 and 2.",
    "temperature must be between 0 and 2",
    "temperature must be less than or equal to 2",
    "temperature must be <= 2",
    "temperature must be at most 1",
    "temperature must be 0 or greater",
    "temperature must be 1 or less",
    "temperature must be 0 to 2",
    "Invalid temperature: must be 0-2",
    "temperature must be in [0, 2], got 3.0.",
    "temperature: only values from 0 to 2 are allowed",
    "temperature must be a number",
    # about another field, temperature named beside it
    "top_p must be 1 when temperature is set",
    "top_k must be 1, temperature is fine",
    "only 1 of temperature or top_p may be set",
    "`temperature` and `top_p` cannot both be specified for this model.",
]


@pytest.mark.parametrize("message", ONE_VALUE)
def test_temperature_one_value_allowed_latches(message: str) -> None:
    sent = req(temperature=0.2, top_p=0.9, top_k=5)
    assert classify(parse(400, openai(message)), sent) == Refusal("chosen_temperature")


@pytest.mark.parametrize("message", NOT_ONE_VALUE)
def test_temperature_ranges_and_other_fields_are_returned(message: str) -> None:
    sent = req(temperature=0.2, top_p=0.9, top_k=5)
    assert classify(parse(400, openai(message)), sent) is None


def test_temperature_not_sent_is_not_latched() -> None:
    body = openai("invalid temperature: only 1 is allowed for this model")
    assert classify(parse(400, body), req()) is None


# --- the other rules, beyond their first wordings -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Argument not supported on this model: presencePenalty", ("presencePenalty",)),
        ("Parameters are not supported: 'seed', 'top_k'", ("seed", "top_k")),
        ("Model grok-4 does not support parameter reasoningEffort.", ("reasoningEffort",)),
        ("The 'seed' parameter is not supported for this model.", ("seed",)),
        ("min_p: this parameter is not supported", ("min_p",)),
        ("x\ntop_k: this field is not allowed", ("top_k",)),
        # one bare name only where the sentence ends after it
        ("does not support parameter tuning yet", ()),
    ],
)
def test_refused_names_more_forms(text: str, names: tuple[str, ...]) -> None:
    assert refused_names(text) == names


@pytest.mark.parametrize("spelt", ["presencePenalty", "PresencePenalty", "presence-penalty"])
def test_a_field_named_in_another_case_style_is_the_field_sent(spelt: str) -> None:
    body = openai(f"Argument not supported on this model: {spelt}")
    assert classify(parse(400, body), req(presence_penalty=0.1)) == Refusal(
        "refused_field", fields=("presence_penalty",)
    )


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is deprecated in favor of max_completion_tokens for this model",
        "Unsupported parameter: use maxCompletionTokens instead of maxTokens",
        "'max_tokens' is not supported with this model, please use 'max_completion_tokens'",
    ],
)
def test_token_limit_refusals_in_other_words(message: str) -> None:
    assert classify(parse(400, openai(message)), req(max_tokens=5)) == Refusal("legacy_token_limit")


def test_stream_options_refused_by_its_only_key() -> None:
    body = openai("Unknown field: include_usage")
    sent = req(stream=True, stream_options={"include_usage": True})
    assert classify(parse(400, body), sent) == Refusal("usage_in_stream")


@pytest.mark.parametrize(
    "message",
    [
        "This model doesn't support response format json_object",
        "response format json_schema is not available for this model",
    ],
)
def test_response_format_refused_in_words(message: str) -> None:
    assert classify(parse(400, openai(message)), req(response_format=SCHEMA)) == Refusal(
        "structured_output"
    )


@pytest.mark.parametrize(
    ("message", "sent", "refused", "nxt"),
    [
        ("Reasoning cannot be disabled for this model.", "none", "none", "minimal"),
        ("Thinking level LOW is not supported for this model.", "low", "low", "medium"),
        ("reasoning_effort: allowed values are medium, high", "low", "low", "medium"),
    ],
)
def test_effort_values_refused_in_other_words(
    message: str, sent: str, refused: str, nxt: str
) -> None:
    got = classify(parse(400, openai(message)), req(reasoning_effort=sent))
    assert got is not None and (got.refused_effort, got.next_effort) == (refused, nxt)


def test_reasoning_mandatory_moves_only_an_effort_of_none() -> None:
    body = openai("Reasoning is mandatory for this endpoint and cannot be disabled.")
    assert classify(parse(400, body), req(reasoning_effort="low")) is None


# -- what is not a refusal to latch, found at the edges -------------------------------------------

MSG = [{"role": "user", "content": "Hi"}]


def test_an_echoed_request_body_is_not_read_as_a_refusal() -> None:
    # pydantic echoes the rejected body in `input`; the words in it are the client's.
    sent = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 1,
        "messages": [{"role": "user", "content": "Unrecognized request argument: seed"}],
        "tool_choice": "foo",
    }
    item = {
        "type": "value_error",
        "loc": ("body",),
        "msg": "Invalid value for tool_choice: foo",
        "input": sent,
    }
    as_repr = orjson.dumps({"object": "error", "message": str([item]), "code": 400})
    as_json = orjson.dumps({"detail": [{**item, "loc": ["body"]}]})
    assert classify(parse(400, as_repr), sent) is None
    assert classify(parse(400, as_json), sent) is None


def test_a_refusal_of_another_field_does_not_move_the_effort() -> None:
    body = orjson.dumps(
        {
            "error": {
                "message": "Unsupported value: 'temperature' does not support 0.2 with this "
                "model. Only the default (1) value is supported when reasoning_effort is not "
                "'none'.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "unsupported_value",
            }
        }
    )
    sent = {"model": "m", "messages": MSG, "temperature": 0.2, "reasoning_effort": "low"}
    got = classify(parse(400, body), sent)
    assert got is not None and got.capability == "chosen_temperature"


def test_a_mistake_inside_response_format_is_the_client_s() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    for message in (
        "Unknown parameter: 'response_format.schema'.",
        "Unknown parameter: 'response_format.json_schema.strictt'.",
    ):
        body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        sent = {"model": "m", "messages": MSG, "response_format": schema}
        assert classify(parse(400, body), sent) is None
    text_only = orjson.dumps({"error": {"message": "response_format text is not supported"}})
    sent = {"model": "m", "messages": MSG, "response_format": {"type": "text"}}
    assert classify(parse(400, text_only), sent) is None  # latching would not change this request
