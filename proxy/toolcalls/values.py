"""Calls from values: a parsed JSON value read as calls, and a parameter's text typed by the
tool's schema.

Every format ends in one of these once its markers are stripped: JSON objects in a wrapper or a
list (`json_calls`), an object cut off at the end of a reply (`partial_calls`), Python-style
calls (`pythonic_calls`, in `pythonic.py`), or XML-style parameters whose text is typed by the
schema (`typed_value`). Compiled (proxy/compiled.py): a wrapper nested in a wrapper is opened
by a loop over a stack, not by recursion.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

import orjson

from proxy.toolcalls.arguments import loads_lenient
from proxy.toolcalls.pythonic import pythonic_calls
from proxy.toolcalls.scan import Scan, past_end_tokens, skip, string_end, value_end
from proxy.toolcalls.spans import Ctx, RawCall, Schemas

_CALL_KEYS = {
    "name",
    "arguments",
    "parameters",
    "args",
    "id",
    "type",
    "function",
    "tool",
    "tool_input",
    "input",
    "tool_name",
    "tool_call_id",
}
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_NAME_KEYS = ("name", "tool", "tool_name")
_WRAPPER_KEYS = ("function", "tool_calls", "tool_call")


def calls_from_value(
    value: Any, repaired: bool, schemas: Schemas, strict: bool = False
) -> list[RawCall] | None:
    """The calls a parsed JSON value spells, or None when it is not (only) calls.

    `strict` is for JSON standing alone with no marker (bare and fenced forms): it then needs an
    arguments key, a `type` of "function" if any, and arguments that are not a JSON Schema, so
    config objects, API examples and an echoed tools list stay text; and a list must be nothing
    but calls. Without `strict` a marker vouches for what follows it: a list item that is no
    readable call is dropped and its siblings kept (None only when no item is a call).
    """
    if isinstance(value, dict):
        return _calls_from_obj(value, repaired, schemas, strict)
    if isinstance(value, list) and value:
        return _calls_from_list(value, repaired, schemas, strict)
    return None


def _calls_from_obj(
    obj: dict[str, Any], repaired: bool, schemas: Schemas, strict: bool
) -> list[RawCall] | None:
    """The calls one JSON object stands for (see `_opened`)."""
    items, calls = _opened(obj, repaired, schemas, strict)
    return calls if items is None else _calls_from_list(items, repaired, schemas, strict)


class _Reading:
    """A list of calls being read (`_calls_from_list`): its items, the next one's place, and
    the calls read from those before it."""

    __slots__ = ("calls", "items", "next")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.next = 0
        self.calls: list[RawCall] = []


def _calls_from_list(
    items: list[Any], repaired: bool, schemas: Schemas, strict: bool
) -> list[RawCall] | None:
    """The calls of a non-empty list's items, in order (see `calls_from_value`). An item that
    wraps a list of its own (`{"tool_calls": [...]}`) is read on a stack of the lists open, so
    that a model's nesting, however deep, costs no recursion."""
    stack = [_Reading(items)]
    found: list[RawCall] | None = None  # what the item read last gave
    opened = True  # the list on top has just been opened: no item of it is read yet
    while stack:
        top = stack[-1]
        if not opened:
            if found:
                top.calls.extend(found)
            elif strict:
                stack.pop()  # no marker: a list with anything but calls in it is data
                continue  # `found` (None) is what the list gave
            # else a marker vouches for its calls: an unreadable one is dropped alone
        opened = False
        if top.next == len(top.items):
            stack.pop()
            found = top.calls or None
            continue
        item = top.items[top.next]
        top.next += 1
        found = None
        if isinstance(item, dict):
            inner, found = _opened(item, repaired, schemas, strict)
            if inner is not None:
                stack.append(_Reading(inner))
                opened = True
    return found


def _opened(
    obj: dict[str, Any], repaired: bool, schemas: Schemas, strict: bool
) -> tuple[list[Any] | None, list[RawCall] | None]:
    """What one JSON object stands for, its wrappers (`tool_call`, `function`) opened: the
    non-empty list of a `tool_calls` wrapper to read (and None), or None and its calls: those
    of Apertus' `{"NAME": {args}}` or of one `{name, arguments}` call, None when it is neither."""
    while True:
        if len(obj) == 1:
            listed = obj.get("tool_calls")
            if isinstance(listed, list):
                return (listed, None) if listed else (None, None)
            inner = obj.get("tool_call")
            if isinstance(inner, dict):
                obj = inner
                continue
        if strict and obj.get("type", "function") != "function":
            return None, None
        function = obj.get("function")
        if not isinstance(function, dict):
            break
        rest = {k: v for k, v in obj.items() if k not in ("function", "type", "id")}
        obj = {**rest, **function}
    if len(obj) == 1:
        ((key, val),) = obj.items()
        if key in schemas and isinstance(val, dict):  # Apertus: {"NAME": {args}}
            # Only when every key is a parameter of that tool: {"search": {"enabled": true}}
            # is configuration, not a call.
            fits = bool(val) and set(val) <= set(tool_props(schemas, key))
            return None, [(key, val, repaired)] if fits else None
    return None, _named_call(obj, repaired, strict)


