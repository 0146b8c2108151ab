"""The `latchgate` command without serving: flags, validation errors as one line, settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.cli.main import main
from proxy.settings import ConfigError, Settings, StoreSettings, load_toml

ROOT = Path(__file__).resolve().parents[3]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_every_flag() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for flag in (
        "--upstream",
        "--config",
        "--name",
        "--kind",
        "--api-key-env",
        "--host",
        "--port",
        "--state-file",
        "--state",
        "--workers",
        "--retries",
        "--on-overflow",
        "--idle-timeout",
        "--first-token-timeout",
        "--request-timeout",
        "--shutdown-grace",
        "--log-level",
        "latches show",
        "LATCHGATE_CLIENT_KEYS",
    ):
        assert flag in out.stdout


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "say what to serve"),
        (("--upstream", "ftp://x"), {}, "is not an http(s) URL"),
        (
            ("--upstream", "http://127.0.0.1:1/v1", "--host", "0.0.0.0"),
            {"LATCHGATE_CLIENT_KEYS": ""},
            "client keys are required",
        ),
        (
            ("--upstream", "http://127.0.0.1:1/v1", "--api-key-env", "LG_NOT_SET_VAR"),
            {},
            "LG_NOT_SET_VAR is not set",
        ),
        (("--upstream", "http://127.0.0.1:1/v1", "--retries", "-1"), {}, "must be 0 or more"),
        (("--config", "/nonexistent/latchgate.toml"), {}, "no such file"),
    ],
)
def test_bad_settings_exit_2_with_one_line(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    out = run_cli(*args, env=env)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\nkind = 'tgi'\n",
            "upstreams[0].kind: 'tgi' is not one of auto, openai",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\nidle_timeout = 'soon'\n",
            "upstreams[0].idle_timeout: expected a number",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\ncolour = 1\n",
            "upstreams[0]: unknown key 'colour'",
        ),
        (
            "[server]\nport = 70000\n[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\n",
            "server.port: must be 65535 or less",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\n[[upstreams]]\nname = 'a'\n"
            "base_url = 'http://y/v1'\n",
            "used twice",
        ),
        ("[server]\n", "add at least one [[upstreams]]"),
        ("not toml = = =", "not valid TOML"),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\nresponses = 'proxy'\n",
            "upstreams[0].responses: 'proxy' is not one of auto, translate, passthrough",
        ),
        (
            "[responses]\nstore_max_age = 'forever'\n[[upstreams]]\nname = 'a'\n"
            "base_url = 'http://x/v1'\n",
            "responses.store_max_age: 'forever' is not a duration",
        ),
        (
            "[responses]\nstore_size = 1\n[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\n",
            "responses: unknown key 'store_size'",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\non_overflow = 'truncate'\n",
            "upstreams[0].on_overflow: 'truncate' is not one of refuse, prune, compact",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\nprune_keep_last = -1\n",
            "upstreams[0].prune_keep_last: must be 0 or more",
        ),
        (
            "[[upstreams]]\nname = 'a'\nbase_url = 'http://x/v1'\ncompact_summary_tokens = 8\n",
            "upstreams[0].compact_summary_tokens: must be 64 or more",
        ),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "latchgate.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_toml(path)
    out = run_cli("--config", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_example_config_is_valid() -> None:
    settings = load_toml(ROOT / "latchgate.example.toml")
    assert settings.host == "127.0.0.1" and settings.port == 8787
    assert settings.upstreams[0].name == "local"
    assert settings.upstreams[0].effective_first_token_timeout == 300
    assert settings.shutdown_grace == 10
    # The store's bounds as the example writes them are the defaults.
    assert settings.store == StoreSettings()
    assert (settings.store.max_entries, settings.store.max_age) == (1000, 30 * 86400)
    assert settings.upstreams[0].responses == "auto"
    # context rescue as the example writes it is the default
    up = settings.upstreams[0]
    assert (up.on_overflow, up.prune_keep_last, up.prune_max_chars) == ("refuse", 5, 256)
    assert up.compact_summary_tokens == 1024


def test_serving_sets_the_collector_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from proxy.http import server
    from proxy.settings import Settings

    ran: list[object] = []

    def fake_run(coro: object) -> None:
        ran.append(coro)
        coro.close()  # type: ignore[attr-defined]

    before = gc.get_threshold()
    monkeypatch.setattr(server.asyncio, "run", fake_run)
    monkeypatch.setattr(server, "_loop_factory", lambda: None)
    try:
        server.run(Settings(upstreams=[]))
        assert gc.get_threshold() == server.GC_THRESHOLDS
        assert len(ran) == 1
    finally:
        gc.set_threshold(*before)


# --- issue 13 item 26: no abbreviated flags ---------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [
        (["--upstream", "http://127.0.0.1:1/v1", "--state-f", "redis://u:pw@h/0"], "--state-f"),
        (["--upstream", "http://127.0.0.1:1/v1", "--first-token", "5"], "--first-token"),
        (["--up", "http://127.0.0.1:1/v1"], "--up"),
        (["latches", "--state", "redis://u:pw@h/0", "show"], "--state"),
        (["latches", "--conf", "x.toml", "show"], "--conf"),
        (["latches", "reset", "--up", "default"], "--up"),
        (["latches", "expire", "--older", "7d"], "--older"),
    ],
)
def test_abbreviated_flags_are_refused(
    argv: list[str],
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--state redis://...` once silently meant --state-file and wrote a file named `redis:`."""
    monkeypatch.chdir(tmp_path)
    served: list[object] = []
    monkeypatch.setattr("proxy.cli.main.serve", served.append)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert prefix in capsys.readouterr().err
    assert served == [] and list(tmp_path.iterdir()) == []


