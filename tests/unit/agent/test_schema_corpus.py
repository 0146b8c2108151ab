"""Real-world tool schemas (tests/schema_corpus/) all survive sanitising without losing a property.

The corpus is written in the style of MCP servers and coding agents: file tools, search, git,
browser, database, HTTP, pydantic and zod output, with lookaround patterns, formats, `$defs`,
nullable unions, root `$ref`/`allOf`/`anyOf` and draft-07 leftovers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from proxy.agent.schemas import find_contradictions, pattern_ok, relax, sanitise

CORPUS = sorted((Path(__file__).resolve().parents[2] / "schema_corpus").glob("*.json"))
SKIPPED = {"$defs", "definitions"}


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for token in ref[2:].split("/") if ref != "#" else []:
        node = node.get(token.replace("~1", "/").replace("~0", "~"), {})
    return node


def property_paths(doc: Any) -> set[str]:
    """Every dotted property path the schema describes, following local refs, whatever the
    composition structure (unions, type lists, allOf) around it."""
    found: set[str] = set()

    def walk(node: Any, prefix: str, refs: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and ref not in refs:
            walk(_resolve(doc, ref), prefix, (*refs, ref))
        for name, sub in (node.get("properties") or {}).items():
            found.add(prefix + name)
            walk(sub, f"{prefix}{name}.", refs)
        for key, value in node.items():
            if key in ("items", "additionalProperties", "prefixItems", "anyOf", "oneOf", "allOf"):
                for sub in value if isinstance(value, list) else [value]:
                    walk(sub, prefix, refs)

    walk(doc, "", ())
    return found


def keyword_values(schema: Any, keyword: str) -> list[Any]:
    """Values of `keyword` at schema positions (property *names* are not positions)."""
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if keyword in node:
            found.append(node[keyword])
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions", "patternProperties"):
                stack.extend(value.values())
            elif key in ("items", "additionalProperties", "propertyNames", "prefixItems",
                         "anyOf", "oneOf", "allOf"):
                stack.extend(value if isinstance(value, list) else [value])
    return found


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_schema_sanitises_without_losing_a_property(path: Path) -> None:
    raw = json.loads(path.read_text())
    out = sanitise(raw)
    assert property_paths(raw) == property_paths(out)
    assert property_paths(raw)  # every corpus schema describes something
    jsonschema.Draft202012Validator.check_schema(out)
    assert out["type"] == "object"
    assert sanitise(json.loads(json.dumps(out))) == out
    assert find_contradictions(out) == []
    assert all(pattern_ok(p) for p in keyword_values(out, "pattern"))
    loose = relax(out)
    assert property_paths(loose) == property_paths(raw)
    assert keyword_values(loose, "pattern") == keyword_values(loose, "format") == []


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_schema_is_itself_a_valid_schema(path: Path) -> None:
    # The corpus is realistic data, not junk: each file is a schema some validator accepts.
    raw = json.loads(path.read_text())
    validator = jsonschema.validators.validator_for(raw, default=jsonschema.Draft202012Validator)
    validator.check_schema(raw)


def test_corpus_exercises_the_rules_that_matter() -> None:
    texts = [p.read_text() for p in CORPUS]
    for marker in ('"(?!', '(?<!', '"(?=', '"format": "date-time"', '"$defs"', '"definitions"',
                   '"null"', '"anyOf"', '"allOf"', '"$ref": "#/', '"pattern": {'):
        assert any(marker in t or marker.replace('"(?', '"^(?') in t for t in texts), marker
