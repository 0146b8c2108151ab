"""What every front's translation shares: what the upstream takes, and where system text goes.

Kept here once so the fronts agree: the same server gets past reasoning back the same way and
a late system message is handled the same way, whichever API the client spoke.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kinds whose chat templates read past reasoning back as `reasoning_content`.
REASONING_READERS = ("llama.cpp", "vllm")


@dataclass(frozen=True, slots=True)
class Options:
    """What the upstream takes, for the parts of a translation that depend on it."""

    reasoning_field: str | None = None  # the assistant field past reasoning goes in, if any
    files: bool = False  # chat `file` content parts
    kind: str = "generic"  # the upstream's kind

    @staticmethod
    def for_kind(kind: str) -> Options:
        return Options(
            reasoning_field="reasoning_content" if kind in REASONING_READERS else None,
            files=kind == "openai",
            kind=kind,
        )


def late_system(role: str, text: str, param: str) -> tuple[dict[str, Any], str]:
    """A system (or developer) message after the conversation began: sent as a user message
    marked with its role, since many chat templates take system text only first (Qwen's raise
    "System message must be at the beginning"); and the notice that says so."""
    message = {"role": "user", "content": f"[{role}] {text}"}
    notice = (
        f"{param}: a {role} message after the conversation began was sent as a user message "
        f"marked [{role}] (chat templates take system text only first)."
    )
    return message, notice
