"""Tool and response schemas that every grammar-building server can compile.

Local servers (llama.cpp, Ollama, vLLM, LM Studio) turn a tool's JSON schema into a grammar, and
real agent schemas break them: lookaround patterns, `$ref` with siblings, type lists, nullable
unions, root `anyOf`, external refs, empty enums, and contradictory bounds that once drove
llama-server's grammar builder to 24 GB and an OOM kill. This module rewrites a schema into the
plain subset they all accept (BEHAVIOUR.md 3.2, `sanitise`), strips `pattern` and `format` once an
endpoint has shown it cannot honour them (3.3, `relax`), and applies the right form to a request
body (`apply_to_request`).

Everything here is pure. Results are cached per distinct schema (an agent sends the same 40 tools
on every turn). Cached schemas are shared between requests: callers must treat every schema this
module returns as read-only (serialise it, never mutate it). We do not deep-freeze them because
orjson cannot serialise `MappingProxyType` and freezing would cost more than the sanitising saves.

A schema that cannot be walked safely is refused with `SchemaError`, a 400 naming the field:
nested beyond `MAX_DEPTH` schema levels (or too deep for orjson to encode at all), or expanding
to more than `MAX_NODES` schema objects when its local pointers are inlined. Refusals are cached
like results, so a client that resends one pays no new walk.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any
from urllib.parse import unquote

import orjson

from proxy import knowntools
from proxy.errors import ProxyError

KNOWN_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
# How many schema objects may nest inside one another (the root counts; a `$ref` inlined counts
# as a level). Real tool schemas stay near 10 (OpenAI's strict mode allows 10). The limit keeps
# every walk here far from Python's recursion limit, and what sanitising sends encodable: its
# rewrites put a subschema at most 6 JSON levels below its parent (`allOf: [{anyOf: [{type,
# properties: {name: ...}}]}]`), so 32 levels stay under orjson's 254 with the body around them.
MAX_DEPTH = 32
# How many schema objects sanitising one schema may produce. Inlining local pointers
# (`#/properties/a`) can multiply a small schema: 1.6 KB of pointers to pairs of pointers
# expanded to 13 MB in 8 s of blocked event loop. Real agent schemas produce hundreds.
MAX_NODES = 50_000
# orjson's own nesting limit for encoding (a parsed body may nest up to 1024).
_JSON_DEPTH = 254
# The field a schema outside any request body is named by: `sanitise` is called on its own only
# for a response format's schema (when it is moved into the system prompt).
RESPONSE_SCHEMA_PARAM = "response_format.json_schema.schema"
# Keywords whose value is one schema, a name->schema map, or a list of schemas.
_SINGLE = (
    "items",
    "additionalProperties",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_MAPS = ("properties", "patternProperties", "dependentSchemas")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_DEFS = ("$defs", "definitions")
_UNIONS = ("anyOf", "oneOf")
# Keyword pairs whose lower bound above the upper bound makes the schema unsatisfiable.
BOUND_PAIRS = (
    ("minItems", "maxItems"),
    ("minLength", "maxLength"),
    ("minimum", "maximum"),
    ("minProperties", "maxProperties"),
)
_COUNTS = frozenset(
    {
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
_NUMBERS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_NUMERIC_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
# Which keywords follow a type into its own branch when a type list is split into `anyOf`.
_TYPE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "string": (
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    ),
    "number": _NUMERIC_KW,
    "integer": _NUMERIC_KW,
    "array": (
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
    ),
    "object": (
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
    ),
}
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_ROOT_DROPPED = ("allOf", "anyOf", "oneOf", "enum", "not", "nullable")
# `(?=`, `(?!`, `(?<=`, `(?<!` not escaped by a backslash.
_LOOKAROUND = re.compile(r"(?<!\\)(?:\\\\)*\(\?<?[=!]")


class SchemaError(ProxyError):
    """A client schema latchgate refuses to rewrite or send: answered 400, naming the field.

    A ProxyError, so raised while the upstream body is built it reaches the client as itself.
    """

    def __init__(self, param: str, message: str, code: str) -> None:
        super().__init__(400, message, param=param, code=code)


class SchemaContradiction(SchemaError):
    """A schema sent in passthrough mode has a lower bound above its upper bound."""

    def __init__(
        self,
        tool: str,
        keyword: str,
        path: str,
        message: str,
        param: str = "tools",
        code: str = "invalid_tool_schema",
    ) -> None:
        super().__init__(param, message, code)
        self.tool = tool
        self.keyword = keyword
        self.path = path


@dataclass(frozen=True)
class _Problem:
    """Why a schema cannot be walked: "deep", "large" or "type" (a type list of non-names), and
    the position where that showed."""

    reason: str
    path: str


class _Unwalkable(Exception):
    """Raised inside a walk that met a `_Problem`; turned into a SchemaError for its field."""

    def __init__(self, problem: _Problem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


@dataclass
class _Budget:
    """What one sanitising walk has spent, shared by the walkers it starts for inlined refs."""

    depth: int = 0
    nodes: int = 0


@dataclass
class SchemaResult:
    """What `apply_to_request` did to a body."""

    body: dict[str, Any]  # the very object given when nothing changed
    changed: bool
    relaxed: bool  # relaxing removed at least one pattern/format from the outgoing body
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Bound:
    """One contradictory bound pair: where it is and the two values."""

    path: str
    keyword: str
    value: float
    upper: str
    upper_value: float


def _empty() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _pointer_tokens(ref: str) -> list[str] | None:
    """The decoded tokens of a local JSON-pointer ref (`#/a/b`), or None if it is not one."""
    if ref == "#":
        return []
    if not ref.startswith("#/"):
        return None
    return [unquote(t).replace("~1", "/").replace("~0", "~") for t in ref[2:].split("/")]


def _resolve(doc: object, tokens: list[str]) -> object | None:
    node = doc
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def pattern_ok(pattern: object) -> bool:
    """A pattern grammar builders can take: a string, no lookaround, a regex that compiles."""
    if not isinstance(pattern, str) or _LOOKAROUND.search(pattern):
        return False
    # Python's re is stricter than ECMA-262 about a few escapes (`\p{L}`, `(?<name>`); those are
    # exactly the constructs llama.cpp's converter cannot handle either, so dropping them is safe.
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


# --------------------------------------------------------------------------- sanitise


@dataclass
class _Sanitiser:
    """One sanitising pass over one document; collects the bounds it dropped."""

    doc: dict[str, Any]
    strict_safe: bool
    dropped: list[Bound] = field(default_factory=list)
    inlining: tuple[str, ...] = ()
    budget: _Budget = field(default_factory=_Budget)

    # ---- refs

    def _def_target(self, tokens: list[str]) -> object | None:
        container = self.doc.get(tokens[0])
        if not isinstance(container, dict):
            return None
        return container.get(tokens[1])

    def _def_ref_ok(self, ref: str) -> bool:
        """True when a `#/$defs/X` ref reaches a schema (not missing, not a pure ref cycle)."""
        seen = {ref}
        current = ref
        while True:
            tokens = _pointer_tokens(current)
            if tokens is None or len(tokens) != 2 or tokens[0] not in _DEFS:
                return True  # leaves the defs: sanitising that target handles it on its own
            target = self._def_target(tokens)
            if target is None:
                return current != ref  # the first hop must exist; later misses become {}
            if not (isinstance(target, dict) and isinstance(target.get("$ref"), str)):
                return True
            current = target["$ref"]
            if current in seen:
                return False
            seen.add(current)

    def ref(self, ref: object, path: str) -> dict[str, Any]:
        """A `$ref` node: kept when it names a definition, inlined when it points elsewhere."""
        tokens = _pointer_tokens(ref) if isinstance(ref, str) else None
        if tokens is None:  # external, anchor or not a string
            return _empty()
        if len(tokens) == 2 and tokens[0] in _DEFS:
            return {"$ref": ref} if self._def_ref_ok(str(ref)) else _empty()
        # Any other local pointer (`#/properties/a`, `#`) would point into a document we are
        # rewriting, so its target is inlined; a pointer met again while inlining is a cycle.
        target = _resolve(self.doc, tokens)
        if target is None or ref in self.inlining:
            return _empty()
        inner = _Sanitiser(
            self.doc, self.strict_safe, self.dropped, (*self.inlining, str(ref)), self.budget
        )
        return inner.node(target, path)

    # ---- nodes

    def node(self, x: object, path: str) -> Any:
        """Sanitise the schema at one (non-root) schema position."""
        if isinstance(x, bool):
            return x
        if isinstance(x, str):
            return {"type": x} if x in KNOWN_TYPES and x != "object" else _empty()
        if not isinstance(x, dict):
            return _empty()
        budget = self.budget
        budget.nodes += 1
        if budget.depth >= MAX_DEPTH or budget.nodes > MAX_NODES:
            raise _Unwalkable(_Problem("deep" if budget.depth >= MAX_DEPTH else "large", path))
        # The depth is restored without a `finally`: an _Unwalkable abandons the whole walk.
        budget.depth += 1
        if "$ref" in x:
            ref = self.ref(x["$ref"], path)
            budget.depth -= 1
            return ref
        out: dict[str, Any] = {}
        for key, value in x.items():
            self._keyword(out, x, key, value, path)
        budget.depth -= 1
        if not self.strict_safe:
            out = self._collapse_unions(out)
        self._drop_contradictions(out, path)
        out = self._types(out, path)
        return _finish_object(out)

    def _keyword(
        self, out: dict[str, Any], x: dict[str, Any], key: str, value: Any, path: str
    ) -> None:
        sub = f"{path}/{key}"
        if key == "items" and isinstance(value, list):  # draft-07 tuple form
            if value:
                out["prefixItems"] = [self.node(s, f"{sub}/{i}") for i, s in enumerate(value)]
        elif key == "additionalItems":
            if isinstance(x.get("items"), list):
                out["items"] = self.node(value, sub)
        elif key in _SINGLE:
            out[key] = self.node(value, sub)
        elif key in _MAPS:
            if isinstance(value, dict):
                out[key] = {n: self.node(s, f"{sub}/{n}") for n, s in value.items()}
        elif key in _LISTS:
            if isinstance(value, list) and value:
                out[key] = [self.node(s, f"{sub}/{i}") for i, s in enumerate(value)]
        elif key == "dependencies":
            if isinstance(value, dict):
                out[key] = {n: _dependency(self, s, f"{sub}/{n}") for n, s in value.items()}
        elif key in _DEFS or key == "not":
            # Nested definitions are unreachable once refs are kept root-relative; `not` is
            # ignored by current llama.cpp and made older builds fail with a 500.
            return
        else:
            _keep_valid(out, x, key, value)

    def _collapse_unions(self, out: dict[str, Any]) -> dict[str, Any]:
        for key in _UNIONS:
            branches = out.get(key)
            if not isinstance(branches, list):
                continue
            real = [b for b in branches if not _is_null_branch(b)]
            # A lone `$ref` branch is not collapsed: the ref rule would strip `nullable` again.
            if len(real) != 1 or len(real) == len(branches) or not isinstance(real[0], dict):
                continue
            if "$ref" in real[0]:
                continue
            rest = {k: v for k, v in out.items() if k != key}
            out = {**real[0], **rest, "nullable": True}
        return out

    def _drop_contradictions(self, out: dict[str, Any], path: str) -> None:
        for low, high in BOUND_PAIRS:
            if low in out and high in out and out[low] > out[high]:
                self.dropped.append(Bound(path or "#", low, out[low], high, out[high]))
                # The lower bound goes: keeping the upper one keeps the grammar small.
                del out[low]

    def _types(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        kind = out.get("type")
        if kind is None or (isinstance(kind, str) and kind in KNOWN_TYPES):
            return out
        if not isinstance(kind, list):
            del out["type"]  # unknown name or not a string: llama.cpp rejects both
            return out
        if not all(isinstance(name, str) for name in kind):
            # A list of type names holding an object, a number, a list: not a spelling to
            # repair (as an unknown name is) but a schema that means nothing; the client's to fix.
            raise _Unwalkable(_Problem("type", path))
        names = _known_types(kind)
        rest = [t for t in names if t != "null"]
        nullable = len(rest) < len(names)
        if not names:
            del out["type"]
        elif not rest:
            out["type"] = "null"
        elif len(rest) == 1:
            out["type"] = [rest[0], "null"] if nullable and self.strict_safe else rest[0]
        else:
            out = _split_types(out, rest, nullable and self.strict_safe)
        if nullable and rest and not self.strict_safe:
            out["nullable"] = True
        return out

    # ---- root

    def root(self, x: object, *, root_object: bool) -> dict[str, Any]:
        if not isinstance(x, dict):
            return _empty()
        result = self.node(self._root_body(x), "#")
        if not isinstance(result, dict):
            result = _empty()
        if root_object or result.get("type") in (None, "object"):
            result = self._object_root(result)
        return self._attach_definitions(result)

    def _attach_definitions(self, root: dict[str, Any]) -> dict[str, Any]:
        """Sanitise and attach only the definitions some `$ref` reaches, transitively.

        Unreached definitions are never sanitised, so they give no notices about bounds in
        schemas that are not sent.
        """
        raw = {c: self.doc[c] for c in _DEFS if isinstance(self.doc.get(c), dict)}
        done: dict[str, dict[str, Any]] = {c: {} for c in raw}
        todo = _refs(root)
        while todo:
            tokens = _pointer_tokens(todo.pop()) or []
            if len(tokens) != 2 or tokens[0] not in raw or tokens[1] in done[tokens[0]]:
                continue
            container, name = tokens
            if name in raw[container]:
                schema = self.node(raw[container][name], f"#/{container}/{name}")
                done[container][name] = schema
                todo.extend(_refs(schema))
        for container, defs in done.items():
            if defs:
                root[container] = {n: defs[n] for n in raw[container] if n in defs}
        return root

    def _root_body(self, x: dict[str, Any]) -> dict[str, Any]:
        """The root without its definitions, with a root `$ref` followed to its target."""
        body = {k: v for k, v in x.items() if k not in _DEFS}
        seen: set[str] = set()
        while "$ref" in body:
            ref = body["$ref"]
            tokens = _pointer_tokens(ref) if isinstance(ref, str) else None
            target = None if tokens is None or ref in seen else _resolve(self.doc, tokens)
            if not isinstance(target, dict):
                return _empty()
            seen.add(str(ref))
            body = {k: v for k, v in target.items() if k not in _DEFS}
        return body

    def _object_root(self, root: dict[str, Any]) -> dict[str, Any]:
        if root.get("type") not in (None, "object") and not isinstance(root.get("type"), list):
            return _empty()  # a string or array root cannot be a tool's parameters
        props: dict[str, Any] = dict(root.get("properties") or {})
        required = list(root.get("required") or [])
        for branch in self._branches(root.get("allOf")):
            _merge_props(props, branch)
            required += [r for r in branch.get("required", []) if r not in required]
        for key in _UNIONS:
            branches = self._branches(root.get(key))
            for branch in branches:
                _merge_props(props, branch)
            if branches:
                common = set.intersection(*(set(b.get("required", [])) for b in branches))
                required += [r for r in _ordered(branches, common) if r not in required]
        out = {k: v for k, v in root.items() if k not in _ROOT_DROPPED}
        out["type"] = "object"
        out["properties"] = props
        if "required" in root or required:
            out["required"] = [r for r in required if r in props]
        return out

    def _branches(self, branches: object) -> list[dict[str, Any]]:
        """Root composition branches as object schemas, definition refs followed."""
        found: list[dict[str, Any]] = []
        for branch in branches if isinstance(branches, list) else []:
            seen: set[str] = set()
            while isinstance(branch, dict) and "$ref" in branch and branch["$ref"] not in seen:
                seen.add(branch["$ref"])
                tokens = _pointer_tokens(branch["$ref"]) or ["-", "-"]
                branch = self.node(self._def_target(tokens), "#")
            found.append(branch if isinstance(branch, dict) else {})
        return found


def _known_types(kind: list[Any]) -> list[str]:
    """The known type names in a `type` list, first occurrences in order.

    Anything else in the list (an unknown name, a number, an object) is passed over: an object
    or a list cannot even be looked up among the names, being unhashable.
    """
    return list(dict.fromkeys(t for t in kind if isinstance(t, str) and t in KNOWN_TYPES))


def _dependency(s: _Sanitiser, value: object, path: str) -> Any:
    if isinstance(value, list):
        return list(dict.fromkeys(v for v in value if isinstance(v, str)))
    return s.node(value, path)


def _keep_valid(out: dict[str, Any], x: dict[str, Any], key: str, value: Any) -> None:
    """Copy a non-schema keyword, dropping the values a converter or validator would reject."""
    keeper = _KEEPERS.get(key)
    kept = value if keeper is None else keeper(x, key, value)
    if kept is not _DROP:
        out[key] = kept


_DROP = object()  # what a keeper returns for a value not to send


def _keep_pattern(x: dict[str, Any], key: str, value: Any) -> Any:
    return value if pattern_ok(value) else _DROP


def _keep_enum(x: dict[str, Any], key: str, value: Any) -> Any:
    return value if isinstance(value, list) and value else _DROP


def _keep_required(x: dict[str, Any], key: str, value: Any) -> Any:
    if not isinstance(value, list):
        return _DROP
    return list(dict.fromkeys(v for v in value if isinstance(v, str)))


def _keep_count(x: dict[str, Any], key: str, value: Any) -> Any:
    count = _count(value)
    return _DROP if count is None else count


def _keep_bound(x: dict[str, Any], key: str, value: Any) -> Any:
    if key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
        # draft-04 boolean form: `minimum: 5, exclusiveMinimum: true` means `> 5`.
        bound = x.get("minimum" if key == "exclusiveMinimum" else "maximum")
        return bound if value and _is_number(bound) else _DROP
    return value if _is_number(value) and not _made_exclusive(x, key) else _DROP


def _keep_multiple(x: dict[str, Any], key: str, value: Any) -> Any:
    return value if _is_number(value) and value > 0 else _DROP


def _keep_string(x: dict[str, Any], key: str, value: Any) -> Any:
    return value if isinstance(value, str) else _DROP


def _keep_bool(x: dict[str, Any], key: str, value: Any) -> Any:
    return value if isinstance(value, bool) else _DROP


# Keyword -> the check of its value; keywords not listed are copied as they are.
_KEEPERS: dict[str, Callable[[dict[str, Any], str, Any], Any]] = {
    "pattern": _keep_pattern,
    "enum": _keep_enum,
    "required": _keep_required,
    **dict.fromkeys(_COUNTS, _keep_count),
    **dict.fromkeys(_NUMBERS, _keep_bound),
    "multipleOf": _keep_multiple,
    "format": _keep_string,
    "$comment": _keep_string,
    "uniqueItems": _keep_bool,
    # The meta-schema's URI says which draft a schema was written in (Claude Code's tools say
    # 2020-12): it constrains nothing a grammar could, and some converters refuse the keyword.
    "$schema": lambda _x, _key, _value: _DROP,
}


def _count(value: object) -> int | float | None:
    """A count keyword's value to send (`minItems`, `maxLength`, ...), or None to drop it.

    A whole float becomes an int (`2.0` -> `2`: converters read counts as integers), but only
    within 64 bits. Beyond that (orjson parses `1e21` as a float) the client's float is sent as
    written: as an int, orjson could not encode it again.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    if isinstance(value, int):
        return value
    if not value.is_integer():
        return None
    return int(value) if value < 2**63 else value


