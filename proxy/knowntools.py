"""A request's tools list parsed once per distinct list, and keyed once.

An agent declares the same tools on every turn: Codex CLI and Claude Code send about 60 KB of
schemas with each request. Parsing that list, and serialising it again for the schema caches'
keys, were the largest costs of such a request (bench/RESULTS.md, issue 17), though the list is
byte for byte the one of the turn before. So `parse` remembers the bytes of the tools lists it
has seen, and where; a body holding one of them there, as its top-level `"tools"`, has only the
rest parsed, and gets the list parsed the first time. `key_of` gives such a list its stored
key, and `derived` keeps what a front translates it into, so that list too is the same one
every turn.

How a hit is proved to mean what a full parse would: the remembered bytes are spliced out and a
string no client can know (random per process) put in their place. The rest is parsed; only if
that string came out as the body's own top-level `tools` were the bytes replaced exactly that
value (the parser reached them expecting the value of the top-level key `tools`, and they are
one whole JSON value), so parsing the original would have given the remembered list there.

The lists handed out are shared by every request that sends them: nothing may change them in
place (no code does: sanitising and translating build new lists; `intact` checks it in tests).
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

# A body smaller than this is parsed whole: splicing costs more than it saves below a few KB.
MIN_BODY = 4096
MIN_TOOLS = 2048  # bytes of a tools list worth remembering
_ENTRIES = 16  # distinct tools lists remembered (a 60 KB list is about 0.5 MB parsed)
_MAX_TRIES = 4  # `"tools": [` occurrences tried per body (nested ones can come first)
# Lists keyed that `parse` did not give (a front's translation): a request's list is keyed twice
# (checked before sending, then sanitised), with other requests' awaits between.
_RECENT = 8

_KEY = re.compile(rb'"tools"[ \t\r\n]*:[ \t\r\n]*\[')
# A JSON string or a square bracket: enough to find where an array of valid JSON ends.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]]', re.DOTALL)
_PLACEHOLDER = f"\x00latchgate-tools-{secrets.token_hex(16)}"
_PLACEHOLDER_JSON = orjson.dumps(_PLACEHOLDER)


class _Entry:
    """One remembered tools list: its bytes as clients send them, the list, its compact key,
    the lists made from it alone (`derived`), and where the bytes were in the last body that
    held them (from its start, and from its end): a client lays out every turn's body alike."""

    __slots__ = ("derived", "from_end", "from_start", "key", "raw", "tools")

    def __init__(self, raw: bytes, tools: list[Any], key: bytes) -> None:
        self.raw, self.tools, self.key = raw, tools, key
        self.derived: dict[Callable[[list[Any]], list[Any]], _Entry] = {}
        self.from_start = self.from_end = -1

    def seen_at(self, raw: bytes, at: int) -> None:
        self.from_start, self.from_end = at, len(raw) - at - len(self.raw)


