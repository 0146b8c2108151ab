"""Calls with no marker: a reply that is nothing but JSON (or pythonic) calls to declared tools,
or one fenced block of them (Llama 3.2 on Ollama). The registry's fallback: tried only when no
marker family found a call, and only for declared tools with complete call shapes.
"""

from __future__ import annotations

from proxy.toolcalls.scan import skip
from proxy.toolcalls.spans import Schemas, Span
from proxy.toolcalls.values import bare_calls


def find(s: str, schemas: Schemas) -> list[Span]:
    """The whole reply is calls, or it holds exactly one fenced block that is only calls."""
    start = skip(s, 0)
    body = s[start:]
    # The whole reply as calls first: their arguments may hold fences of their own (a README
    # written by write_file), which do not make the reply a fenced one.
    calls = bare_calls(body, schemas) if body[:1] in ("{", "[") else None
    if calls:
        fmt = "pythonic" if body.startswith("[") and "(" in body.split('"')[0] else "bare_json"
        return [Span(start, len(s), calls, fmt)]
    return _fenced(s, schemas) if FENCE in body else []


FENCE = "```"
# A fence's info string (`json`, `tool_call`, none): a longer first line is prose that happens to
# contain three backticks, and the stream must not hold a line without end waiting for it.
FENCE_INFO_MAX = 64


def _fenced(s: str, schemas: Schemas) -> list[Span]:
    """One fenced block of calls anywhere in the reply: Llama 3.2 on Ollama writes "I'll check
    the weather." and then the call in a ```json fence. Prose before and after it stays content;
    a second block makes every block an example, not a call."""
    if s.count(FENCE) != 2:
        return []
    start = s.find(FENCE)
    nl = s.find("\n", start)
    close = s.find(FENCE, start + len(FENCE))
    if nl < 0 or close < nl or nl - start - len(FENCE) > FENCE_INFO_MAX:
        return []
    calls = bare_calls(s[nl + 1 : close], schemas)
    if not calls:
        return []
    return [Span(start, close + len(FENCE), calls, "fenced_json")]