def _made_exclusive(x: dict[str, Any], key: str) -> bool:
    """True for `minimum`/`maximum` turned into a number by a draft-04 boolean exclusive."""
    partner = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}.get(key)
    return partner is not None and x.get(partner) is True


def _is_null_branch(branch: object) -> bool:
    return (
        isinstance(branch, dict)
        and branch.get("type") == "null"
        and all(k == "type" or k in _ANNOTATIONS for k in branch)
    )


def _split_types(out: dict[str, Any], rest: list[str], null_branch: bool) -> dict[str, Any]:
    """Several types become `anyOf` of single types, each taking its own keywords along."""
    moved: set[str] = set()
    branches: list[Any] = []
    for kind in rest:
        branch: dict[str, Any] = {"type": kind}
        for kw in _TYPE_KEYWORDS.get(kind, ()):
            if kw in out:
                branch[kw] = out[kw]
                moved.add(kw)
        branches.append(_finish_object(branch))
    if null_branch:
        branches.append({"type": "null"})
    result = {k: v for k, v in out.items() if k != "type" and k not in moved}
    if "anyOf" in result:  # keep both constraints: the existing union and the type union
        result["allOf"] = [*result.get("allOf", []), {"anyOf": branches}]
    else:
        result["anyOf"] = branches
    return result


