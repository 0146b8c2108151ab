"""The invoke/parameter XML shape three families share: `<invoke name="NAME">` with
`<parameter name="KEY">value</parameter>` blocks and `</invoke>`, inside a block's open and close
tags. MiniMax M2 (formats/minimax.py), DeepSeek V3.2's DSML (formats/dsml.py) and Step3's
steptml (formats/step3.py) spell the tags differently; the tag names are parameters here (`Tags`,
`Block`) and every function is pure.

Where a value ends is the hard part: code in a value may hold a literal `</parameter>`, and a
model may leave a `</parameter>` out. A `</parameter>` ends a value when a structural tag follows
it (the next parameter, `</invoke>`, the next invoke, the block's close); one that does not is
part of the value. A value whose close is missing ends at the next parameter or `</invoke>`:
the structural close after it is the next parameter's own. Whitespace inside a value is kept;
where a dialect frames values with newlines (`Tags.frame`: MiniMax's own parser removes them),
one newline after the opening tag and one before the closing tag are removed, no more.

One invoke that is broken or names an undeclared tool is left out of its block; its valid
siblings are still calls. An invoke is a call when `</invoke>` (or a structural tag after it:
the next invoke, the block's close) ends it, or when the reply was cut off (`ctx.truncated`) and
it runs to the end of the text. Scans are bounded by the next block opener and use `Next`, so a
text of many unclosed openers costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.toolcalls.formats.blocks import Item, wrapped_spans
from proxy.toolcalls.scan import Next, skip, structural_close
from proxy.toolcalls.spans import Ctx, Span
from proxy.toolcalls.values import tool_props, typed_value

# A tag's attributes end within this many characters of its name (tool names are at most 64).
HEADER_MAX = 512
_NAME = re.compile(r"\s*(?:\"([^\"<>]*)\"|'([^'<>]*)'|([^\s\"'<>]+))")
_ATTR = re.compile(r"\s*([\w:.-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))")


@dataclass(frozen=True)
class Tags:
    """One dialect's tag names. `invoke` and `param` are the opening tags up to the name's value
    (`<invoke name=`); `outer` are the tags around invokes (the block's close, Step3's call end),
    before which a value or an invoke ends; `frame` says values may be framed by newlines;
    `json_body` that an invoke may hold one JSON object instead of parameters (DSML)."""

    invoke: str
    invoke_end: str
    param: str
    param_end: str
    outer: tuple[str, ...] = ()
    frame: bool = False
    json_body: bool = False


@dataclass(frozen=True)
class Block:
    """A block of invokes: `open` ... `close`, each invoke after the `call_open` tokens (Step3's
    `<｜tool_call_begin｜>`), then optionally the `call_lead` tokens (Step3's
    `function<｜tool_sep｜>`) and the invoke's name again on a line of its own, and before
    `call_close`; `end_tokens` are the template's end-of-turn tokens, taken with the block when
    they follow it."""

    open: str
    close: str
    tags: Tags
    call_open: tuple[str, ...] = ()
    call_lead: tuple[str, ...] = ()
    call_close: str = ""
    end_tokens: tuple[str, ...] = ()


@dataclass(frozen=True)
class Param:
    """A parameter's text (without framing newlines) and its tag's other attributes."""

    text: str
    attrs: dict[str, str]


@dataclass(frozen=True)
class Invoke:
    """One invoke as read: `complete` when its close ended it, or a structural tag after its
    parameters; not when the text ran out. `body` is the JSON object an invoke held instead of
    parameters (`Tags.json_body`): then it is the call's arguments."""

    name: str
    params: dict[str, Param]
    end: int
    complete: bool
    body: dict[str, Any] | None = None


# name, parameters, context -> the call's arguments
Typer = Callable[[str, dict[str, Param], Ctx], dict[str, Any]]


def arguments(inv: Invoke, ctx: Ctx, typer: Typer) -> dict[str, Any]:
    """An accepted invoke's arguments: its JSON body as written, else its typed parameters."""
    return inv.body if inv.body is not None else typer(inv.name, inv.params, ctx)


def schema_typed(name: str, params: dict[str, Param], ctx: Ctx) -> dict[str, Any]:
    """Each parameter's text typed by the tool's schema (`typed_value`); unknown keys stay text."""
    props = tool_props(ctx.schemas, name)
    return {k: typed_value(p.text, props.get(k)) for k, p in params.items()}


