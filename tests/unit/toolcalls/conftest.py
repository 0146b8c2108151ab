"""The step counter for the recovery tests that check linear time (tests/steps.py): the
`counted` fixture charges every finder's searches over the scanned text, and every compiled
pattern of the modules a finder scans with, to the count."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

from proxy.toolcalls import formats, recovery, scan, values
from tests.steps import Scanned, counting_patterns

# Every module whose top-level patterns a finder scans with: each format family's, and the
# shared scanners'.
MODULES = [
    recovery,
    scan,
    values,
    *(
        importlib.import_module(f"{formats.__name__}.{m.name}")
        for m in pkgutil.iter_modules(formats.__path__)
    ),
]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Charge the finders' searches over the scanned text, and their regex scans, to the count."""
    split = recovery.split_think

    def scanned(text: str, starts: Any = None) -> tuple[str, str, str]:
        head, body, rest = split(text, starts)
        return head, Scanned(body), rest

    monkeypatch.setattr(recovery, "split_think", scanned)
    for module in MODULES:
        for name, pattern in counting_patterns(module).items():
            monkeypatch.setattr(module, name, pattern)
