"""Request ids: the client's own when it sent a sane one, else a fresh one latchgate mints.

Every response carries its request's id (`x-latchgate-request-id`), the id of its log line.
"""

from __future__ import annotations

import itertools
import re
import secrets

_SANE_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
# Fresh ids are a random per-process prefix and a counter: unique across restarts and processes
# like a uuid4, without a getrandom syscall per request.
_ID_PREFIX = "lg-" + secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


def new_request_id(given: str | None) -> str:
    """The client's own request id when it is a sane token, else a fresh one."""
    if given and _SANE_ID.fullmatch(given):
        return given
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"
