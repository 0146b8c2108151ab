"""Every sanitise (BEHAVIOUR.md 3.2) and relax (3.3) rule, and how request bodies get schemas."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from proxy.agent import schemas
from proxy.agent.schemas import (
    MAX_DEPTH,
    MAX_NODES,
    SchemaContradiction,
    SchemaError,
    apply_to_request,
    clear_caches,
    find_contradictions,
    pattern_ok,
    relax,
    sanitise,
)
from proxy.errors import ProxyError

EMPTY = {"type": "object", "properties": {}}


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_caches()


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def prop(schema: Any) -> Any:
    """Sanitise `schema` as the one property `p` of a root object; return what `p` became."""
    return sanitise(obj(p=schema))["properties"]["p"]


# ------------------------------------------------------------------ 3.2 positions and types


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("string", {"type": "string"}),
        ("integer", {"type": "integer"}),
        ("null", {"type": "null"}),
        ("object", EMPTY),
        ("widget", EMPTY),
        (5, EMPTY),
        ([1, 2], EMPTY),
        (None, EMPTY),
        (True, True),
        (False, False),
    ],
)
def test_bare_values_at_a_schema_position(given: Any, expected: Any) -> None:
    assert prop(given) == expected


def test_bare_type_names_in_items_and_additional_properties() -> None:
    assert prop({"type": "array", "items": "string"}) == {
        "type": "array", "items": {"type": "string"},
    }
    assert prop({"type": "object", "additionalProperties": "number"}) == {
        "type": "object", "additionalProperties": {"type": "number"}, "properties": {},
    }


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["string", "null"], {"type": "string", "nullable": True}),
        (["null", "integer"], {"type": "integer", "nullable": True}),
        (["string"], {"type": "string"}),
        (["null"], {"type": "null"}),
        (["string", "string", "null"], {"type": "string", "nullable": True}),
        (
            ["string", "integer"],
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        ),
        (
            ["string", "integer", "null"],
            {"anyOf": [{"type": "string"}, {"type": "integer"}], "nullable": True},
        ),
        (["widget", "string"], {"type": "string"}),
        ([], {}),
    ],
)
def test_type_lists(given: list[str], expected: dict[str, Any]) -> None:
    assert prop({"type": given}) == expected


def test_type_list_split_keeps_each_types_constraints_in_its_branch() -> None:
    given = {
        "type": ["string", "array", "null"],
        "description": "one or many",
        "maxLength": 5,
        "items": {"type": "string"},
        "minItems": 1,
    }
    assert prop(given) == {
        "description": "one or many",
        "anyOf": [
            {"type": "string", "maxLength": 5},
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
        ],
        "nullable": True,
    }


def test_type_list_with_object_gets_properties_in_its_branch() -> None:
    assert prop({"type": ["object", "string"]}) == {
        "anyOf": [{"type": "object", "properties": {}}, {"type": "string"}],
    }


@pytest.mark.parametrize("bad", ["widget", 5, {"x": 1}])
def test_unknown_or_malformed_type_is_dropped(bad: Any) -> None:
    # llama.cpp: "unrecognized type foo" / "type must be a string or an array of strings"
    assert prop({"type": bad, "description": "d"}) == {"description": "d"}


def test_nullable_type_list_keeps_constraints() -> None:
    given = {"type": ["string", "null"], "maxLength": 10, "pattern": "^[a-z]+$", "default": None}
    assert prop(given) == {
        "type": "string", "maxLength": 10, "pattern": "^[a-z]+$", "default": None,
        "nullable": True,
    }


# ------------------------------------------------------------------ 3.2 unions


def test_any_of_one_branch_plus_null_collapses_with_constraints_kept() -> None:
    given = {
        "anyOf": [{"type": "string", "minLength": 2, "maxLength": 8}, {"type": "null"}],
        "default": None,
        "title": "Nickname",
    }
    assert prop(given) == {
        "type": "string", "minLength": 2, "maxLength": 8, "default": None, "title": "Nickname",
        "nullable": True,
    }


def test_one_of_collapses_too_and_parent_annotations_win() -> None:
    given = {
        "oneOf": [{"type": "null"}, {"type": "integer", "description": "inner"}],
        "description": "outer",
    }
    assert prop(given) == {"type": "integer", "description": "outer", "nullable": True}


def test_collapsed_object_branch_keeps_its_properties() -> None:
    given = {"anyOf": [{"type": "object", "properties": {"a": "string"}}, {"type": "null"}]}
    assert prop(given) == {
        "type": "object", "properties": {"a": {"type": "string"}}, "nullable": True,
    }


def test_union_with_two_real_branches_is_kept() -> None:
    given = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    assert prop(given) == given


def test_union_whose_only_real_branch_is_a_ref_is_kept() -> None:
    # Collapsing would give {"$ref", "nullable"} and the ref rule would strip `nullable`.
    schema = {
        "type": "object",
        "properties": {"m": {"anyOf": [{"$ref": "#/$defs/M"}, {"type": "null"}]}},
        "$defs": {"M": {"type": "integer"}},
    }
    assert sanitise(schema) == schema


# ------------------------------------------------------------------ 3.2 patterns


@pytest.mark.parametrize(
    "pattern",
    ["^(?=a)abc$", "^(?!-).+$", "(?<=x)y", "^.*(?<!\\.)$", "^\\\\(?=a)$"],
)
def test_lookaround_patterns_are_removed(pattern: str) -> None:
    assert prop({"type": "string", "pattern": pattern, "maxLength": 3}) == {
        "type": "string", "maxLength": 3,
    }


@pytest.mark.parametrize("pattern", ["^[a-z]+$", "abc", "^\\(?=$", "^(?:ab)+$", "^\\d{3}$"])
def test_other_patterns_are_kept(pattern: str) -> None:
    assert prop({"type": "string", "pattern": pattern}) == {"type": "string", "pattern": pattern}


@pytest.mark.parametrize("pattern", ["^(abc$", "\\p{L}+", 5])
def test_patterns_no_converter_can_compile_are_removed(pattern: Any) -> None:
    # "^(abc$" gives llama.cpp's "Invalid pattern ^(abc$: unbalanced parentheses" 400.
    assert not pattern_ok(pattern)
    assert prop({"type": "string", "pattern": pattern}) == {"type": "string"}


# ------------------------------------------------------------------ 3.2 objects and refs


def test_object_without_properties_gets_empty_properties() -> None:
    assert prop({"type": "object", "description": "free-form"}) == {
        "type": "object", "description": "free-form", "properties": {},
    }


def test_ref_siblings_are_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "description": "x", "nullable": True}},
        "$defs": {"A": {"type": "string"}},
    }
    assert sanitise(schema) == {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "string"}},
    }


def test_root_local_ref_is_inlined_and_its_definition_pruned() -> None:
    schema = {
        "$ref": "#/definitions/Args",
        "definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}},
                                 "required": ["q"]}},
        "$schema": "http://json-schema.org/draft-07/schema#",
    }
    assert sanitise(schema) == {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
    }


def test_root_ref_to_a_recursive_definition_keeps_the_definition() -> None:
    node = {"type": "object", "properties": {
        "name": {"type": "string"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    }}
    schema = {"$ref": "#/$defs/Node", "$defs": {"Node": node}}
    assert sanitise(schema) == {**node, "$defs": {"Node": node}}


@pytest.mark.parametrize(
    "ref",
    ["https://example.com/x.json", "other.json#/defs/a", "#/$defs/nope", "#anchor", 7],
)
def test_external_missing_and_odd_refs_become_empty_objects(ref: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}, "$defs": {"X": {}}}
    assert sanitise(schema) == {"type": "object", "properties": {"a": EMPTY}}


@pytest.mark.parametrize("ref", ["https://example.com/x.json", "#/$defs/nope"])
def test_bad_root_ref_gives_an_empty_object(ref: str) -> None:
    assert sanitise({"$ref": ref, "$defs": {"A": {"type": "string"}}}) == EMPTY


def test_cyclic_refs_become_empty_objects() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "s": {"$ref": "#/$defs/Self"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"},
                  "Self": {"$ref": "#/$defs/Self"}},
    }
    assert sanitise(schema) == {"type": "object", "properties": {"a": EMPTY, "s": EMPTY}}


def test_cyclic_root_ref_gives_an_empty_object() -> None:
    schema = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"},
                                             "B": {"$ref": "#/$defs/A"}}}
    assert sanitise(schema) == EMPTY


def test_ref_chains_through_definitions_are_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "integer"}},
    }
    assert sanitise(schema) == schema


def test_pointer_refs_outside_definitions_are_inlined() -> None:
    schema = {
        "type": "object",
        "properties": {
            "src": {"type": "string", "minLength": 1},
            "dst": {"$ref": "#/properties/src"},
            "me": {"$ref": "#"},
        },
    }
    inner_me = {"type": "object", "properties": {
        "src": {"type": "string", "minLength": 1},
        "dst": {"type": "string", "minLength": 1},
        "me": EMPTY,  # the recursion is cut after one level
    }}
    assert sanitise(schema) == {"type": "object", "properties": {
        "src": {"type": "string", "minLength": 1},
        "dst": {"type": "string", "minLength": 1},
        "me": inner_me,
    }}


def test_escaped_definition_names_resolve() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/a~1b%20c"}},
              "$defs": {"a/b c": {"type": "string"}}}
    assert sanitise(schema) == schema


def test_definitions_are_pruned_transitively() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"type": "array", "items": {"$ref": "#/$defs/B"}},
            "B": {"type": "string"},
            "C": {"type": "object", "properties": {"d": {"$ref": "#/$defs/D"}}},
            "D": {"type": "integer"},
        },
        "definitions": {"Old": {"type": "string"}},
    }
    assert sanitise(schema) == {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"type": "array", "items": {"$ref": "#/$defs/B"}},
            "B": {"type": "string"},
        },
    }


def test_nested_definitions_and_not_are_dropped() -> None:
    given = {"type": "object", "properties": {"x": {"type": "string"}},
             "$defs": {"Y": {"type": "string"}}, "not": {"required": ["x"]}}
    assert prop(given) == {"type": "object", "properties": {"x": {"type": "string"}}}


# ------------------------------------------------------------------ 3.2 root


def test_root_all_of_merges_properties_and_unions_required() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"$ref": "#/$defs/B"},
        ],
        "$defs": {"B": {"type": "object", "properties": {"b": {"type": "integer"},
                                                         "a": {"type": "number"}},
                        "required": ["b", "a"]}},
    }
    assert sanitise(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }


def test_root_any_of_keeps_only_names_every_branch_requires() -> None:
    schema = {
        "anyOf": [
            {"type": "object", "properties": {"op": {"const": "copy"}, "src": {"type": "string"},
                                              "dst": {"type": "string"}},
             "required": ["op", "src", "dst"]},
            {"type": "object", "properties": {"op": {"const": "delete"},
                                              "src": {"type": "string"}},
             "required": ["src", "op"]},
        ],
    }
    assert sanitise(schema) == {
        "type": "object",
        "properties": {"op": {"const": "copy"}, "src": {"type": "string"},
                       "dst": {"type": "string"}},
        "required": ["op", "src"],
    }


def test_root_one_of_plus_own_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "oneOf": [{"required": ["name"], "properties": {"name": {"type": "string"}}},
                  {"required": ["email"], "properties": {"email": {"type": "string"}}}],
    }
    assert sanitise(schema) == {
        "type": "object",
        "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                       "email": {"type": "string"}},
        "required": ["id"],
    }


def test_root_loses_enum_not_and_nullable_and_gains_type_and_properties() -> None:
    schema = {"type": ["object", "null"], "enum": [{}], "not": {"required": ["x"]},
              "description": "args"}
    assert sanitise(schema) == {"description": "args", "type": "object", "properties": {}}


def test_root_required_keeps_only_properties() -> None:
    schema = {"required": ["a", "ghost", "a", 3], "properties": {"a": {"type": "string"}}}
    assert sanitise(schema) == {
        "required": ["a"], "properties": {"a": {"type": "string"}}, "type": "object",
    }


@pytest.mark.parametrize("root", ["object", "string", 5, None, [], True, {"type": "string"}])
def test_non_object_roots_become_empty_objects(root: Any) -> None:
    assert sanitise(root) == EMPTY


def test_non_object_root_kept_when_asked() -> None:
    schema = {"type": "array", "items": {"type": ["string", "null"]}}
    assert sanitise(schema, root_object=False) == {
        "type": "array", "items": {"type": "string", "nullable": True},
    }


# ------------------------------------------------------------------ 3.2 data untouched


def test_data_keywords_and_property_names_are_untouched() -> None:
    data = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["object", "string", "null"]},
            "pattern": {"type": "string", "default": "(?=x)", "examples": ["(?!y)"]},
            "$ref": {"type": "string", "const": {"$ref": "https://x", "type": ["a", "null"]}},
            "anyOf": {"description": "a property named anyOf", "type": "string"},
        },
        "required": ["type", "pattern", "$ref", "anyOf"],
    }
    assert sanitise(data) == data


def test_empty_or_malformed_enum_is_dropped() -> None:
    # llama.cpp: "enum must be a non-empty array"
    assert prop({"type": "string", "enum": []}) == {"type": "string"}
    assert prop({"enum": "a"}) == {}


def test_malformed_keyword_values_are_dropped() -> None:
    given = {"type": "string", "minLength": -1, "maxLength": "5", "format": 3}
    assert prop(given) == {"type": "string"}
    assert prop({"type": "array", "minItems": 2.0, "uniqueItems": "yes"}) == {
        "type": "array", "minItems": 2,
    }
    assert prop({"type": "number", "multipleOf": 0, "minimum": True}) == {"type": "number"}


def test_draft4_boolean_exclusive_bounds_become_numbers() -> None:
    given = {"type": "number", "minimum": 0, "exclusiveMinimum": True,
             "maximum": 10, "exclusiveMaximum": False}
    assert prop(given) == {"type": "number", "exclusiveMinimum": 0, "maximum": 10}


def test_draft7_tuple_items_become_prefix_items() -> None:
    given = {"type": "array", "items": ["string", {"type": "integer"}], "additionalItems": False}
    assert prop(given) == {
        "type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False,
    }
    assert prop({"type": "array", "additionalItems": False}) == {"type": "array"}


def test_dependencies_keep_name_lists_and_sanitise_schemas() -> None:
    given = {"type": "object", "properties": {"a": {}, "b": {}},
             "dependencies": {"a": ["b", "b", 1], "b": {"type": ["string", "null"]}}}
    assert prop(given) == {"type": "object", "properties": {"a": {}, "b": {}},
                           "dependencies": {"a": ["b"],
                                            "b": {"type": "string", "nullable": True}}}


def test_sanitise_never_mutates_and_never_aliases_its_input() -> None:
    schema: dict[str, Any] = {
        "$ref": "#/$defs/A",
        "$defs": {"A": {"type": ["object", "null"], "properties": {
            "e": {"type": "string", "enum": ["x"], "pattern": "(?=a)"}}}},
    }
    before = copy.deepcopy(schema)
    out = sanitise(schema)
    assert schema == before
    assert out["properties"]["e"]["enum"] is not schema["$defs"]["A"]["properties"]["e"]["enum"]


def test_sanitise_is_cached_per_distinct_content() -> None:
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    first = sanitise(schema)
    assert sanitise(orjson.loads(orjson.dumps(schema))) is first
    assert sanitise({"type": "object", "properties": {"b": {}}}) is not first


# ------------------------------------------------------------------ llama.cpp converter failures


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # unsupported $ref ..., only references into the same document are supported
        ({"$ref": "https://example.com/x.json#/defs/a"}, EMPTY),
        # cannot resolve $ref #/$defs/nope, $defs not found
        ({"$ref": "#/$defs/nope"}, EMPTY),
        # unrecognized type foo
        ({"type": "foo"}, {}),
        # type must be a string or an array of strings
        ({"type": 5}, {}),
        # enum must be a non-empty array
        ({"enum": []}, {}),
    ],
)
def test_llama_cpp_converter_failures_are_prevented(given: Any, expected: Any) -> None:
    assert sanitise({"type": "object", "properties": {"city": given}}) == {
        "type": "object", "properties": {"city": expected},
    }
    assert sanitise(given) == EMPTY


# ------------------------------------------------------------------ 3.3 relax


def test_relax_removes_pattern_and_format_everywhere_but_keeps_such_property_names() -> None:
    schema = sanitise({
        "type": "object",
        "properties": {
            "format": {"type": "string", "enum": ["json", "text"]},
            "pattern": {"type": "string", "format": "regex"},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            "ref": {"$ref": "#/$defs/Id"},
        },
        "required": ["format", "pattern"],
        "$defs": {"Id": {"type": "string", "pattern": "^[0-9]+$", "minLength": 1}},
    })
    assert relax(schema) == {
        "type": "object",
        "properties": {
            "format": {"type": "string", "enum": ["json", "text"]},
            "pattern": {"type": "string"},
            "when": {"type": "string", "nullable": True},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ref": {"$ref": "#/$defs/Id"},
        },
        "required": ["format", "pattern"],
        "$defs": {"Id": {"type": "string", "minLength": 1}},
    }


def test_relax_walks_unions_and_keeps_data() -> None:
    schema = {"type": "object", "properties": {"x": {
        "anyOf": [{"type": "string", "format": "uri"}, {"type": "integer"}],
        "default": {"format": "kept", "pattern": "kept"},
    }}, "propertyNames": {"pattern": "^[a-z]+$"}}
    assert relax(schema) == {"type": "object", "properties": {"x": {
        "anyOf": [{"type": "string"}, {"type": "integer"}],
        "default": {"format": "kept", "pattern": "kept"},
    }}, "propertyNames": {}}


def test_relax_does_not_mutate() -> None:
    schema = {"type": "string", "format": "email"}
    assert relax(schema) == {"type": "string"}
    assert schema == {"type": "string", "format": "email"}


# ------------------------------------------------------------------ contradictions


CONTRA = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "minItems": 5, "maxItems": 2},
        "name": {"type": "string", "minLength": 10, "maxLength": 2},
        "n": {"type": "integer", "minimum": 10, "maximum": 1},
        "meta": {"type": "object", "minProperties": 3, "maxProperties": 1},
        "ok": {"type": "string", "minLength": 2, "maxLength": 2},
    },
}


def test_find_contradictions_names_path_and_keyword() -> None:
    assert find_contradictions(CONTRA) == [
        ("#/properties/tags", "minItems"),
        ("#/properties/name", "minLength"),
        ("#/properties/n", "minimum"),
        ("#/properties/meta", "minProperties"),
    ]
    nested = {"$defs": {"A": {"anyOf": [{"type": "array", "minItems": 3, "maxItems": 1}]}}}
    assert find_contradictions(nested) == [("#/$defs/A/anyOf/0", "minItems")]
    assert find_contradictions({"type": "array", "items": "x"}) == []


def test_sanitise_drops_the_lower_bound_of_a_contradiction() -> None:
    assert sanitise(CONTRA)["properties"] == {
        "tags": {"type": "array", "maxItems": 2},
        "name": {"type": "string", "maxLength": 2},
        "n": {"type": "integer", "maximum": 1},
        "meta": {"type": "object", "maxProperties": 1, "properties": {}},
        "ok": {"type": "string", "minLength": 2, "maxLength": 2},
    }


def test_contradiction_created_by_collapsing_a_union_is_dropped() -> None:
    given = {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}], "minLength": 5}
    assert prop(given) == {"type": "string", "maxLength": 2, "nullable": True}


# ------------------------------------------------------------------ apply_to_request


def tool(name: str, parameters: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters, **extra}}


NULLABLE = {"type": "object", "properties": {"a": {"type": ["string", "null"],
                                                   "format": "date"}}}


def test_sanitise_mode_rewrites_tools_and_copies_only_the_changed_path() -> None:
    clean = {"type": "object", "properties": {"q": {"type": "string"}}}
    body = {"model": "m", "messages": [], "tools": [tool("a", NULLABLE, strict=True),
                                                    tool("b", clean)]}
    before = copy.deepcopy(body)
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert body == before
    assert result.changed and not result.relaxed and result.notices == []
    assert result.body["tools"][0] == tool("a", {"type": "object", "properties": {
        "a": {"type": "string", "format": "date", "nullable": True}}}, strict=True)
    assert result.body["tools"][1] is body["tools"][1]
    assert result.body["messages"] is body["messages"]


def test_nothing_to_change_returns_the_same_body() -> None:
    clean = {"type": "object", "properties": {"q": {"type": "string"}}}
    bodies: list[dict[str, Any]] = [
        {"messages": []},
        {"tools": [tool("b", clean), {"type": "web_search"}]},
        {"tools": [{"type": "function", "function": {"name": "noargs"}}]},
        {"response_format": {"type": "json_object"}},
    ]
    for body in bodies:
        for mode in ("sanitise", "passthrough"):
            result = apply_to_request(body, mode=mode, relaxed=False)
            assert result.body is body
            assert (result.changed, result.relaxed, result.notices) == (False, False, [])


def test_passthrough_sends_schemas_as_written() -> None:
    body = {"tools": [tool("a", NULLABLE, strict=True)]}
    result = apply_to_request(body, mode="passthrough", relaxed=False)
    assert result.body is body and not result.changed


def test_relaxed_sanitise_mode() -> None:
    body = {"tools": [tool("a", NULLABLE)]}
    result = apply_to_request(body, mode="sanitise", relaxed=True)
    assert result.relaxed and result.changed
    assert result.body["tools"][0]["function"]["parameters"] == {
        "type": "object", "properties": {"a": {"type": "string", "nullable": True}}}


def test_relaxed_passthrough_relaxes_without_adding_nullable() -> None:
    body = {"tools": [tool("a", NULLABLE, strict=True)]}
    result = apply_to_request(body, mode="passthrough", relaxed=True)
    assert result.relaxed and result.changed
    assert result.body["tools"][0] == tool(
        "a", {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, strict=True)


def test_relaxed_flag_only_when_relaxing_removed_something() -> None:
    body = {"tools": [tool("a", {"type": "object", "properties": {"q": {"type": "string"}}})]}
    result = apply_to_request(body, mode="sanitise", relaxed=True)
    assert result.body is body and not result.relaxed


def test_strict_safe_sanitise_keeps_null_as_a_type_or_branch() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": ["string", "null"]},
        "b": {"type": ["string", "integer", "null"]},
        "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }}
    assert sanitise(schema, strict_safe=True) == {"type": "object", "properties": {
        "a": {"type": ["string", "null"]},
        "b": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }}


def test_sanitise_mode_drops_contradictions_with_a_notice_each() -> None:
    body = {"tools": [tool("search", {"type": "object", "properties": {
        "tags": {"type": "array", "minItems": 5, "maxItems": 2}}})]}
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert result.notices == [
        "Dropped minItems 5 at #/properties/tags in tool 'search' because it exceeds "
        "maxItems 2 and no value could satisfy both."
    ]
    assert result.body["tools"][0]["function"]["parameters"]["properties"]["tags"] == {
        "type": "array", "maxItems": 2}
    again = apply_to_request(body, mode="sanitise", relaxed=False)
    assert again.notices == result.notices  # every request that carries it says so


@pytest.mark.parametrize("relaxed", [False, True])
def test_passthrough_contradiction_raises_naming_tool_and_keyword(relaxed: bool) -> None:
    body = {"tools": [tool("ok", {"type": "object"}),
                      tool("fetch", {"type": "object", "properties": {
                          "name": {"type": "string", "minLength": 10, "maxLength": 2}}})]}
    with pytest.raises(SchemaContradiction) as err:
        apply_to_request(body, mode="passthrough", relaxed=relaxed)
    assert (err.value.tool, err.value.keyword, err.value.path) == (
        "tool 'fetch'", "minLength", "#/properties/name")
    assert str(err.value) == (
        "tool 'fetch' has minLength 10 above maxLength 2 at #/properties/name: no value can "
        "satisfy it and grammar-building servers can run out of memory on it; lower minLength "
        "or raise maxLength."
    )


def test_response_format_schema_is_sanitised_and_named_in_notices() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5,
                                                     "maximum": 1}}}
    body: dict[str, Any] = {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "out", "strict": True, "schema": schema}}}
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert result.body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "strict": True,
        "schema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 1}}}}}
    assert result.notices == [
        "Dropped minimum 5 at #/properties/n in response_format 'out' because it exceeds "
        "maximum 1 and no value could satisfy both."
    ]
    assert body["response_format"]["json_schema"]["schema"] is schema
    with pytest.raises(SchemaContradiction) as err:
        apply_to_request(body, mode="passthrough", relaxed=False)
    assert err.value.tool == "response_format 'out'"


def test_response_format_array_root_is_kept() -> None:
    schema = {"type": "array", "items": {"type": "string", "pattern": "(?=x)"}}
    body = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert result.body["response_format"]["json_schema"]["schema"] == {
        "type": "array", "items": {"type": "string"}}


def test_flat_responses_style_tools_are_handled() -> None:
    body = {"tools": [{"type": "function", "name": "f", "parameters": NULLABLE}]}
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert result.body["tools"][0] == {"type": "function", "name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "format": "date",
                                               "nullable": True}}}}


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="schema mode"):
        apply_to_request({}, mode="auto", relaxed=False)


def test_second_request_reuses_the_cached_schema_objects() -> None:
    raw = orjson.dumps({"tools": [tool("a", NULLABLE)]})
    first = apply_to_request(orjson.loads(raw), mode="sanitise", relaxed=False)
    second = apply_to_request(orjson.loads(raw), mode="sanitise", relaxed=False)
    params = [r.body["tools"][0]["function"]["parameters"] for r in (first, second)]
    assert params[0] is params[1]


def test_unreached_definitions_give_no_notices() -> None:
    params = {"type": "object", "properties": {"a": {"type": "string"}},
              "$defs": {"Dead": {"type": "array", "minItems": 3, "maxItems": 1}}}
    result = apply_to_request({"tools": [tool("t", params)]}, mode="sanitise", relaxed=False)
    assert result.notices == []
    assert result.body["tools"][0]["function"]["parameters"] == {
        "type": "object", "properties": {"a": {"type": "string"}}}


def test_cached_contradiction_raises_on_every_request() -> None:
    raw = orjson.dumps({"tools": [tool("t", {"type": "array", "minItems": 3, "maxItems": 1})]})
    for _ in range(2):
        with pytest.raises(SchemaContradiction) as err:
            apply_to_request(orjson.loads(raw), mode="passthrough", relaxed=False)
        assert (err.value.tool, err.value.keyword, err.value.path) == ("tool 't'", "minItems", "#")


def test_tools_list_that_changed_by_one_tool_reuses_the_others() -> None:
    a = {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}
    b = {"type": "object", "properties": {"y": {"type": ["integer", "null"]}}}
    first = apply_to_request({"tools": [tool("a", a)]}, mode="sanitise", relaxed=False)
    second = apply_to_request({"tools": [tool("a", copy.deepcopy(a)), tool("b", b)]},
                              mode="sanitise", relaxed=False)
    assert (second.body["tools"][0]["function"]["parameters"]
            is first.body["tools"][0]["function"]["parameters"])
    assert second.body["tools"][1]["function"]["parameters"] == {
        "type": "object", "properties": {"y": {"type": "integer", "nullable": True}}}


def test_tool_without_a_name_is_named_by_index() -> None:
    body = {"tools": [{"type": "function", "function": {
        "parameters": {"type": "string", "minLength": 4, "maxLength": 1}}}]}
    with pytest.raises(SchemaContradiction) as err:
        apply_to_request(body, mode="passthrough", relaxed=False)
    assert err.value.tool == "tools[0]"


def test_large_and_fractional_bounds_are_written_plainly() -> None:
    body = {"tools": [tool("t", {"type": "object", "properties": {
        "n": {"type": "number", "minimum": 2000000.0, "maximum": 0.5}}})]}
    result = apply_to_request(body, mode="sanitise", relaxed=False)
    assert result.notices == [
        "Dropped minimum 2000000 at #/properties/n in tool 't' because it exceeds maximum 0.5 "
        "and no value could satisfy both."
    ]


# ------------------------------------------------------------------ schemas that cannot be walked


def nested(levels: int, via: str = "properties") -> dict[str, Any]:
    """`levels` schema objects, each holding the next under `via`."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = obj(a=schema) if via == "properties" else {"type": "array", "items": schema}
    return schema