def _named_call(obj: dict[str, Any], repaired: bool, strict: bool) -> list[RawCall] | None:
    """`{name, arguments}` (or `parameters`, `args`...) as one call; None when it is not."""
    if not set(obj) <= _CALL_KEYS:
        return None
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), "")
    if not name.strip():
        return None
    keys = [k for k in _ARG_KEYS if k in obj]
    # Both `arguments` and `parameters` (Llama 3's key): the one that holds something wins, as
    # in SGLang (`parameters or arguments`); vLLM takes `arguments` even when it is empty.
    arg_key = next((k for k in keys if obj[k] not in (None, "", {})), keys[0] if keys else None)
    if strict and (arg_key is None or _is_schema(obj[arg_key])):
        return None
    args = obj[arg_key] if arg_key is not None else {}
    return [(name.strip(), {} if args is None else args, repaired)]


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "object" and "properties" in value


def json_calls(text: str, schemas: Schemas, strict: bool = False) -> list[RawCall] | None:
    """Calls in one complete JSON (or almost-JSON, or pythonic) value's text.

    Without `strict` (a marker vouches for the value) a list whose whole text cannot be read,
    say for one item's `NaN`, is read item by item, and the readable calls are kept.
    """
    stripped = text.strip()
    found = _parsed_calls(text, stripped, schemas, strict)
    if found is None and stripped.startswith("["):
        found = pythonic_calls(stripped, schemas, strict)
        if found is None and not strict:
            found = _listed_calls(stripped, schemas)
    return found


def _parsed_calls(text: str, stripped: str, schemas: Schemas, strict: bool) -> list[RawCall] | None:
    """`json_calls` of `text` (`stripped`: without the whitespace around it) as one parsed
    value, before a list is read any other way."""
    parsed = _plain_json(stripped)
    if parsed is not None:
        # Valid JSON with no escape in it: its keys are the parsed ones, and the look at them
        # is made on the value (a scan of the text cost more than the rest of reading a call).
        if not _value_may_be_call(parsed[0], schemas):
            return None
    elif not _may_be_call(stripped, schemas):
        return None
    else:
        parsed = loads_lenient(text)
    return calls_from_value(parsed[0], parsed[1], schemas, strict) if parsed is not None else None


def _listed_calls(text: str, schemas: Schemas) -> list[RawCall] | None:
    """The readable calls of a JSON list of objects, each read alone; None when there are none."""
    calls: list[RawCall] = []
    i = skip(text, 1)
    while i < len(text) and text[i] == "{":
        end = value_end(text, i)
        if end is None:
            break
        item = text[i:end]  # an object: what `json_calls` reads of it is its parse
        calls.extend(_parsed_calls(item, item.strip(), schemas, False) or [])
        i = skip(text, end, ",")
    return calls or None


def _plain_json(text: str) -> tuple[Any, bool] | None:
    """`text` parsed as `loads_lenient` parses valid JSON, when it is valid JSON holding no
    backslash (then each key's text is the key: `_top_keys` would find the parsed keys)."""
    if "\\" in text:
        return None
    try:
        return orjson.loads(text), False
    except orjson.JSONDecodeError:
        return None


def _value_may_be_call(value: Any, schemas: Schemas) -> bool:
    """`_may_be_call` on the text of `value`, a parsed JSON value whose text has no escape."""
    if type(value) is list:
        if not value:
            return False
        first = value[0]
        if type(first) is dict:
            return _keys_may_be_call(first, schemas)
        # `[true, ...]`: its first element opens like an identifier, as `_may_be_call` asks.
        return first is True or first is False or first is None
    if type(value) is not dict:
        return False
    return _keys_may_be_call(value, schemas)


def _keys_may_be_call(keys: dict[str, Any], schemas: Schemas) -> bool:
    """Whether an object with these keys may be a call: a name or a wrapper, or a tool's name
    (Apertus)."""
    return any(k in keys for k in (*_NAME_KEYS, *_WRAPPER_KEYS)) or any(k in schemas for k in keys)


