"""Reading GGUF headers: the facts latchgate uses, read fast, and one clear line for bad files."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

from proxy.managed.gguf import MAX_STRING, GgufError, GgufInfo, read_info

REAL_MODEL = (
    Path(__file__).resolve().parents[3] / ".cache/models/qwen2.5-coder-0.5b-instruct-q8_0.gguf"
)

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = range(10)
UINT64, INT64, FLOAT64 = 10, 11, 12
FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}  # fmt: skip

# (key, value type, value); for ARRAY the value is (item type, [items])
Entry = tuple[str, int, object]


def s(text: str) -> bytes:
    """A GGUF string: uint64 length, then the UTF-8 bytes."""
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def value(kind: int, val: object) -> bytes:
    if kind == STRING:
        assert isinstance(val, str)
        return s(val)
    if kind == ARRAY:
        assert isinstance(val, tuple)
        item, items = val
        return struct.pack("<IQ", item, len(items)) + b"".join(value(item, v) for v in items)
    return struct.pack(FORMATS[kind], val)


def gguf(entries: list[Entry], version: int = 3, tensors: int = 2, tail: bytes = b"") -> bytes:
    """A GGUF header with `entries`, followed by `tail` where tensor infos and data would be."""
    body = b"".join(
        s(key) + struct.pack("<I", kind) + value(kind, val) for key, kind, val in entries
    )
    return b"GGUF" + struct.pack("<IQQ", version, tensors, len(entries)) + body + tail


def with_count(data: bytes, count: int) -> bytes:
    """`data` with its header's key/value count replaced by `count`."""
    return data[:16] + struct.pack("<Q", count) + data[24:]


def every_scalar() -> list[Entry]:
    return [
        ("x.u8", UINT8, 255), ("x.i8", INT8, -1), ("x.u16", UINT16, 65535),
        ("x.i16", INT16, -2), ("x.u32", UINT32, 7), ("x.i32", INT32, -3),
        ("x.f32", FLOAT32, 1.5), ("x.bool", BOOL, True), ("x.u64", UINT64, 2**63),
        ("x.i64", INT64, -(2**40)), ("x.f64", FLOAT64, 2.25), ("x.str", STRING, "é"),
    ]  # fmt: skip


def model(ctx_kind: int = UINT32, ctx: object = 8192) -> list[Entry]:
    """A llama-like header: vocabulary arrays before the window, as a converter may write them."""
    return [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "Tiny Llama"),
        *every_scalar(),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "hé", ""])),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, [1, 3, 1, 1])),
        ("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0, -1.0, 2.0, 3.0])),
        ("x.nested", ARRAY, (ARRAY, [(UINT8, [1, 2]), (STRING, ["a"])])),
        ("x.empty", ARRAY, (UINT64, [])),
        ("llama.context_length", ctx_kind, ctx),
        ("llama.embedding_length", UINT32, 4096),
    ]


