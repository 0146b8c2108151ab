"""Response headers latchgate writes, and the one function that makes client text safe in them.

Header values built from text a client or an upstream chose (a model name quoted in a notice, a
refused field's name, an upstream's rate-limit header) go through `header_value`, so a control
character can never break the response: aiohttp refuses CR and LF, and a NUL or an escape byte
gave some clients an empty reply. Doing it in one place means no route can forget it.
"""

from __future__ import annotations

import json
import re

import orjson

NOTICE_HEADER = "x-latchgate-notice"  # one per notice, for people reading headers
# All the notices in one header, as a JSON list: notices hold commas, and clients that join a
# repeated header with ", " (most HTTP libraries) cannot split NOTICE_HEADER's copies again.
NOTICES_HEADER = "x-latchgate-notices"
DROPPED_HEADER = "x-latchgate-dropped-fields"
REQUEST_ID_HEADER = "x-latchgate-request-id"
# Asked for on a request (`prune`, `compact`, `refuse`), and on the answer what context rescue
# did to the conversation to fit it ("pruned 7 results, 31,200 -> 6,900 tokens").
CONTEXT_HEADER = "x-latchgate-context"

MAX_HEADER_VALUE = 1000  # characters: a notice is one sentence; an upstream's prose is cut here

# After non-ASCII has been escaped, what is left to escape: the C0 controls and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def header_value(text: str, limit: int = MAX_HEADER_VALUE) -> str:
    """`text` as a header value: one line of printable ASCII, at most `limit` characters.

    Runs of whitespace (line breaks included) become one space; non-ASCII and control
    characters are written as backslash escapes, so what they were stays readable.
    """
    if text.isascii() and text.isprintable():
        return _flat(text)[:limit]  # the usual text: its words stay printable ASCII
    flat = " ".join(text.split())
    if not (flat.isascii() and flat.isprintable()):
        flat = _CONTROL.sub(_escape, flat.encode("ascii", "backslashreplace").decode("ascii"))
    return flat[:limit]


def _flat(text: str) -> str:
    """Printable `text` with each run of spaces one space, and none at its ends, as
    `" ".join(text.split())` makes it. Printable text holds no whitespace but the ASCII space
    (`isprintable` counts every other kind, Unicode's too, as unprintable), so a sentence is
    mostly returned as it is: splitting a recovered call's notice into its words and joining
    them again, for its two headers, took about 9,500 instructions."""
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        return " ".join(text.split())
    return text


def notices_value(notices: list[str]) -> str:
    """The notices as one header value: a JSON list of strings in ASCII (non-ASCII and control
    characters as JSON escapes, so it parses back to exactly what was said)."""
    if all([n.isascii() and n.isprintable() for n in notices]):
        flat = [_flat(n) for n in notices]
        # The usual notices: nothing for `ensure_ascii` to escape, and orjson writes each string
        # as json.dumps does (only `"` and `\\` escaped), in 1.6 µs against 2.3 for the
        # standard library's encoder (one notice: a recovered call's, issue 17).
        if len(flat) == 1:
            return orjson.dumps(flat).decode()  # one notice: no separator to write as ", "
        return "[" + ", ".join([orjson.dumps(n).decode() for n in flat]) + "]"
    return json.dumps([" ".join(n.split()) for n in notices], ensure_ascii=True)
