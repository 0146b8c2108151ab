"""PROVISIONAL: replaced by the validation branch at merge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema
import orjson


@dataclass(frozen=True, slots=True)
class Problem:
    index: int
    name: str
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class Checked:
    problems: tuple[Problem, ...]
    skipped: tuple[str, ...]


def check_calls(calls: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Checked:
    schemas: dict[str, Any] = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            schemas[fn["name"]] = fn.get("parameters") or {}
    problems: list[Problem] = []
    skipped: list[str] = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        name = str(fn.get("name") or "")
        if name not in schemas:
            names = ", ".join(schemas)
            problems.append(Problem(i, name, "unknown_tool",
                                    f"There is no tool named {name!r}; the tools are: {names}."))
            continue
        try:
            args = orjson.loads(fn.get("arguments") or "{}")
        except orjson.JSONDecodeError as exc:
            problems.append(Problem(i, name, "unparseable", f"not JSON: {exc}"))
            continue
        if not isinstance(args, dict):
            problems.append(Problem(i, name, "not_object", "the arguments are not an object"))
            continue
        try:
            jsonschema.Draft202012Validator.check_schema(schemas[name])
        except jsonschema.SchemaError:
            skipped.append(name)
            continue
        for err in jsonschema.Draft202012Validator(schemas[name]).iter_errors(args):
            where = "/".join(map(str, err.absolute_path))
            problems.append(Problem(i, name, "invalid", f"at {where!r}: {err.message}"))
            break
    return Checked(tuple(problems), tuple(skipped))
