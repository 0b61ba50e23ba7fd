"""`thresher catalog card HASH`: write the dataset cards of a published version. flows.cli
registers it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    RefArgument,
    WorkdirOption,
    checked,
    emit,
    find_version,
    stderr,
)


def card(
    ref: RefArgument,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Folder to write to (default: <workdir>/reports/<name>/<dataset hash>/). "
            "The version's folder puts the card beside its shards, where mlcroissant can "
            "read the records.",
        ),
    ] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a version's dataset cards: croissant.json (Croissant 1.0 JSON-LD with
    Responsible-AI fields) and datasheet.md (a datasheet for datasets); print their paths."""
    from data_catalog.dataset_cards import write_cards

    catalog, version = find_version(ref, workdir, config)
    from flows.report import report_folder, report_lock

    default = report_folder(catalog.workdir, version.name, version.dataset_hash)
    folder = out or default
    with report_lock(default):  # the report's writer replaces its folder whole
        paths = checked(write_cards, catalog, version, folder)
    if as_json:
        emit({"dataset_hash": version.dataset_hash, **{kind: str(p) for kind, p in paths.items()}})
    else:
        for path in paths.values():
            typer.echo(path)
    stderr.print(f"wrote the dataset cards of {version.name} {version.dataset_hash[:16]}")
