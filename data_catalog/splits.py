"""Split state kept per dataset name: the locked test set and the frozen time cutoffs.

`lock` freezes the test membership of a published version: its test record ids go into the
catalog (a later purge of the version's shards cannot unlock them), and every later run
keeps those records in test unless a deletion request removed them. A newer lock replaces
the one in force only if it keeps all of its records that are still published.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
from sqlalchemy import insert, select

from data_catalog import tables
from data_catalog.catalog import Catalog, VersionRecord, now
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.publish.reader import read_version


@dataclass(frozen=True)
class TestLock:
    id: int
    name: str
    dataset_hash: str
    records: int
    locked_by: str | None
    note: str | None
    locked_at: datetime


def test_record_ids(catalog: Catalog, version: VersionRecord) -> pl.DataFrame:
    """The record ids of a version's test split, read from its verified shards."""
    published = read_version(
        catalog.version_path(version), verify=True, expected_hash=version.dataset_hash
    )
    if "test" not in published.split_names:
        return pl.DataFrame(schema={"record_id": pl.String})
    return published.split("test").select("record_id").collect()


def lock(
    catalog: Catalog,
    ref: str,
    locked_by: str | None = None,
    note: str | None = None,
    name: str | None = None,
) -> TestLock:
    """Lock the test set of version `ref` (a hash or prefix, or `latest` of dataset `name`)."""
    version = catalog.version(ref, name)
    if version.status != "published":
        raise DataError(
            f"version {version.dataset_hash[:16]} is {version.status}; lock a published version"
        )
    ids = test_record_ids(catalog, version)
    if ids.height == 0:
        raise DataError(f"version {version.dataset_hash[:16]} has no test records; nothing to lock")
    current = active_lock(catalog, version.name)
    if current is not None:
        if current.dataset_hash == version.dataset_hash:
            return current
        _check_keeps_lock(catalog, current, version, ids)
    with catalog.engine.begin() as connection:
        lock_id = connection.execute(
            insert(tables.test_locks).values(
                name=version.name,
                dataset_hash=version.dataset_hash,
                records=ids.height,
                locked_by=locked_by,
                note=note,
                locked_at=now(),
            )
        ).inserted_primary_key[0]
        connection.execute(
            insert(tables.locked_test_records),
            [{"lock_id": lock_id, "record_id": record_id} for record_id in ids["record_id"]],
        )
    return active_lock(catalog, version.name)


def _check_keeps_lock(
    catalog: Catalog, current: TestLock, version: VersionRecord, ids: pl.DataFrame
) -> None:
    """A new lock may add test records, never release locked ones still published."""
    released = locked_ids(catalog, current).join(ids, on="record_id", how="anti")
    latest = catalog.latest(version.name)
    if released.height and latest is not None:
        published = read_version(
            catalog.version_path(latest), verify=False, expected_hash=latest.dataset_hash
        )
        published = published.membership().collect()
        released = released.join(published, on="record_id", how="semi")
    if released.height:
        raise DataError(
            f"version {version.dataset_hash[:16]} does not hold {released.height} record(s) of "
            f"the test set locked on {current.dataset_hash[:16]} in its test split (e.g. "
            f"{', '.join(released['record_id'].head(3))}); lock a version that keeps them"
        )


def active_lock(catalog: Catalog, name: str) -> TestLock | None:
    query = (
        select(tables.test_locks)
        .where(tables.test_locks.c.name == name)
        .order_by(tables.test_locks.c.id.desc())
        .limit(1)
    )
    with catalog.engine.connect() as connection:
        row = connection.execute(query).mappings().first()
    return TestLock(**row) if row else None


def locked_ids(catalog: Catalog, lock: TestLock) -> pl.DataFrame:
    query = select(tables.locked_test_records.c.record_id).where(
        tables.locked_test_records.c.lock_id == lock.id
    )
    with catalog.engine.connect() as connection:
        ids = [row[0] for row in connection.execute(query)]
    return pl.DataFrame({"record_id": ids}, schema={"record_id": pl.String})