def body_with(schema: Any, where: str) -> dict[str, Any]:
    if where == "tools":
        return {"tools": [tool("ok", {"type": "object"}), tool("t", schema)]}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "r", "schema": schema}}}


PARAMS = {"tools": ("tools[1].function.parameters", "invalid_tool_schema"),
          "response_format": ("response_format.json_schema.schema", "invalid_json_schema")}
MODES = [("sanitise", False), ("sanitise", True), ("passthrough", False), ("passthrough", True)]


@pytest.mark.parametrize(("mode", "relaxed"), MODES)
@pytest.mark.parametrize("where", ["tools", "response_format"])
@pytest.mark.parametrize("via", ["properties", "items"])
def test_nesting_beyond_max_depth_is_a_schema_error_naming_the_field(
    mode: str, relaxed: bool, where: str, via: str
) -> None:
    assert MAX_DEPTH == 32
    apply_to_request(body_with(nested(MAX_DEPTH, via), where), mode=mode, relaxed=relaxed)
    with pytest.raises(SchemaError) as err:
        apply_to_request(body_with(nested(MAX_DEPTH + 1, via), where), mode=mode,
                         relaxed=relaxed)
    assert isinstance(err.value, ProxyError) and err.value.status == 400
    assert (err.value.param, err.value.code) == PARAMS[where]
    assert "nested too deeply (at #/" in err.value.message
    assert "at most 32 levels" in err.value.message


