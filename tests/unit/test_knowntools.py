"""A tools list seen before is not parsed again, and a body always parses as orjson parses it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.knowntools import MIN_TOOLS, KnownTools

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"Tool number {i}: " + "does one careful thing, \"quoted\" é \\ " * 8,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "where [it] is {braced}"},
                    "tools": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["path"],
            },
        },
    }
    for i in range(8)
]
OTHER = [dict(TOOLS[0], function=dict(TOOLS[0]["function"], name="other")), *TOOLS[1:]]
MESSAGES = [{"role": "user", "content": "hello " * 800}]


@pytest.fixture
def known() -> Iterator[KnownTools]:
    table = KnownTools()
    yield table
    assert table.intact()


def body(tools: Any = TOOLS, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MESSAGES, "tools": tools, **extra}


def test_the_list_is_large_enough_to_be_remembered() -> None:
    assert len(orjson.dumps(TOOLS)) >= MIN_TOOLS


def test_the_second_request_gets_the_first_ones_list_object(known: KnownTools) -> None:
    first = known.parse(orjson.dumps(body(stream=True)))
    second = known.parse(orjson.dumps(body(user="u2")))
    assert second == body(user="u2")
    assert second["tools"] is first["tools"]
    assert list(second) == ["model", "messages", "tools", "user"]  # the key's place is kept
    assert known.key_of(second["tools"]) == orjson.dumps(TOOLS)


def test_another_list_is_parsed_and_remembered_beside_the_first(known: KnownTools) -> None:
    a = known.parse(orjson.dumps(body()))["tools"]
    b = known.parse(orjson.dumps(body(OTHER)))["tools"]
    assert b == OTHER and b is not a
    assert known.parse(orjson.dumps(body(OTHER)))["tools"] is b
    assert known.parse(orjson.dumps(body()))["tools"] is a


def test_spaced_json_is_remembered_from_its_second_sighting(known: KnownTools) -> None:
    raw = json.dumps(body()).encode()  # ", " and ": " separators, non-ASCII escaped
    first = known.parse(raw)
    second = known.parse(raw)
    third = known.parse(json.dumps(body(user="x")).encode())
    assert first == second == body() and third == body(user="x")
    assert second["tools"] is not first["tools"]  # the first sighting is not scanned
    assert third["tools"] is second["tools"]


def test_a_small_body_or_list_is_parsed_as_it_is(known: KnownTools) -> None:
    for case in (body(TOOLS[:6], messages=[]), body(TOOLS[:3])):  # a small body; a small list
        raw = orjson.dumps(case)
        assert known.parse(raw)["tools"] is not known.parse(raw)["tools"]


def _learnt(known: KnownTools) -> list[Any]:
    tools: list[Any] = known.parse(orjson.dumps(body()))["tools"]
    assert known.parse(orjson.dumps(body()))["tools"] is tools
    return tools


def _same(known: KnownTools, raw: bytes) -> Any:
    """What `known` gives for `raw`, checked against orjson (the value, or the error)."""
    try:
        expected = orjson.loads(raw)
    except orjson.JSONDecodeError:
        with pytest.raises(orjson.JSONDecodeError):
            known.parse(raw)
        return None
    got = known.parse(raw)
    assert got == expected
    return got


def test_the_same_bytes_elsewhere_in_the_body_are_not_taken_for_its_tools(
    known: KnownTools,
) -> None:
    tools = _learnt(known)
    text = orjson.dumps(TOOLS)
    nested = b'{"model":"m","metadata":{"tools":%s},"messages":%s}' % (text, orjson.dumps(MESSAGES))
    assert _same(known, nested)["metadata"]["tools"] is not tools
    both = b'{"metadata":{"tools":%s},"tools":[],"messages":%s}' % (text, orjson.dumps(MESSAGES))
    assert _same(known, both)["tools"] == []
    said = [{"role": "user", "content": '"tools":' + text.decode()}]
    in_text = orjson.dumps(body([], messages=said))
    assert _same(known, in_text)["tools"] == []


def test_a_repeated_tools_key_means_what_it_means_to_orjson(known: KnownTools) -> None:
    _learnt(known)
    text, rest = orjson.dumps(TOOLS), orjson.dumps(MESSAGES)
    assert _same(known, b'{"tools":%s,"tools":[],"messages":%s}' % (text, rest))["tools"] == []
    assert _same(known, b'{"tools":[],"tools":%s,"messages":%s}' % (text, rest))["tools"] == TOOLS


def test_a_broken_body_around_a_known_list_fails_as_orjson_fails(known: KnownTools) -> None:
    _learnt(known)
    good = orjson.dumps(body())
    at = good.index(b'"tools"')
    for broken in (
        good[:-1],  # cut short
        good + b"x",  # trailing garbage
        good[:at] + good[at:].replace(b"]", b"", 1)[:-1] + b"}",
        b"[" + good + b"]",  # not an object
        good.replace(b'"tools":', b'"tools" ', 1),
        good[: at + 9] + b"}",  # the list cut off
    ):
        _same(known, broken)


def test_a_list_changed_by_one_byte_is_parsed_anew(known: KnownTools) -> None:
    tools = _learnt(known)
    changed = orjson.dumps(body()).replace(b"tool_7", b"tool_8")
    got = _same(known, changed)
    assert got["tools"] is not tools and got["tools"][7]["function"]["name"] == "tool_8"


def test_keys_of_lists_not_parsed_here_are_serialised_and_kept_for_the_same_list(
    known: KnownTools,
) -> None:
    mine = [dict(t) for t in TOOLS]
    assert known.key_of(mine) == orjson.dumps(mine)
    mine.append({"type": "function", "function": {"name": "late"}})  # a new list would be new
    assert known.key_of(mine) == orjson.dumps(mine[:-1])  # kept by identity, as documented
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    assert known.key_of(deep) is None


def test_a_list_too_deep_to_write_is_never_remembered(known: KnownTools) -> None:
    deep: Any = {}
    for _ in range(300):
        deep = {"d": deep}
    tools = [*TOOLS, {"type": "function", "function": {"name": "d", "parameters": deep}}]
    raw = b'{"messages":%s,"tools":%s}' % (orjson.dumps(MESSAGES), json.dumps(tools).encode())
    first, second = known.parse(raw), known.parse(raw)
    assert first == second == orjson.loads(raw) and len(first["tools"]) == len(TOOLS) + 1
    assert second["tools"] is not first["tools"]


def test_intact_notices_a_remembered_list_changed_in_place() -> None:
    known = KnownTools()
    tools = _learnt(known)
    tools[0]["function"]["name"] = "changed"
    assert not known.intact()


def test_the_table_forgets_the_oldest_list() -> None:
    known = KnownTools(entries=2)
    lists = [[dict(t, id=i) for t in TOOLS] for i in range(3)]
    got = [known.parse(orjson.dumps(body(tools)))["tools"] for tools in lists]
    assert known.parse(orjson.dumps(body(lists[2])))["tools"] is got[2]
    assert known.parse(orjson.dumps(body(lists[0])))["tools"] is not got[0]  # forgotten
    assert known.intact()


PIECES = st.sampled_from(
    [b'"tools":', b"%T", b"[", b"]", b"{", b"}", b",", b":", b'"x"', b" ", b"1", b'"\\"', b"\\"]
)


@given(st.lists(PIECES, max_size=12), st.booleans())
def test_any_text_around_a_known_list_parses_as_orjson_parses_it(
    pieces: list[bytes], lead: bool
) -> None:
    known = KnownTools()
    _learnt(known)
    text = orjson.dumps(TOOLS)
    raw = b"".join(text if p == b"%T" else p for p in pieces)
    prefix = b'{"messages":%s,' % orjson.dumps(MESSAGES) if lead else b"{"
    _same(known, prefix + raw + b"}")
    _same(known, prefix + b'"tools":' + text + b"," + raw + b'"k":1}')
    _same(known, prefix + raw + b'"tools":' + text + b"}")


def _translate(tools: list[Any]) -> list[Any]:
    return [{"translated": t["function"]["name"]} for t in tools]


def test_a_list_made_from_a_known_one_is_made_once_and_shared(known: KnownTools) -> None:
    tools = _learnt(known)
    made = known.derived(tools, _translate)
    assert made == _translate(TOOLS)
    assert known.derived(known.parse(orjson.dumps(body()))["tools"], _translate) is made
    assert known.shared(made) and known.key_of(made) == orjson.dumps(made)
    own = [dict(t) for t in TOOLS]  # not from `parse`: made every time, never shared
    assert known.derived(own, _translate) is not known.derived(own, _translate)
    assert not known.shared(known.derived(own, _translate))


def test_a_translation_that_fails_is_tried_again(known: KnownTools) -> None:
    tools = _learnt(known)
    calls: list[int] = []

    def failing(source: list[Any]) -> list[Any]:
        calls.append(1)
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError):
            known.derived(tools, failing)
    assert len(calls) == 2


def test_a_forgotten_list_takes_what_was_made_from_it_along() -> None:
    known = KnownTools(entries=1)
    tools = _learnt(known)
    made = known.derived(tools, _translate)
    known.parse(orjson.dumps(body(OTHER)))
    assert not known.shared(tools) and not known.shared(made)
    made[0]["translated"] = "changed"  # no longer remembered: nothing to keep intact
    assert known.intact()


def test_intact_covers_the_lists_made_from_remembered_ones() -> None:
    known = KnownTools()
    made = known.derived(_learnt(known), _translate)
    made[0]["translated"] = "changed"
    assert not known.intact()


def test_a_list_derived_from_a_derived_one_is_kept_and_forgotten_with_its_root() -> None:
    # A front's translation of an agent's list, then its sanitised form: both made once and
    # keyed, and gone (their ids no longer answered for) when the parsed list is forgotten.
    known = KnownTools(entries=1)
    tools = known.parse(orjson.dumps(body()))["tools"]

    def first(t: list[Any]) -> list[Any]:
        return [dict(x, kind="first") for x in t]

    def second(t: list[Any]) -> list[Any]:
        return [dict(x, kind="second") for x in t]

    made = known.derived(tools, first)
    again = known.derived(made, second)
    assert known.derived(tools, first) is made and known.derived(made, second) is again
    assert known.stored_key(again) == orjson.dumps(again)
    assert known.intact()
    known.parse(orjson.dumps(body(OTHER)))  # the only entry is now another list's
    assert known.stored_key(made) is None and known.stored_key(again) is None
    assert not known.shared(again)
