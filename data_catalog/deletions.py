"""Deletion requests: records someone asked us to forget, and the versions that held them.

A request names a source, a group, a record id or a content hash (the text as ingested, or
as published). Every later run drops the matching records with reason `deletion_request`;
`affected` lists the versions that contained them, read from their shards (or, for a
version whose shards were purged, from its ledger), and the training runs on each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
import xxhash
from sqlalchemy import insert, select, update

from data_catalog import tables, training_runs
from data_catalog.catalog import Catalog, VersionRecord, now
from pipeline.core import storage
from pipeline.core.errors import DataError
from pipeline.core.schema import DELETION_KINDS
from pipeline.text.content_findings import pseudonymized_group


@dataclass(frozen=True)
class Affected:
    version: VersionRecord
    records: int | None  # None: the shards were purged and the ledger cannot tell
    # the training runs on the version: models that saw the records
    training_runs: list[dict[str, Any]] = field(default_factory=list)


def record_request(
    catalog: Catalog, kind: str, value: str, reason: str, requested_by: str | None = None
) -> int:
    if kind not in DELETION_KINDS:
        raise DataError(
            f"a deletion request names one of {', '.join(DELETION_KINDS)}, not {kind!r}"
        )
    if not value.strip() or not reason.strip():
        raise DataError("a deletion request needs a value and a reason (--reason TEXT)")
    with catalog.engine.begin() as connection:
        result = connection.execute(
            insert(tables.deletion_requests).values(
                kind=kind, value=value, reason=reason, requested_by=requested_by, created_at=now()
            )
        )
        request_id = result.inserted_primary_key[0]
        _erase_review_items(connection, kind, value, request_id)
        return request_id


def _erase_review_items(connection, kind: str, value: str, request_id: int) -> None:
    """Blank the text, metadata, group and label of queued records the request names; the items, their
    status and their decisions stay as the audit trail."""
    items = tables.review_items
    match = {
        "source": items.c.source == value,
        "group": items.c.group_hash == xxhash.xxh3_128_hexdigest(value.encode()),
        "record_id": items.c.record_id == value,
        "content_hash": items.c.source_content_hash == value,
    }[kind]
    connection.execute(
        update(items)
        .where(match, items.c.erased_by_request.is_(None))
        .values(text=None, metadata=None, group=None, label=None, erased_by_request=request_id)
    )


def erase_queued_again(catalog: Catalog) -> None:
    """Apply every request to the queue again: a run that planned before a request was made
    may have queued the records it names since."""
    with catalog.engine.begin() as connection:
        for row in requests(catalog):
            _erase_review_items(connection, row["kind"], row["value"], row["id"])


def requests(catalog: Catalog) -> list[dict[str, Any]]:
    table = tables.deletion_requests
    with catalog.engine.connect() as connection:
        return [
            dict(row) for row in connection.execute(select(table).order_by(table.c.id)).mappings()
        ]


def request(catalog: Catalog, request_id: int) -> dict[str, Any]:
    table = tables.deletion_requests
    with catalog.engine.connect() as connection:
        row = connection.execute(select(table).where(table.c.id == request_id)).mappings().first()
    if row is None:
        raise DataError(f"no deletion request {request_id}; `thresher forget` records one")
    return dict(row)


def requests_frame(catalog: Catalog) -> pl.DataFrame:
    """All requests, as the governance stage reads them (RunContext.deletions)."""
    rows = [(row["id"], row["kind"], row["value"]) for row in requests(catalog)]
    schema = {"request_id": pl.Int64, "kind": pl.String, "value": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def request_match(kind: str, value: str) -> pl.Expr:
    """The published records a request names."""
    if kind == "content_hash":
        return (pl.col("source_content_hash") == value) | (pl.col("content_hash") == value)
    if kind == "group":  # published as is, or with its personal data pseudonymized
        return pl.col("group").is_in([value, pseudonymized_group(value)])
    return pl.col(DELETION_KINDS[kind]) == value


def any_request_match(requested: list[dict[str, Any]]) -> pl.Expr | None:
    """The published records any of the requests (`requests(catalog)`) names (None: none)."""
    matches = [request_match(row["kind"], row["value"]) for row in requested]
    return pl.any_horizontal(matches) if matches else None


def affected(catalog: Catalog, request_id: int) -> list[Affected]:
    """Every cataloged version (published or withdrawn) that contained a matching record, with
    the training runs on it."""
    wanted = request(catalog, request_id)
    found = []
    for version in catalog.versions():
        count = _matches(catalog, version, wanted["kind"], wanted["value"])
        if count != 0:
            found.append(
                Affected(version, count, training_runs.for_version(catalog, version.dataset_hash))
            )
    return found


def _matches(catalog: Catalog, version: VersionRecord, kind: str, value: str) -> int | None:
    folder = catalog.version_path(version)
    shards = sorted((folder / "data").glob("*/*.parquet"), key=str)
    if shards:
        frame = storage.scan_parquet(shards)
        return frame.filter(request_match(kind, value)).select(pl.len()).collect().item()
    ledger = folder / "ledger.parquet"
    if kind in ("source", "record_id") and ledger.exists():
        published = storage.scan_parquet([ledger]).filter(pl.col("action") == "published")
        return published.filter(pl.col(kind) == value).select(pl.len()).collect().item()
    return None if version.purged_at else 0
