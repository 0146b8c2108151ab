"""How many of the peer engines' own tool-call test cases latchgate gets right (issue 18's
measure): per engine and per family, positive and negative cases, whole and streamed at five
chunkings. Cases latchgate's contract answers differently (`differs`) are counted apart, and
once more as misses ("right of all").

    .venv/bin/python -m bench.peer_cases
"""

from __future__ import annotations

from collections import defaultdict

from tests.peer_check import passes
from tests.toolcall_peers import PeerCase, engine_cases


def _rate(right: int, total: int) -> str:
    return f"{right}/{total} ({100 * right / total:.1f} %)" if total else "-"


def _line(label: str, cases: list[PeerCase]) -> str:
    checked = [c for c in cases if not c.differs]
    results = [(c, *passes(c)) for c in checked]
    pos = [r for r in results if r[0].calls]
    neg = [r for r in results if not r[0].calls]
    both = sum(1 for _, w, s in results if w and s)
    return (
        f"| {label} | {len(cases)} | {_rate(both, len(results))} | {_rate(both, len(cases))} "
        f"| {_rate(sum(1 for _, w, s in pos if w and s), len(pos))} "
        f"| {_rate(sum(1 for _, w, s in neg if w and s), len(neg))} "
        f"| {_rate(sum(1 for _, w, _ in results if w), len(results))} "
        f"| {_rate(sum(1 for _, _, s in results if s), len(results))} "
        f"| {len(cases) - len(checked)} |"
    )


def main() -> None:
    print(
        "| engine / family | cases | right | right of all (differs as misses) | positive "
        "| negative | whole | streamed | differs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    everything: list[PeerCase] = []
    for engine, cases in engine_cases().items():
        everything += cases
        print(_line(engine, cases))
    print(_line("**all**", everything))
    families: dict[str, list[PeerCase]] = defaultdict(list)
    for case in everything:
        families[case.family].append(case)
    print()
    for family in sorted(families):
        print(_line(family, families[family]))
    print()
    for case in everything:
        if case.differs or case.gap:
            kind = "differs" if case.differs else "gap"
            print(f"- {case.name} ({kind}): {case.differs or case.gap}")


if __name__ == "__main__":
    main()