def write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def one_line_naming(path: Path, *parts: str) -> str:
    """The GgufError reading `path` raises: one line naming the path and each of `parts`."""
    with pytest.raises(GgufError) as caught:
        read_info(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message, message
    for part in parts:
        assert part in message, message
    return message


def test_fields_are_found(tmp_path: Path) -> None:
    info = read_info(write(tmp_path, gguf(model(), tensors=291)))
    assert info == GgufInfo(
        version=3, tensor_count=291, architecture="llama", name="Tiny Llama", context_length=8192
    )


@pytest.mark.parametrize("kind", [UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64])
def test_context_length_of_any_integer_type(tmp_path: Path, kind: int) -> None:
    assert read_info(write(tmp_path, gguf(model(kind, 100)))).context_length == 100


@pytest.mark.parametrize(
    ("kind", "ctx"),
    [
        (FLOAT32, 8192.0),
        (FLOAT64, 8192.0),
        (BOOL, True),
        (STRING, "8192"),
        (INT32, -1),
        (ARRAY, (UINT32, [8192])),
    ],
)
def test_context_length_not_a_non_negative_integer_is_ignored(
    tmp_path: Path, kind: int, ctx: object
) -> None:
    info = read_info(write(tmp_path, gguf(model(kind, ctx))))
    assert info.context_length is None
    assert (info.architecture, info.name) == ("llama", "Tiny Llama")


def test_reading_stops_once_architecture_and_window_are_known(tmp_path: Path) -> None:
    unknown = s("after") + struct.pack("<I", 99) + b"\xff" * 64  # 99: not a value type
    whole = with_count(gguf(model(), tail=unknown), len(model()) + 1)
    cut = whole.index(s("llama.embedding_length"))
    for data in (whole, whole[:cut], whole[:cut] + os.urandom(3)):
        assert read_info(write(tmp_path, data)).context_length == 8192
    # the key count may claim many more entries than are there: they are never reached
    assert read_info(write(tmp_path, with_count(whole[:cut], 10_000))).context_length == 8192


def test_tensor_data_is_not_read(tmp_path: Path) -> None:
    entries = [("general.architecture", STRING, "qwen2"), ("qwen2.context_length", UINT32, 32)]
    path = write(tmp_path, gguf(entries, tail=b"\x00garbage, not tensor infos"))
    assert read_info(path).context_length == 32
    with path.open("ab") as fh:  # a sparse 8 GiB of "tensor data"
        fh.truncate(8 * 2**30)
    assert read_info(path) == GgufInfo(3, 2, "qwen2", None, 32)


def test_a_header_without_the_window_is_read_to_its_end(tmp_path: Path) -> None:
    entries = [("general.architecture", STRING, "bert"), ("bert.block_count", UINT32, 12)]
    info = read_info(write(tmp_path, gguf(entries, tail=b"garbage")))
    assert (info.architecture, info.name, info.context_length) == ("bert", None, None)
    info = read_info(write(tmp_path, gguf([], tensors=0)))
    assert info == GgufInfo(3, 0, None, None, None)


def test_keys_order_does_not_matter(tmp_path: Path) -> None:
    entries = [
        ("phi3.context_length", UINT64, 131072),
        ("llama.context_length", UINT32, 4096),  # another architecture's: not this model's
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a"] * 1000)),
        ("general.architecture", STRING, "phi3"),
        ("general.name", STRING, "Phi"),  # after both are known: not reached
    ]
    assert read_info(write(tmp_path, gguf(entries))) == GgufInfo(3, 2, "phi3", None, 131072)


def test_a_large_vocabulary_is_skipped_cheaply(tmp_path: Path) -> None:
    tokens = [f"tok{i}" for i in range(150_000)]
    entries = [
        ("general.architecture", STRING, "qwen2"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, [1] * 150_000)),
        ("qwen2.context_length", UINT32, 32768),
    ]
    path = write(tmp_path, gguf(entries))
    started = time.perf_counter()
    assert read_info(path).context_length == 32768
    assert time.perf_counter() - started < 2.0  # ~0.1 s: lengths are read, the text is seeked


@pytest.mark.parametrize("version", [2, 3])
def test_versions_2_and_3_are_read(tmp_path: Path, version: int) -> None:
    assert read_info(write(tmp_path, gguf(model(), version=version))).version == version


@pytest.mark.parametrize("version", [0, 1, 4, 2**31])
def test_other_versions_are_refused(tmp_path: Path, version: int) -> None:
    path = write(tmp_path, gguf(model(), version=version), "old.gguf")
    one_line_naming(path, f"GGUF version {version} is not supported", "convert the model again")


@pytest.mark.parametrize(
    "start",
    [
        b"PK\x03\x04rest of a zip",
        b"<html>not found</html>",
        b"ggufGGUF",
        b"\x00",
        b"GGUX" + b"\0" * 40,
    ],
)
def test_wrong_magic_says_what_it_starts_with(tmp_path: Path, start: bytes) -> None:
    message = one_line_naming(write(tmp_path, start), "is not a GGUF model", "convert_hf_to_gguf")
    assert f"it starts with {start[:4]!r}" in message


