"""Format readers: one input file in, one raw frame out.

A raw frame has `_location` (1-based line for jsonl and changelogs, 1-based data row for
csv and parquet, 1 for a text file), `_error` (a reason code, null for a good row) and one
column per input field, kept as read. Readers never raise for a bad row; they raise
DataError only when the whole file cannot be used, naming the file and what to do: a file
that cannot be opened or decompressed, or whose every row is unreadable (it is in another
format or encoding than declared, or compressed under a plain name). Files are opened and
decompressed by `pipeline.ingest.files`, within the bounds of `ingest` (IngestConfig): JSON
Lines and CSV are read in blocks of about BLOCK_BYTES (never whole), a JSON line over
`max_record_bytes` set aside unread; a text file is read only up to what a text within
bounds could take. A large JSON Lines or Parquet file may be read in pieces by separate
tasks (`pipeline.ingest.pieces`): a piece's rows are those of the whole file, numbered alike.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from pipeline.config import FieldMapping, IngestConfig, SourceDeclaration
from pipeline.core import reasons, storage
from pipeline.core.errors import DataError
from pipeline.ingest import files
from pipeline.ingest.debian_changelog import read_debian_changelog
from pipeline.ingest.files import decode_lossy, is_utf8
from pipeline.ingest.pieces import Piece

BLOCK_BYTES = 16 << 20  # JSON Lines and CSV are parsed in blocks of about this size
DEFAULT_LIMITS = IngestConfig()

# The text must be a JSON string; the other mapped roles may be any JSON scalar. Values of
# another JSON type would otherwise be silently turned into strings by the fast reader.
_STRING_ONLY = ("text",)


def read_file(
    path: Path, name: str, source: SourceDeclaration, limits: IngestConfig = DEFAULT_LIMITS
) -> pl.DataFrame:
    """Read one file whole; `name` is its stable relative name (the id of a text file)."""
    frames = list(read_file_frames(path, name, source, limits))
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")


def read_file_frames(
    path: Path,
    name: str,
    source: SourceDeclaration,
    limits: IngestConfig = DEFAULT_LIMITS,
    piece: Piece | None = None,
) -> Iterator[pl.DataFrame]:
    """Read one file, or one `piece` of a JSON Lines or Parquet file, as consecutive raw
    frames (one but for large JSON Lines and CSV files)."""
    reader = {
        "jsonl": _read_jsonl,
        "csv": _read_csv,
        "parquet": _read_parquet,
        "text": _read_text,
        "debian_changelog": read_debian_changelog,
    }[source.format]
    rows, unreadable = 0, Counter()
    for frame in reader(path, name, source, limits, *([piece] if piece else [])):
        rows += frame.height
        unreadable.update(_unreadable_errors(frame))
        yield frame
    if piece is not None:
        if piece.start > 0:
            return  # whether the file is unreadable is for its first piece to say
        # a first piece none of whose rows can be read reads on, until a row can be: the
        # file fails exactly when it would read whole
        rest = reader(path, name, source, limits, Piece(piece.stop, None, 0))
        while unreadable.total() == rows and (frame := next(rest, None)) is not None:
            rows += frame.height
            unreadable.update(_unreadable_errors(frame))
    if rows == 0:  # an empty file
        yield pl.DataFrame(schema={"_location": pl.Int64, "_error": pl.String})
    elif unreadable.total() == rows:
        # declared wrong rather than damaged: one text file, changelog entry or cut line is a
        # bad record; a JSON Lines or CSV file of several rows, or a compressed one, is not
        compressed = _compressed_under_a_plain_name(path)
        if compressed or (source.format in ("jsonl", "csv") and rows > 1):
            raise DataError(_unreadable(path, source, rows, unreadable, compressed))


def _unreadable_errors(frame: pl.DataFrame) -> list[str]:
    return frame.filter(pl.col("_error").is_in(reasons.UNREADABLE))["_error"].to_list()


def _compressed_under_a_plain_name(path: Path) -> str | None:
    if files.compression_of(path) is not None:
        return None
    with path.open("rb") as handle:
        return files.looks_compressed(handle.read(8))


def _unreadable(
    path: Path, source: SourceDeclaration, rows: int, why: Counter, compressed: str | None
) -> str:
    """What to say of a file none of whose rows could be read, with the likely cause."""
    counts = ", ".join(f"{count:,} {reason}" for reason, count in why.most_common())
    if compressed:
        cause = f"it is {compressed}-compressed: name it with the {compressed} suffix"
    elif reasons.INVALID_UTF8 in why:
        cause = (
            f"it is not {source.encoding} text (compressed, binary or another encoding): "
            "set the source's `encoding`, or fix the file"
        )
    else:
        cause = f"it is not {source.format} (the source's `format`): fix the declaration"
    return f"{path}: none of its {rows:,} rows could be read ({counts}); likely {cause}"


def _mapped(fields: FieldMapping) -> dict[str, str]:
    """Canonical role -> input field name, for the roles this source maps."""
    roles = {"text": fields.text, "id": fields.id, "group": fields.group}
    roles |= {"timestamp": fields.timestamp, "label": fields.label}
    roles |= {"license": fields.license, "consent": fields.consent}
    return {role: name for role, name in roles.items() if name}


def _read_jsonl(
    path: Path,
    name: str,
    source: SourceDeclaration,
    limits: IngestConfig,
    piece: Piece | None = None,
) -> Iterator[pl.DataFrame]:
    """Blocks of lines, each read as `_read_json_lines` does; a line over the bound is
    replaced by an empty object, so the block keeps its numbering, and then marked."""
    opened = (
        files.open_binary(path, limits.max_expansion_ratio)
        if piece is None
        else files.open_range(path, piece.start, piece.stop)
    )
    with opened as handle:
        if not is_utf8(source.encoding):  # in UTF-16 a newline is two bytes: read it as UTF-8
            handle = files.as_utf8(handle, source.encoding)
            source = source.model_copy(update={"encoding": "utf-8"})
        blocks = files.line_blocks(
            handle, BLOCK_BYTES, limits.max_record_bytes, b"{}", piece.first if piece else 1
        )
        for block in blocks:
            # a byte order mark starts the file, not a line: where blocks begin must not matter
            data = block.data.removeprefix(codecs.BOM_UTF8) if block.first == 1 else block.data
            frame = _read_json_lines(data, source, block.first)
            if block.too_long:
                too_long = pl.col("_location").is_in(block.too_long)
                frame = frame.with_columns(
                    pl.when(too_long)
                    .then(pl.lit(reasons.RECORD_TOO_LARGE))
                    .otherwise(pl.col("_error"))
                    .alias("_error")
                )
            yield frame


def _read_json_lines(data: bytes, source: SourceDeclaration, first: int) -> pl.DataFrame:
    """polars reads the lines at once (`first` is the first one's number). A block with a
    blank line, a line that is not a JSON object, or bytes not valid in its encoding is first
    sorted line by line, so each bad line can be named; polars then reads the good lines, so
    every value is rendered the same way whichever path a block took."""
    if is_utf8(source.encoding):
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        try:
            frame = _parse_json_lines(data, source.fields)
        except (pl.exceptions.PolarsError, OSError):  # OSError: polars tried to gunzip it
            frame = None  # invalid JSON or UTF-8 on some line
        if frame is not None and frame.height == lines:  # no blank lines: row n is line n
            locations = pl.int_range(first, first + pl.len(), dtype=pl.Int64, eager=False)
            return _recheck_suspects(
                frame.with_columns(locations.alias("_location")), data, source.fields
            )
    return _read_jsonl_by_line(data, source, first)


def _parse_json_lines(data: bytes, fields: FieldMapping) -> pl.DataFrame:
    frame = pl.read_ndjson(io.BytesIO(data), schema=dict.fromkeys(_wanted(fields), pl.String))
    return frame.with_columns(pl.lit(None, dtype=pl.String).alias("_error"))


def _recheck_suspects(frame: pl.DataFrame, data: bytes, fields: FieldMapping) -> pl.DataFrame:
    """polars renders any JSON value as a string, and a lone surrogate escape as NUL.
    Values that may not have been a JSON string (text) or scalar (the other roles), or
    that hold a NUL, are rechecked from their own lines (row n is line n of `data`)."""
    mapped = _mapped(fields)
    looks_wrong = [
        pl.col(name).str.contains(_NOT_A_STRING if role in _STRING_ONLY else r"^[\[{]|\x00")
        for role, name in mapped.items()
    ]
    suspects = frame.select(pl.any_horizontal(looks_wrong).fill_null(False)).to_series().arg_true()
    if suspects.len() == 0:
        return frame
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")).tolist() + [len(data)]
    starts = [0] + [end + 1 for end in ends[:-1]]
    errors = frame["_error"].to_list()
    for row in suspects.to_list():
        errors[row] = _line_error(data[starts[row] : ends[row]], mapped)
    return frame.with_columns(pl.Series("_error", errors, dtype=pl.String))


# How a JSON number, boolean, object or array looks once rendered as a string; or a NUL.
_NOT_A_STRING = r"^(?:[\[{]|-?[0-9]|true$|false$)|\x00"


def _line_error(line: bytes, mapped: dict[str, str]) -> str | None:
    """The reason a JSON line is not a usable record, or None."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return reasons.INVALID_JSON
    if not isinstance(value, dict):
        return reasons.WRONG_TYPE
    for role, field in mapped.items():
        allowed = (str,) if role in _STRING_ONLY else (str, int, float, bool)
        if value.get(field) is not None and not isinstance(value[field], allowed):
            return reasons.WRONG_TYPE
    return None


def _wanted(fields: FieldMapping) -> list[str]:
    return list(dict.fromkeys([*_mapped(fields).values(), *fields.metadata]))


def _read_jsonl_by_line(data: bytes, source: SourceDeclaration, first: int) -> pl.DataFrame:
    bad, good, numbers = [], [], []
    for number, line in enumerate(_decoded_lines(data, source.encoding), start=first):
        if line is None:
            bad.append({"_location": number, "_error": reasons.INVALID_UTF8})
        elif line.strip():  # blank lines are not records
            try:
                is_object = isinstance(orjson.loads(line), dict)
            except orjson.JSONDecodeError:
                bad.append({"_location": number, "_error": reasons.INVALID_JSON})
                continue
            if is_object:  # field types are checked once polars has read it, as on the fast path
                good.append(line.encode())
                numbers.append(number)
            else:
                bad.append({"_location": number, "_error": reasons.WRONG_TYPE})
    frames = [pl.DataFrame(bad, schema={"_location": pl.Int64, "_error": pl.String})]
    if good:
        joined = b"\n".join(good)
        parsed = _parse_json_lines(joined, source.fields)
        parsed = parsed.with_columns(pl.Series("_location", numbers, dtype=pl.Int64))
        frames.append(_recheck_suspects(parsed, joined, source.fields))
    return pl.concat(frames, how="diagonal_relaxed").sort("_location")


def _decoded_lines(data: bytes, encoding: str) -> list[str | None]:
    """The file's lines as text; None for a line whose bytes are not valid in `encoding`."""
    if is_utf8(encoding):
        lines = []
        for raw in data.split(b"\n"):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                lines.append(None)
        return lines
    # in UTF-16 and the like a newline is more than one byte: decode first, then split
    text, clean = decode_lossy(data, encoding)
    return [None if not clean and "\ufffd" in line else line for line in text.split("\n")]


def _stringify(frame: pl.DataFrame) -> pl.DataFrame:
    """Every input field as a string (JSON for nested values); location and error as they are."""
    casts = []
    for name, dtype in frame.schema.items():
        if name in ("_location", "_error") or dtype == pl.String:
            continue
        if dtype.is_nested():
            casts.append(pl.col(name).map_elements(_nested_json, return_dtype=pl.String))
        elif dtype == pl.Binary:
            casts.append(pl.col(name).bin.encode("hex"))
        elif dtype == pl.Boolean:
            casts.append(
                pl.col(name).replace_strict({True: "true", False: "false"}, return_dtype=pl.String)
            )
        else:
            casts.append(pl.col(name).cast(pl.String))
    return frame.with_columns(casts) if casts else frame


def _nested_json(value) -> str:
    value = value.to_list() if isinstance(value, pl.Series) else value
    return json.dumps(value, ensure_ascii=False, default=str)


def _read_csv(
    path: Path, name: str, source: SourceDeclaration, limits: IngestConfig
) -> Iterator[pl.DataFrame]:
    """Streamed in blocks of whole rows of about BLOCK_BYTES (a compressed file within the
    expansion cap), never whole. Each block is read behind the file's lines up to its
    header's end and numbered on from the block before, so its rows are read and numbered
    as reading the file whole would; a field of any size is read, and a text over the bound
    dropped when records are made."""
    header, first = None, 1  # the file's lines up to its header's end; the next row's number
    with files.open_binary(path, limits.max_expansion_ratio) as handle:
        if not is_utf8(source.encoding):  # in UTF-16 a newline is two bytes: read it as UTF-8
            handle = files.as_utf8(handle, source.encoding)
        for block in files.csv_blocks(handle, BLOCK_BYTES):
            # polars is given bytes: a str of the block would take up to 4 times its size
            text, valid = decode_lossy(block, "utf-8")
            data = block if valid else text.encode()
            if header is None:
                data = data.removeprefix(codecs.BOM_UTF8)
                if not text.strip():  # blank lines before the header
                    continue
                header = _csv_header(data)
            else:
                data = header + data
            del text
            frame = _read_csv_block(data, valid, first)
            _require_columns(path, frame, source)
            first += frame.height
            yield frame
    if header is None:  # an empty file holds no records
        schema = {"_location": pl.Int64, "_error": pl.String}
        yield pl.DataFrame(schema=schema | dict.fromkeys(_wanted(source.fields), pl.String))


def _csv_header(data: bytes) -> bytes:
    """A CSV file's lines up to its header's end: the empty lines polars skips before it,
    and the header row (whose quoted names may hold newlines)."""
    at = re.match(rb"(?:\r?\n)*", data).end()
    quotes = 0
    while (end := data.find(b"\n", at)) >= 0:
        quotes += data.count(b'"', at, end)
        at = end + 1
        if quotes % 2 == 0:
            return data[:at]
    return data


def _read_csv_block(data: bytes, valid: bool, first: int) -> pl.DataFrame:
    """A header and whole rows (UTF-8), the first numbered `first`; `valid`: the bytes were
    text (not replaced)."""
    try:
        frame = pl.read_csv(data, infer_schema=False, raise_if_empty=False)
        frame = frame.with_columns(
            pl.int_range(first, first + pl.len(), dtype=pl.Int64).alias("_location"),
            pl.lit(None, dtype=pl.String).alias("_error"),
        )
    except pl.exceptions.PolarsError:  # a row that does not fit the header: find it row by row
        frame = _read_csv_by_row(data.decode(), first)
    if not valid:  # rows holding a replacement character came from bytes that were not text
        fields = [column for column in frame.columns if column not in ("_location", "_error")]
        has_replacement = pl.any_horizontal(pl.col(fields).str.contains("\ufffd", literal=True))
        frame = frame.with_columns(
            pl.when(pl.col("_error").is_null() & has_replacement)
            .then(pl.lit(reasons.INVALID_UTF8))
            .otherwise(pl.col("_error"))
            .alias("_error")
        )
    return frame


def _read_csv_by_row(text: str, first: int = 1) -> pl.DataFrame:
    """Rows numbered (from `first`) and filled as polars does (a blank line is a row of
    nulls, a short row is padded with nulls), so record ids do not depend on which reader
    ran. A row with more fields than the header is `malformed_row`; a quote left open
    swallows the rest of the file, which becomes one last malformed row."""
    reader = csv.reader(io.StringIO(text), strict=True)
    header = next(reader, [])
    rows: list[dict] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            rows.append({"_location": first + len(rows), "_error": reasons.MALFORMED_ROW})
            break
        if len(row) > len(header):
            rows.append({"_location": first + len(rows), "_error": reasons.MALFORMED_ROW})
            continue
        values = dict(
            zip(header, [value or None for value in row] + [None] * len(header), strict=False)
        )
        rows.append({"_location": first + len(rows), "_error": None} | values)
    schema = {"_location": pl.Int64, "_error": pl.String} | dict.fromkeys(header, pl.String)
    return pl.DataFrame(rows, schema=schema)


def _read_parquet(
    path: Path,
    name: str,
    source: SourceDeclaration,
    limits: IngestConfig,
    piece: Piece | None = None,
) -> Iterator[pl.DataFrame]:
    """Read whole, or a piece's rows (whole row groups: polars reads only those)."""
    try:
        if piece is not None:
            rows = None if piece.stop is None else piece.stop - piece.start
            frame = pl.scan_parquet(path).slice(piece.start, rows).collect()
        elif storage.is_local(path) and files.compression_of(path) is None:
            frame = pl.read_parquet(path)
        else:  # Parquet needs to seek
            with files.open_binary(path, limits.max_expansion_ratio) as handle:
                frame = pl.read_parquet(io.BytesIO(handle.read()))
    except files.ReadError:
        raise
    except Exception as error:
        raise DataError(
            f"{path}: not a readable Parquet file ({error}); fix or remove the file"
        ) from None
    _require_columns(path, frame, source)
    frame = frame.select(_wanted(source.fields))  # other columns may hold any type
    text_type = frame.schema[source.fields.text]
    if text_type != pl.String:
        raise DataError(
            f"{path}: column {source.fields.text!r} holds {text_type}, not text; "
            f"map `fields.text` of source {source.name!r} to a string column"
        )
    timestamp = source.fields.timestamp
    if timestamp and frame.schema[timestamp] in (pl.Datetime, pl.Date):
        # already typed: render as ISO 8601 in UTC so one parser handles every format
        frame = frame.with_columns(_as_iso_utc(pl.col(timestamp), frame.schema[timestamp]))
    frame = _stringify(frame)
    first = piece.first if piece else 1
    yield frame.with_columns(
        pl.int_range(first, first + pl.len(), dtype=pl.Int64).alias("_location"),
        pl.lit(None, dtype=pl.String).alias("_error"),
    )


def _as_iso_utc(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if dtype == pl.Date:
        column, dtype = column.cast(pl.Datetime("us")), pl.Datetime("us")
    in_utc = (
        column.dt.replace_time_zone("UTC")  # times without a zone are taken as UTC
        if dtype.time_zone is None
        else column.dt.convert_time_zone("UTC")
    )
    return in_utc.dt.to_string("%Y-%m-%dT%H:%M:%S%.f%z")


def _require_columns(path: Path, frame: pl.DataFrame, source: SourceDeclaration) -> None:
    missing = [name for name in _wanted(source.fields) if name not in frame.columns]
    if missing:
        has = [name for name in frame.columns if name not in ("_location", "_error")]
        raise DataError(
            f"{path}: source {source.name!r} maps column(s) {', '.join(missing)} that the file "
            f"does not have (it has: {', '.join(has)}); fix `fields` in the declaration"
        )


def _read_text(
    path: Path, name: str, source: SourceDeclaration, limits: IngestConfig
) -> Iterator[pl.DataFrame]:
    """The file is one record: a file over `max_record_bytes` is dropped as
    record_too_large, read no further (as a JSON line is); a text over the character bound,
    once normalized, when records are made."""
    with files.open_binary(path, limits.max_expansion_ratio) as handle:
        data = handle.read(limits.max_record_bytes + 1)
    error, text = None, None
    if len(data) > limits.max_record_bytes:
        error = reasons.RECORD_TOO_LARGE
    else:
        text, valid = decode_lossy(data, source.encoding)
        error, text = (None, text) if valid else (reasons.INVALID_UTF8, None)
    yield pl.DataFrame(
        {"_location": [1], "_error": [error], "text": [text], "path": [name]},
        schema={"_location": pl.Int64, "_error": pl.String, "text": pl.String, "path": pl.String},
    )
