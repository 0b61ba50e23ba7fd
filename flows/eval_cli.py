"""`thresher eval register | list`: protected evaluation sets. flows.cli registers them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    WorkdirOption,
    checked,
    emit,
    fail,
    open_catalog,
    stderr,
    workdir_of,
)

eval_app = typer.Typer(help="Protected evaluation sets.", no_args_is_help=True)


@eval_app.command("register")
def eval_register(
    name: Annotated[str, typer.Argument(help="A name for the set, e.g. humaneval.")],
    path: Annotated[
        Path,
        typer.Argument(help="A .jsonl, .csv, .parquet or .txt file (also .gz, .bz2, .xz, .zst)."),
    ],
    text_field: Annotated[
        str, typer.Option("--text-field", help="The field holding the text.")
    ] = "text",
    id_field: Annotated[
        str | None,
        typer.Option("--id-field", help="The field naming each item (default: its row)."),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a set registered under this name.")
    ] = False,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store an evaluation set that every later run protects: its items, n-gram index,
    MinHash signatures (and embeddings, when the config's embedding check is on) in the work
    folder, their sha256s in the catalog."""
    import re

    from data_catalog import eval_sets
    from data_catalog.catalog import Catalog
    from pipeline.config import SLUG, ContaminationMethods, load_run_config

    if not re.match(SLUG, name):
        fail(f"{name!r} is not a valid name: use lower-case letters, digits, '.', '_' and '-'")
    methods = checked(load_run_config, config).contamination.methods if config else None
    texts, ids = read_items(path, text_field, id_field)
    catalog = Catalog.open(workdir_of(workdir, config))
    row, changed = checked(
        eval_sets.register,
        catalog,
        name,
        texts,
        ids,
        str(path.resolve()),
        text_field,
        methods or ContaminationMethods(),
        replace,
    )
    if as_json:
        emit(row)
    state = "registered" if changed else "unchanged: already registered with these items"
    stderr.print(
        f"evaluation set {name!r}: {row['items']} item(s) from {path} ({state}); files under "
        f"{catalog.workdir / row['path']}"
    )


def read_items(path: Path, text_field: str, id_field: str | None):
    """The texts (and ids) of an evaluation file; any unreadable row is an error: a protected
    set must be whole."""
    import polars as pl

    from pipeline.ingest.field_rows import read_column

    columns = [checked(read_column, path, text_field, "--text-field")]
    if id_field is not None:
        columns.append(checked(read_column, path, id_field, "--id-field", numbers_as_text=True))
    for rows in columns:
        if rows.bad:
            shown = "; ".join(f"row {index}: {why}" for index, why in rows.bad[:5])
            fail(
                f"{path}: {len(rows.bad)} unreadable row(s) ({shown}); fix them and register again"
            )
    texts = pl.Series(columns[0].texts, dtype=pl.String)
    keep = texts.is_not_null()  # blank lines of a .txt file are not items; ids stay row numbers
    ids = (
        pl.Series(columns[1].texts, dtype=pl.String)
        if id_field
        else pl.Series(range(texts.len())).cast(pl.String)
    )
    return texts.filter(keep), ids.filter(keep)


@eval_app.command("list")
def eval_list(
    workdir: WorkdirOption = None, config: ConfigOption = None, as_json: JsonOption = False
) -> None:
    """List the registered evaluation sets."""
    from data_catalog import eval_sets

    rows = eval_sets.registered(open_catalog(workdir, config))
    table = Table("name", "items", "source", "text field", "registered", "digest")
    for row in rows:
        if as_json:
            emit(row)
        table.add_row(
            row["name"],
            str(row["items"]),
            row["source"],
            row["text_field"],
            f"{row['registered_at']:%Y-%m-%d %H:%M}",
            row["digest"][:16],
        )
    if not as_json:
        Console().print(table)
    stderr.print(f"{len(rows)} evaluation set(s)")
