"""Recover tool calls a model wrote as text, and repair every call's arguments (BEHAVIOUR.md 4.1).

When a server's tool-call parser does not match the model's chat template, the call arrives as
text in `content` and the agent stops. This module finds such calls in a whole reply with every
format family of the registry (proxy/toolcalls/formats/), in the formats catalogued in
research/toolcall-formats.md, and turns them into OpenAI `tool_calls`.

Calls are split with string-aware scanners first; only then is each call's JSON parsed leniently
(proxy/arguments.py). A repair library never sees a whole message: it turns prose into `''`,
braces into lists and collapses two same-shaped calls into one. Nothing inside `<think>` is a
call. Bare JSON and fenced forms count only when no marker matched and every name is declared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from proxy import knowntools
from proxy.jsontext import compact
from proxy.observe.events import TOOL_RECOVERED, Event
from proxy.toolcalls.arguments import OK, REPAIRED, TRUNCATED, argument_event, repair_arguments
from proxy.toolcalls.formats import (
    CLOSERS,
    FALLBACK,
    FAMILIES,
    FENCE,
    FRAMING,
    FRAMING_FAMILY,
    LINE_OPEN,
    framing_start,
)
from proxy.toolcalls.scan import (
    END_TOKENS,
    THINK_CLOSE,
    THINK_CLOSE_AT,
    THINK_ENDERS,
    THINK_OPEN,
    first_match,
    may_think,
    skip,
    skip_back,
    split_think,
)
from proxy.toolcalls.spans import Ctx, Family, RawCall, Schemas, Span

RECOVERED_PREFIX = "call_recovered_"  # the ids of recovered calls: call_recovered_0, ...
# The format of a reply with no call that only lost the end-of-turn tokens it ended with.
END_TOKENS_LABEL = "end_tokens"


@dataclass
class Recovery:
    """What a reply's text becomes: the remaining content, the calls, and the format found."""

    content: str | None
    calls: list[dict[str, Any]]
    format: str


@dataclass(frozen=True, init=False)  # its own __init__: see proxy/compiled.py
class Found:
    """Calls found in a reply before their arguments are repaired."""

    content: str | None
    calls: list[RawCall]
    format: str
    # The last call is cut off: it was read only because the reply stopped at its ceiling
    # (finish_reason "length"); the client gets "length", not "tool_calls" (finish_after).
    cut: bool

    def __init__(
        self, content: str | None, calls: list[RawCall], format: str, cut: bool = False
    ) -> None:
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "format", format)
        object.__setattr__(self, "cut", cut)


def tool_schemas(tools: list[dict[str, Any]] | None) -> Schemas:
    """Declared tool name -> its parameters schema (read-only: it may be shared)."""
    if tools and knowntools.shared(tools):
        # The same 20-tool list on every turn of an agent: walked once (kept while it is known).
        found = _shared_schemas.get(id(tools))
        if found is None or found[0] is not tools:
            found = _shared_schemas[id(tools)] = (tools, _schemas_of(tools))
            if len(_shared_schemas) > 32:
                del _shared_schemas[next(iter(_shared_schemas))]
        return found[1]
    return _schemas_of(tools)


_shared_schemas: dict[int, tuple[list[dict[str, Any]], Schemas]] = {}


def _schemas_of(tools: list[dict[str, Any]] | None) -> Schemas:
    out: Schemas = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


@dataclass(frozen=True)
class _Starts:
    """The markers of one tool set: one pattern for all, and for each marker the families
    that may have a call there, by their place in the registry (a marker that begins another
    family's longer one, such as `<|tool_call` and `<|tool_call|>`, names both)."""

    pattern: re.Pattern[str]
    owners: dict[str, tuple[int, ...]]
    # Anything that could make a reply more than prose: a marker, a think tag, a fence or a
    # line that opens a value; a reply with none of them (and no opener or framing at its
    # start) is decided in this one scan.
    anything: re.Pattern[str]
    opens: tuple[str, ...]

    def families(self, scan: str) -> list[Family]:
        """The families whose markers occur in `scan`, in the registry's order."""
        found = set(self.pattern.findall(scan))  # the markers themselves: no match objects
        if not found:
            return []  # the usual reply
        # Places, not the families themselves: hashing a frozen dataclass hashes its fields.
        places = {k for marker in found for k in self.owners[marker]}
        return [FAMILIES[k] for k in sorted(places)]


