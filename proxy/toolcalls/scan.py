"""The string scanning every format finder shares: where a value ends, where a think block
ends, and the end-of-turn tokens a template leaves after a call.

Splitting calls out of prose is done with these string-aware scanners before anything is parsed:
a JSON repair library given a whole message turns prose into `''` and braces into lists. The
scans are bounded (`Scan`) so that a text of many unclosed openers costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

# Reasoning blocks, whose text is never a call: `<think>` (Qwen3, DeepSeek R1, GLM, Kimi...),
# Magistral's `[THINK]`, Seed-OSS's `<seed:think>`, Command R7B/A's `<|START_THINKING|>`,
# Apertus' `<|inner_prefix|>`, Kimi K3's `<|open|>think<|sep|>`.
THINK_CLOSE = (
    "</think>", "[/THINK]", "</seed:think>", "<|END_THINKING|>", "<|inner_suffix|>",
    "<|close|>think<|sep|>",
)  # fmt: skip
THINK_OPEN = (
    "<think>", "[THINK]", "<seed:think>", "<|START_THINKING|>", "<|inner_prefix|>",
    "<|open|>think<|sep|>",
)  # fmt: skip
# Tool-call sections that end an open think block: Kimi K2 (Thinking) may begin its calls with
# no `</think>` before them (the reasoning parsers of vLLM and SGLang end reasoning there), and
# with no section marker either (llama.cpp's Kimi K2 parser ends reasoning at the call's own
# `<|tool_call_begin|>`; tests/toolcall_peers/llama_cpp.py kimi-k2-inside-think-no-section-no-end).
THINK_ENDERS = ("<|tool_calls_section_begin|>", "<|tool_call_begin|>")
_THINK_TAGS = re.compile("|".join(map(re.escape, (*THINK_OPEN, *THINK_CLOSE))))
# A word every think tag holds: a reply without any has no think block, told by a few searches
# in C before any regex runs (tests/unit/toolcalls check that every tag holds one).
THINK_WORDS = ("think", "THINK", "inner_")


def may_think(text: str) -> bool:
    """Whether a think tag (THINK_OPEN, THINK_CLOSE) may be in `text`."""
    return any(word in text for word in THINK_WORDS)


# Where the first tag of each kind begins, and which: of several beginning there, the first in
# the tuple's order, as an alternation picks it (`first_of`).
THINK_OPEN_AT = re.compile("|".join(map(re.escape, THINK_OPEN)))
THINK_CLOSE_AT = re.compile("|".join(map(re.escape, THINK_CLOSE)))
THINK_ENDS_AT = re.compile("|".join(map(re.escape, (*THINK_CLOSE, *THINK_ENDERS))))


# What `value_end` stops at: a quote or a bracket; what lies between is skipped in one search.
_VALUE_STOP = re.compile(r"[\"'{}\[\]()]")
# The rest of a double-quoted string after its opening quote: escapes taken two characters at a
# time, up to the quote that closes it.
_DOUBLE_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def value_end(s: str, i: int, limit: int | None = None) -> int | None:
    """Index after the JSON-ish value opening at s[i] (`{`, `[` or `(`), or None if unclosed.

    Braces inside strings do not count. A single quote opens a string only where a value or key
    may start, so apostrophes in prose-like text do not derail the scan. The scan stops at
    `limit` (default: the end of `s`); a value still open there counts as unclosed.

    A search for the next quote or bracket, not a loop over every character: the text between
    them matters only by its last non-space character (what a single quote follows).
    """
    depth = 0
    n = len(s) if limit is None else min(limit, len(s))
    prev = ""
    search, string_rest = _VALUE_STOP.search, _DOUBLE_REST.match
    while i < n:
        m = search(s, i, n)
        if m is None:
            return None
        j = m.start()
        if j > i and (between := s[i:j].rstrip()):
            prev = between[-1]
        c = s[j]
        if c == '"':  # `string_end`'s first case, inline: most stops are double quotes
            m = string_rest(s, j + 1, n)
            if m is None:
                return None
            i = m.end()
            prev = '"'
            continue
        if c == "'" and prev in "{[(,:=":
            i = string_end(s, j, n)
            if i < 0:
                return None
            prev = '"'
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return j + 1
        prev = c
        i = j + 1
    return None


def string_end(s: str, i: int, n: int | None = None) -> int:
    """Index after the string whose quote is s[i] (scanning no further than `n`), or -1.

    A single-quoted string ends only at a quote that a separator or closer follows, so an
    apostrophe inside it does not end it."""
    quote = s[i]
    n = len(s) if n is None else n
    if quote == '"':
        m = _DOUBLE_REST.match(s, i + 1, n)
        return m.end() if m is not None else -1
    j = i + 1
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            rest = s[j + 1 : j + 40].lstrip()
            if not rest or rest[0] in ",}]):":
                return j + 1
        j += 1
    return -1


def skip(s: str, i: int, chars: str = "") -> int:
    while i < len(s) and (s[i].isspace() or s[i] in chars):
        i += 1
    return i


def skip_back(s: str, j: int, floor: int = 0) -> int:
    """Where the whitespace right before s[j] begins, not before `floor`: `skip` backwards."""
    while j > floor and s[j - 1].isspace():
        j -= 1
    return j


def structural_close(
    s: str,
    close: str,
    start: int,
    limit: int,
    follows: tuple[str, ...],
    *,
    end: int | None = None,
    gap: Callable[[str, int], int] = skip,
) -> int:
    """The first `close` in s[start:limit] that a structural tag of `follows` comes right after
    (past what `gap` skips), or that reaches `end` (None: the end never counts); -1 when none.
    A value's close tag is structural only so: code in the value may hold it literally."""
    q = s.find(close, start, limit)
    while q >= 0:
        after = gap(s, q + len(close))
        if (end is not None and after >= end) or s.startswith(follows, after):
            return q
        q = s.find(close, q + 1, limit)
    return -1


