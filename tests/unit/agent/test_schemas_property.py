"""Properties of sanitise and relax over generated schemas (hypothesis).

The generator mixes what agents really send (objects, arrays, unions with null, type lists,
definitions and refs, patterns with and without lookaround, formats) with the junk the sanitiser
must survive (bare type names, unknown types, empty enums, external and missing refs, cycles).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.agent.schemas import (
    MAX_DEPTH,
    SchemaContradiction,
    SchemaError,
    apply_to_request,
    clear_caches,
    find_contradictions,
    relax,
    sanitise,
)

SETTINGS = settings(max_examples=150, deadline=None)

# Schema positions, written out independently of the module under test.
ONE_SCHEMA = {"items", "additionalProperties", "contains", "if", "then", "else", "not",
              "propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties",
              "contentSchema"}
SCHEMA_MAPS = {"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"}
SCHEMA_LISTS = {"anyOf", "oneOf", "allOf", "prefixItems"}

NAMES = st.sampled_from(["path", "format", "pattern", "type", "query", "items", "limit", "a b"])
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
PATTERNS = st.sampled_from(["^[a-z]+$", "^(?=a).*$", "(?<!x)y", "^\\d{2,4}$", "^(abc$", "x|y"])
FORMATS = st.sampled_from(["date-time", "uri", "email", "weird"])
REFS = st.sampled_from([
    "#/$defs/A", "#/$defs/B", "#/$defs/C", "#/definitions/D", "#/$defs/missing",
    "https://example.com/s.json", "#/properties/path", "#",
])
SMALL = st.integers(min_value=0, max_value=12)
# Junk inside type lists: objects and lists are unhashable, so cannot be looked up as names.
# Sanitise refuses such a schema (see test_junk_in_a_type_list_is_refused_wherever_it_is).
JUNK_TYPES = st.fixed_dictionaries({"type": st.lists(
    st.one_of(TYPES, st.just({}), st.just(["string"]), st.none()), min_size=1, max_size=3,
).filter(lambda kinds: not all(isinstance(k, str) for k in kinds))})
HUGE = st.sampled_from([1e20, 1e21, 2.0**63, 2.0**64, 1e308, 18446744073709551615])

leaf = st.one_of(
    TYPES,
    st.booleans(),
    st.just("widget"),
    st.just(7),
    st.builds(lambda r, d: {"$ref": r, "description": d} if d else {"$ref": r},
              REFS, st.sampled_from(["", "sibling"])),
    st.fixed_dictionaries({"type": st.just("string")}, optional={
        "pattern": PATTERNS, "format": FORMATS, "minLength": SMALL, "maxLength": SMALL,
        "enum": st.lists(st.sampled_from(["a", "b", "(?=x)"]), max_size=3),
        "description": st.just("text with a pattern: (?!x)"),
    }),
    st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])}, optional={
        "minimum": SMALL, "maximum": SMALL, "default": SMALL,
        "exclusiveMinimum": st.booleans(),
    }),
    st.fixed_dictionaries({"type": st.lists(TYPES, min_size=1, max_size=3)}, optional={
        "maxLength": SMALL, "pattern": PATTERNS, "minimum": SMALL, "format": FORMATS,
    }),
    st.fixed_dictionaries({"type": st.sampled_from(["foo", 5])}),
    # Counts beyond 64 bits, as orjson parses them (floats).
    st.fixed_dictionaries({"type": st.sampled_from(["string", "array", "object"])}, optional={
        "maxLength": HUGE, "minLength": HUGE, "minItems": HUGE, "maxItems": SMALL,
        "minProperties": HUGE, "maxProperties": HUGE,
    }),
    st.fixed_dictionaries({"enum": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2)}),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object")}, optional={
            "properties": st.dictionaries(NAMES, children, max_size=4),
            "required": st.lists(NAMES, max_size=4),
            "additionalProperties": st.one_of(st.booleans(), children),
            "minProperties": SMALL, "maxProperties": SMALL,
        }),
        st.fixed_dictionaries({"type": st.just("array")}, optional={
            "items": st.one_of(children, st.lists(children, max_size=2)),
            "minItems": SMALL, "maxItems": SMALL, "additionalItems": children,
        }),
        st.builds(lambda k, bs, null: {k: bs + ([{"type": "null"}] if null else [])},
                  st.sampled_from(["anyOf", "oneOf", "allOf"]),
                  st.lists(children, min_size=0, max_size=3), st.booleans()),
        st.fixed_dictionaries({"type": st.lists(TYPES, min_size=2, max_size=3)}, optional={
            "properties": st.dictionaries(NAMES, children, max_size=2),
            "items": children, "anyOf": st.lists(children, min_size=1, max_size=2),
        }),
        st.fixed_dictionaries({"not": children, "description": st.just("d")}),
    )


schemas = st.recursive(leaf, _compound, max_leaves=12)


def _root(body: Any, defs: dict[str, Any], old_defs: dict[str, Any], ref: bool) -> Any:
    if not isinstance(body, dict):
        return body
    root = {"$ref": "#/$defs/A"} if ref else dict(body)
    if defs:
        root["$defs"] = defs
    if old_defs:
        root["definitions"] = old_defs
    return root


documents = st.builds(
    _root,
    schemas,
    st.dictionaries(st.sampled_from(["A", "B", "C"]), schemas, max_size=3),
    st.dictionaries(st.just("D"), schemas, max_size=1),
    st.booleans(),
)


def _schema_children(node: dict[str, Any]) -> list[Any]:
    kids: list[Any] = []
    for key, value in node.items():
        if key in ONE_SCHEMA:
            kids.extend(value if isinstance(value, list) else [value])
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            kids.extend(value.values())
        elif key in SCHEMA_LISTS and isinstance(value, list):
            kids.extend(value)
    return kids


def _nodes(schema: Any) -> list[dict[str, Any]]:
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.append(node)
            stack.extend(_schema_children(node))
    return found


def _only_pattern_and_format_removed(before: Any, after: Any) -> None:
    if not isinstance(before, dict):
        assert after == before
        return
    assert set(after) == set(before) - {"pattern", "format"}
    for key, value in after.items():
        if key in ONE_SCHEMA and isinstance(value, list):
            assert len(value) == len(before[key])
            for b, a in zip(before[key], value, strict=True):
                _only_pattern_and_format_removed(b, a)
        elif key in ONE_SCHEMA:
            _only_pattern_and_format_removed(before[key], value)
        elif key in SCHEMA_MAPS:
            assert list(value) == list(before[key])
            for name in value:
                _only_pattern_and_format_removed(before[key][name], value[name])
        elif key in SCHEMA_LISTS:
            assert len(value) == len(before[key])
            for b, a in zip(before[key], value, strict=True):
                _only_pattern_and_format_removed(b, a)
        else:
            assert value == before[key]


@SETTINGS
@given(documents)
def test_sanitise_is_idempotent_and_does_not_mutate(doc: Any) -> None:
    clear_caches()
    before = copy.deepcopy(doc)
    once = sanitise(doc)
    assert doc == before
    assert sanitise(copy.deepcopy(once)) == once
    assert sanitise(copy.deepcopy(once), strict_safe=False) == once


@SETTINGS
@given(documents)
def test_strict_safe_sanitise_is_idempotent_and_adds_no_nullable(doc: Any) -> None:
    once = sanitise(doc, strict_safe=True)
    assert sanitise(copy.deepcopy(once), strict_safe=True) == once
    assert not any("nullable" in n for n in _nodes(once))
    jsonschema.Draft202012Validator.check_schema(once)


@SETTINGS
@given(documents)
def test_sanitised_output_is_a_valid_2020_12_schema_every_converter_accepts(doc: Any) -> None:
    out = sanitise(doc)
    jsonschema.Draft202012Validator.check_schema(out)
    assert out["type"] == "object" and isinstance(out["properties"], dict)
    assert not {"allOf", "anyOf", "oneOf", "enum", "not", "$ref"} & set(out)
    assert set(out.get("required", [])) <= set(out["properties"])
    assert find_contradictions(out) == []
    for node in _nodes(out):
        assert "not" not in node
        if "$ref" in node:
            assert set(node) == {"$ref"}
            container, name = node["$ref"][2:].split("/")
            assert name in out[container]
        if "type" in node:
            assert node["type"] in {"string", "integer", "number", "boolean", "array",
                                    "object", "null"}
        if "enum" in node:
            assert isinstance(node["enum"], list) and node["enum"]
        if "pattern" in node:
            assert "(?=" not in node["pattern"] and "(?<!" not in node["pattern"]


@SETTINGS
@given(documents)
def test_relax_removes_every_pattern_and_format_and_nothing_else(doc: Any) -> None:
    sane = sanitise(doc)
    relaxed = relax(orjson.loads(orjson.dumps(sane)))
    _only_pattern_and_format_removed(sane, relaxed)
    assert not any("pattern" in n or "format" in n for n in _nodes(relaxed))


@SETTINGS
@given(st.lists(documents, min_size=1, max_size=3), st.booleans())
def test_apply_to_request_never_mutates_and_sends_the_sanitised_form(
    params: list[Any], relaxed: bool
) -> None:
    body = {"tools": [{"type": "function", "function": {"name": f"t{i}", "parameters": p}}
                      for i, p in enumerate(params)]}
    before = copy.deepcopy(body)
    result = apply_to_request(body, mode="sanitise", relaxed=relaxed)
    assert body == before
    for sent, p in zip(result.body["tools"], params, strict=True):
        expected = relax(sanitise(p)) if relaxed else sanitise(p)
        assert sent["function"]["parameters"] == expected


def _wrap(inner: Any, how: str) -> Any:
    if how == "properties":
        return {"type": "object", "properties": {"a": inner}}
    if how == "items":
        return {"type": "array", "items": inner}
    if how == "anyOf":
        return {"anyOf": [inner, {"type": "null"}]}
    return {"type": ["array", "null"], "prefixItems": [inner]}


WRAPS = st.sampled_from(["properties", "items", "anyOf", "prefixItems"])
# Depths drawn evenly, so schemas on both sides of MAX_DEPTH are as common as shallow ones.
nestings = st.tuples(
    documents, st.integers(0, 60).flatmap(lambda n: st.lists(WRAPS, min_size=n, max_size=n))
)


def _depth(schema: Any) -> int:
    """How many schema objects nest inside one another at schema positions (the root is 1)."""
    if not isinstance(schema, dict):
        return 0
    return 1 + max((_depth(kid) for kid in _schema_children(schema)), default=0)


@SETTINGS
@given(nestings, st.sampled_from(["sanitise", "passthrough"]), st.booleans())
def test_any_nesting_is_sent_encodable_or_refused_as_too_deep(
    nesting: tuple[Any, list[str]], mode: str, relaxed: bool
) -> None:
    inner, wraps = nesting
    schema = inner
    for how in wraps:
        schema = _wrap(schema, how)
    body = {"tools": [{"type": "function", "function": {"name": "t", "parameters": schema}}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    try:
        result = apply_to_request(orjson.loads(orjson.dumps(body)), mode=mode, relaxed=relaxed)
    except SchemaContradiction:
        assert mode == "passthrough" and find_contradictions(schema)
        return
    except SchemaError as err:
        assert (err.status, err.param) == (400, "tools[0].function.parameters")
        assert "nested too deeply" in err.message
        # Passthrough judges the schema as written; sanitising (in sanitise mode, and before
        # relaxing in either mode) may nest deeper by inlining local pointers, so it can refuse
        # a shallower one.
        assert _depth(schema) > MAX_DEPTH or mode == "sanitise" or relaxed
        return
    orjson.dumps(result.body)  # every number and level can be encoded again
    # Every wrapper is a walked schema position, in either mode.
    assert len(wraps) <= MAX_DEPTH  # 32 wrappers around a non-schema leaf are 32 levels
    assert mode == "sanitise" or _depth(schema) <= MAX_DEPTH


@SETTINGS
@given(JUNK_TYPES, st.lists(st.sampled_from(["items", "properties", "anyOf"]), max_size=5),
       st.booleans())
def test_junk_in_a_type_list_is_refused_wherever_it_is(
    junk: dict[str, Any], wraps: list[str], relaxed: bool
) -> None:
    schema: Any = junk
    for how in wraps:
        schema = _wrap(schema, how)
    body = {"tools": [{"type": "function", "function": {"name": "t", "parameters": schema}}]}
    try:
        apply_to_request(orjson.loads(orjson.dumps(body)), mode="sanitise", relaxed=relaxed)
    except SchemaError as err:
        assert (err.status, err.param) == (400, "tools[0].function.parameters")
        assert "'type' list" in err.message
    else:
        raise AssertionError("a type list of non-names was sent")
    sent = apply_to_request(orjson.loads(orjson.dumps(body)), mode="passthrough", relaxed=False)
    assert sent.body == body  # passthrough sends it as written
