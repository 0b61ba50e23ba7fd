"""Input files: opening, compression, format by suffix, decoding, and streamed rows.

Every command that reads a data file goes through this module: ingest (its format readers
in `pipeline.ingest.readers` read a source file whole, as it is), `thresher dedup` (through
ingest's readers), and the scans (`secrets scan`, `quality scan`, `contamination check`,
`eval register`, through `pipeline.ingest.field_rows`).

- `open_binary` streams a file's bytes, decompressed when its name ends with `.gz`; the
  format is then named by the suffix before it (`inner_suffix`, `format_of`).
- `read_bytes` reads a file whole, decompressing only when asked.
- `Lines` streams a file's lines, counting them so that an error names its row.
- `json_object` decodes one JSON Lines row, saying why it is a bad row when it is one.
- `bad_row` and `missing_field` word what every command prints for a bad row or a field
  the file does not have; `ReadError` is a file (or a row) that cannot be read at all.
"""

from __future__ import annotations

import codecs
import csv
import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import orjson

from pipeline.core.errors import DataError

# The format of a file by its suffix (the one before `.gz` for a gzip file); the format
# names are those of a source declaration.
SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


class ReadError(DataError):
    """A file, or a row of it, cannot be read; the message names the file and the row."""


def is_gzip(path: Path) -> bool:
    return path.suffix.lower() == ".gz"


def inner_suffix(path: Path) -> str:
    """The suffix that says the format: the one before `.gz` for a gzip file."""
    suffix = path.suffix.lower()
    return path.with_suffix("").suffix.lower() if suffix == ".gz" else suffix


def format_of(path: Path, formats: dict[str, str] = SUFFIX_FORMATS) -> str | None:
    """The format `formats` gives the file's (inner) suffix; None for another suffix."""
    return formats.get(inner_suffix(path))


@contextmanager
def open_binary(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed when its name ends with .gz."""
    with gzip.open(path, "rb") if is_gzip(path) else path.open("rb") as handle:
        yield handle


def read_bytes(path: Path, *, decompress: bool) -> bytes:
    """The whole file; decompressed when asked and its name ends with .gz. Raises OSError
    (gzip.BadGzipFile among them) or EOFError for a file that cannot be read."""
    data = path.read_bytes()
    return decompressed(path, data) if decompress else data


def decompressed(path: Path, data: bytes) -> bytes:
    """`data`, the bytes of `path`, decompressed when its name ends with .gz."""
    return gzip.decompress(data) if is_gzip(path) else data


def is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


def decode_lossy(data: bytes, encoding: str) -> tuple[str, bool]:
    """The text, and whether it decoded cleanly (bad bytes become U+FFFD)."""
    try:
        return data.decode(encoding), True
    except UnicodeDecodeError:
        return data.decode(encoding, errors="replace"), False


class Lines:
    """Lines of a file without their `\\n` (a `\\r` before it is kept), decompressed when
    its name ends with .gz; `count` is the number read so far: the index of the next one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        with open_binary(self.path) as handle:
            for line in handle:
                yield line.removesuffix(b"\n")
                self.count += 1


def field_names(path: Path, fmt: str) -> list[str] | None:
    """The columns of a csv (its header) or parquet file; None when they cannot be read."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_schema(path).names
        with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
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
