"""What a format finder returns: the calls of one span of text, and what it is given besides
the text (the declared tools, and whether the reply may have been cut off)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# One call as found in text: name, arguments (a dict, or text still to be repaired), and whether
# the call's own JSON needed repairing to be read.
RawCall = tuple[str, Any, bool]
Schemas = dict[str, dict[str, Any]]


@dataclass(frozen=True, init=False)  # its own __init__: see proxy/compiled.py
class Span:
    """The calls written between text[start:end], in one format (its label)."""

    start: int
    end: int
    calls: list[RawCall]
    format: str

    def __init__(self, start: int, end: int, calls: list[RawCall], format: str) -> None:
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "format", format)


class Ctx:
    """What every finder needs besides the text: the declared tools and whether it may be cut.

    It notes whether a finder asked (`consulted`): a search that never did found what it would
    have found with the other answer, so `find_calls` need not search again to tell a cut call.
    """

    __slots__ = ("_truncated", "consulted", "schemas")

    def __init__(self, schemas: Schemas, truncated: bool) -> None:
        self.schemas = schemas
        self._truncated = truncated
        self.consulted = False

    @property
    def truncated(self) -> bool:
        self.consulted = True
        return self._truncated


Finder = Callable[[str, Ctx], list[Span]]


@dataclass(frozen=True)
class Family:
    """One format family as the registry knows it (proxy/toolcalls/formats/).

    `find` returns the family's spans in a reply's scanned text. `markers` are the literal
    strings a call of the family starts with; `named` are marker templates in which `NAME`
    stands for each declared tool's name (`call:NAME{`). The stream holds text from a marker
    on, and a whole reply with none of any family's markers skips every finder. `closers` are
    the family's closing tags: one left over next to a recovered call (a stray `</tool_call>`
    whose opening tag the server ate) goes with the call, not into the content.

    `openers` are templates (NAME as in `named`) a call of the family may open a reply with,
    right at its start or after a think block, with no marker: Functionary v3.2's `NAME\n{`,
    whose `>>>` the generation prompt wrote. They are judged there only, never looked for in
    prose (a trigger that begins with a tool's name would hold every chunk ending in its first
    letter). `framing` are texts a reply may open with there that are the template's, not the
    model's words (Functionary's `all\n`): recovery drops them from the content.
    """

    name: str
    find: Finder
    markers: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    closers: tuple[str, ...] = ()
    openers: tuple[str, ...] = ()
    framing: tuple[str, ...] = ()

    def triggers(self, names: Iterable[str]) -> list[str]:
        """This family's markers for tools named `names` (those up to NAME_MAX long)."""
        return [*self.markers, *(t.replace("NAME", n) for n in _named(names) for t in self.named)]

    def opening(self, names: Iterable[str]) -> list[str]:
        """This family's openers for tools named `names` (those up to NAME_MAX long)."""
        return [t.replace("NAME", n) for n in _named(names) for t in self.openers]


# A tool name longer than this gets no markers or openers of its own (a call to it written as
# text in a format that starts with the name is not recovered; every other format still is).
# No model API takes such a name (OpenAI's, Anthropic's and Gemini's limit is 64), and the
# marker tables cost more than a request should with one: their regexes nest as deep as their
# longest string, which Python's `re` parses by recursion (RecursionError from about 500
# characters), and the stream's table holds every beginning of every marker.
NAME_MAX = 128


def _named(names: Iterable[str]) -> list[str]:
    return [n for n in names if len(n) <= NAME_MAX]
