"""Spilled partitions: what a step finds one partition at a time is what it finds at once."""

from __future__ import annotations

import random

import polars as pl

from pipeline.core import spill


def test_a_distinct_count_over_hash_partitions_is_the_count_at_once(tmp_path, monkeypatch):
    draw = random.Random(5)
    values = pl.LazyFrame({"key": [f"g{draw.randrange(300)}" for _ in range(2_000)]})
    at_once = values.collect()["key"].n_unique()
    assert spill.count_distinct(values, tmp_path) == at_once
    monkeypatch.setattr(spill, "DISTINCT_PART_ROWS", 90)  # 23 partitions
    assert spill.count_distinct(values, tmp_path) == at_once
    assert spill.count_distinct(values.filter(pl.lit(False)), tmp_path) == 0
    assert not list(tmp_path.iterdir())  # the partitions are removed
