"""Which JSON-schema library validates tool calls: jsonschema, fastjsonschema or jsonschema-rs.

latchgate checks every tool call of a reply against the schema the client declared for it and
sends a failing call back to the model with the error (proxy/toolcalls/validation.py). This
measures the three candidates on the schemas agents send (bench/agent_tools.py's 20 tools and
tests/schema_corpus/'s 39 real-world schemas): compile time per schema, validate time per call
with valid and with invalid arguments, whether each library gives the reference verdict, what it
does with schemas it cannot handle (unknown formats, bad or remote `$ref`, invalid types, draft-04
and draft-07 keywords, JavaScript-only regex) and the error messages a small model would read.
Finally `check_calls` itself, cold (first call compiles) and warm (the cache). Run from the
project root (after `pip install fastjsonschema jsonschema-rs`):

    .venv/bin/python -m bench.bench_validators [repeats]
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import jsonschema_rs
import orjson
from jsonschema import validators as js_validators

from bench.agent_tools import AGENT_TOOLS

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "schema_corpus"

Check = Callable[[Any], list[str]]  # arguments -> error messages ([] when valid)


# -- the three candidates, each as compile(schema) -> Check --------------------------------------


def compile_jsonschema(schema: Any) -> Check:
    """jsonschema's validator for the declared draft (2020-12 by default). `check_schema` is part
    of compiling: without it an invalid schema only fails (raises) while validating a call."""
    cls = js_validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema)
    return lambda instance: [e.message for e in validator.iter_errors(instance)]


def compile_fastjsonschema(schema: Any) -> Check:
    """fastjsonschema's generated function; it stops at the first error, and asserts formats."""
    validate = fastjsonschema.compile(schema)

    def check(instance: Any) -> list[str]:
        try:
            validate(instance)
        except fastjsonschema.JsonSchemaValueException as error:
            return [error.message]
        return []

    return check


def compile_jsonschema_rs(schema: Any) -> Check:
    """jsonschema-rs for the declared draft, offline: by default it fetches remote `$ref`s."""
    validator = jsonschema_rs.validator_for(schema, offline=True)
    return lambda instance: [e.message for e in validator.iter_errors(instance)]


LIBRARIES: dict[str, Callable[[Any], Check]] = {
    "jsonschema": compile_jsonschema,
    "fastjsonschema": compile_fastjsonschema,
    "jsonschema-rs": compile_jsonschema_rs,
}


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{name} {version(name)}" for name in LIBRARIES)


# -- schemas and arguments ------------------------------------------------------------------------


def schemas() -> list[tuple[str, dict[str, Any]]]:
    """(name, parameters) of the agent tool set and of the corpus."""
    agent = [(t["function"]["name"], t["function"]["parameters"]) for t in AGENT_TOOLS]
    corpus = [(p.stem, orjson.loads(p.read_bytes())) for p in sorted(CORPUS.glob("*.json"))]
    return agent + corpus


FORMATS = {"date-time": "2024-05-01T12:00:00Z", "date": "2024-05-01", "email": "a@example.com",
           "uri": "https://example.com/a", "uuid": "123e4567-e89b-12d3-a456-426614174000"}


def resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#"):
        return schema
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        node = node[part]
    return node


