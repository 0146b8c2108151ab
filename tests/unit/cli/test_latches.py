"""`latchgate latches ...` through `main(argv)`: where its options go, names, and what it prints.

Issue 13 items 17 (options after the subcommand), 18 (`--upstream NAME` without a config) and 19
(`show` in words, `show --json` for machines).
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from proxy.cli.main import main
from proxy.state.latches import ENDPOINT_FLAGS, MODEL_FLAGS, LatchStore, Refusal, endpoint_id
from proxy.state.snapshots import save_file

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


# --- item 19: `show` says what was refused, in words and ISO times; --json for machines ------

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def _rich_state(path: Path) -> LatchStore:
    """Every kind of latch, on a named endpoint and an unnamed (imported) one."""
    store = LatchStore()
    store.learn(EID, "qwen", Refusal("legacy_token_limit"), upstream="default")
    store.learn(EID, "qwen", Refusal("refused_field", fields=("top_k", "min_p")))
    store.learn(EID, "gpt", Refusal("chosen_temperature"))
    store.learn(EID, "gpt", Refusal("reasoning_effort"))
    store.learn(EID, "gpt", Refusal("structured_output"))
    store.learn(EID, "gpt", Refusal("native_tools"))
    store.learn(EID, "o", Refusal("effort_value", refused_effort="minimal", next_effort="low",
                                  supported_efforts=("low", "high")))
    store.learn(EID, "o", Refusal("effort_value", effort_with_tools="none"))
    store.learn(EID, "qwen", Refusal("usage_in_stream"))
    store.learn(EID, "qwen", Refusal("strict_schemas"))
    store.learn("b" * 64, "m", Refusal("refused_field", fields=("seed",)))
    save_file(path, store.to_snapshot())
    return store


def test_show_says_what_was_refused_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    state = tmp_path / "state.json"
    _rich_state(state)
    assert main(["latches", "show", "--state-file", str(state)]) == 0
    out = capsys.readouterr().out
    assert "legacy_token_limit" not in out and "true" not in out and "false" not in out
    lines = out.splitlines()
    expected = [
        rf"^upstream default \(endpoint {EID[:12]}, first met {ISO}\):$",
        rf"^  every model: refuses stream_options \(not sent; streams carry no usage report\) "
        rf"since {ISO}$",
        r"^  every model: cannot build a grammar from some JSON schemas \(tool and response "
        r"schemas sent relaxed, without pattern and format\)",
        rf"^  model qwen: refuses max_tokens \(sent as max_completion_tokens\) since {ISO}$",
        rf"^  model qwen: refuses the fields min_p, top_k \(dropped\) since {ISO}$",
        r"^  model gpt: accepts only its default temperature \(temperature not sent\)",
        r"^  model gpt: refuses reasoning_effort \(not sent\)",
        r"^  model gpt: refuses response_format \(JSON asked for in the system prompt\)",
        r"^  model gpt: refuses native tool calling \(tools described in the prompt\)",
        r"^  model o: refuses reasoning_effort minimal \(the next value up is sent\)",
        r"^  model o: accepts only reasoning_effort low, high",
        r"^  model o: refuses tools together with a reasoning effort \(reasoning_effort none "
        r"sent with tools\)",
        rf"^unnamed endpoint {'b' * 12} \(first met {ISO}\):$",
        r"^  model m: refuses the field seed \(dropped\)",
    ]
    for pattern in expected:
        assert any(re.match(pattern, line) for line in lines), (pattern, out)
    assert lines[0] == f"latches in {state}:"


def test_show_with_nothing_latched_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "empty.json"
    save_file(state, LatchStore().to_snapshot())
    assert main(["latches", "show", "--state-file", str(state)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"no latches in {state}: every request is sent as the client wrote it"
    )


def test_show_json_keeps_the_earlier_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scripts read `latches show` before it printed words; `--json` gives them that output."""
    state = tmp_path / "state.json"
    store = _rich_state(state)
    for argv in (["show", "--json", "--state-file", str(state)],
                 ["--state-file", str(state), "show", "--json"]):
        assert main(["latches", *argv]) == 0
        out = capsys.readouterr().out
        assert orjson.loads(out) == {"state_file": str(state), "endpoints": store.describe()}
        assert out == orjson.dumps(
            {"state_file": str(state), "endpoints": store.describe()}, option=orjson.OPT_INDENT_2
        ).decode() + "\n"


def test_every_latch_kind_has_words() -> None:
    """A latch added later without words would vanish from `latches show`."""
    store = LatchStore()
    for flag in (*ENDPOINT_FLAGS, *MODEL_FLAGS):
        store.learn("e" * 64, f"model-{flag}", Refusal(flag))
    lines = store.describe_in_words()
    for flag in MODEL_FLAGS:
        assert any(line.startswith(f"  model model-{flag}: ") for line in lines), flag
    assert sum(line.startswith("  every model: ") for line in lines) == len(ENDPOINT_FLAGS)


def test_describe_in_words_leaves_describe_alone() -> None:
    store = LatchStore()
    store.learn("e" * 64, "m", Refusal("legacy_token_limit"), upstream="u")
    before = store.describe()
    store.describe_in_words()
    assert store.describe() == before
    assert set(before[0]) == {"endpoint", "upstream", "since", "strict_schemas",
                              "usage_in_stream", "refused", "models"}


def test_latches_commands_round_trip(tmp_path: Path) -> None:
    config = tmp_path / "latchgate.toml"
    config.write_text(
        "[server]\nstate_file = 'state.json'\n[[upstreams]]\nname = 'local'\n"
        "base_url = 'http://127.0.0.1:8080/v1'\n"
    )
    eid = endpoint_id("http://127.0.0.1:8080/v1", None)
    store = LatchStore()
    store.learn(eid, "qwen", Refusal("legacy_token_limit"), upstream="local")
    store.learn(eid, "other", Refusal("chosen_temperature"), upstream="local")
    save_file(tmp_path / "state.json", store.to_snapshot())

    assert main(["latches", "--config", str(config), "show"]) == 0
    exported = tmp_path / "export.json"
    assert main(["latches", "--config", str(config), "export", str(exported)]) == 0
    assert (
        main(
            ["latches", "--config", str(config), "reset", "--upstream", "local", "--model", "qwen"]
        )
        == 0
    )
    left = LatchStore()
    left.merge_snapshot(orjson.loads((tmp_path / "state.json").read_bytes()))
    assert left.view(eid, "qwen")[1].legacy_token_limit is True
    assert left.view(eid, "other")[1].chosen_temperature is False
    assert main(["latches", "--config", str(config), "import", str(exported)]) == 0
    back = LatchStore()
    back.merge_snapshot(orjson.loads((tmp_path / "state.json").read_bytes()))
    assert back.view(eid, "qwen")[1].legacy_token_limit is False
    assert (
        main(
            [
                "latches",
                "--state-file",
                str(tmp_path / "state.json"),
                "expire",
                "--older-than",
                "0s",
            ]
        )
        == 0
    )
    gone = LatchStore()
    gone.merge_snapshot(orjson.loads((tmp_path / "state.json").read_bytes()))
    assert gone.describe() == []
    assert main(["latches", "--config", str(config), "reset", "--upstream", "nope"]) == 2
