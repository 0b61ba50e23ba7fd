"""Synthetic records: kept out of validation and test without leaking, and capped by count."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
import xxhash
from helpers import as_records, run_context, run_in_parts

from pipeline.augment.synthetic import synthetic
from pipeline.config import SyntheticPolicy
from pipeline.core import reasons
from pipeline.leakage import check_disjoint


def records(sms_spam: pl.DataFrame, rows: list[dict]) -> pl.LazyFrame:
    """Real SMS texts under the given ids, splits, groups and synthetic flags."""
    texts = sms_spam["text"].head(len(rows)).to_list()
    full = [
        {
            "source": "generated" if row.get("synthetic") else "sms",
            "group": row["record_id"],
            "content_hash": row["record_id"],
            "text": text,
            "synthetic": False,
            **row,
        }
        for row, text in zip(rows, texts, strict=True)
    ]
    frame = as_records(full).collect()
    clusters = [row.get("cluster_id", row["record_id"]) for row in full]
    splits = [row["split"] for row in full]
    return frame.with_columns(pl.Series("cluster_id", clusters), pl.Series("split", splits)).lazy()


def test_the_cap_keeps_the_most_synthetic_records_the_share_allows(tmp_path, sms_spam):
    real = [{"record_id": f"real-{i}", "split": "train"} for i in range(60)]
    made = [{"record_id": f"syn-{i}", "split": "train", "synthetic": True} for i in range(40)]
    cfg = SyntheticPolicy(max_share={"train": 0.25})
    result = synthetic(records(sms_spam, real + made), cfg, run_context(tmp_path))

    # s / (60 + s) <= 0.25 holds up to s = 20: 20 of the 40 stay
    allowed = math.floor(0.25 * 60 / 0.75)
    assert allowed == 20
    capped = result.events.filter(pl.col("reason") == reasons.SYNTHETIC_CAP)
    assert capped.height == 20 and capped["terminal"].all()
    assert set(capped["action"]) == {reasons.DROPPED}
    by_hash = sorted(
        (xxhash.xxh3_128_hexdigest(row["record_id"].encode()), row["record_id"]) for row in made
    )
    assert set(capped["record_id"]) == {record_id for _, record_id in by_hash[20:]}
    kept = result.frame.collect()
    assert kept.height == 80 and kept["synthetic"].sum() == 20
    assert json.loads(capped["evidence"][0]) == {
        "split": "train", "max_share": 0.25, "allowed": 20, "synthetic": 40,
    }  # fmt: skip
    assert result.stats["dropped_cap"] == {"train": 20}
    assert result.stats["share"]["train"] == {"records": 80, "synthetic": 20, "share": 0.25}


def test_a_zero_share_drops_every_synthetic_record_of_that_split(tmp_path, sms_spam):
    rows = [{"record_id": "real-0", "split": "train"}] + [
        {"record_id": f"syn-{i}", "split": "train", "synthetic": True} for i in range(3)
    ]
    result = synthetic(
        records(sms_spam, rows), SyntheticPolicy(max_share={"train": 0}), run_context(tmp_path)
    )
    assert result.frame.collect()["record_id"].to_list() == ["real-0"]


HELD_OUT_ROWS = [
    {"record_id": "real-test", "split": "test", "group": "sender-1"},
    {"record_id": "real-val", "split": "validation", "cluster_id": "c-1"},
    # alone in validation: moves to train
    {"record_id": "syn-alone", "split": "validation", "synthetic": True},
    # shares a group with a real test record: moving it would put the group in two splits
    {"record_id": "syn-grouped", "split": "test", "group": "sender-1", "synthetic": True},
    # shares a cluster with a real validation record, and a group with syn-linked
    {"record_id": "syn-clustered", "split": "validation", "cluster_id": "c-1",
     "group": "g-2", "synthetic": True},
    {"record_id": "syn-linked", "split": "validation", "group": "g-2", "synthetic": True},
]  # fmt: skip


def test_synthetic_records_leave_validation_and_test_unless_that_would_leak(tmp_path, sms_spam):
    rows = [{"record_id": "real-train", "split": "train"}, *HELD_OUT_ROWS]
    result = synthetic(records(sms_spam, rows), SyntheticPolicy(), run_context(tmp_path))

    out = result.frame.collect()
    assert dict(out.select("record_id", "split").iter_rows()) == {
        "real-train": "train",
        "real-test": "test",
        "real-val": "validation",
        "syn-alone": "train",
        "syn-linked": "train",  # its only link to a real record went with syn-clustered
    }
    dropped = result.events.filter(pl.col("terminal"))
    assert dict(dropped.select("record_id", "reason").iter_rows()) == {
        "syn-grouped": reasons.SYNTHETIC_HELD_OUT,
        "syn-clustered": reasons.SYNTHETIC_HELD_OUT,
    }
    shares = {
        row["record_id"]: json.loads(row["evidence"])["shares_with_real_record"]
        for row in dropped.iter_rows(named=True)
    }
    assert shares == {"syn-grouped": "group", "syn-clustered": "cluster_id"}
    moved = result.events.filter(pl.col("action") == reasons.MOVED)
    assert sorted(moved["record_id"]) == ["syn-alone", "syn-linked"]
    assert json.loads(moved["evidence"][0]) == {"from": "validation", "to": "train"}
    check_disjoint(out, ("group", "cluster_id", "content_hash"))
    assert result.stats["moved_to_train"] == 2 and result.stats["dropped_held_out"] == 2


@pytest.mark.parametrize("held_out", [True, False])
def test_held_out_allowed_or_a_locked_test_set_keeps_them_in_place(tmp_path, sms_spam, held_out):
    rows = [
        {"record_id": "syn-val", "split": "validation", "synthetic": True},
        {"record_id": "syn-locked", "split": "test", "synthetic": True},
    ]
    ctx = run_context(tmp_path, locked_test=pl.DataFrame({"record_id": ["syn-locked"]}))
    result = synthetic(records(sms_spam, rows), SyntheticPolicy(held_out=held_out), ctx)
    placed = dict(result.frame.collect().select("record_id", "split").iter_rows())
    assert placed == {"syn-val": "validation" if held_out else "train", "syn-locked": "test"}
    assert result.events.filter(pl.col("terminal")).height == 0


def test_cut_in_parts_it_moves_blocks_and_caps_as_one_call_does(tmp_path, sms_spam):
    """Run by key: a synthetic record in one part is blocked by a real record (or a locked
    synthetic one) in another, and the caps count every part."""
    rows = [
        *({"record_id": f"real-{i:02d}", "split": "train"} for i in range(40)),
        *({"record_id": f"syn-{i:02d}", "split": "train", "synthetic": True} for i in range(30)),
        *HELD_OUT_ROWS,
        {"record_id": "syn-locked", "split": "test", "group": "g-3", "synthetic": True},
        {"record_id": "syn-beside-locked", "split": "test", "group": "g-3", "synthetic": True},
    ]  # fmt: skip
    cfg = SyntheticPolicy(max_share={"train": 0.3})
    ctx = run_context(tmp_path, locked_test=pl.DataFrame({"record_id": ["syn-locked"]}))
    whole = synthetic(records(sms_spam, rows), cfg, ctx)
    shuffled = records(sms_spam, rows).collect().sample(fraction=1.0, shuffle=True, seed=3)
    parted = run_in_parts(synthetic, shuffled.lazy(), cfg, ctx, 4)
    assert parted.frame.collect().equals(whole.frame.collect().sort("record_id"))
    assert parted.events.equals(whole.events.sort("record_id", maintain_order=True))
    assert parted.stats == whole.stats
    dropped = dict(whole.events.filter(pl.col("terminal")).group_by("reason").len().iter_rows())
    # blocked: by a real record's group, a real record's cluster, a locked record's group
    assert dropped[reasons.SYNTHETIC_HELD_OUT] == 3
    assert dropped[reasons.SYNTHETIC_CAP] == whole.stats["dropped_cap"]["train"] > 0
    assert whole.stats["share"]["train"]["share"] <= 0.3
