"""The catalog's governance tables: review queue, decisions, deletion requests, withdrawal."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import polars as pl
import pytest
import xxhash
from helpers import stage_version

from data_catalog import deletions, review_queue
from data_catalog.catalog import Catalog, open_version
from pipeline.core.errors import DataError
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.publish.reader import read_version


def review_items(n: int, reason: str = "secret_detected") -> pl.DataFrame:
    rows = [
        {
            "record_id": f"r{i}",
            "source": "sms",
            "source_content_hash": f"h{i}",
            "review_hash": f"v{i}",
            "group_hash": xxhash.xxh3_128_hexdigest(f"user-{i % 2}".encode()),
            "reason": reason,
            "evidence": '{"types":["github_token"]}',
            "text": f"token <SECRET:github_token> number {i}",
            "metadata": None,
        }
        for i in range(n)
    ]
    return pl.DataFrame(rows, schema=REVIEW_ITEM_SCHEMA)


def test_enqueue_is_keyed_by_record_content_and_reason(tmp_path):
    catalog = Catalog.open(tmp_path)
    assert review_queue.enqueue(catalog, review_items(3), "ds", "run-1") == 3
    assert review_queue.enqueue(catalog, review_items(3), "ds", "run-2") == 0  # nightly re-run
    assert review_queue.enqueue(catalog, review_items(4), "ds", "run-3") == 1
    other_reason = review_items(1, reason="license_unknown")
    assert review_queue.enqueue(catalog, other_reason, "ds", "run-3") == 1
    listed = review_queue.items(catalog, status="pending", reason="secret_detected")
    assert [item["record_id"] for item in listed] == ["r0", "r1", "r2", "r3"]
    assert [item["run_id"] for item in listed] == ["run-1", "run-1", "run-1", "run-3"]


def test_a_decision_is_recorded_once_and_a_second_one_is_refused(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_items(2), "ds", "run-1")
    first, second = (item["id"] for item in review_queue.items(catalog))
    assert review_queue.decide(catalog, first, "approved", "ana", "test fixture key") == (
        review_queue.Decided(first, "approved")
    )
    late = review_queue.decide(catalog, first, "rejected", "bo", "looks real")
    assert isinstance(late, review_queue.Conflict)
    assert f"item {first} was already approved by ana" in late.message
    assert review_queue.item(catalog, first)["status"] == "approved"
    assert [(d["decision"], d["reviewer"]) for d in review_queue.history(catalog, first)] == [
        ("approved", "ana")
    ]
    review_queue.decide(catalog, second, "rejected", "bo", "a live key")
    frame = review_queue.decisions_frame(catalog).sort("item_id")
    assert frame.select("record_id", "status", "reviewer").rows() == [
        ("r0", "approved", "ana"),
        ("r1", "rejected", "bo"),
    ]
    with pytest.raises(DataError, match="reviewer's name"):
        review_queue.decide(catalog, second, "approved", " ", None)
    with pytest.raises(DataError, match="no review item 999"):
        review_queue.decide(catalog, 999, "approved", "ana", None)


def test_two_reviewers_deciding_at_once_one_wins(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_items(20), "ds", "run-1")
    ids = [item["id"] for item in review_queue.items(catalog)]

    both_ready = threading.Barrier(2)

    def reviewer(name: str, decision: str):
        mine = Catalog.open(tmp_path)  # each reviewer has their own connection
        outcomes = []
        for item_id in ids:
            both_ready.wait()  # the two decisions on an item start together
            outcomes.append(review_queue.decide(mine, item_id, decision, name, None))
        return outcomes

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(reviewer, ["ana", "bo"], ["approved", "rejected"])
    for mine, theirs in zip(a, b, strict=True):
        assert isinstance(mine, review_queue.Decided) != isinstance(theirs, review_queue.Decided)
    for item_id in ids:  # exactly one decision per item, matching the item's state
        (decision,) = review_queue.history(catalog, item_id)
        assert review_queue.item(catalog, item_id)["status"] == decision["decision"]


def test_withdraw_refuses_opening_and_purge_keeps_the_record(tmp_path, sms_spam):
    first, cfg = stage_version(tmp_path, sms_spam, stop=100)
    catalog = Catalog.open(tmp_path / "work")
    old, _ = catalog.commit(first, cfg.source_list)
    second, cfg = stage_version(tmp_path, sms_spam, stop=150, run_id="run-2")
    new, _ = catalog.commit(second, cfg.source_list)
    with pytest.raises(DataError, match="withdraw it first"):
        catalog.purge(new.dataset_hash)
    withdrawn = catalog.withdraw(new.dataset_hash, "a deletion request")
    assert (withdrawn.status, withdrawn.status_reason) == ("withdrawn", "a deletion request")
    assert catalog.latest("sms") == old  # latest moves back
    with pytest.raises(DataError, match="was withdrawn on .*a deletion request"):
        open_version(tmp_path / "work", "sms", new.dataset_hash[:10])
    path = catalog.version_path(withdrawn)
    with pytest.raises(DataError, match="was withdrawn"):
        read_version(path)  # also without the catalog
    assert read_version(path, allow_withdrawn=True).dataset_hash == new.dataset_hash
    purged = catalog.purge(new.dataset_hash)
    assert purged.purged_at is not None and not (path / "data").exists()
    assert (path / "manifest.json").exists()
    assert [v.status for v in catalog.versions("sms")] == ["published", "withdrawn"]


def test_affected_lists_the_versions_that_held_the_records(tmp_path, sms_spam):
    first, cfg = stage_version(tmp_path, sms_spam, stop=100)
    catalog = Catalog.open(tmp_path / "work")
    old, _ = catalog.commit(first, cfg.source_list)
    second, cfg = stage_version(tmp_path, sms_spam, stop=150, run_id="run-2")
    new, _ = catalog.commit(second, cfg.source_list)
    rows = pl.concat([f.collect() for f in open_version(tmp_path / "work", "sms").splits.values()])
    late = rows.filter(pl.col("record_id").is_in(
        pl.concat([f.collect() for f in read_version(catalog.version_path(old)).splits.values()])["record_id"].implode()
    ).not_()).row(0, named=True)  # fmt: skip
    early = rows.filter(pl.col("record_id") != late["record_id"]).row(0, named=True)

    def affected(kind: str, value: str) -> dict[str, int | None]:
        request = deletions.record_request(catalog, kind, value, "asked by the sender")
        return {
            hit.version.dataset_hash: hit.records for hit in deletions.affected(catalog, request)
        }

    assert affected("record_id", late["record_id"]) == {new.dataset_hash: 1}
    assert affected("content_hash", early["content_hash"]) == {
        old.dataset_hash: 1,
        new.dataset_hash: 1,
    }
    assert affected("group", early["group"])[old.dataset_hash] >= 1
    assert affected("source", "nope") == {}
    with pytest.raises(DataError, match="names one of source, group, record_id, content_hash"):
        deletions.record_request(catalog, "email", "x", "why")
    frame = deletions.requests_frame(catalog)
    assert frame["kind"].to_list() == ["record_id", "content_hash", "group", "source"]


def test_a_deletion_request_blanks_the_queued_text_and_keeps_the_trail(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_items(4), "ds", "run-1")
    first = review_queue.items(catalog)[0]["id"]
    review_queue.decide(catalog, first, "rejected", "ana", "live key")
    by_record = deletions.record_request(catalog, "record_id", "r0", "erasure")
    by_group = deletions.record_request(catalog, "group", "user-1", "erasure")
    erased = {item["record_id"]: item for item in review_queue.items(catalog)}
    assert {k: (v["text"], v["erased_by_request"]) for k, v in erased.items()} == {
        "r0": (None, by_record),
        "r1": (None, by_group),
        "r2": ("token <SECRET:github_token> number 2", None),
        "r3": (None, by_group),
    }
    assert erased["r0"]["status"] == "rejected"
    assert [d["reviewer"] for d in review_queue.history(catalog, first)] == ["ana"]
