"""The registry of tool-call formats: one module per format family, each exporting its
`Family` (a finder and the markers its calls start with).

`find_calls` (toolcalls/recovery.py) runs every family's finder over a reply and keeps the
family whose first call starts earliest; the stream processor (toolcalls/stream.py) holds text
from any family's marker on. A new family is one module here, one line below and its corpus
cases in tests/. Marker-less calls (bare JSON, one fenced block) are the fallback, tried last.
"""

from __future__ import annotations

from collections.abc import Iterable

from proxy.toolcalls.formats import (
    apertus,
    bare,
    command_r,
    deepseek,
    dsml,
    functionary,
    gemma,
    gigachat,
    glimmer,
    harmony,
    hunyuan,
    kimi,
    minicpm,
    minimax,
    minimax_m3,
    mistral,
    olmo3,
    qwen3_coder,
    seed_oss,
    step3,
    tagged,
)
from proxy.toolcalls.spans import Family

# The order breaks ties between finders whose first calls start at the same place.
FAMILIES: tuple[Family, ...] = (
    hunyuan.FAMILY,  # before tagged.py's `<tool_calls>`: it reads the same list call by call
    *tagged.FAMILIES,
    qwen3_coder.FAMILY,
    minicpm.FAMILY,  # `<function name="NAME">`: MiniCPM5's <param> body or a JSON one
    mistral.FAMILY,
    deepseek.FAMILY,
    harmony.FAMILY,
    gemma.FAMILY,
    olmo3.FAMILY,
    apertus.FAMILY,
    seed_oss.FAMILY,
    kimi.FAMILY,
    kimi.FAMILY_K3,
    command_r.FAMILY,
    command_r.FAMILY_PLUS,
    functionary.FAMILY,
    minimax.FAMILY,
    minimax_m3.FAMILY,
    dsml.FAMILY,
    step3.FAMILY,
    gigachat.FAMILY,
    glimmer.FAMILY,
)
# Closing tags of every family: one left next to a recovered call goes with it.
CLOSERS = tuple(dict.fromkeys(c for family in FAMILIES for c in family.closers))
FALLBACK = bare.find
FENCE = bare.FENCE
FENCE_INFO_MAX = bare.FENCE_INFO_MAX
LINE_OPEN = bare.LINE_OPEN
# What a reply may open with that is a template's framing, not the model's words (Family.framing).
# A framing is looked for after the whitespace a reply opens with; the whitespace its template
# writes before it (Glimmer's ` to=user<|message|>`) goes with it (`framing_start`).
FRAMING = tuple(dict.fromkeys(f.lstrip() for family in FAMILIES for f in family.framing))
_FRAMING_LEAD = {
    f.lstrip(): f[: len(f) - len(f.lstrip())]
    for family in FAMILIES
    for f in family.framing
    if f[:1].isspace()
}
# The family each framing is written by (its label when a reply holds nothing else).
FRAMING_FAMILY = {f.lstrip(): family.name for family in reversed(FAMILIES) for f in family.framing}


def framing_start(s: str, k: int, framing: str) -> int:
    """Where the framing found at s[k] is dropped from: before the whitespace its template
    writes before it, when that is what precedes it."""
    lead = _FRAMING_LEAD.get(framing, "")
    return k - len(lead) if lead and s.endswith(lead, 0, k) else k


def triggers(names: Iterable[str]) -> list[str]:
    """Literal strings at which a call span can start (the stream holds text from them on), for
    tools named `names` (a Schemas dict will do)."""
    names = tuple(names)
    return [t for family in FAMILIES for t in family.triggers(names)]


def openers(names: Iterable[str]) -> list[str]:
    """Literal strings a call span may open a reply with (at its start or after a think block)
    with no marker, for tools named `names` (Family.openers)."""
    names = tuple(names)
    return [t for family in FAMILIES for t in family.opening(names)]
