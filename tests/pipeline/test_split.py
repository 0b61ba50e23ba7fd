"""Group-aware split: groups never straddle splits, fractions hold, parents are honoured."""

from __future__ import annotations

import json

import polars as pl
from helpers import CHANGELOG_SOURCE, SMS_SOURCE, sms_rows, write_jsonl

from pipeline import reasons
from pipeline.config import RunConfig, SourceDeclaration, SplitConfig, config_hash
from pipeline.ingest import ingest
from pipeline.split import split
from pipeline.stage import RunContext


def real_records(tmp_path, sms_spam, stop=2000) -> pl.LazyFrame:
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, stop))
    sources = [
        SourceDeclaration(**s, base_dir=str(tmp_path)) for s in (SMS_SOURCE, CHANGELOG_SOURCE)
    ]
    cfg = RunConfig(name="t", sources=sources)
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    return ingest(sources, ctx, tmp_path / "in").frame


def ctx_with(tmp_path, parent: pl.DataFrame | None = None) -> RunContext:
    cfg = RunConfig(name="t", sources=[])
    return RunContext(
        run_id="r",
        run_dir=tmp_path,
        config=cfg,
        config_hash=config_hash(cfg),
        parent_version="p" if parent is not None else None,
        parent_splits=parent.lazy() if parent is not None else None,
    )


def test_no_group_spans_two_splits_and_fractions_hold(tmp_path, sms_spam):
    frame = real_records(tmp_path, sms_spam, stop=4800)
    result = split(frame, SplitConfig(), ctx_with(tmp_path))
    assigned = result.frame.collect()
    assert assigned.height == frame.collect().height
    grouped = (
        assigned.filter(pl.col("group").is_not_null())
        .group_by("group")
        .agg(pl.col("split").n_unique())
    )
    assert grouped["split"].max() == 1
    assert grouped.height > 600  # SMS senders plus changelog maintainers
    shares = assigned.group_by("split").len().with_columns(pl.col("len") / assigned.height)
    share = dict(shares.iter_rows())
    assert (
        abs(share["train"] - 0.8) < 0.04
        and abs(share["validation"] - 0.1) < 0.03
        and abs(share["test"] - 0.1) < 0.03
    )
    assert result.stats["splits"]["train"]["records"] == (assigned["split"] == "train").sum()
    assert result.events.height == 0


def test_adding_records_moves_no_existing_record(tmp_path, sms_spam):
    before = split(
        real_records(tmp_path / "a", sms_spam, 1000), SplitConfig(), ctx_with(tmp_path)
    ).frame.collect()
    after = split(
        real_records(tmp_path / "b", sms_spam, 3000), SplitConfig(), ctx_with(tmp_path)
    ).frame.collect()
    joined = before.select("record_id", "split").join(
        after.select("record_id", "split"), on="record_id", suffix="_after"
    )
    assert joined.height == before.height
    assert (joined["split"] == joined["split_after"]).all()


def test_parent_split_wins_over_the_hash_and_new_group_members_follow_it(tmp_path):
    rows = pl.DataFrame(
        {
            "record_id": ["r1", "r2", "r3", "r4"],
            "source": ["s"] * 4,
            "group": ["g1", "g1", None, "g2"],
        }
    )
    hashed = split(rows.lazy(), SplitConfig(), ctx_with(tmp_path)).frame.collect()
    natural = dict(zip(hashed["record_id"], hashed["split"], strict=True))
    forced = "test" if natural["r1"] != "test" else "validation"
    parent = pl.DataFrame(
        {"record_id": ["r1", "r3"], "split": [forced, forced]}
    )  # r2 is new in group g1
    result = split(rows.lazy(), SplitConfig(), ctx_with(tmp_path, parent))
    decided = dict(result.frame.collect().select("record_id", "split").iter_rows())
    assert decided["r1"] == decided["r2"] == forced and decided["r3"] == forced
    assert decided["r4"] == natural["r4"]
    assert result.stats["moved"] == 0 and result.events.height == 0


def test_a_group_split_by_its_parent_is_reunited_with_a_reason(tmp_path):
    rows = pl.DataFrame({"record_id": ["a", "b"], "source": ["s", "s"], "group": ["g", "g"]})
    parent = pl.DataFrame({"record_id": ["a", "b"], "split": ["validation", "train"]})
    result = split(rows.lazy(), SplitConfig(), ctx_with(tmp_path, parent))
    assert set(result.frame.collect()["split"]) == {"validation"}  # follows its lowest record id
    (event,) = result.events.iter_rows(named=True)
    assert event["record_id"] == "b" and event["action"] == reasons.MOVED and not event["terminal"]
    assert event["reason"] == reasons.SPLIT_CONFLICT
    assert json.loads(event["evidence"]) == {"from": "train", "to": "validation"}


def test_two_way_split_and_salt(tmp_path, sms_spam):
    frame = real_records(tmp_path, sms_spam, 1000)
    two = split(
        frame, SplitConfig(fractions={"train": 0.9, "test": 0.1}), ctx_with(tmp_path)
    ).frame.collect()
    assert set(two["split"]) == {"train", "test"}
    salted = split(frame, SplitConfig(salt="other"), ctx_with(tmp_path)).frame.collect()
    plain = split(frame, SplitConfig(), ctx_with(tmp_path)).frame.collect()
    both = plain.select("record_id", "split").join(
        salted.select("record_id", "split"), on="record_id"
    )
    assert (both["split"] != both["split_right"]).sum() > 50
