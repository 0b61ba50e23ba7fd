"""`thresher secrets scan`: a standalone secret scanner over jsonl, csv, parquet or plain text,
also gzip-compressed (`.jsonl.gz`, `.csv.gz`, `.txt.gz`, …: read by the suffix before `.gz`).

Rows are read in batches (bounded memory) and scanned with `pipeline.secrets.find_secrets`.
Plain text is read in chunks of whole lines (about 8 MB each): every line is a row, and the
rules whose matches may hold a line end (PEM private keys) also run over the chunk as one
text, with the previous chunk's last 64 KiB of lines before it, so a key spread over lines
is found even where a chunk ends. Each finding is reported at the 0-based line where it
starts, with offsets from that line's start (its end may lie past that line's end).

A bad row (a jsonl line that is not a JSON object, lacks the text field or holds a text that is
not a string; a csv row with the wrong number of fields; a parquet row whose text column is not
text) is listed on stderr and its raw text is scanned as it is: the line (the lines of a csv
row), or for parquet the row's values rendered as one JSON object. Its findings carry
`"raw": true`, with offsets into that raw text; they count as findings (exit 1) like any other.
With `--json`, one line per row with findings on stdout; everything else on stderr. A secret
is never printed in clear: type, row, offsets and a lead of at most 4 characters (at most a
quarter of the secret). Exit 0 clean, 1 secrets found, 2 error (any file or row that cannot
be read). Works as a pre-commit hook (several paths accepted).
"""

from __future__ import annotations

import bisect
import csv
import gzip
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import TextIOWrapper
from pathlib import Path
from typing import IO, Annotated

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.table import Table

from pipeline.text.secrets import LEAD_CHARS, RULES, find_secrets
from pipeline.text.text_scan import SpanScanner

BATCH_ROWS = 20_000
BATCH_BYTES = 16 * 2**20
CHUNK_BYTES = 8 * 2**20  # plain text: new lines scanned as one text
CHUNK_OVERLAP_BYTES = 64 * 2**10  # ... and carried into the next chunk

secrets_app = typer.Typer(
    help="Find credentials and secrets in text data (exit 1 when any are found).",
    no_args_is_help=True,
)
stderr = Console(stderr=True, soft_wrap=True, highlight=False)


@secrets_app.callback()
def _group() -> None:
    """Keeps `scan` a subcommand (`secrets scan`) although it is the only one."""


class ScanError(Exception):
    """The input cannot be scanned (missing file, missing text field, unreadable row)."""


@dataclass
class Batch:
    """Texts of consecutive rows starting at row `first`; a bad row holds None.

    `raw` holds, by position in `texts`, the raw text of bad rows that are scanned as they
    are. For plain text the rows are lines, and `carried` holds the lines just before them
    (from the previous chunk, already scanned as rows) so that a secret spread over lines
    and cut by the previous chunk's end is found whole; None for other formats."""

    first: int
    texts: list[str | None]
    bad_rows: list[tuple[int, str]] = field(default_factory=list)  # (index, why)
    rows_without_field: int = 0
    raw: dict[int, str] = field(default_factory=dict)
    carried: list[str] | None = None


@dataclass
class Output:
    as_json: bool
    show_path: bool  # several files: each JSON line and table row names its file
    table: Table


@dataclass
class Tally:
    rows: int = 0
    bad_rows: int = 0
    bytes: int = 0
    by_type: Counter[str] = field(default_factory=Counter)


def _inner_suffix(path: Path) -> str:
    """The suffix that says the format: the one before `.gz` for a gzip file."""
    suffix = path.suffix.lower()
    return path.with_suffix("").suffix.lower() if suffix == ".gz" else suffix


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed when its name ends with .gz."""
    with gzip.open(path, "rb") if path.suffix.lower() == ".gz" else path.open("rb") as handle:
        yield handle


class _Lines:
    """Lines (without their ending) of a file, counting them so that an error names its row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0  # lines read so far: the index of the next one

    def __iter__(self) -> Iterator[bytes]:
        with _open(self.path) as handle:
            for line in handle:
                yield line.rstrip(b"\r\n")
                self.count += 1


def _line_batches(lines: _Lines) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line) + 1
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _read_text(path: Path, _text_field: str) -> Iterator[Batch]:
    """Chunks of whole lines: CHUNK_BYTES of new lines, with the previous chunk's last lines
    (up to CHUNK_OVERLAP_BYTES) carried before them."""
    lines = _Lines(path)
    chunk: list[str] = []
    carried: list[str] = []
    first = size = 0
    with _read_errors(path, lines):
        for raw in lines:
            chunk.append(raw.decode("utf-8", errors="replace"))
            size += len(raw) + 1
            if size >= CHUNK_BYTES:
                yield Batch(first, list(chunk), carried=carried)
                scanned, carried, kept = carried + chunk, [], 0
                for line in reversed(scanned):
                    if kept + len(line) >= CHUNK_OVERLAP_BYTES:
                        break
                    carried.append(line)
                    kept += len(line) + 1
                carried.reverse()
                first += len(chunk)
                chunk, size = [], 0
    if chunk:
        yield Batch(first, chunk, carried=carried)


