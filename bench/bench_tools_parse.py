"""What declaring an agent's tools costs before anything is sent: parsing and keying the list.

An agent resends the same tools every turn (the bench's agent set: 60 KB of schemas; Claude
Code's captured request: about 50 KB). This measures, in this process and against the way
before `proxy.knowntools` in the same run:

- chat: parsing the body and keying its tools list for the schema caches (`orjson.loads` and
  `orjson.dumps` of the list, as before; `parse_object` and `key_of` now), compact and spaced
  JSON;
- messages: one Claude Code turn on the Messages front up to the upstream body: parse,
  translate, serialise the chat body, sanitise the tools (cached), the recovery schema map.

Run from the project root: `.venv/bin/python bench/bench_tools_parse.py [--turns 2000]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_tools import AGENT_TOOLS  # noqa: E402

from proxy import knowntools  # noqa: E402
from proxy.agent.schemas import apply_to_request  # noqa: E402
from proxy.fronts.common import Options  # noqa: E402
from proxy.fronts.messages.request import translate  # noqa: E402
from proxy.http.bodies import parse_object  # noqa: E402
from proxy.toolcalls.recovery import tool_schemas  # noqa: E402

CLAUDE = ROOT / "tests" / "fixtures" / "claude" / "main_request.json"


def per_call(fn: Callable[[bytes], object], bodies: list[bytes]) -> float:
    """Microseconds per body, after a warm-up on the first two."""
    for raw in bodies[:2]:
        fn(raw)
    t0 = time.perf_counter()
    for raw in bodies:
        fn(raw)
    return (time.perf_counter() - t0) / len(bodies) * 1e6


def chat_bodies(n: int, spaced: bool) -> list[bytes]:
    """`n` agent turns: the same tools, a different conversation each."""
    out = []
    for i in range(n):
        body = {"model": "m", "messages": [{"role": "user", "content": f"turn {i}"}],
                "tools": AGENT_TOOLS, "stream": True}  # fmt: skip
        out.append(json.dumps(body).encode() if spaced else orjson.dumps(body))
    return out


def before_chat(raw: bytes) -> object:
    return orjson.dumps(orjson.loads(raw)["tools"])


def now_chat(raw: bytes) -> object:
    return knowntools.key_of(parse_object(raw)["tools"])


def messages_turn(parse: Callable[[bytes], Any]) -> Callable[[bytes], object]:
    options = Options.for_kind("llama.cpp")

    def turn(raw: bytes) -> object:
        chat = translate(parse(raw), options).chat
        orjson.dumps(chat)  # the chat job's bytes (JobMaker.chat)
        apply_to_request(chat, mode="sanitise", relaxed=False)
        return tool_schemas(chat.get("tools"))

    return turn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=2000)
    args = p.parse_args()
    rows = []
    for spaced in (False, True):
        bodies = chat_bodies(args.turns, spaced)
        knowntools.clear()
        rows.append((f"chat, agent set, {'spaced' if spaced else 'compact'} JSON",
                     per_call(before_chat, bodies), per_call(now_chat, bodies)))  # fmt: skip
    claude = [CLAUDE.read_bytes()] * args.turns
    knowntools.clear()
    rows.append(("messages, a Claude Code turn", per_call(messages_turn(orjson.loads), claude),
                 per_call(messages_turn(parse_object), claude)))  # fmt: skip
    print("| case | before µs | now µs | now ÷ before |")
    print("| --- | ---: | ---: | ---: |")
    for name, before, now in rows:
        print(f"| {name} | {before:.0f} | {now:.0f} | {now / before:.2f} |")


if __name__ == "__main__":
    main()
