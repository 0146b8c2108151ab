"""Calls wrapped in a tag pair around JSON: Hermes and Qwen (`<tool_call>`), Granite
(`<function_call>`, `<|tool_call|>`), `<tool_calls>`, Nemotron (`<TOOLCALL>`), LFM2
(`<|tool_call_start|>`), LM Studio (`[TOOL_REQUEST]`), `[TOOL_CALL]`, Llama 3 (`<|python_tag|>`,
`<|python_start|>`) and Functools (`functools[`). research/toolcall-formats.md, section 1.

Inside `<tool_call>` the body may be Qwen3-Coder's `<function=NAME>` parameters
(formats/qwen3_coder.py) or GLM's `NAME<arg_key>` pairs (formats/glm.py): one scan of the tag
reads all three, so a reply mixing them is read in one pass.
"""

from __future__ import annotations

import re

from proxy.toolcalls.formats.glm import glm_call
from proxy.toolcalls.formats.qwen3_coder import function_tag
from proxy.toolcalls.pythonic import pythonic_calls
from proxy.toolcalls.scan import Scan, skip, skip_back, value_end
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import json_seq

_PYTHON_CALL = re.compile(r"[\w.]+\.call\(")
_LFM2_CALL = re.compile(r"[A-Za-z_][\w.]*\s*\(")

_TAGGED: list[tuple[str, str | None, str]] = [
    ("<tool_call>", "</tool_call>", "hermes"),
    ("<tools>", "</tools>", "hermes"),
    # Hermes 2 Pro wraps its JSON call in any of these too (llama.cpp's Hermes 2 Pro parser,
    # common/chat.cpp): read only when the wrapper holds nothing but calls (_STRICT).
    ("<tool>", "</tool>", "hermes"),
    ("<response>", "</response>", "hermes"),
    ("<json>", "</json>", "hermes"),
    ("<JSON>", "</JSON>", "hermes"),
    ("<xml>", "</xml>", "hermes"),
    # Granite writes no closer; Hermes 2 Pro does (llama.cpp's test-chat): it goes with the call.
    ("<function_call>", "</function_call>", "granite"),
    ("<|tool_call|>", None, "granite"),
    ("<tool_calls>", "</tool_calls>", "tool_calls_tag"),
    ("<TOOLCALL>", "</TOOLCALL>", "nemotron"),
    ("<|tool_call_start|>", "<|tool_call_end|>", "lfm2"),
    ("[TOOL_REQUEST]", "[END_TOOL_REQUEST]", "lmstudio"),
    ("[TOOL_CALL]", "[/TOOL_CALL]", "tool_call_tag"),
    ("<|python_tag|>", None, "llama3"),
    ("<|python_start|>", "<|python_end|>", "llama3"),
    # The `[` is part of the marker: the word "functools" alone is prose about Python.
    ("functools[", None, "functools"),
    # InternLM2 / 2.5: one `{"name", "parameters"}` object an action (vLLM internlm2 parser);
    # SGLang's InternLM detector cases write whitespace between the two tokens.
    ("<|action_start|><|plugin|>", "<|action_end|>", "internlm2"),
    ("<|action_start|> <|plugin|>", "<|action_end|>", "internlm2"),
    ("<|action_start|>\n<|plugin|>", "<|action_end|>", "internlm2"),
]
_LFM2_OPEN, _LFM2_CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"


# Tags common in prose and markup (`<response>`, `<xml>`): a call only when JSON calls are all
# the tag holds, its closer right after them; anything else leaves the tag and its text alone.
_STRICT = frozenset({"<tool>", "<response>", "<json>", "<JSON>", "<xml>"})
# The fence llama.cpp's Hermes 2 Pro parser takes around a tagged call (```` ```xml ````,
# ```` ```json ```` or a bare ```` ``` ````): it goes with the call when it holds nothing else.
_FENCE_OPEN = re.compile(r"```(?:xml|json)?[ \t]*\n\s*\Z")
_FENCE_LOOK = 24  # how far back from a tag its fence's opening is looked for (past whitespace)


def _tagged(s: str, ctx: Ctx, open_: str, close: str | None, fmt: str) -> list[Span]:
    spans: list[Span] = []
    p = s.find(open_)
    if p < 0:
        return spans  # the usual case for all but one format: no scan set up
    scan = Scan(s, open_, close)
    while p >= 0:
        span = _tagged_at(s, p, ctx, scan, (open_, close, fmt))
        if span is not None and open_ in _STRICT and not _wrapper_closed(s, span, close):
            span = None
        if span is not None:
            spans.append(_fenced(s, span, spans[-1].end if spans else 0))
        p = s.find(open_, span.end if span else p + len(open_))
    return spans