# --- issue 13 items 14 and 15: shutdown_grace and --request-timeout ---------------------------

UP = "http://127.0.0.1:1/v1"


def _served(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> Settings:
    """The settings `main(argv)` would serve with (serving itself replaced)."""
    served: list[Settings] = []
    monkeypatch.setattr("proxy.cli.main.serve", served.append)
    assert main(argv) == 0
    [settings] = served
    return settings


def _toml(tmp_path: Path, server: str = "") -> Path:
    path = tmp_path / "latchgate.toml"
    path.write_text(f"[server]\n{server}\n[[upstreams]]\nname = 'a'\nbase_url = '{UP}'\n")
    return path


def test_shutdown_grace_defaults_to_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings(upstreams=[]).shutdown_grace == 10.0
    assert _served(monkeypatch, ["--upstream", UP]).shutdown_grace == 10.0
    assert _served(monkeypatch, ["--config", str(_toml(tmp_path))]).shutdown_grace == 10.0


@pytest.mark.parametrize("value", ["0", "2.5", "30"])
def test_shutdown_grace_flag_in_both_modes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    flag = ["--shutdown-grace", value]
    assert _served(monkeypatch, ["--upstream", UP, *flag]).shutdown_grace == float(value)
    config = _toml(tmp_path, "shutdown_grace = 99")
    assert _served(monkeypatch, ["--config", str(config), *flag]).shutdown_grace == float(value)


def test_shutdown_grace_from_the_config_file(tmp_path: Path) -> None:
    settings = load_toml(_toml(tmp_path, "shutdown_grace = 0"))
    assert settings.shutdown_grace == 0.0 and isinstance(settings.shutdown_grace, float)
    assert load_toml(_toml(tmp_path, "shutdown_grace = 4")).shutdown_grace == 4.0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("'soon'", "server.shutdown_grace: expected a number"),
        ("-1", "server.shutdown_grace: must be 0 or more"),
        ("true", "server.shutdown_grace: expected a number"),
    ],
)
def test_bad_shutdown_grace_in_the_file_names_the_key(
    tmp_path: Path, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_toml(_toml(tmp_path, f"shutdown_grace = {value}"))


@pytest.mark.parametrize("flag", ["--shutdown-grace", "--request-timeout"])
@pytest.mark.parametrize("value", ["-1", "soon"])
def test_bad_seconds_flags_exit_2(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", UP, flag, value])
    assert exc.value.code == 2 and flag in capsys.readouterr().err


def test_request_timeout_flag_sets_the_upstream(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _served(monkeypatch, ["--upstream", UP]).upstreams[0].request_timeout == 600.0
    settings = _served(monkeypatch, ["--upstream", UP, "--request-timeout", "45"])
    assert settings.upstreams[0].request_timeout == 45.0
    settings = _served(monkeypatch, ["--upstream", UP, "--request-timeout", "0"])
    assert settings.upstreams[0].request_timeout == 0.0


def test_request_timeout_flag_goes_with_upstream_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(_toml(tmp_path)), "--request-timeout", "45"]) == 2
    assert "--request-timeout" in capsys.readouterr().err
    out = run_cli("--config", str(_toml(tmp_path)), "--request-timeout", "45")
    assert out.returncode == 2 and "--request-timeout goes with --upstream" in out.stderr


def test_help_says_the_first_token_timeout_covers_whole_answers() -> None:
    text = " ".join(run_cli("--help").stdout.split())
    assert "--request-timeout SECONDS" in text and "--shutdown-grace SECONDS" in text
    assert "first byte of a whole answer" in text
    example = " ".join((ROOT / "latchgate.example.toml").read_text().split())
    assert "shutdown_grace = 10" in example
    assert "first byte of a whole answer" in example


def test_a_config_without_state_file_keeps_latches_beside_it(tmp_path: Path) -> None:
    # The example config says the default is latchgate-state.json, relative to the file.
    config = tmp_path / "lg.toml"
    config.write_text('[[upstreams]]\nname = "a"\nbase_url = "http://127.0.0.1:9/v1"\n')
    assert load_toml(config).state_file == tmp_path / "latchgate-state.json"


def test_on_overflow_flag_sets_the_upstream(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _served(monkeypatch, ["--upstream", UP]).upstreams[0].on_overflow == "refuse"
    settings = _served(monkeypatch, ["--upstream", UP, "--on-overflow", "compact"])
    assert settings.upstreams[0].on_overflow == "compact"
    with pytest.raises(SystemExit) as exc:
        main(["--upstream", UP, "--on-overflow", "squeeze"])
    assert exc.value.code == 2 and "--on-overflow" in capsys.readouterr().err
    assert main(["--config", str(_toml(tmp_path)), "--on-overflow", "prune"]) == 2
    assert "--on-overflow goes with --upstream" in capsys.readouterr().err
