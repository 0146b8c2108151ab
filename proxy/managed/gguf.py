"""Reading a GGUF model's header: refuse what is not a model, learn its architecture and window.

Before latchgate starts llama-server on a user's file it reads the header's key/values, so a
wrong, truncated or corrupt file is one clear line at start-up (not a llama-server log seconds
later), and a model whose window was not given gets one from its own `<arch>.context_length`.
It must be fast on a multi-GB file: the tensor data is never read, arrays (a tokenizer's 150k
tokens) are seeked past, and reading stops once the architecture and its context length are
both known. Standard library only.

Format (little-endian): b"GGUF", uint32 version, uint64 tensor count, uint64 key/value count,
then per key/value a string key (uint64 length + UTF-8), a uint32 value type and the value.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_STRING = 1024 * 1024  # no header string (key, name, chat template) comes near this
MAX_COUNT = 2**32
STRING, ARRAY = 8, 9
# value type -> struct format of the scalars; 6 FLOAT32, 7 BOOL and 12 FLOAT64 are not integers
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_SIZES = {kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}
_INTEGERS = frozenset({0, 1, 2, 3, 4, 5, 10, 11})
_WHAT_TO_DO = (
    "latchgate --model needs a .gguf file (convert with llama.cpp's convert_hf_to_gguf.py or "
    "download a GGUF build)"
)


class GgufError(ValueError):
    """The file is not a readable GGUF model; the message says why, in one line, for a user."""


@dataclass(frozen=True, slots=True)
class GgufInfo:
    version: int
    tensor_count: int
    architecture: str | None
    name: str | None
    context_length: int | None


class _Truncated(Exception):
    """The file ended where the header goes on."""


def read_info(path: Path) -> GgufInfo:
    """The header facts of the GGUF file at `path`; GgufError (naming `path`) when it is not one."""
    try:
        with path.open("rb") as fh:
            return _Reader(fh, path).info()
    except FileNotFoundError:
        raise GgufError(f"no such model file: {path}") from None
    except IsADirectoryError:
        raise GgufError(f"{path} is a directory, not a model file; {_WHAT_TO_DO}") from None
    except PermissionError:
        raise GgufError(
            f"cannot read the model file {path}: permission denied (check its mode and owner)"
        ) from None
    except _Truncated:
        raise GgufError(
            f"{path} ends inside its header: the file is truncated (a partial download?)"
        ) from None
    except OSError as exc:
        raise GgufError(f"cannot read the model file {path}: {exc.strerror or exc}") from None


class _Reader:
    """One pass over a header, keeping only the keys latchgate uses."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh = fh
        self.path = path
        self.size = os.fstat(fh.fileno()).st_size

    def info(self) -> GgufInfo:
        self._magic()
        version, tensors, count = struct.unpack("<IQQ", self._take(20))
        if version not in VERSIONS:
            raise GgufError(
                f"{self.path}: GGUF version {version} is not supported by llama-server builds "
                "of today; convert the model again"
            )
        self._count(tensors, "tensors")
        self._count(count, "keys")
        found = self._entries(count)
        arch = found.get("general.architecture")
        arch = arch if isinstance(arch, str) else None
        name = found.get("general.name")
        window = found.get(f"{arch}.context_length") if arch is not None else None
        return GgufInfo(
            version=version,
            tensor_count=tensors,
            architecture=arch,
            name=name if isinstance(name, str) else None,
            context_length=window if isinstance(window, int) and window >= 0 else None,
        )

    def _magic(self) -> None:
        magic = self.fh.read(len(MAGIC))
        if magic == MAGIC:
            return
        if not magic:
            raise GgufError(f"{self.path} is empty (0 bytes); {_WHAT_TO_DO}")
        if MAGIC.startswith(magic):
            raise _Truncated
        raise GgufError(
            f"{self.path} is not a GGUF model (it starts with {magic!r}); {_WHAT_TO_DO}"
        )

    def _entries(self, count: int) -> dict[str, object]:
        """The wanted keys' values among `count` entries, stopping once the window is known."""
        found: dict[str, object] = {}
        for _ in range(count):
            key = self._string()
            kind = self._u32()
            if key in ("general.architecture", "general.name") or key.endswith(".context_length"):
                found[key] = self._value(kind, key)
            else:
                self._skip_value(kind, key)
            arch = found.get("general.architecture")
            if isinstance(arch, str) and f"{arch}.context_length" in found:
                break
        return found

    def _value(self, kind: int, key: str) -> object:
        """A scalar or string value; None (skipped) for arrays and non-integer numbers."""
        if kind in _INTEGERS:
            return struct.unpack(_SCALARS[kind], self._take(_SIZES[kind]))[0]
        if kind == STRING:
            return self._string()
        self._skip_value(kind, key)
        return None

    def _skip_value(self, kind: int, key: str) -> None:
        if kind in _SIZES:
            self._skip(_SIZES[kind])
        elif kind == STRING:
            self._skip(self._length())
        elif kind == ARRAY:
            self._skip_array(key)
        else:
            self._unknown(kind, key)

    def _skip_array(self, key: str) -> None:
        item, count = struct.unpack("<IQ", self._take(12))
        self._count(count, f"items in the array {key!r}")
        if item in _SIZES:
            self._skip(_SIZES[item] * count)
        elif item == STRING:
            for _ in range(count):
                self._skip(self._length())
        elif item == ARRAY:
            for _ in range(count):
                self._skip_array(key)
        else:
            self._unknown(item, key)

    def _unknown(self, kind: int, key: str) -> None:
        raise GgufError(
            f"{self.path}: the GGUF header is corrupt (unknown value type {kind} for key "
            f"{key!r}); download or convert the model again"
        )

    def _count(self, count: int, what: str) -> None:
        if count > MAX_COUNT:
            raise GgufError(
                f"{self.path}: the GGUF header is corrupt (it claims {count} {what}); "
                "download or convert the model again"
            )

    def _length(self) -> int:
        length: int = struct.unpack("<Q", self._take(8))[0]
        if length > MAX_STRING:
            raise GgufError(
                f"{self.path}: the GGUF header is corrupt (a string of {length} bytes); "
                "download or convert the model again"
            )
        return length

    def _string(self) -> str:
        return self._take(self._length()).decode("utf-8", "replace")

    def _u32(self) -> int:
        value: int = struct.unpack("<I", self._take(4))[0]
        return value

    def _take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise _Truncated
        return data

    def _skip(self, n: int) -> None:
        if self.fh.seek(n, os.SEEK_CUR) > self.size:
            raise _Truncated