@lru_cache(maxsize=256)
def _call_starts(names: tuple[str, ...]) -> _Starts:
    by_family = [family.triggers(names) for family in FAMILIES]
    markers = {t for ts in by_family for t in ts}
    owners = {
        m: tuple(k for k, ts in enumerate(by_family) if any(t.startswith(m) for t in ts))
        for m in markers
    }
    tags = {*markers, *THINK_OPEN, *THINK_CLOSE, *THINK_ENDERS, FENCE}
    anything = re.compile(first_match(tags) + "|" + LINE_OPEN.pattern, LINE_OPEN.flags)
    opens = (*FRAMING, *(t for family in FAMILIES for t in family.opening(names)))
    return _Starts(re.compile(first_match(markers)), owners, anything, opens)


def _may_hold_bare(scan: str) -> bool:
    """Whether bare calls could be in `scan`: a `{` or `[` opening a line (the reply's first,
    or one after prose), or a fence."""
    return FENCE in scan or LINE_OPEN.search(scan) is not None


@lru_cache(maxsize=256)
def _openers(names: tuple[str, ...]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    return tuple(
        (k, tuple(family.opening(names))) for k, family in enumerate(FAMILIES) if family.openers
    )


def _families(scan: str, starts: _Starts, names: tuple[str, ...]) -> list[Family]:
    """The families that may have a call in `scan`: those whose markers occur in it, and
    those whose opener opens it (Functionary's `NAME\n{`, judged at the start only)."""
    found = starts.families(scan)
    k = skip(scan, 0)
    opening = [place for place, opens in _openers(names) if scan.startswith(opens, k)]
    if not opening:
        return found
    return [f for k, f in enumerate(FAMILIES) if k in opening or any(f is g for g in found)]


def _unframed(scan: str) -> tuple[str, str | None]:
    """`scan` without the template's framing it opens with (Functionary's `all\\n`), and the
    framing dropped (None: none). Only at the scan's start, after whitespace: never mid-prose."""
    k = skip(scan, 0)
    if not scan.startswith(FRAMING, k):
        return scan, None  # the usual reply: one call, not one per framing
    for framing in FRAMING:
        if scan.startswith(framing, k):
            return scan[: framing_start(scan, k, framing)] + scan[k + len(framing) :], framing
    return scan, None


def find_calls(text: str, schemas: Schemas, truncated: bool = True) -> Found | None:
    """Find the calls written in a reply's text, with the content that remains.

    `truncated` says the reply may have been cut off (finish_reason "length"): only then may a
    call that never closes run to the end of the text. It defaults to True for callers that do
    not know yet; whole replies pass what the upstream said. Every recovered call names a
    declared tool: a marker form naming anything else is left as text. A reply that opens with
    a template's framing and holds no call is found with no calls: only its content changes.

    Every marker form starts at a marker of its family (the list the stream holds text at, so
    a stream and a whole reply agree): only the families whose markers occur are run, and a
    reply with none, and no bare form, is prose, decided in one scan.
    """
    names = tuple(schemas)
    starts = _call_starts(names)
    if starts.anything.search(text) is None and not text.startswith(starts.opens, skip(text, 0)):
        # The usual reply: prose, decided in one scan. With no marker in it, a closing tag
        # that ends it has lost its opening tag: it goes with the end-of-turn tokens.
        return _without_left_over(text, None)
    # A template's framing opens the reply, or its text after the think block (as a stream
    # drops it: at its opening, before or after a think block, once).
    text, framing = _unframed(text)
    head, scan, rest = split_think(text, starts.pattern)
    if framing is None:
        scan, framing = _unframed(scan)
    ctx = Ctx(schemas, truncated)
    families, best = _search(scan, starts, names, ctx)
    if best and (late := _late_think_end(scan, best)):
        # Calls the model wrote while thinking, in a block whose open tag was in the prompt: the
        # block ends at that `</think>`, which no call's text holds (4.1: calls in a think
        # block are not calls).
        head, scan = head + scan[:late], scan[late:]
        ctx = Ctx(schemas, truncated)
        families, best = _search(scan, starts, names, ctx)
    if not best:
        # No call: a reply loses only the template's framing it opened with and the end-of-turn
        # tokens after its think block (none inside one left open: `rest`).
        reply = head + scan + rest
        return _without_left_over(reply, framing, len(reply) if rest else len(head))
    # A call that only a cut-off reply makes a call (it never closes) is the reply's last:
    # finding fewer calls when the reply is read as complete tells it was cut. A search that
    # never asked whether the reply may be cut would find the same: it is not run again.
    cut = (
        truncated
        and ctx.consulted
        and _count(_best_spans(scan, Ctx(schemas, False), families)) < _count(best)
    )
    best = _with_end_tokens(scan, best)
    calls = [c for sp in best for c in sp.calls]
    return Found(_remaining(head, scan, rest, best), calls, best[0].format, cut)


def _search(
    scan: str, starts: _Starts, names: tuple[str, ...], ctx: Ctx
) -> tuple[list[Family], list[Span]]:
    """The families that may have a call in `scan`, and the spans of the one found first."""
    families = _families(scan, starts, names)
    if families or _may_hold_bare(scan):
        return families, _best_spans(scan, ctx, families)
    return families, []


def _late_think_end(scan: str, spans: list[Span]) -> int:
    """Where the last think close tag after the first call ends, when no call's text holds it
    (0: there is none). split_think reads forwards and stops at the first marker, so that a
    `</think>` in a call's arguments stays the call's; one outside every call still closes."""
    late = k = 0  # spans before k end at or before the tag looked at (both in text order)
    if not may_think(scan):
        return late
    for m in THINK_CLOSE_AT.finditer(scan, spans[0].start):
        while k < len(spans) and spans[k].end <= m.start():
            k += 1
        if k == len(spans) or m.start() < spans[k].start:
            late = m.end()
    return late


def _without_left_over(text: str, framing: str | None, floor: int = 0) -> Found | None:
    """A reply with no call, without the template's framing (already dropped from `text`) and
    the end-of-turn tokens and stray closing tags ending it (not before `floor`); None when it
    had neither. A closing tag whose opening tag's word is in the reply closes a block that is
    not a call (InternLM2's `<|action_start|><|interpreter|>`, an undeclared tool's call): then
    only the end-of-turn tokens go."""
    end = trailing_run(text, LEFT_OVER, floor)
    if end < len(text) and any(_opened(text, end, tag) for tag in CLOSERS):
        end = trailing_run(text, END_TOKENS, floor)
    if framing is None and end == len(text):
        return None
    content = text[:end]
    label = FRAMING_FAMILY.get(framing or "", END_TOKENS_LABEL)
    return Found(content if content.strip() else None, [], label)


def _opened(text: str, end: int, closer: str) -> bool:
    """Whether `closer` is in the run from `end` and its word (`tool_call` of `</tool_call>`
    and `<|tool_call_end|>`) is in the text before it."""
    return closer in text[end:] and _CLOSER_WORDS[closer] in text[:end]


def _closer_word(tag: str) -> str:
    word = tag.strip("<>[]|/")
    for affix in ("_end", "end_", "END_"):
        word = word.replace(affix, "")
    return word


_CLOSER_WORDS = {tag: _closer_word(tag) for tag in CLOSERS}


def trailing_run(text: str, tokens: tuple[str, ...], floor: int = 0) -> int:
    """Where the run of `tokens` (and the whitespace around them) ending `text` begins, not
    before `floor`; len(text) when it ends with none. Read backwards from the end only."""
    end = k = len(text)
    while True:
        k = skip_back(text, k, floor)
        if not text.endswith(tokens, floor, k):
            return end  # one C-level test for the usual reply, which ends with none
        token = next(t for t in tokens if text.endswith(t, floor, k))
        k -= len(token)
        end = skip_back(text, k, floor)


def _best_spans(scan: str, ctx: Ctx, families: list[Family]) -> list[Span]:
    """The spans of the family whose first call starts earliest (the fallback if none)."""
    best: list[Span] = []
    for family in families:
        spans = [sp for sp in family.find(scan, ctx) if all(c[0] in ctx.schemas for c in sp.calls)]
        if spans and (not best or spans[0].start < best[0].start):
            best = spans
    return best or FALLBACK(scan, ctx.schemas)


def _count(spans: list[Span]) -> int:
    return sum(len(sp.calls) for sp in spans)


def finish_after(found: Found) -> str:
    """The finish reason of a reply whose calls were recovered."""
    return "length" if found.cut else "tool_calls"


# What a template leaves after a call: end-of-turn tokens, and closing tags whose opening tag a
# server stripped (Qwen3-Coder's `</tool_call>` after `</function>`, a doubled `</tool_call>`).
LEFT_OVER = (*END_TOKENS, *CLOSERS)
_LEFT_RUN = re.compile(r"(?:\s*(?:" + "|".join(map(re.escape, LEFT_OVER)) + "))+")


def past_left_over(s: str, i: int, limit: int | None = None) -> int:
    """Where the run of end-of-turn tokens and stray closing tags (and the whitespace between)
    starting at s[i] ends, looking no further than `limit`."""
    m = _LEFT_RUN.match(s, i, len(s) if limit is None else limit)
    return m.end() if m else i


def _with_end_tokens(scan: str, spans: list[Span]) -> list[Span]:
    """Spans widened over the end-of-turn tokens and stray closing tags right after each, and
    over those ending the reply: they are the template's, not the model's words, and a client
    shows them as text."""
    out: list[Span] = []
    for k, sp in enumerate(spans):
        limit = spans[k + 1].start if k + 1 < len(spans) else len(scan)
        end = past_left_over(scan, sp.end, limit)
        out.append(Span(sp.start, end, sp.calls, sp.format) if end != sp.end else sp)
    tail = trailing_run(scan, LEFT_OVER, out[-1].end)
    if out[-1].end < tail < len(scan):
        # Text after the last call, then the tokens: an empty span eats them.
        out.append(Span(tail, len(scan), [], out[-1].format))
    return out


def _remaining(head: str, scan: str, rest: str, spans: list[Span]) -> str | None:
    edges = [0] + [x for sp in spans for x in (sp.start, sp.end)] + [len(scan)]
    segments = [scan[edges[k] : edges[k + 1]] for k in range(0, len(edges), 2)]
    # Whitespace next to a call goes with it; text further away is kept as it was.
    parts = [segments[0].rstrip()] + [seg.strip() for seg in segments[1:-1]]
    parts.append(segments[-1].lstrip())
    body = "\n".join(p for p in parts if p)
    content = head + body + rest
    return content if content.strip() else None


def recover(
    text: str, tools: list[dict[str, Any]], finish_reason: str | None = None
) -> Recovery | None:
    """Recover the tool calls written as text in a whole reply, or None when there are none."""
    found = find_calls(text, tool_schemas(tools), finish_reason == "length")
    if found is None:
        return None
    calls, _ = build_calls(found.calls, finish_reason, found.cut)
    return Recovery(found.content, calls, found.format)


def build_calls(
    raw: list[RawCall], finish_reason: str | None, cut: bool = False
) -> tuple[list[dict[str, Any]], list[Event]]:
    """OpenAI tool_call dicts for recovered calls, ids call_recovered_N, arguments repaired.

    `cut`: the last call was cut off at the reply ceiling; its arguments (what there is of
    them) are flagged truncated even where what there is reads as complete.
    """
    calls: list[dict[str, Any]] = []
    events: list[Event] = []
    for n, (name, args, repaired) in enumerate(raw):
        arguments, outcome = _recovered_arguments(args, repaired, finish_reason)
        if cut and n == len(raw) - 1:
            outcome = TRUNCATED
        event = argument_event(name, outcome)
        if event is not None:
            events.append(event)
        calls.append(
            {
                "id": f"{RECOVERED_PREFIX}{n}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
    return calls, events


def _recovered_arguments(args: Any, repaired: bool, finish_reason: str | None) -> tuple[str, str]:
    if isinstance(args, dict):
        return compact(args), REPAIRED if repaired else OK
    result = repair_arguments(args, finish_reason)
    if result.outcome == OK:
        # Recovered calls are sent compact; "ok" keeps the model's own spacing otherwise.
        return compact(orjson.loads(result.arguments)), REPAIRED if repaired else OK
    return result.arguments, result.outcome


@lru_cache(maxsize=64)
def recovered_event(count: int, fmt: str, in_reasoning: bool = False) -> Event:
    """The TOOL_RECOVERED event for one reply. One Event for each distinct one, shared: an
    Event is never changed once made (nor its labels), and the same one comes back request
    after request, so neither it nor its notice is built again, and the notice's hash, which
    the headers written from it look up (`proxy.path.client.notice_values`), is kept."""
    where = " in the reasoning" if in_reasoning else ""
    notice = (
        f"Recovered {count} tool call{'s' if count != 1 else ''} written as text{where} "
        f"({fmt}); the server's tool-call parser does not match the model's chat template."
    )
    return Event(TOOL_RECOVERED, notice, {"format": fmt}, count)


def process_response(
    body: dict[str, Any], tools: list[dict[str, Any]] | None, *, recover: bool = True
) -> tuple[dict[str, Any] | None, list[Event]]:
    """Recover and repair tool calls in a whole chat.completion body; never mutates `body`."""
    choices = body.get("choices")
    if not isinstance(choices, list):
        return None, []
    schemas = tool_schemas(tools) if recover else {}
    events: list[Event] = []
    new_choices = [_process_choice(c, schemas, recover and bool(schemas), events) for c in choices]
    if all(new is old for new, old in zip(new_choices, choices, strict=True)):
        return None, events
    return {**body, "choices": new_choices}, events


def _process_choice(choice: Any, schemas: Schemas, recover: bool, events: list[Event]) -> Any:
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return choice
    finish = choice.get("finish_reason")
    native = message.get("tool_calls")
    if isinstance(native, list) and native:
        calls = _identified([_repair_native(call, finish, events) for call in native])
        if all(new is old for new, old in zip(calls, native, strict=True)):
            return choice
        return {**choice, "message": {**message, "tool_calls": calls}}
    if not recover:
        return choice
    content = message.get("content")
    text = content if isinstance(content, str) else None
    in_reasoning = not (text or "").strip()
    if in_reasoning:
        text = reasoning_text(message)
    found = find_calls(text, schemas, finish == "length") if text is not None else None
    if found is None or (in_reasoning and not found.calls):
        return choice
    if not found.calls:
        # Only the template's framing was dropped: the content changes, nothing else (4.1).
        return {**choice, "message": {**message, "content": found.content}}
    calls, arg_events = build_calls(found.calls, finish, found.cut)
    events.append(recovered_event(len(calls), found.format, in_reasoning))
    events.extend(arg_events)
    # A call found in the reasoning leaves the reasoning as it was: a stream has sent it by
    # the time the call is read, and the whole reply must agree with the stream.
    new_content = content if in_reasoning else found.content
    new_message = {**message, "content": new_content, "tool_calls": calls}
    return {**choice, "message": new_message, "finish_reason": finish_after(found)}


REASONING_KEYS = ("reasoning_content", "reasoning")  # llama.cpp and DeepSeek; vLLM and Ollama


def reasoning_text(message: dict[str, Any]) -> str | None:
    """The reasoning of a message or delta whose content is empty, where a call may be written:
    Qwen3.5 on vLLM sometimes writes its call inside the reasoning and no content at all."""
    for key in REASONING_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _identified(calls: list[Any]) -> list[Any]:
    """Native calls each with the `id` and `type` the API requires, as a stream's calls get
    them (toolcalls.stream): a missing or repeated id becomes `call_N` (N: the call's place),
    a missing type `function`. A client answers each call by its id, so two alike would be
    one answer for two calls. Calls that have both, unrepeated, are the same objects."""
    used: set[str] = set()
    out = []
    for n, call in enumerate(calls):
        if not isinstance(call, dict):
            out.append(call)
            continue
        given = call.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{n}"
        while call_id in used:
            call_id = f"{call_id}_{n}"
        used.add(call_id)
        if call_id != given or "type" not in call:
            call = {**call, "id": call_id, "type": call.get("type", "function")}
        out.append(call)
    return out


def _repair_native(call: Any, finish: str | None, events: list[Event]) -> Any:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return call
    result = repair_arguments(fn.get("arguments"), finish)
    event = argument_event(str(fn.get("name", "")), result.outcome)
    if event is not None:
        events.append(event)
    if result.arguments == fn.get("arguments"):
        return call
    return {**call, "function": {**fn, "arguments": result.arguments}}