def _finish_object(out: dict[str, Any]) -> dict[str, Any]:
    kind = out.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if is_object and "properties" not in out:
        out["properties"] = {}
    props = out.get("properties")
    if isinstance(props, dict) and isinstance(out.get("required"), list):
        out["required"] = [r for r in out["required"] if r in props]
    return out


def _merge_props(props: dict[str, Any], branch: dict[str, Any]) -> None:
    # First definition of a name wins: the root's own, then branches in order. Merging two
    # different schemas for one name into an `anyOf` would be more exact but is rare in practice.
    for name, schema in (branch.get("properties") or {}).items():
        props.setdefault(name, schema)


def _ordered(branches: list[dict[str, Any]], names: set[str]) -> list[str]:
    return [r for r in branches[0].get("required", []) if r in names] if branches else []


def _refs(node: object) -> list[str]:
    """Every `$ref` at a schema position below `node` (data keywords are not looked into)."""
    found: list[str] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        if not isinstance(cur, dict):
            continue
        if isinstance(cur.get("$ref"), str):
            found.append(cur["$ref"])
        stack.extend(_children(cur))
    return found


def _children(node: dict[str, Any]) -> list[object]:
    """The subschemas of a schema node."""
    kids: list[object] = []
    for key, value in node.items():
        if key in _SINGLE or key in ("not", "additionalItems"):
            kids.extend(value if isinstance(value, list) else [value])
        elif key in _MAPS or key in _DEFS or key == "dependencies":
            if isinstance(value, dict):
                kids.extend(value.values())
        elif key in _LISTS and isinstance(value, list):
            kids.extend(value)
    return kids


