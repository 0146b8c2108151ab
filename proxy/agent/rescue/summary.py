"""The summary side request: the folded messages written out for the model, and its answer read.

The messages to fold are rendered as a plain transcript (who said what, which tool was called
with what, what it returned) rather than sent as chat messages: the side request then declares
no tools and needs no template support for tool turns, and a long tool result can be clipped to
its head and tail. When the rendered stretch is too long for one request in the model's window,
it is summarised in passes, each continuing the summary so far: the same way an earlier
compaction's summary is continued when a later turn folds further.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from proxy.agent.rescue.transcript import role, text_of
from proxy.jsontext import compact

INSTRUCTIONS = (
    "You write the working notes an AI assistant needs to continue a conversation whose earlier "
    "part no longer fits its context window. From the transcript you are given, keep: the "
    "user's goals, requests and constraints; decisions made and why; facts learned from tool "
    "results (file paths, names, values, errors, commands and their outcomes); what has been "
    "done; and what remains to do. Be concise and specific; use short bullet points. Write only "
    "the notes: do not answer the user, do not call tools, do not add commentary."
)
CONTINUE = (
    "Notes so far, on the conversation before this part:\n{earlier}\n\n"
    "Update the notes with the following later part of the conversation, and return the whole "
    "updated notes.\n\n{transcript}"
)
FIRST = "Transcript of the earlier part of the conversation:\n\n{transcript}"

MAX_PASSES = 6
MIN_CLIP = 300
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit:,} chars omitted ...]\n{text[-tail:]}"


def _calls(message: dict[str, Any]) -> list[str]:
    lines = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = compact(arguments)  # any depth (orjson writes 254 levels)
            lines.append(f"[called {function.get('name')}({arguments})]")
    return lines


def render(message: object, clip: int) -> str:
    """One message as a transcript entry, long texts clipped to `clip` characters."""
    if not isinstance(message, dict):
        return ""
    kind = role(message) or "unknown"
    text = text_of(message.get("content"))
    if text is None and message.get("content") is not None:
        text = "[content that is not text]"
    lines = [_clip(text, clip)] if text else []
    if kind == "assistant":
        lines += [_clip(line, clip) for line in _calls(message)]
    name = message.get("name") if kind == "tool" else None
    label = f"tool result ({name})" if isinstance(name, str) and name else kind
    return f"{label}: " + "\n".join(lines) if lines else ""


def passes(
    messages: Sequence[Any], indices: Sequence[int], budget_chars: int, clip: int = 4000
) -> list[str]:
    """The transcript of `messages[indices]` in at most `MAX_PASSES` pieces of `budget_chars`
    each, long texts clipped (shorter and shorter until it fits that many pieces); none when
    even the shortest clipping needs more (the caller falls back to pruning or refusing)."""
    while True:
        entries = [entry for i in indices if (entry := render(messages[i], clip))]
        pieces: list[str] = []
        size = 0
        for entry in entries:
            if pieces and size + len(entry) + 2 <= budget_chars:
                pieces[-1] += "\n\n" + entry
                size += len(entry) + 2
            else:
                pieces.append(entry)
                size = len(entry)
        if len(pieces) <= MAX_PASSES and all(len(p) <= budget_chars for p in pieces):
            return pieces
        if clip <= MIN_CLIP:
            return []  # too long to summarise in so many passes: the caller falls back
        clip = max(clip // 2, MIN_CLIP)


def request(model: str, piece: str, earlier: str | None, ceiling: int) -> dict[str, Any]:
    """The body of one summary pass: no tools, a short ceiling, never streamed."""
    prompt = (
        CONTINUE.format(earlier=earlier, transcript=piece)
        if earlier
        else FIRST.format(transcript=piece)
    )
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": ceiling,
        "stream": False,
    }


def read(body: object) -> str | None:
    """The summary in a chat completion, or None when it has none worth using (no text, only
    reasoning, or cut off before it said anything)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        return None
    text = _THINK.sub("", content).strip()
    if text.startswith("<think>"):
        return None  # cut off while still thinking: no notes yet
    return text or None
