"""A child process that ends when its parent does, on Linux (PR_SET_PDEATHSIG).

Used for the processes latchgate starts: its workers, and the llama-servers it manages. A parent
killed with SIGKILL cannot tell its children to stop; the kernel can. Elsewhere this does
nothing, and the parent's own stopping is all there is.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Loaded once, in the parent: `die_with_parent` also runs between fork and exec, where loading a
# library is not safe.
_LIBC = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies."""
    if _LIBC is not None:
        with contextlib.suppress(OSError, AttributeError):
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