def _sanitise_uncached(
    schema: object, *, strict_safe: bool = False, root_object: bool = True
) -> tuple[dict[str, Any], list[Bound]]:
    doc = schema if isinstance(schema, dict) else {}
    walker = _Sanitiser(doc, strict_safe)
    return walker.root(schema, root_object=root_object), walker.dropped


# --------------------------------------------------------------------------- relax


def _relax_node(node: object) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("pattern", "format"):
            continue
        if key in _SINGLE or key in ("not", "additionalItems"):
            out[key] = (
                [_relax_node(v) for v in value] if isinstance(value, list) else (_relax_node(value))
            )
        elif (key in _MAPS or key in _DEFS or key == "dependencies") and isinstance(value, dict):
            out[key] = {n: _relax_node(s) for n, s in value.items()}
        elif key in _LISTS and isinstance(value, list):
            out[key] = [_relax_node(s) for s in value]
        else:
            out[key] = value
    return out


# --------------------------------------------------------------------------- contradictions


@dataclass(frozen=True)
class _Inspection:
    """A schema as written: its contradictory bounds, and where it first nests too deeply."""

    bounds: tuple[Bound, ...]
    too_deep: str | None


def _inspect(schema: object, max_depth: int = MAX_DEPTH) -> _Inspection:
    """Walk the schema positions as written (no sanitising), iteratively, in document order.

    Stops at the first schema object nested deeper than `max_depth` (the root is level 1).
    """
    found: list[Bound] = []
    stack: list[tuple[object, str, int]] = [(schema, "#", 1)]
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if depth > max_depth:
            return _Inspection(tuple(found), path)
        for low, high in BOUND_PAIRS:
            lo, hi = node.get(low), node.get(high)
            if _is_number(lo) and _is_number(hi) and lo > hi:  # type: ignore[operator]
                found.append(Bound(path, low, lo, high, hi))  # type: ignore[arg-type]
        stack.extend((s, p, depth + 1) for s, p in reversed(_child_paths(node, path)))
    return _Inspection(tuple(found), None)


