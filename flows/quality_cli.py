"""`thresher quality explain` (the quality stage alone on a sample of a config's sources) and
`thresher quality scan` (any jsonl, csv, parquet or text file): per record the profile, the
language and its score, the decision and the measured values; nothing is published.

JSON lines (`--json`) carry every measured quantity; the table shows the main ones. Record
text is never printed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer
from rich.console import Console
from rich.table import Table

from flows.cli_common import JsonOption, emit, fail, for_console, stderr
from pipeline.core.errors import ThresherError

quality_app = typer.Typer(help="Quality filters and language identification.", no_args_is_help=True)

SHOWN = ("profile", "language", "language_score", "words", "mean_word_length", "removed_lines")


@quality_app.command("explain")
def quality_explain(
    config: Annotated[Path, typer.Option("--config", "-c", help="Run config (YAML).")],
    source: Annotated[str | None, typer.Option("--source", help="Only this source.")] = None,
    sample: Annotated[int, typer.Option("--sample", help="Records per source (first N).")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Run the quality stage alone on the first records of each source; print each decision."""
    from pipeline.config import load_run_config
    from pipeline.ingest.stage import ingest
    from pipeline.quality.stage import measure
    from pipeline.stage import RunContext

    try:
        cfg = load_run_config(config)
        sources = [s for s in cfg.source_list if source in (None, s.name)]
        if not sources:
            fail(f"no source {source!r} in {config}")
        with tempfile.TemporaryDirectory() as scratch:
            ctx = RunContext(run_id="explain", run_dir=Path(scratch), config=cfg, config_hash="")
            records = (
                ingest(sources, ctx, Path(scratch) / "ingest", cfg.ingest)
                .frame.select("record_id", "source", "text")
                .collect()
            )
        picked = records.group_by("source", maintain_order=True).head(sample)
        measured = measure(picked, cfg.quality).join(
            picked.select("record_id", "source"), on="record_id", maintain_order="left"
        )
    except ThresherError as error:
        fail(str(error))
    _print(measured, "record_id", as_json)


@quality_app.command("scan")
def quality_scan(
    path: Path,
    text_field: Annotated[
        str, typer.Option("--text-field", help="Field holding the text.")
    ] = "text",
    profile: Annotated[
        str, typer.Option("--profile", help="prose, short_messages, code or none.")
    ] = "prose",
    languages: Annotated[
        str | None, typer.Option("--languages", help="Allowed languages, e.g. en,de.")
    ] = None,
    candidates: Annotated[
        str | None,
        typer.Option("--candidates", help="The languages the file may hold, e.g. en,de,fr."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Score every record of a file: language, quality values and the reason it would be
    dropped (exit 1 if any would be)."""
    from pipeline.config import QUALITY_PROFILES, QualityConfig
    from pipeline.ingest.field_rows import field_batches
    from pipeline.ingest.files import ReadError
    from pipeline.quality.stage import measure

    if profile not in QUALITY_PROFILES:
        fail(f"--profile must be one of {', '.join(QUALITY_PROFILES)}, not {profile!r}")
    if not path.exists():
        fail(f"{path}: no such file")
    allowed = [code.strip() for code in languages.split(",")] if languages else None
    among = [code.strip() for code in candidates.split(",")] if candidates else None
    try:
        cfg = QualityConfig(
            default_profile=profile, language={"allow": allowed, "candidates": among}
        )
    except ValueError as error:
        fail(f"--languages/--candidates: {error}")
    texts: list[str | None] = []
    try:
        for batch in field_batches(path, text_field):
            texts.extend(batch.texts)
    except ReadError as error:
        fail(str(error))
    records = pl.DataFrame(
        {"record_id": [str(i) for i in range(len(texts))], "source": "file", "text": texts},
        schema={"record_id": pl.String, "source": pl.String, "text": pl.String},
    ).filter(pl.col("text").is_not_null())
    try:
        measured = measure(records, cfg)
    except ValueError as error:  # a candidate py3langid does not know
        fail(f"--candidates: {error}")
    measured = measured.with_columns(pl.col("record_id").cast(pl.Int64).alias("index")).sort(
        "index"
    )
    _print(measured, "index", as_json)
    if measured["reason"].is_not_null().any():
        raise typer.Exit(1)


def _print(measured: pl.DataFrame, key: str, as_json: bool) -> None:
    hidden = {"text", "removed"}
    table = Table(key, "source", *SHOWN, "decision")
    for row in measured.iter_rows(named=True):
        if as_json:
            emit({k: _plain(v) for k, v in row.items() if k not in hidden})
            continue
        cells = (row[key], row.get("source") or "-", *(_cell(row.get(name)) for name in SHOWN))
        # a table's cells are markup; a source's name and a record's id come from outside
        table.add_row(*map(for_console, cells), row["reason"] or "kept")
    if not as_json:
        Console().print(table)
    dropped = measured.filter(pl.col("reason").is_not_null()).height
    stderr.print(f"{measured.height} record(s): {dropped} would be dropped")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _plain(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value
