"""The llama-server command line for a managed upstream: a pure function of its settings.

The flags are the ones a tool-calling setup needs and most often gets wrong: `--jinja` (the
model's own chat template, which is what parses tool calls), `-c` as the window of one request
times the slots (llama-server splits `-c` across `--parallel` slots), `--metrics` (re-exported on
latchgate's `/metrics`), and a log prefix latchgate reads levels from. The user's `args` come
last, minus the flags latchgate owns (refused when the settings are read).
"""

from __future__ import annotations

from pathlib import Path

from proxy.settings import ManagedConfig

HOST = "127.0.0.1"  # a managed server is reachable only through latchgate


def command(binary: Path, managed: ManagedConfig, alias: str, port: int) -> list[str]:
    """argv to start `binary` serving `managed.model` as `alias` on `port`."""
    ctx = managed.ctx or 0  # 0: llama-server's own default, the model's trained window
    return [
        str(binary),
        "--model", str(managed.model),
        "--alias", alias,
        "--host", HOST,
        "--port", str(port),
        "--ctx-size", str(ctx * managed.parallel),
        "--parallel", str(managed.parallel),
        "--jinja",
        "--metrics",
        "--no-ui",  # nobody browses to a port latchgate chose
        "--log-prefix",
        "--log-colors", "off",
        *managed.args,
    ]  # fmt: skip
