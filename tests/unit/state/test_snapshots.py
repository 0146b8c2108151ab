"""Snapshots: round trip through the store and the disk, merge-only import, bad files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from proxy.state.latches import SNAPSHOT_VERSION, LatchStore, ModelLatches, Refusal
from proxy.state.snapshots import load_file, save_file

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


# --- issue 13 item 11: only regular files are read; leftovers of a kill -9 are cleaned -------


class _Unblocker:
    """Opens the write end of a FIFO if a reader is still stuck in open() after a while.

    The code under test must not open a FIFO in a way that blocks; if it does, this lets the
    test end (and say so) instead of hanging the suite. It reports whether it had to act,
    which is the assertion: no timing is measured.
    """

    def __init__(self, fifo: Path, after: float = 5.0) -> None:
        self.fifo, self.fired = fifo, False
        self.timer = threading.Timer(after, self._release)

    def _release(self) -> None:
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)  # fails while nobody reads
        except OSError:
            return
        self.fired = True
        os.close(fd)

    def __enter__(self) -> _Unblocker:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()


def test_a_fifo_is_not_read_and_not_moved(tmp_path: Path) -> None:
    fifo = tmp_path / "latches.json"
    os.mkfifo(fifo)
    with _Unblocker(fifo) as unblocker:
        data, warnings = load_file(fifo)
    assert not unblocker.fired, "load_file blocked opening a FIFO"
    assert data is None
    assert len(warnings) == 1 and "not a regular file" in warnings[0] and "FIFO" in warnings[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # left where it is: it may be /dev/something
    assert os.listdir(tmp_path) == ["latches.json"]


def test_a_directory_is_reported_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "latches.json"
    folder.mkdir()
    data, warnings = load_file(folder)
    assert data is None and len(warnings) == 1 and "not a regular file" in warnings[0]
    assert folder.is_dir()


def test_save_does_not_replace_a_fifo(tmp_path: Path) -> None:
    """Replacing it would swap /dev/null (say) for a regular file; the save fails instead."""
    fifo = tmp_path / "latches.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        save_file(fifo, {"version": 1})
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["latches.json"]


def test_leftover_temp_files_of_this_state_file_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "latches.json"
    save_file(path, _store().to_snapshot())
    leftovers = [".latches.json.k2j4_9xq.tmp", ".latches.json.abcdefgh.tmp"]
    others = [
        ".latches.json.old.abcdefgh.tmp",  # belongs to a state file named latches.json.old
        ".other.json.abcdefgh.tmp",  # another state file's
        "latches.json.abcdefgh.tmp",  # not a name save_file writes
        ".latches.json.abcdefgh.tmp.keep",
        "latches.json.corrupt-1700000000",
    ]
    for name in leftovers + others:
        (tmp_path / name).write_bytes(b'{"half": ')
    data, warnings = load_file(path)
    assert data is not None and data["version"] == SNAPSHOT_VERSION
    assert sorted(os.listdir(tmp_path)) == sorted(["latches.json", *others])
    assert len(warnings) == 1 and "2 leftover temporary files" in warnings[0]
    assert all(name in warnings[0] for name in leftovers)


def test_leftovers_are_removed_when_the_state_file_itself_is_missing(tmp_path: Path) -> None:
    """A kill -9 during the very first save leaves a temp file and no snapshot."""
    (tmp_path / ".latches.json.abcdefgh.tmp").write_bytes(b"{")
    data, warnings = load_file(tmp_path / "latches.json")
    assert data is None and os.listdir(tmp_path) == []
    assert len(warnings) == 1 and "1 leftover temporary file " in warnings[0]


def test_a_temp_file_being_written_is_not_removed(tmp_path: Path) -> None:
    """A save in progress (another process's) holds a lock on its temp file; it is kept."""
    busy = tmp_path / ".latches.json.abcdefgh.tmp"
    busy.write_bytes(b"{")
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(busy)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert load_file(tmp_path / "latches.json") == (None, [])
        assert busy.exists()
    finally:
        holder.communicate("", timeout=10)
    assert load_file(tmp_path / "latches.json")[0] is None
    assert not busy.exists()  # its writer is gone, so now it is a leftover


def test_save_locks_its_temp_file_while_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is what tells a cleaning start-up that the temp file is not abandoned."""
    import fcntl

    seen: list[bool] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        name = next((n for n in os.listdir(tmp_path) if n.endswith(".tmp")), None)
        if name is not None:
            probe = os.open(tmp_path / name, os.O_RDONLY)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append(False)
            except BlockingIOError:
                seen.append(True)
            finally:
                os.close(probe)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    save_file(tmp_path / "latches.json", {"version": 1})
    assert seen and all(seen)