def find_bounds(schema: object) -> list[Bound]:
    """Every contradictory bound pair at a schema position, as written (no sanitising)."""
    return list(_inspect(schema, sys.maxsize).bounds)


def _child_paths(node: dict[str, Any], path: str) -> list[tuple[object, str]]:
    kids: list[tuple[object, str]] = []
    for key, value in node.items():
        sub = f"{path}/{key}"
        if isinstance(value, list) and (key in _LISTS or key in _SINGLE):
            kids.extend((s, f"{sub}/{i}") for i, s in enumerate(value))
        elif key in _SINGLE or key in ("not", "additionalItems"):
            kids.append((value, sub))
        elif (key in _MAPS or key in _DEFS or key == "dependencies") and isinstance(value, dict):
            kids.extend((s, f"{sub}/{n}") for n, s in value.items())
    return kids


def find_contradictions(schema: object) -> list[tuple[str, str]]:
    """(path, lower-bound keyword) of every min>max pair, paths as `#/properties/a` fragments."""
    return [(b.path, b.keyword) for b in find_bounds(schema)]


# --------------------------------------------------------------------------- caching

_CACHE_SIZE = 4096


@dataclass(frozen=True)
class _Form:
    """The outgoing form of one schema: read-only, shared by every request that sends it."""

    schema: dict[str, Any]
    changed: bool  # differs from what the client sent
    dropped: tuple[Bound, ...]
    relax_removed: bool  # relaxing removed at least one keyword
    problem: _Problem | None = None  # set when the schema cannot be walked (then refused)


# What a schema orjson cannot encode gets. Parsed from a request (orjson.loads: valid UTF-8,
# numbers it can write again) that means one thing only: nested beyond orjson's 254 levels.
_UNENCODABLE = _Problem("deep", "")
_UNENCODABLE_FORM = _Form({}, False, (), False, _UNENCODABLE)