def split_think(text: str, starts: re.Pattern[str] | None = None) -> tuple[str, str, str]:
    """(head, scan, rest): only `scan` may hold calls; head is the reasoning before it.

    Read forwards, the way a stream arrives: a think block runs from its open tag to the first
    close tag after it, a close tag with no open before it ends reasoning whose open tag was in
    the prompt (DeepSeek R1, Qwen3), and once a call marker (`starts`) appears outside a think
    block, nothing after it is a think tag: a `</think>` or `<think>` written inside a call's
    arguments (a file about chat templates) is the call's text. A think block left open is
    `rest`, unless a tool-call section begins inside it (THINK_ENDERS: Kimi K2 goes from
    reasoning to its calls without closing the block).
    """
    if not may_think(text):
        return "", text, ""  # what the loop finds with no think tag: a marker or nothing
    cut = pos = 0
    while True:
        tag = _first_tag(text, pos, starts)
        if tag is None:
            return text[:cut], text[cut:], ""
        at, name = tag
        if name in THINK_CLOSE:
            cut = pos = at + len(name)
            continue
        if name not in THINK_OPEN:
            return text[:cut], text[cut:], ""  # a call marker: the rest is scanned as it is
        close = first_of(text, at + len(name), THINK_ENDS_AT)
        if close is None:
            return text[:cut], text[cut:at], text[at:]
        k, closer = close
        if closer in THINK_ENDERS:
            # The block's text stays as it is, whitespace and all: a stream relayed it as it
            # came, before the section began.
            return text[:k], text[k:], ""
        cut = pos = k + len(closer)


def _first_tag(text: str, pos: int, starts: re.Pattern[str] | None) -> tuple[int, str] | None:
    """The first think tag or call marker at or after `pos` (each search stops at its first
    hit, and the next starts past it: linear over the text)."""
    tag = first_of(text, pos, _THINK_TAGS)
    m = starts.search(text, pos, tag[0] if tag else len(text)) if starts is not None else None
    return (m.start(), m.group()) if m is not None else tag


def first_of(text: str, pos: int, tags: re.Pattern[str]) -> tuple[int, str] | None:
    """Where `tags` (a pattern of tags) first matches in `text` from `pos`, and the tag."""
    m = tags.search(text, pos)
    return (m.start(), m.group()) if m is not None else None


