"""Input files: opening, compression, format by suffix, decoding, and streamed rows.

Every command that reads a data file goes through this module: ingest (its format readers
in `pipeline.ingest.readers`), `thresher dedup` (through
ingest's readers), and the scans (`secrets scan`, `quality scan`, `contamination check`,
`eval register`, through `pipeline.ingest.field_rows`).

- `open_binary` streams a file's bytes, decompressed when its name ends with `.gz`, `.bz2`,
  `.xz` or `.zst`; the format is then named by the suffix before it (`inner_suffix`,
  `format_of`). Decompression is streamed and capped: a file that expands past
  `max_expansion_ratio` times its size (and past EXPANSION_FLOOR_BYTES) stops the read with
  an error naming it, so a decompression bomb costs neither memory nor hours.
- `read_bytes` reads a file whole (decompressed, within the cap).
- `open_range` streams a stretch of a file's bytes (a piece of a large file).
- `line_blocks` streams a file's lines in blocks of about a given size, setting aside lines
  too long to be a record without holding them; `csv_blocks` a CSV file's rows, whose quoted
  fields may hold newlines.
- `Lines` streams a file's lines, counting them so that an error names its row.
- `json_object` decodes one JSON Lines row, saying why it is a bad row when it is one.
- `bad_row` and `missing_field` word what every command prints for a bad row or a field
  the file does not have; `ReadError` is a file (or a row) that cannot be read at all.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import io
import lzma
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import orjson

from pipeline.core.errors import DataError

# The format of a file by its suffix (the one before a compression suffix); the format names
# are those of a source declaration.
SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
# Text compresses 3 to 10 times, repetitive logs some tens of times; a bomb a thousand.
DEFAULT_MAX_EXPANSION_RATIO = float(os.environ.get("THRESHER_MAX_EXPANSION_RATIO", 100))
EXPANSION_FLOOR_BYTES = 64 << 20  # a small file may expand this far whatever its ratio
# The first bytes of each compressed format, to say "compressed" when a file's suffix does not.
_MAGIC = {b"\x1f\x8b": ".gz", b"BZh": ".bz2", b"\xfd7zXZ\x00": ".xz", b"(\xb5/\xfd": ".zst"}


MAX_LINE_BYTES = 64 << 20  # a scan's row (or CSV field): longer is not text a scan can use
# Python's csv module refuses fields over 128 KiB, which ended a file's reading at a long text;
# a long text is dropped (or reported) by length where records are made instead. A field over
# MAX_LINE_BYTES (an unclosed quote swallowing the file) still stops, before memory does.
csv.field_size_limit(MAX_LINE_BYTES)


class ReadError(DataError):
    """A file, or a row of it, cannot be read; the message names the file and the row."""


def compression_of(path: Path) -> str | None:
    """The compression suffix of the file's name (`.gz`, `.bz2`, `.xz`, `.zst`), or None."""
    suffix = path.suffix.lower()
    return suffix if suffix in COMPRESSED_SUFFIXES else None


def inner_suffix(path: Path) -> str:
    """The suffix that says the format: the one before a compression suffix."""
    return path.with_suffix("").suffix.lower() if compression_of(path) else path.suffix.lower()


def format_of(path: Path, formats: dict[str, str] = SUFFIX_FORMATS) -> str | None:
    """The format `formats` gives the file's (inner) suffix; None for another suffix."""
    return formats.get(inner_suffix(path))


def looks_compressed(data: bytes) -> str | None:
    """The compression suffix whose magic bytes `data` starts with, or None."""
    return next((suffix for magic, suffix in _MAGIC.items() if data.startswith(magic)), None)


