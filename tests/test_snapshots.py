"""Snapshots: round trip through the store and the disk, merge-only import, bad files."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from proxy.capabilities import SNAPSHOT_VERSION, LatchStore, ModelLatches
from proxy.negotiate import Refusal
from proxy.snapshots import load_file, save_file

EID = "a" * 64


def _store() -> LatchStore:
    store = LatchStore()
    store.learn(EID, "m", Refusal("refused_field", fields=("top_k",)), upstream="llama")
    store.learn(EID, "m", Refusal("effort_value", refused_effort="none", next_effort="low",
                                  supported_efforts=("low", "high")))
    store.learn(EID, "m", Refusal("effort_value", effort_with_tools="none"))
    store.learn(EID, "m", Refusal("legacy_token_limit"))
    store.learn(EID, "m2", Refusal("native_tools"))
    store.learn(EID, "m2", Refusal("usage_in_stream"))
    return store


def test_round_trip_through_disk(tmp_path: Path) -> None:
    store = _store()
    path = tmp_path / "sub" / "latches.json"
    save_file(path, store.to_snapshot())
    data, warnings = load_file(path)
    assert warnings == []
    fresh = LatchStore()
    assert fresh.merge_snapshot(data) == []
    assert fresh.describe() == store.describe()
    assert fresh.generation == 1
    assert [p.name for p in path.parent.iterdir()] == ["latches.json"]  # no temp file left


def test_snapshot_shape() -> None:
    snap = _store().to_snapshot()
    assert snap["version"] == SNAPSHOT_VERSION
    assert isinstance(snap["saved_at"], float)
    entry = snap["endpoints"][EID]
    assert entry["since"] > 0 and entry["usage_in_stream"] is False
    assert entry["models"]["m"]["refused_fields"] == ["top_k"]
    assert entry["models"]["m"]["supported_efforts"] == ["low", "high"]
    orjson.dumps(snap)  # JSON-able


def test_merge_only_latches_off() -> None:
    store = LatchStore()
    store.learn(EID, "m", Refusal("native_tools"))
    snap = {"version": SNAPSHOT_VERSION, "saved_at": 1.0, "endpoints": {EID: {
        "since": 10.0, "strict_schemas": True, "usage_in_stream": False,
        "models": {"m": {"native_tools": True, "chosen_temperature": False,
                         "refused_fields": ["seed", 5], "since": 10.0}}}}}
    assert store.merge_snapshot(snap) == []
    endpoint, model = store.view(EID, "m")
    assert model.native_tools is False  # True in the snapshot never re-enables
    assert model.chosen_temperature is False
    assert model.refused_fields == {"seed"}
    assert endpoint.usage_in_stream is False and endpoint.strict_schemas is True
    assert endpoint.since == 10.0 and model.since == 10.0  # earliest wins


def test_merge_same_snapshot_twice_changes_nothing() -> None:
    store = _store()
    snap = store.to_snapshot()
    generation = store.generation
    assert store.merge_snapshot(snap) == []
    assert store.generation == generation


def test_merge_permissive_entries_create_nothing() -> None:
    store = LatchStore()
    snap = {"version": SNAPSHOT_VERSION, "endpoints": {EID: {"models": {"m": {}}}}}
    assert store.merge_snapshot(snap) == []
    assert store.describe() == []
    assert store.view(EID, "m")[1] == ModelLatches()


def test_merge_other_version_ignored_with_warning() -> None:
    store = LatchStore()
    snap = _store().to_snapshot() | {"version": 99}
    warnings = store.merge_snapshot(snap)
    assert warnings == ["latch snapshot ignored: version 99 is not 1; the proxy starts with the "
                        "latches it has and will relearn the rest"]
    assert store.describe() == []


@pytest.mark.parametrize(
    ("data", "warning"),
    [
        ([], "latch snapshot ignored: it is not a JSON object"),
        ({"version": SNAPSHOT_VERSION, "endpoints": []},
         "latch snapshot ignored: 'endpoints' is not an object"),
        ({"version": SNAPSHOT_VERSION, "endpoints": {"x": 3}},
         "latch snapshot: endpoint x skipped, not an object"),
        ({"version": SNAPSHOT_VERSION, "endpoints": {"x": {"models": {"m": 1}}}},
         "latch snapshot: model m of x skipped, not an object"),
    ],
)
def test_merge_malformed(data: object, warning: str) -> None:
    assert LatchStore().merge_snapshot(data) == [warning]


def test_load_missing_file(tmp_path: Path) -> None:
    assert load_file(tmp_path / "nope.json") == (None, [])


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b""])
def test_load_corrupt_file_is_kept_aside(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "latches.json"
    path.write_bytes(content)
    data, warnings = load_file(path)
    assert data is None
    assert not path.exists()
    [aside] = list(tmp_path.iterdir())
    assert aside.name.startswith("latches.json.corrupt-")
    assert aside.read_bytes() == content
    assert len(warnings) == 1 and aside.name in warnings[0] and "start empty" in warnings[0]


def test_two_corrupt_loads_keep_both_copies(tmp_path: Path) -> None:
    path = tmp_path / "latches.json"
    for content in (b"{", b"}"):
        path.write_bytes(content)
        load_file(path)
    assert sorted(p.read_bytes() for p in tmp_path.iterdir()) == [b"{", b"}"]


def test_save_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "latches.json"
    save_file(path, {"version": 1, "a": 1})
    save_file(path, {"version": 1, "a": 2})
    assert orjson.loads(path.read_bytes()) == {"version": 1, "a": 2}
    assert os.listdir(tmp_path) == ["latches.json"]


def test_save_failure_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "latches.json"
    save_file(path, {"a": 1})
    with pytest.raises(TypeError):
        save_file(path, {"a": object()})
    assert orjson.loads(path.read_bytes()) == {"a": 1}
    assert os.listdir(tmp_path) == ["latches.json"]
