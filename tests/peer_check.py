"""How a peer engine's tool-call test case is judged (tests/toolcall_peers/): the case's text
goes through latchgate's recovery whole and streamed, and the client's view (calls as name
and parsed arguments, content stripped) is compared with what the peer's test expects.
Shared by tests/unit/toolcalls/test_peer_cases.py and bench/peer_cases.py."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from proxy.toolcalls.recovery import process_response
from proxy.toolcalls.stream import StreamToolProcessor
from tests.toolcall_case import Call
from tests.toolcall_peers import PeerCase


@dataclass(frozen=True)
class Seen:
    """What a client gets: the content (stripped; None when empty) and the calls."""

    content: str | None
    calls: list[Call]


def _stripped(text: str | None) -> str | None:
    return (text or "").strip() or None


def _calls(raw: list[dict[str, Any]]) -> list[Call]:
    out: list[Call] = []
    for call in raw:
        fn = call["function"]
        try:
            args = json.loads(fn["arguments"])
        except ValueError:
            args = {"<unparseable>": fn["arguments"]}
        out.append((fn["name"], args))
    return out


def whole(case: PeerCase) -> Seen:
    message: dict[str, Any] = {"role": "assistant", "content": case.text}
    if case.reasoning is not None:
        message["reasoning_content"] = case.reasoning
    body = {"choices": [{"index": 0, "message": message, "finish_reason": case.finish}]}
    new, _ = process_response(body, list(case.tools))
    out = (new or body)["choices"][0]["message"]
    return Seen(_stripped(out.get("content")), _calls(out.get("tool_calls") or []))


def streamed(case: PeerCase, pieces: list[str]) -> Seen:
    """The case's text in `pieces`, through the stream processor, assembled as a client would."""
    proc = StreamToolProcessor(list(case.tools))
    chunks: list[dict[str, Any]] = [_chunk({"role": "assistant", "content": ""})]
    if case.reasoning is not None:
        chunks.append(_chunk({"reasoning_content": case.reasoning}))
    chunks += [_chunk({"content": p}) for p in pieces]
    chunks.append(_chunk({}, case.finish))
    out: list[dict[str, Any]] = []
    for c in chunks:
        out.extend(proc.feed(c))
    out.extend(proc.finish())
    return _assemble(out)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


def _assemble(chunks: list[dict[str, Any]]) -> Seen:
    """What the openai SDK's stream helper assembles from the chunks."""
    state = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    message = state.current_completion_snapshot.choices[0].message
    calls = [{"function": {"name": c.function.name, "arguments": c.function.arguments}}
             for c in message.tool_calls or []]  # fmt: skip
    return Seen(_stripped(message.content), _calls(calls))


def chunkings(text: str, seed: int) -> list[list[str]]:
    """The ways a case is streamed: whole, one character a chunk, and three random splits."""
    ways = [[text], list(text)]
    rnd = random.Random(seed)
    for _ in range(3):
        pieces, i = [], 0
        while i < len(text):
            k = rnd.randint(1, 12)
            pieces.append(text[i : i + k])
            i += k
        ways.append(pieces)
    return ways


def expected(case: PeerCase) -> Seen:
    return Seen(_stripped(case.content), list(case.calls))


def passes(case: PeerCase) -> tuple[bool, bool]:
    """(whole right, every streamed chunking right)."""
    want = expected(case)
    seed = sum(map(ord, case.name))
    return whole(case) == want, all(streamed(case, p) == want for p in chunkings(case.text, seed))
