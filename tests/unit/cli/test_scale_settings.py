"""Settings of issue 21: upstream pools (`base_urls`, `members`), workers and shared state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.cli.main import main, serve_parser, settings_from_args
from proxy.settings import (
    ConfigError,
    MemberConfig,
    available_cores,
    configured_secrets,
    load_toml,
    member_label,
    redact_url,
)


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "latchgate.toml"
    path.write_text(text)
    return path


def test_base_urls_make_a_pool_named_by_host_and_port(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        "[[upstreams]]\nname = 'local'\n"
        "base_urls = ['http://127.0.0.1:8080/v1', 'http://user:pw@10.0.0.2:8081/v1']\n",
    )
    up = load_toml(path).upstreams[0]
    assert [m.name for m in up.pool] == ["127.0.0.1:8080", "10.0.0.2:8081"]
    # the first member names the endpoint (a server grown into a pool keeps its latches)
    assert up.base_url == "http://127.0.0.1:8080/v1"
    assert up.pool[1].server_root == "http://user:pw@10.0.0.2:8081"
    assert (up.affinity, up.health_interval) == (True, 5.0)


def test_member_tables_take_a_name(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        "[[upstreams]]\nname = 'local'\naffinity = false\nhealth_interval = 2\n"
        "[[upstreams.members]]\nbase_url = 'http://127.0.0.1:8080/v1'\nname = 'gpu0'\n"
        "[[upstreams.members]]\nbase_url = 'http://127.0.0.1:8081/v1'\n",
    )
    up = load_toml(path).upstreams[0]
    assert up.pool == [
        MemberConfig("gpu0", "http://127.0.0.1:8080/v1"),
        MemberConfig("127.0.0.1:8081", "http://127.0.0.1:8081/v1"),
    ]
    assert (up.affinity, up.health_interval) == (False, 2.0)


def test_a_plain_base_url_is_a_pool_of_one(tmp_path: Path) -> None:
    path = _toml(tmp_path, "[[upstreams]]\nname = 'a'\nbase_url = 'http://[::1]:9000/v1'\n")
    up = load_toml(path).upstreams[0]
    assert up.members == [] and [m.name for m in up.pool] == ["[::1]:9000"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("base_url = 'http://a/v1'\nbase_urls = ['http://b/v1']", "give one of base_url"),
        ("base_urls = []", "base_urls: expected a non-empty list"),
        ("base_urls = ['http://a/v1', 'ftp://b']", r"base_urls\[1\]: 'ftp://b' is not"),
        ("base_urls = ['http://a:1/v1', 'http://a:1/v1/']", "member URL 'a:1' is listed twice"),
        (
            "[[upstreams.members]]\nbase_url = 'http://a/v1'\nname = 'x'\n"
            "[[upstreams.members]]\nbase_url = 'http://b/v1'\nname = 'x'",
            "member name 'x' is listed twice",
        ),
        ("[[upstreams.members]]\nurl = 'http://a/v1'", r"members\[0\]: unknown key 'url'"),
        ("base_url = 'http://a/v1'\nhealth_interval = 0", "health_interval: must be 0.5 or more"),
        ("base_url = 'http://a/v1'\naffinity = 'yes'", "affinity: expected true or false"),
    ],
)
def test_pool_errors_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    path = _toml(tmp_path, f"[[upstreams]]\nname = 'local'\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_toml(path)


def test_upstream_given_twice_is_a_pool() -> None:
    args = serve_parser().parse_args(
        ["--upstream", "http://127.0.0.1:8080/v1", "--upstream", "http://127.0.0.1:8081/v1"]
    )
    up = settings_from_args(args).upstreams[0]
    assert [m.base_url for m in up.pool] == [
        "http://127.0.0.1:8080/v1",
        "http://127.0.0.1:8081/v1",
    ]


@pytest.mark.parametrize(
    ("flag", "expected"), [("2", 2), ("auto", available_cores()), ("1", 1)]
)
def test_workers_flag(flag: str, expected: int) -> None:
    args = serve_parser().parse_args(["--upstream", "http://127.0.0.1:1/v1", "--workers", flag])
    assert settings_from_args(args).workers == expected


def test_workers_from_the_config(tmp_path: Path) -> None:
    path = _toml(
        tmp_path, "[server]\nworkers = 'auto'\n[[upstreams]]\nname = 'a'\nbase_url = 'http://a/v1'\n"
    )
    assert load_toml(path).workers == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value", ["0", "-1", "many", "1000"])
def test_bad_workers_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--upstream", "http://127.0.0.1:1/v1", "--workers", value]) == 2
    err = capsys.readouterr().err
    assert '--workers: expected a whole number from 1 to 256, or "auto"' in err


def test_state_url_from_flag_and_file(tmp_path: Path) -> None:
    args = serve_parser().parse_args(
        ["--upstream", "http://127.0.0.1:1/v1", "--state", "redis://127.0.0.1:6379/0"]
    )
    assert settings_from_args(args).state_url == "redis://127.0.0.1:6379/0"
    path = _toml(
        tmp_path,
        "[server]\nstate = 'unix:///run/redis.sock?db=1'\n"
        "[[upstreams]]\nname = 'a'\nbase_url = 'http://a/v1'\n",
    )
    assert load_toml(path).state_url == "unix:///run/redis.sock?db=1"


def test_a_bad_state_url_never_shows_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--upstream", "http://127.0.0.1:1/v1", "--state", "http://u:hunter22@h:1/0"])
    err = capsys.readouterr().err
    assert code == 2 and "is not a Redis URL" in err
    assert "hunter22" not in err and "http://u:***@h:1/0" in err


def test_the_state_password_is_a_secret_masked_everywhere() -> None:
    args = serve_parser().parse_args(
        ["--upstream", "http://127.0.0.1:1/v1", "--state", "redis://:hunter22@127.0.0.1:6379/0"]
    )
    assert "hunter22" in configured_secrets(settings_from_args(args))


def test_member_passwords_are_secrets(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        "[[upstreams]]\nname = 'a'\n"
        "base_urls = ['http://127.0.0.1:1/v1', 'http://u:memberpw1@127.0.0.1:2/v1?key=k3y0000']\n",
    )
    secrets = configured_secrets(load_toml(path))
    assert "memberpw1" in secrets and "k3y0000" in secrets


def test_labels_and_redaction() -> None:
    assert member_label("https://user:pw@example.com/v1") == "example.com"
    assert redact_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
