"""Label conflicts in duplicate clusters, on real SMS messages: a real exact-duplicate pair of
the SMS Spam Collection (both copies with the same label) and a third copy with the other
label. Quarantine and review, majority, a reviewer's label or rejection, MinHash clusters,
null labels and published records, by value."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl

from pipeline.config import DedupConfig, RunConfig, SourceDeclaration, config_hash
from pipeline.core import reasons
from pipeline.core.identity import record_id_of
from pipeline.dedup import label_conflicts
from pipeline.dedup.exact import exact_dedup
from pipeline.dedup.near import near_dedup
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext

FLIPPED = {"spam": "ham", "ham": "spam"}
REVIEW, MAJORITY = DedupConfig(), DedupConfig(label_conflicts="majority")


@pytest.fixture(scope="module")
def twins(sms_spam) -> tuple[dict, dict]:
    """The first real exact-duplicate pair whose copies carry the same label, as jsonl rows."""
    rows = sms_rows(sms_spam, 0, sms_spam.height)
    by_text: dict[str, list[dict]] = {}
    for row in rows:
        by_text.setdefault(row["text"], []).append(row)
    pairs = [
        copies
        for copies in by_text.values()
        if len(copies) == 2 and copies[0]["label"] == copies[1]["label"]
    ]
    first, second = min(pairs, key=lambda copies: int(copies[0]["id"].split("-")[1]))
    return first, second


def rid(source_id: str) -> str:
    return record_id_of("sms", source_id)


def records(tmp_path: Path, rows: list[dict]) -> tuple[pl.LazyFrame, RunConfig]:
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    cfg = RunConfig(name="t", sources=[SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))])
    frame = ingest(cfg.source_list, context(tmp_path, cfg), tmp_path / "in").frame.collect()
    return frame.lazy(), cfg


def context(tmp_path: Path, cfg: RunConfig, decisions=None, parent=None) -> RunContext:
    return RunContext(
        run_id="r",
        run_dir=tmp_path / "run",
        config=cfg,
        config_hash=config_hash(cfg),
        review_decisions=decisions,
        parent_version="parent-hash" if parent is not None else None,
        parent_splits=None if parent is None else pl.DataFrame(parent).lazy(),
    )


def conflicted(tmp_path, sms_spam, twins, *more: dict) -> tuple[pl.LazyFrame, RunConfig, dict]:
    """Twenty real messages, the twins (one of them among the twenty), and a third copy with
    the other label sent before both, so the keep rule (earliest first) keeps the third copy."""
    first, second = twins
    third = {**first, "id": "sms-flipped", "label": FLIPPED[first["label"]]}
    third["sent"] = "2011-01-01T10:00:00Z"
    rows = [*sms_rows(sms_spam, 0, 20), second, third, *more]
    rows = list({row["id"]: row for row in [first, *rows]}.values())
    frame, cfg = records(tmp_path, rows)
    ids = {"first": rid(first["id"]), "second": rid(second["id"]), "third": rid("sms-flipped")}
    return frame, cfg, ids


def by_action(events: pl.DataFrame, action: str, reason: str) -> dict[str, dict]:
    chosen = events.filter((pl.col("action") == action) & (pl.col("reason") == reason))
    return {r: json.loads(e) for r, e in zip(chosen["record_id"], chosen["evidence"], strict=True)}


def test_review_quarantines_every_member_and_queues_one_item(tmp_path, sms_spam, twins):
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    label = twins[0]["label"]
    result = exact_dedup(frame, REVIEW, context(tmp_path, cfg))
    members = sorted(
        [
            {"record_id": ids["first"], "source": "sms", "label": label},
            {"record_id": ids["second"], "source": "sms", "label": label},
            {"record_id": ids["third"], "source": "sms", "label": FLIPPED[label]},
        ],
        key=lambda member: member["record_id"],
    )
    evidence = {"members": members, "representative": ids["third"], "method": "exact"}
    quarantined = by_action(result.events, reasons.QUARANTINED, reasons.LABEL_CONFLICT)
    assert quarantined == {record_id: evidence for record_id in ids.values()}
    assert result.events.height == 3  # nothing else was a duplicate
    kept = result.frame.collect()
    assert kept.height == frame.collect().height - 3
    assert not set(ids.values()) & set(kept["record_id"])
    (item,) = result.review_items.iter_rows(named=True)
    assert (item["record_id"], item["reason"], item["label"]) == (
        ids["third"], reasons.LABEL_CONFLICT, FLIPPED[label],
    )  # fmt: skip
    assert item["text"] == twins[0]["text"]
    assert json.loads(item["evidence"]) == evidence
    assert result.stats["label_conflicts"] == {
        "clusters": 1, "records": 3, "queued": 1, "majority": 0, "adjudicated": 0,
        "rejected": 0, "by_source": {"sms": 3},
    }  # fmt: skip
    assert result.stats["labelled_by_source"] == {"sms": frame.collect().height} == {"sms": 22}
    assert result.stats["dropped"] == 0


def test_a_large_cluster_lists_some_members_and_counts_all(tmp_path, sms_spam, twins, monkeypatch):
    """Each of a cluster's k events names at most LISTED members (not all k: k² names in all),
    with the cluster's size and every member's label counted; the review page counts them."""
    from data_catalog import review_queue

    monkeypatch.setattr(label_conflicts, "LISTED", 2)
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    label = twins[0]["label"]
    result = exact_dedup(frame, REVIEW, context(tmp_path, cfg))
    quarantined = by_action(result.events, reasons.QUARANTINED, reasons.LABEL_CONFLICT)
    ordered = sorted(ids.values())  # the first by record id, and the kept record always
    listed = ordered[:2] if ids["third"] in ordered[:2] else [ordered[0], ids["third"]]
    assert set(quarantined) == set(ids.values())
    for evidence in quarantined.values():
        assert [m["record_id"] for m in evidence["members"]] == listed
        assert evidence["members_total"] == 3
        assert evidence["labels"] == {label: 2, FLIPPED[label]: 1}
        assert evidence["representative"] == ids["third"]
    (item,) = result.review_items.iter_rows(named=True)
    entry = {"evidence": item["evidence"]}
    assert review_queue.members_total(entry) == 3
    assert review_queue.member_label_counts(entry) == {label: 2, FLIPPED[label]: 1}
    assert review_queue.member_labels(entry).startswith(f"{label} ×2")

    majority = exact_dedup(frame, MAJORITY, context(tmp_path, cfg))
    (edit,) = by_action(majority.events, reasons.EDITED, reasons.LABEL_MAJORITY).values()
    assert edit["minority"] == [ids["third"]] and "minority_total" not in edit
    monkeypatch.setattr(label_conflicts, "LISTED", 0)
    majority = exact_dedup(frame, MAJORITY, context(tmp_path, cfg))
    (edit,) = by_action(majority.events, reasons.EDITED, reasons.LABEL_MAJORITY).values()
    assert edit["minority"] == [] and edit["minority_total"] == 1


def test_majority_keeps_the_common_label_and_names_the_minority(tmp_path, sms_spam, twins):
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    label = twins[0]["label"]
    result = exact_dedup(frame, MAJORITY, context(tmp_path, cfg))
    kept = result.frame.collect().filter(pl.col("record_id").is_in(list(ids.values())))
    assert kept.select("record_id", "label").rows() == [(ids["third"], label)]
    assert by_action(result.events, reasons.EDITED, reasons.LABEL_MAJORITY) == {
        ids["third"]: {
            "labels": {label: 2, FLIPPED[label]: 1},
            "minority": [ids["third"]],
            "from": FLIPPED[label],
            "to": label,
        }
    }
    dropped = by_action(result.events, reasons.DROPPED, reasons.EXACT_DUPLICATE)
    assert {r: e["duplicate_of"] for r, e in dropped.items()} == {
        ids["first"]: ids["third"],
        ids["second"]: ids["third"],
    }
    assert result.review_items.height == 0
    assert result.stats["label_conflicts"]["majority"] == 1
    assert result.stats["label_conflicts"]["queued"] == 0


def decisions_for(item: dict, status: str, reviewer: str, label: str | None) -> pl.DataFrame:
    return pl.DataFrame(
        [{
            "item_id": 7, "record_id": item["record_id"],
            "source_content_hash": item["source_content_hash"], "review_hash": item["review_hash"],
            "reason": reasons.LABEL_CONFLICT, "status": status, "reviewer": reviewer,
            "label": label,
        }]
    )  # fmt: skip


def test_a_reviewers_label_or_rejection_settles_the_cluster(tmp_path, sms_spam, twins):
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    label = twins[0]["label"]
    (item,) = exact_dedup(frame, REVIEW, context(tmp_path, cfg)).review_items.iter_rows(named=True)
    # the review hash, computed by hand: the kept record and every member's (record_id, label)
    rows = frame.collect()
    kept = rows.filter(pl.col("record_id") == ids["third"])
    members = rows.filter(pl.col("record_id").is_in(list(ids.values()))).select(
        pl.lit(ids["third"]).alias("representative"), "record_id", "label"
    )
    assert label_conflicts.review_hashes(kept, members).rows() == [
        (ids["third"], item["review_hash"])
    ]

    approved = decisions_for(item, "approved", "ana", label)
    result = exact_dedup(frame, REVIEW, context(tmp_path, cfg, approved))
    published = result.frame.collect().filter(pl.col("record_id").is_in(list(ids.values())))
    assert published.select("record_id", "label").rows() == [(ids["third"], label)]
    assert by_action(result.events, reasons.EDITED, reasons.LABEL_ADJUDICATED) == {
        ids["third"]: {"item": 7, "reviewer": "ana", "from": FLIPPED[label], "to": label}
    }
    dropped = by_action(result.events, reasons.DROPPED, reasons.EXACT_DUPLICATE)
    assert sorted(dropped) == sorted([ids["first"], ids["second"]])
    assert result.review_items.height == 0
    assert result.stats["label_conflicts"]["adjudicated"] == 1

    rejected = decisions_for(item, "rejected", "bo", None)
    result = exact_dedup(frame, MAJORITY, context(tmp_path, cfg, rejected))
    assert by_action(result.events, reasons.DROPPED, reasons.REVIEW_REJECTED) == {
        record_id: {"item": 7, "reviewer": "bo"} for record_id in ids.values()
    }
    assert result.events.height == 3
    assert not set(ids.values()) & set(result.frame.collect()["record_id"])
    assert result.stats["label_conflicts"]["rejected"] == 1


def test_a_changed_cluster_is_reviewed_again(tmp_path, sms_spam, twins):
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    (item,) = exact_dedup(frame, REVIEW, context(tmp_path, cfg)).review_items.iter_rows(named=True)
    fourth = {**twins[0], "id": "sms-fourth", "sent": "2013-01-01T10:00:00Z"}
    grown, cfg, _ = conflicted(tmp_path / "grown", sms_spam, twins, fourth)
    approved = decisions_for(item, "approved", "ana", twins[0]["label"])
    result = exact_dedup(grown, REVIEW, context(tmp_path, cfg, approved))
    quarantined = by_action(result.events, reasons.QUARANTINED, reasons.LABEL_CONFLICT)
    assert sorted(quarantined) == sorted([*ids.values(), rid("sms-fourth")])
    (again,) = result.review_items.iter_rows(named=True)
    assert again["record_id"] == item["record_id"]
    assert again["review_hash"] != item["review_hash"]


def test_null_labels_never_conflict(tmp_path, sms_spam, twins):
    first, second = twins
    unlabelled = {**first, "id": "sms-unlabelled", "label": None, "sent": "2011-01-01T10:00:00Z"}
    frame, cfg = records(tmp_path, [first, second, unlabelled])
    result = exact_dedup(frame, REVIEW, context(tmp_path, cfg))
    assert result.frame.collect()["record_id"].to_list() == [rid("sms-unlabelled")]
    assert result.frame.collect()["label"].to_list() == [None]
    assert set(result.events["reason"]) == {reasons.EXACT_DUPLICATE}
    assert result.review_items.height == 0
    assert result.stats["label_conflicts"]["clusters"] == 0
    assert result.stats["labelled_by_source"] == {"sms": 2}


def test_a_published_member_is_quarantined_under_review_and_kept_under_majority(
    tmp_path, sms_spam, twins
):
    frame, cfg, ids = conflicted(tmp_path, sms_spam, twins)
    parent = {"record_id": [ids["first"]], "split": ["train"]}
    review = exact_dedup(frame, REVIEW, context(tmp_path, cfg, parent=parent))
    quarantined = by_action(review.events, reasons.QUARANTINED, reasons.LABEL_CONFLICT)
    assert sorted(quarantined) == sorted(ids.values())
    assert quarantined[ids["first"]]["representative"] == ids["first"]
    majority = exact_dedup(frame, MAJORITY, context(tmp_path, cfg, parent=parent))
    survivors = majority.frame.collect().filter(pl.col("record_id").is_in(list(ids.values())))
    assert survivors.select("record_id", "label").rows() == [(ids["first"], twins[0]["label"])]
    dropped = by_action(majority.events, reasons.DROPPED, reasons.EXACT_DUPLICATE)
    assert {r: e["published_in"] for r, e in dropped.items()} == {
        ids["second"]: "parent-hash",
        ids["third"]: "parent-hash",
    }


def test_a_near_duplicate_cluster_with_two_labels_conflicts(tmp_path, sms_spam):
    long = next(
        row for row in sms_rows(sms_spam, 0, 200) if len(row["text"].split()) >= 30
    )  # a real message of 30 words or more, and a copy with one word added
    edited = {
        **long,
        "id": "sms-edited",
        "text": long["text"] + " ok",
        "label": FLIPPED[long["label"]],
    }
    frame, cfg = records(tmp_path, [long, edited, *sms_rows(sms_spam, 200, 210)])
    result = near_dedup(frame, REVIEW, context(tmp_path, cfg))
    quarantined = by_action(result.events, reasons.QUARANTINED, reasons.LABEL_CONFLICT)
    assert sorted(quarantined) == sorted([rid(long["id"]), rid("sms-edited")])
    evidence = quarantined[rid("sms-edited")]
    assert evidence["method"] == "minhash"
    assert {(m["record_id"], m["label"]) for m in evidence["members"]} == {
        (rid(long["id"]), long["label"]),
        (rid("sms-edited"), FLIPPED[long["label"]]),
    }
    assert result.review_items["record_id"].to_list() == [evidence["representative"]]
    assert result.stats["label_conflicts"]["clusters"] == 1
    assert result.stats["dropped"] == 0
