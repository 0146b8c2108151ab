"""Start a real `redis-server` for a test on a free 127.0.0.1 port, and stop or restart it there.

The shared state (`proxy.state.redis`) is tested against Redis itself, never a mock: what matters
is how it behaves when the real server answers, goes away and comes back. Debian's
`redis-server` package provides the binary; CI installs it and sets LATCHGATE_REQUIRE_REDIS=1 so
a missing binary fails there, while on a developer machine the tests skip with the install
command.

The server keeps nothing on disk (`--save '' --appendonly no`), so a restart is a Redis that lost
its data, as a replica sees a restarted cache without persistence.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL = "apt-get install redis-server"
REQUIRE_ENV = "LATCHGATE_REQUIRE_REDIS"
READY_TIMEOUT = 20.0


def redis_binary() -> str:
    """The redis-server binary's path; skips (or fails when CI requires it) if it is missing."""
    found = os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server")
    if found:
        return found
    message = f"the redis-server binary is not installed; install it with: {INSTALL}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    """Whether a server on `port` answers PING (`-NOAUTH` counts: it is up, it wants a
    password); `-LOADING` and no answer do not."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


class RedisServer:
    """One redis-server process on a fixed port, which can be stopped and started again."""

    def __init__(self, binary: str, directory: Path, *args: str) -> None:
        self.binary = binary
        self.directory = directory
        self.args = args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"

    def url(self, password: str | None = None, db: int = 0) -> str:
        auth = f":{password}@" if password is not None else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the server (on the same port as before) and wait until it answers PING."""
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.directory), *self.args]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited early:\n{self.log.read_text()[-3000:]}")
            if _answers_ping(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"redis-server not ready in time:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """Stop the server (its data is gone: nothing is saved) and wait until it has exited."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def running_redis(directory: Path, *args: str) -> Iterator[RedisServer]:
    """A started redis-server (extra `args` such as `--requirepass pw`), stopped on exit."""
    server = RedisServer(redis_binary(), directory, *args)
    server.start()
    try:
        yield server
    finally:
        server.stop()