@pytest.mark.parametrize(("mode", "relaxed"), MODES)
def test_480_levels_is_a_schema_error_not_a_recursion_error(mode: str, relaxed: bool) -> None:
    for via in ("properties", "items"):
        raw = orjson.loads(orjson.dumps(nested(120, via)))  # as a parsed body holds it
        with pytest.raises(SchemaError):
            apply_to_request(body_with(nested(480, via), "tools"), mode=mode, relaxed=relaxed)
        with pytest.raises(SchemaError):
            apply_to_request(body_with(raw, "response_format"), mode=mode, relaxed=relaxed)


@pytest.mark.parametrize(("mode", "relaxed"), MODES)
def test_data_nested_beyond_what_orjson_encodes_is_a_schema_error(
    mode: str, relaxed: bool
) -> None:
    # A parsed body may nest 1024 levels; orjson encodes 254. Such a schema could not be sent
    # once rewritten, and has no cache key: refused, naming the field.
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    schema = {"type": "object", "properties": {"a": {"type": "array", "default": deep}}}
    with pytest.raises(SchemaError) as err:
        apply_to_request(body_with(schema, "tools"), mode=mode, relaxed=relaxed)
    assert err.value.param == "tools[1].function.parameters"
    assert "nested too deeply:" in err.value.message


