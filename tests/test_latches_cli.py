"""`latchgate latches ...` through `main(argv)`: where its options go, names, and what it prints.

Issue 13 items 17 (options after the subcommand), 18 (`--upstream NAME` without a config) and 19
(`show` in words, `show --json` for machines).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.capabilities import LatchStore, endpoint_id
from proxy.cli import main
from proxy.negotiate import Refusal
from proxy.snapshots import save_file

URL = "http://127.0.0.1:8080/v1"
EID = endpoint_id(URL, None)


def _state(path: Path, upstream: str = "local") -> Path:
    """A state file with a model latch on `qwen` and a temperature latch on `other`."""
    store = LatchStore()
    store.learn(EID, "qwen", Refusal("legacy_token_limit"), upstream=upstream)
    store.learn(EID, "other", Refusal("chosen_temperature"), upstream=upstream)
    save_file(path, store.to_snapshot())
    return path


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "latchgate.toml"
    config.write_text(
        f"[server]\nstate_file = 'state.json'\n[[upstreams]]\nname = 'local'\nbase_url = '{URL}'\n"
    )
    return config


def _read(path: Path) -> LatchStore:
    store = LatchStore()
    store.merge_snapshot(orjson.loads(path.read_bytes()))
    return store


# --- item 17: --config / --state-file on either side of the subcommand ------------------------


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    other = tmp_path / "other.json"
    _state(other)
    return {
        "show": ["show"],
        "reset": ["reset", "--model", "qwen"],
        "expire": ["expire", "--older-than", "0s"],
        "export": ["export", str(tmp_path / "exported.json")],
        "import": ["import", str(other)],
    }


@pytest.mark.parametrize("command", ["show", "reset", "expire", "export", "import"])
@pytest.mark.parametrize("where", ["before", "after"])
def test_state_file_is_taken_on_either_side_of_the_subcommand(
    tmp_path: Path, command: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default state file, if used by mistake, would appear here
    state = _state(tmp_path / "mine.json")
    args = _commands(tmp_path)[command]
    option = ["--state-file", str(state)]
    argv = ["latches", *option, *args] if where == "before" else ["latches", *args, *option]
    assert main(argv) == 0
    assert not (tmp_path / "latchgate-state.json").exists()


@pytest.mark.parametrize("command", ["show", "reset", "expire", "export", "import"])
def test_config_is_taken_after_the_subcommand(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path)
    _state(tmp_path / "state.json")
    assert main(["latches", *_commands(tmp_path)[command], "--config", str(config)]) == 0
    assert not (tmp_path / "latchgate-state.json").exists()


def test_reset_with_options_after_the_subcommand_resets_in_that_file(tmp_path: Path) -> None:
    state = _state(tmp_path / "state.json")
    argv = ["latches", "reset", "--model", "qwen", "--state-file", str(state)]
    assert main(argv) == 0
    store = _read(state)
    assert store.view(EID, "qwen")[1].legacy_token_limit is True
    assert store.view(EID, "other")[1].chosen_temperature is False


def test_two_different_state_files_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _state(tmp_path / "a.json"), _state(tmp_path / "b.json")
    assert main(["latches", "--state-file", str(a), "show", "--state-file", str(b)]) == 2
    assert "--state-file" in capsys.readouterr().err


# --- item 18: --upstream NAME from the names the snapshot records ------------------------------


def test_reset_upstream_named_in_the_snapshot_without_a_config(tmp_path: Path) -> None:
    """`--upstream` mode records its upstream as "default"; that name resets it."""
    state = _state(tmp_path / "state.json", upstream="default")
    store = _read(state)
    elsewhere = endpoint_id("http://10.0.0.2:8000/v1", None)
    store.learn(elsewhere, "qwen", Refusal("legacy_token_limit"), upstream="gpu")
    save_file(state, store.to_snapshot())

    argv = ["latches", "reset", "--upstream", "default", "--state-file", str(state)]
    assert main(argv) == 0
    left = _read(state)
    assert left.view(EID, "qwen")[1].legacy_token_limit is True
    assert left.view(EID, "other")[1].chosen_temperature is True
    assert left.view(elsewhere, "qwen")[1].legacy_token_limit is False


def test_reset_upstream_and_model_from_the_snapshot(tmp_path: Path) -> None:
    state = _state(tmp_path / "state.json", upstream="default")
    argv = ["latches", "reset", "--upstream", "default", "--model", "qwen", "--state-file"]
    assert main([*argv, str(state)]) == 0
    left = _read(state)
    assert left.view(EID, "qwen")[1].legacy_token_limit is True
    assert left.view(EID, "other")[1].chosen_temperature is False


def test_a_name_the_config_gives_wins_over_the_snapshot(tmp_path: Path) -> None:
    """The snapshot's name is a record of the past; the config says what the name is now."""
    config = _config(tmp_path)  # local -> URL
    state = _state(tmp_path / "state.json")
    store = _read(state)
    moved = endpoint_id("http://10.0.0.2:8000/v1", None)  # was called "local" once
    store.learn(moved, "qwen", Refusal("legacy_token_limit"), upstream="local")
    save_file(state, store.to_snapshot())

    assert main(["latches", "reset", "--upstream", "local", "--config", str(config)]) == 0
    left = _read(state)
    assert left.view(EID, "qwen")[1].legacy_token_limit is True
    assert left.view(moved, "qwen")[1].legacy_token_limit is False


def test_a_name_only_the_snapshot_knows_works_with_a_config(tmp_path: Path) -> None:
    config = _config(tmp_path)
    state = tmp_path / "state.json"
    gone = endpoint_id("http://10.0.0.2:8000/v1", None)
    store = LatchStore()
    store.learn(gone, "qwen", Refusal("legacy_token_limit"), upstream="retired")
    save_file(state, store.to_snapshot())
    assert main(["latches", "reset", "--upstream", "retired", "--config", str(config)]) == 0
    assert _read(state).describe() == []


def test_an_unknown_name_is_refused_naming_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _state(tmp_path / "state.json", upstream="default")
    before = state.read_bytes()
    assert main(["latches", "reset", "--upstream", "nope", "--state-file", str(state)]) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and "default" in err
    assert state.read_bytes() == before
