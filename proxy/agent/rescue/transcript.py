"""What rescue reads of a chat transcript: roles, texts, digests, and the conversation's key.

A digest identifies a message as the client sent it, so a rewrite remembered for one turn is
applied to the next turn only where that turn repeats the same messages. The conversation key
groups the turns of one conversation: the client's `prompt_cache_key` when it sends one (Codex
CLI does), else its `user` (Claude Code's `metadata.user_id` becomes that), else a digest of the
leading messages (the system prompt and the first user message), which stay the same all along a
conversation. Keys are per client key too, so no plan made for one client is applied to another's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

SYSTEM_ROLES = frozenset({"system", "developer"})


def role(message: object) -> str:
    """The message's role, or "" when it has none a transcript can use."""
    if isinstance(message, dict):
        value = message.get("role")
        if isinstance(value, str):
            return value
    return ""


def text_of(content: object) -> str | None:
    """A message content as text: the string, or a list of text parts joined; None otherwise
    (a part that is not text, such as an image, cannot be cleared or summarised as text)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts)


def _bytes(value: object) -> bytes:
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        # a lone surrogate, say: still one stable identity for the same input
        return repr(value).encode("utf-8", "surrogatepass")


def digest(messages: Sequence[Any]) -> str:
    """A short digest of `messages` as the client sent them (order and every byte count)."""
    h = hashlib.blake2b(digest_size=16)
    for message in messages:
        piece = _bytes(message)
        h.update(len(piece).to_bytes(8, "little"))
        h.update(piece)
    return h.hexdigest()


def leading(messages: Sequence[Any]) -> int:
    """How many messages at the start are system prompts (never pruned, never folded)."""
    count = 0
    for message in messages:
        if role(message) not in SYSTEM_ROLES:
            break
        count += 1
    return count


def conversation_key(body: dict[str, Any], owner: str) -> str:
    """The key the turns of one conversation share, scoped to the client key `owner`."""
    for name in ("prompt_cache_key", "user"):
        value = body.get(name)
        if isinstance(value, str) and value:
            return digest([owner, name, value])
    messages = body.get("messages")
    if not isinstance(messages, list):
        return digest([owner])
    first_user = next((i for i, m in enumerate(messages) if role(m) == "user"), len(messages))
    return digest([owner, "messages", *messages[: first_user + 1]])
