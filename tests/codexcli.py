"""Drive the real OpenAI Codex CLI (npm @openai/codex, pinned by scripts/install-codex.sh).

A test helper, no tests here. `run_codex` runs one non-interactive `codex exec` turn against a
Responses API base URL (latchgate's `/v1`), in a fresh CODEX_HOME whose config.toml names a
custom provider, and returns the exit code, the output streams and the agent's last message.

What Codex 0.169.0 does by itself, and what this helper turns off (checked with strace: with
the overrides below a run resolves no host name and starts no git):
- plugins (`features.plugins`, on by default): at start-up it runs
  `git ls-remote https://github.com/openai/plugins.git` and fetches the curated plugin list from
  api.github.com and chatgpt.com. Off via `-c features.plugins=false`.
- analytics/metrics: an OTLP metrics exporter posting to ab.chatgpt.com. Off via
  `-c analytics.enabled=false` and `-c otel.metrics_exporter="none"` (either alone suffices).
- the update check (`check_for_update_on_startup`): exec never made it here; set false anyway.
- retries: by default a failed stream is retried 5 times and a 5xx answer 4 more times inside
  each of those (30 POSTs, about 25 s, for one 500). The provider here sets
  request_max_retries = 0 and stream_max_retries = 0 so one failure is one request; override
  with extra_args, e.g. `-c model_providers.latchgate.stream_max_retries=3`.
Codex sends no request besides POST {base_url}/responses (no /models, no login call) when the
provider is a custom one with an env_key.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CODEX_VERSION = "0.169.0"  # keep in step with scripts/install-codex.sh
CODEX_BIN = REPO / ".cache" / "codex" / "node_modules" / ".bin" / "codex"
PROVIDER = "latchgate"
ENV_KEY = "LATCHGATE_KEY"

# `-c` overrides win over config.toml, so extra_config cannot switch these back on by accident.
OFFLINE_OVERRIDES: tuple[str, ...] = (
    "features.plugins=false",
    "analytics.enabled=false",
    'otel.metrics_exporter="none"',
    'otel.exporter="none"',
    'otel.trace_exporter="none"',
    "check_for_update_on_startup=false",
)


@dataclass(frozen=True)
class CodexRun:
    """The result of one `codex exec`: last_message is the -o file's text, None if not written."""

    returncode: int
    stdout: str
    stderr: str
    last_message: str | None


def codex_binary() -> Path | None:
    """The repo-local codex launcher installed by scripts/install-codex.sh, or None."""
    return CODEX_BIN if CODEX_BIN.is_file() and os.access(CODEX_BIN, os.X_OK) else None


def require_codex() -> Path:
    """Skip the calling test unless the codex binary is installed; with env
    LATCHGATE_REQUIRE_CODEX=1 (CI) a missing binary fails the test instead."""
    binary = codex_binary()
    if binary is not None:
        return binary
    msg = (
        f"Codex CLI {CODEX_VERSION} not installed at {CODEX_BIN}; "
        "run `bash scripts/install-codex.sh`"
    )
    if os.environ.get("LATCHGATE_REQUIRE_CODEX") == "1":
        pytest.fail(msg + " (LATCHGATE_REQUIRE_CODEX=1)", pytrace=False)
    pytest.skip(msg)


def codex_config(base_url: str, *, model: str, extra_config: str = "") -> str:
    """config.toml text: the model, the latchgate provider (Responses wire API, key from env
    LATCHGATE_KEY), then extra_config verbatim. The provider is an inline table so that
    extra_config may hold both top-level keys and [tables]."""
    provider = {
        "name": PROVIDER,
        "base_url": base_url,
        "env_key": ENV_KEY,
        "wire_api": "responses",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    # JSON strings and integers are valid TOML basic strings and integers.
    fields = ", ".join(f"{k} = {json.dumps(v)}" for k, v in provider.items())
    lines = [
        f"model = {json.dumps(model)}",
        f"model_provider = {json.dumps(PROVIDER)}",
        f"model_providers.{PROVIDER} = {{ {fields} }}",
    ]
    if extra_config:
        lines.append(extra_config)
    return "\n".join(lines) + "\n"


def _env(codex_home: Path, env_key_value: str) -> dict[str, str]:
    # The developer's own OpenAI/Codex settings must not leak into the run.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    env.update(
        CODEX_HOME=str(codex_home),
        NO_COLOR="1",
        RUST_LOG=env.get("RUST_LOG", "error"),
    )
    env[ENV_KEY] = env_key_value
    return env


def run_codex(
    base_url: str,
    prompt: str,
    *,
    model: str,
    workdir: Path,
    env_key_value: str = "x",
    timeout: float = 300,
    extra_config: str = "",
    extra_args: Sequence[str] = (),
    codex_home: Path | None = None,
) -> CodexRun:
    """Run `codex exec PROMPT` in workdir against base_url (latchgate's `/v1` URL).

    Codex runs with approvals and its sandbox off (the model's commands run as this user, in
    workdir) and outside a git repo check. A fresh temporary CODEX_HOME is made and removed
    unless codex_home is given (then it is created if needed and kept, for inspecting the
    session files). subprocess.TimeoutExpired propagates after `timeout` seconds.
    """
    binary = require_codex()
    workdir.mkdir(parents=True, exist_ok=True)
    keep_home = codex_home is not None
    home = codex_home if codex_home is not None else Path(tempfile.mkdtemp(prefix="codex-home-"))
    try:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            codex_config(base_url, model=model, extra_config=extra_config)
        )
        out = home / "last-message.txt"
        out.unlink(missing_ok=True)
        cmd: list[str] = [str(binary), "exec"]
        for override in OFFLINE_OVERRIDES:
            cmd += ["-c", override]
        cmd += [
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--color",
            "never",
            "-C",
            str(workdir),
            "-o",
            str(out),
            *extra_args,
            "--",
            prompt,
        ]
        proc = subprocess.run(
            cmd,
            cwd=workdir,
            env=_env(home, env_key_value),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        last = out.read_text() if out.exists() else None
        return CodexRun(proc.returncode, proc.stdout, proc.stderr, last)
    finally:
        if not keep_home:
            shutil.rmtree(home, ignore_errors=True)
