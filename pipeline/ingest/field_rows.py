"""One field of every row of a file, for the scans; files are opened by `files`.

- `field_batches` streams it in batches of bounded size (`secrets scan`, `quality scan`):
  jsonl/ndjson (a row per line, blank lines included), csv (a row per record), parquet
  (pyarrow batches) or, for any other suffix, plain text (a row per line, in chunks of whole
  lines that carry the previous chunk's last lines, for multi-line secrets).
- `read_column` reads it whole (`contamination check`, `eval register`): JSON Lines (a row
  per non-blank line; a `.json` file may hold one array of objects), csv and parquet through
  polars, or `.txt` (a row per line; a blank line has no text).

Each also compressed (`.gz`, `.bz2`, `.xz`, `.zst`: streamed within the expansion cap of
`files.open_binary`). Rows are numbered from 0, bad rows included. A bad row never
stops a read: it is reported as (index, why), printed with `files.bad_row`. A file that
cannot be read raises `files.ReadError` naming it and what to do.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import TextIOWrapper
from pathlib import Path

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest import files
from pipeline.ingest.files import ReadError

BATCH_ROWS = 20_000
BATCH_BYTES = 16 * 2**20
CHUNK_BYTES = 8 * 2**20  # plain text: new lines in a chunk
CHUNK_OVERLAP_BYTES = 64 * 2**10  # ... and the lines carried into the next one
SCAN_HINT = "pass the field that holds the text with --text-field"


@dataclass
class Batch:
    """Texts of consecutive rows starting at row `first`; a bad row holds None.

    `raw` holds, by position in `texts`, the raw text of bad rows, to be scanned as they
    are. For plain text the rows are lines, and `carried` holds the lines just before them
    (from the previous chunk, already in a batch) so that a text spread over lines and cut
    by the previous chunk's end is whole in one of them; None for other formats."""

    first: int
    texts: list[str | None]
    bad_rows: list[tuple[int, str]] = field(default_factory=list)  # (index, why)
    rows_without_field: int = 0
    raw: dict[int, str] = field(default_factory=dict)
    carried: list[str] | None = None


def field_batches(
    path: Path,
    text_field: str,
    chunk_bytes: int = CHUNK_BYTES,
    overlap_bytes: int = CHUNK_OVERLAP_BYTES,
) -> Iterator[Batch]:
    """The batches of a file, by its suffix; ReadError when no row has the field."""
    fmt = files.format_of(path)
    if fmt == "jsonl":
        batches = _jsonl_batches(path, text_field)
    elif fmt == "csv":
        batches = _csv_batches(path, text_field)
    elif fmt == "parquet":
        batches = _parquet_batches(path, text_field)
    else:
        batches = _text_batches(path, chunk_bytes, overlap_bytes)
    rows = rows_without_field = 0
    for batch in batches:
        rows += len(batch.texts)
        rows_without_field += batch.rows_without_field
        yield batch
    if rows and rows_without_field == rows:
        raise ReadError(files.missing_field(path, text_field, [], SCAN_HINT))


@contextmanager
def _read_errors(path: Path, lines: files.Lines) -> Iterator[None]:
    """Any error while reading is a ReadError naming the file and the row."""
    try:
        yield
    except ReadError:
        raise
    except Exception as error:  # whatever it is, the row cannot be read
        raise ReadError(f"{path}: cannot read row {lines.count}: {error}") from error


def _line_batches(lines: files.Lines) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line.rstrip(b"\r"))
        size += len(batch[-1]) + 1
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _text_batches(path: Path, chunk_bytes: int, overlap_bytes: int) -> Iterator[Batch]:
    """Chunks of whole lines: `chunk_bytes` of new lines, with the previous chunk's last
    lines (up to `overlap_bytes`) carried before them."""
    lines = files.Lines(path)
    chunk: list[str] = []
    carried: list[str] = []
    first = size = 0
    with _read_errors(path, lines):
        for raw in lines:
            raw = raw.rstrip(b"\r")
            chunk.append(raw.decode("utf-8", errors="replace"))
            size += len(raw) + 1
            if size >= chunk_bytes:
                yield Batch(first, list(chunk), carried=carried)
                scanned, carried, kept = carried + chunk, [], 0
                for line in reversed(scanned):
                    if kept + len(line) >= overlap_bytes:
                        break
                    carried.append(line)
                    kept += len(line) + 1
                carried.reverse()
                first += len(chunk)
                chunk, size = [], 0
    if chunk:
        yield Batch(first, chunk, carried=carried)


def _jsonl_text(line: bytes, text_field: str) -> tuple[str | None, str | None]:
    """(text, why the row is bad); a null text is no text, not a bad row."""
    record, why = files.json_object(line)
    if record is None:
        return None, why
    if text_field not in record:
        return None, f"no field {text_field!r}"  # counted as rows without the field
    value = record[text_field]
    if value is not None and not isinstance(value, str):
        return None, f"field {text_field!r} is not a string"
    return value, None