def header(s: str, i: int, limit: int) -> tuple[str, dict[str, str], int] | None:
    """(name, other attributes, index after `>`) of the tag whose `name=` ends at s[i]."""
    close = s.find(">", i, min(limit, i + HEADER_MAX))
    if close < 0:
        return None
    text = s[i:close]
    m = _NAME.match(text)
    if m is None or "<" in text:  # a tag missing its `>` runs into the next one
        return None
    name = next(g for g in m.groups() if g is not None).strip()
    if not name or "\n" in name:
        return None
    attrs = {a[1]: _group(a) for a in _ATTR.finditer(text, m.end())}
    return name, attrs, close + 1


def _group(m: re.Match[str]) -> str:
    return next(g for g in m.groups()[1:] if g is not None)


def trim_frame(value: str, frame: bool = True) -> str:
    """A value without the one framing newline after its opening and before its closing tag."""
    if not frame:
        return value
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


class Reader:
    """The tag searches of one region s[..limit] (a block, or one bare invoke), cached with
    `Next` for positions that only grow: one instance per search role."""

    def __init__(self, s: str, tags: Tags, limit: int) -> None:
        self.s, self.tags, self.limit = s, tags, limit
        self.hard = (tags.invoke, *tags.outer)  # tags no value runs past
        self.stops = (tags.param, tags.invoke_end, *self.hard)
        self._param = self._next(tags.param)
        self._param_close = self._next(tags.param_end)  # the first close after a parameter opener
        self._invoke_end = self._next(tags.invoke_end)
        self._hard = [self._next(t) for t in self.hard]
        self._structural = Next(self._structural_close)
        self._stop = [self._next(t) for t in self.stops]

    def _next(self, tag: str) -> Next:
        s, limit = self.s, self.limit
        return Next(lambda p: s.find(tag, p, limit))

    def _structural_close(self, pos: int) -> int:
        limit = self.limit
        return structural_close(self.s, self.tags.param_end, pos, limit, self.stops, end=limit)

    def next_stop(self, pos: int) -> int:
        """The first structural tag at or after `pos`, or -1."""
        return _first(f.at(pos) for f in self._stop)

    def value(self, start: int, truncated: bool) -> tuple[str, int] | None:
        """The text of the value opening at s[start] and where its parameter ends; None when it
        never ends (it runs to the end of the text only when the reply was cut off)."""
        s, end_tag = self.s, self.tags.param_end
        q = self._structural.at(start)
        hard = _first(f.at(start) for f in self._hard)
        p = self._param.at(start)
        owned = 0 <= p < q and self._param_close.at(p) == q  # the next parameter's own close
        if q >= 0 and (hard < 0 or q < hard) and not owned:
            return trim_frame(s[start:q], self.tags.frame), q + len(end_tag)
        bound = _first((p, self._invoke_end.at(start), hard))
        if bound < 0 and not (truncated and self.limit == len(s)):
            return None
        bound = len(s) if bound < 0 else bound
        # No structural close is this value's: it ends at its last close before the next tag
        # (the text after it is not the value's), else at that tag (its close is missing).
        k = s.rfind(end_tag, start, bound)
        if k >= 0:
            return trim_frame(s[start:k], self.tags.frame), k + len(end_tag)
        # The newline before the next tag separates the tags in every template: not the value's.
        text = s[start:bound]
        return trim_frame(text[:-1] if text.endswith("\n") else text, self.tags.frame), bound


def _first(hits: Any) -> int:
    found = [h for h in hits if h >= 0]
    return min(found) if found else -1


