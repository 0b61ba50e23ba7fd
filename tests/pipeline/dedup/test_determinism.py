"""The dedup stages decide from record ids and content only: permuting their input never
changes their events or the clusters of the records they keep (tests/near_copies.py: 3,000
edited near-copies of real text, so MinHash buckets and embedding neighbourhoods hold many
members)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import as_records
from near_copies import near_copy_rows

from pipeline.config import DedupConfig, RunConfig, config_hash
from pipeline.core.identity import xxh3_128_hex
from pipeline.dedup.exact import exact_dedup
from pipeline.dedup.near import near_dedup
from pipeline.dedup.semantic import semantic_dedup
from pipeline.stage import RunContext

ORDERS = [11, 12, 13]


@pytest.fixture(scope="module")
def records(sms_spam) -> pl.DataFrame:
    rows = near_copy_rows(sms_spam)
    frames = [
        as_records(
            [{"record_id": row["id"], "text": row["text"], "label": row["label"],
              "group": row["user"], "timestamp": datetime.fromisoformat(row["sent"])} for row in rows[source]],
            source=source, license="CC-BY-4.0",
        ).collect()
        for source in rows
    ]  # fmt: skip
    frame = pl.concat(frames)
    return frame.with_columns(xxh3_128_hex(frame["text"]).alias("content_hash"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One work folder, so that its embedding cache serves every test."""
    return tmp_path_factory.mktemp("work")


def context(tmp_path, workdir, dedup: DedupConfig) -> RunContext:
    cfg = RunConfig(name="t", workdir=str(workdir), sources=[], dedup=dedup)
    return RunContext(
        run_id="r", run_dir=tmp_path / "run", config=cfg, config_hash=config_hash(cfg)
    )


def outcome(result) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The stage's events and its kept records' clusters, in record_id order."""
    events = result.events.sort("record_id", "stage", "action")
    kept = result.frame.select("record_id", "cluster_id").collect().sort("record_id")
    return events, kept


SEMANTIC = {"threshold": 0.92, "related_threshold": 0.85}
CASES = {  # stage, its config, every how-many-th record it sees, the fewest drops expected
    "exact_dedup": (exact_dedup, DedupConfig(), 1, 300),
    "near_dedup": (near_dedup, DedupConfig(), 1, 300),
    "semantic_exact_search": (semantic_dedup, DedupConfig(semantic=SEMANTIC), 10, 50),
    "semantic_partitioned": (
        semantic_dedup,
        DedupConfig(semantic={**SEMANTIC, "exact_search_max": 100, "partitions": 6}),
        10,
        50,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_permuted_input_gives_the_same_decisions(tmp_path, workdir, records, case):
    stage, dedup, every, fewest_drops = CASES[case]
    records = records.gather_every(every)
    expected_events, expected_kept = outcome(
        stage(records.lazy(), dedup, context(tmp_path, workdir, dedup))
    )
    assert expected_events.height >= fewest_drops  # the fixture is demanding: many decisions
    for seed in ORDERS:
        shuffled = records.sample(fraction=1.0, shuffle=True, seed=seed)
        events, kept = outcome(stage(shuffled.lazy(), dedup, context(tmp_path, workdir, dedup)))
        assert events.equals(expected_events), f"events differ for order {seed}"
        assert kept.equals(expected_kept), f"kept records differ for order {seed}"
