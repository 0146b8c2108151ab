"""`latchgate --model` with bad input: one clear line and exit status 2, before anything runs."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from proxy.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _binary(tmp_path: Path) -> str:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nexit 1\n")
    binary.chmod(0o755)
    return str(binary)


def test_missing_binary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "--model", str(tmp_path / "m.gguf"), "--llama-server",
                     str(tmp_path / "nothing"))  # fmt: skip
    assert code == 2
    assert "does not exist" in err and "--llama-server" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_and_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = _binary(tmp_path)
    code, err = _run(capsys, "--model", str(tmp_path / "m.gguf"), "--llama-server", binary)
    assert code == 2 and "no such model file" in err
    (tmp_path / "bad.gguf").write_bytes(b"<html>not found</html>")
    code, err = _run(capsys, "--model", str(tmp_path / "bad.gguf"), "--llama-server", binary)
    assert code == 2 and "not a GGUF model" in err


def test_model_flags_need_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "--upstream", "http://127.0.0.1:9/v1", "--ctx", "4096")
    assert code == 2 and "--ctx goes with --model" in err


def test_reserved_llama_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "--model", str(tmp_path / "m.gguf"), "--", "--port", "1")
    assert code == 2 and "--port is set by latchgate" in err


def test_port_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + bytes(16))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config.write_text(
            f'[[upstreams]]\nname = "m"\n[upstreams.managed]\nmodel = "m.gguf"\nport = {port}\n'
            f'llama_server = "{_binary(tmp_path)}"\n'
        )
        code, err = _run(capsys, "--config", str(config))
    assert code == 2 and "is in use" in err