def first_match(strings: set[str]) -> str:
    """A regex that matches where some string of `strings` begins (a trie, one branch per
    character, ending at the shortest: only whether and where one matches is asked).

    Not `"|".join(strings)`: `re` tries every alternative at every position whose character
    opens one, and the markers of a tool set (a hundred, some opening with `c`, `t` or `a`
    for each tool name) made that five times slower over prose than the trie."""
    trie: dict[str, Any] = {}
    for text in sorted(strings, key=len):
        node = trie
        for ch in text:
            if node.get(ch) == {}:
                break  # a shorter string already ends here: that match is enough
            node = node.setdefault(ch, {})
        else:
            node.clear()  # ends here; longer strings through it add nothing
    return _trie_regex(trie, every_step_may_end=False) if trie else "(?!)"


def closed_set(strings: set[str]) -> str:
    """A regex that matches exactly the strings of `strings`, a set that holds every non-empty
    beginning of each of its strings (the beginnings of markers): a trie whose every step may
    be the last. Unlike `first_match`, it can be asked what a match is followed by."""
    trie: dict[str, Any] = {}
    for text in strings:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
    return _trie_regex(trie, every_step_may_end=True) if trie else "(?!)"


def _trie_regex(trie: dict[str, Any], *, every_step_may_end: bool) -> str:
    """The regex of a non-empty trie: each node an alternation of its characters, each followed
    by its child's regex (optional when `every_step_may_end`).

    Built children first from a stack, not by a call per level: a trie is as deep as the longest
    string, a tool name the client chose, and compiled code does not count the recursion limit
    (proxy/compiled.py)."""
    made: dict[int, str] = {}  # id(node) -> its regex, once its children's are made
    stack: list[tuple[dict[str, Any], bool]] = [(trie, False)]
    while stack:
        node, children_made = stack.pop()
        if not children_made:
            stack.append((node, True))
            stack.extend((child, False) for child in node.values() if child)
            continue
        alts = []
        for ch, child in node.items():
            tail = made.pop(id(child)) if child else ""
            alts.append(re.escape(ch) + (f"(?:{tail})?" if tail and every_step_may_end else tail))
        made[id(node)] = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return made[id(trie)]


class Next:
    """The first hit at or after a position, cached for positions that only grow.

    Finders ask "where is the next close tag / opener" once per candidate; without the cache an
    input made of many unclosed openers costs a scan to the end of the text per opener.
    """

    def __init__(self, find: Callable[[int], int]) -> None:
        self._find = find
        self._from = -1
        self._hit = -1

    def at(self, pos: int) -> int:
        """Index of the first hit at or after `pos`, or -1."""
        if self._from < 0 or pos < self._from or (self._hit != -1 and self._hit < pos):
            self._from, self._hit = pos, self._find(pos)
        return self._hit


_JSON_CLOSERS = {"{": "}", "[": "]"}


