"""README's table of tool-call formats is true: every label the corpus expects is in it, with
the number of corpus cases that expect it (tests/toolcall_corpus.py and tests/toolcall_families/),
and every family of the registry has a docstring naming where it was checked."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from proxy.compiled import source_of
from proxy.toolcalls.formats import FAMILIES
from tests.toolcall_corpus import CASES
from tests.toolcall_peers import all_cases

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> dict[str, int]:
    text = README.read_text()
    start = text.index("| format (label) |")
    rows = text[start : text.index("\n\n", start)].splitlines()[2:]
    counts: dict[str, int] = {}
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        labels = re.findall(r"`([a-z0-9_]+)`", cells[0])
        numbers = [0 if n.strip() == "-" else int(n) for n in cells[-1].split(",")]
        assert len(labels) == len(numbers), row
        counts.update(zip(labels, numbers, strict=True))
    return counts


def test_every_label_of_the_corpus_is_in_the_table_with_its_count() -> None:
    corpus = Counter(c.format for c in CASES if c.format)
    table = _table()
    assert {k: v for k, v in table.items() if v} == dict(corpus)


def test_every_family_module_says_what_it_reads_and_where_it_was_checked() -> None:
    for family in FAMILIES:
        # Read from the source: a module compiled with mypyc keeps no docstring.
        source = source_of(family.find.__module__).read_text()
        doc = ast.get_docstring(ast.parse(source)) or ""
        assert "`" in doc, family.find.__module__  # its markers
        assert re.search(r"template|\.py|\.jinja|\.cpp|\.go|research/", doc), family.find.__module__


def test_the_readme_counts_of_the_corpus_and_the_peer_cases_are_true() -> None:
    """The corpus and peer-case figures README gives (test_peer_cases.py checks that every
    case not marked passes and every `gap` fails, so the marks are the counts)."""
    text = " ".join(README.read_text().split())
    negatives = sum(1 for c in CASES if c.format is None)
    assert f"{len(CASES)} cases, {negatives} of them replies that must stay text" in text
    peers = all_cases()
    checked = [c for c in peers if not c.differs]
    gaps = sum(1 for c in checked if c.gap)
    assert f"`tests/toolcall_peers/`, {len(peers)} cases" in text
    assert f"gets {len(checked) - gaps} of the {len(checked)} whose answer" in text
    assert f"{len(peers) - len(checked)} it answers otherwise on purpose" in text
    assert f"the {gaps} it still gets wrong" in text
