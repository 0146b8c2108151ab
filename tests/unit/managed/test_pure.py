"""The pure parts of managed upstreams: log lines, the command line, metrics, GGUF headers."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from proxy.managed import exposition, logline
from proxy.managed.command import command
from proxy.managed.gguf import GgufError, read_info
from proxy.settings import ManagedConfig


def test_log_levels_are_mapped_and_unprefixed_lines_keep_the_last_level() -> None:
    assert logline.parse("0.00.016.762 W srv  llama_server: security: no API key\n") == (
        "warning",
        "srv  llama_server: security: no API key",
    )
    assert logline.parse("0.03.683.878 I srv  llama_server: model loaded") == (
        "debug",
        "srv  llama_server: model loaded",
    )
    assert logline.parse("E llama_model_load: error") == ("error", "llama_model_load: error")
    assert logline.parse("  continued text", "error") == ("error", "continued text")


def test_command_splits_the_window_across_slots_and_keeps_user_args_last() -> None:
    config = ManagedConfig(model=Path("/m/q.gguf"), ctx=4096, parallel=2, args=["-t", "2"])
    argv = command(Path("/bin/llama-server"), config, "q", 9000)
    assert argv[argv.index("--ctx-size") + 1] == "8192"
    assert argv[argv.index("--parallel") + 1] == "2"
    assert argv[argv.index("--port") + 1] == "9000"
    assert "--jinja" in argv and "--metrics" in argv
    assert argv[-2:] == ["-t", "2"]


def test_exposition_labels_samples_and_keeps_one_head_per_family() -> None:
    text = (
        "# HELP llamacpp:prompt_tokens_total Prompt tokens\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        "llamacpp:prompt_tokens_total 30\n"
        "# TYPE latchgate_requests_total counter\n"
        "latchgate_requests_total 5\n"
        'other{upstream="x",a="b"} 1\n'
    )
    merged = exposition.merge([("a", text), ("b", text)])
    lines = merged.splitlines()
    assert lines.count("# TYPE llamacpp:prompt_tokens_total counter") == 1
    assert 'llamacpp:prompt_tokens_total{upstream="a"} 30' in lines
    assert 'llamacpp:prompt_tokens_total{upstream="b"} 30' in lines
    assert not any(line.startswith("latchgate_") for line in lines)
    assert 'other{upstream="a",exported_upstream="x",a="b"} 1' in lines
    assert exposition.merge([]) == ""


def _gguf(path: Path, version: int = 3, ctx_type: int = 4) -> Path:
    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
    kv += s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + s("a") + s("b")
    kv += s("llama.context_length") + struct.pack("<I", ctx_type)
    kv += struct.pack("<I", 8192) if ctx_type == 4 else struct.pack("<f", 8192.0)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, 7, 3) + kv + b"\x00garbage")
    return path


def test_gguf_header_is_read(tmp_path: Path) -> None:
    info = read_info(_gguf(tmp_path / "m.gguf"))
    assert (info.architecture, info.context_length, info.tensor_count) == ("llama", 8192, 7)
    assert read_info(_gguf(tmp_path / "f.gguf", ctx_type=6)).context_length is None


@pytest.mark.parametrize("cut", [2, 10, 30, 60])
def test_gguf_errors_name_the_file(tmp_path: Path, cut: int) -> None:
    whole = _gguf(tmp_path / "m.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[:cut])
    with pytest.raises(GgufError, match=r"cut\.gguf"):
        read_info(tmp_path / "cut.gguf")


def test_gguf_refuses_other_files(tmp_path: Path) -> None:
    (tmp_path / "z.gguf").write_bytes(b"PK\x03\x04rest")
    with pytest.raises(GgufError, match="not a GGUF model"):
        read_info(tmp_path / "z.gguf")
    with pytest.raises(GgufError, match="no such model file"):
        read_info(tmp_path / "none.gguf")
    with pytest.raises(GgufError, match="version 1"):
        read_info(_gguf(tmp_path / "v1.gguf", version=1))
