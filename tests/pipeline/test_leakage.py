"""The leakage check: a group, duplicate cluster or text in two splits fails, naming records."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest
from helpers import CHANGELOG_SOURCE, SMS_SOURCE, sms_rows, write_jsonl

from pipeline import leakage
from pipeline.config import RunConfig, SourceDeclaration, SplitConfig, config_hash
from pipeline.core.errors import DataError
from pipeline.ingest.stage import ingest
from pipeline.leakage import LeakageError, check_disjoint, leakage_columns
from pipeline.split.assign import group_key, hashed_split
from pipeline.split.stage import split
from pipeline.stage import RunContext

ALL = ("group", "cluster_id", "content_hash")


def frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema=["record_id", "split", "group", "cluster_id", "content_hash"], orient="row"
    )


def real_records(tmp_path, sms_spam) -> tuple[pl.LazyFrame, RunContext]:
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 3000))
    sources = [
        SourceDeclaration(**s, base_dir=str(tmp_path)) for s in (SMS_SOURCE, CHANGELOG_SOURCE)
    ]
    cfg = RunConfig(name="t", sources=sources)
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    return ingest(sources, ctx, tmp_path / "in").frame, ctx


def test_a_cluster_in_two_splits_is_named_with_its_records():
    leaking = frame(
        [
            ("c3d4", "test", "g2", "9f00", "h2"),
            ("a1b2", "train", "g1", "9f00", "h1"),
            ("e5f6", "train", "g1", "7a00", "h3"),
        ]
    )
    with pytest.raises(LeakageError) as raised:
        check_disjoint(leaking, ALL)
    message = str(raised.value)
    assert isinstance(raised.value, DataError)
    assert "1 cluster_id value(s) in more than one split" in message
    assert "cluster_id 9f00 is in train (record a1b2) and test (record c3d4)" in message
    assert message.startswith("leakage: 1 cluster_id value(s) in more than one split: ")
    assert "bug in the split stage" in message
    check_disjoint(leaking, ("group", "content_hash"))  # these columns do not leak


@pytest.mark.parametrize("part_rows", [2_000_000, 1])  # one partition; one per row
def test_every_leaking_column_is_named_and_examples_are_capped(part_rows, monkeypatch):
    monkeypatch.setattr(leakage, "SPANNING_PART_ROWS", part_rows)
    rows = [(f"r{n}", "train", f"g{n}", f"c{n}", None) for n in range(7)]
    rows += [(f"s{n}", "validation", f"g{n}", f"d{n}", None) for n in range(7)]
    rows += [("t0", "test", "g0", "c0", None)]
    with pytest.raises(LeakageError) as raised:
        check_disjoint(frame(rows).lazy(), ALL)
    message = str(raised.value)
    assert "7 group value(s) in more than one split" in message
    assert (
        "group g0 is in train (record r0), validation (record s0) and test (record t0)" in message
    )
    assert "group g4 is in" in message and "group g5 is in" not in message
    assert "; and 2 more." in message
    assert "1 cluster_id value(s)" in message and "cluster_id c0 is in train (record r0)" in message


def test_nulls_and_absent_columns_do_not_leak():
    rows = [("a", "train", None, "c1", None), ("b", "test", None, "c2", None)]
    check_disjoint(frame(rows).drop("content_hash"), ALL)


def test_leakage_columns_follow_the_strategy():
    assert leakage_columns(SplitConfig()) == ALL
    cutoffs = {"validation": datetime(2020, 1, 1, tzinfo=UTC), "test": datetime(2022, 1, 1)}
    assert leakage_columns(SplitConfig(strategy="group_time", cutoffs=cutoffs)) == ALL
    time = SplitConfig(strategy="time", cutoffs="quantiles")
    assert leakage_columns(time) == ("cluster_id", "content_hash")


def test_the_split_stage_output_passes_where_hashing_each_group_leaks(tmp_path, sms_spam):
    records, ctx = real_records(tmp_path, sms_spam)
    cfg = SplitConfig()
    check_disjoint(split(records, cfg, ctx).frame, leakage_columns(cfg))
    # hashing each sender on its own puts repeated SMS texts of different senders apart
    per_group = records.with_columns(hashed_split(group_key(), cfg).alias("split"))
    with pytest.raises(LeakageError, match=r"content_hash value\(s\) in more than one split"):
        check_disjoint(per_group, leakage_columns(cfg))
