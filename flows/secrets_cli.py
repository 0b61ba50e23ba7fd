"""`thresher secrets scan`: a standalone secret scanner over jsonl, csv, parquet or plain text.

Rows are read in batches (bounded memory) and scanned with `pipeline.secrets.find_secrets`.
With `--json`, one line per row with findings on stdout; everything else on stderr. A secret
is never printed in clear: type, row, offsets and at most its first 4 characters.
Exit 0 clean, 1 secrets found, 2 error. Works as a pre-commit hook (several paths accepted).
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import orjson
import polars as pl
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.table import Table

from pipeline.secrets import find_secrets

BATCH_ROWS = 20_000
BATCH_BYTES = 16 * 2**20

secrets_app = typer.Typer(
    help="Find credentials and secrets in text data (exit 1 when any are found).",
    no_args_is_help=True,
)
stderr = Console(stderr=True, soft_wrap=True, highlight=False)


@secrets_app.callback()
def _group() -> None:
    """Keeps `scan` a subcommand (`secrets scan`) although it is the only one."""


class ScanError(Exception):
    """The input cannot be scanned at all (missing file, missing text field)."""


@dataclass
class Batch:
    """Texts of consecutive rows starting at row `first`; a bad row holds None."""

    first: int
    texts: list[str | None]
    bad_rows: list[tuple[int, str]] = field(default_factory=list)  # (index, why)
    rows_without_field: int = 0


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


def _line_batches(path: Path) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    with path.open("rb") as handle:
        for line in handle:
            batch.append(line.rstrip(b"\r\n"))
            size += len(line)
            if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def _read_text(path: Path, _text_field: str) -> Iterator[Batch]:
    first = 0
    for lines in _line_batches(path):
        yield Batch(first, [line.decode("utf-8", errors="replace") for line in lines])
        first += len(lines)


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
    first = 0
    for lines in _line_batches(path):
        batch = Batch(first, [])
        for offset, line in enumerate(lines):
            text, why = _jsonl_text(line, text_field)
            batch.texts.append(text)
            if why:
                batch.bad_rows.append((first + offset, why))
                batch.rows_without_field += why.startswith("no field")
        yield batch
        first += len(lines)


def _read_csv(path: Path, text_field: str) -> Iterator[Batch]:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        if text_field not in header:
            raise ScanError(_missing_field(path, text_field, header))
        column = header.index(text_field)
        batch = Batch(0, [])
        for index, row in enumerate(reader):
            if len(row) == len(header):
                batch.texts.append(row[column])
            else:
                batch.texts.append(None)
                batch.bad_rows.append((index, f"{len(row)} fields, the header has {len(header)}"))
            if len(batch.texts) >= BATCH_ROWS:
                yield batch
                batch = Batch(index + 1, [])
        if batch.texts:
            yield batch


def _read_parquet(path: Path, text_field: str) -> Iterator[Batch]:
    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    if text_field not in names:
        raise ScanError(_missing_field(path, text_field, names))
    first = 0
    for record_batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=[text_field]):
        column = pl.from_arrow(record_batch.column(0))
        texts = column.cast(pl.String).to_list()
        yield Batch(first, texts)
        first += len(texts)


def _missing_field(path: Path, text_field: str, fields: list[str]) -> str:
    return (
        f"{path}: no field {text_field!r} (fields: {', '.join(fields) or 'none'}); "
        "pass the field that holds the text with --text-field"
    )


def _reader(path: Path):
    suffix = path.suffix.lower()
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
        _report(path, batch.first, find_secrets(texts), out, tally)
    if rows and rows_without_field == rows:
        raise ScanError(_missing_field(path, text_field, []))


def _report(path: Path, first: int, findings: pl.DataFrame, out: Output, tally: Tally) -> None:
    tally.by_type.update(findings["type"].to_list())
    if out.as_json:
        grouped = findings.group_by("index", maintain_order=True).agg("type", "start", "end")
        for row in grouped.iter_rows(named=True):
            items = zip(row["type"], row["start"], row["end"], strict=True)
            line = {
                "index": first + row["index"],
                "findings": [{"type": t, "start": s, "end": e} for t, s, e in items],
            }
            sys.stdout.write(json.dumps(line | ({"path": str(path)} if out.show_path else {})))
            sys.stdout.write("\n")
        return
    for row in findings.iter_rows(named=True):
        cells = (first + row["index"], row["type"], row["start"], row["end"], row["lead"] + "…")
        out.table.add_row(*([str(path)] if out.show_path else []), *map(str, cells))


def _summary(tally: Tally, seconds: float) -> str:
    found = ", ".join(f"{kind} {n}" for kind, n in sorted(tally.by_type.items())) or "none"
    speed = tally.bytes / 1e6 / seconds if seconds > 0 else 0.0
    return (
        f"scanned {tally.rows} rows ({tally.bad_rows} bad), {tally.bytes / 1e6:.1f} MB "
        f"in {seconds:.2f} s ({speed:.1f} MB/s); secrets found: {found}"
    )


@secrets_app.command()
def scan(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Files: .jsonl/.ndjson, .csv, .parquet; anything else is plain "
            "text, one row per line."
        ),
    ],
    text_field: Annotated[
        str, typer.Option("--text-field", help="Field holding the text (jsonl, csv, parquet).")
    ] = "text",
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per row with findings on stdout.")
    ] = False,
) -> None:
    """Scan files for secrets. Exit 0 clean, 1 secrets found, 2 error."""
    for path in paths:
        if not path.is_file():
            _fail(f"{path}: no such file; give the path of a jsonl, csv, parquet or text file")
    show_path = len(paths) > 1
    columns = (["file"] if show_path else []) + ["row", "type", "start", "end", "lead"]
    out = Output(as_json, show_path, Table(*columns, title="secrets found"))
    tally = Tally()
    started = time.perf_counter()
    try:
        for path in paths:
            _scan_file(path, text_field, out, tally)
    except ScanError as error:
        _fail(str(error))
    except (OSError, pl.exceptions.PolarsError, ValueError) as error:
        _fail(f"cannot read {', '.join(map(str, paths))}: {error}")
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