def _wrapper_closed(s: str, span: Span, close: str | None) -> bool:
    """Whether a strict wrapper's span is JSON calls (not `<function=`) closed by its tag."""
    return span.format == "hermes" and bool(close) and s.endswith(close or "", 0, span.end)


def _fenced(s: str, span: Span, floor: int) -> Span:
    """`span` widened over a fence that holds nothing but it (not before `floor`)."""
    k = skip_back(s, span.start, floor)
    open_at = s.rfind("```", max(floor, k - _FENCE_LOOK), k)
    if open_at < 0 or not _FENCE_OPEN.match(s, open_at, span.start):
        return span
    if open_at > 0 and s[open_at - 1] not in "\n":
        return span  # a fence opens a line
    end = skip(s, span.end)
    if not s.startswith("```", end):
        return span
    return Span(open_at, end + 3, span.calls, span.format)


def _tagged_at(
    s: str, p: int, ctx: Ctx, scan: Scan, marker: tuple[str, str | None, str]
) -> Span | None:
    open_, close, fmt = marker
    # functools' `[` belongs to the value that follows it.
    i = p + len(open_) - 1 if open_.endswith("[") else skip(s, p + len(open_))
    calls: list[RawCall] = []
    if s.startswith("<function=", i):
        found = function_tag(s, i, ctx, scan)
        if found is None:
            return None
        i, call, fmt = found
        calls.append(call)
    elif i < len(s) and s[i] in "{[":
        i = json_seq(s, i, ctx, calls, scan)
        if i < 0:
            return None
    elif open_ == "<tool_call>" and (glm := glm_call(s, i, ctx, scan.limit(p))) is not None:
        i, call = glm
        calls.append(call)
        fmt = "glm"
    elif (py := _pythonic(s, i, open_, close, scan)) is not None:
        i, found_py = py
        calls.extend(found_py)
    else:
        return None
    i = skip(s, i)
    if close and s.startswith(close, i):
        i += len(close)
    return Span(p, i, calls, fmt) if calls else None


def _pythonic(
    s: str, i: int, open_: str, close: str | None, scan: Scan
) -> tuple[int, list[RawCall]] | None:
    """The pythonic calls a tag holds with no list around them, and where they end: Llama's
    `<|python_tag|>NS.call(..)`, or LFM2's one `NAME(..)` (Ollama's lfm2 cases), which must be
    all its tag holds."""
    pattern = _PYTHON_CALL if open_ == "<|python_tag|>" else _LFM2_CALL
    m = pattern.match(s, i) if open_ in ("<|python_tag|>", _LFM2_OPEN) else None
    if m is None:
        return None
    end = scan.value(m.end() - 1)
    if end is None or (open_ == _LFM2_OPEN and not s.startswith(close or "", skip(s, end))):
        return None
    found = pythonic_calls(s[i:end])
    return (end, found) if found else None


def _lfm2_orphan(s: str, ctx: Ctx) -> list[Span]:
    """LFM2's `[NAME(..)]<|tool_call_end|>` whose `<|tool_call_start|>` was eaten (Ollama's
    lfm2 cases): a call only as the reply's opening (the family's opener), every element a
    declared tool's readable call, the closer right after the list."""
    start = skip(s, 0)
    if not s.startswith("[", start):
        return []
    end = value_end(s, start)
    close = skip(s, end) if end is not None else -1
    if end is None or not s.startswith(_LFM2_CLOSE, close):
        return []
    calls = pythonic_calls(s[start:end], ctx.schemas, strict=True)
    if not calls or any(name not in ctx.schemas for name, _, _ in calls):
        return []
    return [Span(start, close + len(_LFM2_CLOSE), calls, "lfm2")]


# A strict wrapper's markers are the tag and the JSON it opens, for the whitespace a model puts
# between them: the tag alone, common in markup, would hold a stream's text from it to the end.
_STRICT_GAPS = ("", " ", "\n", "\n ", "\n  ", "\n   ", "\n    ", "\t", "\n\t", "\r\n", "\r\n  ")


def _finder(open_: str, close: str | None, fmt: str) -> Family:
    def find(s: str, ctx: Ctx) -> list[Span]:
        return _tagged(s, ctx, open_, close, fmt)

    markers: tuple[str, ...] = (open_,)
    if open_ in _STRICT:
        markers = tuple(open_ + gap + value for gap in _STRICT_GAPS for value in "{[")
    return Family(fmt, find, markers=markers, closers=(close,) if close else ())


# One family a tag: the best of all finders is the one whose first call starts earliest.
FAMILIES: tuple[Family, ...] = (
    *(_finder(o, c, f) for o, c, f in _TAGGED),
    Family("lfm2", _lfm2_orphan, openers=("[NAME(",)),
)
