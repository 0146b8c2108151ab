"""Measure tool-call recovery: whole 10 KB replies, and the per-chunk cost of the stream path.

Run: .venv/bin/python bench/bench_toolcalls.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.toolcalls.recovery import recover
from proxy.toolcalls.stream import StreamToolProcessor
from tests.toolcall_corpus import TOOLS, by_format

CODE = "def f(x):\n    return {'a': x, \"b\": [x, x]}  # </tool_call> { ]\n"


def _reply_10k() -> str:
    content = (CODE * 200)[:9800]
    call = json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": content}})
    return f"I'll write the file.\n\n<tool_call>\n{call}\n</tool_call>"


def _per_call(fn: Callable[[], object], repeat: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def _stream(text: str, size: int) -> float:
    """Microseconds per chunk to push `text` through the stream path in `size`-char chunks."""
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces]

    def go() -> None:
        proc = StreamToolProcessor(TOOLS)
        for c in chunks:
            proc.feed(c)
        proc.finish()

    return _per_call(go, 5) / len(chunks) * 1e6


def main() -> None:
    reply = _reply_10k()
    assert recover(reply, TOOLS) is not None
    print(f"whole: recover() on a {len(reply)}-char reply: "
          f"{_per_call(lambda: recover(reply, TOOLS), 50) * 1e3:.2f} ms")
    plain = ("Paris is sunny today; the UV index is high (7), take a hat. " * 170)[:10000]
    for size in (1, 8):
        print(f"stream, plain text, {size}-char chunks: {_stream(plain, size):.1f} us/chunk")
        print(f"stream, 10 KB call, {size}-char chunks: {_stream(reply, size):.1f} us/chunk")
    print("corpus by format:", json.dumps(by_format(), sort_keys=True))


if __name__ == "__main__":
    main()
