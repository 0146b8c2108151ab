"""Fuzz `POST /v1/responses` with bodies no SDK would send: wrong types at every top-level field,
unknown input item types, wrong types inside items and content parts, dangling call ids,
references to items never stored, garbage nested in tools; whole and streamed.

Whatever arrives, latchgate answers in OpenAI's shape and never with a server error: a 4xx with
{"error": {"message", "type", "param", "code"}}, where a body with one bad field names that field
in `param` (`input[0].call_id`, `tools[0].name`); or a Response object; or, streamed, Responses
events from response.created to response.completed (or incomplete, or failed). The fake upstream
answers any chat request, so a body latchgate lets through gets an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import Running
from tests.fakeupstream import FakeUpstream

MODEL = "fake-model"
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
FUNCTION = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather",
        "arguments": '{"city": "Paris"}'}  # fmt: skip
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "Sunny."}
CALL2 = {**CALL, "call_id": "call_2"}
OUTPUT2 = {**OUTPUT, "call_id": "call_2"}
USER = {"role": "user", "content": "What is the weather in Paris?"}


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    raw: bytes

    def error(self) -> dict[str, Any]:
        """The OpenAI-shaped error of a 4xx, checked."""
        assert 400 <= self.status < 500, (self.status, self.raw[:500])
        error = orjson.loads(self.raw)["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"], error
        assert isinstance(error["type"], str) and error["type"], error
        assert error["param"] is None or isinstance(error["param"], str), error
        assert error["code"] is None or isinstance(error["code"], str), error
        return error


async def post(lg: Running, raw: bytes) -> Answer:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            lg.base_url + "/responses", data=raw, headers={"Content-Type": "application/json"}
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
    """Never a 5xx; a 4xx is OpenAI's error (returned); a 200 a Response or its events."""
    assert answer.status < 500, (answer.status, answer.raw[:500])
    if answer.status >= 400:
        return answer.error()
    assert answer.status == 200, (answer.status, answer.raw[:500])
    if stream and answer.content_type.startswith("text/event-stream"):
        check_events(sse_events(answer.raw))
    else:
        assert not stream, ("a stream answered as", answer.content_type, answer.raw[:300])
        response = orjson.loads(answer.raw)
        assert response["object"] == "response", response
        assert response["id"].startswith("resp_"), response
        assert response["status"] in ("completed", "incomplete", "failed"), response
        assert isinstance(response["output"], list), response
    return None


