"""`thresher contamination check`: which training rows repeat an evaluation set.

Both files are read by the reader the scans share (`pipeline.ingest.field_rows`): JSON Lines
(`.jsonl`, `.ndjson`, `.json`; a `.json` file holding one JSON array of objects works too),
`.csv`, `.parquet` or `.txt` (one text per line), each also compressed (`.jsonl.gz`, `.bz2`,
`.xz`, `.zst`: the format is the suffix before it). The text is the `--text-field` of each row
(`--eval-text-field` for the evaluation file; a `.txt` file has none). Texts are normalized as
ingest does, then checked with pipeline/text/eval_index.py as a run checks them: `exact` (same
normalized text), `ngram` (shared word n-grams, 13 words unless `--ngram`, covering a fifth of
the item's words; n-grams held by more than 10 training rows or 10 items are boilerplate and
count only towards a whole copy; evaluation items shorter than n words need 80% of their
5-grams, shorter than 5 words are skipped), `minhash` (Jaccard similarity of 5-word
shingles of at least 0.8) and, when asked for, `embedding` (cosine of all-MiniLM-L6-v2 vectors
of at least 0.85; about 4 ms a text on a CPU, plus loading the model).

Rows: an `index` is the 0-based position among all rows of a file, bad rows included; a
JSON Lines row is a non-blank line, a CSV or Parquet row a data row, a `.txt` row a line
(blank lines have no text and are skipped, with a note). A row that cannot be read (not JSON,
no text field, a text that is not a string, nothing left after normalization) is a bad row:
listed on stderr, not checked; the other rows still are, and the run exits 2.

Output: with `--json`, one line per contaminated training row on stdout, sorted by index:
`{"index", "eval_index", "method", "score"}`, its strongest match (highest score; a tie goes
to exact, then ngram, minhash, embedding); without it, a table on stderr. A summary on
stderr: per method, the training rows it flags and the evaluation items they repeat, and the
items the n-gram method skips. Exit 0 clean, 1 contamination found, 2 error (a file or a row
that cannot be read, a bad option).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.table import Table

from flows.cli_common import JsonOption, checked, emit, fail, stderr
from pipeline.ingest.field_rows import Rows, read_column
from pipeline.ingest.files import bad_row

METHOD_NAMES = ("exact", "ngram", "minhash", "embedding")
SHOWN_BAD_ROWS = 20
SHOWN_MATCHES = 50  # table rows without --json

contamination_app = typer.Typer(
    help="Check training data against evaluation sets (exit 1 when contamination is found).",
    no_args_is_help=True,
)


@contamination_app.callback()
def _group() -> None:
    """Keeps `check` a subcommand (`contamination check`) although it is the only one."""


@contamination_app.command()
def check(
    train: Annotated[
        Path,
        typer.Option(
            "--train",
            help="Training data: .jsonl, .csv, .parquet or .txt (also .gz, .bz2, .xz, .zst).",
        ),
    ],
    eval_path: Annotated[Path, typer.Option("--eval", help="Evaluation set, in the same formats.")],
    text_field: Annotated[str, typer.Option(help="Field holding the text.")] = "text",
    eval_text_field: Annotated[
        str | None, typer.Option(help="Field holding the evaluation text [--text-field].")
    ] = None,
    methods: Annotated[
        str, typer.Option(help="Comma-separated: exact, ngram, minhash, embedding (slow).")
    ] = "exact,ngram,minhash",
    ngram: Annotated[int | None, typer.Option("--ngram", help="Words per n-gram [13].")] = None,
    as_json: JsonOption = False,
) -> None:
    """Find training rows that repeat evaluation items: exactly, by a shared word n-gram, by
    MinHash similarity or by embedding similarity. Exit 0 clean, 1 found, 2 error."""
    from pipeline.core.errors import ThresherError
    from pipeline.text.eval_index import ContaminationIndex, ignore_common, strongest
    from pipeline.text.eval_sets import eval_items

    started = time.perf_counter()
    settings = _methods(methods, ngram)
    train_rows = checked(read_column, train, text_field, "--text-field")
    eval_rows = checked(read_column, eval_path, eval_text_field or text_field, "--eval-text-field")
    try:
        items = _good(eval_rows, eval_items)
        if items.height == 0:
            fail(f"{eval_path}: no evaluation row has a text; there is nothing to check against")
        records = _good(train_rows, eval_items)
        index = ContaminationIndex.build(items, settings)
        ignore_common([index], [records["text"]])
        matches = index.matches(records.select("text", "content_hash"))
    except ThresherError as error:
        fail(str(error))
    # rows and items back to input indexes
    position = pl.col("item_id").cast(pl.Int64)
    matches = matches.with_columns(
        records["item_id"].cast(pl.Int64).gather(matches["row"]).alias("index"),
        position.alias("eval_index"),
    )
    best = strongest(matches).sort("index")
    if as_json:
        for row in best.select("index", "eval_index", "method", "score").iter_rows(named=True):
            emit(row)
    else:
        _table(best)
    for rows in (train_rows, eval_rows):
        _report_bad_rows(rows)
    _summary(train_rows, eval_rows, settings, index, matches, best, started)
    bad = train_rows.bad or eval_rows.bad
    raise typer.Exit(2 if bad else 1 if best.height else 0)


def _methods(names: str, ngram: int | None):
    from pydantic import ValidationError

    from pipeline.config import ContaminationMethods

    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in METHOD_NAMES]
    if unknown or not chosen:
        fail(
            f"--methods {names!r}: unknown method {', '.join(map(repr, unknown)) or 'none'}; "
            f"choose from {', '.join(METHOD_NAMES)}"
        )
    if ngram is not None and "ngram" not in chosen:
        stderr.print("note: --ngram is ignored without the ngram method", highlight=False)
    grams = {} if ngram is None else {"n": ngram, "short_n": min(5, ngram)}
    settings = {
        "exact": "drop" if "exact" in chosen else None,
        "ngram": grams if "ngram" in chosen else None,
        "minhash": {} if "minhash" in chosen else None,
        "embedding": {} if "embedding" in chosen else None,
    }
    try:
        return ContaminationMethods.model_validate(settings)
    except ValidationError as error:
        problems = [
            f"{'.'.join(map(str, item['loc']))}: {item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        ]
        fail(f"--ngram {ngram}: " + "; ".join(problems))


def _good(rows: Rows, eval_items) -> pl.DataFrame:
    """(item_id: the row's index, text, content_hash) of the rows with a text; a row whose
    text normalizes to nothing becomes a bad row."""
    from pipeline.core.normalize import normalize_text

    texts = pl.Series(rows.texts, dtype=pl.String)
    normalized = normalize_text(texts)
    empty = (texts.is_not_null() & (normalized == "")).fill_null(False)
    rows.bad += [(index, "no text but whitespace") for index in empty.arg_true().to_list()]
    rows.bad.sort()
    keep = (normalized.is_not_null() & (normalized != "")).fill_null(False)
    indexes = pl.Series(range(texts.len()), dtype=pl.Int64).filter(keep)
    return eval_items(texts.filter(keep), indexes.cast(pl.String))


# ---------------------------------------------------------------------------------------------
# Output


def _table(best: pl.DataFrame) -> None:
    if not best.height:
        return
    table = Table("index", "eval index", "method", "score", "matched words", title=None)
    for row in best.head(SHOWN_MATCHES).iter_rows(named=True):
        span = row["span"] or ""
        table.add_row(
            str(row["index"]),
            str(row["eval_index"]),
            row["method"],
            f"{row['score']:.3f}",
            span if len(span) <= 60 else span[:59] + "…",
        )
    stderr.print(table)
    if best.height > SHOWN_MATCHES:
        stderr.print(f"... and {best.height - SHOWN_MATCHES} more; --json lists every one")


def _report_bad_rows(rows: Rows) -> None:
    for index, why in rows.bad[:SHOWN_BAD_ROWS]:
        stderr.print(bad_row(rows.path, index, why), highlight=False)
    if len(rows.bad) > SHOWN_BAD_ROWS:
        stderr.print(f"{rows.path}: ... and {len(rows.bad) - SHOWN_BAD_ROWS} more bad rows")
    if rows.bad:
        stderr.print(
            f"{rows.path}: {len(rows.bad)} row(s) cannot be read and were not checked: fix or "
            "remove them and run again",
            highlight=False,
        )
    if rows.blank:
        stderr.print(f"note: {rows.path}: {rows.blank} blank line(s) skipped", highlight=False)


def _summary(train_rows, eval_rows, settings, index, matches, best, started) -> None:
    checked = len(train_rows.texts) - len(train_rows.bad) - train_rows.blank
    items = index.items.height
    stderr.print(
        f"{train_rows.path}: {len(train_rows.texts)} rows ({checked} checked) against "
        f"{eval_rows.path}: {items} evaluation items",
        highlight=False,
    )
    for method in METHOD_NAMES:
        if getattr(settings, method) is None:
            continue
        found = matches.filter(pl.col("method") == method)
        line = (
            f"  {method}: {found['row'].n_unique()} training row(s) flagged, "
            f"{found['item_id'].n_unique()} evaluation item(s) contaminated"
        )
        if method == "ngram":
            line += f"; {index.skipped_short} item(s) skipped (fewer than {settings.ngram.short_n} words)"
        stderr.print(line, highlight=False)
    contaminated = best["eval_index"].n_unique()
    stderr.print(
        f"{best.height} training row(s) contaminated, {contaminated} evaluation item(s) "
        f"repeated; {time.perf_counter() - started:.2f} s",
        highlight=False,
    )