def _key(schema: object) -> bytes | None:
    # Not OPT_SORT_KEYS: property order is meaningful to grammar builders (it is the order the
    # model writes arguments in), and orjson.loads keeps a client's order stable turn to turn.
    try:
        return orjson.dumps(schema)
    except TypeError:  # orjson.JSONEncodeError: too deep, or not JSON data
        return None


# A request's list is keyed twice (checked in `passthrough_problem` before sending, sanitised in
# `apply_to_request`); `key_of` serialises it once, and not at all for a list it parsed.
_tools_key = knowntools.key_of


@lru_cache(maxsize=_CACHE_SIZE)
def _form_cached(key: bytes, strict_safe: bool, root_object: bool, relaxed: bool) -> _Form:
    return _build_form(orjson.loads(key), strict_safe, root_object, relaxed)


def _build_form(raw: object, strict_safe: bool, root_object: bool, relaxed: bool) -> _Form:
    # The raw object is a private parse of the key, so the result never aliases the client's.
    try:
        schema, dropped = _sanitise_uncached(raw, strict_safe=strict_safe, root_object=root_object)
    except _Unwalkable as err:
        return _Form({}, False, (), False, err.problem)
    removed = False
    if relaxed:
        loose = _relax_node(schema)
        removed = loose != schema
        schema = loose
    return _Form(schema, schema != raw, tuple(dropped), removed)


@lru_cache(maxsize=_CACHE_SIZE)
def _inspected(key: bytes) -> _Inspection:
    return _inspect(orjson.loads(key))


@lru_cache(maxsize=_CACHE_SIZE)
def _relax_cached(key: bytes) -> dict[str, Any]:
    return _relax_node(orjson.loads(key))


def clear_caches() -> None:
    """Forget every cached schema (tests and benchmarks)."""
    _form_cached.cache_clear()
    _inspected.cache_clear()
    _relax_cached.cache_clear()
    _tools_cached.cache_clear()
    _contradiction_cached.cache_clear()
    knowntools.clear()


def sanitise(
    schema: object,
    *,
    strict_safe: bool = False,
    root_object: bool = True,
    param: str = RESPONSE_SCHEMA_PARAM,
) -> dict[str, Any]:
    """BEHAVIOUR.md 3.2. Cached; never mutates `schema`; the result is shared and read-only.

    `strict_safe` never adds `nullable` (OpenAI strict mode rejects it): nullability stays a
    `["T", "null"]` type list or a `{"type": "null"}` branch. `root_object=False` keeps a root
    that declares a non-object type (a response format may ask for an array) instead of
    replacing it with an empty object. Raises SchemaError naming `param` for a schema that
    cannot be walked.
    """
    key = _key(schema)
    form = _UNENCODABLE_FORM if key is None else _form_cached(key, strict_safe, root_object, False)
    if form.problem is not None:
        raise _unwalkable(_Target(param, schema, root_object, param), form.problem)
    return form.schema


def relax(schema: dict[str, Any], *, param: str = RESPONSE_SCHEMA_PARAM) -> dict[str, Any]:
    """BEHAVIOUR.md 3.3: drop `pattern` and `format` at every schema position. Cached, read-only.

    Raises SchemaError naming `param` for a schema nested beyond MAX_DEPTH.
    """
    key = _key(schema)
    too_deep = "" if key is None else _inspected(key).too_deep
    if key is None or too_deep is not None:
        raise _unwalkable(_Target(param, schema, True, param), _Problem("deep", too_deep or ""))
    return _relax_cached(key)


# --------------------------------------------------------------------------- request bodies


@dataclass
class _Target:
    """One schema in a body: who owns it (for messages), the field it is, and its root's kind."""

    owner: str
    schema: object
    root_object: bool
    param: str  # the field an error names: `tools[3].function.parameters`, ...

    @property
    def code(self) -> str:
        return "invalid_tool_schema" if self.param.startswith("tools") else "invalid_json_schema"


def _tool_function(tool: object) -> dict[str, Any] | None:
    """The dict holding `parameters`: chat's `tool.function`, or a flat Responses-style tool."""
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function")
    if isinstance(fn, dict):
        return fn if "parameters" in fn else None
    if tool.get("type") == "function" and "parameters" in tool:
        return tool
    return None


def _declares_non_object(schema: object) -> bool:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        names = _known_types(kind)
        return bool(names) and "object" not in names
    return isinstance(kind, str) and kind in KNOWN_TYPES and kind != "object"


def _response_schema(body: dict[str, Any]) -> object | None:
    rf = body.get("response_format")
    if not isinstance(rf, dict) or rf.get("type") != "json_schema":
        return None
    js = rf.get("json_schema")
    return js["schema"] if isinstance(js, dict) and "schema" in js else None


