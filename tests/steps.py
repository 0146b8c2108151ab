"""Deterministic work counts, for tests that assert how cost grows with input size.

A wall-clock limit fails on a loaded machine and passes on a fast one whatever the complexity
(issue 13, item 16); timing belongs in bench/. These tests instead count what the code does and
compare two input sizes: work that grows linearly multiplies by the size ratio, quadratic work by
its square, and the gap between the two is wide enough for a generous bound.

What is counted, while `count()` runs:

- every line executed in a frame of latchgate's own code (`proxy/`): the per-character loops
  (value scans, the stream judge) show up here;
- every character a search looks at on the text being scanned (`str.find`/`rfind`/`index`/`count`
  and regex `search`/`match`/`finditer` on it) when the caller hands the text over wrapped by
  `Scanned`: C-level searches cost no Python lines, and a search repeated from the same place for
  every candidate is the other way to turn linear into quadratic.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest

import proxy
from proxy import compiled
from proxy.toolcalls import scan

_PROXY_DIR = str(Path(proxy.__file__).resolve().parent)

# The scans' own lines are counted, and a test may patch `Scan` or `Next`, only where they run
# from their sources: compiled, they run no traced lines and cannot be patched. The linear-time
# tests still pass there, counting less; the yardsticks that must see a scan go quadratic run
# on the sources, which CI runs tests/unit on too (LATCHGATE_PURE=1).
SCANS_TRACED = not compiled.is_compiled(scan)
needs_traced_scans = pytest.mark.skipif(
    not SCANS_TRACED, reason="compiled scans run no traced lines: run with LATCHGATE_PURE=1"
)
T = TypeVar("T")


class Counter:
    """Steps counted so far: lines run in proxy code plus characters searched."""

    def __init__(self) -> None:
        self.lines = 0
        self.scanned = 0

    @property
    def total(self) -> int:
        return self.lines + self.scanned


_ACTIVE: list[Counter] = []


def _charge(chars: int) -> None:
    if _ACTIVE:
        _ACTIVE[-1].scanned += max(chars, 0)


def _bounds(n: int, start: int | None, end: int | None) -> tuple[int, int]:
    lo, hi, _ = slice(start, end).indices(n)
    return lo, max(lo, hi)


class Scanned(str):
    """A str whose searches report how many characters they looked at.

    Slices are plain strs again (str methods return the base type), so only searches on the
    text itself are counted; work on the pieces cut from it is counted as Python lines.
    """

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo, hi = _bounds(len(self), start, end)
        k = str.find(self, sub, lo, hi)
        _charge((k + len(sub) if k >= 0 else hi) - lo)
        return k

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo, hi = _bounds(len(self), start, end)
        k = str.rfind(self, sub, lo, hi)
        _charge(hi - (k if k >= 0 else lo))
        return k

    def index(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        k = self.find(sub, start, end)
        if k < 0:
            raise ValueError("substring not found")
        return k

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo, hi = _bounds(len(self), start, end)
        _charge(hi - lo)
        return str.count(self, sub, lo, hi)


class _CountingPattern:
    """A compiled pattern whose scans over a `Scanned` text are charged to the counter."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._p = pattern
        self.pattern = pattern.pattern
        self.flags = pattern.flags

    def _scan(self, name: str, string: str, pos: int, endpos: int | None) -> Any:
        end = len(string) if endpos is None else min(endpos, len(string))
        m = getattr(self._p, name)(string, pos, end)
        if isinstance(string, Scanned):
            # A failed search looked at everything up to `end`; a match at least up to its end.
            _charge((m.end() if m is not None else end) - pos)
        return m

    def search(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        return self._scan("search", string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        return self._scan("match", string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        return self._scan("fullmatch", string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int | None = None) -> Iterator[Any]:
        end = len(string) if endpos is None else min(endpos, len(string))
        if isinstance(string, Scanned):
            _charge(end - pos)  # one pass over the text, whatever it finds
        return self._p.finditer(string, pos, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._p, name)


def counting_patterns(module: Any) -> dict[str, _CountingPattern]:
    """Counting stand-ins for every compiled pattern at `module`'s top level, by name (for
    monkeypatch.setattr)."""
    return {
        name: _CountingPattern(value)
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern)
    }


def count(fn: Callable[[], T]) -> tuple[T, Counter]:
    """Run `fn` and count its steps (see the module docstring)."""
    counter = Counter()

    def lines(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            counter.lines += 1
        return lines

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename.startswith(_PROXY_DIR):
            counter.lines += 1
            return lines
        return None  # library and test code is not latchgate's cost

    previous = sys.gettrace()
    _ACTIVE.append(counter)
    sys.settrace(calls)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
        _ACTIVE.pop()
    return result, counter


def growth(make: Callable[[int], Callable[[], object]], small: int, factor: int = 8) -> float:
    """How many times more steps `make(small * factor)` takes than `make(small)`.

    `make(n)` builds the input of size n and returns the call to measure; building is not
    counted. Linear work gives about `factor`, quadratic work about `factor` squared.
    """
    little = make(small)
    big = make(small * factor)
    little()  # warm caches (regex compilation, imports) so they count for neither size
    _, a = count(little)
    _, b = count(big)
    return b.total / max(a.total, 1)
