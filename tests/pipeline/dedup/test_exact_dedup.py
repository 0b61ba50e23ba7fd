"""Exact dedup on real SMS duplicates: the keep rule and `duplicate_of`, by value."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
from helpers import SMS_SOURCE, as_records, sms_rows, write_jsonl

from pipeline.config import DedupConfig, RunConfig, SourceDeclaration, config_hash
from pipeline.core import reasons
from pipeline.dedup.exact import exact_dedup
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext


def context(tmp_path):
    source = SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))
    cfg = RunConfig(name="t", sources=[source])
    return cfg, RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))


def records(rows):
    return as_records(rows, source="s")


def test_real_sms_duplicates_collapse_to_one_record_each(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 1000))
    cfg, ctx = context(tmp_path)
    ingested = ingest(cfg.source_list, ctx, tmp_path / "in").frame
    result = exact_dedup(ingested, cfg.dedup, ctx)
    kept = result.frame.collect()
    all_rows = ingested.collect()
    assert kept.height == all_rows["content_hash"].n_unique()
    assert kept["content_hash"].is_unique().all()
    assert result.stats["dropped"] == all_rows.height - kept.height > 10
    assert set(result.events["reason"]) == {reasons.EXACT_DUPLICATE}
    # each dropped copy names a kept record with the same text
    pointers = result.events.select(
        "record_id", pl.col("evidence").str.json_path_match("$.duplicate_of").alias("kept")
    )
    texts = dict(zip(all_rows["record_id"], all_rows["content_hash"], strict=True))
    assert all(texts[a] == texts[b] for a, b in pointers.iter_rows())
    assert set(pointers["kept"]) <= set(kept["record_id"])


def test_keep_rule_prefers_earliest_then_lowest_id(tmp_path):
    """Exact copies share their text, so `longest_text` never decides between them (the near
    duplicate tests show it deciding): the earliest timestamp does, then the lowest id."""
    _, ctx = context(tmp_path)
    early, late = datetime(2020, 1, 1, tzinfo=UTC), datetime(2021, 1, 1, tzinfo=UTC)
    rows = [
        {"record_id": "c", "content_hash": "h1", "text": "same", "timestamp": late},
        {"record_id": "b", "content_hash": "h1", "text": "same", "timestamp": early},
        {"record_id": "a", "content_hash": "h1", "text": "same", "timestamp": None},
        {"record_id": "e", "content_hash": "h2", "text": "other", "timestamp": None},
        {"record_id": "d", "content_hash": "h2", "text": "other", "timestamp": None},
    ]
    result = exact_dedup(records(rows), DedupConfig(), ctx)
    assert sorted(result.frame.collect()["record_id"]) == ["b", "d"]
    duplicate_of = {
        r: json.loads(e)["duplicate_of"]
        for r, e in zip(result.events["record_id"], result.events["evidence"], strict=True)
    }
    assert duplicate_of == {"c": "b", "a": "b", "e": "d"}
    lowest_first = exact_dedup(records(rows), DedupConfig(keep=["lowest_record_id"]), ctx)
    assert sorted(lowest_first.frame.collect()["record_id"]) == ["a", "d"]


def test_turned_off_it_keeps_everything(tmp_path):
    _, ctx = context(tmp_path)
    rows = [{"record_id": x, "content_hash": "h", "text": "t", "timestamp": None} for x in "ab"]
    result = exact_dedup(records(rows), DedupConfig(exact=False), ctx)
    assert result.frame.collect().height == 2 and result.events.height == 0


def test_a_record_published_in_the_parent_wins_over_an_earlier_newcomer(tmp_path):
    cfg, _ = context(tmp_path)
    parent = pl.DataFrame({"record_id": ["z-old"], "split": ["train"]}).lazy()
    ctx = RunContext(
        run_id="r",
        run_dir=tmp_path,
        config=cfg,
        config_hash="h",
        parent_version="p",
        parent_splits=parent,
    )
    rows = [
        {
            "record_id": "a-new",
            "content_hash": "h",
            "text": "t",
            "timestamp": datetime(2000, 1, 1, tzinfo=UTC),
        },
        {
            "record_id": "z-old",
            "content_hash": "h",
            "text": "t",
            "timestamp": datetime(2020, 1, 1, tzinfo=UTC),
        },
    ]
    result = exact_dedup(records(rows), DedupConfig(), ctx)
    assert result.frame.collect()["record_id"].to_list() == ["z-old"]
    assert json.loads(result.events["evidence"][0]) == {
        "duplicate_of": "z-old",
        "method": "exact",
        "similarity": 1.0,
        "cluster_id": "a-new",
        "published_in": "p",
    }
    # the kept record takes the cluster's smallest record_id as its cluster id
    assert result.frame.collect()["cluster_id"].to_list() == ["a-new"]


def test_ids_that_share_their_first_64_bits_are_told_apart(tmp_path):
    """Exact dedup's components are over whole 128-bit record ids: two copies whose ids
    share their first 16 hex digits are still two records, one of them dropped."""
    _, ctx = context(tmp_path)
    shared = "0123456789abcdef"
    rows = [
        {"record_id": f"{shared}{'0' * 15}1", "content_hash": "h1", "text": "same"},
        {"record_id": f"{shared}{'0' * 15}2", "content_hash": "h1", "text": "same"},
        {"record_id": f"{shared}{'0' * 15}3", "content_hash": "h2", "text": "other"},
    ]
    result = exact_dedup(records(rows), DedupConfig(), ctx)
    assert result.frame.collect()["record_id"].to_list() == [
        rows[0]["record_id"],
        rows[2]["record_id"],
    ]
    assert result.events["record_id"].to_list() == [rows[1]["record_id"]]
