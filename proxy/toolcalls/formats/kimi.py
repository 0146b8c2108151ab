"""Kimi's calls: K2, K2-Thinking and K2.5 (label `kimi_k2`), and K3's XTML channels (`kimi_k3`).

K2: `<|tool_calls_section_begin|>` then, per call, `<|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{json}<|tool_call_end|>`, then `<|tool_calls_section_end|>` and the
turn's `<|im_end|>` (HF/llama.cpp templates moonshotai-Kimi-K2.jinja, Kimi-K2-Thinking.jinja).
The section markers are optional (a bare `<|tool_call_begin|>` starts a call, and ends an open
think block as the section marker does: scan.THINK_ENDERS), so is `<|tool_call_end|>` (a JSON
value that closes is the call, as llama.cpp's Kimi K2 parser reads it: tests/toolcall_peers/
llama_cpp.py kimi-k2-execute-command-bare, kimi-k2-inside-think-no-section-no-end), vLLM's
kimi_k2_tool_parser.py also accepts the singular `<|tool_call_section_begin|>`, and the id may
come as `functions.NAME:IDX`, `NAME:IDX` or `NAME` (vLLM takes `id.split(":")[0].split(".")[-1]`;
we strip a `functions.` prefix and an `:IDX` suffix, and fall back to the last dotted part only
when the whole is not a declared tool).

K3 (llama.cpp models/templates/Kimi-K3.jinja, vLLM kimi_k3_tool_parser.py): `<|open|>tools<|sep|>`
holding `<|open|>call tool="NAME" index="1"<|sep|>` blocks of `<|open|>argument key="K"
type="T"<|sep|>VALUE<|close|>argument<|sep|>` (a string VALUE is raw text, any other type JSON)
or one `<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>`, each closed by
`<|close|>call<|sep|>`, then `<|close|>tools<|sep|>`, `<|close|>message<|sep|>` and
`<|end_of_msg|>`. The response channel's `<|close|>response<|sep|>` right before the tools goes
with them, and so does its `<|open|>response<|sep|>` when the section is empty (the template's
`<|open|>response<|sep|><|close|>response<|sep|>` before a reply of calls only: llama.cpp's
test-chat.cpp Kimi-K3 cases, tests/toolcall_peers/llama_cpp.py kimi-k3-*): the whole run is a
marker, so the stream holds the opener while the next characters may still make it one. A
response section with words in it keeps its opener: a stream has relayed it before the tools
begin, and dropping it at the reply's start as framing would drop it from replies with no call
too, which llama.cpp keeps whole (kimi-k3-prose-mentions-tags).
"""

from __future__ import annotations

import re

from proxy.jsontext import compact
from proxy.toolcalls.arguments import loads_lenient, parse_object
from proxy.toolcalls.formats.pieces import Piece, call_piece, spans_of, wrapper
from proxy.toolcalls.scan import Next, Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Schemas, Span
from proxy.toolcalls.values import typed_value

_SECTION_BEGIN = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_SECTION_END = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
_CALL = "<|tool_call_begin|>"
_ARGS = "<|tool_call_argument_begin|>"
_CALL_END = "<|tool_call_end|>"
# The id before the arguments marker: no `<` in it, so a scan for it stops at the next marker.
_ID = re.compile(r"\s*([^<]*?)\s*" + re.escape(_ARGS) + r"\s*")
_IDX = re.compile(r"(.*?):\d+")
_PREFIX = "functions."