class KnownTools:
    """The remembered tools lists (the last `_ENTRIES` distinct ones), and the keys of the last
    few lists keyed that did not come from here."""

    def __init__(self, entries: int = _ENTRIES) -> None:
        self._size = entries
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()  # raw bytes -> entry
        self._keys: dict[int, _Entry] = {}  # id(list) -> its entry, for `key_of`
        self._recent: OrderedDict[int, _Entry] = OrderedDict()  # lists keyed, not parsed here
        self._seen_once: OrderedDict[bytes, None] = OrderedDict()  # see `_learn`

    # -- parsing ----------------------------------------------------------------------------
    def parse(self, raw: bytes) -> Any:
        """`orjson.loads(raw)`, with a tools list seen before taken as it was parsed then.

        The body is never scanned for its tools on the way: an agent's conversation can be
        hundreds of KB, and a scan of it cost nearly what parsing it does. A remembered list is
        looked for only where it was in the last body that held it.
        """
        if len(raw) < MIN_BODY:
            return orjson.loads(raw)
        for entry in reversed(self._entries.values()):  # the latest first
            for at in (entry.from_start, len(raw) - entry.from_end - len(entry.raw)):
                if at >= 0 and raw.startswith(entry.raw, at):
                    body = self._spliced(raw, at, entry)
                    if body is not None:
                        return body
        body = orjson.loads(raw)
        if type(body) is dict and type(body.get("tools")) is list:
            self._learn(raw, body)
        return body

    def _spliced(self, raw: bytes, at: int, entry: _Entry) -> Any | None:
        """The body parsed with `entry`'s list at `at`, or None (it is not the body's tools)."""
        rest = b"".join((raw[:at], _PLACEHOLDER_JSON, raw[at + len(entry.raw) :]))
        try:
            body = orjson.loads(rest)
        except orjson.JSONDecodeError:
            return None  # invalid around the list: the full parse says where
        if type(body) is not dict or body.get("tools") != _PLACEHOLDER:
            return None  # the bytes were not the body's own tools list
        body["tools"] = entry.tools  # the key's place in the body is kept
        entry.seen_at(raw, at)
        self._entries.move_to_end(entry.raw)
        return body

    def _learn(self, raw: bytes, body: dict[str, Any]) -> None:
        """Remember the body's tools list by its bytes and where they are (or, for a list
        remembered already but found elsewhere, where it is now, and share it).

        Most clients write compact JSON as orjson does, and the list's own serialisation (its
        key, needed anyway) is its bytes. Other bytes are found by a scan of the JSON, made only
        for a list seen twice: a client whose tools change every request pays nothing for it.
        """
        tools = body["tools"]
        try:
            key = orjson.dumps(tools)
        except TypeError:  # too deep for orjson to write: never remembered
            return
        if len(key) < MIN_TOOLS:
            return
        found = self._found(raw, key, tools)
        if found is None:
            return
        entry, at = found
        entry.seen_at(raw, at)
        if entry.raw not in self._entries:
            self._remember(entry)
        elif entry.tools is not tools:
            body["tools"] = entry.tools  # the same list (the same key): the shared one
            self._entries.move_to_end(entry.raw)

    def _found(self, raw: bytes, key: bytes, tools: list[Any]) -> tuple[_Entry, int] | None:
        """The entry for the list `tools` (its compact JSON `key`) in `raw`, and where its bytes
        begin; None when they are not worth looking for yet."""
        at = raw.find(key)
        if at >= 0:
            return self._entries.get(key) or _Entry(key, tools, key), at
        if key not in self._seen_once:
            self._seen_once[key] = None
            if len(self._seen_once) > self._size:
                self._seen_once.popitem(last=False)
            return None
        for tries, match in enumerate(_KEY.finditer(raw)):
            at = match.end() - 1  # the list's `[`
            end = _array_end(raw, at)
            if end is not None and _parses_to(raw[at:end], tools):
                text = raw[at:end]
                return self._entries.get(text) or _Entry(text, tools, key), at
            if tries + 1 == _MAX_TRIES:
                break
        return None

    def _remember(self, entry: _Entry) -> None:
        self._entries[entry.raw] = entry
        self._keys[id(entry.tools)] = entry
        while len(self._entries) > self._size:
            _, old = self._entries.popitem(last=False)
            self._forget(old)

    def _forget(self, entry: _Entry) -> None:
        """Forget `entry` and every list derived from it, at any remove."""
        for gone in _family([entry]):
            if self._keys.get(id(gone.tools)) is gone:
                del self._keys[id(gone.tools)]

    # -- keys -------------------------------------------------------------------------------
    def key_of(self, tools: list[Any]) -> bytes | None:
        """`tools` as compact JSON (a cache key; not `OPT_SORT_KEYS`: property order is
        meaningful to grammar builders): stored for a list from `parse`, else serialised (and
        kept for the next call with the same list, as a request's list is keyed twice). None
        when orjson cannot write it (nested too deep)."""
        # An entry holds its list, so while it is here no other list can have the same id.
        entry = self._keys.get(id(tools)) or self._recent.get(id(tools))
        if entry is not None and entry.tools is tools:
            return entry.key
        try:
            key = orjson.dumps(tools)
        except TypeError:
            return None
        self._recent[id(tools)] = _Entry(b"", tools, key)
        if len(self._recent) > _RECENT:
            self._recent.popitem(last=False)
        return key

    def stored_key(self, tools: object) -> bytes | None:
        """`tools`'s key when one is stored (a list `parse` or `derived` handed out, or one
        keyed lately), never serialising it: for writing a body with the list's bytes as they
        are (`orjson.Fragment`) instead of serialising the list once more."""
        entry = self._keys.get(id(tools)) or self._recent.get(id(tools))
        return entry.key if entry is not None and entry.tools is tools else None

    def shared(self, tools: object) -> bool:
        """Whether `tools` is a list `parse` handed out: shared and never changed, so what is
        derived from it alone can be kept by its identity for as long as it is remembered."""
        entry = self._keys.get(id(tools))
        return entry is not None and entry.tools is tools

    def derived(self, source: list[Any], make: Callable[[list[Any]], list[Any]]) -> list[Any]:
        """`make(source)`: for a list `parse` handed out, made once and shared like it (the same
        list every time, keyed once), as a front's translation of an agent's tools. `make` must
        be a pure function of the list (one that raises is made again next time)."""
        # A list parsed here, or one derived from such a list (a front's translation, then its
        # sanitised form): kept while its root is.
        entry = self._keys.get(id(source))
        if entry is None or entry.tools is not source:
            return make(source)
        found = entry.derived.get(make)
        if found is None:
            made = make(source)
            try:
                key = orjson.dumps(made)
            except TypeError:
                return made
            found = entry.derived[make] = _Entry(b"", made, key)
            self._keys[id(made)] = found
        return found.tools

    # -- tests ------------------------------------------------------------------------------
    def intact(self) -> bool:
        """Whether every remembered list is still what was parsed (nothing changed one)."""
        return all(orjson.dumps(e.tools) == e.key for e in _family(self._entries.values()))

    def clear(self) -> None:
        """Forget every list (tests and benchmarks)."""
        for store in (self._entries, self._keys, self._recent, self._seen_once):
            store.clear()


