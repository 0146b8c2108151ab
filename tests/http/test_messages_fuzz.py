"""Fuzz `POST /v1/messages` with bodies and headers no SDK would send: wrong types at every
top-level field, unknown content block types, wrong types inside blocks, dangling tool_use ids,
bad tool_choice and thinking objects, garbage nested in tools, and garbage `x-api-key`,
`anthropic-version` and `anthropic-beta` headers; whole and streamed.

Whatever arrives, latchgate answers in Anthropic's shape and never with a server error: a 4xx with
{"type": "error", "error": {"type", "message"}}, where a body with one bad field names that field
in the message (Anthropic's shape has no `param`: `messages[1].content[0].tool_use_id`,
`tools[0].name`); or a Message; or, streamed, Messages events from message_start to message_stop
(or an error event). The fake upstream answers any chat request, so a body latchgate lets through
gets an answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream

MODEL = "fake-model"
KEY = "k-123456789"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
USER = {"role": "user", "content": "What is the weather in Paris?"}
USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
ASSISTANT = {"role": "assistant", "content": [USE]}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny."}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    raw: bytes

    def error(self) -> dict[str, Any]:
        """The Anthropic-shaped error of a 4xx, checked: its `error` object."""
        assert 400 <= self.status < 500, (self.status, self.raw[:500])
        assert self.content_type.startswith("application/json"), (self.content_type, self.raw)
        body = orjson.loads(self.raw)
        assert isinstance(body, dict) and set(body) == {"type", "error"}, body
        assert body["type"] == "error", body
        error = body["error"]
        assert isinstance(error, dict) and set(error) == {"type", "message"}, body
        assert error["type"] == ERROR_TYPES.get(self.status, "invalid_request_error"), body
        assert isinstance(error["message"], str) and error["message"], body
        return error


async def post(
    lg: Running, raw: bytes, headers: dict[str, str] | None = None, path: str = "/v1/messages"
) -> Answer:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.url + path,
            data=raw,
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as r,
    ):
        return Answer(r.status, r.headers.get("Content-Type", ""), await r.read())


def dumps(body: object) -> bytes:
    return json.dumps(body).encode("utf-8", "surrogatepass")


def sse_events(raw: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """The (event name, data) of each event of an SSE body, comment lines skipped."""
    events: list[tuple[str | None, dict[str, Any]]] = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        name: str | None = None
        data: list[bytes] = []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data.append(line[5:].strip())
        if data:
            events.append((name, orjson.loads(b"\n".join(data))))
    return events


def check_answer(answer: Answer, stream: bool) -> dict[str, Any] | None:
    """Never a 5xx; a 4xx is Anthropic's error (its `error` returned); a 200 a Message or its
    events."""
    assert answer.status < 500, (answer.status, answer.raw[:500])
    if answer.status >= 400:
        return answer.error()
    assert answer.status == 200, (answer.status, answer.raw[:500])
    if stream:
        assert answer.content_type.startswith("text/event-stream"), (
            answer.content_type,
            answer.raw[:300],
        )
        check_events(sse_events(answer.raw))
    else:
        assert answer.content_type.startswith("application/json"), answer.content_type
        check_message(orjson.loads(answer.raw))
    return None


def check_message(message: dict[str, Any]) -> None:
    assert message["type"] == "message" and message["role"] == "assistant", message
    assert message["id"].startswith("msg_"), message
    assert isinstance(message["content"], list), message
    assert message["stop_reason"] in ("end_turn", "max_tokens", "tool_use", "stop_sequence",
                                      "refusal"), message  # fmt: skip
    assert set(message["usage"]) >= {"input_tokens", "output_tokens"}, message


def check_events(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    assert events, "an empty stream"
    types = [data.get("type") for _, data in events]
    for name, data in events:
        assert name == data.get("type"), (name, data)
    assert types[0] == "message_start" and types.count("message_start") == 1, types
    assert types[-1] in ("message_stop", "error"), types
    assert types.count("message_stop") + types.count("error") == 1, types  # nothing after it
    if types[-1] == "message_stop":
        assert types[-2] == "message_delta", types
        check_message(events[0][1]["message"] | {"stop_reason": events[-2][1]["delta"]
                                                   ["stop_reason"]})  # fmt: skip
    else:
        error = events[-1][1]["error"]
        assert isinstance(error["type"], str) and isinstance(error["message"], str), error
    open_index = None
    for kind, (_, data) in zip(types, events, strict=True):
        if kind == "content_block_start":
            assert open_index is None, types
            open_index = data["index"]
        elif kind in ("content_block_delta", "content_block_stop"):
            assert data["index"] == open_index, types
            if kind == "content_block_stop":
                open_index = None


# -- wrong values, field by field -----------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
not_null = json_values.filter(lambda v: v is not None)


def is_int(v: object, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**63


def is_number_in(low: float, high: float) -> Callable[[object], bool]:
    def check(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high

    return check


def not_a(*kinds: type) -> st.SearchStrategy[Any]:
    """Any JSON value but null and the `kinds` (a boolean is not a number here)."""

    def wrong(v: object) -> bool:
        if isinstance(v, bool):
            return bool not in kinds
        return not isinstance(v, kinds)

    return not_null.filter(wrong)


# What each top-level field accepts (besides null, which means "not set"): a value outside it
# gets a 400 whose message names the field. For the fields whose "valid" is a large set
# (`messages`, `system`, `tools`, the objects) every value of the right outer type counts as
# valid here; the targeted cases below go inside them.
FIELDS: dict[str, Callable[[object], bool]] = {
    "model": lambda v: isinstance(v, str) and bool(v.strip()),
    "messages": lambda v: isinstance(v, list),
    "system": lambda v: isinstance(v, str | list),
    "max_tokens": lambda v: is_int(v, 1),
    "temperature": is_number_in(0, 1),
    "top_p": is_number_in(0, 1),
    "top_k": lambda v: is_int(v, 0),
    "stop_sequences": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
    "stream": lambda v: isinstance(v, bool),
    "tools": lambda v: isinstance(v, list),
    "tool_choice": lambda v: (
        isinstance(v, dict) and v.get("type") in ("auto", "any", "tool", "none")
    ),
    "thinking": lambda v: (
        isinstance(v, dict) and v.get("type") in ("enabled", "adaptive", "disabled")
    ),
    "metadata": lambda v: (
        isinstance(v, dict) and (v.get("user_id") is None or isinstance(v["user_id"], str))
    ),
    "output_config": lambda v: (
        isinstance(v, dict) and v.get("effort") in (None, "low", "medium", "high", "max")
    ),
    "mcp_servers": lambda v: False,  # always refused: latchgate connects no MCP server
    "container": lambda v: False,  # always refused: no code execution container
}
# One plain wrong value per field, for the table test (each fails on its own).
WRONG: dict[str, object] = {
    "model": 5,
    "messages": "hi",
    "system": 5,
    "max_tokens": "100",
    "temperature": 1.5,
    "top_p": "high",
    "top_k": -1,
    "stop_sequences": "END",
    "stream": "true",
    "tools": {"name": "f"},
    "tool_choice": "auto",
    "thinking": {"type": "on"},
    "metadata": ["a"],
    "output_config": {"effort": "extreme"},
    "mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "m"}],
    "container": "container_1",
}


def base(with_tools: bool, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": [USER]}
    if with_tools:
        body["tools"] = [TOOL]  # so tool_choice is read against a declared tool
    if stream:
        body["stream"] = True
    return body


@st.composite
def one_wrong_field(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    name = draw(st.sampled_from(sorted(FIELDS)))
    valid = FIELDS[name]
    value = draw(not_null.filter(lambda v: not valid(v)))
    stream = name != "stream" and draw(st.booleans())
    body = base(with_tools=draw(st.booleans()), stream=stream)
    body[name] = value
    return name, body, stream


# -- wrong blocks inside `messages` -------------------------------------------------------------

# Each case: (the message, the path that names it after its own `messages[i]`, the messages it
# needs before it), with a wrong value drawn for the field it targets.
MESSAGE_CASES: list[Callable[[st.DrawFn], tuple[object, str, list[Any]]]] = [
    lambda d: (d(not_a(dict)), "", []),
    lambda d: ({"role": d(not_null.filter(lambda v: v not in ("user", "assistant", "system"))),
                "content": "x"}, ".role", []),
    lambda d: ({"role": d(st.sampled_from(["user", "assistant", "system"])),
                "content": d(not_a(str, list))}, ".content", []),
    lambda d: ({"role": d(st.sampled_from(["user", "assistant"])),
                "content": [d(not_a(dict))]}, ".content[0]", []),
    lambda d: ({"role": d(st.sampled_from(["user", "assistant"])),
                "content": [{"type": d(not_a(str))}]}, ".content[0]", []),
    lambda d: ({"role": "user", "content": [{"type": d(st.sampled_from(
        ["bogus", "tool_use", "thinking", "Text", "input_text", "redacted"]))}]},
        ".content[0].type", []),
    lambda d: ({"role": "assistant", "content": [{"type": d(st.sampled_from(
        ["bogus", "tool_result", "image", "document", "output_text"]))}]},
        ".content[0].type", []),
    lambda d: ({"role": d(st.sampled_from(["user", "assistant"])),
                "content": [{"type": "text", "text": d(not_a(str))}]}, ".content[0].text", []),
    lambda d: ({"role": "user", "content": [{"type": "image", "source": d(not_a(dict))}]},
               ".content[0].source", []),
    lambda d: ({"role": "user", "content": [{"type": "image", "source": {"type": d(
        not_null.filter(lambda v: v not in ("base64", "url")))}}]}, ".content[0].source", []),
    lambda d: ({"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": d(not_a(str))}}]},
        ".content[0].source.data", []),
    lambda d: ({"role": "user", "content": [{"type": "document", "source": {
        "type": "base64", "media_type": "application/pdf", "data": "JVBE"}}]},
        ".content[0]", []),  # a document the upstream cannot read: the block is named
    lambda d: ({"role": "assistant", "content": [{**USE, "id": d(not_a(str))}]},
               ".content[0].id", []),
    lambda d: ({"role": "assistant", "content": [{**USE, "name": d(not_a(str))}]},
               ".content[0].name", []),
    lambda d: ({"role": "assistant", "content": [{**USE, "input": d(not_a(dict))}]},
               ".content[0].input", []),
    lambda d: ({"role": "assistant", "content": [{"type": "thinking",
                                                   "thinking": d(not_a(str))}]},
               ".content[0].thinking", []),
    lambda d: ({"role": "user", "content": [{**RESULT, "tool_use_id": d(not_a(str))}]},
               ".content[0].tool_use_id", [ASSISTANT]),
    lambda d: ({"role": "user", "content": [{**RESULT, "tool_use_id": d(
        st.text(max_size=10).filter(lambda t: t not in ("toolu_1", "1")))}]},
        ".content[0].tool_use_id", []),  # dangling: no tool_use before it has this id
    lambda d: ({"role": "user", "content": [{**RESULT, "content": d(not_a(str, list))}]},
               ".content[0].content", [ASSISTANT]),
    lambda d: ({"role": "user", "content": [{**RESULT, "content": [d(not_a(dict))]}]},
               ".content[0].content[0]", [ASSISTANT]),
    lambda d: ({"role": "user", "content": [{**RESULT, "content": [{"type": d(st.sampled_from(
        ["bogus", "tool_result", "thinking"]))}]}]}, ".content[0].content[0]", [ASSISTANT]),
    lambda d: ({"role": "system", "content": [{"type": d(st.sampled_from(
        ["image", "bogus"]))}]}, ".content[0]", []),
]  # fmt: skip


@st.composite
def one_wrong_message(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    case = draw(st.sampled_from(MESSAGE_CASES))
    message, suffix, before = case(draw)
    leading: list[Any] = draw(
        st.sampled_from([[], [USER], [USER, ASSISTANT, {"role": "user", "content": [RESULT]}]])
    )
    messages = [*leading, *before, message]
    stream = draw(st.booleans())
    body = base(with_tools=draw(st.booleans()), stream=stream)
    body["messages"] = messages
    return f"messages[{len(messages) - 1}]{suffix}", body, stream


# -- garbage nested in system, tools, tool_choice and thinking -----------------------------------

TOOL_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: (d(not_a(dict)), ""),
    lambda d: ({"input_schema": {"type": "object"}}, ".name"),
    lambda d: ({"name": d(not_a(str)), "input_schema": {"type": "object"}}, ".name"),
    lambda d: ({"name": "", "input_schema": {"type": "object"}}, ".name"),
    lambda d: ({"name": "f", "input_schema": d(not_a(dict))}, ".input_schema"),
    lambda d: ({"name": "f"}, ".input_schema"),
    lambda d: ({**TOOL, "description": d(not_a(str))}, ".description"),
    lambda d: ({"type": d(not_a(str)), "name": "f", "input_schema": {}}, ".type"),
]  # fmt: skip
CHOICE_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: ({"type": d(not_null.filter(lambda v: v not in ("auto", "any", "tool", "none")))},
               ".type"),
    lambda d: ({"type": "tool", "name": d(not_null.filter(lambda v: v != "get_weather"))},
               ".name"),
    lambda d: ({"type": "tool"}, ".name"),
    lambda d: ({"type": d(st.sampled_from(["auto", "any", "tool", "none"])),
                "name": "get_weather", "disable_parallel_tool_use": d(not_a(bool))},
               ".disable_parallel_tool_use"),
]  # fmt: skip
THINKING_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: ({"type": d(not_null.filter(lambda v: v not in ("enabled", "adaptive",
                                                              "disabled")))}, ""),
    # (a budget is read only when thinking is enabled: elsewhere it is ignored, as unknown
    # fields are)
    lambda d: ({"type": "enabled", "budget_tokens": d(not_a(int))}, ".budget_tokens"),
]  # fmt: skip
SYSTEM_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: ([d(not_a(dict))], "[0]"),
    lambda d: ([{"type": d(not_null.filter(lambda v: v != "text")), "text": "x"}], "[0]"),
    lambda d: ([{"type": "text", "text": "ok"}, {"type": "text", "text": d(not_a(str))}],
               "[1].text"),
]  # fmt: skip


@st.composite
def one_wrong_nested(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    stream = draw(st.booleans())
    where = draw(st.sampled_from(["tools", "tool_choice", "thinking", "system"]))
    body = base(with_tools=where == "tool_choice", stream=stream)
    if where == "tools":
        tool, suffix = draw(st.sampled_from(TOOL_CASES))(draw)
        leading: list[Any] = draw(
            st.sampled_from([[], [TOOL], [{"type": "web_search_20250305", "name": "w"}, TOOL]])
        )
        body["tools"] = [*leading, tool]
        return f"tools[{len(leading)}]{suffix}", body, stream
    cases = {"tool_choice": CHOICE_CASES, "thinking": THINKING_CASES, "system": SYSTEM_CASES}
    value, suffix = draw(st.sampled_from(cases[where]))(draw)
    body[where] = value
    return where + suffix, body, stream


targeted = st.one_of(one_wrong_field(), one_wrong_message(), one_wrong_nested())


async def check_refused(
    lg: Running, fake: FakeUpstream, param: str, body: dict[str, Any], stream: bool
) -> None:
    """`body` gets a 400 whose message names `param` (or a part of it), and nothing is sent."""
    sent = len(fake.requests)
    answer = await post(lg, dumps(body))
    error = check_answer(answer, stream)
    assert error is not None, (param, body, answer.raw[:500])
    assert answer.status == 400, (body, answer.raw[:500])
    assert param in error["message"], (param, body, error)
    assert len(fake.requests) == sent, body  # refused before anything was sent


@FUZZ
@given(case=targeted)
async def test_one_wrong_field_is_a_400_naming_it(
    lg: Running, fake: FakeUpstream, case: tuple[str, dict[str, Any], bool]
) -> None:
    await check_refused(lg, fake, *case)


@pytest.mark.parametrize("name", sorted(WRONG))
@pytest.mark.parametrize("stream", [False, True])
async def test_each_field_wrong_on_its_own(
    lg: Running, fake: FakeUpstream, name: str, stream: bool
) -> None:
    if name == "stream" and stream:
        pytest.skip("a wrong `stream` is the field itself")
    body = base(with_tools=True, stream=stream)
    body[name] = WRONG[name]
    await check_refused(lg, fake, name, body, stream)


# -- whole bodies of garbage ------------------------------------------------------------------

BLOCK_TYPES = [
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "web_search_tool_result", "search_result", "container_upload", "bogus",
]  # fmt: skip
blocks = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(BLOCK_TYPES), json_values)},
        optional={
            "text": st.one_of(st.text(max_size=8), json_values),
            "id": st.one_of(st.sampled_from(["toolu_1", "toolu_2"]), json_values),
            "name": st.one_of(st.just("get_weather"), json_values),
            "input": st.one_of(st.just({"city": "Paris"}), json_values),
            "tool_use_id": st.one_of(st.sampled_from(["toolu_1", "toolu_2", "1"]), json_values),
            "content": json_values,
            "is_error": json_values,
            "thinking": json_values,
            "signature": json_values,
            "data": json_values,
            "source": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["base64", "url", "text", "file", "content"])},
                    optional={"media_type": json_values, "data": json_values, "url": json_values},
                ),
            ),
            "cache_control": json_values,
        },
    ),
)  # fmt: skip
messages = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]),
                           json_values)},
        optional={"content": st.one_of(st.text(max_size=10), st.lists(blocks, max_size=3),
                                       json_values)},
    ),
)  # fmt: skip
tools = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"name": st.one_of(st.just("get_weather"), json_values)},
        optional={
            "type": st.one_of(st.sampled_from(["custom", "web_search_20250305", "bash_20250124",
                                               "text_editor_20250124", "computer_20250124"]),
                              json_values),
            "input_schema": st.one_of(st.just(TOOL["input_schema"]), json_values),
            "description": json_values,
            "cache_control": json_values,
        },
    ),
)  # fmt: skip
tool_choices = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(["auto", "any", "tool", "none", "bogus"]),
                           json_values)},
        optional={"name": st.one_of(st.just("get_weather"), json_values),
                  "disable_parallel_tool_use": json_values},
    ),
)  # fmt: skip
thinkings = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(["enabled", "adaptive", "disabled", "on"]),
                           json_values)},
        optional={"budget_tokens": st.one_of(st.integers(0, 40000), json_values),
                  "display": json_values},
    ),
)  # fmt: skip
# Values each field accepts, so that a body wrong deep inside often has every field right above.
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "system": st.one_of(st.text(max_size=10), st.just([{"type": "text", "text": "Be brief.",
                                                         "cache_control": {"type": "ephemeral"}}])),
    "temperature": st.floats(0, 1),
    "top_p": st.floats(0, 1),
    "top_k": st.integers(0, 100),
    "stop_sequences": st.lists(st.text(max_size=5), max_size=2),
    "metadata": st.sampled_from([{}, {"user_id": "u-1"}, {"user_id": '{"device_id": "d"}'}]),
    "output_config": st.sampled_from([{}, {"effort": "high"}, {"effort": "low"}]),
    "context_management": st.just({"edits": [{"type": "clear_thinking_20251015"}]}),
    "service_tier": st.sampled_from(["auto", "standard_only", "priority"]),
}  # fmt: skip
garbage_everywhere = st.fixed_dictionaries(
    {"model": st.one_of(st.just(MODEL), json_values)},
    optional={
        "max_tokens": st.one_of(st.integers(1, 4096), json_values),
        "messages": st.one_of(st.lists(messages, max_size=4), json_values),
        "tools": st.one_of(st.lists(tools, max_size=3), json_values),
        "tool_choice": tool_choices,
        "thinking": thinkings,
        "stream": st.one_of(st.booleans(), json_values),
        "mcp_servers": json_values,
        "container": json_values,
        **{name: json_values for name in GOOD},
    },
)  # fmt: skip
garbage_inside = st.fixed_dictionaries(
    {"model": st.just(MODEL), "max_tokens": st.integers(1, 4096),
     "messages": st.lists(messages, min_size=1, max_size=4)},
    optional={
        "tools": st.lists(tools, max_size=3),
        "tool_choice": tool_choices,
        "thinking": thinkings,
        "stream": st.booleans(),
        **GOOD,
    },
)  # fmt: skip
garbage_bodies = st.one_of(garbage_everywhere, garbage_inside)


@FUZZ
@given(body=garbage_bodies)
async def test_garbage_bodies_never_get_a_server_error(lg: Running, body: dict[str, Any]) -> None:
    answer = await post(lg, dumps(body))
    check_answer(answer, body.get("stream") is True)


@FUZZ
@given(body=garbage_bodies)
async def test_garbage_bodies_counted_never_get_a_server_error(
    lg: Running, body: dict[str, Any]
) -> None:
    answer = await post(lg, dumps(body), path="/v1/messages/count_tokens")
    assert answer.status < 500, (answer.status, answer.raw[:500])
    if answer.status >= 400:
        answer.error()
    else:
        counted = orjson.loads(answer.raw)
        assert set(counted) == {"input_tokens"} and counted["input_tokens"] > 0, counted


# -- garbage headers ---------------------------------------------------------------------------

# Header values aiohttp can put on the wire: printable ASCII and Latin-1, no line breaks.
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=40,
)
header_sets = st.fixed_dictionaries(
    {},
    optional={
        "x-api-key": header_text,
        "Authorization": st.one_of(header_text, header_text.map(lambda t: "Bearer " + t)),
        "anthropic-version": st.one_of(st.sampled_from(["2023-06-01", "2023-01-01", ""]),
                                       header_text),
        "anthropic-beta": st.one_of(
            st.lists(st.sampled_from(["claude-code-20250219", "interleaved-thinking-2025-05-14",
                                      "bogus", ""]), max_size=4).map(",".join),
            header_text),
        "anthropic-dangerous-direct-browser-access": header_text,
        "x-app": header_text,
    },
)  # fmt: skip


@pytest.fixture
async def keyed(fake: FakeUpstream, start_proxy: StartProxy) -> AsyncIterator[Running]:
    yield await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic"}, client_keys=[KEY]
    )


def key_given(headers: dict[str, str]) -> str | None:
    """The key latchgate reads from these headers, as the server sees them (values stripped)."""
    auth = headers.get("Authorization", "").strip()
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key", "").strip() or None


@FUZZ
@given(headers=header_sets, stream=st.booleans())
async def test_garbage_headers_never_get_a_server_error(
    lg: Running, keyed: Running, headers: dict[str, str], stream: bool
) -> None:
    body = dumps({**base(with_tools=False, stream=stream)})
    # No client keys: any key, version or beta list is answered.
    answer = await post(lg, body, headers)
    assert answer.status == 200, (headers, answer.status, answer.raw[:300])
    check_answer(answer, stream)
    # Client keys: only the right key (as x-api-key or a bearer token) is let through.
    answer = await post(keyed, body, headers)
    check_answer(answer, stream)
    if answer.status != 200:
        assert answer.status == 401, (headers, answer.raw[:300])
    assert (answer.status == 200) == (key_given(headers) == KEY), headers


@FUZZ
@given(version=header_text, beta=header_text, stream=st.booleans())
async def test_the_right_key_with_garbage_anthropic_headers_is_answered(
    keyed: Running, version: str, beta: str, stream: bool
) -> None:
    for auth in ({"x-api-key": KEY}, {"Authorization": f"Bearer {KEY}"}):
        headers = {**auth, "anthropic-version": version, "anthropic-beta": beta}
        answer = await post(keyed, dumps(base(with_tools=False, stream=stream)), headers)
        assert answer.status == 200, (headers, answer.raw[:300])
        check_answer(answer, stream)