def example(schema: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """A plausible value for `schema` with every property filled (the reference checks it)."""
    if not isinstance(schema, dict):
        return {}
    schema = resolve(schema, root)
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return example(schema[key][0], root, depth)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    return SCALARS[kind](schema, root, depth)


def _object(schema: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
    props = schema.get("properties", {})
    names = props if depth < 3 else schema.get("required", [])
    return {name: example(props.get(name, {}), root, depth + 1) for name in names}


def _array(schema: dict[str, Any], root: dict[str, Any], depth: int) -> list[Any]:
    if depth >= 3:
        return []
    return [example(schema.get("items", {}), root, depth + 1)] * max(schema.get("minItems", 1), 1)


def _string(schema: dict[str, Any], root: dict[str, Any], depth: int) -> str:
    return FORMATS.get(schema.get("format", ""), "x" * max(schema.get("minLength", 1), 1))


def _number(schema: dict[str, Any], root: dict[str, Any], depth: int) -> int:
    return int(schema.get("minimum", 1))


SCALARS: dict[str, Callable[[dict[str, Any], dict[str, Any], int], Any]] = {
    "object": _object, "array": _array, "string": _string, "integer": _number,
    "number": _number, "boolean": lambda *_: True, "null": lambda *_: None,
}


def wrong_types(instance: dict[str, Any]) -> dict[str, Any]:
    """Every top-level value swapped for one of a wrong type, as a confused model writes them."""
    return {k: "text" if isinstance(v, dict | list | int | float) and not isinstance(v, str)
            else 12345 for k, v in instance.items()}


@dataclass
class Case:
    name: str
    schema: dict[str, Any]
    valid: list[Any]
    invalid: list[Any]


def cases() -> tuple[list[Case], int]:
    """Per schema, the arguments the reference (jsonschema) finds valid and those it rejects."""
    out, without_valid = [], 0
    for name, schema in schemas():
        reference = compile_jsonschema(schema)
        full = example(schema, schema)
        candidates = [full, {k: full[k] for k in schema.get("required", []) if k in full}]
        valid = [c for c in candidates if not reference(c)][:1]
        without_valid += not valid
        invalid = [c for c in ({}, wrong_types(full)) if reference(c)]
        out.append(Case(name, schema, valid, invalid))
    return out, without_valid


# -- timing ---------------------------------------------------------------------------------------


def best_of(fn: Callable[[], Any], repeats: int, loops: int) -> float:
    """Seconds per call: the median of `repeats` timings of `loops` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times)


@dataclass
class Timing:
    compile_us: float
    valid_us: float
    invalid_us: float
    disagree: int
    failed: int


def measure(lib: str, all_cases: list[Case], repeats: int) -> Timing:
    make = LIBRARIES[lib]
    compiles, valids, invalids, disagree, failed = [], [], [], 0, 0
    for case in all_cases:
        try:
            check = make(case.schema)
        except Exception:
            failed += 1
            continue
        compiles.append(best_of(functools.partial(make, case.schema), repeats, 1))
        for instance in case.valid:
            disagree += bool(check(instance))
            valids.append(best_of(functools.partial(check, instance), repeats, 200))
        for instance in case.invalid:
            disagree += not check(instance)
            invalids.append(best_of(functools.partial(check, instance), repeats, 200))
    return Timing(statistics.mean(compiles) * 1e6, statistics.mean(valids) * 1e6,
                  statistics.mean(invalids) * 1e6, disagree, failed)


# -- odd schemas ----------------------------------------------------------------------------------


def prop(sub: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": sub}, **top}


D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"

# (what, schema, arguments, what we want): "ok" = compiles and accepts, "reject" = compiles and
# rejects, "skip" = refuses to compile (then latchgate skips the tool: lenient), "skip|reject"
# either. Never acceptable: raising while validating, fetching a URL, accepting what the declared
# draft rejects.
ODD: list[tuple[str, Any, Any, str]] = [
    ("unknown format", prop({"type": "string", "format": "my-thing"}), {"a": "x"}, "ok"),
    ("known format, odd value", prop({"type": "string", "format": "email"}), {"a": "bob"}, "ok"),
    ("`$ref` to nowhere", prop({"$ref": "#/$defs/Missing"}), {"a": 1}, "skip"),
    ("remote `$ref`", prop({"$ref": "https://example.invalid/s.json"}), {"a": 1}, "skip"),
    ("invalid type name", prop({"type": "strin"}), {"a": 1}, "skip"),
    ("`required` not a list", {"type": "object", "required": "a"}, {}, "skip"),
    ("parameters not a schema", "string", {}, "skip"),
    ("draft-04 boolean exclusiveMinimum", prop({"type": "number", "minimum": 0,
     "exclusiveMinimum": True}, **{"$schema": D4}), {"a": 0}, "reject"),
    ("same, no `$schema`", prop({"type": "number", "minimum": 0, "exclusiveMinimum": True}),
     {"a": 0}, "skip"),
    ("draft-07 tuple `items`", prop({"type": "array", "items": [{"type": "string"},
     {"type": "integer"}]}, **{"$schema": D7}), {"a": ["x", "y"]}, "reject"),
    ("same, no `$schema`", prop({"type": "array", "items": [{"type": "string"},
     {"type": "integer"}]}), {"a": ["x", "y"]}, "skip"),
    ("2020-12 prefixItems", prop({"type": "array", "prefixItems": [{"type": "string"},
     {"type": "integer"}]}), {"a": ["x", "y"]}, "reject"),
    ("2020-12 dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1},
     "reject"),
    ("2020-12 unevaluatedProperties", {"type": "object", "properties": {"a": {}},
     "unevaluatedProperties": False}, {"a": 1, "b": 2}, "reject"),
    ("draft-07 definitions", {"definitions": {"X": {"type": "integer"}}, "type": "object",
     "properties": {"a": {"$ref": "#/definitions/X"}}}, {"a": "s"}, "reject"),
    ("JS regex `\\p{L}`", prop({"type": "string", "pattern": "^\\p{L}+$"}), {"a": "1"},
     "skip|reject"),
    ("JS regex `(?<y>…)` group", prop({"type": "string", "pattern": "^(?<y>\\d{4})$"}),
     {"a": "x"}, "skip|reject"),
    ("JS regex `[^]`", prop({"type": "string", "pattern": "^[^]*$"}), {"a": "x"}, "skip|ok"),
    ("`$ref` cycle", {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, {}, "skip|ok"),
    ("recursive tree", prop({"$ref": "#"}, additionalProperties=False), {"a": {"a": {"z": 1}}},
     "reject"),
    ("unknown `$schema` URI", prop({"type": "integer"}, **{"$schema": "http://x.invalid/s#"}),
     {"a": "s"}, "skip|reject"),
    ("OpenAPI `nullable`", prop({"type": "string", "nullable": True}), {"a": None}, "reject"),
]


def outcome(lib: str, schema: Any, instance: Any) -> str:
    try:
        check = LIBRARIES[lib](schema)
    except OSError:
        return "fetches URL"  # urllib's URLError: it tried the network while compiling
    except Exception:
        return "skip"
    try:
        return "reject" if check(instance) else "ok"
    except RecursionError:
        return "raises RecursionError"
    except Exception as error:
        return f"raises {type(error).__name__}"


def odd_table() -> tuple[list[str], dict[str, int]]:
    rows = ["| schema | want | " + " | ".join(LIBRARIES) + " |",
            "| --- | --- |" + " --- |" * len(LIBRARIES)]
    right = dict.fromkeys(LIBRARIES, 0)
    for what, schema, instance, want in ODD:
        cells = []
        for lib in LIBRARIES:
            got = outcome(lib, schema, instance)
            good = got in want.split("|")
            right[lib] += good
            cells.append(f"{got} {'✓' if good else '✗'}")
        wanted = want.replace("|", " or ")  # a bare | would split the Markdown cell
        rows.append(f"| {what} | {wanted} | " + " | ".join(cells) + " |")
    return rows, right


# -- error messages -------------------------------------------------------------------------------

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city"], "properties": {
    "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "array", "items": {"type": "integer"}}}}
WEATHER_BAD = {"unit": "kelvin", "days": [1, "two"], "extra": None}


def message_rows() -> list[str]:
    rows = ["| library | messages for " + f"`{orjson.dumps(WEATHER_BAD).decode()}` |",
            "| --- | --- |"]
    for lib, make in LIBRARIES.items():
        rows.append(f"| {lib} | " + "<br>".join(make(WEATHER)(WEATHER_BAD)) + " |")
    return rows


# -- check_calls ----------------------------------------------------------------------------------


def check_calls_us(repeats: int) -> tuple[float, float, float]:
    """µs of `check_calls` for one valid call of the agent tool set: cold (every cache empty,
    so the tool's schema compiles), warm, and warm with one invalid call."""
    from proxy.toolcalls import validation

    tool = AGENT_TOOLS[0]["function"]
    args = example(tool["parameters"], tool["parameters"])
    good = [{"id": "c1", "type": "function",
             "function": {"name": tool["name"], "arguments": orjson.dumps(args).decode()}}]
    bad = [{"id": "c1", "type": "function",
            "function": {"name": tool["name"], "arguments": orjson.dumps(wrong_types(args))
                         .decode()}}]
    assert not validation.check_calls(good, AGENT_TOOLS).problems
    assert validation.check_calls(bad, AGENT_TOOLS).problems

    def cold() -> None:
        validation.clear_caches()
        validation.check_calls(good, AGENT_TOOLS)

    cold_s = best_of(cold, repeats, 20)
    warm_s = best_of(lambda: validation.check_calls(good, AGENT_TOOLS), repeats, 2000)
    bad_s = best_of(lambda: validation.check_calls(bad, AGENT_TOOLS), repeats, 2000)
    return cold_s * 1e6, warm_s * 1e6, bad_s * 1e6


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    all_cases, without_valid = cases()
    n_valid = sum(len(c.valid) for c in all_cases)
    n_invalid = sum(len(c.invalid) for c in all_cases)
    print(f"{len(all_cases)} schemas ({without_valid} without generated valid arguments), "
          f"{n_valid} valid and {n_invalid} invalid argument sets; {versions()}\n")
    print("| library | compile µs/schema | validate µs/call, valid | invalid | "
          "verdicts ≠ jsonschema | schemas not compiled |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for lib in LIBRARIES:
        t = measure(lib, all_cases, repeats)
        print(f"| {lib} | {t.compile_us:,.0f} | {t.valid_us:,.1f} | {t.invalid_us:,.1f} | "
              f"{t.disagree} | {t.failed} |")
    rows, right = odd_table()
    print(f"\nOdd schemas ({len(ODD)}): " + ", ".join(f"{k} {v}/{len(ODD)}"
                                                     for k, v in right.items()) + "\n")
    print("\n".join(rows) + "\n")
    print("\n".join(message_rows()) + "\n")
    try:
        cold, warm, bad = check_calls_us(repeats)
    except ImportError:
        return
    print(f"check_calls, one call, agent tool set: cold {cold:,.0f} µs, warm {warm:,.1f} µs, "
          f"warm and invalid {bad:,.1f} µs")


if __name__ == "__main__":
    main()