def test_inlined_pointers_count_towards_the_depth() -> None:
    # Each property points at the one before: inlining nests them 40 deep in the output.
    props: dict[str, Any] = {"p0": {"type": "string"}}
    for i in range(1, 40):
        props[f"p{i}"] = {"type": "array", "items": {"$ref": f"#/properties/p{i - 1}"}}
    with pytest.raises(SchemaError, match="nested too deeply"):
        sanitise(obj(**props))


def test_pointers_that_multiply_a_schema_are_refused_once_and_the_refusal_is_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 1.6 KB of pointers to pairs of pointers: before, 13 MB of output after 8 s of CPU.
    props: dict[str, Any] = {"p0": {"type": "string"}}
    for i in range(1, 18):
        pair = [{"$ref": f"#/properties/p{i - 1}"}] * 2
        props[f"p{i}"] = {"type": "array", "prefixItems": pair}
    body = body_with(obj(**props), "tools")
    walks = []
    real = schemas._sanitise_uncached
    monkeypatch.setattr(schemas, "_sanitise_uncached",
                        lambda *a, **k: walks.append(1) or real(*a, **k))
    for _ in range(2):
        with pytest.raises(SchemaError) as err:
            apply_to_request(orjson.loads(orjson.dumps(body)), mode="sanitise", relaxed=False)
        assert err.value.param == "tools[1].function.parameters"
        assert f"more than {MAX_NODES} schema objects" in err.value.message
        assert len(walks) == 2  # the two tools, on the first turn only


