"""Tool calls checked against the request's tools, so that a wrong call can go back to the model.

A model, small ones above all, calls tools that were never declared, writes arguments that are
not JSON or not an object, and leaves out required properties or picks a value outside an enum.
The client's agent then fails the call, or worse runs it. latchgate "self-heals" such a call: it
sends it back to the model with what was wrong. This module is the pure part of that: given a
reply's tool calls (native or recovered from text) and the request's `tools`, it says which calls
fail and why, in one short sentence per call that a small model can act on (the path and the
problem: `at 'unit': "kelvin" is not one of "celsius" or "fahrenheit"`). No I/O, never raises.

Schemas are compiled with jsonschema-rs (bench/bench_validators.py: about 50x faster to compile
and 50x faster to validate than jsonschema, and the only candidate right on every odd schema we
tried; RESULTS.md). Compiled validators are kept in a bounded LRU cache keyed by the schema's
canonical bytes, so an agent that repeats its tools on every turn compiles each schema once and a
client that sends ever new schemas cannot grow memory. A schema that does not compile is cached
as such and its tool reported in `Checked.skipped`: its calls go through unvalidated, because
latchgate must never refuse a call for a schema it could not read.

Validation is against the client's schema as declared, not the sanitised copy the proxy sends to
servers (proxy/agent/schemas.py): the client will check its own schema. It is lenient where the
client may well be: `format` is an annotation (unknown formats compile, known ones are not
asserted), and a remote `$ref` is never fetched (such a schema is skipped).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from typing import Any

import jsonschema_rs
import orjson

UNKNOWN_TOOL = "unknown_tool"
UNPARSEABLE = "unparseable"
NOT_OBJECT = "not_object"
INVALID = "invalid"

CACHE_SIZE = 512  # compiled schemas kept; an agent declares tens, so this holds many agents
MAX_ERRORS = 3  # schema errors named per call: more would drown a small model
MAX_LISTED = 20  # declared tool names listed in an unknown_tool detail
MESSAGE_CHARS = 200  # one error message, clipped in the middle (it quotes the offending value)
NAME_CHARS = 80  # the called tool name as shown in a detail

# Exceptions that must pass through even our "never raise" guards; everything else (including a
# Rust panic surfaced by pyo3 as a BaseException) means "could not compile / validate".
_FATAL = (KeyboardInterrupt, SystemExit)


@dataclass(frozen=True, slots=True)
class Problem:
    """One failing tool call: where it is, which tool it named, what kind of failure, and why."""

    index: int  # the call's position among the reply's tool calls
    name: str  # the tool name the model used ("" when the call names none)
    kind: str  # UNKNOWN_TOOL | UNPARSEABLE | NOT_OBJECT | INVALID
    detail: str  # one short plain sentence for the model and for the notice


@dataclass(frozen=True, slots=True, init=False)  # its own __init__: see proxy/compiled.py
class Checked:
    """The outcome for a reply's calls: the failing ones, and the tools that went unvalidated."""

    problems: tuple[Problem, ...]
    skipped: tuple[str, ...]  # tool names whose schema could not be compiled (not validated)

    def __init__(self, problems: tuple[Problem, ...], skipped: tuple[str, ...]) -> None:
        object.__setattr__(self, "problems", problems)
        object.__setattr__(self, "skipped", skipped)

    @property
    def ok(self) -> bool:
        """True when no call has a problem."""
        return not self.problems


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What the schema cache holds and how often it compiled (for tests and metrics)."""

    entries: int
    compiled: int  # schemas compiled since the last clear, successfully or not
    failed: int  # of those, the ones that did not compile


# `validator_for` returns one of several draft classes; they share this interface.
Validator = Any


@dataclass(frozen=True, slots=True)
class _Rejected:
    """Arguments that are no object: the Problem's kind and detail, without index and name."""

    kind: str
    detail: str


class _SchemaCache:
    """A bounded LRU of compiled validators (None: the schema did not compile), keyed by the
    schema's canonical bytes. functools.lru_cache would need hashable arguments, and keying it by
    the bytes would hide the counters the tests read."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[bytes, Validator | None] = OrderedDict()
        self.compiled = 0
        self.failed = 0

    def get(self, schema: Any) -> Validator | None:
        """The validator for `schema`, compiled on first sight; None when it cannot compile."""
        try:
            key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            return None  # not JSON at all (cannot come from a parsed request): not cached
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        validator = self._compile(schema)
        self.entries[key] = validator
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return validator

    def _compile(self, schema: Any) -> Validator | None:
        self.compiled += 1
        try:
            # offline: jsonschema-rs would otherwise fetch a remote `$ref` over HTTP. Formats are
            # annotations (draft-07 schemas would otherwise assert email, uri, date-time...): a
            # model's "next tuesday" is the client's to judge, not a reason to bounce the call.
            return jsonschema_rs.validator_for(
                schema, offline=True, validate_formats=False, ignore_unknown_formats=True
            )
        except _FATAL:
            raise
        except BaseException:
            self.failed += 1
            return None

    def clear(self) -> None:
        self.entries.clear()
        self.compiled = 0
        self.failed = 0


_CACHE = _SchemaCache(CACHE_SIZE)

# Marks a declared tool without `parameters` (it accepts any object), and a name not declared.
_ANY_OBJECT: dict[str, Any] = {}
_UNDECLARED: dict[str, Any] = {}


def clear_caches() -> None:
    """Forget every compiled schema and reset the counters."""
    _CACHE.clear()


def cache_stats() -> CacheStats:
    """The schema cache's size and counters."""
    return CacheStats(len(_CACHE.entries), _CACHE.compiled, _CACHE.failed)


