"""Pruning: old tool results cleared to a one-line stub, oldest first, only as many as needed.

A 40,000-character `read_file` result costs about 10,000 tokens on every turn after it, and an
agent rarely needs it again once it acted on it. A cleared result keeps its message (the call
stays answered, which every server requires) and says how much was there, so the model knows to
read it again if it must. Never cleared: system prompts and user messages (only `tool` messages
are), the latest `keep_last` tool results, and results under `max_chars` (clearing them would
save next to nothing and lose what they said). Pruning changes no message's position, so what
it did is a list of indices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.agent.rescue.transcript import role, text_of

STUB = "[result cleared, {chars:,} chars]"
_STUB_HEAD = "[result cleared, "


@dataclass(frozen=True, slots=True)
class Pruning:
    """What to clear: the indices, oldest first, and the tokens that frees."""

    indices: tuple[int, ...]
    freed: int


def is_stub(message: object) -> bool:
    """Whether a tool message is already a cleared result."""
    text = text_of(message.get("content")) if isinstance(message, dict) else None
    return text is not None and text.startswith(_STUB_HEAD) and text.endswith(" chars]")


def stub(message: dict[str, Any]) -> dict[str, Any]:
    """The cleared form of a tool message: the same message, its content a stub."""
    text = text_of(message.get("content")) or ""
    return {**message, "content": STUB.format(chars=len(text))}


def candidates(messages: Sequence[Any], keep_last: int, max_chars: int) -> list[int]:
    """The tool results that may be cleared, oldest first."""
    tools = [i for i, message in enumerate(messages) if role(message) == "tool"]
    old = tools[: max(len(tools) - keep_last, 0)]
    found: list[int] = []
    for i in old:
        text = text_of(messages[i].get("content"))
        if text is not None and len(text) >= max_chars and not is_stub(messages[i]):
            found.append(i)
    return found


def plan(
    messages: Sequence[Any],
    sizes: Sequence[int],
    excess: int,
    *,
    keep_last: int,
    max_chars: int,
    measure: Callable[[dict[str, Any]], int] | None = None,
) -> Pruning:
    """The oldest clearable results whose clearing frees at least `excess` tokens, or all of
    them when even that is not enough (the caller then compacts or refuses).

    `sizes` are the messages' sizes in tokens; `measure` sizes a stub (by default, a dozen
    tokens).
    """
    chosen: list[int] = []
    freed = 0
    for i in candidates(messages, keep_last, max_chars):
        if freed >= excess:
            break
        chosen.append(i)
        cost = measure(stub(messages[i])) if measure is not None else 12
        freed += max(sizes[i] - cost, 0)
    return Pruning(tuple(chosen), freed)