def _k2(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    # One cached search a marker: a marker missing from the text is looked for once.
    nexts = [_finds(s, m) for m in (*_SECTION_BEGIN, _CALL)]
    scan = Scan(s, _CALL, _CALL_END)
    p = _first(nexts, 0)
    while p >= 0:
        pieces: list[Piece] = []
        end = _k2_block(s, p, ctx, scan, pieces)
        spans.extend(spans_of(s, pieces, ctx.schemas, "kimi_k2"))
        p = _first(nexts, max(end, p + 1))
    return spans


def _finds(s: str, marker: str) -> Next:
    """The cached search for `marker` in `s`."""
    return Next(lambda p: s.find(marker, p))


def _first(nexts: list[Next], p: int) -> int:
    hits = [k for k in (n.at(p) for n in nexts) if k >= 0]
    return min(hits) if hits else -1


def _k2_block(s: str, p: int, ctx: Ctx, scan: Scan, pieces: list[Piece]) -> int:
    """Read the section (or the run of bare calls) at s[p] into pieces; where it ends."""
    i = p
    head = next((m for m in _SECTION_BEGIN if s.startswith(m, p)), None)
    if head is not None:
        i = skip(s, p + len(head))
        pieces.append(wrapper(p, i))
    while s.startswith(_CALL, i):
        piece = _k2_call(s, i, ctx, scan)
        if piece is None:
            break
        pieces.append(piece)
        i = skip(s, piece[1])
    tail = next((m for m in _SECTION_END if s.startswith(m, i)), None)
    if tail is not None and len(pieces) > (head is not None):
        pieces.append(wrapper(i, i + len(tail)))
        i += len(tail)
    return i


def _k2_call(s: str, i: int, ctx: Ctx, scan: Scan) -> Piece | None:
    """One `<|tool_call_begin|>` call at s[i]; None when it does not close (or is no call)."""
    m = _ID.match(s, i + len(_CALL), scan.limit(i))
    if m is None:
        return None
    name = _name(m.group(1), ctx.schemas)
    j = m.end()
    # The arguments end where their value does (a marker inside a string is text), else at the
    # call's end marker; a value that never closes is a call only when the reply was cut off.
    end = scan.value(j) if j < len(s) and s[j] in "{[" else None
    if end is not None and s.startswith(_CALL_END, k := skip(s, end)):
        return call_piece(i, k + len(_CALL_END), name, s[j:end])
    c = scan.close_at(j)
    if c >= 0:
        return call_piece(i, c + len(_CALL_END), name, s[j:c].rstrip())
    if end is not None:
        # No end marker at all (llama.cpp's Kimi K2 parser reads such calls): the value that
        # closed is the call, whatever follows it.
        return call_piece(i, end, name, s[j:end])
    if ctx.truncated and scan.limit(j) == len(s):
        return (i, len(s), [(name, s[j:].rstrip(), False)])
    return None


def _name(raw: str, schemas: Schemas) -> str:
    """The tool name in a K2 call id: `functions.NAME:IDX`, `NAME:IDX` or `NAME`."""
    name = raw.strip()
    if (m := _IDX.fullmatch(name)) is not None:
        name = m.group(1).strip()
    name = name.removeprefix(_PREFIX)
    if name not in schemas and "." in name:
        name = name.rsplit(".", 1)[1]
    return name


# K3's XTML: every tag is `<|open|>TAG attrs<|sep|>` ... `<|close|>TAG<|sep|>`.
_TOOLS = "<|open|>tools<|sep|>"
_RESPONSE = "<|open|>response<|sep|>"
_RESPONSE_END = "<|close|>response<|sep|>"
_TOOLS_END = re.compile(r"<\|close\|>tools<\|sep\|>(?:\s*<\|close\|>message<\|sep\|>)?"
                        r"(?:\s*<\|end_of_msg\|>)?")  # fmt: skip
_CALL_OPEN = re.compile(r"<\|open\|>call((?:\s+\w+=\"[^\"<]*\")*)\s*<\|sep\|>")
_ARG_OPEN = re.compile(r"<\|open\|>(argument|json)((?:\s+\w+=\"[^\"<]*\")*)\s*<\|sep\|>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_CALL_CLOSE = "<|close|>call<|sep|>"


def _k3(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    closes = {t: _finds(s, t) for t in _K3_CLOSES}
    p = s.find(_TOOLS)
    while p >= 0:
        pieces: list[Piece] = []
        start = p - len(_RESPONSE_END) if s.endswith(_RESPONSE_END, 0, p) else p
        if start < p and s.endswith(_RESPONSE, 0, start):
            start -= len(_RESPONSE)  # an empty response section before the tools
        end = _k3_block(s, start, p, ctx, closes, pieces)
        spans.extend(spans_of(s, pieces, ctx.schemas, "kimi_k3"))
        p = s.find(_TOOLS, max(end, p + 1))
    return spans


_SEP = "<|sep|>"
_K3_CLOSES = ("<|close|>argument<|sep|>", "<|close|>json<|sep|>", _CALL_CLOSE, _SEP)


def _tag_end(s: str, i: int, closes: dict[str, Next]) -> int:
    """Where an opening tag at s[i] must end: its `<|sep|>` (a match looks no further)."""
    k = closes[_SEP].at(i)
    return len(s) if k < 0 else k + len(_SEP)


def _k3_block(
    s: str, start: int, p: int, ctx: Ctx, closes: dict[str, Next], pieces: list[Piece]
) -> int:
    i = skip(s, p + len(_TOOLS))
    pieces.append(wrapper(start, i))
    while (m := _CALL_OPEN.match(s, i, _tag_end(s, i, closes))) is not None:
        name = _attrs(m.group(1)).get("tool", "")
        piece = _k3_call(s, m, name, ctx, closes)
        if piece is None:
            break
        pieces.append(piece)
        i = skip(s, piece[1])
    if (e := _TOOLS_END.match(s, i, i + 120)) is not None and len(pieces) > 1:
        pieces.append(wrapper(i, e.end()))
        i = e.end()
    return i


def _k3_call(
    s: str, m: re.Match[str], name: str, ctx: Ctx, closes: dict[str, Next]
) -> Piece | None:
    """One `<|open|>call ...<|sep|>` block; None when it does not close (unless cut off)."""
    args: dict[str, object] = {}
    props = _props(ctx.schemas, name)
    readable = True  # an unreadable json block makes the call text, read to its end all the same
    i = skip(s, m.end())
    while (a := _ARG_OPEN.match(s, i, _tag_end(s, i, closes))) is not None:
        kind, attrs = a.group(1), _attrs(a.group(2))
        close = f"<|close|>{kind}<|sep|>"
        c = closes[close].at(a.end())
        if c < 0:
            return _k3_cut(s, m.start(), name, args, ctx)
        raw = s[a.end() : c]
        if kind == "json":
            value, _ = parse_object(raw)
            readable = readable and value is not None
            args.update(value or {})
        else:
            key = attrs.get("key", "")
            args[key] = _k3_value(raw, attrs.get("type", "string"), props.get(key))
        i = skip(s, c + len(close))
    if not s.startswith(_CALL_CLOSE, i):
        return _k3_cut(s, m.start(), name, args, ctx) if i >= len(s) else None
    call: RawCall = (name, args, False)
    return (m.start(), i + len(_CALL_CLOSE), [call] if readable else None)


def _k3_value(raw: str, kind: str, prop: object) -> object:
    """A K3 argument's text: raw for type="string", JSON for any other type (the template's
    encoding); text that is not JSON is typed by the tool's schema instead."""
    if kind == "string":
        return raw
    parsed = loads_lenient(raw)
    if parsed is not None:
        return parsed[0]
    return typed_value(raw, prop if isinstance(prop, dict) else None)


def _k3_cut(s: str, start: int, name: str, args: dict[str, object], ctx: Ctx) -> Piece | None:
    """A call the reply ends inside: a call only when cut off, its arguments the complete ones
    so far as unclosed JSON (relayed raw and flagged truncated, as every format's cut call)."""
    if not ctx.truncated:
        return None
    return (start, len(s), [(name, compact(args)[:-1], False)])


def _attrs(text: str) -> dict[str, str]:
    # The template escapes `&` and `"` in attribute values; undo it in the reverse order.
    return {k: v.replace("&quot;", '"').replace("&amp;", "&") for k, v in _ATTR.findall(text)}


def _props(schemas: Schemas, name: str) -> dict[str, object]:
    params = schemas.get(name) or {}
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


FAMILY: Family = Family("kimi_k2", _k2, markers=(*_SECTION_BEGIN, _CALL))
FAMILY_K3: Family = Family(
    "kimi_k3", _k3, markers=(_TOOLS, _RESPONSE_END + _TOOLS, _RESPONSE + _RESPONSE_END + _TOOLS)
)
