"""Compact JSON text for values latchgate builds, whatever strings they hold.

orjson writes UTF-8 and refuses a string holding a lone surrogate. Such strings do come out of
lenient repair: json_repair turns the escapes `\\ud83d\\ude42` (an emoji written as a surrogate
pair) into two separate code points. `compact` writes those as JSON escapes instead of failing,
so a repaired answer or argument is always sendable.
"""

from __future__ import annotations

import json

import orjson


def compact(value: object) -> str:
    """Compact JSON text for a parsed value (UTF-8 kept, no spaces; surrogates escaped)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # Lone surrogates (or a type orjson does not take): the standard library escapes
        # every non-ASCII character, which is valid JSON for any string.
        return json.dumps(value, separators=(",", ":"))
