"""MiniMax M3's calls: every tag of the markup is namespaced by a `]<]minimax[>[` written right
before it. `]<]minimax[>[<tool_call>` holds one or more `]<]minimax[>[<invoke name="NAME">`,
each with one element per argument, named by the argument itself
(`]<]minimax[>[<city>Paris]<]minimax[>[</city>`), and `]<]minimax[>[</invoke>`; then
`]<]minimax[>[</tool_call>`. An element holding elements is an object, or an array when the
schema says so (the template writes list items as `<item>`); an empty one is `[]` or `{}` when
the schema wants one; a text value is typed by the tool's schema as in M2 (formats/minimax.py).
Reasoning is in `<mm:think>` (left to the reasoning layer); a turn ends with `[e~[`. Checked
against vLLM's minimax_m3_tool_parser.py (its docstring and element reader) and llama.cpp's
tests/test-chat.cpp MiniMax-M3 cases. Label `minimax_m3`.

Where vLLM keeps what it could read, this finder reads an invoke whole or not at all, so no call
goes out with arguments it got wrong: an element that never closes, text beside child elements,
elements where the schema wants a scalar, or one name twice in an object leave the invoke text,
its valid siblings still calls (formats/blocks.py). A closing tag written without its namespace
(`]<]minimax[>[<query>q</query>`, seen from the hosted model) still closes its element. A block
needs its `]<]minimax[>[</tool_call>`: a cut-off one stays text.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.toolcalls.formats.blocks import Item, past_tokens, wrapped_spans
from proxy.toolcalls.formats.invoke_xml import header
from proxy.toolcalls.scan import Next, skip
from proxy.toolcalls.spans import Ctx, Family, Span
from proxy.toolcalls.values import tool_props, typed_value

NS = "]<]minimax[>["
OPEN, CLOSE = f"{NS}<tool_call>", f"{NS}</tool_call>"
INVOKE, INVOKE_END = f"{NS}<invoke name=", f"{NS}</invoke>"
ELEMENT, ELEMENT_END = f"{NS}<", f"{NS}</"
END_TOKENS = ("[e~[",)
# Arguments nest no deeper than this (vLLM's reader allows 128; a deeper one is no call here).
DEPTH_MAX = 64
_KEY = re.compile(r"[^\s<>/\"'=]+")

# An element's value: its text, or its (name, value) children in order.
Element = str | list[tuple[str, "Element"]]


class _Unreadable(Exception):
    """The arguments as written do not fit the schema in one reading: the invoke stays text."""


def _find(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    p = s.find(OPEN)
    # One search for the close serves every opener: many unclosed ones cost linear time.
    closes = Next(lambda q: s.find(CLOSE, q))
    while p >= 0:
        nxt = s.find(OPEN, p + len(OPEN))
        found, end = _block(s, p, closes.at(p), nxt, ctx)
        spans.extend(found)
        p = nxt if end <= nxt or nxt < 0 else s.find(OPEN, end)
    return spans


def _block(s: str, p: int, close: int, again: int, ctx: Ctx) -> tuple[list[Span], int]:
    """The spans of the block opening at s[p] (`close` its close, `again` the next opener) and
    where it ends (or where to look on from)."""
    start = p + len(OPEN)
    if close < 0 or 0 <= again < close:
        return [], start  # it never closes: a marker in prose, or a cut-off reply
    items: list[Item] = []
    i = start
    while (i := skip(s, i)) < close:
        found = _invoke(s, i, close) if s.startswith(INVOKE, i) else None
        if found is not None:
            name, params, end = found
            args = _arguments(params, tool_props(ctx.schemas, name))
            ok = name in ctx.schemas and args is not None
            items.append(Item(i, end, [(name, args, False)] if ok else []))
            i = end
            continue
        # A broken invoke, or text between invokes: its text stays, up to the next invoke.
        nxt = s.find(INVOKE, i + 1, close)
        end = close if nxt < 0 else nxt
        items.append(Item(i, end, []))
        i = end
    if not any(it.calls for it in items):
        return [], close + len(CLOSE)
    end = past_tokens(s, close + len(CLOSE), END_TOKENS)
    return wrapped_spans(p, items, end, "minimax_m3", ctx), end


def _invoke(s: str, i: int, limit: int) -> tuple[str, list[tuple[str, Element]], int] | None:
    """(name, argument elements, end) of the invoke at s[i], or None when it is broken."""
    head = header(s, i + len(INVOKE), limit)
    if head is None:
        return None
    name, _, j = head
    params: list[tuple[str, Element]] = []
    while True:
        j = skip(s, j)
        if s.startswith(INVOKE_END, j):
            return name, params, j + len(INVOKE_END)
        if j >= limit or not s.startswith(ELEMENT, j) or s.startswith(ELEMENT_END, j):
            return None
        found = _element(s, j, limit, 1)
        if found is None:
            return None
        key, value, j = found
        params.append((key, value))


def _element(s: str, i: int, limit: int, depth: int) -> tuple[str, Element, int] | None:
    """(name, value, end) of the element whose namespaced opening tag is at s[i], or None."""
    m = _KEY.match(s, i + len(ELEMENT))
    if depth > DEPTH_MAX or m is None or not s.startswith(">", m.end()):
        return None
    key, pos = m.group(), m.end() + 1
    close = f"</{key}>"
    parts: list[str] = []
    children: list[tuple[str, Element]] = []
    while True:
        ns = s.find(NS, pos, limit)
        # The hosted model sometimes writes a closing tag without its namespace.
        bare = s.find(close, pos, limit if ns < 0 else ns)
        if bare >= 0:
            parts.append(s[pos:bare])
            pos = bare + len(close)
            break
        if ns < 0:
            return None
        parts.append(s[pos:ns])
        if s.startswith(close, ns + len(NS)):
            pos = ns + len(NS) + len(close)
            break
        if s.startswith(ELEMENT_END, ns):
            return None  # another element's close: the tags do not nest
        child = _element(s, ns, limit, depth + 1) if s.startswith(ELEMENT, ns) else None
        if child is None:
            return None
        children.append(child[:2])
        pos = child[2]
    text = "".join(parts)
    if not children:
        return key, text, pos
    return (key, children, pos) if not text.strip() else None


def _arguments(params: list[tuple[str, Element]], props: dict[str, Any]) -> dict[str, Any] | None:
    """An invoke's elements as its arguments, typed by the tool's properties; None when they
    cannot be read as written."""
    try:
        return _object(params, {"properties": props})
    except _Unreadable:
        return None


def _object(elements: list[tuple[str, Element]], schema: dict[str, Any] | None) -> dict[str, Any]:
    props = (schema or {}).get("properties")
    props = props if isinstance(props, dict) else {}
    extra = (schema or {}).get("additionalProperties")
    out: dict[str, Any] = {}
    for key, value in elements:
        if key in out:
            raise _Unreadable(key)  # one name twice: a list, or a slip? Not ours to guess.
        out[key] = _value(value, props.get(key, extra if isinstance(extra, dict) else None))
    return out


def _value(value: Element, prop: Any) -> Any:
    prop = prop if isinstance(prop, dict) else None
    kinds = _kinds(prop)
    container = next((k for k in ("array", "object") if k in kinds), "")
    if isinstance(value, str):
        # The template writes an empty list or object as an empty element.
        if container and "string" not in kinds and not value.strip():
            return [] if container == "array" else {}
        return typed_value(value, prop)
    if container == "array":
        items = _branch(prop, "array").get("items")
        return [_value(v, items) for _, v in value]
    if container == "object" or not kinds:
        return _object(value, _branch(prop, "object") if prop else None)
    raise _Unreadable("elements where the schema wants a scalar")


def _nodes(prop: dict[str, Any] | None) -> list[dict[str, Any]]:
    if prop is None:
        return []
    branches = [b for k in ("anyOf", "oneOf") for b in prop.get(k) or [] if isinstance(b, dict)]
    return [prop, *branches]


def _node_kinds(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    kinds = {str(t).lower() for t in (kind if isinstance(kind, list) else [kind]) if t}
    if not kinds and "items" in node:
        kinds.add("array")
    if not kinds and "properties" in node:
        kinds.add("object")
    return kinds


def _kinds(prop: dict[str, Any] | None) -> set[str]:
    """The type names a property allows, its `anyOf`/`oneOf` branches' too; `items` or
    `properties` with no type name an array or an object."""
    return {k for node in _nodes(prop) for k in _node_kinds(node)}


def _branch(prop: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The first schema node of `prop` allowing `kind` (its `items` or `properties` are there)."""
    return next((n for n in _nodes(prop) if kind in _node_kinds(n)), {})


FAMILY: Family = Family("minimax_m3", _find, markers=(OPEN,))