def _may_be_call(text: str, schemas: Schemas) -> bool:
    """A linear look at the top-level keys before a lenient parse: the json_repair fallback
    costs seconds on a few hundred KB of brace-balanced prose, which can never be a call."""
    if text.startswith("["):
        i = skip(text, 1)
        return i < len(text) and (
            (text[i] == "{" and _keys_may_be_call(_top_keys(text[i:]), schemas))
            or text[i].isidentifier()
        )
    return _keys_may_be_call(_top_keys(text), schemas)


def partial_calls(text: str, schemas: Schemas) -> list[RawCall]:
    """Calls in a value that does not close; an unclosed last call keeps raw arguments."""
    if text.startswith("["):
        calls: list[RawCall] = []
        i = skip(text, 1, ",")
        while i < len(text) and text[i] == "{":
            end = value_end(text, i)
            if end is None:
                last = _partial_object(text[i:])  # the object cut off, as a value alone is read
                return [*calls, last] if last is not None else calls
            calls.extend(json_calls(text[i:end], schemas) or [])
            i = skip(text, end, ",")
        return calls
    call = _partial_object(text)
    return [call] if call is not None else []


def _partial_object(text: str) -> RawCall | None:
    """`{"name": .., "arguments": ..` without its end: name and arguments from depth-1 keys only
    (a nested "name" inside the arguments is not the call's name)."""
    keys = _top_keys(text)
    name = next((_string_at(text, keys[k]) for k in _NAME_KEYS if k in keys), None)
    arg_at = next((keys[k] for k in _ARG_KEYS if k in keys), None)
    if not name or not name.strip() or arg_at is None:
        return None
    end = value_end(text, arg_at) if text.startswith(("{", "["), arg_at) else None
    args = text[arg_at:end] if end is not None else text[arg_at:].rstrip()
    return (name.strip(), args, False)


# What `_top_keys` stops at: a quote or a bracket; what lies between is skipped in one search.
_KEY_STOP = re.compile(r"[\"'{}\[\]]")


def _top_keys(text: str) -> dict[str, int]:
    """Key -> index of its value, for the keys of the object opening text (depth 1 only).

    A search for the next quote or bracket, not a loop over every character (a call's arguments
    can hold a whole file): the text between them matters only by its last non-space character
    (what a single quote follows)."""
    keys: dict[str, int] = {}
    if not text.startswith("{"):
        return keys
    depth, i, prev, n = 0, 0, "", len(text)
    search = _KEY_STOP.search
    while i < n:
        m = search(text, i)
        if m is None:
            break
        at = m.start()
        if at > i and (between := text[i:at].rstrip()):
            prev = between[-1]
        c = text[at]
        if c == '"' or (c == "'" and prev in "{[,:"):
            j = string_end(text, at)
            if j < 0:
                break
            k = skip(text, j)
            if depth == 1 and k < n and text[k] == ":":
                keys.setdefault(text[at + 1 : j - 1], skip(text, k + 1))
            i, prev = j, '"'
            continue
        if c != "'":
            depth += 1 if c in "{[" else -1
            if depth == 0:
                break
        prev = c
        i = at + 1
    return keys


def _string_at(text: str, i: int) -> str | None:
    if i >= len(text) or text[i] not in "\"'":
        return None
    j = string_end(text, i)
    return text[i + 1 : j - 1] if j > 0 else None


# -- a parameter's text typed by its schema (XML-parameter formats: Qwen3-Coder, GLM, ...) -----
#
# A schema may allow several types (`"type": ["integer", "string"]`, `anyOf`, `oneOf`): the text
# takes the first type, in the schema's order, that it fits, a string type last (every text fits
# one), so "42" is 42 for ["integer", "string"] and for ["string", "integer"], and "2 dollars" is
# a string for both. A text that fits none stays the raw string. The type names are the JSON
# Schema ones plus the aliases the Qwen3-Coder parser of vLLM accepts (int, float, bool, str...).
_STRING_KINDS = ("string", "str", "text", "varchar", "char", "enum")
_INT_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_FLOAT_PREFIXES = ("num", "float", "double", "decimal")
_BOOL_KINDS = ("boolean", "bool", "binary")
_OBJECT_KINDS = ("object", "dict", "map")
_ARRAY_KINDS = ("array", "list", "tuple", "arr", "sequence")
_JSON_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
               dict: "object", list: "array"}  # fmt: skip
# A plain number literal (JSON's, with a leading "+" and leading zeros tolerated): "1_000", "٣"
# or " 0x1F" are text, though Python's int() would read them.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_NON_FINITE_WORDS = frozenset({"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity",
                               "-infinity", "+infinity"})  # fmt: skip