def check_events(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    assert events, "an empty stream"
    types = [data.get("type") for _, data in events]
    for name, data in events:
        assert name is None or name == data.get("type"), (name, data)
    assert types[0] == "response.created", types
    last = types[-1]
    if last == "error":  # a failure ends with response.failed, then the error event
        assert types[-2] == "response.failed", types
        last = types[-2]
    assert last in TERMINAL, types
    assert sum(t in TERMINAL for t in types) == 1, types
    numbers = [data.get("sequence_number") for _, data in events]
    sequence = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    assert sequence == numbers, numbers
    assert sequence == sorted(set(sequence)), sequence  # strictly increasing
    final = events[-1][1] if types[-1] != "error" else events[-2][1]
    assert final["response"]["object"] == "response", final


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


def is_str(v: object) -> bool:
    return isinstance(v, str)


def is_bool(v: object) -> bool:
    return isinstance(v, bool)


def is_number_in(low: float, high: float) -> Callable[[object], bool]:
    def check(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high

    return check


def is_metadata(v: object) -> bool:
    return (
        isinstance(v, dict)
        and len(v) <= 16
        and all(len(k) <= 64 and isinstance(x, str) and len(x) <= 512 for k, x in v.items())
    )


# What each top-level field accepts (besides null, which means "not set"): a value outside it
# gets a 400 whose param is the field. Fields whose wrong values are only generated from a
# closed list are those where "valid" is too large a set to filter by (`input`, `tools`).
FIELDS: dict[str, Callable[[object], bool]] = {
    "model": lambda v: isinstance(v, str) and bool(v),
    "input": lambda v: isinstance(v, str | list),
    "instructions": is_str,
    "tools": lambda v: isinstance(v, list),
    "tool_choice": lambda v: v in ("auto", "none", "required") or isinstance(v, dict),
    "parallel_tool_calls": is_bool,
    "max_output_tokens": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "temperature": is_number_in(0, 2),
    "top_p": is_number_in(0, 1),
    "reasoning": lambda v: isinstance(v, dict),
    "text": lambda v: isinstance(v, dict),
    "stream": is_bool,
    "store": is_bool,
    "include": lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
    "metadata": is_metadata,
    "user": is_str,
    "previous_response_id": lambda v: False,  # a string here is an id the store lacks: 400 too
    "truncation": lambda v: v in ("auto", "disabled"),
    "background": lambda v: v is False,  # true is refused (no background responses)
}
# One plain wrong value per field, for the table test (each fails on its own).
WRONG: dict[str, object] = {
    "model": 5,
    "input": 5,
    "instructions": ["be brief"],
    "tools": {"type": "function"},
    "tool_choice": 5,
    "parallel_tool_calls": "yes",
    "max_output_tokens": "100",
    "temperature": "hot",
    "top_p": [1],
    "reasoning": "high",
    "text": "json",
    "stream": "true",
    "store": 1,
    "include": "reasoning.encrypted_content",
    "metadata": ["a", "b"],
    "user": 42,
    "previous_response_id": 7,
    "truncation": True,
    "background": "yes",
}


def base(with_tools: bool, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "input": [USER]}
    if with_tools:
        body["tools"] = [FUNCTION]  # so tool_choice and parallel_tool_calls are read
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


# -- wrong items inside `input` -------------------------------------------------------------


def not_a(*kinds: type) -> st.SearchStrategy[Any]:
    """Any JSON value but null and the `kinds` (a boolean is not a number here)."""

    def wrong(v: object) -> bool:
        if isinstance(v, bool):
            return bool not in kinds
        return not isinstance(v, kinds)

    return not_null.filter(wrong)


# Each case: (the item, the param that names it after the item's own `input[i]`, the items it
# needs before it), with a wrong value drawn for the field it targets.
ITEM_CASES: list[Callable[[st.DrawFn], tuple[object, str, list[Any]]]] = [
    lambda d: (d(not_a(dict)), "", []),
    lambda d: ({"type": d(st.sampled_from(["bogus", "input_text", "Message", "tool"]))}, ".type",
               []),
    lambda d: ({"type": d(not_a(str)), "content": "x"}, ".type", []),
    lambda d: ({"type": "message", "role": d(not_null.filter(
        lambda v: v not in ("user", "assistant", "system", "developer"))), "content": "x"},
        ".role", []),
    lambda d: ({"type": "message", "role": d(st.sampled_from(
        ["user", "assistant", "system", "developer"])), "content": d(not_a(str, list))},
        ".content", []),
    lambda d: ({"type": "message", "role": "user", "content": [d(not_a(dict))]},
               ".content[0]", []),
    lambda d: ({"type": "message", "role": "user",
                "content": [{"type": d(st.sampled_from(["bogus", "image", "output_audio"]))}]},
               ".content[0]", []),
    lambda d: ({"type": "message", "role": d(st.sampled_from(["user", "assistant", "system"])),
                "content": [{"type": d(st.sampled_from(["input_text", "output_text"])),
                             "text": d(not_a(str))}]},
               ".content[0]", []),
    lambda d: ({**CALL, "call_id": d(not_a(str))}, ".call_id", []),
    lambda d: ({**CALL, "call_id": ""}, ".call_id", []),
    lambda d: ({**CALL, "name": d(not_a(str))}, ".name", []),
    lambda d: ({**CALL, "arguments": d(not_a(str))}, ".arguments", []),
    lambda d: ({**OUTPUT, "call_id": d(st.text(max_size=10).filter(lambda t: t != "call_1"))},
               ".call_id", []),  # dangling: no call before it has this id
    lambda d: ({**OUTPUT2, "call_id": d(not_a(str))}, ".call_id", [CALL2]),
    lambda d: ({**OUTPUT2, "output": d(not_a(str, list))}, ".output", [CALL2]),
    lambda d: ({**OUTPUT2, "output": [d(not_a(dict))]}, ".output[0]", [CALL2]),
    lambda d: ({"type": "item_reference", "id": d(st.text(max_size=12))}, ".id", []),
    lambda d: ({"type": "custom_tool_call", "call_id": "c", "name": "t",
                "input": d(not_a(str))}, ".input", []),
]  # fmt: skip


@st.composite
def one_wrong_item(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    case = draw(st.sampled_from(ITEM_CASES))
    item, suffix, before = case(draw)
    leading: list[Any] = draw(st.sampled_from([[], [USER], [USER, CALL, OUTPUT]]))
    items = [*leading, *before, item]
    stream = draw(st.booleans())
    body = base(with_tools=draw(st.booleans()), stream=stream)
    body["input"] = items
    return f"input[{len(items) - 1}]{suffix}", body, stream


# -- garbage nested in tools ------------------------------------------------------------------

TOOL_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: (d(not_a(dict)), ""),
    lambda d: ({"name": "f"}, ".type"),
    lambda d: ({"type": d(not_a(str)), "name": "f"}, ".type"),
    lambda d: ({"type": d(st.sampled_from(["function", "custom"]))}, ".name"),
    lambda d: ({"type": d(st.sampled_from(["function", "custom"])), "name": d(not_a(str))},
               ".name"),
    lambda d: ({"type": "function", "name": ""}, ".name"),
    lambda d: ({**FUNCTION, "parameters": d(not_a(dict))}, ".parameters"),
    lambda d: ({**FUNCTION, "strict": d(not_a(bool))}, ".strict"),
    lambda d: ({**FUNCTION, "description": d(not_a(str))}, ".description"),
    lambda d: ({"type": "namespace", "tools": [FUNCTION]}, ".name"),
    lambda d: ({"type": "namespace", "name": d(not_a(str)), "tools": [FUNCTION]}, ".name"),
    lambda d: ({"type": "namespace", "name": "ns", "tools": d(not_a(list))}, ".tools"),
    lambda d: ({"type": "namespace", "name": "ns", "tools": [d(not_a(dict))]}, ".tools[0]"),
    lambda d: ({"type": "namespace", "name": "ns",
                "tools": [{"type": "function", "name": d(not_a(str))}]}, ".tools[0].name"),
    lambda d: ({"type": "custom", "name": "apply_patch", "format": d(not_a(dict))}, ".format"),
    lambda d: ({"type": "custom", "name": "apply_patch",
                "format": {"type": d(not_null.filter(lambda v: v not in ("text", "grammar")))}},
               ".format"),
    lambda d: ({"type": "custom", "name": "apply_patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": d(not_a(str))}},
               ".format.definition"),
]  # fmt: skip


@st.composite
def one_wrong_tool(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    tool, suffix = draw(st.sampled_from(TOOL_CASES))(draw)
    leading: list[Any] = draw(st.sampled_from([[], [FUNCTION], [{"type": "web_search"}, FUNCTION]]))
    stream = draw(st.booleans())
    body = base(with_tools=False, stream=stream)
    body["tools"] = [*leading, tool]
    return f"tools[{len(leading)}]{suffix}", body, stream


# -- whole bodies of garbage ------------------------------------------------------------------

ITEM_TYPES = [
    "message", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "reasoning", "item_reference", "local_shell_call",
    "local_shell_call_output", "web_search_call", "additional_tools", "compaction", "bogus",
]  # fmt: skip
items = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(ITEM_TYPES), json_values)},
        optional={
            "role": st.one_of(st.sampled_from(["user", "assistant", "developer", "tool"]),
                              json_values),
            "content": st.one_of(
                json_values,
                st.lists(st.fixed_dictionaries(
                    {"type": st.sampled_from(["input_text", "output_text", "input_image",
                                              "input_file", "refusal", "bogus"])},
                    optional={"text": json_values, "image_url": json_values},
                ), max_size=3),
            ),
            "call_id": st.one_of(st.sampled_from(["call_1", "call_2"]), json_values),
            "name": st.one_of(st.just("get_weather"), json_values),
            "arguments": st.one_of(st.just("{}"), json_values),
            "input": json_values,
            "output": json_values,
            "id": json_values,
            "encrypted_content": st.one_of(st.just("lg1:!!"), json_values),
            "tools": json_values,
            "action": json_values,
        },
    ),
)  # fmt: skip
tools = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["function", "custom", "namespace", "local_shell",
                                  "web_search", "mcp", "bogus"])},
        optional={"name": st.one_of(st.just("f"), json_values), "parameters": json_values,
                  "strict": json_values, "format": json_values, "tools": json_values,
                  "description": json_values},
    ),
)  # fmt: skip
tool_choices = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(["function", "custom", "allowed_tools", "web_search",
                                            "bogus"]), json_values)},
        optional={"name": st.one_of(st.just("get_weather"), json_values), "mode": json_values,
                  "tools": st.one_of(st.lists(st.one_of(json_values, st.fixed_dictionaries(
                      {"type": json_values}, optional={"name": json_values})), max_size=2),
                      json_values)},
    ),
)  # fmt: skip
# Values each field accepts, so that a body wrong deep inside often has every field right above.
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "instructions": st.text(max_size=10),
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
    "parallel_tool_calls": st.booleans(),
    "max_output_tokens": st.integers(1, 4096),
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1),
    "reasoning": st.sampled_from([{"effort": "low"}, {"summary": "auto"}, {}]),
    "text": st.sampled_from([{"format": {"type": "text"}}, {"format": {"type": "json_object"}}]),
    "stream": st.booleans(),
    "store": st.booleans(),
    "include": st.just(["reasoning.encrypted_content"]),
    "metadata": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    "user": st.text(max_size=5),
    "truncation": st.sampled_from(["auto", "disabled"]),
    "background": st.just(False),
}
OTHER_FIELDS = sorted(n for n in FIELDS if n not in ("model", "input", "tools", "tool_choice",
                                                     "stream", "previous_response_id"))  # fmt: skip
