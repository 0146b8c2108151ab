"""The peer engines' own tool-call test cases (tests/toolcall_peers/), whole and streamed at
five chunkings: every case latchgate's contract agrees with must come out as the peer expects.
A case marked `gap` must still fail (strict), so a fix is noticed and the mark removed."""

from __future__ import annotations

import pytest

from tests.peer_check import chunkings, expected, streamed, whole
from tests.toolcall_peers import PeerCase, all_cases, engine_cases

CHECKED = [c for c in all_cases() if not c.differs]


def _param(case: PeerCase) -> object:
    marks = [pytest.mark.xfail(reason=case.gap, strict=True)] if case.gap else []
    return pytest.param(case, id=case.name, marks=marks)


def test_every_engine_has_cases_and_names_are_unique() -> None:
    engines = engine_cases()
    assert set(engines) >= {"vllm", "sglang", "llama_cpp", "ollama"}
    names = [c.name for c in all_cases()]
    assert len(names) == len(set(names))
    assert all(c.source and c.tools for c in all_cases())


@pytest.mark.parametrize("case", [_param(c) for c in CHECKED])
def test_peer_case_whole_and_streamed(case: PeerCase) -> None:
    want = expected(case)
    assert whole(case) == want
    for pieces in chunkings(case.text, sum(map(ord, case.name))):
        assert streamed(case, pieces) == want, pieces
