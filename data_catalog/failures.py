"""Failed and crashed flow runs, as their state hooks record them (flows/alerts.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select

from data_catalog import tables
from data_catalog.catalog import Catalog, now


def record(catalog: Catalog, **failure: Any) -> None:
    """Record one failure; a flow run already recorded (a hook that ran twice) is kept as is."""
    table = tables.failures
    with catalog.engine.begin() as connection:
        known = connection.execute(
            select(table.c.id).where(table.c.flow_run_id == failure["flow_run_id"])
        ).first()
        if known is None:
            connection.execute(insert(table).values(**failure, occurred_at=now()))


def failures(catalog: Catalog, dataset: str | None = None) -> list[dict[str, Any]]:
    table = tables.failures
    query = select(table).order_by(table.c.occurred_at, table.c.id)
    if dataset:
        query = query.where(table.c.dataset == dataset)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]
