"""Cutting a large input file into pieces that separate ingest tasks read.

A file larger than a part is cut into pieces of about a part's size, so that the workers
read it together: JSON Lines after a newline, Parquet between row groups. A piece knows
the location (line or row) of its first row, so every record keeps the identity and
location that reading the whole file gives it. Only local, uncompressed files are cut, and
JSON Lines only in UTF-8 (where a newline is one byte, never part of another character).
Other files are read whole by one task: a compressed file cannot be entered in the middle,
a remote one would have to be downloaded to count its lines, a CSV row may span lines (a
quoted field holding newlines: a byte offset does not say which row it falls in; the file is
streamed instead), a text file is one record, and a Debian changelog is small.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from pipeline.config import SourceDeclaration
from pipeline.core import storage
from pipeline.ingest import files

SCAN_BYTES = 16 << 20  # JSON Lines are scanned for newlines in blocks of this size


@dataclass(frozen=True)
class Piece:
    """A stretch of one file: bytes [start, stop) of JSON Lines, from a line's start to a
    line's end, or rows [start, stop) (0-based) of Parquet, whole row groups; `stop` None
    reads to the file's end. `first` is the location (1-based line or row) of its first row."""

    start: int
    stop: int | None
    first: int


def file_pieces(
    path: Path, source: SourceDeclaration, size: int, part_bytes: int
) -> list[tuple[Piece, int]]:
    """The pieces of a file of `size` bytes larger than `part_bytes`, each with its share of
    the size, in file order; none when the file is read whole."""
    if size <= part_bytes or not storage.is_local(path) or files.compression_of(path):
        return []
    if source.format == "jsonl" and files.is_utf8(source.encoding):
        pieces = _line_pieces(path, part_bytes)
    elif source.format == "parquet":
        pieces = _row_group_pieces(path, size, part_bytes)
    else:
        return []
    return pieces if len(pieces) > 1 else []


def _line_pieces(path: Path, part_bytes: int) -> list[tuple[Piece, int]]:
    """Byte ranges of at least `part_bytes`, each ending after the first newline past that
    (the last at the file's end). The file is read once, in blocks, counting the newlines
    before each cut: cheap next to parsing the lines, and no task has to count them again."""
    pieces = []
    start, first = 0, 1  # the piece being grown: its first byte and line
    offset, line = 0, 1  # the block's first byte; the line it starts in
    with path.open("rb") as handle:
        while block := handle.read(SCAN_BYTES):
            counted = 0  # the block's newlines before this are counted in `line`
            while (target := start + part_bytes - 1 - offset) < len(block):
                end = block.find(b"\n", max(target, counted))
                if end < 0:
                    break
                line += block.count(b"\n", counted, end + 1)
                counted = end + 1
                pieces.append((Piece(start, offset + counted, first), offset + counted - start))
                start, first = offset + counted, line
            line += block.count(b"\n", counted)
            offset += len(block)
    if start < offset:
        pieces.append((Piece(start, offset, first), offset - start))
    return pieces


def _row_group_pieces(path: Path, size: int, part_bytes: int) -> list[tuple[Piece, int]]:
    """Consecutive row groups of at least `part_bytes` (compressed), the last with the
    rest; none for a file that is not readable Parquet (its reader says why)."""
    try:
        metadata = pq.ParquetFile(path).metadata
    except Exception:  # noqa: BLE001 — read whole, the reader names what is wrong with it
        return []
    pieces = []
    start = rows = group_bytes = 0  # the piece being grown: its first row, rows and bytes
    for number in range(metadata.num_row_groups):
        group = metadata.row_group(number)
        rows += group.num_rows
        group_bytes += sum(
            group.column(column).total_compressed_size for column in range(group.num_columns)
        )
        if group_bytes >= part_bytes:
            pieces.append((Piece(start, start + rows, start + 1), group_bytes))
            start, rows, group_bytes = start + rows, 0, 0
    if rows:
        pieces.append((Piece(start, start + rows, start + 1), group_bytes))
    if pieces:  # the footer and the rest: the sizes add up to the file's
        last, last_bytes = pieces[-1]
        pieces[-1] = (last, last_bytes + size - sum(share for _, share in pieces))
    return pieces
