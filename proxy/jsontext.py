"""Compact JSON text for values latchgate builds, whatever strings they hold and however deep.

orjson writes UTF-8 and refuses a string holding a lone surrogate. Such strings do come out of
lenient repair: json_repair turns the escapes `\\ud83d\\ude42` (an emoji written as a surrogate
pair) into two separate code points. `compact` writes those as JSON escapes instead of failing,
so a repaired answer or argument is always sendable.

orjson also writes at most 254 levels of nesting, though it reads 1024: a model's arguments
nested deeper are written by the standard library, and past its recursion limit (about 900
levels, less the stack in use) by a loop of our own.
"""

from __future__ import annotations

import json

import orjson


def compact(value: object) -> str:
    """Compact JSON text for a parsed value (UTF-8 kept, no spaces; surrogates escaped)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # Lone surrogates, nesting past 254 levels (or a type orjson does not take): the
        # standard library escapes every non-ASCII character, which is valid JSON for any
        # string.
        pass
    try:
        return json.dumps(value, separators=(",", ":"))
    except RecursionError:
        return _deep(value)


class _Text(str):
    """Punctuation `_deep` writes as it is (a subclass, so no value is ever mistaken for it)."""

    __slots__ = ()


def _deep(value: object) -> str:
    """`value` as `json.dumps` would write it compactly, without recursion: each list or
    object is pushed back as its closing bracket and its members, each after its separator."""
    out: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            out.append(item)
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Text("}"))
            for k, (key, member) in reversed(list(enumerate(item.items()))):
                stack.append(member)
                stack.append(_Text(("," if k else "") + json.dumps(str(key)) + ":"))
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.append(_Text("]"))
            for k in range(len(item) - 1, -1, -1):
                stack.append(item[k])
                if k:
                    stack.append(_Text(","))
        else:
            out.append(json.dumps(item))  # a string or a number: no nesting
    return "".join(out)