def test_empty_file(tmp_path: Path) -> None:
    one_line_naming(write(tmp_path, b""), "is empty", ".gguf file")


def test_truncated_header_at_every_point(tmp_path: Path) -> None:
    whole = gguf(model())
    end = whole.index(s("llama.embedding_length"))  # from here on the window is known
    for cut in range(1, end):
        one_line_naming(write(tmp_path, whole[:cut], "cut.gguf"), "truncated")


def test_truncated_inside_a_skipped_array(tmp_path: Path) -> None:
    whole = gguf([("general.architecture", STRING, "llama"), ("x", ARRAY, (UINT64, [1] * 100))])
    one_line_naming(write(tmp_path, whole[:-8], "cut.gguf"), "truncated")


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.gguf").mkdir()
    one_line_naming(tmp_path / "dir.gguf", "is a directory")


def test_missing_file(tmp_path: Path) -> None:
    one_line_naming(tmp_path / "none.gguf", "no such model file")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, gguf(model()))
    path.chmod(0)
    if os.geteuid() == 0:  # root reads any file: have the open fail as it would for a user

        def refuse(self: Path, *args: object, **kwargs: object) -> None:
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(Path, "open", refuse)
    one_line_naming(path, "permission denied")


@pytest.mark.parametrize("where", ["value", "array item"])
def test_unknown_type_is_refused(tmp_path: Path, where: str) -> None:
    entry = struct.pack("<I", 13) if where == "value" else struct.pack("<IIQ", ARRAY, 13, 1)
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 2)
    data += s("general.name") + struct.pack("<I", STRING) + s("x")
    data += s("odd.key") + entry + b"\0" * 16
    one_line_naming(write(tmp_path, data), "unknown value type 13", "odd.key", "corrupt")


@pytest.mark.parametrize("length", [MAX_STRING + 1, 2**63])
def test_huge_string_length_is_refused(tmp_path: Path, length: int) -> None:
    key = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, length) + b"abc"
    one_line_naming(write(tmp_path, key), f"a string of {length} bytes", "corrupt")
    name = gguf([("general.name", STRING, "x" * 10)])
    name = name.replace(struct.pack("<Q", 10) + b"x" * 10, struct.pack("<Q", length))
    one_line_naming(write(tmp_path, name), f"a string of {length} bytes", "corrupt")
    skipped = gguf([("x.tokens", ARRAY, (STRING, ["y" * 10]))])
    skipped = skipped.replace(struct.pack("<Q", 10) + b"y" * 10, struct.pack("<Q", length))
    one_line_naming(write(tmp_path, skipped), f"a string of {length} bytes", "corrupt")


def test_a_string_of_the_largest_length_is_read(tmp_path: Path) -> None:
    entries = [("tokenizer.chat_template", STRING, "x" * MAX_STRING), *model()]
    assert read_info(write(tmp_path, gguf(entries))).context_length == 8192


def test_huge_counts_are_refused(tmp_path: Path) -> None:
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 2**32 + 1)
    one_line_naming(write(tmp_path, header), f"claims {2**32 + 1} keys", "corrupt")
    header = b"GGUF" + struct.pack("<IQQ", 3, 2**40, 0)
    one_line_naming(write(tmp_path, header), f"claims {2**40} tensors", "corrupt")
    array = gguf([("x.tokens", ARRAY, (STRING, []))])
    array = array.replace(struct.pack("<IQ", STRING, 0), struct.pack("<IQ", STRING, 2**33))
    one_line_naming(write(tmp_path, array), "x.tokens", "corrupt")


@pytest.mark.skipif(not REAL_MODEL.is_file(), reason=f"no {REAL_MODEL.name} in .cache/models")
def test_the_real_model() -> None:
    started = time.perf_counter()
    info = read_info(REAL_MODEL)
    assert time.perf_counter() - started < 1.0
    assert (info.version, info.architecture, info.context_length) == (3, "qwen2", 32768)
    assert info.tensor_count > 0 and info.name
