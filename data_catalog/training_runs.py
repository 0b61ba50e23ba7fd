"""Training runs: which model runs trained on which dataset version, and how they ended.

The training stage calls `start` when a run begins, or resumes under the same run id, and
`finish` when it ends. `for_version` answers "what was trained on this version?", the
question a deletion request or a withdrawal has to answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update

from data_catalog import tables
from data_catalog.catalog import Catalog, now
from pipeline.core.errors import DataError

STATUSES = ("running", "completed", "failed")
FINISHED = ("completed", "failed")


def start(
    catalog: Catalog,
    *,
    run_id: str,
    dataset_hash: str,
    name: str,
    objective: str,
    config_hash: str,
    manifest_path: str | Path,
    world_size: int,
) -> None:
    """Register a run as running. A run id already registered is a resumed run: it keeps its
    started_at, and what it recorded when it last finished is cleared."""
    table = tables.training_runs
    attempt = {
        "objective": objective,
        "config_hash": config_hash,
        "manifest_path": str(manifest_path),
        "world_size": world_size,
    }
    with catalog.engine.begin() as connection:
        _check_version(connection, catalog, run_id, dataset_hash, name)
        existing = connection.execute(
            select(table.c.dataset_hash).where(table.c.run_id == run_id)
        ).first()
        if existing is None:
            connection.execute(
                insert(table).values(
                    run_id=run_id,
                    dataset_hash=dataset_hash,
                    name=name,
                    status="running",
                    started_at=now(),
                    **attempt,
                )
            )
            return
        if existing.dataset_hash != dataset_hash:
            raise DataError(
                f"training run {run_id!r} trained on version {existing.dataset_hash[:16]}, not "
                f"{dataset_hash[:16]}; a resumed run keeps its version: start a new run id"
            )
        connection.execute(
            update(table)
            .where(table.c.run_id == run_id)
            .values(
                status="running",
                error=None,
                finished_at=None,
                manifest_sha256=None,
                best_step=None,
                test_metrics=None,
                **attempt,
            )
        )


def _check_version(connection, catalog: Catalog, run_id: str, dataset_hash: str, name: str) -> None:
    versions = tables.versions
    version = connection.execute(
        select(versions.c.name, versions.c.status, versions.c.status_reason).where(
            versions.c.dataset_hash == dataset_hash
        )
    ).first()
    if version is None:
        raise DataError(
            f"training run {run_id!r}: dataset version {dataset_hash!r} is not in the catalog at "
            f"{catalog.workdir}; train on a cataloged version (full hash, see "
            "`thresher catalog list`)"
        )
    if version.name != name:
        raise DataError(
            f"training run {run_id!r}: version {dataset_hash[:16]} belongs to dataset "
            f"{version.name!r}, not {name!r}"
        )
    if version.status == "withdrawn":
        raise DataError(
            f"training run {run_id!r}: version {dataset_hash[:16]} of {name!r} was withdrawn "
            f"({version.status_reason}); train on a published version (`thresher catalog list`)"
        )


def finish(
    catalog: Catalog,
    run_id: str,
    status: str,
    *,
    manifest_sha256: str | None = None,
    best_step: int | None = None,
    test_metrics: dict[str, float] | None = None,
    error: str | None = None,
) -> None:
    """Record how a run ended: `completed` or `failed` (with the error)."""
    if status not in FINISHED:
        raise DataError(
            f"training run {run_id!r}: a run finishes as one of {', '.join(FINISHED)}, not {status!r}"
        )
    table = tables.training_runs
    with catalog.engine.begin() as connection:
        result = connection.execute(
            update(table)
            .where(table.c.run_id == run_id)
            .values(
                status=status,
                manifest_sha256=manifest_sha256,
                best_step=best_step,
                test_metrics=test_metrics,
                error=error,
                finished_at=now(),
            )
        )
    if result.rowcount == 0:
        raise DataError(
            f"no training run {run_id!r} in the catalog at {catalog.workdir}; "
            "`training_runs.start` registers it first"
        )


def for_version(catalog: Catalog, dataset_hash: str) -> list[dict[str, Any]]:
    """The runs trained on one version, oldest first."""
    table = tables.training_runs
    return _select(catalog, select(table).where(table.c.dataset_hash == dataset_hash))


def runs(catalog: Catalog, name: str | None = None) -> list[dict[str, Any]]:
    """Every training run (or those on versions of dataset `name`), oldest first."""
    table = tables.training_runs
    query = select(table)
    if name:
        query = query.where(table.c.name == name)
    return _select(catalog, query)


def _select(catalog: Catalog, query) -> list[dict[str, Any]]:
    table = tables.training_runs
    with catalog.engine.connect() as connection:
        rows = connection.execute(query.order_by(table.c.started_at, table.c.run_id)).mappings()
        return [dict(row) for row in rows]