_MISS = object()  # the text does not fit a type
_NON_FINITE = object()  # the text is a number JSON cannot hold (1e999, NaN, Infinity)


def _schema_types(prop: dict[str, Any]) -> list[str]:
    """The type names a property allows, in the schema's order (lowercase; "null" included):
    `type` (a name or a list), then each `anyOf`/`oneOf` branch's; with none, the JSON types of
    its `enum` values."""
    found: list[Any] = []
    for node in (prop, *(b for k in ("anyOf", "oneOf") for b in prop.get(k) or [])):
        if isinstance(node, dict):
            kind = node.get("type")
            found.extend(kind if isinstance(kind, list) else [kind])
    if not any(found) and isinstance(prop.get("enum"), list):
        found = [_JSON_KINDS.get(type(v)) for v in prop["enum"]]
    names = [str(t).lower().strip() for t in found if t]
    return list(dict.fromkeys(names))


def schema_type(prop: dict[str, Any] | None) -> tuple[str, bool]:
    """(the first concrete type a property allows, whether it allows null); "string" when the
    schema names no type."""
    if not isinstance(prop, dict):
        return "", False
    types = _schema_types(prop)
    concrete = [t for t in types if t != "null"]
    return (concrete[0] if concrete else "string"), "null" in types


def typed_value(raw: str, prop: dict[str, Any] | None, *, strict: bool = False) -> Any:
    """A parameter's text typed by its schema (union types: the first type it fits, in the
    schema's order, a string last: every text fits a string, so `["string", "integer"]` would
    never give an integer otherwise; "2" is 2 there, and "2 dollars" stays a string).

    Strings are kept as written, whitespace and all (the caller removes the template's framing);
    other types are read from the stripped text. `null` (or Python's `None`) is None when the
    schema allows null or no string. A number JSON cannot hold (`1e999`, `NaN`, `Infinity`,
    also inside an object or array) fits no numeric type: it is never sent as null or inf. When
    no other type takes it, `strict` raises ValueError (the finder then rejects the call, which
    stays text); without `strict` the raw string is kept.
    """
    if prop is None:
        return raw  # a parameter the schema does not know stays text
    if not isinstance(prop, dict):
        prop = {}
    types = _schema_types(prop)
    concrete = [t for t in types if t != "null"] or ["string"]
    concrete.sort(key=lambda t: t in _STRING_KINDS)  # stable: the schema's order otherwise
    text = raw.strip()
    if text.lower() in ("null", "none") and (
        "null" in types or not any(t in _STRING_KINDS for t in concrete)
    ):
        return None
    non_finite = False
    for kind in concrete:
        value = _as_kind(raw, text, kind)
        if value is _NON_FINITE:
            non_finite = True
        elif value is not _MISS:
            return value
    if non_finite and strict:
        raise ValueError(f"not a finite number: {text[:40]!r}")
    return raw


def _as_kind(raw: str, text: str, kind: str) -> Any:
    """The text read as one schema type; _MISS when it does not fit, _NON_FINITE for a number
    JSON cannot hold."""
    if kind in _STRING_KINDS:
        return raw
    if kind.startswith(_INT_PREFIXES):
        return _number(text, int)
    if kind.startswith(_FLOAT_PREFIXES):
        return _number(text, float)
    if kind in _BOOL_KINDS:
        low = text.lower()
        return True if low == "true" else False if low == "false" else _MISS
    value = _parsed(text)
    if value is _MISS or value is _NON_FINITE:
        return value
    if kind in _OBJECT_KINDS:
        return value if isinstance(value, dict) else _MISS
    if kind in _ARRAY_KINDS:
        return value if isinstance(value, list) else _MISS
    return value  # a type name of no family above ("any"): whatever the text parses as


def _parsed(text: str) -> Any:
    """JSON (or almost-JSON, or a Python literal) text's value; _MISS when it is none, or holds
    what JSON cannot (a set, bytes); _NON_FINITE when it holds a non-finite number."""
    found = _escaped_json(text) if '\\"' in text else None
    found = found or loads_lenient(text)
    if found is not None:
        value = found[0]
    else:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return _MISS
    return _plain(value)


def _escaped_json(text: str) -> tuple[Any, bool] | None:
    """JSON written as the body of a JSON string (`[{\\"id\\": \\"1\\"}]`: GLM 4.5-4.7 do it
    for array and object values, SGLang's glm4_moe tests): the value once unescaped, read
    strictly (valid JSON as it is, read once); None when the text is neither. A lenient read
    of the escaped text would make one object with a key of the whole text."""
    if not text.startswith(("{", "[")):
        return None
    try:
        return orjson.loads(text), False  # valid as it is: its escapes are its strings' own
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(orjson.loads(f'"{text}"')), True
    except orjson.JSONDecodeError:
        return None


