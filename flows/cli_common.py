"""What every `thresher` sub-command shares: options, output helpers, the catalog lookup.

Conventions: the human summary on stdout, progress and logs on stderr; with `--json`, one
JSON object per line on stdout and the human summary on stderr. Exit 0 clean, 1 findings,
2 error.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from pipeline.core.errors import ThresherError
from pipeline.core.terminal import printable


class _Console(Console):
    """A console that uses the terminal's width, or (unless COLUMNS says otherwise) the full
    width of what it prints when not on a terminal: a file or pipe gets whole tables, not
    columns cut at 80 characters. Read when printing, not when created."""

    @property
    def size(self) -> ConsoleDimensions:
        if self.is_terminal:
            return super().size
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns) if columns.isdigit() else 10_000, 50)


stderr = _Console(stderr=True, soft_wrap=True)
stdout = _Console(soft_wrap=True)


def human(as_json: bool) -> Console:
    """Where the human summary goes: stdout, or stderr when stdout carries the JSON."""
    return stderr if as_json else stdout


JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line on stdout.")]
WorkdirOption = Annotated[
    Path | None,
    typer.Option(
        "--workdir",
        "-w",
        help="Work folder holding catalog.db (default: $THRESHER_WORKDIR or ./work).",
    ),
]
RefArgument = Annotated[str, typer.Argument(help="Dataset hash or a unique prefix.")]
ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="Take the work folder from this run config.")
]


@contextmanager
def progress_shown(quiet: bool) -> Iterator[None]:
    """Show this process's progress on stderr while the block runs: live rows on a terminal,
    plain lines elsewhere, nothing with --quiet."""
    from pipeline.core import progress

    if quiet:
        yield
    elif stderr.is_terminal:
        with progress.LiveDisplay(stderr) as display, progress.shown(display):
            yield
    else:
        with progress.shown(progress.LineDisplay(sys.stderr)):
            yield


def for_console(value: object, multiline: bool = False) -> str:
    """Untrusted text (a record's, a reviewer's, a file's name) for a rich console: control
    and bidi characters as visible escapes, and `[...]` as text, not markup."""
    return escape(printable(value, multiline))


def fail(message: str, code: int = 2) -> None:
    # a message may quote a file's field names, rows or a credential: masked and made safe
    from pipeline.text.secrets import masked_text

    stderr.print(f"[bold red]error:[/] {for_console(masked_text(message), True)}", highlight=False)
    raise typer.Exit(code)


def checked(call, *args, **kwargs):
    """Call, turning a ThresherError into its message and exit 2."""
    try:
        return call(*args, **kwargs)
    except ThresherError as error:
        fail(str(error))


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")


def workdir_of(workdir: Path | None, config: Path | None) -> Path:
    if config is not None:
        from pipeline.config import load_run_config

        return Path(load_run_config(config).workdir)
    return workdir or Path(os.environ.get("THRESHER_WORKDIR", "work"))


def open_catalog(workdir: Path | None, config: Path | None):
    from data_catalog.catalog import CATALOG_FILE, CATALOG_URL_ENV, Catalog

    folder = workdir_of(workdir, config)
    if not os.environ.get(CATALOG_URL_ENV) and not (folder / CATALOG_FILE).exists():
        fail(
            f"no catalog at {folder / CATALOG_FILE}; pass --workdir or --config, or run `thresher run` first"
        )
    return Catalog.open(folder)


def find_version(ref: str, workdir: Path | None, config: Path | None):
    catalog = open_catalog(workdir, config)
    try:
        return catalog, catalog.version(ref)
    except ThresherError as error:
        fail(str(error))