def read_invoke(s: str, p: int, reader: Reader, truncated: bool) -> Invoke | None:
    """The invoke whose opening tag starts at s[p], or None when it is broken."""
    tags, limit = reader.tags, reader.limit
    head = header(s, p + len(tags.invoke), limit)
    if head is None:
        return None
    name, _, i = head
    params: dict[str, Param] = {}
    stray: list[str] = []  # text inside the invoke that is no tag
    cut = truncated and limit == len(s)  # a call may run to the end of the text
    while True:
        i = skip(s, i)
        if s.startswith(tags.invoke_end, i):
            return _ended(Invoke(name, params, i + len(tags.invoke_end), True), stray, tags, True)
        if i >= limit or s.startswith(reader.hard, i):
            # Ended by the next invoke or block without its close: a call if it said something.
            closed = i < len(s)
            return _ended(Invoke(name, params, i, closed and bool(params)), stray, tags, closed)
        if s.startswith(tags.param, i):
            found = _param(s, i, reader, truncated)
            if found is None:
                return Invoke(name, params, len(s), False) if cut else None
            key, param, i = found
            params[key] = param
            continue
        # Text inside the invoke that is no tag: on to its next tag.
        nxt = reader.next_stop(i)
        if nxt < 0:
            return Invoke(name, params, len(s), False) if cut else None
        stray.append(s[i:nxt])
        i = nxt


def _ended(inv: Invoke, stray: list[str], tags: Tags, closed: bool) -> Invoke | None:
    """An invoke as it ended, with the text inside it that was no parameter: skipped between
    parameters, but when there is nothing else it is what the invoke says. A JSON object is its
    arguments where the dialect allows one (`Tags.json_body`); other text leaves the invoke
    broken, since `{}` would be a wrong call. `closed`: a tag ended it, not the text."""
    text = "".join(stray).strip()
    if inv.params or not text:
        return inv
    body = _json_object(text) if tags.json_body else None
    if body is None:
        return None
    return Invoke(inv.name, {}, inv.end, closed, body)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _param(s: str, i: int, reader: Reader, truncated: bool) -> tuple[str, Param, int] | None:
    head = header(s, i + len(reader.tags.param), reader.limit)
    if head is None:
        return None
    key, attrs, start = head
    found = reader.value(start, truncated)
    if found is None:
        return None
    text, end = found
    return key, Param(text, attrs), end


def accepted(inv: Invoke | None, s: str, truncated: bool) -> bool:
    """Whether an invoke as read is a call: ended by a tag, or cut off with the reply. A cut
    invoke needs a parameter: `<invoke name="x">` alone at the end says nothing yet."""
    if inv is None:
        return False
    return inv.complete or (truncated and inv.end == len(s) and bool(inv.params))


def after_tokens(s: str, i: int, tokens: Sequence[str]) -> int:
    """Index after `tokens` written in order from s[i] (whitespace between), or -1."""
    for tok in tokens:
        i = skip(s, i)
        if not s.startswith(tok, i):
            return -1
        i += len(tok)
    return skip(s, i)


def past_tokens(s: str, i: int, tokens: Sequence[str]) -> int:
    """Where an end token right after s[i] (whitespace first) ends; i when none follows."""
    j = skip(s, i)
    return next((j + len(t) for t in tokens if s.startswith(t, j)), i)


def read_block(
    s: str, p: int, limit: int, ctx: Ctx, block: Block, typer: Typer
) -> tuple[list[Item], int] | None:
    """The invokes of the block opening at s[p], one item each, and where the block ends; None
    when it never closes (a marker in prose, a call cut off while finish was "stop").

    An invoke naming an undeclared tool is an item with no call, and a broken one no item at
    all: either way its text stays, and its valid siblings are still recovered
    (formats/blocks.py), as in every family."""
    reader = Reader(s, block.tags, limit)
    call_start = block.call_open[0] if block.call_open else block.tags.invoke
    starts = Next(lambda q: s.find(call_start, q, limit))
    closes = Next(lambda q: s.find(block.close, q, limit))
    items: list[Item] = []
    i, end = p + len(block.open), -1
    while True:
        i = skip(s, i)
        if s.startswith(block.close, i):
            end = i + len(block.close)
            break
        j = _call_head(s, i, block)
        opens = j >= 0 and s.startswith(block.tags.invoke, j)
        inv = read_invoke(s, j, reader, ctx.truncated) if opens else None
        if inv is not None and accepted(inv, s, ctx.truncated):
            start, i = i, _after_call(s, inv.end, block.call_close)
            end = i
            declared = inv.name in ctx.schemas
            call = (inv.name, arguments(inv, ctx, typer), False) if declared else None
            items.append(Item(start, i, [call] if call else []))
            continue
        # A broken invoke, or text between invokes: on to the next invoke or the close, its
        # text an item with no call (it stays as it was).
        nxt = _first((starts.at(i + 1), closes.at(i + 1)))
        if nxt < 0:
            break
        items.append(Item(i, nxt, []))
        i = nxt
    return (items, end) if any(it.calls for it in items) and end >= 0 else None