# Garbage everywhere: mostly refused at the first field looked at.
garbage_everywhere = st.fixed_dictionaries(
    {"model": st.one_of(st.just(MODEL), json_values)},
    optional={
        "input": st.one_of(st.text(max_size=10), st.lists(items, max_size=4), json_values),
        "tools": st.one_of(st.lists(tools, max_size=3), json_values),
        "tool_choice": tool_choices,
        "stream": st.one_of(st.booleans(), json_values),
        "previous_response_id": json_values,
        **{name: json_values for name in OTHER_FIELDS},
    },
)  # fmt: skip
# Good top-level fields around garbage in the items, tools and tool_choice.
garbage_inside = st.fixed_dictionaries(
    {"model": st.just(MODEL), "input": st.lists(items, min_size=1, max_size=4)},
    optional={
        "tools": st.lists(tools, max_size=3),
        "tool_choice": tool_choices,
        "stream": st.booleans(),
        **{name: GOOD[name] for name in OTHER_FIELDS},
    },
)  # fmt: skip
garbage_bodies = st.one_of(garbage_everywhere, garbage_inside)

# -- tool_choice objects that name nothing declared -------------------------------------------

CHOICE_CASES: list[Callable[[st.DrawFn], tuple[object, str]]] = [
    lambda d: ({"type": d(st.sampled_from(["function", "custom"])), "name": d(not_a(str))},
               ".name"),
    lambda d: ({"type": "function", "name": d(st.text(max_size=8).filter(
        lambda t: t != "get_weather"))}, ".name"),
    lambda d: ({"type": d(st.sampled_from(["bogus", "tool", "Function", "namespace"]))},
               ".type"),
    lambda d: ({"type": "allowed_tools", "mode": d(not_null.filter(
        lambda v: v not in ("auto", "required")))}, ".mode"),
    lambda d: ({"type": "allowed_tools", "tools": d(not_a(list))}, ".tools"),
    lambda d: ({"type": "allowed_tools", "tools": [d(not_a(dict))]}, ".tools[0]"),
    lambda d: ({"type": "allowed_tools",
                "tools": [{"type": d(not_a(str)), "name": d(not_a(str))}]}, ".tools[0]"),
]  # fmt: skip