class Scan:
    """Bounded value scans over one text for one marker (the linear-time guard).

    A value opened after a marker is scanned only up to the marker's next occurrence; a value
    still open there may be rescanned to the end of the text while a budget of len(text)
    characters lasts, so a call whose string holds its own marker literally is still read, but
    a text of many unclosed openers costs linear time, not quadratic. `opener` may be a pattern,
    for a marker that has variants (DeepSeek's fullwidth or ASCII bars).
    """

    def __init__(
        self,
        s: str,
        opener: str | re.Pattern[str],
        close: str | None,
        stop: str | None = None,
    ) -> None:
        self.s = s
        if isinstance(opener, str):
            self._opener = Next(lambda p: s.find(opener, p))
        else:
            self._opener = Next(lambda p: m.start() if (m := opener.search(s, p)) else -1)
        self._close = Next(lambda p: s.find(close, p)) if close else None
        # A second bound, the outer block's opener (Seed-OSS's wrapper around its functions):
        # a parameter that never closes does not take the next block into its value.
        self._stop = Next(lambda p: s.find(stop, p)) if stop else None
        self._budget = len(s)
        # A finder's own cached searches over this text, by name (qwen3_coder's next call).
        self.searches: dict[str, Next] = {}

    def limit(self, i: int) -> int:
        """Where a value opened at s[i] must have closed: the marker's next occurrence (or the
        stop's, when it comes first)."""
        nxt = self._opener.at(i + 1)
        stop = self.stop_after(i)
        if stop >= 0 and (nxt < 0 or stop < nxt):
            nxt = stop
        return len(self.s) if nxt < 0 else nxt

    def stop_after(self, i: int) -> int:
        """Where the stop next occurs after s[i]; -1 when there is none (or no stop was given)."""
        return -1 if self._stop is None else self._stop.at(i + 1)

    def value(self, i: int) -> int | None:
        """value_end bounded by the next marker (extended while the budget lasts)."""
        limit = self.limit(i)
        end = self._json_to_close(i, limit)
        if end is not None:
            return end
        end = value_end(self.s, i, limit)
        if end is None and limit < len(self.s) and self._budget > 0:
            end = value_end(self.s, i)
            self._budget -= (end or len(self.s)) - i
        return end

    def _json_to_close(self, i: int, limit: int) -> int | None:
        """Where the value at s[i] ends when all the format's tag holds is one JSON object or
        array (the usual call: `<tool_call>{...}</tool_call>`); None to scan for it.

        Then `value_end` would find its end there, as JSON has no quote, bracket or parenthesis
        outside its strings but its own. One parse in C instead of a regex search for each
        quote and bracket: 0.25 µs against 2.9 for a one-argument call (issue 17)."""
        s = self.s
        closer = _JSON_CLOSERS.get(s[i])
        if closer is None or self._close is None:
            return None
        c = self._close.at(i)
        if not 0 <= c < limit:
            return None
        body = s[i:c].rstrip()
        if not body.endswith(closer):
            return None
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError:
            return None  # a value and text after it, a repairable one, or no JSON: scanned
        return i + len(body)

    def close_at(self, i: int) -> int:
        """The format's close tag after s[i] and before the next marker, or -1."""
        if self._close is None:
            return -1
        c = self._close.at(i)
        return c if 0 <= c < self.limit(i) else -1


# Tokens that end a turn or a message, one family each (research/toolcall-formats.md and the
# families' chat templates): a server that does not strip special tokens leaves them after the
# call it failed to parse. Llama 3.x ends a tool turn with <|eom_id|> (built-in tools) or
# <|eot_id|>, Llama 4 with <|eom|>/<|eot|>; Mistral </s>; ChatML (Qwen, Hermes, Kimi, LFM2)
# <|im_end|>; harmony <|end|>, <|return|>, <|call|>; DeepSeek <｜end▁of▁sentence｜>; Gemma
# <end_of_turn>, FunctionGemma <start_function_response>; GLM <|observation|>; Granite and
# Llama <|end_of_text|>, Qwen <|endoftext|>; Command R <|END_OF_TURN_TOKEN|>; Ling <|role_end|>.
END_TOKENS = (
    "<|eom_id|>", "<|eot_id|>", "<|eom|>", "<|eot|>", "</s>", "<|im_end|>", "<|end|>",
    "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>", "<|end▁of▁sentence|>", "<end_of_turn>",
    "<start_function_response>", "<|observation|>", "<|end_of_text|>", "<|endoftext|>",
    "<|END_OF_TURN_TOKEN|>", "<|role_end|>",
)  # fmt: skip
_END_RUN = re.compile(r"(?:\s*(?:" + "|".join(re.escape(t) for t in END_TOKENS) + "))+")
END_RUN_AT_END = re.compile(_END_RUN.pattern + r"\s*\Z")


def past_end_tokens(s: str, i: int, limit: int | None = None) -> int:
    """Where a run of end-of-turn tokens (and the whitespace between) starting at s[i] ends,
    looking no further than `limit`."""
    m = _END_RUN.match(s, i, len(s) if limit is None else limit)
    return m.end() if m else i
