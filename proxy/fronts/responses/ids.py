"""Ids of responses and of their items, made once and reused wherever the item appears.

An item's id and its call id are the same in the stream's events, in `response.completed` and in
the store: Codex and the SDKs pair calls with their outputs by them.
"""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    """`prefix_` and 32 random hex digits (the SDKs never parse ids; OpenAI's are as long)."""
    return f"{prefix}_{secrets.token_hex(16)}"