def _apply_form(
    target: _Target, mode: str, relaxed: bool, notices: list[str]
) -> tuple[object, bool]:
    """The schema to send for one target, and whether relaxing removed anything.

    Raises SchemaError for a schema that cannot be walked and, in passthrough mode, for a
    contradictory bound. Every check is on a cached result: a schema seen before costs its
    serialisation (the cache key) and a lookup.
    """
    key = _key(target.schema)
    if key is None:
        raise _unwalkable(target, _UNENCODABLE)
    if mode == "passthrough":
        seen = _inspected(key)
        if seen.too_deep is not None:
            raise _unwalkable(target, _Problem("deep", seen.too_deep))
        if seen.bounds:
            raise _contradiction(target, seen.bounds[0])
        if not relaxed:
            return target.schema, False
    form = _form_cached(key, mode == "passthrough", target.root_object, relaxed)
    if form.problem is not None:
        raise _unwalkable(target, form.problem)
    notices.extend(_drop_notice(target.owner, b) for b in form.dropped)
    return (form.schema if form.changed else target.schema), form.relax_removed


def _unwalkable(target: _Target, problem: _Problem) -> SchemaError:
    where = f" (at {_short(problem.path)})" if problem.path else ""
    if problem.reason == "type":
        return SchemaError(
            target.param,
            f"The schema of {target.owner} has a 'type' list holding something other than type "
            f'names{where}. List names such as "string" and "null", or use anyOf.',
            target.code,
        )
    if problem.reason == "large":
        message = (
            f"The schema of {target.owner} expands to more than {MAX_NODES} schema objects"
            f"{where} once its local $ref pointers are inlined. Point at shared parts through "
            "$defs instead: those references are kept, not copied."
        )
    else:
        message = (
            f"The schema of {target.owner} is nested too deeply{where}: latchgate takes at most "
            f"{MAX_DEPTH} levels of schemas inside schemas, and JSON nested at most "
            f"{_JSON_DEPTH} levels. Flatten it: define repeated parts once under $defs and "
            "point at them with $ref."
        )
    return SchemaError(target.param, message, target.code)


def _contradiction(target: _Target, b: Bound) -> SchemaContradiction:
    message = (
        f"{target.owner} has {b.keyword} {_num(b.value)} above {b.upper} {_num(b.upper_value)} "
        f"at {_short(b.path)}: "
        f"no value can satisfy it and grammar-building servers can run out of memory on it; "
        f"lower {b.keyword} or raise {b.upper}."
    )
    return SchemaContradiction(
        target.owner, b.keyword, b.path, message, param=target.param, code=target.code
    )


def _num(value: float) -> str:
    """A bound as people write it: `5` for 5.0, but `1e+21` rather than twenty-two digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _short(path: str, limit: int = 200) -> str:
    """A schema path for a message or notice: property names are the client's, of any length."""
    return path if len(path) <= limit else path[: limit - 3] + "..."


def _drop_notice(owner: str, b: Bound) -> str:
    return (
        f"Dropped {b.keyword} {_num(b.value)} at {_short(b.path)} in {owner} because it exceeds "
        f"{b.upper} {_num(b.upper_value)} and no value could satisfy both."
    )


def apply_to_request(body: dict[str, Any], *, mode: str, relaxed: bool) -> SchemaResult:
    """Put the right form of every tool and response schema into a body (BEHAVIOUR.md 3).

    `mode` is "passthrough" or "sanitise" ("auto" is resolved by the caller). `relaxed` is True
    once the endpoint's `strict_schemas` latch is off. Never mutates `body`: only the tools list,
    the tool entries and the response format that change are copied.
    """
    if mode not in ("passthrough", "sanitise"):
        raise ValueError(f"schema mode must be 'passthrough' or 'sanitise', got {mode!r}")
    notices: list[str] = []
    any_relaxed = False
    out = body
    tools = body.get("tools")
    if isinstance(tools, list):
        new_tools, any_relaxed = _apply_tools(tools, mode, relaxed, notices)
        if new_tools is not tools:
            out = {**body, "tools": new_tools}
    schema = _response_schema(body)
    if schema is not None:
        target = _Target(
            _format_owner(body), schema, not _declares_non_object(schema), RESPONSE_SCHEMA_PARAM
        )
        new_schema, removed = _apply_form(target, mode, relaxed, notices)
        any_relaxed = any_relaxed or removed
        if new_schema is not schema:
            out = _with_response_schema(out if out is not body else {**body}, new_schema)
    return SchemaResult(out, out is not body, any_relaxed, notices)


@dataclass(frozen=True)
class _Refusal:
    """A SchemaError kept as data in the tools cache, raised afresh for each request.

    Not the exception object itself: one raised again and again would grow its traceback.
    """

    param: str
    message: str
    code: str
    contradiction: tuple[str, str, str] | None  # SchemaContradiction's tool, keyword, path

    @staticmethod
    def of(err: SchemaError) -> _Refusal:
        extra = (err.tool, err.keyword, err.path) if isinstance(err, SchemaContradiction) else None
        return _Refusal(err.param or "", err.message, err.code or "", extra)

    def error(self) -> SchemaError:
        if self.contradiction is None:
            return SchemaError(self.param, self.message, self.code)
        return SchemaContradiction(*self.contradiction, self.message, self.param, self.code)


@dataclass(frozen=True)
class _ToolsOutcome:
    """What one tools list becomes: the entries replaced, by index. Read-only and shared."""

    replacements: tuple[tuple[int, dict[str, Any]], ...]
    notices: tuple[str, ...]
    relaxed: bool
    error: _Refusal | None


