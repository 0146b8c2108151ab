"""latchgate's build: the package pyproject.toml declares, with the request path's hot modules
compiled by mypyc (proxy/compiled.py says which, and why).

The sources are built alone when LATCHGATE_PURE=1 is set or no C compiler is found; they run the
same, slower. Beside the extensions the build writes proxy/_built.py, the digest of each source
it compiled, by which the package tells at import whether they still match (an editable install
whose sources were edited since runs them, not the stale extensions).
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import sysconfig
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
BUILT = ROOT / "proxy" / "_built.py"


def compiled_modules() -> list[str]:
    """proxy/compiled.py's MODULES, read from its text: the build does not import the package,
    whose dependencies it does not have."""
    tree = ast.parse((ROOT / "proxy" / "compiled.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MODULES" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise RuntimeError("proxy/compiled.py has no MODULES")


def can_compile() -> bool:
    if os.environ.get("LATCHGATE_PURE") == "1":
        return False
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


def write_built(modules: list[str]) -> None:
    """proxy/_built.py: each compiled module's source digest."""
    lines = ['"""Written by setup.py: the sha-256 of each source compiled with mypyc."""', ""]
    lines.append("SOURCES = {")
    for module in modules:
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        lines.append(f'    "{module}": "{hashlib.sha256(path.read_bytes()).hexdigest()}",')
    lines.append("}")
    BUILT.write_text("\n".join(lines) + "\n")


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

    modules = compiled_modules()
    paths = [str(Path(*module.split(".")).with_suffix(".py")) for module in modules]
    # The build environment holds mypy alone: the dependencies are missing imports there, whose
    # `type: ignore`s (for their real types) go unused.
    flags = ["--ignore-missing-imports", "--no-warn-unused-ignores"]
    built = mypycify([*flags, *paths], opt_level="3", group_name="latchgate")
    write_built(modules)
    return built


setup(ext_modules=extensions())