def test_sanitise_and_relax_on_their_own_name_the_response_schema() -> None:
    with pytest.raises(SchemaError) as err:
        sanitise(nested(MAX_DEPTH + 1))
    assert (err.value.param, err.value.code) == (
        "response_format.json_schema.schema", "invalid_json_schema")
    with pytest.raises(SchemaError) as err:
        relax(nested(MAX_DEPTH + 1, "items"), param="tools[0].function.parameters")
    assert (err.value.param, err.value.code) == (
        "tools[0].function.parameters", "invalid_tool_schema")


def test_a_long_path_is_shortened_in_the_message() -> None:
    name = "n" * 5000
    with pytest.raises(SchemaError) as err:
        sanitise(obj(**{name: nested(MAX_DEPTH)}))
    assert len(err.value.message) < 600


@pytest.mark.parametrize("kind", [[{}], [["string"]], [{}, "array"], [None, {"a": 1}, "null"]])
def test_type_lists_holding_objects_or_lists_never_crash(kind: list[Any]) -> None:
    # Before: `TypeError: unhashable type` deciding whether a response schema's root is an
    # object. Passthrough sends them as written; sanitise refuses them naming the field.
    schema = {"type": kind, "items": {"type": kind}}
    for where in ("tools", "response_format"):
        result = apply_to_request(body_with(schema, where), mode="passthrough", relaxed=False)
        assert orjson.dumps(result.body) == orjson.dumps(body_with(schema, where))
        with pytest.raises(SchemaError) as err:
            apply_to_request(body_with(schema, where), mode="sanitise", relaxed=False)
        assert err.value.status == 400 and "'type' list" in err.value.message
        assert (err.value.param, err.value.code) == PARAMS[where]


