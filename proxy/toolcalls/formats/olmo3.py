"""OLMo 3 (allenai/Olmo-3-7B-Instruct, Olmo-3-32B-Think...): Python-style calls, one a line,
between `<function_calls>` and `</function_calls>`, label `olmo3`:

    <function_calls>get_weather(city="Paris")
    get_time(tz="UTC")</function_calls>

Checked against the OLMo 3 chat template (its system prompt: "Output any function calls within
<function_calls></function_calls> XML tags"), vLLM's olmo3 tool parser (`olmo3_tool_parser.py`:
the tags, then one call a line) and Ollama's `model/parsers/olmo3.go` and its tests. A JSON list
of `{name, arguments}` inside the tags, which some OLMo prompts ask for, is read too. The turn
ends with `<|im_end|>` or `<|endoftext|>`, both in scan.END_TOKENS.

Each call is its own span (formats/blocks.py): a line that is not a call stays text. A call cut
off by the end of the reply is a call only when the reply was truncated; then its open strings
and brackets are closed before it is read.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.blocks import Item, each_block, wrapped_spans
from proxy.toolcalls.pythonic import pythonic_calls
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import json_seq

OPEN, CLOSE = "<function_calls>", "</function_calls>"
# A call's head: a name (Llama's `brave_search.call` style dots allowed), then its `(`.
_HEAD = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*[ \t]*\(")
_PAIRS = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}


def _find(s: str, ctx: Ctx) -> list[Span]:
    return each_block(s, OPEN, CLOSE, lambda p, scan: _block(s, p, ctx, scan))


def _block(s: str, p: int, ctx: Ctx, scan: Scan) -> tuple[list[Span], int]:
    """The spans of the wrapper opening at s[p], and where it ends."""
    i = skip(s, p + len(OPEN))
    if i < len(s) and s[i] in "{[":
        calls: list[RawCall] = []
        end = json_seq(s, i, ctx, calls, scan)
        if end < 0:
            return [], i
        items = [Item(i, end, calls)]
    else:
        items, end = _lines(s, i, ctx, scan)
    i = skip(s, end)
    if s.startswith(CLOSE, i):
        end = i + len(CLOSE)
    return wrapped_spans(p, items, end, "olmo3", ctx), end


def _lines(s: str, i: int, ctx: Ctx, scan: Scan) -> tuple[list[Item], int]:
    """The calls from s[i] on, one a line, and where the last one ends.

    Inside a closed wrapper a line that is not a call is an item of its own (it stays text and
    the calls after it are still read); without the close tag the first such line ends the calls.
    """
    items: list[Item] = []
    close = scan.close_at(i)
    bound = close if close >= 0 else scan.limit(i)
    while i < bound:
        m = _HEAD.match(s, i, bound)
        end = scan.value(m.end() - 1) if m else None
        if m and end is None and close < 0:
            cut = _cut_off(s, i, ctx, scan)
            if cut is not None:
                items.append(cut)
                i = len(s)
            break
        if end is None:
            if close < 0:
                break
            nl = s.find("\n", i, bound)
            end = bound if nl < 0 else nl
            items.append(Item(i, end, []))
        else:
            items.append(Item(i, end, pythonic_calls(s[i:end]) or []))
            if end > bound:  # the close tag found was inside a string of this call
                close = scan.close_at(end)
                bound = close if close >= 0 else scan.limit(end)
        i = skip(s, end, ",;")
    return items, i


def _cut_off(s: str, i: int, ctx: Ctx, scan: Scan) -> Item | None:
    """A call that runs to the end of a truncated reply, its strings and brackets closed."""
    if not ctx.truncated or scan.limit(i) != len(s):
        return None
    text = _closed(s[i:].rstrip())
    found = pythonic_calls(text) if text else None
    if not found and text:
        # Cut right after a separator or a key's `=`: read the call without the last keyword.
        head = text[: text.rfind(",")] if "," in text else ""
        found = pythonic_calls(_closed(head) or "") if head else None
    return Item(i, len(s), found) if found else None


def _closed(text: str) -> str | None:
    """`text` with its open strings and brackets closed, or None when a bracket is unmatched."""
    stack: list[str] = []
    k = 0
    while k < len(text):
        c = text[k]
        if stack and stack[-1] in "\"'":
            if c == "\\":
                k += 1
            elif c == stack[-1]:
                stack.pop()
        elif c in _PAIRS:
            stack.append(c)
        elif c in ")]}" and (not stack or _PAIRS[stack.pop()] != c):
            return None
        k += 1
    if text.endswith("\\") and stack and stack[-1] in "\"'":
        text = text[:-1]
    return text + "".join(_PAIRS[c] for c in reversed(stack))


FAMILY: Family = Family("olmo3", _find, markers=(OPEN,))