def _jsonl_batches(path: Path, text_field: str) -> Iterator[Batch]:
    """A line that is not a JSON object (broken, blank or a bare value), lacks the text
    field or holds a text that is not a string is a bad row, its raw line kept."""
    lines = files.Lines(path)
    first = 0
    with _read_errors(path, lines):
        for chunk in _line_batches(lines):
            batch = Batch(first, [])
            for offset, line in enumerate(chunk):
                text, why = _jsonl_text(line, text_field)
                batch.texts.append(text)
                if why:
                    batch.bad_rows.append((first + offset, why))
                    batch.rows_without_field += why.startswith("no field")
                    batch.raw[offset] = line.decode("utf-8", errors="replace")
            yield batch
            first += len(chunk)


def _csv_batches(path: Path, text_field: str) -> Iterator[Batch]:
    """A row with another number of fields than the header is a bad row, its raw text (its
    lines, without the last line ending) kept."""
    with (
        files.open_binary(path) as binary,
        TextIOWrapper(binary, encoding="utf-8", errors="replace", newline="") as handle,
    ):
        consumed: list[str] = []  # the lines of the row being read

        def lines() -> Iterator[str]:
            for line in handle:
                consumed.append(line)
                yield line

        reader = csv.reader(lines())
        read = -1  # data rows read; -1 while reading the header
        try:
            header = next(reader, [])
            if text_field not in header:
                raise ReadError(files.missing_field(path, text_field, header, SCAN_HINT))
            column = header.index(text_field)
            consumed.clear()
            batch = Batch(read := 0, [])
            for row in reader:
                if len(row) == len(header):
                    batch.texts.append(row[column])
                else:
                    batch.raw[len(batch.texts)] = "".join(consumed).rstrip("\r\n")
                    batch.texts.append(None)
                    why = f"{len(row)} fields, the header has {len(header)}"
                    batch.bad_rows.append((read, why))
                consumed.clear()
                read += 1
                if len(batch.texts) >= BATCH_ROWS:
                    yield batch
                    batch = Batch(read, [])
            if batch.texts:
                yield batch
        except ReadError:
            raise
        except Exception as error:  # csv.Error (a field over 128 KiB), …
            where = "the header" if read < 0 else f"row {read}"
            raise ReadError(
                f"{path}: cannot read {where} (line {reader.line_num}): {error}"
            ) from error


def _parquet_batches(path: Path, text_field: str) -> Iterator[Batch]:
    if files.compression_of(path) is None:
        yield from _parquet_file_batches(path, pq.ParquetFile(path), text_field)
        return
    # Parquet seeks: a compressed one is read whole (within the expansion cap) to seek in
    data = pa.BufferReader(files.read_bytes(path))
    yield from _parquet_file_batches(path, pq.ParquetFile(data), text_field)


def _parquet_file_batches(path: Path, parquet: pq.ParquetFile, text_field: str) -> Iterator[Batch]:
    """When the text column is not text (numbers, lists, structs, bytes), each row holding a
    value there is a bad row, its values rendered as one JSON object kept as its raw text."""
    schema = parquet.schema_arrow
    if text_field not in schema.names:
        raise ReadError(files.missing_field(path, text_field, schema.names, SCAN_HINT))
    kind = schema.field(text_field).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    is_text = kind == pa.null() or any(
        check(kind) for check in (pa.types.is_string, pa.types.is_large_string, _is_string_view)
    )
    first = 0
    try:
        columns = [text_field] if is_text else None  # a bad row is rendered whole
        for record_batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            values = record_batch.column(text_field)
            if is_text:
                yield Batch(first, pl.from_arrow(values).cast(pl.String).to_list())
            else:
                yield _bad_parquet_batch(first, record_batch, text_field, f"{kind}")
            first += record_batch.num_rows
    except Exception as error:  # a corrupt page, a value that cannot be rendered
        raise ReadError(f"{path}: cannot read the rows from {first}: {error}") from error