@st.composite
def one_wrong_choice(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    choice, suffix = draw(st.sampled_from(CHOICE_CASES))(draw)
    stream = draw(st.booleans())
    body = base(with_tools=True, stream=stream)
    body["tool_choice"] = choice
    return f"tool_choice{suffix}", body, stream


targeted = st.one_of(one_wrong_field(), one_wrong_item(), one_wrong_tool(), one_wrong_choice())


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=targeted)
async def test_one_wrong_field_is_a_400_naming_it(
    lg: Running, fake: FakeUpstream, case: tuple[str, dict[str, Any], bool]
) -> None:
    await check_refused(lg, fake, *case)


async def check_refused(
    lg: Running, fake: FakeUpstream, param: str, body: dict[str, Any], stream: bool
) -> None:
    """`body` gets a 400 whose param is `param` (or names a part of it), and nothing is sent."""
    sent = len(fake.requests)
    answer = await post(lg, dumps(body))
    error = check_answer(answer, stream)
    assert error is not None, (body, answer.raw[:500])
    assert answer.status == 400, (body, answer.raw[:500])
    assert error["param"] == param or (error["param"] or "").startswith(param + "."), (
        body,
        error,
    )
    assert len(fake.requests) == sent, body  # refused before anything was sent


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=garbage_bodies)
# Found by CI: a local shell output whose `id` is a list was looked up as a dict key (a 500).
@example(body={"model": "fake-model", "input": [{"type": "local_shell_call_output", "id": []}]})
async def test_garbage_bodies_never_get_a_server_error(lg: Running, body: dict[str, Any]) -> None:
    answer = await post(lg, dumps(body))
    check_answer(answer, body.get("stream") is True)


