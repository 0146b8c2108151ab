"""The Dockerfile checked against the repository, since Docker itself cannot run here.

The static tests read the Dockerfile's instructions: every COPY source exists and is not
excluded by .dockerignore, and the image is slim, non-root, healthchecked and configured by
volume. The slow test replays the image's build in a fresh venv: it copies exactly what the
Dockerfile copies, runs the same `pip install`, and runs `latchgate --help`.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def of(kind: str) -> list[str]:
    return [args for word, args in instructions(DOCKERFILE.read_text()) if word == kind]


def copy_sources() -> list[str]:
    """The build-context sources of every COPY (not `COPY --from`, which copies from a stage)."""
    sources: list[str] = []
    for args in of("COPY"):
        parts = json.loads(args) if args.startswith("[") else shlex.split(args)
        if any(p.startswith("--from") for p in parts):
            continue
        sources += [p for p in parts[:-1] if not p.startswith("--")]
    return sources


def dockerignored(path: str) -> bool:
    """Whether .dockerignore excludes `path` (root-relative patterns, `!` re-includes)."""
    ignore = ROOT / ".dockerignore"
    if not ignore.exists():
        return False
    excluded = False
    for raw in ignore.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        target = path.strip("/").removeprefix("./")
        if pattern.startswith("**/"):
            hit = fnmatch.fnmatch(Path(target).name, pattern[3:])
        else:
            hit = fnmatch.fnmatch(target, pattern) or target.startswith(pattern + "/")
        if hit:
            excluded = not negate
    return excluded


def test_dockerfile_parses_into_instructions() -> None:
    words = [w for w, _ in instructions(DOCKERFILE.read_text())]
    assert words[0] == "FROM"
    assert {"COPY", "RUN", "USER", "EXPOSE", "HEALTHCHECK", "CMD", "VOLUME"} <= set(words)


def test_every_copy_source_exists_in_the_repo() -> None:
    sources = copy_sources()
    assert sources, "the Dockerfile copies nothing from the repo"
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert missing == []


def test_no_copy_source_is_dockerignored() -> None:
    assert [s for s in copy_sources() if dockerignored(s)] == []


def test_dockerignore_matcher() -> None:
    assert dockerignored(".git")
    assert dockerignored("tests")
    assert dockerignored("latchgate.toml")
    assert not dockerignored("pyproject.toml")
    assert not dockerignored("proxy")


def test_pyproject_readme_is_copied() -> None:
    # setuptools fails `pip install .` when the readme pyproject names is missing from the context
    match = re.search(r'^readme\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match is not None
    assert match.group(1) in copy_sources()


def test_base_image_is_python_311_slim() -> None:
    assert of("FROM") == ["python:3.11-slim"]


def test_runs_as_a_non_root_user() -> None:
    users = of("USER")
    assert users, "no USER instruction: the container would run as root"
    assert users[-1] not in {"root", "0", "0:0"}
    assert any("useradd" in r and users[-1] in r for r in of("RUN"))


def test_exposes_the_default_port() -> None:
    assert of("EXPOSE") == ["8787"]


def test_healthcheck_hits_healthz_without_curl() -> None:
    (check,) = of("HEALTHCHECK")
    assert "/healthz" in check
    assert "8787" in check
    assert "urllib" in check
    assert "curl" not in check and "wget" not in check


def test_config_and_state_are_volumes_and_cmd_uses_them() -> None:
    (volumes,) = of("VOLUME")
    assert set(json.loads(volumes)) == {"/config", "/data"}
    (cmd,) = of("CMD")
    argv = json.loads(cmd)  # exec form, so signals reach latchgate rather than a shell
    assert argv[:5] == ["latchgate", "--config", "/config/latchgate.toml", "--host", "0.0.0.0"]
    assert argv[argv.index("--state-file") + 1] == "/data/latchgate-state.json"


def pip_install_target() -> str:
    for run in of("RUN"):
        match = re.search(r"pip install (\S+)", run)
        if match:
            return match.group(1).strip("\"'")
    raise AssertionError("no `pip install` in the Dockerfile")


def test_installs_the_package_from_the_build_context() -> None:
    assert pip_install_target() in {".", ".[speed]"}


@pytest.mark.slow
def test_pip_install_in_a_clean_venv_gives_a_working_cli(tmp_path: Path) -> None:
    context = tmp_path / "src"
    context.mkdir()
    for source in copy_sources():
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, context / source,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, context / source)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bindir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    clean_env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         pip_install_target()],
        cwd=context, env=clean_env, check=True, timeout=600,
    )
    result = subprocess.run(
        [str(bindir / "latchgate"), "--help"], cwd=tmp_path, env=clean_env,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout
    assert "--host" in result.stdout
    # Installed from a wheel (not in place), the hot modules run compiled where a C compiler
    # built them (setup.py): the digests and extensions went into the wheel with the sources.
    build = subprocess.run(
        [str(bindir / "python"), "-c",
         "import proxy.compiled as c, proxy.path.stream_relay as s; print(c.build, s.__file__)"],
        cwd=tmp_path, env=clean_env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler):
        assert build[0] == "compiled" and not build[-1].endswith(".py"), build
    else:
        assert build[:3] == ["sources", "(nothing", "compiled)"], build