@contextmanager
def _read_errors(path: Path, lines: _Lines) -> Iterator[None]:
    """Any error while reading is a ScanError naming the file and the row."""
    try:
        yield
    except ScanError:
        raise
    except Exception as error:  # whatever it is, the row cannot be read
        raise ScanError(f"{path}: cannot read row {lines.count}: {error}") from error


def _jsonl_text(line: bytes, text_field: str) -> tuple[str | None, str | None]:
    """(text, why the row is bad)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, "not valid JSON"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    if text_field not in record:
        return None, f"no field {text_field!r}"  # _scan_file counts these by this prefix
    value = record[text_field]
    if value is not None and not isinstance(value, str):
        return None, f"field {text_field!r} is not a string"
    return value, None


def _read_jsonl(path: Path, text_field: str) -> Iterator[Batch]:
    """A line that is not a JSON object (broken, or a bare value), lacks the text field or
    holds a text that is not a string is a bad row whose raw line is scanned."""
    lines = _Lines(path)
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


def _read_csv(path: Path, text_field: str) -> Iterator[Batch]:
    """A row with another number of fields than the header is a bad row whose raw text (its
    lines, without the last line ending) is scanned."""
    with (
        _open(path) as binary,
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
                raise ScanError(_missing_field(path, text_field, header))
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
        except ScanError:
            raise
        except Exception as error:  # csv.Error (a field over 128 KiB), …
            where = "the header" if read < 0 else f"row {read}"
            raise ScanError(
                f"{path}: cannot read {where} (line {reader.line_num}): {error}"
            ) from error


def _read_parquet(path: Path, text_field: str) -> Iterator[Batch]:
    if path.suffix.lower() != ".gz":
        yield from _parquet_batches(path, pq.ParquetFile(path), text_field)
        return
    with _open(path) as handle:  # seeks in a gzip stream decompress again: slow but right
        yield from _parquet_batches(path, pq.ParquetFile(handle), text_field)


def _parquet_batches(path: Path, parquet: pq.ParquetFile, text_field: str) -> Iterator[Batch]:
    """When the text column is not text (numbers, lists, structs, bytes), each row holding a
    value there is a bad row whose values, rendered as one JSON object, are scanned."""
    schema = parquet.schema_arrow
    if text_field not in schema.names:
        raise ScanError(_missing_field(path, text_field, schema.names))
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
        raise ScanError(f"{path}: cannot read the rows from {first}: {error}") from error


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


def _missing_field(path: Path, text_field: str, fields: list[str]) -> str:
    return (
        f"{path}: no field {text_field!r} (fields: {', '.join(fields) or 'none'}); "
        "pass the field that holds the text with --text-field"
    )


def _reader(path: Path):
    suffix = _inner_suffix(path)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl
    return {".csv": _read_csv, ".parquet": _read_parquet}.get(suffix, _read_text)


def _scan_file(path: Path, text_field: str, out: Output, tally: Tally) -> None:
    rows = rows_without_field = 0
    for batch in _reader(path)(path, text_field):
        texts = pl.Series("text", batch.texts, dtype=pl.String)
        rows += len(batch.texts)
        rows_without_field += batch.rows_without_field
        tally.rows += len(batch.texts)
        tally.bytes += int(texts.str.len_bytes().sum() or 0)
        for index, why in batch.bad_rows:
            tally.bad_rows += 1
            stderr.print(f"{path}: bad row {index}: {why}")
        findings = find_secrets(texts).with_columns(pl.col("index").cast(pl.Int64), raw=False)
        if batch.carried is not None:
            findings = _with_multi_line(findings, batch.carried, batch.texts)
        if batch.raw:
            raw = pl.Series("raw", [batch.raw.get(i) for i in range(len(batch.texts))], pl.String)
            tally.bytes += int(raw.str.len_bytes().sum() or 0)
            found_raw = find_secrets(raw).with_columns(pl.col("index").cast(pl.Int64), raw=True)
            findings = pl.concat([findings, found_raw]).sort("index", "start")
        _report(path, batch.first, findings, out, tally)
    if rows and rows_without_field == rows:
        raise ScanError(_missing_field(path, text_field, []))


# The rules whose matches may hold a line end (private keys): they also run on whole chunks.
_MULTI_LINE = SpanScanner(
    [rule for rule in RULES if "\\n" in rule.pattern or "\\s" in rule.pattern]
)


def _with_multi_line(findings: pl.DataFrame, carried: list[str], lines: list[str]) -> pl.DataFrame:
    """Add the secrets that run over line ends in `carried + lines` joined by "\\n", each at the
    line where it starts (index relative to the first of `lines`, negative in the carried
    lines) with offsets from that line's start; a finding in the rows that lies within one
    of them is dropped (the multi-line rules are the most specific). Secrets that start in
    the carried lines and end there too were found in the previous chunk."""
    every = carried + lines
    starts, at = [], 0
    for line in every:
        starts.append(at)
        at += len(line) + 1
    found = _MULTI_LINE.scan(pl.Series(["\n".join(every)]), lead_chars=LEAD_CHARS)
    spans = []
    for row in found.iter_rows(named=True):
        line = bisect.bisect_right(starts, row["start"]) - 1
        crosses = row["end"] > starts[line] + len(every[line])
        if crosses and (line >= len(carried) or row["end"] > starts[len(carried)] - 1):
            spans.append((line - len(carried), row["type"], row["start"], row["end"], row["lead"]))
    if not spans:
        return findings
    outside = []
    for index, start, end in findings.select("index", "start", "end").iter_rows():
        at = starts[len(carried) + index]
        outside.append(all(at + end <= span[2] or at + start >= span[3] for span in spans))
    multi = pl.DataFrame(
        [
            (line, kind, start - starts[line + len(carried)], end - starts[line + len(carried)])
            + (lead, False)
            for line, kind, start, end, lead in spans
        ],
        schema=findings.schema,
        orient="row",
    )
    return pl.concat([findings.filter(pl.Series(outside, dtype=pl.Boolean)), multi]).sort(
        "index", "start"
    )


def _report(path: Path, first: int, findings: pl.DataFrame, out: Output, tally: Tally) -> None:
    tally.by_type.update(findings["type"].to_list())
    if out.as_json:
        grouped = findings.group_by("index", "raw", maintain_order=True).agg("type", "start", "end")
        for row in grouped.iter_rows(named=True):
            items = zip(row["type"], row["start"], row["end"], strict=True)
            line = {
                "index": first + row["index"],
                "findings": [{"type": t, "start": s, "end": e} for t, s, e in items],
            }
            line |= {"raw": True} if row["raw"] else {}
            sys.stdout.write(json.dumps(line | ({"path": str(path)} if out.show_path else {})))
            sys.stdout.write("\n")
        return
    for row in findings.iter_rows(named=True):
        index = f"{first + row['index']}{' (raw row)' if row['raw'] else ''}"
        cells = (index, row["type"], row["start"], row["end"], row["lead"] + "…")
        out.table.add_row(*([str(path)] if out.show_path else []), *map(str, cells))


def _count(n: int, noun: str) -> str:
    """`1 row`, `0 rows`, `2 rows`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _summary(tally: Tally, seconds: float) -> str:
    found = ", ".join(f"{kind} {n}" for kind, n in sorted(tally.by_type.items())) or "none"
    speed = tally.bytes / 1e6 / seconds if seconds > 0 else 0.0
    return (
        f"scanned {_count(tally.rows, 'row')} ({tally.bad_rows} bad), {tally.bytes / 1e6:.1f} MB "
        f"in {seconds:.2f} s ({speed:.1f} MB/s); secrets found: {found}"
    )