@pytest.mark.parametrize(("mode", "relaxed"), MODES)
def test_counts_beyond_64_bits_are_sent_as_written(mode: str, relaxed: bool) -> None:
    # orjson parses 1e21 as a float; before, sanitising made it int(1e21), which orjson then
    # could not encode ("Integer exceeds 64-bit range").
    raw = (b'{"type": "object", "minProperties": 1e308, "properties": {'
           b'"s": {"type": "string", "maxLength": 1e21, "pattern": "^(?!x)", "format": "x"},'
           b'"l": {"type": ["array", "null"], "minItems": 1e20}}}')
    for where in ("tools", "response_format"):
        result = apply_to_request(body_with(orjson.loads(raw), where), mode=mode,
                                  relaxed=relaxed)
        sent = orjson.loads(orjson.dumps(result.body))
        schema = (sent["tools"][1]["function"]["parameters"] if where == "tools"
                  else sent["response_format"]["json_schema"]["schema"])
        assert schema["minProperties"] == 1e308
        assert schema["properties"]["s"]["maxLength"] == 1e21
        assert schema["properties"]["l"]["minItems"] == 1e20
    assert prop({"type": "array", "minItems": 2.0**63}) == {"type": "array", "minItems": 2.0**63}
    assert prop({"type": "array", "minItems": 2.0**62}) == {"type": "array", "minItems": 2**62}


