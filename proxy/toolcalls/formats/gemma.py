"""FunctionGemma's and Gemma 4's calls: `<start_function_call>call:NAME{key:<escape>text<escape>}
<end_function_call>` and `<|tool_call>call:NAME{...}<tool_call|>`, and the `call:NAME{` residue a
server leaves when it strips the tags (declared tools only). research/toolcall-formats.md,
section 1. The `<|tool_response>` Gemma 4 writes after its call (the turn's boundary: the template
expects the tool's answer next) goes with the call as a closer, as Ollama's gemma4 parser drops it
(TestGemma4Parser_IgnoresToolResponseBoundaryAfterToolCall).
"""

from __future__ import annotations

import bisect
import re

from proxy.jsontext import compact
from proxy.toolcalls.scan import skip, skip_back, string_end
from proxy.toolcalls.spans import Ctx, Family, Span

_GEMMA = [("<start_function_call>", "<end_function_call>"), ("<|tool_call>", "<tool_call|>")]
_GEMMA_STR = ("<escape>", '<|"|>')


def _gemma(s: str, ctx: Ctx) -> list[Span]:
    found: list[tuple[int, int, str, str]] = []  # (start, brace, name, close)
    for open_, close in [*_GEMMA, ("", "")]:
        # Inside the tags a space may come before the brace (Ollama trims the name); the
        # stripped residue must be `call:NAME{` exactly, the marker the stream holds at.
        lead, gap = (re.escape(open_) + r"\s*", r"\s*") if open_ else ("", "")
        for m in re.finditer(lead + r"call:([\w.\-]+)" + gap + r"\{", s):
            if open_ or m.group(1) in ctx.schemas:  # the stripped residue: declared tools only
                found.append((m.start(), m.end() - 1, m.group(1), close))
    found.sort()
    starts = [start for start, _, _, _ in found]
    spans: list[Span] = []
    for start, brace, name, close in found:
        if spans and start < spans[-1].end:
            continue  # the residue match inside a tagged call, or a call inside arguments
        nxt = bisect.bisect_right(starts, brace)
        limit = starts[nxt] if nxt < len(starts) else len(s)
        args, i, closed = _Args(s, limit, close).read(brace)
        if not closed and not (ctx.truncated and limit == len(s)):
            continue
        i = skip(s, i)
        if close and s.startswith(close, i):
            i += len(close)
        spans.append(Span(start, i, [(name, args, False)], "functiongemma"))
    return spans


class _Args:
    """`{key:<escape>text<escape>,n:3}` -> JSON-ish text with the escaped strings quoted, for the
    lenient parse (4.2) to finish. The edges the peers meet, read here too:
    - a missing comma between arguments (`{a:<escape>x<escape>b:2}`: vLLM's streaming test
      writes its arguments so), and between list items; one is put back before a string, a
      `{`/`[` or a key that follows a finished value;
    - a single-quoted value (`pattern:':\\s*\\w+'`), with a stray delimiter after it dropped
      (Ollama's gemma4 repairs, ollama#15315);
    - in a tagged call, a last string whose closing delimiter is missing (`command:<|"|>ls}
      <tool_call|>`): it ends before the object's last `}` (Ollama does the same).
    A value still open at `limit` (the next call) is returned as it stands, not closed.
    """

    def __init__(self, s: str, limit: int, close: str) -> None:
        self.s, self.limit, self.close = s, limit, close
        self.out: list[str] = []
        self.last = ""  # the last character written that is not whitespace

    def read(self, i: int) -> tuple[str, int, bool]:
        """(text, end, closed) for the object opening at s[i]."""
        s, depth = self.s, 0
        while i < self.limit:
            delim = next((d for d in _GEMMA_STR if s.startswith(d, i)), None)
            c = s[i]
            if delim is not None or c == '"' or (c == "'" and self.last in ":[,"):
                j = self._string(i, delim)
                if j < 0:
                    return "".join(self.out) + s[i : self.limit], self.limit, False
                i = j
                continue
            if c.isalnum() or c in "_.+-":
                i = self._word(i)
                continue
            if c in "{[":
                self._comma()
                depth += 1
            elif c in "}]":
                depth -= 1
            self._put(c)
            i += 1
            if depth == 0:
                return "".join(self.out), i, True
        return "".join(self.out), self.limit, False

    def _put(self, text: str) -> None:
        self.out.append(text)
        if text.strip():
            self.last = text.rstrip()[-1]

    def _comma(self) -> None:
        if self.last and self.last not in "{[,:":
            self._put(",")  # a value ended and another item begins: the comma the model left out

    def _word(self, i: int) -> int:
        """A bare key or scalar (`days`, `3`, `-2.5`, `true`); a key after a value gets a comma."""
        s, j = self.s, i
        while j < self.limit and (s[j].isalnum() or s[j] in "_.+-"):
            j += 1
        if s.startswith(":", skip(s, j)):
            self._comma()
        self._put(s[i:j])
        return j

    def _string(self, i: int, delim: str | None) -> int:
        """Write the string opening at s[i] as JSON; where it ends, or -1 while it is open."""
        s = self.s
        if delim is None and s[i] == '"':
            end = string_end(s, i, self.limit)
            if end > 0:
                self._comma()
                self._put(s[i:end])
            return end
        if delim is None:
            return self._single(i)
        close = s.find(delim, i + len(delim), self.limit)
        if close < 0:
            # Repaired only where a value begins (`key:<|"|>ls}`): after a word it is a
            # delimiter out of place (`<|"|>one,b:<|"|>two<|"|>}`), and the call stays text.
            close = self._brace_before_close(i + len(delim)) if self.last == ":" else -1
            if close < 0:
                return -1
            self._comma()
            self._put(compact(s[i + len(delim) : close]))
            return close
        self._comma()
        self._put(compact(s[i + len(delim) : close]))
        return close + len(delim)

    def _single(self, i: int) -> int:
        """`'text'` as a value: it ends at a quote before `,`, `}`, `]` or a delimiter."""
        s, j = self.s, i + 1
        while j < self.limit:
            if s[j] == "\\":
                j += 2
                continue
            rest = s[j + 1 : j + 12].lstrip()
            if s[j] == "'" and (not rest or rest[0] in ",}]" or rest.startswith(_GEMMA_STR)):
                self._put(compact(s[i + 1 : j].replace("\\'", "'")))
                k = skip(s, j + 1)
                dangling = next((d for d in _GEMMA_STR if s.startswith(d, k)), None)
                return k + len(dangling) if dangling else j + 1
            j += 1
        return -1

    def _brace_before_close(self, i: int) -> int:
        """The object's last `}` before a tagged call's close tag, when a string opened at s[i]
        never closes; -1 when there is no close tag before `limit`, or no brace before it."""
        if not self.close:
            return -1
        c = self.s.find(self.close, i, self.limit)
        c = skip_back(self.s, c, i) if c > i else c
        return c - 1 if c > i and self.s[c - 1] == "}" else -1


FAMILY: Family = Family(
    "functiongemma",
    _gemma,
    markers=tuple(o for o, _ in _GEMMA),
    named=("call:NAME{",),
    closers=(*(c for _, c in _GEMMA), "<|tool_response>"),
)
