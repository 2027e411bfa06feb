"""Reading a saved session's ``.npz`` without trusting it.

A ``.npz`` is a zip archive of ``.npy`` arrays, and a zip can promise far more than it weighs: a
1 MB file can hold a compressed gigabyte of zeros, or a directory of millions of entries. So
nothing is decompressed before it is known to be small enough: first the archive's end record
(how many entries, how large the directory), then each entry's name and its ``.npy`` header
(dtype and shape, a few hundred bytes), and only then an array — the description at once, the
attention arrays only when the caller has checked their shapes against the live session
(``SavedArrays.shape``). Pickles are never loaded (``allow_pickle=False``): no code runs.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping

import numpy as np

from explorer.errors import InputError
from explorer.session import MAX_SESSION_POSITIONS as MAX_POSITIONS  # no saved sequence is longer

NOT_OURS = "This file is not a session saved by Decoder Explorer (save one with “Save session”)."
MAX_ENTRIES = 1000  # token ids, source ids, and at most three attention arrays per layer
MAX_DIRECTORY_BYTES = 1 << 20
MAX_DESCRIPTION_BYTES = 2 << 20  # a 100,000-character text in UTF-8, and 1,024 token ids
ENTRY = re.compile(r"(description|token_ids|source_ids|(self|cross|encoder)_attention\.\d{1,4})\.npy")
DTYPES = {"description": np.uint8, "token_ids": np.int64, "source_ids": np.int64}  # attention: float16
HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
# What zipfile raises on an archive it cannot read: damaged, or made with a zip version, a
# compression method or an encryption it does not know (NotImplementedError, RuntimeError).
UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)
END_RECORD = b"PK\x05\x06"  # the zip's end of central directory record
END_RECORD_FORMAT = "<4s4H2LH"  # signature, disk numbers, entry counts, directory size and offset, comment


class SavedArrays(Mapping):
    """A saved session's arrays, read one at a time: ``shape`` from the header, the values on demand."""

    def __init__(self, archive: zipfile.ZipFile, headers: dict[str, tuple[np.dtype, tuple[int, ...]]]):
        self._archive = archive
        self._headers = headers

    def shape(self, name: str) -> tuple[int, ...]:
        return self._headers[name][1]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._headers:
            raise KeyError(name)
        try:
            with self._archive.open(f"{name}.npy") as member:
                return np.lib.format.read_array(member, allow_pickle=False)
        except UNREADABLE as error:  # damaged after its header
            raise InputError(NOT_OURS) from error

    def __contains__(self, name: object) -> bool:  # Mapping's own would read the array
        return name in self._headers

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)


def open_archive(data: bytes) -> tuple[str, SavedArrays]:
    """The description (JSON text, unchecked) and the arrays of a saved session, or an InputError.

    Reads at most the description's bytes and every entry's header before returning."""
    try:
        check_end_record(data)
        archive = zipfile.ZipFile(io.BytesIO(data))
        headers = {name: header for name, header in entry_headers(archive)}
        if "description" not in headers or "token_ids" not in headers:
            raise InputError(NOT_OURS)
        arrays = SavedArrays(archive, headers)
        description = arrays["description"].tobytes().decode("utf-8")
    except (*UNREADABLE, KeyError, UnicodeDecodeError, struct.error) as error:
        raise InputError(NOT_OURS) from error
    del headers["description"]
    return description, arrays


def check_end_record(data: bytes) -> None:
    """Refuse an archive whose directory is larger than a session's could be, before reading it."""
    tail = data[-(22 + 65_535) :]  # the end record, and a comment of at most 64 KiB
    at = tail.rfind(END_RECORD)
    if at < 0 or len(tail) - at < 22:
        raise InputError(NOT_OURS)
    fields = struct.unpack(END_RECORD_FORMAT, tail[at : at + 22])
    entries, directory_bytes = fields[4], fields[5]
    if entries > MAX_ENTRIES or directory_bytes > MAX_DIRECTORY_BYTES:  # 0xFFFF (zip64) is over too
        raise InputError(f"This file holds more than a saved session can ({MAX_ENTRIES} arrays); it is not one.")


def entry_headers(archive: zipfile.ZipFile) -> Iterator[tuple[str, tuple[np.dtype, tuple[int, ...]]]]:
    """(name, (dtype, shape)) of each entry, read from its .npy header; refuses what no session holds."""
    for info in archive.infolist():
        match = ENTRY.fullmatch(info.filename)
        if match is None:
            raise InputError(NOT_OURS)
        name = info.filename[: -len(".npy")]
        with archive.open(info) as member:
            shape, dtype = array_header(member)
        check_header(name, dtype, shape, info.file_size)
        yield name, (dtype, shape)


def array_header(member) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype an .npy stream declares (its first few hundred bytes)."""
    read = HEADER_READERS.get(np.lib.format.read_magic(member))
    if read is None:
        raise InputError(NOT_OURS)
    shape, _fortran_order, dtype = read(member)
    return shape, dtype


def check_header(name: str, dtype: np.dtype, shape: tuple[int, ...], stored_bytes: int) -> None:
    """An entry's dtype and shape are those a session saves, and small enough to read."""
    expected = DTYPES.get(name, np.float16)
    if dtype != np.dtype(expected) or len(shape) not in (1, 2, 3):
        raise InputError(NOT_OURS)
    if name == "description" and (shape[0] > MAX_DESCRIPTION_BYTES or stored_bytes > MAX_DESCRIPTION_BYTES + 4096):
        raise InputError("This file's description is larger than a saved session's can be; it is not one.")
    if name in DTYPES and len(shape) != 1:
        raise InputError(NOT_OURS)
    if name in ("token_ids", "source_ids") and shape[0] > MAX_POSITIONS:
        raise InputError(f"This file holds more than {MAX_POSITIONS} tokens, more than a session can; it is not one.")
