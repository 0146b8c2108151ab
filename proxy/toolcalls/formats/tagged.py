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
from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span
from proxy.toolcalls.values import json_seq, pythonic_calls

_PYTHON_CALL = re.compile(r"[\w.]+\.call\(")

_TAGGED: list[tuple[str, str | None, str]] = [
    ("<tool_call>", "</tool_call>", "hermes"),
    ("<tools>", "</tools>", "hermes"),
    ("<function_call>", None, "granite"),
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
    # InternLM2 / 2.5: one `{"name", "parameters"}` object an action (vLLM internlm2 parser).
    ("<|action_start|><|plugin|>", "<|action_end|>", "internlm2"),
]


def _tagged(s: str, ctx: Ctx, open_: str, close: str | None, fmt: str) -> list[Span]:
    spans: list[Span] = []
    p = s.find(open_)
    if p < 0:
        return spans  # the usual case for all but one format: no scan set up
    scan = Scan(s, open_, close)
    while p >= 0:
        span = _tagged_at(s, p, ctx, scan, (open_, close, fmt))
        if span is not None:
            spans.append(span)
        p = s.find(open_, span.end if span else p + len(open_))
    return spans


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
    elif open_ == "<|python_tag|>" and (m := _PYTHON_CALL.match(s, i)):
        end = scan.value(m.end() - 1)
        found_py = pythonic_calls(s[i:end]) if end else None
        if not found_py:
            return None
        calls.extend(found_py)
        i = end or len(s)
    else:
        return None
    i = skip(s, i)
    if close and s.startswith(close, i):
        i += len(close)
    return Span(p, i, calls, fmt) if calls else None


def _finder(open_: str, close: str | None, fmt: str) -> Family:
    def find(s: str, ctx: Ctx) -> list[Span]:
        return _tagged(s, ctx, open_, close, fmt)

    return Family(fmt, find, markers=(open_,), closers=(close,) if close else ())


# One family a tag: the best of all finders is the one whose first call starts earliest.
FAMILIES = tuple(_finder(o, c, f) for o, c, f in _TAGGED)
