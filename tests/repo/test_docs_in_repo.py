"""The repository stands on its own (issue 13 item 25): what README links to and what the code
cites is inside it, and the test that reads the observability spec runs in a bare copy.

A developer's checkout once sat next to a `../shared` folder holding the specs; the README
linked there and a test skipped without it, so a clone showed broken links and skipped a check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CITED = [
    "docs/BEHAVIOUR.md",  # "BEHAVIOUR.md 4.1" and the like, all through proxy/ and tests/
    "docs/OBSERVABILITY.md",  # proxy/observe/metrics.py, tests/repo/test_dashboard_static.py
    "docs/research/refusal-wordings.md",  # agent/overflow.py, agent/retry.py, the test data
    "docs/research/toolcall-formats.md",  # proxy/toolcalls/recovery.py, tests/toolcall_corpus.py
    "docs/research/llama-server-observed.md",  # proxy/agent/windows.py
]


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *ROOT.glob("*/*.md")]


@pytest.mark.parametrize("doc", _markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_stay_inside_the_repo_and_resolve(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc.name} links outside the repo: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"


@pytest.mark.parametrize("path", CITED)
def test_what_the_code_cites_is_in_the_repo(path: str) -> None:
    assert (ROOT / path).is_file()


def test_the_observability_spec_test_runs_in_a_bare_copy(tmp_path: Path) -> None:
    """A copy of the repo with nothing beside it (as a clone is) runs the spec test, not skips."""
    copy = tmp_path / "latchgate"
    junk = shutil.ignore_patterns(
        ".git", ".venv", ".cache", "__pycache__", "*_cache", ".hypothesis", "*.egg-info"
    )
    shutil.copytree(ROOT, copy, ignore=junk)
    test = "tests/repo/test_dashboard_static.py::test_topics_cover_the_spec_panel_list"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", test],
        cwd=copy,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout and "skipped" not in out.stdout, out.stdout
