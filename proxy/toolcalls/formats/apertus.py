"""Apertus (swiss-ai/Apertus-8B-Instruct-2509, Apertus-70B, Apertus 1.5): a JSON list of
one-key objects `{"NAME": {args}}` between the special tokens `<|tools_prefix|>` and
`<|tools_suffix|>`, label `apertus`:

    <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"get_time": {}}]<|tools_suffix|>

Checked against vLLM's `apertus_tool_parser.py` (its docstring and the optional suffix), SGLang's
`apertus2509_detector.py`, Ollama's `model/parsers/apertus15.go` and its tests (several
envelopes with prose between them, a missing suffix, arguments that must be an object) and
llama.cpp's short form. The assistant turn ends with `<|assistant_end|>`, which scan.END_TOKENS
does not list: the span takes it. `{name, arguments}` objects in the list are read too.

Each list element is its own span (formats/blocks.py), so one malformed element stays text and
its siblings are still calls. An element cut off by the end of the reply is a call, with its
arguments still to be repaired, only when the reply was truncated.
"""

from __future__ import annotations

import re

from proxy.toolcalls.arguments import loads_lenient
from proxy.toolcalls.formats.blocks import Item, each_block, past_tokens, wrapped_spans
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import json_calls

OPEN, CLOSE = "<|tools_prefix|>", "<|tools_suffix|>"
END_TOKENS = ("<|assistant_end|>",)
# Keys that make a one-key object a call wrapper rather than Apertus' {"NAME": {args}}.
_WRAPPERS = {"name", "function", "tool_call", "tool_calls"}
_FIRST_KEY = re.compile(r'\{\s*"((?:[^"\\]|\\.)+)"\s*:\s*(?=\{)')


def _find(s: str, ctx: Ctx) -> list[Span]:
    return each_block(s, OPEN, CLOSE, lambda p, scan: _block(s, p, ctx, scan))


def _block(s: str, p: int, ctx: Ctx, scan: Scan) -> tuple[list[Span], int]:
    """The spans of the envelope opening at s[p], and where it ends."""
    i = skip(s, p + len(OPEN))
    listed = s.startswith("[", i)
    if listed:
        i = skip(s, i + 1)
    items: list[Item] = []
    while i < len(s) and s[i] == "{":
        end = scan.value(i)
        if end is None:
            cut = _cut_off(s, i, ctx, scan)
            if cut is not None:
                items.append(cut)
                i = len(s)
            break
        after = skip(s, end, ",")
        items.append(Item(i, after, _element(s[i:end], ctx)))
        i = after
        if not listed:
            break
    if not items:
        return [], i
    if listed and s.startswith("]", i):
        i = skip(s, i + 1)
    if s.startswith(CLOSE, i):
        i += len(CLOSE)
    end = past_tokens(s, i, END_TOKENS)
    return wrapped_spans(p, items, end, "apertus", ctx), end


def _element(text: str, ctx: Ctx) -> list[RawCall]:
    """The call one list element spells: {"NAME": {args}}, or a {name, arguments} object."""
    parsed = loads_lenient(text)
    if parsed is None:
        return []
    value, repaired = parsed
    if isinstance(value, dict) and len(value) == 1:
        ((name, args),) = value.items()
        if name not in _WRAPPERS:
            # The marker vouches for the shape: arguments must be an object (Ollama rejects a
            # string, a list or null), and `{}` is a call without arguments.
            return [(name, args, repaired)] if isinstance(args, dict) and name.strip() else []
    return json_calls(text, ctx.schemas) or []


def _cut_off(s: str, i: int, ctx: Ctx, scan: Scan) -> Item | None:
    """An element that runs to the end of a truncated reply: its name, and its arguments as
    text for the repair (BEHAVIOUR.md 4.1)."""
    if not ctx.truncated or scan.limit(i) != len(s) or scan.close_at(i) >= 0:
        return None
    m = _FIRST_KEY.match(s, i)
    if m is None or m.group(1) in _WRAPPERS:
        return None
    return Item(i, len(s), [(m.group(1), s[m.end() :].rstrip(), False)])


FAMILY: Family = Family("apertus", _find, markers=(OPEN,))