def _family(entries: Iterable[_Entry]) -> Iterator[_Entry]:
    """`entries` and every entry derived from them, at any remove (from a stack: this module
    is compiled, see proxy/compiled.py)."""
    stack = list(entries)
    while stack:
        entry = stack.pop()
        yield entry
        stack.extend(entry.derived.values())


def _parses_to(text: bytes, tools: list[Any]) -> bool:
    try:
        return bool(orjson.loads(text) == tools)
    except orjson.JSONDecodeError:
        return False


def _array_end(raw: bytes, at: int) -> int | None:
    """Where the JSON array opening at `at` ends (past its `]`), in a valid JSON text."""
    depth = 0
    for token in _TOKENS.finditer(raw, at):
        if token.group() == b"[":
            depth += 1
        elif token.group() == b"]":
            depth -= 1
            if depth == 0:
                return token.end()
    return None


def written(tools: Any) -> Any:
    """`tools` as orjson is to write it: for a list whose bytes are stored (`stored_key`: an
    agent's, a front's translation of it, their sanitised forms) those bytes
    (`orjson.Fragment`), not serialised again (tens of KB); anything else as it is."""
    stored = KNOWN.stored_key(tools) if type(tools) is list else None
    return tools if stored is None else orjson.Fragment(stored)


def dumps(body: dict[str, Any]) -> bytes:
    """`orjson.dumps(body)`, its tools `written` as stored. The same bytes; orjson's errors as
    its own."""
    tools = body.get("tools")
    as_written = written(tools)
    return orjson.dumps(body if as_written is tools else {**body, "tools": as_written})


KNOWN: KnownTools = KnownTools()
# The process's store, by its methods' names. Functions rather than bound methods held in the
# module: a compiled caller calls a compiled function directly, and mypy reads their types
# where the build has no orjson to infer them from.


def parse(raw: bytes) -> Any:
    return KNOWN.parse(raw)


def key_of(tools: list[Any]) -> bytes | None:
    return KNOWN.key_of(tools)


def clear() -> None:
    KNOWN.clear()


def shared(tools: object) -> bool:
    return KNOWN.shared(tools)


def stored_key(tools: object) -> bytes | None:
    return KNOWN.stored_key(tools)


def derived(source: list[Any], make: Callable[[list[Any]], list[Any]]) -> list[Any]:
    return KNOWN.derived(source, make)