# -- the same, one plain wrong value per field (each its own test) ---------------------------


@pytest.mark.parametrize("with_tools", [False, True], ids=["no-tools", "tools"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("name", sorted(WRONG))
async def test_each_field_of_the_wrong_type(
    lg: Running, fake: FakeUpstream, name: str, stream: bool, with_tools: bool
) -> None:
    if name == "stream" and stream:
        pytest.skip("the stream field is the one that is wrong")
    body = base(with_tools=with_tools, stream=stream)
    body[name] = WRONG[name]
    answer = await post(lg, dumps(body))
    error = check_answer(answer, stream)
    assert error is not None and answer.status == 400, (body, answer.status, answer.raw[:500])
    assert error["param"] == name, (body, error)
    assert fake.requests == []


# -- explicit cases -----------------------------------------------------------------------


async def test_missing_model(lg: Running, fake: FakeUpstream) -> None:
    error = (await post(lg, b"{}")).error()
    assert error["param"] == "model"
    assert fake.requests == []


async def test_missing_input(lg: Running, fake: FakeUpstream) -> None:
    answer = await post(lg, dumps({"model": MODEL}))
    assert answer.status == 400, answer.raw
    assert answer.error()["param"] == "input"
    assert fake.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_background_is_refused(lg: Running, fake: FakeUpstream, stream: bool) -> None:
    body = {"model": MODEL, "input": "Hi", "background": True, "stream": stream}
    answer = await post(lg, dumps(body))
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert error["param"] == "background"
    assert "background" in error["message"]
    assert fake.requests == []


@pytest.mark.parametrize(
    "tools",
    [[{"type": "web_search"}], [FUNCTION, {"type": "web_search"}], []],
    ids=["declared", "beside-a-function", "undeclared"],
)
async def test_tool_choice_forcing_web_search(
    lg: Running, fake: FakeUpstream, tools: list[Any]
) -> None:
    body = {"model": MODEL, "input": "Hi", "tools": tools, "tool_choice": {"type": "web_search"}}
    answer = await post(lg, dumps(body))
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert error["param"] == "tool_choice"
    assert "web_search" in error["message"]
    assert fake.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_unknown_previous_response_id(lg: Running, fake: FakeUpstream, stream: bool) -> None:
    body = {"model": MODEL, "input": "Hi", "previous_response_id": "resp_x", "stream": stream}
    answer = await post(lg, dumps(body))
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_not_found"
    assert error["message"] == "Previous response with id 'resp_x' not found."
    assert fake.requests == []


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_unknown_response_id_is_404(lg: Running, method: str) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.request(method, lg.base_url + "/responses/resp_unknown") as r,
    ):
        answer = Answer(r.status, r.headers.get("Content-Type", ""), await r.read())
    assert answer.status == 404, answer.raw
    body = orjson.loads(answer.raw)
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"] == "Response with id 'resp_unknown' not found."


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_good_body_is_answered(lg: Running, fake: FakeUpstream, stream: bool) -> None:
    """The base every fuzz case spoils: answered, so a 400 there is the spoiled field's."""
    body = {**base(with_tools=True, stream=stream), "input": [USER, CALL, OUTPUT]}
    answer = await post(lg, dumps(body))
    assert answer.status == 200, answer.raw
    assert check_answer(answer, stream) is None
    assert len(fake.requests) == 1
