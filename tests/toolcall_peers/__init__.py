"""Test cases that peer serving engines wrote for their own tool-call parsers (vLLM, SGLang,
llama.cpp, Ollama), transcribed as data: the model's text, the tools the peer's test declared,
and what the peer expects to come out. Issue 18 measured latchgate against these; this package
keeps that measurement in the repo (tests/unit/toolcalls/test_peer_cases.py runs every case
whole and streamed, bench/peer_cases.py prints the rates).

One module per engine, each with `CASES`; a case the engine expects something of that
latchgate's contract says otherwise about carries `differs` (why, naming BEHAVIOUR.md or the
issue), and one latchgate does not yet get right carries `gap` (what is missing). Both are
counted apart in the report, never silently dropped.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any

from tests.toolcall_case import Call


@dataclass(frozen=True)
class PeerCase:
    """One peer test case: `text` is the model's raw output, `calls` the (name, arguments)
    the peer's test expects, `content` the text it expects left (None: none, or only
    whitespace), `source` the peer's file and test name."""

    name: str
    text: str
    calls: list[Call]
    content: str | None
    tools: tuple[dict[str, Any], ...]
    source: str
    family: str
    finish: str = "stop"
    differs: str = ""
    gap: str = ""
    reasoning: str | None = field(default=None)


def engine_cases() -> dict[str, list[PeerCase]]:
    """Every engine module's CASES by module name."""
    found: dict[str, list[PeerCase]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        found[info.name] = importlib.import_module(f"{__name__}.{info.name}").CASES
    return found


def all_cases() -> list[PeerCase]:
    return [case for cases in engine_cases().values() for case in cases]
