"""Drive the real Claude Code CLI (npm @anthropic-ai/claude-code, pinned by
scripts/install-claude.sh).

A test helper, no tests here. `run_claude` runs one non-interactive `claude -p` turn against an
Anthropic Messages API base URL (latchgate's front; the CLI appends `/v1/messages?beta=true`
itself, so pass the URL *without* `/v1`), with a fresh HOME and CLAUDE_CONFIG_DIR, and returns
the exit code and the output streams.

What Claude Code 2.1.332 does by itself, and what this helper turns off (checked with strace in
a network namespace with only loopback: with the settings below a run makes one TCP connection,
to the base URL, and resolves no host name):
- telemetry: without the variables below it posts its event log ("1P event logging") to
  api.anthropic.com, fetches an MCP server registry from api.anthropic.com, loads GrowthBook
  feature flags, and probes the base URL with `HEAD /api/hello`. All of that goes with
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1; DISABLE_TELEMETRY, DISABLE_ERROR_REPORTING,
  DISABLE_AUTOUPDATER, DO_NOT_TRACK and the feedback switches are set as well, belt and braces.
- retries: by default a 5xx/529 answer is retried 10 times with exponential back-off (0.5 s
  doubling to about 35 s: 11 POSTs over about 3 minutes for one 529). CLAUDE_CODE_MAX_RETRIES=0
  here makes one failure one request; override with extra_env.
- non-streaming fallback: when a stream breaks (an `event: error`, or the body ends before
  message_delta/message_stop) it silently repeats the request with `"stream": false` and prints
  that answer. CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1 here, so a broken stream fails the
  run ("API Error: <message>" or "API Error: Connection to the API was lost (StreamTruncated)
  ..." on stdout, exit 1) instead of being papered over; set it to "" in extra_env to get the
  fallback back.
- permissions: in -p mode a tool that needs a permission (Write, Edit, Bash) is refused with
  an is_error tool_result ("Claude requested permissions to write to ..., but you haven't
  granted it yet."); only read-only tools such as Read run. This helper passes
  `--permission-mode bypassPermissions`, which the CLI refuses as root ("cannot be used with
  root/sudo privileges") unless IS_SANDBOX=1, so that is set too.
- the model: ANTHROPIC_MODEL and every ANTHROPIC_DEFAULT_*_MODEL (the small/fast "haiku" model
  included; ANTHROPIC_SMALL_FAST_MODEL is the older name, still read) are set to `model`, so no
  request names a real Claude model. A model name the CLI does not know makes it print a notice
  on stderr ("Claude Code doesn't recognize the model ..., so it assumes a context window of 1m
  tokens") and carry on.
With these settings one `claude -p` turn is one POST /v1/messages?beta=true per model call (no
title request, no count_tokens, no HEAD probe), plus one per tool round trip; a turn takes
about 0.7 to 1 s against a local fake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLAUDE_VERSION = "2.1.332"  # keep in step with scripts/install-claude.sh
CLAUDE_BIN = REPO / ".cache" / "claude" / "node_modules" / ".bin" / "claude"

# Everything that would reach past the base URL, and the retry/fallback behaviour described
# above. extra_env is applied after these, so a test can switch one back on deliberately.
OFFLINE_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_FEEDBACK_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "DO_NOT_TRACK": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1",
    "IS_SANDBOX": "1",
}

MODEL_VARS: tuple[str, ...] = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)

# The developer's own Claude/Anthropic settings (or a surrounding Claude Code session's) must
# not leak into the run.
_STRIPPED_PREFIXES: tuple[str, ...] = ("ANTHROPIC_", "CLAUDE_", "CLAUDECODE", "DISABLE_")


@dataclass(frozen=True)
class ClaudeRun:
    """The result of one `claude -p`: stdout is the reply (or the "API Error: ..." text)."""

    returncode: int
    stdout: str
    stderr: str


def claude_binary() -> Path | None:
    """The repo-local claude binary installed by scripts/install-claude.sh, or None."""
    return CLAUDE_BIN if CLAUDE_BIN.is_file() and os.access(CLAUDE_BIN, os.X_OK) else None


def require_claude() -> Path:
    """Skip the calling test unless the claude binary is installed; with env
    LATCHGATE_REQUIRE_CLAUDE=1 (CI) a missing binary fails the test instead."""
    binary = claude_binary()
    if binary is not None:
        return binary
    msg = (
        f"Claude Code {CLAUDE_VERSION} not installed at {CLAUDE_BIN}; "
        "run `bash scripts/install-claude.sh`"
    )
    if os.environ.get("LATCHGATE_REQUIRE_CLAUDE") == "1":
        pytest.fail(msg + " (LATCHGATE_REQUIRE_CLAUDE=1)", pytrace=False)
    pytest.skip(msg)


def claude_env(
    base_url: str,
    *,
    model: str,
    home: Path,
    api_key: str = "x",
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for one run: the caller's, less any Anthropic/Claude settings, plus the
    base URL, the key (sent as `x-api-key`; put ANTHROPIC_AUTH_TOKEN in extra_env for an
    `Authorization: Bearer` header instead), the model for every role, a private HOME and
    CLAUDE_CONFIG_DIR, and OFFLINE_ENV; extra_env last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=api_key,
        NO_COLOR="1",
        TERM="dumb",
    )
    for var in MODEL_VARS:
        env[var] = model
    env.update(OFFLINE_ENV)
    if extra_env:
        env.update(extra_env)
    return env


def run_claude(
    base_url: str,
    prompt: str,
    *,
    model: str,
    workdir: Path,
    api_key: str = "x",
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
    output_format: str = "text",
    claude_home: Path | None = None,
) -> ClaudeRun:
    """Run `claude -p PROMPT` in workdir against base_url (without `/v1`).

    Tools run without prompts (`--permission-mode bypassPermissions`; the model's commands run
    as this user, in workdir) and no session is saved. output_format is "text" (the reply),
    "json" (one result object) or "stream-json" (needs `--verbose` in extra_args). A fresh
    temporary HOME is made and removed unless claude_home is given (then it is created if
    needed and kept). subprocess.TimeoutExpired propagates after `timeout` seconds.
    """
    binary = require_claude()
    workdir.mkdir(parents=True, exist_ok=True)
    keep_home = claude_home is not None
    home = claude_home if claude_home is not None else Path(tempfile.mkdtemp(prefix="claude-home-"))
    try:
        home.mkdir(parents=True, exist_ok=True)
        cmd: list[str] = [
            str(binary),
            "-p",
            "--output-format",
            output_format,
            "--permission-mode",
            "bypassPermissions",
            "--no-session-persistence",
            "--model",
            model,
            *(extra_args or []),
            "--",
            prompt,
        ]
        proc = subprocess.run(
            cmd,
            cwd=workdir,
            env=claude_env(base_url, model=model, home=home, api_key=api_key, extra_env=extra_env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return ClaudeRun(proc.returncode, proc.stdout, proc.stderr)
    finally:
        if not keep_home:
            shutil.rmtree(home, ignore_errors=True)