@contextmanager
def open_binary(path: Path, max_expansion_ratio: float | None = None) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed (streamed) when its name has a compression suffix.
    Reading past the expansion cap, or bytes that do not decompress, raise ReadError."""
    compression = compression_of(path)
    if compression is None:
        with path.open("rb") as handle:
            yield handle
        return
    ratio = max_expansion_ratio or DEFAULT_MAX_EXPANSION_RATIO
    limit = max(int(path.stat().st_size * ratio), EXPANSION_FLOOR_BYTES)
    with path.open("rb") as compressed:
        stream = _decompressing(compressed, compression)
        try:
            yield io.BufferedReader(_Capped(stream, path, compression, limit, ratio), 1 << 20)
        finally:
            stream.close()


def _decompressing(compressed: IO[bytes], compression: str) -> IO[bytes]:
    if compression == ".gz":
        return gzip.GzipFile(fileobj=compressed, mode="rb")
    if compression == ".bz2":
        return bz2.BZ2File(compressed, "rb")
    if compression == ".xz":
        return lzma.LZMAFile(compressed, "rb")
    import pyarrow as pa  # zstd: pyarrow's codec (the standard library has none before 3.14)

    return pa.CompressedInputStream(pa.PythonFile(compressed, mode="r"), "zstd")


class _Capped(io.RawIOBase):
    """A decompressing stream that raises ReadError once more than `limit` bytes came out,
    or when the compressed bytes are broken."""

    def __init__(self, stream, path: Path, compression: str, limit: int, ratio: float):
        self.stream, self.path, self.compression = stream, path, compression
        self.limit, self.ratio, self.produced = limit, ratio, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.stream.read(len(buffer))
        except (OSError, EOFError, lzma.LZMAError, ValueError) as error:
            # gzip.BadGzipFile is an OSError; pyarrow's errors are OSError or ValueError
            raise ReadError(
                f"{self.path}: not a readable {self.compression} file ({error}); fix or "
                f"remove the file, or name it without {self.compression} if it is not compressed"
            ) from None
        self.produced += len(data)
        if self.produced > self.limit:
            raise ReadError(
                f"{self.path}: expands past {self.limit:,} bytes ({self.ratio:g} times its "
                f"size), the cap on decompression; if it is not a decompression bomb, raise "
                "`ingest.max_expansion_ratio` in the run config (or "
                "THRESHER_MAX_EXPANSION_RATIO for a command)"
            )
        buffer[: len(data)] = data
        return len(data)


@contextmanager
def open_range(path: Path, start: int, stop: int | None) -> Iterator[IO[bytes]]:
    """Bytes [start, stop) of an uncompressed file (to its end when `stop` is None)."""
    with path.open("rb") as handle:
        handle.seek(start)
        if stop is None:
            yield handle
        else:
            yield io.BufferedReader(_Window(handle, stop - start), 1 << 20)


class _Window(io.RawIOBase):
    """The next `size` bytes of a file."""

    def __init__(self, handle: IO[bytes], size: int):
        self.handle, self.left = handle, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        read = self.handle.readinto(memoryview(buffer)[: self.left])
        self.left -= read
        return read


def read_bytes(path: Path) -> bytes:
    """The whole file, decompressed by its suffix (within the cap). Raises ReadError for a
    file that does not decompress, OSError for one that cannot be read."""
    with open_binary(path) as handle:
        return handle.read()


def as_utf8(handle: IO[bytes], encoding: str) -> IO[bytes]:
    """`handle`'s text, in `encoding`, as a stream of UTF-8 bytes (so that its lines can be
    found in bytes). Bytes that are not valid in `encoding` come out as one byte that is not
    valid UTF-8, where `errors="replace"` would put one U+FFFD: the line holding them is still
    found invalid, and decoding it with replacement gives the text the file's own decoding
    with replacement gives."""
    return io.BufferedReader(_Utf8(handle, encoding), 1 << 20)


def _not_utf8(error: UnicodeError) -> tuple[str, int]:
    return "\udcff", error.end  # a lone surrogate, which surrogateescape encodes as 0xff


codecs.register_error("thresher-not-utf8", _not_utf8)


class _Utf8(io.RawIOBase):
    def __init__(self, handle: IO[bytes], encoding: str):
        self.text = io.TextIOWrapper(handle, encoding=encoding, errors="thresher-not-utf8")
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            chunk = self.text.read(1 << 18)
            if not chunk:
                return 0
            self.pending = chunk.encode("utf-8", errors="surrogateescape")
        size = min(len(buffer), len(self.pending))
        buffer[:size], self.pending = self.pending[:size], self.pending[size:]
        return size


@dataclass
class LineBlock:
    """Consecutive lines of a file: `data` (whole lines, each ending in `\n` but perhaps the
    file's last), the first one's 1-based number, and the numbers of the lines longer than
    the limit, each replaced in `data` by the placeholder."""

    first: int
    data: bytes
    too_long: list[int] = field(default_factory=list)


def line_blocks(
    handle: IO[bytes],
    block_bytes: int,
    max_line_bytes: int,
    placeholder: bytes = b"",
    first: int = 1,
) -> Iterator[LineBlock]:
    """The lines of `handle` in blocks of about `block_bytes`, numbered from `first`. A line
    longer than `max_line_bytes` is never held whole: its bytes are skipped as they are read."""
    number = first  # of the first line not yet in a block
    carry = b""  # the start of a line whose end has not been read
    skipping = False  # inside a line already known to be too long
    too_long: list[int] = []
    while chunk := handle.read(block_bytes):
        if skipping:
            end = chunk.find(b"\n")
            if end < 0:
                continue
            chunk, skipping = chunk[end + 1 :], False
            yield LineBlock(number, placeholder + b"\n", [number])
            number += 1
        data = carry + chunk
        last = data.rfind(b"\n")
        if last < 0:  # no line ends in it
            carry = data
            if len(carry) > max_line_bytes:
                carry, skipping = b"", True
            continue
        data, carry = data[: last + 1], data[last + 1 :]
        data, too_long = _set_aside_long_lines(data, number, max_line_bytes, placeholder)
        yield LineBlock(number, data, too_long)
        number += data.count(b"\n")
        if len(carry) > max_line_bytes:
            carry, skipping = b"", True
    if skipping:
        yield LineBlock(number, placeholder, [number])
    elif carry:
        data, too_long = _set_aside_long_lines(carry, number, max_line_bytes, placeholder)
        yield LineBlock(number, data, too_long)


def csv_blocks(handle: IO[bytes], block_bytes: int) -> Iterator[bytes]:
    """The bytes of a CSV file in blocks of whole rows, of about `block_bytes` each. A row
    ends at a newline after an even number of quote characters in the file (as polars finds
    rows), so a quoted field holding newlines is never cut; a quote left open holds the rest
    of the file in one block."""
    held: list[bytes] = []  # the bytes after the last row end
    odd = False  # whether `held` holds an odd number of quote characters
    while chunk := handle.read(block_bytes):
        array = np.frombuffer(chunk, dtype=np.uint8)
        quotes = np.flatnonzero(array == ord('"'))
        newlines = np.flatnonzero(array == ord("\n"))
        row_ends = newlines[(np.searchsorted(quotes, newlines) + odd) % 2 == 0]
        if row_ends.size == 0:
            held.append(chunk)
            odd ^= quotes.size % 2 == 1
            continue
        cut = int(row_ends[-1]) + 1
        yield b"".join([*held, chunk[:cut]])
        held = [chunk[cut:]]
        odd = (quotes.size - int(np.searchsorted(quotes, cut))) % 2 == 1
    if any(held):
        yield b"".join(held)


def _set_aside_long_lines(
    data: bytes, first: int, max_line_bytes: int, placeholder: bytes
) -> tuple[bytes, list[int]]:
    if len(data) <= max_line_bytes:
        return data, []
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    ends = np.append(ends, len(data)) if not data.endswith(b"\n") else ends
    starts = np.concatenate(([0], ends[:-1] + 1))
    long = np.flatnonzero(ends - starts > max_line_bytes)
    if long.size == 0:
        return data, []
    pieces, at = [], 0
    for index in long.tolist():
        pieces += [data[at : starts[index]], placeholder]
        at = int(ends[index])
    pieces.append(data[at:])
    return b"".join(pieces), [first + index for index in long.tolist()]


def is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


def decode_lossy(data: bytes, encoding: str) -> tuple[str, bool]:
    """The text, and whether it decoded cleanly (bad bytes become U+FFFD)."""
    try:
        return data.decode(encoding), True
    except UnicodeDecodeError:
        return data.decode(encoding, errors="replace"), False


class Lines:
    """Lines of a file without their `\\n` (a `\\r` before it is kept), decompressed by its
    suffix; `count` is the number read so far: the index of the next one. A line over
    MAX_LINE_BYTES stops the read with a ReadError naming it, before it is held whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        with open_binary(self.path) as handle:
            while line := handle.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    raise ReadError(
                        f"{self.path}: row {self.count} is longer than {MAX_LINE_BYTES:,} bytes; "
                        "is it a text file?"
                    )
                yield line.removesuffix(b"\n")
                self.count += 1


def field_names(path: Path, fmt: str) -> list[str] | None:
    """The columns of a csv (its header) or parquet file; None when they cannot be read."""
    try:
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            plain = compression_of(path) is None
            return pq.read_schema(path if plain else pa.BufferReader(read_bytes(path))).names
        with (
            open_binary(path) as binary,
            io.TextIOWrapper(binary, encoding="utf-8-sig", errors="replace", newline="") as handle,
        ):
            return next(csv.reader(handle), [])
    except Exception:  # noqa: BLE001 — the reader names what is wrong with the file
        return None


# Why a row is bad, as every command words it.
NOT_JSON = "not valid JSON"
NOT_AN_OBJECT = "not a JSON object"


def json_object(line: bytes) -> tuple[dict | None, str | None]:
    """(the row's JSON object, why the row is bad): exactly one of them is None."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, NOT_JSON
    if not isinstance(value, dict):
        return None, NOT_AN_OBJECT
    return value, None


def bad_row(path: Path, index: int, why: str) -> str:
    """The line a command prints for a bad row (`index` 0-based)."""
    return f"{path}: bad row {index}: {why}"


def missing_field(path: Path, name: str, fields: list[str], hint: str) -> str:
    """A field the file does not have: the fields it has, and what to do (`hint`)."""
    return f"{path}: no field {name!r} (fields: {', '.join(fields) or 'none'}); {hint}"
