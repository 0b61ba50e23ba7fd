"""The reviewer quarantine queue: flagged records wait here for a human decision.

Items are keyed by (record id, source content hash, reason) and a hash of everything else
the reviewer sees (metadata, group, label, terms): a nightly run that flags the same record
again queues nothing new, and a record that changed anywhere is reviewed again. An item is decided once; the decision is appended to
`review_decisions` (the audit log) and the item's status changes in the same transaction,
so of two reviewers deciding one item at once exactly one wins and the other is told who
did. Approved items let their record through the governance stage of the next run;
rejected content is dropped by every later run and never queued again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
from sqlalchemy import insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from data_catalog import tables
from data_catalog.catalog import Catalog, now, transaction_lock
from pipeline.errors import DataError
from pipeline.schema import REVIEW_DECISION_SCHEMA

STATUSES = ("pending", "approved", "rejected")
DECISIONS = ("approved", "rejected")


@dataclass(frozen=True)
class Decided:
    item_id: int
    decision: str


@dataclass(frozen=True)
class Conflict:
    item_id: int
    message: str


def enqueue(catalog: Catalog, items: pl.DataFrame, dataset: str, run_id: str) -> int:
    """Add review items (REVIEW_ITEM_SCHEMA rows) not queued before; return how many were new."""
    if items.height == 0:
        return 0
    created = now()
    rows = [
        {**item, "dataset": dataset, "run_id": run_id, "status": "pending", "created_at": created}
        for item in items.iter_rows(named=True)
    ]
    table = tables.review_items
    dialect = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}[
        catalog.engine.dialect.name
    ]
    with catalog.engine.begin() as connection:
        # PostgreSQL: two runs queueing the same items in another order would deadlock
        transaction_lock(connection, "review_queue")
        statement = dialect(table).on_conflict_do_nothing().returning(table.c.id)
        return len(connection.execute(statement, rows).all())


def items(
    catalog: Catalog,
    *,
    status: str | None = None,
    reason: str | None = None,
    source: str | None = None,
) -> list[dict[str, Any]]:
    table = tables.review_items
    query = select(table).order_by(table.c.id)
    for column, value in (("status", status), ("reason", reason), ("source", source)):
        if value is not None:
            query = query.where(table.c[column] == value)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def item(catalog: Catalog, item_id: int) -> dict[str, Any]:
    with catalog.engine.connect() as connection:
        row = (
            connection.execute(
                select(tables.review_items).where(tables.review_items.c.id == item_id)
            )
            .mappings()
            .first()
        )
    if row is None:
        raise DataError(f"no review item {item_id}; see `thresher review list`")
    return dict(row)


def history(catalog: Catalog, item_id: int) -> list[dict[str, Any]]:
    table = tables.review_decisions
    query = select(table).where(table.c.item_id == item_id).order_by(table.c.id)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def decide(
    catalog: Catalog, item_id: int, decision: str, reviewer: str, note: str | None
) -> Decided | Conflict:
    """Approve or reject one pending item. Only a pending item can be decided; a second
    decision (also one racing this one) gets a Conflict naming the first."""
    if decision not in DECISIONS:
        raise DataError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    if not reviewer or not reviewer.strip():
        raise DataError("a decision needs the reviewer's name (--reviewer NAME)")
    item(catalog, item_id)  # a clear error for an unknown id
    decided_at = now()
    table = tables.review_items
    with catalog.engine.begin() as connection:
        changed = connection.execute(
            update(table)
            .where(table.c.id == item_id, table.c.status == "pending")
            .values(status=decision, reviewer=reviewer, note=note, decided_at=decided_at)
        ).rowcount
        if changed == 1:
            connection.execute(
                insert(tables.review_decisions).values(
                    item_id=item_id,
                    decision=decision,
                    reviewer=reviewer,
                    note=note,
                    decided_at=decided_at,
                )
            )
            return Decided(item_id, decision)
    current = item(catalog, item_id)
    return Conflict(
        item_id,
        f"item {item_id} was already {current['status']} by {current['reviewer']} at "
        f"{_when(current['decided_at'])}; nothing changed",
    )


def decisions_frame(catalog: Catalog) -> pl.DataFrame:
    """Every decided item, as the governance stage reads it (RunContext.review_decisions)."""
    table = tables.review_items
    query = select(
        table.c.id.label("item_id"),
        table.c.record_id,
        table.c.source_content_hash,
        table.c.review_hash,
        table.c.reason,
        table.c.status,
        table.c.reviewer,
    ).where(table.c.status.in_(DECISIONS))
    with catalog.engine.connect() as connection:
        rows = [tuple(row) for row in connection.execute(query)]
    return pl.DataFrame(rows, schema=REVIEW_DECISION_SCHEMA, orient="row")


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "an unknown time"