def _tools_outcome(tools: list[Any], mode: str, relaxed: bool) -> _ToolsOutcome:
    notices: list[str] = []
    replacements: list[tuple[int, dict[str, Any]]] = []
    any_relaxed = False
    try:
        for i, tool in enumerate(tools):
            fn = _tool_function(tool)
            if fn is None:
                continue
            name = fn.get("name")
            owner = f"tool '{name}'" if isinstance(name, str) else f"tools[{i}]"
            params = fn["parameters"]
            param = f"tools[{i}].parameters" if fn is tool else f"tools[{i}].function.parameters"
            target = _Target(owner, params, True, param)
            new_params, removed = _apply_form(target, mode, relaxed, notices)
            any_relaxed = any_relaxed or removed
            if new_params is not params:
                new_fn = {**fn, "parameters": new_params}
                replacements.append((i, new_fn if fn is tool else {**tool, "function": new_fn}))
    except SchemaError as err:
        return _ToolsOutcome((), (), False, _Refusal.of(err))
    return _ToolsOutcome(tuple(replacements), tuple(notices), any_relaxed, None)


# A whole tools list is cached as well as each schema: the second turn of an agent run then
# pays one serialisation of the list instead of forty, which is what keeps it under 5% of the
# first turn. The per-schema cache still serves a list that changed by one tool.
@lru_cache(maxsize=256)
def _tools_cached(key: bytes, mode: str, relaxed: bool) -> _ToolsOutcome:
    return _tools_outcome(orjson.loads(key), mode, relaxed)


def _apply_tools(
    tools: list[Any], mode: str, relaxed: bool, notices: list[str]
) -> tuple[list[Any], bool]:
    key = _tools_key(tools)
    if key is None:
        outcome = _tools_outcome(tools, mode, relaxed)
    else:
        outcome = _tools_cached(key, mode, relaxed)
    if outcome.error is not None:
        raise outcome.error.error()
    notices.extend(outcome.notices)
    if not outcome.replacements:
        return tools, outcome.relaxed
    # An agent's list, the same every turn, gets the same sanitised list every turn, keyed once
    # (`knowntools.derived`): the body sent is then written with its bytes, not serialised.
    return knowntools.derived(tools, _sanitiser(mode, relaxed)), outcome.relaxed


@cache
def _sanitiser(mode: str, relaxed: bool) -> Callable[[list[Any]], list[Any]]:
    """The pure function making a tools list's sanitised form (one object per mode, as
    `knowntools.derived` keeps what it made by the function that made it)."""

    def sanitised(tools: list[Any]) -> list[Any]:
        key = _tools_key(tools)
        outcome = (
            _tools_outcome(tools, mode, relaxed)
            if key is None
            else _tools_cached(key, mode, relaxed)
        )
        # Entries that did not change stay the client's own objects; only the list is new.
        new_tools = list(tools)
        for i, entry in outcome.replacements:
            new_tools[i] = entry
        return new_tools

    return sanitised


def _format_owner(body: dict[str, Any]) -> str:
    name = body["response_format"]["json_schema"].get("name")
    return f"response_format '{name}'" if isinstance(name, str) else "response_format"


def _with_response_schema(body: dict[str, Any], schema: object) -> dict[str, Any]:
    rf = body["response_format"]
    body["response_format"] = {**rf, "json_schema": {**rf["json_schema"], "schema": schema}}
    return body


def passthrough_problem(body: dict[str, Any]) -> ProxyError | None:
    """In passthrough mode, min > max bounds are refused before sending, rather than sent to a
    grammar (found before the request is built; cached per tools list, like sanitising)."""
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        key = _tools_key(tools)
        found = _contradiction_of(tools) if key is None else _contradiction_cached(key)
        if found is not None:
            name, path, keyword = found
            return ProxyError(
                400,
                f"Tool {name!r} has an impossible schema: '{keyword}' at {path or '/'} "
                "contradicts its counterpart (the minimum is above the maximum). Fix the bound; "
                "no value can satisfy it.",
                param="tools",
                code="invalid_tool_schema",
            )
    return _response_contradiction(body)


def _contradiction_of(tools: list[Any]) -> tuple[Any, str, str] | None:
    """(tool name, path, keyword) of the first tool schema with a min > max pair."""
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            continue
        found = find_contradictions(fn.get("parameters"))
        if found:
            path, keyword = found[0]
            return fn.get("name"), path, keyword
    return None


# Every turn of an agent run declares the same tools: the walk over their schemas (most of the
# work for a 60 KB set) is done once per distinct list, as sanitising is.
@lru_cache(maxsize=256)
def _contradiction_cached(key: bytes) -> tuple[Any, str, str] | None:
    return _contradiction_of(orjson.loads(key))


def _response_contradiction(body: dict[str, Any]) -> ProxyError | None:
    """The same check for `response_format.json_schema.schema`.

    Without it, apply_to_request raised SchemaContradiction from `prepare` and the client got a
    500 "internal error" instead of a 400 naming the bound.
    """
    rf = body.get("response_format")
    if not isinstance(rf, dict) or rf.get("type") != "json_schema":
        return None
    js = rf.get("json_schema")
    if not isinstance(js, dict):
        return None
    found = find_contradictions(js.get("schema"))
    if not found:
        return None
    path, keyword = found[0]
    return ProxyError(
        400,
        f"Response format {js.get('name')!r} has an impossible schema: '{keyword}' at {path} "
        "contradicts its counterpart (the minimum is above the maximum). Fix the bound; "
        "no value can satisfy it.",
        param="response_format",
        code="invalid_json_schema",
    )
