"""Sizing: the estimate matches orjson's length, calibration rules, the pre-flight check."""

from __future__ import annotations

import copy
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.agent.sizing import (
    Calibration,
    estimate_chars,
    overflow_body,
    preflight,
    reply_ceiling,
)
from tests.steps import count, growth

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file. Returns \"text\"\n",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": "number", "maximum": 1.5e3},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]

CONVERSATION = [
    {"role": "system", "content": "You are terse.\tUse tools.\r\n"},
    {
        "role": "user",
        "content": "Lis le fichier « notes.md » 日本語のテキスト 🙂 \\ \"quoted\" \x01\x1f",
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "notes.md", "limit": 10}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "line one\nline two\b\f"},
    {"role": "user", "content": [{"type": "text", "text": "and this?"}]},
    {"role": "assistant", "content": "ok", "reasoning_content": "", "refusal": None, "n": -3},
]

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGR" * 10_000, "format": "wav"}}


def orjson_len(messages: object, tools: object) -> int:
    size = len(orjson.dumps(messages))
    return size + (len(orjson.dumps(tools)) if tools is not None else 0)


def test_estimate_equals_orjson_length_for_text_and_tool_calls() -> None:
    assert estimate_chars(CONVERSATION, TOOLS) == orjson_len(CONVERSATION, TOOLS)
    assert estimate_chars(CONVERSATION, None) == len(orjson.dumps(CONVERSATION))


def test_estimate_of_empty_and_missing_parts() -> None:
    assert estimate_chars([], None) == 2
    assert estimate_chars(None, None) == 0
    assert estimate_chars([], []) == 4


def test_image_and_audio_parts_count_nothing() -> None:
    text = {"type": "text", "text": "what is this?"}
    with_media = [{"role": "user", "content": [text, IMAGE, AUDIO]}]
    without = [{"role": "user", "content": [{"type": "text", "text": "what is this?"}]}]
    assert estimate_chars(with_media, None) == len(orjson.dumps(without))


def test_a_message_of_only_an_image_counts_as_empty_content() -> None:
    assert estimate_chars([{"content": [IMAGE]}], None) == len(orjson.dumps([{"content": []}]))
    assert estimate_chars([{"role": "user", "content": [IMAGE]}], None) == len(
        orjson.dumps([{"role": "user", "content": []}])
    )


def test_estimate_does_not_mutate_its_input() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}, IMAGE]}]
    before = copy.deepcopy(messages)
    estimate_chars(messages, TOOLS)
    assert messages == before


def test_lone_surrogates_are_still_counted() -> None:
    # orjson refuses to write a lone surrogate; the walker counts it as 3 UTF-8 bytes
    assert estimate_chars([{"content": "a\ud800b"}], None) == len('[{"content":"a"}]') + 4


json_text = st.text(max_size=40)
json_scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | json_text
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(json_text, json_values, max_size=5), max_size=5), json_values)
def test_estimate_matches_orjson_on_arbitrary_json(messages: list[object], tools: object) -> None:
    try:
        expected = orjson_len(messages, tools)
    except orjson.JSONEncodeError:  # surrogates hypothesis may generate
        return
    assert estimate_chars(messages, tools) == expected


def _conversation(messages: int, words: int) -> list[dict[str, object]]:
    return [
        {"role": "user" if i % 2 else "assistant", "content": "word " * words}
        for i in range(messages)
    ]


def test_estimate_of_200k_characters_is_fast() -> None:
    # Counted, not timed (a per-call limit on the clock is a benchmark's business; issue 13,
    # item 16): the estimate measures each message in C, so its Python steps follow the number
    # of messages, not their length. The same 200 messages eight times longer cost the same;
    # eight times as many messages cost eight times as much.
    messages = _conversation(200, 200)
    assert estimate_chars(messages, TOOLS) == orjson_len(messages, TOOLS)

    def make(words: int, messages: int = 200) -> Callable[[], object]:
        body = _conversation(messages, words)
        return lambda: estimate_chars(body, TOOLS)

    assert growth(make, 25) < 1.2
    assert growth(lambda n: make(200, n), 25) < 10
    _, steps = count(make(200))
    assert steps.total < 50 * 200  # a few steps per message, whatever its length


KEY = ("endpoint", "model")


