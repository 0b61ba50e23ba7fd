"""Test-set locks and frozen cutoffs in the catalog."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import stage_version as stage

from data_catalog import splits
from data_catalog.catalog import Catalog
from pipeline.core import reasons
from pipeline.core.errors import DataError


def committed(root, sms_spam, stop, run_id, parent=None):
    staged, cfg = stage(root, sms_spam, stop=stop, run_id=run_id, parent=parent)
    catalog = Catalog.open(root / "work")
    version, _ = catalog.commit(staged, cfg.source_list)
    return catalog, version


def test_a_lock_stores_the_test_ids_and_status_compares_the_latest_version(tmp_path, sms_spam):
    catalog, first = committed(tmp_path, sms_spam, 300, "run-1")
    test_ids = splits.test_record_ids(catalog, first)
    lock = splits.lock(catalog, first.dataset_hash[:10], "ana", "release 1")
    assert (lock.records, lock.locked_by, lock.note) == (test_ids.height, "ana", "release 1")
    assert splits.locked_ids(catalog, lock)["record_id"].sort().equals(test_ids["record_id"].sort())
    assert splits.lock(catalog, first.dataset_hash) == lock  # locking again changes nothing
    assert splits.lock_status(catalog, "sms")["since"] is None

    _, second = committed(tmp_path, sms_spam, 600, "run-2", parent=first.dataset_hash)
    since = splits.lock_status(catalog, "sms")["since"]
    assert since["latest"] == second.dataset_hash
    assert since["locked_in_test"] == test_ids.height and since["locked_elsewhere"] == 0
    assert since["test_added"] == since["test_records"] - test_ids.height > 0
    # a lock on the newer version keeps every locked record, so it may replace the first
    assert splits.lock(catalog, second.dataset_hash).dataset_hash == second.dataset_hash


def test_a_lock_that_would_release_locked_records_is_refused(tmp_path, sms_spam):
    catalog, small = committed(tmp_path, sms_spam, 300, "run-1")
    _, large = committed(tmp_path, sms_spam, 600, "run-2", parent=small.dataset_hash)
    splits.lock(catalog, large.dataset_hash)
    with pytest.raises(DataError, match=r"does not hold \d+ record\(s\) of the test set locked"):
        splits.lock(catalog, small.dataset_hash)
    assert splits.active_lock(catalog, "sms").dataset_hash == large.dataset_hash


def test_cutoffs_freeze_once(tmp_path, sms_spam):
    catalog, version = committed(tmp_path, sms_spam, 50, "run-1")
    cutoffs = {"validation": "2012-09-01T00:00:00+00:00", "test": "2012-11-01T00:00:00+00:00"}
    assert splits.frozen_cutoffs(catalog, "sms") is None
    assert splits.freeze_cutoffs(catalog, "sms", cutoffs, version.dataset_hash)
    assert not splits.freeze_cutoffs(catalog, "sms", {"test": "2030-01-01T00:00:00+00:00"}, "x")
    frozen = splits.frozen_cutoffs(catalog, "sms")
    assert {k: v.isoformat() for k, v in frozen.items()} == cutoffs


def test_check_lock_kept_allows_only_deletion_requests():
    locked = pl.DataFrame({"record_id": ["a", "b", "c"]})
    published = pl.DataFrame({"record_id": ["a"], "split": ["test"]})
    events = pl.DataFrame(
        {
            "record_id": ["b", "c"],
            "action": [reasons.DROPPED, reasons.DROPPED],
            "reason": [reasons.DELETION_REQUEST, reasons.SECRET_DETECTED],
            "terminal": [True, True],
        }
    ).lazy()
    with pytest.raises(DataError, match=r"record c was dropped \(secret_detected\)"):
        splits.check_lock_kept(locked, published, events)
    events = events.with_columns(pl.lit(reasons.DELETION_REQUEST).alias("reason"))
    splits.check_lock_kept(locked, published, events)
    moved = pl.DataFrame({"record_id": ["a", "b", "c"], "split": ["test", "train", "test"]})
    with pytest.raises(DataError, match="record b is in train"):
        splits.check_lock_kept(locked, moved, events)
