"""Ids the fronts make: of responses, messages, items and calls (`resp_...`, `msg_...`,
`toolu_...`), each made once and reused wherever its object appears (in a stream's events, in
the final object and in the store: clients pair calls with their outputs by them).
"""

from __future__ import annotations

import itertools
import secrets

# 16 random hex digits per process, then a counter: unique across processes and replicas
# without a system call per id (a response makes several). Ids are not secrets: a stored
# response is found only with the key that made it, whatever its id.
_PROCESS = secrets.token_hex(8)
_COUNTER = itertools.count(int.from_bytes(secrets.token_bytes(4), "big"))


def new_id(prefix: str) -> str:
    """`prefix_` and 32 hex digits (the SDKs never parse ids; OpenAI's are as long)."""
    return f"{prefix}_{_PROCESS}{next(_COUNTER) & 0xFFFFFFFFFFFFFFFF:016x}"