@secrets_app.command()
def scan(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Files: .jsonl/.ndjson, .csv, .parquet, each also as .gz; anything else "
            "is plain text, where a row is a line: a finding is reported at the 0-based line "
            "where it starts, its start and end counted in characters from that line's "
            "start (a multi-line secret, such as a private key, ends past that line)."
        ),
    ],
    text_field: Annotated[
        str, typer.Option("--text-field", help="Field holding the text (jsonl, csv, parquet).")
    ] = "text",
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per row with findings on stdout.")
    ] = False,
) -> None:
    """Scan files for secrets. Exit 0 clean, 1 secrets found, 2 error (a file or row that
    cannot be read).

    Plain text is also scanned in chunks of whole lines, so secrets spread over lines
    (private keys) are found; their end offset counts from the start of the line they start
    on and runs past its end. A bad row (jsonl: not a JSON object, no text field or a text
    that is not a string; csv: another number of fields than the header; parquet: a text
    column that is not text) is listed on stderr and its raw text scanned as it is: the line,
    or for parquet the row rendered as JSON (JSON lines of its findings carry "raw": true;
    they count as findings, exit 1)."""
    for path in paths:
        if path.is_dir():
            _fail(
                f"{path}: is a directory; `secrets scan` takes files: give the paths of jsonl, "
                "csv, parquet or text files (e.g. `thresher secrets scan DIR/*.jsonl`)"
            )
        if not path.is_file():
            _fail(f"{path}: no such file; give the path of a jsonl, csv, parquet or text file")
    show_path = len(paths) > 1
    columns = (["file"] if show_path else []) + ["row", "type", "start", "end", "lead"]
    out = Output(as_json, show_path, Table(*columns, title="secrets found"))
    tally = Tally()
    started = time.perf_counter()
    for path in paths:
        try:
            _scan_file(path, text_field, out, tally)
        except ScanError as error:
            _fail(str(error))
        except Exception as error:  # exit 2, never 1 ("found"), on any error
            _fail(f"{path}: cannot read: {type(error).__name__}: {error}")
    if out.table.rows:
        Console(file=sys.stdout, soft_wrap=True).print(out.table)
    stderr.print(_summary(tally, time.perf_counter() - started))
    raise typer.Exit(1 if tally.by_type else 0)


def _fail(message: str) -> None:
    stderr.print(f"error: {message}")
    raise typer.Exit(2)


# A hook that runs on a single file can also call the module directly.
if __name__ == "__main__":
    secrets_app()
