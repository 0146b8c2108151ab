"""gpt-oss's harmony calls: `<|start|>assistant<|channel|>commentary to=functions.NAME
<|constrain|>json<|message|>{...}<|call|>`, and what remains of it when a server strips the
special tokens (`commentary to=functions.NAME json{...}`). research/toolcall-formats.md,
section 1.
"""

from __future__ import annotations

import re

from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, Span

_HARMONY_TO = re.compile(r"to=functions\.([\w.\-]+)")
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
        spans.append(Span(_harmony_start(s, m.start()), i, [(name, args, False)], "harmony"))
    return spans


def _harmony_start(s: str, k: int) -> int:
    """Where the header before `to=functions.` begins: `<|start|>assistant<|channel|>commentary`.

    Walked backwards by hand: a regex anchored at `k` and searched from 0 retries every start
    position, which is quadratic over many headers.
    """
    j = k
    while j > 0 and s[j - 1].isspace():
        j -= 1
    for word in ("commentary", "analysis"):
        if s.endswith(word, 0, j):
            j -= len(word)
            break
    if s.endswith("<|channel|>", 0, j):
        j -= len("<|channel|>")
    for head in ("<|start|>assistant", "<|start|>"):
        if s.endswith(head, 0, j):
            return j - len(head)
    return j


FAMILY = Family(
    "harmony",
    _harmony,
    markers=("<|start|>", "<|channel|>"),
    named=("to=functions.NAME", "commentary to=functions.NAME", "analysis to=functions.NAME"),
)
