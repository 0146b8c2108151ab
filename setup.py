"""latchgate's build: the package pyproject.toml declares, with the request path's hot modules
compiled by mypyc (proxy/compiled.py says which, and why).

The sources are built alone when LATCHGATE_PURE=1 is set or no C compiler is found; they run the
same, slower. Beside the extensions the build writes proxy/_built.py, the digest of each source
it compiled, by which the package tells at import whether they still match (an editable install
whose sources were edited since runs them, not the stale extensions).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sysconfig
from pathlib import Path
from types import ModuleType

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
BUILT = ROOT / "proxy" / "_built.py"


def load_compiled() -> ModuleType:
    """proxy/compiled.py alone (standard library only), by its path: importing the package would
    run its `__init__`, and the build does not have its dependencies."""
    spec = importlib.util.spec_from_file_location(
        "_latchgate_compiled", BUILT.with_name("compiled.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def can_compile() -> bool:
    if os.environ.get("LATCHGATE_PURE") == "1":
        return False
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


def forget_earlier_build() -> None:
    """Remove what an earlier build left in the sources (an editable install builds in place):
    an extension of a module no longer compiled would shadow its source, and fail to load."""
    BUILT.unlink(missing_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    for stale in [*ROOT.glob(f"proxy/**/*{suffix}"), *ROOT.glob(f"latchgate__mypyc*{suffix}")]:
        stale.unlink()


def extensions() -> list[Extension]:
    forget_earlier_build()
    if not can_compile():
        return []
    from mypyc.build import mypycify

    compiled = load_compiled()
    paths = [str(compiled.source_of(module, Path())) for module in compiled.MODULES]
    # The build environment holds mypy alone: the dependencies are missing imports there, whose
    # `type: ignore`s (for their real types) go unused.
    flags = ["--ignore-missing-imports", "--no-warn-unused-ignores"]
    built = mypycify([*flags, *paths], opt_level="3", group_name="latchgate")
    BUILT.write_text(compiled.built_text(ROOT))
    return built


setup(ext_modules=extensions())
