"""Measure tool-call recovery per format family, whole and per streamed chunk, against another
tree in the same run (issue 18: "per-format recovery time whole and per streamed chunk, against
today's numbers in the same run; the plain-text stream path must not get slower").

Every positive case of this tree's corpus (tests/toolcall_corpus.py and tests/toolcall_families/)
is timed through `recover` (whole) and `StreamToolProcessor` (8-character chunks), grouped by its
format label; plus the 10 KB call and 10 KB of plain prose at 1- and 8-character chunks. With
`--compare-dir`, the same texts go through the other tree's code too, each tree in a subprocess
of its own (its `proxy` package first on the path), and the table gives both and their ratio. A
format the other tree does not know is timed all the same (it finds no call there: `-` under
"found").

Run: .venv/bin/python bench/bench_toolcalls.py [--compare-dir /path/to/tree] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CODE = "def f(x):\n    return {'a': x, \"b\": [x, x]}  # </tool_call> { ]\n"
PLAIN = ("Paris is sunny today; the UV index is high (7), take a hat. " * 170)[:10000]


def _reply_10k() -> str:
    content = (CODE * 200)[:9800]
    call = json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": content}})
    return f"I'll write the file.\n\n<tool_call>\n{call}\n</tool_call>"


# -- the cases (this tree's corpus), written for the workers --------------------------------


def _cases() -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT))
    from tests.toolcall_case import TOOLS
    from tests.toolcall_corpus import CASES

    cases = [{"group": c.format, "text": c.text, "tools": list(c.tools)} for c in CASES if c.format]
    cases.append({"group": "~ 10 KB hermes call", "text": _reply_10k(), "tools": TOOLS})
    cases.append({"group": "~ 10 KB plain prose", "text": PLAIN, "tools": TOOLS})
    return cases


# -- a worker: one tree's code over the cases -----------------------------------------------


def _per_call(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm the tree's caches (marker tables, compiled patterns) before timing
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def _chunks(text: str, size: int) -> list[dict[str, Any]]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"content": text[i : i + size]},
                              "finish_reason": None}]}
        for i in range(0, len(text), size)
    ]  # fmt: skip


def _time_case(case: dict[str, Any], repeat: int, processor: Any, recover: Any) -> dict[str, Any]:
    text, tools = case["text"], case["tools"]
    whole = _per_call(lambda: recover(text, tools), repeat)
    out: dict[str, Any] = {"found": recover(text, tools) is not None, "whole_us": whole * 1e6}
    for size in (1, 8) if case["group"].startswith("~") else (8,):
        chunks = _chunks(text, size)

        def go(chunks: list[dict[str, Any]] = chunks) -> None:
            proc = processor(tools)
            for c in chunks:
                proc.feed(c)
            proc.finish()

        out[f"chunk{size}_us"] = _per_call(go, max(1, repeat // 10)) / len(chunks) * 1e6
    return out


def worker(cases_file: str, repeat: int) -> None:
    from proxy.toolcalls.recovery import recover
    from proxy.toolcalls.stream import StreamToolProcessor

    cases = json.loads(Path(cases_file).read_text())
    results = [_time_case(c, repeat, StreamToolProcessor, recover) for c in cases]
    json.dump(results, sys.stdout)


def _run_tree(tree: Path, cases_file: str, repeat: int) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, __file__, "--worker", cases_file, "--repeat", str(repeat)]
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


# -- the table --------------------------------------------------------------------------------


def _groups(cases: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group: cases, how many found, median whole µs, median µs per chunk (8 and 1)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for case, res in zip(cases, results, strict=True):
        groups.setdefault(case["group"], []).append(res)
    return {g: _summary(rs) for g, rs in sorted(groups.items())}


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if s else float("nan")


def _summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n": len(rs),
        "found": sum(r["found"] for r in rs),
        "whole": _median([r["whole_us"] for r in rs]),
        "chunk8": _median([r["chunk8_us"] for r in rs]),
        "chunk1": _median([r["chunk1_us"] for r in rs if "chunk1_us" in r]),
    }


def _table(main: dict[str, Any], other: dict[str, Any] | None) -> str:
    head = "| format | cases | whole µs | µs/chunk (8) | µs/chunk (1) |"
    rule = "| --- | ---: | ---: | ---: | ---: |"
    if other is not None:
        head += (
            " found before | whole before µs | µs/chunk (8) before | (1) before"
            " | whole ÷ before | chunk (8) ÷ before |"
        )
        rule += " ---: | ---: | ---: | ---: | ---: | ---: |"
    lines = [head, rule]
    for g, m in main.items():
        row = f"| {g} | {m['n']} | {m['whole']:.1f} | {m['chunk8']:.2f} | {_num(m['chunk1'])} |"
        if other is not None:
            o = other[g]
            found = str(o["found"]) if o["found"] else "-"
            row += (
                f" {found} | {o['whole']:.1f} | {o['chunk8']:.2f} | {_num(o['chunk1'])} |"
                f" {m['whole'] / o['whole']:.2f} | {m['chunk8'] / o['chunk8']:.2f} |"
            )
        lines.append(row)
    return "\n".join(lines)


def _num(v: float) -> str:
    return "" if v != v else f"{v:.2f}"  # NaN: not measured for this group


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare-dir", type=Path, help="another latchgate tree, timed alike")
    parser.add_argument("--repeat", type=int, default=200, help="whole recoveries per case")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.repeat)
        return
    cases = _cases()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    main_res = _groups(cases, _run_tree(ROOT, f.name, args.repeat))
    other = (
        _groups(cases, _run_tree(args.compare_dir, f.name, args.repeat))
        if args.compare_dir
        else None
    )
    os.unlink(f.name)
    print(_table(main_res, other))


if __name__ == "__main__":
    main()