_LEAD_NAME = re.compile(r"[^\s<>]+")


def _call_head(s: str, i: int, block: Block) -> int:
    """Where the invoke of the call at s[i] should open (-1: the call tokens are not there).

    A name written after the lead tokens is passed over: the invoke's own name is the one its
    parameters go with (as vLLM's step3 parser reads it), and the bare finder would read the
    invoke by that name anyway."""
    j = after_tokens(s, i, block.call_open)
    if j < 0 or not block.call_lead:
        return j
    k = after_tokens(s, j, block.call_lead)
    if k < 0 or s.startswith(block.tags.invoke, k):
        return j if k < 0 else k
    m = _LEAD_NAME.match(s, k)
    return -1 if m is None else skip(s, m.end())


def _after_call(s: str, i: int, call_close: str) -> int:
    j = skip(s, i)
    return j + len(call_close) if call_close and s.startswith(call_close, j) else i


@dataclass(frozen=True)
class Bare:
    """Invokes written without their block (a server stripped the block's special tokens):
    `tags.invoke` opens one; `lead` is residue allowed right before it (Step3's `function`),
    `exact` a template the opening must match for a declared NAME (MiniMax's bare `<invoke`
    is common enough in prose that only `<invoke name="NAME">` counts)."""

    tags: Tags
    lead: str = ""
    exact: str = ""
    end_tokens: tuple[str, ...] = ()


def find_spans(
    s: str, ctx: Ctx, fmt: str, blocks: Sequence[Block], bare: Sequence[Bare], typer: Typer
) -> list[Span]:
    """Every block's and bare invoke's span in `s`, in order, labelled `fmt`."""
    openers = [*(b.open for b in blocks), *(b.tags.invoke for b in bare)]
    if not any(o in s for o in openers):
        return []
    nexts = [_finder(s, o) for o in openers]
    forms: list[Block | Bare] = [*blocks, *bare]
    spans: list[Span] = []
    pos = 0
    while True:
        hits = [(f.at(pos), k) for k, f in enumerate(nexts)]
        live = [h for h in hits if h[0] >= 0]
        if not live:
            return spans
        p, k = min(live)
        form = forms[k]
        # A block runs to its opener's next occurrence, a bare invoke to any opener's.
        ahead = [nexts[k]] if isinstance(form, Block) else nexts
        limit = _first(f.at(p + 1) for f in ahead)
        limit = len(s) if limit < 0 else limit
        if isinstance(form, Block):
            found = _block_spans(s, p, limit, ctx, form, typer, fmt)
        else:
            bare_span = _bare_span(s, p, limit, ctx, form, typer, fmt)
            found = [bare_span] if bare_span is not None else []
        spans.extend(found)
        pos = found[-1].end if found else p + 1


def _finder(s: str, tag: str) -> Next:
    return Next(lambda q: s.find(tag, q))


def _block_spans(
    s: str, p: int, limit: int, ctx: Ctx, block: Block, typer: Typer, fmt: str
) -> list[Span]:
    found = read_block(s, p, limit, ctx, block, typer)
    if found is None:
        return []
    items, end = found
    return wrapped_spans(p, items, past_tokens(s, end, block.end_tokens), fmt, ctx)


def _bare_span(
    s: str, p: int, limit: int, ctx: Ctx, bare: Bare, typer: Typer, fmt: str
) -> Span | None:
    inv = read_invoke(s, p, Reader(s, bare.tags, limit), ctx.truncated)
    if inv is None or not accepted(inv, s, ctx.truncated) or inv.name not in ctx.schemas:
        return None
    if bare.exact and not s.startswith(bare.exact.replace("NAME", inv.name), p):
        return None
    lead = len(bare.lead)
    start = p - lead if lead and p >= lead and s.startswith(bare.lead, p - lead) else p
    call = (inv.name, arguments(inv, ctx, typer), False)
    return Span(start, past_tokens(s, inv.end, bare.end_tokens), [call], fmt)
