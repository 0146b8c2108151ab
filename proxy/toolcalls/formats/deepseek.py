"""DeepSeek's calls: V3's `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`
and a fenced JSON, and V3.1's `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}`; the `▁` may come as
`_`, an escaped `\\_` or a space after a server's detokenising. research/toolcall-formats.md,
section 1.
"""

from __future__ import annotations

import re

from proxy.toolcalls.scan import value_end
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span

_DS = r"(?:▁|_|\\_| )"
_DS_CALLS_BEGIN = re.compile(rf"<｜tool{_DS}calls(?:{_DS}begin)?｜>")
_DS_CALLS_END = re.compile(rf"\s*<｜tool{_DS}calls{_DS}end｜>(?:\s*<｜end{_DS}of{_DS}sentence｜>)?")
_DS_CALL = re.compile(
    rf"\s*<｜tool{_DS}call{_DS}begin｜>(?:(function)<｜tool{_DS}sep｜>([^\n]+)\n```(?:json)?\s*"
    rf"|([^<\n]+?)<｜tool{_DS}sep｜>\s*)"
)
_DS_CALL_END = re.compile(rf"\s*(?:```)?\s*<｜tool{_DS}call{_DS}end｜>")


def _deepseek(s: str, ctx: Ctx) -> list[Span]:
    begin = _DS_CALLS_BEGIN.search(s)
    first = _DS_CALL.search(s)
    if first is None:
        return []
    start = begin.start() if begin and begin.start() < first.start() else first.start()
    i = begin.end() if begin and begin.start() < first.start() else first.start()
    calls: list[RawCall] = []
    while (m := _DS_CALL.match(s, i)) is not None:
        name = (m.group(2) or m.group(3) or "").strip()
        j = m.end()
        end = value_end(s, j) if j < len(s) and s[j] in "{[" else None
        if end is None:
            if ctx.truncated:
                calls.append((name, s[j:].rstrip(), False))
                i = len(s)
            break
        calls.append((name, s[j:end], False))
        i = end
        if (ce := _DS_CALL_END.match(s, i)) is not None:
            i = ce.end()
    if (e := _DS_CALLS_END.match(s, i)) is not None:
        i = e.end()
    return [Span(start, i, calls, "deepseek")] if calls else []


FAMILY = Family("deepseek", _deepseek, markers=("<｜tool",))
