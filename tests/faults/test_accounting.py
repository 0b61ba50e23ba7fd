"""Fault suite, accounting: a stage that loses a record and makes up another keeps the counts
equal; the run still fails at its commit, because the records given a fate must be exactly
the records read in and generated (by record id), and nothing is published."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import SMS_SOURCE, replace_stage, sms_rows, thresher, write_jsonl, write_project

from data_catalog.catalog import Catalog
from pipeline.quality import stage as quality_stage

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_a_stage_that_swaps_a_record_for_another_fails_the_run(tmp_path, sms_spam, monkeypatch):
    honest = quality_stage.quality

    def swapping(frame, cfg, ctx):  # one record lost, one made up: the counts still agree
        result = honest(frame, cfg, ctx)
        kept = result.frame.collect().sort("record_id")
        made_up = pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("f" * 32))
        kept = kept.with_columns(made_up.otherwise(pl.col("record_id")).alias("record_id"))
        return type(result)(kept.lazy(), result.events, result.stats)

    replace_stage(monkeypatch, "quality", swapping)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 60))
    config = write_project(tmp_path, [SMS_SOURCE], gates={"enabled": False})
    result = thresher("run", "--config", config, "--quiet")
    assert result.exit_code == 2
    assert "not the records read in and generated" in " ".join(result.stderr.split())
    assert Catalog.open(tmp_path / "work").versions() == []
