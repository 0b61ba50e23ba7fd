"""`thresher secrets scan`: a standalone secret scanner over jsonl, csv, parquet or plain text,
also compressed (`.jsonl.gz`, `.csv.bz2`, `.txt.xz`, `.jsonl.zst`: read by the suffix before).

Rows are read in batches (bounded memory) by `pipeline.ingest.field_rows`, the reader every
scan shares, and scanned with `pipeline.text.secrets.find_secrets`.
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
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.table import Table

from flows.cli_common import for_console, stderr, stdout
from pipeline.ingest import field_rows
from pipeline.ingest.field_rows import field_batches
from pipeline.ingest.files import ReadError, bad_row
from pipeline.text.secrets import LEAD_CHARS, RULES, find_secrets
from pipeline.text.text_scan import SpanScanner

CHUNK_BYTES = field_rows.CHUNK_BYTES  # plain text: new lines scanned as one text
CHUNK_OVERLAP_BYTES = field_rows.CHUNK_OVERLAP_BYTES  # ... and carried into the next chunk

secrets_app = typer.Typer(
    help="Find credentials and secrets in text data (exit 1 when any are found).",
    no_args_is_help=True,
)


@secrets_app.callback()
def _group() -> None:
    """Keeps `scan` a subcommand (`secrets scan`) although it is the only one."""


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


def _scan_file(path: Path, text_field: str, out: Output, tally: Tally) -> None:
    for batch in field_batches(path, text_field, CHUNK_BYTES, CHUNK_OVERLAP_BYTES):
        texts = pl.Series("text", batch.texts, dtype=pl.String)
        tally.rows += len(batch.texts)
        tally.bytes += int(texts.str.len_bytes().sum() or 0)
        for index, why in batch.bad_rows:
            tally.bad_rows += 1
            stderr.print(for_console(bad_row(path, index, why)), highlight=False)
        findings = find_secrets(texts).with_columns(pl.col("index").cast(pl.Int64), raw=False)
        if batch.carried is not None:
            findings = _with_multi_line(findings, batch.carried, batch.texts)
        if batch.raw:
            raw = pl.Series("raw", [batch.raw.get(i) for i in range(len(batch.texts))], pl.String)
            tally.bytes += int(raw.str.len_bytes().sum() or 0)
            found_raw = find_secrets(raw).with_columns(pl.col("index").cast(pl.Int64), raw=True)
            findings = pl.concat([findings, found_raw]).sort("index", "start")
        _report(path, batch.first, findings, out, tally)


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
        out.table.add_row(*map(for_console, ([path] if out.show_path else []) + list(cells)))


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
            help="Files: .jsonl/.ndjson, .csv, .parquet, each also as .gz, .bz2, .xz or .zst; anything else "
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
        except ReadError as error:  # a missing text field, an unreadable row
            _fail(str(error))
        except Exception as error:  # exit 2, never 1 ("found"), on any error
            _fail(f"{path}: cannot read: {type(error).__name__}: {error}")
    if out.table.rows:
        stdout.print(out.table)
    stderr.print(_summary(tally, time.perf_counter() - started))
    raise typer.Exit(1 if tally.by_type else 0)


def _fail(message: str) -> None:
    stderr.print(f"error: {for_console(message)}", highlight=False)
    raise typer.Exit(2)


# A hook that runs on a single file can also call the module directly.
if __name__ == "__main__":
    secrets_app()
