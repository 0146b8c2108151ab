"""Instructions a request, counted by valgrind: a measure of work that load and noise cannot move.

`bench_proxy.py` says how fast a case is under wrk, but on a shared VM its rounds drift by a
tenth or more, which hides a change of a few per cent. This counts the instructions each target
runs for a request instead (valgrind's callgrind, `apt-get install valgrind`): the same on every
run, on any machine of the same build. Each target serves one case from the benchmark's fake
upstream, under callgrind, to one client sending requests one after another; it runs twice,
with `--requests` and with `--requests` + 1000, and the difference over 1000 is a request's
count, without the start-up's. Slow (a target runs some 50 times slower under valgrind): a
minute or two a target.

    .venv/bin/python bench/instructions.py --mode stream --tools one --answer call
    .venv/bin/python bench/instructions.py --targets relay,latchgate,latchgate-sources

Targets: `relay` (the bare aiohttp relay), `latchgate` (this tree, in the build it has),
`latchgate-sources` (this tree's sources: LATCHGATE_PURE=1) and `latchgate-compare` (the tree
at `--compare-dir`, as it is). Instructions are not time (a cache miss costs more than many),
so this says how much work a change removed, and `bench_proxy.py` what that is worth.

Every target runs with one hash seed (`--hash-seed`, 0 unless told), so the order of sets and
dicts keyed by strings, and the work it takes, is the same in every run. Run one count at a
time on a quiet machine: a target slowed by other work runs its timers more often a request
(the same tree and seed counted 460,726 a request beside three other counts and 473,446 beside
seven), and compare targets counted in one run.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import subprocess
import tempfile
from pathlib import Path

import bench_proxy as bp
import upstream as fake

TARGETS = ("relay", "latchgate", "latchgate-sources", "latchgate-compare")
_MORE = 1000  # the second run's extra requests


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=bp.MODES, default="stream")
    p.add_argument("--tools", choices=bp.TOOL_SETS, default="one")
    p.add_argument("--answer", choices=fake.ANSWERS, default="call")
    p.add_argument("--targets", default="relay,latchgate,latchgate-sources")
    p.add_argument("--compare-dir", type=Path, help="the tree latchgate-compare runs")
    p.add_argument("--requests", type=int, default=300, help="the first run's (after 200 warm)")
    p.add_argument(
        "--hash-seed", default="0", help="PYTHONHASHSEED of every target ('random': a new one)"
    )
    args = p.parse_args(argv)
    args.targets = args.targets.split(",")
    if unknown := set(args.targets) - set(TARGETS):
        p.error(f"unknown targets: {', '.join(sorted(unknown))}")
    if "latchgate-compare" in args.targets and args.compare_dir is None:
        p.error("latchgate-compare needs --compare-dir")
    return args


def drive(port: int, body: bytes, requests: int) -> None:
    """Send `requests` requests one after another on one connection, reading each answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    try:
        for _ in range(requests):
            conn.request("POST", "/v1/chat/completions", body, headers)
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"the target answered {answer.status}")
    finally:
        conn.close()


def counted(args: argparse.Namespace, target: str, base: str, run_dir: Path, n: int) -> int:
    """The instructions `target` ran in all, serving 200 requests and then `n`."""
    port = bp.free_port()
    name = "relay" if target == "relay" else "latchgate"
    out = run_dir / f"callgrind.{port}"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    cmd += bp.target_command(name, base, port, run_dir)
    cwd = args.compare_dir if target == "latchgate-compare" else bp.ROOT
    env = {**os.environ, "PYTHONHASHSEED": args.hash_seed}
    if target == "latchgate-sources":
        env["LATCHGATE_PURE"] = "1"
    body = bp.request_body(args.mode, args.tools)
    with (run_dir / f"{target}.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=cwd, env=env)
    try:
        bp.wait_listening(port, proc, timeout=300)
        drive(port, body, 200)
        drive(port, body, n)
    finally:
        proc.terminate()
        proc.wait(120)
    found = re.search(r"^(?:summary|totals):\s+(\d+)", out.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no totals in {out}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    case = f"{args.mode}/{args.tools}/{args.answer}"
    run_dir = Path(tempfile.mkdtemp(prefix="instructions-"))
    up_port = bp.free_port()
    _, up_cmd = bp.upstream_command("nginx", up_port, run_dir)
    base = f"http://127.0.0.1:{up_port}/{fake.prefix(args.mode, args.answer)}/v1"
    counts: dict[str, float] = {}
    with bp.running(up_cmd, up_port, run_dir / "upstream.log", lambda: None):
        for target in args.targets:
            first = counted(args, target, base, run_dir, args.requests)
            second = counted(args, target, base, run_dir, args.requests + _MORE)
            counts[target] = (second - first) / _MORE
    seed = f"hash seed {args.hash_seed}"
    print(f"# {case}: instructions a request (callgrind, one client, {_MORE} requests, {seed})")
    relay = counts.get("relay")
    for target, count in counts.items():
        ratio = f"  {relay / count:.3f} of the relay's rate" if relay and target != "relay" else ""
        print(f"{target:20s} {count:12,.0f}{ratio}")


if __name__ == "__main__":
    main()