def check_calls(calls: object, tools: object) -> Checked:
    """Check a reply's tool calls (OpenAI chat form, `function.arguments` a JSON string) against
    the request's chat `tools`; return the failing calls and the tools that could not be
    validated. Odd input of any shape is reported or ignored, never raised on."""
    declared = tools if isinstance(tools, list) else []
    problems: list[Problem] = []
    skipped: list[str] = []
    for index, call in enumerate(calls if isinstance(calls, list) else []):
        name, arguments = _name_and_arguments(call)
        problem = _check_one(index, name, arguments, declared, skipped)
        if problem is not None:
            problems.append(problem)
    return Checked(tuple(problems), tuple(skipped))


def schema_of(tools: list[Any], name: str) -> Any:
    """The `parameters` of the first well-formed function tool called `name` (the first wins, as
    a server reading the list in order would pick it); `_ANY_OBJECT` for a tool without them,
    `_UNDECLARED` when there is none. A scan that stops at the match rather than a name -> schema
    dict built per reply: building that dict costs 9 µs for the agent tool set's 20 tools, the
    scan half of it on average, and a reply usually makes one call."""
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            parameters = function.get("parameters")
            return _ANY_OBJECT if parameters is None else parameters
    return _UNDECLARED


def declared_names(tools: list[Any]) -> list[str]:
    """The names of the well-formed function tools, each once, in declaration order."""
    names: dict[str, None] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            names[name] = None
    return list(names)


def _name_and_arguments(call: Any) -> tuple[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return "", None
    name = function.get("name")
    return (name if isinstance(name, str) else ""), function.get("arguments")


def _check_one(
    index: int, name: str, arguments: Any, tools: list[Any], skipped: list[str]
) -> Problem | None:
    schema = schema_of(tools, name) if name else _UNDECLARED
    if schema is _UNDECLARED:
        return Problem(index, name, UNKNOWN_TOOL, unknown_tool_detail(name, declared_names(tools)))
    parsed = _parse(arguments)
    if isinstance(parsed, _Rejected):
        return Problem(index, name, parsed.kind, parsed.detail)
    if schema is _ANY_OBJECT:
        return None
    validator = _CACHE.get(schema)
    errors = None if validator is None else _errors(validator, parsed)
    if errors is None:
        if name not in skipped:
            skipped.append(name)
        return None
    if not errors:
        return None
    return Problem(index, name, INVALID, invalid_detail(name, errors))


def _parse(arguments: Any) -> dict[str, Any] | _Rejected:
    """The arguments as an object, or why they are not one."""
    if isinstance(arguments, dict):
        return arguments  # a server that sent an object where a string belongs meant this
    if not isinstance(arguments, str):
        kind = "nothing" if arguments is None else f"a value of type {type(arguments).__name__}"
        return _Rejected(UNPARSEABLE, f"The arguments must be a JSON object; got {kind}.")
    if not arguments.strip():
        return {}  # "" means "no arguments", as proxy/toolcalls/arguments.py repairs it
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError as error:
        return _Rejected(UNPARSEABLE, f"The arguments are not valid JSON: {error}.")
    if not isinstance(value, dict):
        shown = _clip(arguments.strip(), 60)
        return _Rejected(NOT_OBJECT, f"The arguments must be a JSON object; got {shown}.")
    return value


def _errors(validator: Validator, instance: dict[str, Any]) -> list[str] | None:
    """Up to MAX_ERRORS + 1 error lines (the extra one only says there are more), or None when the
    validator fails (the call is then treated as unvalidated, like an uncompilable schema)."""
    try:
        # is_valid first: 0.7 µs against 1.8 for an empty iter_errors on the shell tool's schema;
        # an error object costs 5-10 µs (pyo3 builds its messages), so only failing calls pay it.
        if validator.is_valid(instance):
            return []
        errors = islice(validator.iter_errors(instance), MAX_ERRORS + 1)
        return [_error_line(error) for error in errors]
    except _FATAL:
        raise
    except BaseException:
        return None


def _error_line(error: Any) -> str:
    message = _clip(str(error.message), MESSAGE_CHARS)
    path = instance_path(list(error.instance_path))
    return f"at '{path}': {message}" if path else message


def instance_path(parts: list[str | int]) -> str:
    """A JSON location as a model reads it: `days[1]`, `options.unit`; "" for the root."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def invalid_detail(name: str, errors: list[str]) -> str:
    """One sentence naming the schema errors of a call to `name`, at most MAX_ERRORS of them."""
    shown = "; ".join(errors[:MAX_ERRORS])
    more = " (and more)" if len(errors) > MAX_ERRORS else ""
    return f"The arguments do not match the schema of {_quoted(name)}: {shown}{more}."


def unknown_tool_detail(name: str, declared: list[str]) -> str:
    """One sentence saying `name` is not declared and listing (some of) the declared names."""
    called = f"There is no tool named {_quoted(name)}" if name else "The call names no tool"
    if not declared:
        return f"{called}; the request declares no tools."
    listed = ", ".join(declared[:MAX_LISTED])
    more = f" and {len(declared) - MAX_LISTED} more" if len(declared) > MAX_LISTED else ""
    return f"{called}; the declared tools are: {listed}{more}."


def _quoted(name: str) -> str:
    return f"'{_clip(name, NAME_CHARS)}'"


def _clip(text: str, limit: int) -> str:
    """`text` cut in the middle to `limit` characters: the end of a message says what is wrong,
    the start which value it is, so both ends stay."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]} … {text[-half:]}"