def _plain(value: Any) -> Any:
    """`value` when JSON can hold it as it is; _NON_FINITE for a non-finite float anywhere in
    it; _MISS for anything else (tuples, sets, bytes, non-string keys)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return _NON_FINITE
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return _MISS
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not isinstance(item, (str, int, float, bool)) and item is not None:
            return _MISS
    return value


def _number(text: str, kind: type) -> Any:
    """The stripped text as an integer (`kind` int) or a number: _MISS when it is not a plain
    number literal; _NON_FINITE for 1e999, NaN or Infinity. A number with no fraction is sent
    as an integer ("2.0" -> 2), an integer parameter takes one ("3.0", "1e3")."""
    if text.lower() in _NON_FINITE_WORDS:
        return _NON_FINITE
    if kind is int and _INTEGER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # past Python's digit limit for int(): too long to be an integer
            return _MISS
    if not _NUMBER.fullmatch(text):
        return _MISS
    value = float(text)
    if not math.isfinite(value):
        return _NON_FINITE
    if value.is_integer():
        return int(value)
    return _MISS if kind is int else value


def tool_props(schemas: Schemas, name: str) -> dict[str, Any]:
    params = schemas.get(name) or {}
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


def json_seq(s: str, i: int, ctx: Ctx, calls: list[RawCall], scan: Scan) -> int:
    """Read `;`/space-separated JSON calls from s[i]; -1 when none of the values is a call.

    The marker vouches for the values after it: one that is no readable call (a `NaN` in its
    arguments, a broken quote) is dropped and the calls around it kept. The sequence ends at
    the first value that does not close, and after its last readable call: values after that
    stay text.
    """
    last_end = after = -1  # the last readable call's end, and past the separators after it
    while i < len(s) and s[i] in "{[":
        end = scan.value(i)
        if end is None:
            found, end = unclosed(s, i, ctx, scan)
            if end is None:
                break
        else:
            found = json_calls(s[i:end], ctx.schemas)
        i = skip(s, end, ";,")
        if found:
            calls.extend(found)
            last_end, after = end, i
    return after if after == i else last_end


def unclosed(s: str, i: int, ctx: Ctx, scan: Scan) -> tuple[list[RawCall] | None, int | None]:
    """Calls in a value that does not close, and where they end; (None, None) to give up.

    The value ends at the format's close tag when there is one before the next marker; it runs
    to the end of the text only when the reply was cut off and no marker follows. Anything
    else is a brace in prose, and taking the rest of the reply as arguments would lose it.
    """
    c = scan.close_at(i)
    if c >= 0:
        body = s[i:c].rstrip()
        found = json_calls(body, ctx.schemas) or partial_calls(body, ctx.schemas)
        return (found, c) if found else (None, None)
    if ctx.truncated and scan.limit(i) == len(s):
        return partial_calls(s[i:].rstrip(), ctx.schemas) or None, len(s)
    return None, None


def bare_calls(text: str, schemas: Schemas) -> list[RawCall] | None:
    """Calls when `text` is nothing but complete calls to declared tools, else None.

    With no marker to vouch for them, the calls must be complete shapes (strict
    `calls_from_value`): a name alone, or a schema-like `parameters`, is data, not a call.
    """
    calls, end = bare_run(text, skip(text, 0), schemas)
    return calls if calls and skip(text, end, ";") == len(text) else None


def bare_run(
    text: str, i: int, schemas: Schemas, value: Callable[[int], int | None] | None = None
) -> tuple[list[RawCall], int]:
    """The complete calls to declared tools from text[i] on, one after another (whitespace, `;`,
    a stray `</tool_call>` or end-of-turn tokens between them), and where the last item read
    ends. It stops at anything else; `value` finds where a value opening at an index ends."""
    ends = value or (lambda k: value_end(text, k))
    calls: list[RawCall] = []
    end = k = i
    while k < len(text):
        if text.startswith("</tool_call>", k):
            end = k + len("</tool_call>")
        elif text[k] == "<" and (after := past_end_tokens(text, k)) > k:  # all open with `<`
            end = after
        elif text[k] in "{[" and (v := ends(k)) is not None:
            found = json_calls(text[k:v], schemas, strict=True)
            if not found or any(name not in schemas for name, _, _ in found):
                break
            calls.extend(found)
            end = v
        else:
            break
        k = skip(text, end, ";")
    return calls, end
