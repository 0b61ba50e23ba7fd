"""The contamination stage on real SMS messages split as a run splits them, with training
records that copy test messages: checked batch by batch (`runner.part_rows` records at a
time), it gives the answer of one batch."""

from __future__ import annotations

import polars as pl
from helpers import SMS_SOURCE, sms_rows, write_jsonl
from polars.testing import assert_frame_equal

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.contamination.stage import contamination
from pipeline.ingest.stage import ingest
from pipeline.split.stage import split
from pipeline.stage import RunContext


def split_records(tmp_path, sms_spam) -> pl.DataFrame:
    """400 SMS split by the default rule; the first 12 training records copy a test
    message, every third with a few words added."""
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 400))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))]
    cfg = RunConfig(name="c", workdir=str(tmp_path / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    frame = split(ingest(sources, ctx, tmp_path / "in").frame, cfg.split, ctx).frame.collect()
    test = frame.filter(pl.col("split") == "test").sort("record_id").head(12)
    train = frame.filter(pl.col("split") == "train").sort("record_id").head(12)
    copies = train.with_columns(
        pl.Series("text", test["text"])
        + pl.when(pl.int_range(12) % 3 == 0)
        .then(pl.lit(" see you at the station tonight"))
        .otherwise(pl.lit("")),
        pl.Series("content_hash", test["content_hash"]),
    )
    others = frame.join(copies.select("record_id"), on="record_id", how="anti")
    return pl.concat([others, copies.select(frame.columns)])


def checked(tmp_path, records: pl.DataFrame, part_rows: int):
    cfg = RunConfig(name="c", sources=[], runner={"part_rows": part_rows})
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    return contamination(records.lazy(), cfg.contamination, ctx)


def test_batches_give_the_answer_of_one(tmp_path, sms_spam):
    records = split_records(tmp_path, sms_spam)
    whole = checked(tmp_path / "whole", records, part_rows=1_000_000)
    batched = checked(tmp_path / "batched", records, part_rows=23)
    assert whole.stats["checked"] == records.filter(pl.col("split") != "test").height
    figures = whole.stats["eval_sets"]["test"]
    assert figures["records"] >= 12 and whole.stats["dropped"] >= 12
    assert figures["examples"] == sorted(figures["examples"])
    assert_frame_equal(batched.events, whole.events)
    assert_frame_equal(batched.frame.collect(), whole.frame.collect())
    drop = ("seconds",)
    assert {k: v for k, v in batched.stats.items() if k not in drop} == {
        k: v for k, v in whole.stats.items() if k not in drop
    }
    assert not (tmp_path / "batched" / "contamination-work").exists()
