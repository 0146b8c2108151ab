"""llama-server's own metrics on latchgate's `/metrics`, each sample under an `upstream` label.

A managed server listens on a port latchgate chose and may change, so Prometheus cannot be
pointed at it; latchgate fetches each running server's exposition at scrape time and appends it
(`merge`, a pure function). Samples of one metric from several servers are kept together under
one HELP and TYPE, as the text format requires. A family named like latchgate's own
(`latchgate_*`) is dropped, so a server cannot shadow the proxy's metrics, and a server's own
`upstream` label is kept as `exported_upstream`, as Prometheus does for a clashing target label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<rest>\S.*)$"
)
_THEIR_UPSTREAM = re.compile(r"(^|,)\s*upstream\s*=")
OURS = "latchgate_"


def merge(sources: Iterable[tuple[str, str]]) -> str:
    """One exposition of every `(upstream, text)` given, `upstream="name"` added to each
    sample; families in the order first seen."""
    heads: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for upstream, text in sources:
        _read(_quoted(upstream), text, heads, samples)
    out: list[str] = []
    for family, lines in samples.items():
        out += heads.get(family, [])
        out += lines
    return "\n".join(out) + "\n" if out else ""


def _read(
    upstream: str, text: str, heads: dict[str, list[str]], samples: dict[str, list[str]]
) -> None:
    family = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            family = _head(line, heads) or family
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue  # blank, or not a sample: nothing a scraper could use
        name = match["name"]
        owner = family if family and name.startswith(family) else name
        if not owner.startswith(OURS):
            samples.setdefault(owner, []).append(_labelled(match, upstream))


def _head(line: str, heads: dict[str, list[str]]) -> str | None:
    """Keep a family's first HELP and first TYPE line; the family it names."""
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE") or not _NAME.fullmatch(parts[2]):
        return None
    family = parts[2]
    if family.startswith(OURS):
        return family
    kept = heads.setdefault(family, [])
    if all(k.split(None, 2)[1] != parts[1] for k in kept):
        kept.append(line)
    return family


def _labelled(match: re.Match[str], upstream: str) -> str:
    labels = match["labels"] or ""
    labels = _THEIR_UPSTREAM.sub(r"\1exported_upstream=", labels).strip().strip(",")
    inner = f'upstream="{upstream}"' + (f",{labels}" if labels else "")
    return f"{match['name']}{{{inner}}} {match['rest']}"


def _quoted(value: str) -> str:
    """A label value escaped as the text format wants it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
