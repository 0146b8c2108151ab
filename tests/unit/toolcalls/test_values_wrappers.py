"""Calls read from a parsed value through its wrappers (`tool_calls`, `tool_call`, `function`):
the loop over a stack reads what the recursion it replaced read, and any depth of nesting."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.toolcalls.spans import RawCall, Schemas
from proxy.toolcalls.values import calls_from_value, json_calls, tool_props

SCHEMAS: Schemas = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
    "search": {"type": "object", "properties": {"q": {"type": "string"}}},
}


# -- the recursion the loop replaced (proxy/toolcalls/values.py before issue 17's last step) ------


def _reference(value: Any, repaired: bool, schemas: Schemas, strict: bool) -> list[RawCall] | None:
    if isinstance(value, dict):
        return _reference_obj(value, repaired, schemas, strict)
    if isinstance(value, list) and value:
        calls: list[RawCall] = []
        for item in value:
            found = None
            if isinstance(item, dict):
                found = _reference_obj(item, repaired, schemas, strict)
            if not found:
                if strict:
                    return None
                continue
            calls.extend(found)
        return calls or None
    return None


def _reference_obj(
    obj: dict[str, Any], repaired: bool, schemas: Schemas, strict: bool
) -> list[RawCall] | None:
    if isinstance(obj.get("tool_calls"), list) and len(obj) == 1:
        return _reference(obj["tool_calls"], repaired, schemas, strict)
    if isinstance(obj.get("tool_call"), dict) and len(obj) == 1:
        return _reference_obj(obj["tool_call"], repaired, schemas, strict)
    if strict and obj.get("type", "function") != "function":
        return None
    if isinstance(obj.get("function"), dict):
        inner = {k: v for k, v in obj.items() if k not in ("function", "type", "id")}
        return _reference_obj({**inner, **obj["function"]}, repaired, schemas, strict)
    if len(obj) == 1:
        ((key, val),) = obj.items()
        if key in schemas and isinstance(val, dict):
            fits = bool(val) and set(val) <= set(tool_props(schemas, key))
            return [(key, val, repaired)] if fits else None
    # `_named_call` is shared: the loop changed only how wrappers are opened.
    from proxy.toolcalls.values import _named_call

    return _named_call(obj, repaired, strict)


# -- values shaped like calls and their wrappers, and like data ----------------------------------

NAMES = st.sampled_from(["get_weather", "search", "other", "", " search "])
ARGS = st.one_of(
    st.just({"city": "Paris"}), st.just({"q": "x"}), st.just({}), st.none(), st.just(""),
    st.just({"type": "object", "properties": {}}), st.just([1]),
)
LEAVES = st.one_of(
    st.builds(lambda n, a: {"name": n, "arguments": a}, NAMES, ARGS),
    st.builds(lambda n, a: {"name": n, "parameters": a, "arguments": {}}, NAMES, ARGS),
    st.builds(lambda n, a: {"tool": n, "args": a, "id": "c1"}, NAMES, ARGS),
    st.builds(lambda n, a: {n: a}, NAMES, ARGS),
    st.just({"config": True}),
    st.integers(),
    st.text(max_size=3),
    st.none(),
)


def _wrap(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda v: {"tool_calls": v}, st.lists(inner, max_size=3)),
        st.builds(lambda v: {"tool_call": v}, inner),
        st.builds(lambda v, t: {"function": v, "type": t, "id": "x"}, inner,
                  st.sampled_from(["function", "tool"])),
        st.builds(lambda v: {"function": v, "name": "search"}, inner),
        st.lists(inner, max_size=3),
    )


VALUES = st.recursive(LEAVES, _wrap, max_leaves=20)


@settings(max_examples=2000, deadline=None)
@given(VALUES, st.booleans(), st.booleans())
def test_wrappers_are_opened_as_the_recursion_opened_them(
    value: Any, repaired: bool, strict: bool
) -> None:
    assert calls_from_value(value, repaired, SCHEMAS, strict) == _reference(
        value, repaired, SCHEMAS, strict
    )


def test_wrappers_nested_past_any_recursion_limit_are_read() -> None:
    """A value parsed from JSON nests at most 1,024 levels, but a lenient repair nests deeper:
    no depth is too deep for a loop."""
    value: Any = {"name": "search", "arguments": {"q": "deep"}}
    for k in range(100_000):
        value = {"tool_calls": [value]} if k % 2 else {"tool_call": value}
    assert calls_from_value(value, False, SCHEMAS) == [("search", {"q": "deep"}, False)]
    assert calls_from_value([value, {"name": "x"}], False, SCHEMAS, strict=True) is None


def test_a_listed_call_in_text_is_read_through_its_wrappers() -> None:
    text = '{"tool_calls": [{"function": {"name": "search", "arguments": {"q": "a"}}, "id": "1"},' \
        ' {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}, 3]}'
    assert json_calls(text, SCHEMAS) == [
        ("search", {"q": "a"}, False), ("get_weather", {"city": "Paris"}, False)]
    assert json_calls(text, SCHEMAS, strict=True) is None  # `3` is no call: with no marker, data