def frozen_cutoffs(catalog: Catalog, name: str) -> dict[str, datetime] | None:
    query = select(tables.split_cutoffs).where(tables.split_cutoffs.c.name == name)
    with catalog.engine.connect() as connection:
        row = connection.execute(query).mappings().first()
    if row is None:
        return None
    return {split: datetime.fromisoformat(when) for split, when in row["cutoffs"].items()}


def freeze_cutoffs(catalog: Catalog, name: str, cutoffs: dict[str, str], dataset_hash: str) -> bool:
    """Record the quantile cutoffs of a dataset's first publish; later calls change nothing."""
    with catalog.engine.begin() as connection:
        exists = connection.execute(
            select(tables.split_cutoffs.c.name).where(tables.split_cutoffs.c.name == name)
        ).first()
        if exists:
            return False
        connection.execute(
            insert(tables.split_cutoffs).values(
                name=name, cutoffs=cutoffs, dataset_hash=dataset_hash, frozen_at=now()
            )
        )
    return True


def lock_status(catalog: Catalog, name: str) -> dict[str, Any]:
    """The lock in force and how the latest version's test split relates to it."""
    lock_row = active_lock(catalog, name)
    frozen = frozen_cutoffs(catalog, name)
    status: dict[str, Any] = {
        "name": name,
        "lock": None,
        "frozen_cutoffs": {k: v.isoformat() for k, v in frozen.items()} if frozen else None,
    }
    if lock_row is None:
        return status
    latest = catalog.latest(name)
    status["lock"] = {
        "dataset_hash": lock_row.dataset_hash,
        "records": lock_row.records,
        "locked_by": lock_row.locked_by,
        "note": lock_row.note,
        "locked_at": lock_row.locked_at.isoformat(),
    }
    if latest is None or latest.dataset_hash == lock_row.dataset_hash:
        status["since"] = None
        return status
    locked = locked_ids(catalog, lock_row)
    splits = read_version(
        catalog.version_path(latest), verify=False, expected_hash=latest.dataset_hash
    )
    splits = splits.membership().collect()
    where = locked.join(splits, on="record_id", how="left")
    test_now = splits.filter(pl.col("split") == "test")
    status["since"] = {
        "latest": latest.dataset_hash,
        "locked_in_test": where.filter(pl.col("split") == "test").height,
        "locked_elsewhere": where.filter(pl.col("split").is_in(["train", "validation"])).height,
        "locked_removed": where.filter(pl.col("split").is_null()).height,
        "test_added": test_now.join(locked, on="record_id", how="anti").height,
        "test_records": test_now.height,
    }
    return status


def check_lock_kept(locked: pl.DataFrame, published: pl.DataFrame, events: pl.LazyFrame) -> None:
    """Fail when a locked test record is published outside test, or is missing from the
    version for any reason but a deletion request. `published`: record_id, split."""
    where = locked.join(published, on="record_id", how="left")
    elsewhere = where.filter(pl.col("split").is_not_null() & (pl.col("split") != "test"))
    fates = (
        events.filter(pl.col("terminal"))
        .select("record_id", "action", "reason")
        .join(where.filter(pl.col("split").is_null()).lazy(), on="record_id", how="right")
        .collect()
    )
    lost = fates.filter(pl.col("reason").fill_null("") != reasons.DELETION_REQUEST)
    if elsewhere.height == 0 and lost.height == 0:
        return
    problems = [
        f"record {row['record_id']} is in {row['split']}"
        for row in elsewhere.head(5).iter_rows(named=True)
    ] + [
        f"record {row['record_id']} was {row['action']} ({row['reason']})"
        if row["action"]
        else f"record {row['record_id']} is no longer in the sources"
        for row in lost.head(5).iter_rows(named=True)
    ]
    shown = elsewhere.head(5).height + lost.head(5).height
    if elsewhere.height + lost.height > shown:
        problems.append(f"and {elsewhere.height + lost.height - shown} more")
    raise DataError(
        f"the locked test set is broken: {elsewhere.height} locked record(s) outside test and "
        f"{lost.height} missing for another reason than a deletion request ("
        + "; ".join(problems)
        + "). Nothing was published. Restore those records, or release one on purpose with a "
        "deletion request (`thresher forget --record-id ID --reason TEXT`)"
    )
