"""proxy.compiled: which build of the hot modules runs, and that a stale build never does.

The build compiles proxy.compiled.MODULES with mypyc (setup.py). The tests run against whichever
build the checkout has: CI's is compiled, and LATCHGATE_REQUIRE_COMPILED=1 (set there) makes a
missing one a failure rather than a sources run that would hide what users get.
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy import compiled

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]


def a_tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of MODULES' sources with an extension file beside each, and their digests."""
    built = {}
    for module in compiled.MODULES:
        source = compiled.source_of(module, tmp_path)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(compiled.source_of(module).read_bytes())
        source.with_name(source.stem + EXTENSION).write_bytes(b"")
        built[module] = compiled.digest(source)
    return tmp_path, built


def test_the_record_the_build_writes_is_read_back_as_its_digests(tmp_path: Path) -> None:
    root, built = a_tree(tmp_path)
    written: dict[str, object] = {}
    exec(compiled.built_text(root), written)
    assert written["SOURCES"] == built


def test_a_build_that_matches_its_sources_runs(tmp_path: Path) -> None:
    root, built = a_tree(tmp_path)
    assert compiled.stale(built, root) == []
    assert compiled.reason_for_sources(built, {}, root) is None


def test_an_edited_source_runs_the_sources(tmp_path: Path) -> None:
    root, built = a_tree(tmp_path)
    edited = compiled.MODULES[-1]
    with compiled.source_of(edited, root).open("a") as source:
        source.write("# edited\n")
    assert compiled.stale(built, root) == [edited]
    why = compiled.reason_for_sources(built, {}, root)
    assert why == f"1 changed since compiled, e.g. {edited}"


def test_a_source_without_its_extension_or_record_runs_the_sources(tmp_path: Path) -> None:
    root, built = a_tree(tmp_path)
    first, second = compiled.MODULES[:2]
    source = compiled.source_of(first, root)
    source.with_name(source.stem + EXTENSION).unlink()  # built and installed elsewhere
    del built[second]  # compiled by an older build that did not list it
    assert compiled.stale(built, root) == [first, second]


def test_asking_for_the_sources_or_having_nothing_compiled_runs_them(tmp_path: Path) -> None:
    root, built = a_tree(tmp_path)
    assert compiled.reason_for_sources(built, {"LATCHGATE_PURE": "1"}, root) == "LATCHGATE_PURE=1"
    assert compiled.reason_for_sources(built, {"LATCHGATE_PURE": "0"}, root) is None
    assert compiled.reason_for_sources(None, {}, root) == "nothing compiled"


def _loaded(env: dict[str, str]) -> tuple[str, list[str]]:
    """In a new interpreter: the build selected, and the files MODULES were loaded from."""
    code = (
        "import importlib, proxy.compiled as c\n"
        "files = [importlib.import_module(m).__file__ for m in c.MODULES]\n"
        "print(c.build); print(*files, sep='\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return out[0], out[1:]


def test_the_sources_run_whole_when_asked_for() -> None:
    build, files = _loaded({**os.environ, "LATCHGATE_PURE": "1"})
    assert build.startswith("sources (")
    assert files == [str(compiled.source_of(m)) for m in compiled.MODULES]


def test_this_checkout_runs_one_build_whole() -> None:
    # Compiled when its build is current, else the sources of every module (never a mix).
    env = {k: v for k, v in os.environ.items() if k != "LATCHGATE_PURE"}
    build, files = _loaded(env)
    if os.environ.get("LATCHGATE_REQUIRE_COMPILED") == "1" and build != "compiled":
        pytest.fail(f"the compiled build does not run: {build}")
    if build == "compiled":
        assert not any(f.endswith(".py") for f in files), files
    else:
        assert files == [str(compiled.source_of(m)) for m in compiled.MODULES]
