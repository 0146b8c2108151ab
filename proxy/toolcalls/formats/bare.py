"""Calls with no marker: JSON (or pythonic) calls to declared tools standing alone, or one fenced
block of them (Llama 3.2 on Ollama). The registry's fallback: tried only when no marker family
found a call, and only for declared tools with complete call shapes (strict `calls_from_value`).

Three forms, tried in this order:
- the whole reply is calls (`bare_json`, or `pythonic` for `[f(a=1)]`);
- the reply's one fenced block is calls (`fenced_json`), prose around it staying content;
- one run of calls on lines of their own, with prose before or after it (`bare_json` or
  `pythonic`): "I'll check the weather.\\n{"name": ...}" or "[f(a=1)]\\nLet me know." as
  SGLang's pythonic detector reads them (test_function_call_parser.py). Stricter than SGLang:
  the run must open a line and end one (`{...} is how you would call it.` is an example), be
  the reply's only run (two are examples, as two fenced blocks are), and the prose around it
  must hold no fence.
"""

from __future__ import annotations

import re

from proxy.toolcalls.scan import Next, skip, skip_back, value_end
from proxy.toolcalls.spans import Schemas, Span
from proxy.toolcalls.values import bare_calls, bare_run


def find(s: str, schemas: Schemas) -> list[Span]:
    """The whole reply is calls, or its one fenced block is, or one run of calls on its own
    lines with prose around it."""
    start = skip(s, 0)
    body = s[start:]
    # The whole reply as calls first: their arguments may hold fences of their own (a README
    # written by write_file), which do not make the reply a fenced one.
    calls = bare_calls(body, schemas) if body[:1] in ("{", "[") else None
    if calls:
        return [Span(start, len(s), calls, _label(s, start))]
    if FENCE in body and (fenced := _fenced(s, schemas)):
        return fenced
    return _with_prose(s, schemas)


def _label(s: str, i: int) -> str:
    """`pythonic` for `[name(...)`, `bare_json` for JSON."""
    j = skip(s, i + 1)
    pythonic = s[i] == "[" and j < len(s) and (s[j].isalpha() or s[j] == "_")
    return "pythonic" if pythonic else "bare_json"


FENCE = "```"
# A fence's info string (`json`, `tool_call`, none): a longer first line is prose that happens to
# contain three backticks, and the stream must not hold a line without end waiting for it.
FENCE_INFO_MAX = 64


def _fenced(s: str, schemas: Schemas) -> list[Span]:
    """One fenced block of calls anywhere in the reply: Llama 3.2 on Ollama writes "I'll check
    the weather." and then the call in a ```json fence. Prose before and after it stays content;
    a second block makes every block an example, not a call. The block's calls are read
    string-aware, so a fence inside their arguments (write_file's markdown) is no block of its
    own, and the closing fence is the first one after them."""
    start = s.find(FENCE)
    nl = s.find("\n", start)
    if nl < 0 or nl - start - len(FENCE) > FENCE_INFO_MAX or FENCE in s[start + len(FENCE) : nl]:
        return []
    i = skip(s, nl + 1)
    calls, end = bare_run(s, i, schemas) if s[i : i + 1] in ("{", "[") else ([], i)
    close = skip(s, end, ";")
    if not calls or not s.startswith(FENCE, close) or FENCE in s[close + len(FENCE) :]:
        return []
    return [Span(start, close + len(FENCE), calls, "fenced_json")]


# A `{` or `[` opening a line (after indentation), and the `[` of a pythonic list or JSON array.
# recovery._may_hold_calls and the stream (a line-opening value after prose is a tail to judge)
# look for LINE_OPEN too, so the three agree on where a run may start.
LINE_OPEN: re.Pattern[str] = re.compile(r"^[ \t]*[{\[]", re.MULTILINE)
_LIST_OPEN = re.compile(r"\[\s*(?:\{|[A-Za-z_][\w.]*\s*\()")


def _with_prose(s: str, schemas: Schemas) -> list[Span]:
    """The reply's one run of calls on lines of their own, prose before or after it."""
    runs = _runs(s, schemas)
    if len(runs) != 1:
        return []
    run = runs[0]
    if FENCE in s[: run.start] or FENCE in s[run.end :]:
        return []  # a fence in the prose: the reply shows code, and the run is one more example
    return runs


def _runs(s: str, schemas: Schemas) -> list[Span]:
    """Runs of calls opening a line and ending one, up to two (two are already too many).

    A value opening a line that is not calls is skipped whole, so the lines inside a JSON
    document (a list of call-shaped examples) are never read as runs of their own.
    """
    lines = _LineValues(s)
    runs: list[Span] = []
    p = lines.next.at(0)
    while p >= 0 and len(runs) < 2:
        end = lines.value(p) if s[p] == "{" or _LIST_OPEN.match(s, p) else None
        if end is None:
            p = lines.next.at(p + 1)
            continue
        calls, run_end = bare_run(s, p, schemas, lines.value)
        if calls and _ends_line(s, run_end) and _alone(s, p, run_end):
            runs.append(Span(p, run_end, calls, _label(s, p)))
            end = run_end
        p = lines.next.at(end)
    return runs


def _alone(s: str, start: int, end: int) -> bool:
    """No JSON value right before or after the run: with no marker to vouch for them, values
    one after another are all calls or none is (`{call}\n{"ratio": NaN ...}` stays text)."""
    before = skip_back(s, start)
    after = skip(s, end)
    return s[after : after + 1] not in ("{", "[") and (before == 0 or s[before - 1] not in "}]")


def _ends_line(s: str, i: int) -> bool:
    while i < len(s) and s[i] in " \t\r":
        i += 1
    return i == len(s) or s[i] == "\n"


class _LineValues:
    """Where values opening a line end, each scanned up to the next line that opens one, and
    further while a budget of len(s) characters lasts (toolcalls.scan.Scan's guard): a call
    spread over lines is still read, but a reply of many unclosed braces costs linear time."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.next = Next(self._find)
        self._budget = len(s)
        self._last: tuple[int, int | None] = (-1, None)

    def _find(self, pos: int) -> int:
        m = LINE_OPEN.search(self.s, pos)
        return m.end() - 1 if m else -1

    def value(self, i: int) -> int | None:
        if self._last[0] == i:
            return self._last[1]  # the run's first value, scanned once for both of its readers
        nxt = self.next.at(i + 1)
        limit = len(self.s) if nxt < 0 else nxt
        end = value_end(self.s, i, limit)
        if end is None and limit < len(self.s) and self._budget > 0:
            end = value_end(self.s, i)
            self._budget -= (end or len(self.s)) - i
        self._last = (i, end)
        return end
