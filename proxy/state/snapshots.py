"""Latch snapshots on disk: the only file I/O of capability negotiation (BEHAVIOUR 2.7).

Latches survive restarts through one JSON file. Writes are atomic (a temporary file in the same
directory, fsynced, then renamed over the old one) so a crash never leaves half a snapshot. A file
that cannot be read as a snapshot never stops the proxy from starting and is never overwritten:
it is renamed aside, reported, and the proxy starts with empty latches.

Only regular files are read or replaced. A FIFO given as the state file would block start-up
forever in open(), and replacing a device or FIFO (say /dev/null) with a regular file would break
something else; such a path is reported and left as it is, and latches start empty.

A kill -9 during a save leaves its temporary file behind; loading the snapshot removes those of
this state file. A save holds a lock on its temporary file while it writes, so a temporary file
another process is still writing (a `latchgate latches` command next to a running proxy) is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson


def load_file(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The snapshot at `path`: (data, warnings), after removing leftovers of interrupted saves.

    Missing: (None, []). Unreadable (permissions, I/O) or not a regular file: (None, [warning]),
    left in place. Not JSON or not an object: renamed to `<path>.corrupt-<unix time>` and
    (None, [warning]).
    """
    warnings = remove_leftovers(path)
    try:
        raw = _read_regular(path)
    except FileNotFoundError:
        return None, warnings
    except _NotRegular as exc:
        return None, [*warnings, f"latch snapshot {path} {exc}; latches start empty"]
    except OSError as exc:
        return None, [
            *warnings,
            f"latch snapshot {path} could not be read ({exc}); starting without it",
        ]
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, [*warnings, set_aside(path, f"it is not valid JSON ({exc})")]
    if not isinstance(data, dict):
        return None, [*warnings, set_aside(path, "it is not a JSON object")]
    return data, warnings


class _NotRegular(OSError):
    """The path is a FIFO, a directory, a device...: never read, moved or replaced."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> _NotRegular:
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return _NotRegular(
        f"is not a regular file (it is {kind}), so it is left as it is and latches are not "
        "saved there"
    )


def _read_regular(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file; raises `_NotRegular` otherwise.

    Opened with O_NONBLOCK and checked with fstat on the open descriptor, rather than a stat()
    before the open: opening a FIFO without O_NONBLOCK waits for a writer forever, and a check
    by name could be passed by one file and the open done on another.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(mode)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


# What `save_file` names its temporary file: mkstemp's random part is letters, digits and "_".
_TMP_PREFIX, _TMP_SUFFIX = ".{}.", ".tmp"


def remove_leftovers(path: Path) -> list[str]:
    """Remove temporary files that interrupted saves of `path` left; return a warning if any.

    Only names `save_file` gives this state file's temporary files are considered (not those of
    `latches.json.old` next to `latches.json`), and only regular files that no save holds locked.
    """
    pattern = re.compile(
        re.escape(_TMP_PREFIX.format(path.name)) + r"[a-z0-9_]+" + re.escape(_TMP_SUFFIX)
    )
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []  # an unreadable or missing directory: the load reports what matters
    candidates = [name for name in names if pattern.fullmatch(name)]
    removed = sorted(name for name in candidates if _remove_if_abandoned(path.parent / name))
    if not removed:
        return []
    files = "file" if len(removed) == 1 else "files"
    return [
        f"removed {len(removed)} leftover temporary {files} of an interrupted save of {path} "
        f"({', '.join(removed)})"
    ]


def _remove_if_abandoned(candidate: Path) -> bool:
    """Unlink `candidate` if it is a regular file nobody holds locked; True when removed."""
    try:
        fd = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a save still writing: skip it
        now = os.lstat(candidate)
        if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
            return False  # the name was renamed or reused since it was opened
        os.unlink(candidate)
        return True
    except OSError:  # locked, gone meanwhile, or locks unsupported here: leave it
        return False
    finally:
        os.close(fd)


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
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename.

    Refuses (OSError) to replace anything but a regular file: a FIFO or device given as the
    state file keeps being what it is.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} {_not_regular(mode)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _locked_temp(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(tmp, path)  # inside the `with`: the lock is held until the rename
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _locked_temp(path: Path) -> tuple[int, str]:
    """A new temporary file next to `path`, locked so `remove_leftovers` leaves it alone.

    A start-up cleaning between mkstemp and flock could remove the file before it is locked;
    then the descriptor has no name left (no links), and a fresh file is made.
    """
    prefix = _TMP_PREFIX.format(path.name)
    while True:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=_TMP_SUFFIX)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            return fd, tmp  # no locks on this filesystem: write anyway, as before
        if os.fstat(fd).st_nlink:
            return fd, tmp
        os.close(fd)


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