def test_calibration_defaults_to_four_chars_per_token_rounded_up() -> None:
    calibration = Calibration()
    assert calibration.tokens(KEY, 4000) == 1000
    assert calibration.tokens(KEY, 4001) == 1001
    assert calibration.tokens(KEY, 0) == 0


def test_calibration_uses_the_highest_of_the_last_four_ratios() -> None:
    calibration = Calibration()
    for ratio in (6.0, 2.0, 3.0, 2.5):
        calibration.observe(KEY, int(ratio * 1000), 1000)
    assert calibration.ratio(KEY) == 6.0
    assert calibration.tokens(KEY, 6000) == 1000
    calibration.observe(KEY, 3000, 1000)  # 6.0 falls out of the last four
    assert calibration.ratio(KEY) == 3.0


def test_calibration_ignores_ratios_outside_one_to_eight() -> None:
    calibration = Calibration()
    calibration.observe(KEY, 9000, 1000)  # 9 chars/token: a truncated prompt
    calibration.observe(KEY, 500, 1000)  # 0.5
    calibration.observe(KEY, 100, 0)
    assert calibration.ratio(KEY) == 4.0
    calibration.observe(KEY, 8000, 1000)
    calibration.observe(KEY, 1000, 1000)
    assert calibration.ratio(KEY) == 8.0


def test_calibration_is_per_endpoint_and_model() -> None:
    calibration = Calibration()
    calibration.observe(KEY, 3000, 1000)
    assert calibration.ratio(("endpoint", "other")) == 4.0
    assert calibration.ratio(("other", "model")) == 4.0
    assert calibration.ratio(KEY) == 3.0


def test_calibration_forgets_the_oldest_key_past_its_bound() -> None:
    calibration = Calibration(max_keys=2)
    for name in ("a", "b", "c"):
        calibration.observe(("e", name), 2000, 1000)
    assert calibration.ratio(("e", "a")) == 4.0
    assert calibration.ratio(("e", "c")) == 2.0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, 0),
        ({"max_tokens": 512}, 512),
        ({"max_completion_tokens": 300, "max_tokens": 512}, 300),
        ({"max_completion_tokens": None, "max_tokens": 64}, 64),
        ({"max_tokens": 0}, 0),
        ({"max_tokens": -5}, 0),
        ({"max_tokens": True}, 0),
        ({"max_tokens": "100"}, 0),
    ],
)
def test_reply_ceiling(body: dict[str, object], expected: int) -> None:
    assert reply_ceiling(body) == expected


def test_preflight_passes_what_fits_exactly() -> None:
    assert preflight(8000, 192, 8192) is None
    assert preflight(8192, 0, 8192) is None


def test_preflight_ignores_unknown_and_small_windows() -> None:
    assert preflight(50_000, 0, None) is None
    assert preflight(50_000, 0, 8191) is None
    assert preflight(50_000, 0, 2048) is None


def test_preflight_refuses_an_oversized_prompt() -> None:
    message = preflight(50_000, 0, 8192)
    assert message == (
        "latchgate did not send this request: it is about 50000 tokens, over this model's "
        "8192-token context window. Shorten the messages (drop or summarise older turns, trim "
        "long tool results), or use a model with a larger context window."
    )


def test_preflight_counts_the_reply_ceiling() -> None:
    message = preflight(8000, 1000, 8192)
    assert message == (
        "latchgate did not send this request: it is about 8000 tokens plus 1000 reserved for "
        "the reply, over this model's 8192-token context window. Lower "
        "max_tokens/max_completion_tokens to at most 192, or shorten the messages."
    )


def test_preflight_for_a_200k_character_prompt_against_8192() -> None:
    messages = [{"role": "user", "content": "x" * 200_000}]
    tokens = Calibration().tokens(KEY, estimate_chars(messages, None))
    message = preflight(tokens, 0, 8192)
    assert message is not None
    assert "about 50008 tokens, over this model's 8192-token" in message


def test_overflow_body_is_openai_shaped() -> None:
    assert overflow_body("too long") == {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def test_preflight_trusts_small_windows_only_when_asked() -> None:
    assert preflight(5000, 0, 4096) is None
    message = preflight(5000, 0, 4096, trust_small=True)
    assert message is not None and "4096-token context window" in message
    assert preflight(3000, 0, 4096, trust_small=True) is None
