"""Profile latchgate under the benchmark's load: where a case's time goes, by function.

`bench_proxy.py` says how fast a case is; this says why. It starts the same fake upstream and
latchgate as the benchmark, loads one case with wrk, samples latchgate with py-spy meanwhile, and
prints the functions with the most samples, self and inclusive (a function counted once per
stack). Run from the project root, with py-spy installed (`pip install py-spy`):

    .venv/bin/python bench/profile_proxy.py --mode stream --tools one --answer text
    .venv/bin/python bench/profile_proxy.py --mode stream --tools agent --target latchgate-responses

Idle samples (the event loop waiting in `select`/`epoll`) are left out of the shares. The first
line splits the busy samples by whose code the innermost frame is (the proxy's own, aiohttp,
asyncio, the rest), in µs a request: `--target relay` profiles the bare relay the same way, so
the two lines say how much of a request's time latchgate's own code takes against the floor's.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import bench_proxy as bp
import upstream as fake

_IDLE = ("select (selectors.py", "epoll", "_run_once", "run_forever")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("whole", "stream"), default="stream")
    p.add_argument("--tools", choices=("none", "one", "agent"), default="one")
    p.add_argument("--answer", choices=("text", "call", "textcall"), default="text")
    p.add_argument(
        "--target",
        default="latchgate",
        choices=("latchgate", "latchgate-info", "relay", bp.RESPONSES, bp.MESSAGES),
        help="latchgate-responses, latchgate-messages: the same request to that front",
    )
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--duration", type=int, default=10, help="seconds sampled (10)")
    p.add_argument("--rate", type=int, default=500, help="py-spy samples per second (500)")
    p.add_argument("--top", type=int, default=40, help="functions listed (40)")
    p.add_argument("--py-spy", default=shutil.which("py-spy") or ".venv/bin/py-spy")
    p.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    return p.parse_args(argv)


def collapsed(path: Path) -> collections.Counter[tuple[str, ...]]:
    """py-spy's raw output: one `frame;frame;... count` line per distinct stack."""
    stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def busy(stacks: collections.Counter[tuple[str, ...]]) -> collections.Counter[tuple[str, ...]]:
    """The stacks where latchgate was working, not waiting for the next event."""
    return collections.Counter(
        {s: n for s, n in stacks.items() if not any(idle in s[-1] for idle in _IDLE)}
    )


def owners(stacks: collections.Counter[tuple[str, ...]], per_sample: float) -> str:
    """The busy samples by whose code their innermost frame is, in µs a request."""
    mine = ("proxy/", "relay.py")  # latchgate's package, or the bare relay's script
    spent: collections.Counter[str] = collections.Counter()
    for stack, n in stacks.items():
        leaf = stack[-1]
        if any(own in leaf for own in mine):
            spent["own code"] += n
        elif "aiohttp/" in leaf:
            spent["aiohttp"] += n
        elif "asyncio/" in leaf:
            spent["asyncio"] += n
        else:
            spent["other"] += n
    parts = [
        f"{name} {spent[name] * per_sample:.0f}"
        for name in ("own code", "aiohttp", "asyncio", "other")
    ]
    return "µs a request, by code: " + ", ".join(parts)


def shares(stacks: collections.Counter[tuple[str, ...]]) -> tuple[dict[str, int], dict[str, int]]:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for stack, n in stacks.items():
        own[stack[-1]] += n
        for frame in set(stack):
            inclusive[frame] += n
    return own, inclusive


def report(stacks: collections.Counter[tuple[str, ...]], top: int, per_sample: float) -> str:
    """The table; `per_sample` is the µs of a request one sample stands for (requests served
    while sampling, over the samples taken), so a function's column reads as its cost per
    request, comparable between two cases' runs."""
    total = sum(stacks.values())
    working = busy(stacks)
    work = sum(working.values()) or 1
    own, inclusive = shares(working)
    lines = [f"{total} samples, {work} busy ({100 * work / max(total, 1):.0f} %)", ""]
    lines.append("| inclusive % | self % | inclusive µs/request | function |")
    lines.append("| ---: | ---: | ---: | --- |")
    for name, n in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        share = f"{100 * n / work:.1f} | {100 * own.get(name, 0) / work:.1f}"
        lines.append(f"| {share} | {n * per_sample:.1f} | `{name}` |")
    lines += ["", "| self % | self µs/request | function |", "| ---: | ---: | --- |"]
    for name, n in own.most_common(top):
        lines.append(f"| {100 * n / work:.1f} | {n * per_sample:.1f} | `{name}` |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    place = bp.Placement(proxy_cpu=1, load_cpu=0, nice=0)
    with tempfile.TemporaryDirectory(prefix="latchgate-profile-") as tmp:
        run_dir = Path(tmp)
        up_port, port = bp.free_port(), bp.free_port()
        _, up_cmd = bp.upstream_command("nginx", up_port, run_dir)
        base = f"http://127.0.0.1:{up_port}/{fake.prefix(args.mode, args.answer)}/v1"
        bodies = {bp.RESPONSES: bp.responses_body, bp.MESSAGES: bp.messages_body}
        body = bodies.get(args.target, bp.request_body)(args.mode, args.tools)
        script = run_dir / "load.lua"
        script.write_text(bp.wrk_script(body))
        url = f"http://127.0.0.1:{port}{bp.FRONTS.get(args.target, '/v1/chat/completions')}"
        raw = args.raw or run_dir / "stacks.txt"
        up_log, log = run_dir / "upstream.log", run_dir / "latchgate.log"
        with (
            bp.running(up_cmd, up_port, up_log, place.preexec(0)),
            bp.running(
                bp.target_command(args.target, base, port, run_dir), port, log, place.preexec(1)
            ) as proxy,
        ):
            bp.run_wrk("wrk", script, url, args.connections, 2, place)  # warm up
            loaded: list[dict[str, float]] = []
            load = threading.Thread(
                target=lambda: loaded.append(
                    bp.run_wrk("wrk", script, url, args.connections, args.duration + 2, place)
                )
            )
            load.start()
            subprocess.run(
                [args.py_spy, "record", "--pid", str(proxy.pid), "-d", str(args.duration),
                 "-r", str(args.rate), "--format", "raw", "-o", str(raw), "--nonblocking",
                 "--function"],
                check=True, capture_output=True,
            )  # fmt: skip
            load.join()
        print(
            f"# {args.mode}/{args.tools}/{args.answer}, {args.connections} clients, {args.target}"
        )
        stacks = collapsed(raw)
        rps = loaded[0]["requests"] / (loaded[0]["duration_us"] / 1e6) if loaded else 0.0
        # A sample stands for 1/rate s of the process's time, shared by the requests served in
        # the seconds sampled.
        per_sample = 1e6 / args.rate / (rps * args.duration) if rps else 0.0
        print(f"{rps:,.0f} requests/s under py-spy")
        print(owners(busy(stacks), per_sample))
        print(report(stacks, args.top, per_sample))


if __name__ == "__main__":
    main()
