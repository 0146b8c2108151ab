"""Latch snapshots on disk: the only file I/O of capability negotiation (BEHAVIOUR 2.7).

Latches survive restarts through one JSON file. Writes are atomic (a temporary file in the same
directory, fsynced, then renamed over the old one) so a crash never leaves half a snapshot. A file
that cannot be read as a snapshot never stops the proxy from starting and is never overwritten:
it is renamed aside, reported, and the proxy starts with empty latches.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson


def load_file(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The snapshot at `path`: (data, warnings).

    Missing: (None, []). Unreadable (permissions, I/O): (None, [warning]), left in place.
    Not JSON or not an object: renamed to `<path>.corrupt-<unix time>` and (None, [warning]).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        return None, [f"latch snapshot {path} could not be read ({exc}); starting without it"]
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, [set_aside(path, f"it is not valid JSON ({exc})")]
    if not isinstance(data, dict):
        return None, [set_aside(path, "it is not a JSON object")]
    return data, []


def set_aside(path: Path, why: str, *, tag: str = "corrupt") -> str:
    """Rename an unusable snapshot out of the way, keeping it; return the warning to report."""
    aside = path.with_name(f"{path.name}.{tag}-{int(time.time())}")
    counter = 1
    while aside.exists():  # two such loads within one second: keep both copies
        aside = path.with_name(f"{path.name}.{tag}-{int(time.time())}-{counter}")
        counter += 1
    try:
        path.rename(aside)
    except OSError as exc:
        return (
            f"latch snapshot {path} is {tag}: {why}; it could not be moved aside ({exc}), "
            "so latches start empty and the file is left untouched"
        )
    return (
        f"latch snapshot {path} is {tag}: {why}; it was kept as {aside.name} and latches "
        "start empty"
    )


def save_file(path: Path, data: dict[str, Any]) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable; some filesystems cannot open a directory, which is fine."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # fsync on a directory is unsupported on some filesystems; the data is written
    finally:
        os.close(fd)
