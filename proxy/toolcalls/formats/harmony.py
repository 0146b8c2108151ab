"""gpt-oss's harmony calls: `<|start|>assistant<|channel|>commentary to=functions.NAME
<|constrain|>json<|message|>{...}<|call|>`, and what remains of it when a server strips the
special tokens (`commentary to=functions.NAME json{...}`). research/toolcall-formats.md,
section 1.

The header before `to=functions.` goes with the call, with or without a space after each special
token: LLM-jp 4.1 writes `<|start|> assistant to=functions.NAME<|channel|> commentary ...`
(llama.cpp models/templates llm-jp-llm-jp-4.1-8b-thinking, tests/toolcall_peers/llama_cpp.py
llm-jp-4.1-*). So does the header of the final message right after a call
(`<|call|><|start|>assistant<|channel|>final<|message|>TEXT`, vLLM's
test_openai_tool_parser.py test_extract_tool_calls_with_content): TEXT alone stays content.
An analysis channel before the call (`<|channel|>analysis<|message|>...<|end|>`) is the
reasoning, and stays as it was, like the text before a `</think>` (BEHAVIOUR.md 4.1; llama.cpp
keeps it too); so do a commentary preamble before the call and any text after it.
"""

from __future__ import annotations

import re

from proxy.toolcalls.scan import Scan, skip, skip_back
from proxy.toolcalls.spans import Ctx, Family, Span

_HARMONY_TO = re.compile(r"to=functions\.([\w.\-]+)")
# The final message's header right after a call (its `<|end|>` too, where one ends the call).
_FINAL = re.compile(
    r"\s*(?:<\|end\|>\s*)?(?:<\|start\|>\s*assistant\s*)?<\|channel\|>\s*final\s*<\|message\|>"
)
_HARMONY_MID = re.compile(
    r"(?:\s|<\|channel\|>|commentary|analysis|<\|constrain\|>|json|<\|message\|>)*"
)


def _harmony(s: str, ctx: Ctx) -> list[Span]:
    spans: list[Span] = []
    scan = Scan(s, "to=functions.", "<|call|>")
    for m in _HARMONY_TO.finditer(s):
        name = m.group(1)
        if name not in ctx.schemas or (spans and m.start() < spans[-1].end):
            continue
        i = _HARMONY_MID.match(s, m.end()).end()  # type: ignore[union-attr]
        if not s.startswith("{", i):
            continue
        end = scan.value(i)
        if end is None and not (ctx.truncated and scan.limit(i) == len(s)):
            continue
        args = s[i:].rstrip() if end is None else s[i:end]
        i = len(s) if end is None else skip(s, end)
        if s.startswith("<|call|>", i):
            i += len("<|call|>")
        if (final := _FINAL.match(s, i)) is not None:
            i = final.end()
        spans.append(Span(_harmony_start(s, m.start()), i, [(name, args, False)], "harmony"))
    return spans


def _harmony_start(s: str, k: int) -> int:
    """Where the header before `to=functions.` begins: `<|start|>assistant<|channel|>commentary`,
    any whitespace between its parts (LLM-jp's `<|start|> assistant`, `<|channel|> commentary`).

    Walked backwards by hand: a regex anchored at `k` and searched from 0 retries every start
    position, which is quadratic over many headers.
    """
    j = skip_back(s, k)
    for word in ("commentary", "analysis"):
        if s.endswith(word, 0, j):
            j = skip_back(s, j - len(word))
            break
    if s.endswith("<|channel|>", 0, j):
        j = skip_back(s, j - len("<|channel|>"))
    if s.endswith("assistant", 0, j):
        # The role only with its `<|start|>`: a bare "assistant" before it is prose.
        i = skip_back(s, j - len("assistant"))
        if s.endswith("<|start|>", 0, i):
            return i - len("<|start|>")
    if s.endswith("<|start|>", 0, j):
        return j - len("<|start|>")
    return j


FAMILY: Family = Family(
    "harmony",
    _harmony,
    markers=("<|start|>", "<|channel|>"),
    named=("to=functions.NAME", "commentary to=functions.NAME", "analysis to=functions.NAME"),
)
