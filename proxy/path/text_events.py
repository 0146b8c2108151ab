"""Reading a stream's text deltas without parsing them, for a stream processor that needs only
the text.

A tools stream shows every piece of the answer's text to the tool-call processor, which for
prose changes nothing. Parsing each chunk event, and framing it again, cost more per event than
everything else latchgate did with it (bench/RESULTS.md, issue 17). But a server writes every
text delta of a stream in one shape, and only the text differs:

    data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" fox"}}],"id":...}

So the shape is learnt from an event the relay parsed anyway, and the events of exactly that
shape are read by slicing out their text, which is decoded on its own. Any other event (another
shape, a finish, a usage report, a comment, a server whose `created` ticks) is parsed as before,
and a text delta of a new shape teaches it. Pure functions; the relay keeps the shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.path.chunks import only_delta


@dataclass(slots=True, init=False)  # its own __init__: one a stream (proxy/compiled.py)
class TextShape:
    """One stream's delta events around the string they add to: `head` up to the string's
    opening quote (from `data: `), `tail` from its closing quote to the end of the event (its
    blank line). The string is the answer's text (`call` None) or the arguments of tool call
    `call` (a fragment's `index`)."""

    head: bytes
    tail: bytes
    bare: bool  # the delta holds the string alone (no role or other keys beside it)
    call: int | None
    # The joint between two such events (`tail + head`) in two parts: `read` splits a run at
    # `cut`, its last few bytes, and checks that each piece ends with `rest`. CPython's search
    # for a needle of a few hundred bytes (the joint whole) cost three times the split.
    cut: bytes
    rest: bytes

    def __init__(
        self,
        head: bytes,
        tail: bytes,
        bare: bool,
        call: int | None = None,
        cut: bytes = b"",
        rest: bytes = b"",
    ) -> None:
        self.head = head
        self.tail = tail
        self.bare = bare
        self.call = call
        self.cut = cut
        self.rest = rest


def matches(shape: TextShape, data: bytes) -> bool:
    """Whether the data event `data` is of `shape` (its string aside)."""
    return data.startswith(shape.head[6:]) and data.endswith(shape.tail[:-2])


def learn(data: bytes, chunk: Any) -> TextShape | None:
    """The shape of the data event `data` (`chunk`: its parsed JSON) when all it does is add a
    non-empty string to the first choice: its text, or the arguments of a tool call (a fragment
    with an index and arguments alone). One choice, index 0 or none, no finish reason, no usage.
    None otherwise, or when the string cannot be told apart in the event's bytes."""
    delta = only_delta(chunk)
    if delta is None:
        return None
    fragments = delta.get("tool_calls")
    if not fragments:
        text = delta.get("content")
        return _shape(data, text, len(delta) == 1, None) if type(text) is str else None
    if len(delta) != 1 or type(fragments) is not list or len(fragments) != 1:
        return None
    fragment = fragments[0]
    if type(fragment) is not dict or len(fragment) != 2:
        return None  # an id, a name or a type: a fragment that starts a call is read whole
    fn, index = fragment.get("function"), fragment.get("index")
    if type(index) is not int or type(fn) is not dict or len(fn) != 1:
        return None
    arguments = fn.get("arguments")
    return _shape(data, arguments, True, index) if type(arguments) is str else None


def _shape(data: bytes, string: str, bare: bool, call: int | None) -> TextShape | None:
    if not string:
        return None
    written = orjson.dumps(string)  # as most servers write it; one escaping more is not learnt
    at = data.find(written)
    if at < 0 or data.find(written, at + 1) >= 0:
        return None  # not found, or found twice: which one is the string is not known
    head, tail = b"data: " + data[: at + 1], data[at + len(written) - 1 :] + b"\n\n"
    joint = tail + head
    if joint.find(joint[-_CUT:]) != len(joint) - _CUT:
        return None  # the cut found inside a joint: `read` could not tell its pieces apart
    return TextShape(head, tail, bare, call, joint[-_CUT:], joint[:-_CUT])


# The bytes of the joint `read` splits at: short enough for CPython's fast search, long enough
# (the end of a head: `"delta":{"content":"`) that prose rarely holds it.
_CUT = 16


# Events read at most per call: the texts of a call are judged together, and those after the
# first the processor would change are read again after it, so a bound keeps that waste small.
_BATCH = 64


def read(
    shape: TextShape, region: bytes, pos: int, most: int = _BATCH
) -> tuple[list[bytes], list[str]]:
    """From `pos`, the consecutive events of `shape` in `region` (whole events, as
    `SSEParser.feed` gives them), up to `most`: their texts, and the bodies they were decoded
    from (as many), which say where each event ends (`end`)."""
    head, tail = shape.head, shape.tail
    if most < 1 or not region.startswith(head, pos):
        return [], []
    start = pos + len(head)
    # A run of such events is `head b1 tail head b2 tail ...`: split at the joints, in one call
    # (a loop of finds cost more than the rest of a plain event's relay). A piece that does not
    # end with the rest of a joint, and the last, end the run at their first tail. No string
    # holds a line break, and a tail ends in one: a body with one spans another event that ends
    # as this shape's do (a role chunk, say), and the run is then read event by event, each body
    # ending at its first tail.
    bodies = _split(shape, region, start, most)
    joined = b'","'.join(bodies)
    if b"\n" in joined:
        bodies = _bodies(head, tail, region, pos, most)
        joined = b'","'.join(bodies)
    # Where a body is no string's (an escaped quote before the tail's words), decoding it fails
    # and the event is parsed instead.
    texts = _strings(bodies, joined)
    return bodies[: len(texts)], texts


def end(shape: TextShape, pos: int, bodies: list[bytes], count: int) -> int:
    """Where the first `count` events of a run `read` from `pos` end (`bodies`: as it gave
    them). Worked out only for the events the relay sends or takes in: a run is mostly read
    whole, and a list of every end cost more than the rest of its reading."""
    return pos + count * (len(shape.head) + len(shape.tail)) + sum(map(len, bodies[:count]))


def _split(shape: TextShape, region: bytes, start: int, most: int) -> list[bytes]:
    """The bodies of the run whose first body starts at `start`, from one split at the joints'
    `cut`: a piece that ends with the joint's `rest` is a body and the joint; the first that
    does not, or the split's last, ends the run at its first tail."""
    if most == 1:
        # One event (the relay reads one at a time after the processor refused one): its body
        # ends at its first tail, found in place instead of in a copy of the region's rest.
        at = region.find(shape.tail, start)
        return [region[start:at]] if at >= 0 else []
    pieces = region[start:].split(shape.cut, most - 1)
    last = pieces.pop()
    rest, trim = shape.rest, len(shape.rest)
    bodies = [piece[:-trim] for piece in pieces]
    # Every piece ends with `rest` exactly when the bodies joined by whole joints are what the
    # region holds (and the last piece ends with it): two calls in C, the usual run being of
    # this shape to its end. Exact because the cut is found in a joint only at its end (`_shape`).
    if pieces and not (
        pieces[-1].endswith(rest) and region.startswith((rest + shape.cut).join(bodies), start)
    ):
        stop = next((i for i, piece in enumerate(pieces) if not piece.endswith(rest)), None)
        if stop is not None:
            bodies, last = bodies[:stop], pieces[stop]
    at = last.find(shape.tail)
    if at >= 0:
        bodies.append(last[:at])
    return bodies


def _bodies(head: bytes, tail: bytes, region: bytes, pos: int, most: int) -> list[bytes]:
    """The string bodies of the run at `pos`, event by event (see `read`)."""
    bodies: list[bytes] = []
    start, rest = len(head), len(tail)
    while len(bodies) < most and region.startswith(head, pos):
        at = region.find(tail, pos + start)
        if at < 0:
            break
        bodies.append(region[pos + start : at])
        pos = at + rest
    return bodies


def _strings(bodies: list[bytes], joined: bytes | None = None) -> list[str]:
    """The JSON string bodies `bodies` decoded, up to the first that is not a valid one (a raw
    quote, control character, bad escape, or bytes that are not UTF-8).

    Parsed as one array, `["b1","b2",...]`, in one call. That its strings are the bodies one for
    one needs each `","` to be a boundary: so no body may hold a quote that is not escaped, or
    end in a backslash (such text is decoded one body at a time instead). `joined`: the bodies
    joined so, when the caller has them.
    """
    if not bodies:
        return []
    if joined is None:
        joined = b'","'.join(bodies)
    quotes = 2 * (len(bodies) - 1)  # the joints' own: any more are in a body
    if (
        _unescaped_quotes(joined) == quotes
        and b'\\","' not in joined
        and not joined.endswith(b"\\")
    ):
        try:
            texts: list[str] = orjson.loads(b'["%s"]' % joined)
            return texts
        except orjson.JSONDecodeError:
            pass  # one of them is not valid: which one is found below
    out: list[str] = []
    for body in bodies:
        try:
            out.append(orjson.loads(b'"%s"' % body))
        except orjson.JSONDecodeError:
            break
    return out


def _unescaped_quotes(joined: bytes) -> int:
    """How many quotes of `joined` are not escaped, or -1 when that is not told by counting.

    Text that quotes someone, or a call written as text (`{"name": ...`), has its quotes
    escaped (`\\"`): counted out, it is read as one array too. With an escaped backslash as
    well (`\\\\`), a quote after a backslash may be escaped or not: -1."""
    quotes = joined.count(b'"')
    if b'\\"' not in joined:
        return quotes  # no quote follows a backslash
    if b"\\\\" in joined:
        return -1
    return quotes - joined.count(b'\\"')