def test_a_huge_contradictory_bound_is_written_readably() -> None:
    schema = {"type": "object", "minProperties": 1e308, "maxProperties": 5}
    result = apply_to_request(body_with(schema, "tools"), mode="sanitise", relaxed=False)
    assert result.notices == [
        "Dropped minProperties 1e+308 at # in tool 't' because it exceeds maxProperties 5 and "
        "no value could satisfy both."
    ]
    with pytest.raises(SchemaContradiction) as err:
        apply_to_request(body_with(schema, "tools"), mode="passthrough", relaxed=False)
    assert err.value.message.startswith("tool 't' has minProperties 1e+308 above maxProperties 5")


def test_a_contradiction_is_a_proxy_error_naming_the_field() -> None:
    # So raised while the upstream body is built it is answered as a 400, not a 500.
    schema = {"type": "array", "minItems": 3, "maxItems": 1}
    for where, (param, code) in PARAMS.items():
        with pytest.raises(SchemaContradiction) as err:
            apply_to_request(body_with(schema, where), mode="passthrough", relaxed=False)
        assert isinstance(err.value, ProxyError)
        assert (err.value.status, err.value.param, err.value.code) == (400, param, code)
    flat = {"tools": [{"type": "function", "name": "f", "parameters": schema}]}
    with pytest.raises(SchemaContradiction) as err:
        apply_to_request(flat, mode="passthrough", relaxed=False)
    assert err.value.param == "tools[0].parameters"
