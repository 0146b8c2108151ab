"""Tool-call corpora, one module per format family (the families of proxy/toolcalls/formats/):
each module's `CASES` joins tests/toolcall_corpus.py's, so every case runs whole, one character
per chunk, at random chunkings, with its marker split at every position, and through the proxy.
"""

from __future__ import annotations

import importlib
import pkgutil

from tests.toolcall_case import Case


def family_cases() -> list[Case]:
    """Every family module's CASES, in module name order."""
    cases: list[Case] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        cases.extend(importlib.import_module(f"{__name__}.{info.name}").CASES)
    return cases