def _is_string_view(kind: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return check is not None and check(kind)


def _bad_parquet_batch(
    first: int, record_batch: pa.RecordBatch, text_field: str, kind: str
) -> Batch:
    batch = Batch(first, [None] * record_batch.num_rows)
    why = f"field {text_field!r} is not a string ({kind})"
    for offset, row in enumerate(record_batch.to_pylist()):
        if row[text_field] is not None:
            batch.bad_rows.append((first + offset, why))
            batch.raw[offset] = orjson.dumps(row, default=_json_default).decode()
    return batch


def _json_default(value: object) -> str:
    """Bytes as text (invalid UTF-8 replaced); anything else orjson cannot render by str()."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


# ---------------------------------------------------------------------------------------------
# Whole columns

COLUMN_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
COLUMN_FORMATS |= {".parquet": "parquet", ".txt": "text"}


@dataclass
class Rows:
    """The texts of one file: `texts[i]` is row i's text, None for a bad or blank row."""

    path: Path
    texts: list[str | None]
    bad: list[tuple[int, str]]  # (index, why)
    blank: int = 0  # .txt lines without text


def read_column(path: Path, name: str, option: str, numbers_as_text: bool = False) -> Rows:
    """Field `name` of every row (`option` is the command's option that names it);
    `numbers_as_text` also takes numbers (ids), as text."""
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise ReadError(f"{path}: {what}; give the path of a .jsonl, .csv, .parquet or .txt file")
    fmt = files.format_of(path, COLUMN_FORMATS)
    if fmt is None:
        raise ReadError(
            f"{path}: unknown format {files.inner_suffix(path) or path.name!r}; contamination "
            f"check reads {', '.join(COLUMN_FORMATS)} files, each also compressed "
            f"({', '.join(files.COMPRESSED_SUFFIXES)})"
        )
    hint = f"pass the right one with {option}"
    try:
        if fmt == "jsonl":
            return _jsonl_column(path, name, hint, numbers_as_text)
        if fmt == "text":
            return _text_column(path)
        return _frame_column(path, fmt, name, option, numbers_as_text)
    except ReadError:
        raise
    except (OSError, EOFError) as error:
        raise ReadError(f"{path}: cannot read it ({error})") from None


def _json_rows(path: Path) -> Iterator[bytes]:
    """The non-blank lines; or, for a file holding one JSON array, its items."""
    first = True
    for number, line in enumerate(files.Lines(path)):
        line = line.removeprefix(b"\xef\xbb\xbf") if number == 0 else line
        if not line.strip():
            continue
        if first and line.lstrip()[:1] == b"[":  # the file is one array
            data = files.read_bytes(path).removeprefix(b"\xef\xbb\xbf")
            try:
                values = orjson.loads(data)
            except orjson.JSONDecodeError as error:
                raise ReadError(
                    f"{path}: not valid JSON ({error}); give JSON Lines or one array of objects"
                ) from None
            yield from (orjson.dumps(value) for value in values) if isinstance(values, list) else ()
            return
        first = False
        yield line


def _jsonl_column(path: Path, name: str, hint: str, numbers: bool) -> Rows:
    """A row without the field, or with null there, has no field; one holding another type
    than a string (or a number, with `numbers`) is a bad row too."""
    texts: list[str | None] = []
    bad: list[tuple[int, str]] = []
    objects = with_field = 0
    for index, line in enumerate(_json_rows(path)):
        value, why = files.json_object(line)
        text = None if value is None else value.get(name)
        if value is not None:
            objects += 1
            with_field += name in value
            if numbers and isinstance(text, int | float) and not isinstance(text, bool):
                text = str(text)
            if not isinstance(text, str):
                why = f"no field {name!r}" if text is None else f"{name!r} is not a string"
        if why:
            bad.append((index, why))
            text = None
        texts.append(text)
    if objects and not with_field:
        raise ReadError(f"{path}: no row has a field {name!r}; {hint}")
    return Rows(path, texts, bad)


def _frame_column(path: Path, fmt: str, name: str, option: str, numbers: bool) -> Rows:
    data = io.BytesIO(files.read_bytes(path))
    try:
        if fmt == "csv":
            frame = pl.read_csv(data, infer_schema=False, encoding="utf8-lossy")
        else:
            frame = pl.read_parquet(data)
    except pl.exceptions.PolarsError as error:
        if fmt == "csv":
            raise ReadError(
                f"{path}: cannot read it as CSV ({error}); fix the file or convert it to .jsonl"
            ) from None
        raise ReadError(f"{path}: cannot read it as Parquet ({error})") from None
    if name not in frame.columns:
        raise ReadError(
            files.missing_field(path, name, frame.columns, f"pass the right one with {option}")
        )
    column = frame[name]
    if numbers and column.dtype.is_numeric():
        column = column.cast(pl.String)
    if column.dtype not in (pl.String, pl.Categorical, pl.Enum):
        kind = column.dtype
        raise ReadError(
            f"{path}: field {name!r} holds {kind}, not text; pass a text field with {option}"
        )
    texts = column.cast(pl.String).to_list()
    bad = [(index, f"no value in {name!r}") for index, text in enumerate(texts) if text is None]
    return Rows(path, texts, bad)


def _text_column(path: Path) -> Rows:
    """Every line is a row; a blank line has no text and is skipped."""
    texts: list[str | None] = []
    for number, line in enumerate(files.Lines(path)):
        text = line.decode("utf-8", errors="replace")
        text = (text.removeprefix("\ufeff") if number == 0 else text).removesuffix("\r")
        texts.append(text if text.strip() else None)
    return Rows(path, texts, [], blank=sum(text is None for text in texts))
