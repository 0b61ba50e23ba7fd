"""`thresher split lock | status`: the locked test set of a dataset name. flows.cli registers
them."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    RefArgument,
    WorkdirOption,
    checked,
    emit,
    fail,
    open_catalog,
    stderr,
)

split_app = typer.Typer(help="Locked test sets and frozen time cutoffs.", no_args_is_help=True)


@split_app.command("lock")
def split_lock(
    ref: RefArgument,
    note: Annotated[str | None, typer.Option("--note", help="Why: kept with the lock.")] = None,
    locked_by: Annotated[
        str | None, typer.Option("--by", help="Who locks it (default: your login name).")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", "-n", help="Dataset name, for `latest` (default: the config's)."),
    ] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Freeze the test membership of a published version (HASH, a prefix, or `latest` with
    --name): every later version keeps those records in test (never in train or validation)
    unless a deletion request removes them."""
    from data_catalog import splits
    from pipeline.config import load_run_config

    if name is None and config is not None:
        name = checked(load_run_config, config).name
    catalog = open_catalog(workdir, config)
    lock = checked(splits.lock, catalog, ref, locked_by or getpass.getuser(), note, name)
    if as_json:
        emit({**lock.__dict__, "locked_at": lock.locked_at.isoformat()})
    stderr.print(
        f"locked the test set of {lock.name!r}: {lock.records} record(s) of version "
        f"{lock.dataset_hash[:16]}, by {lock.locked_by} on {lock.locked_at:%Y-%m-%d %H:%M}"
    )


@split_app.command("status")
def split_status(
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Dataset name (default: the config's).")
    ] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the lock in force, the frozen cutoffs, and what changed in test since the lock.
    Exit 1 when locked records sit outside test."""
    from data_catalog import splits
    from pipeline.config import load_run_config

    if name is None and config is not None:
        name = checked(load_run_config, config).name
    if name is None:
        fail("say which dataset: --name NAME or --config FILE")
    status = checked(splits.lock_status, open_catalog(workdir, config), name)
    if as_json:
        emit(status)
    lock, since = status["lock"], status.get("since")
    if status["frozen_cutoffs"]:
        cutoffs = ", ".join(f"{k} from {v}" for k, v in status["frozen_cutoffs"].items())
        stderr.print(f"time cutoffs (frozen at the first publish): {cutoffs}")
    if lock is None:
        stderr.print(f"{name!r} has no locked test set; lock one with `thresher split lock HASH`")
        return
    stderr.print(
        f"test set of {name!r} locked on version {lock['dataset_hash'][:16]}: {lock['records']} "
        f"record(s), by {lock['locked_by']} at {lock['locked_at']}"
        + (f" — {lock['note']}" if lock["note"] else "")
    )
    if since is None:
        stderr.print("the latest version is the locked one: nothing changed since")
        return
    stderr.print(
        f"latest version {since['latest'][:16]}: {since['test_records']} test record(s); "
        f"{since['locked_in_test']} locked still in test, {since['locked_removed']} removed "
        f"(deletion requests), {since['test_added']} added since the lock"
    )
    if since["locked_elsewhere"]:
        stderr.print(f"[bold red]{since['locked_elsewhere']} locked record(s) outside test[/]")
        raise typer.Exit(1)
