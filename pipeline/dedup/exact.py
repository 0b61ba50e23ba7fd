"""Exact dedup: one record per normalized text (`content_hash`).

The copies of a text form a cluster; pipeline/dedup/duplicates.py keeps one (a record published in
the parent version first, then the rules of `dedup.keep`) and drops the others with reason
`exact_duplicate`, evidence naming the kept record and similarity 1.0. A cluster whose copies
carry different labels is settled by pipeline/dedup/label_conflicts.py (`dedup.label_conflicts`).
"""

from __future__ import annotations

import polars as pl

from pipeline.config import DedupConfig
from pipeline.core import ledger, reasons
from pipeline.core.clusters import with_cluster_ids
from pipeline.dedup import duplicates
from pipeline.stage import RunContext, StageResult

STAGE = "exact_dedup"


def exact_dedup(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> StageResult:
    frame = with_cluster_ids(frame)
    if not cfg.exact:
        return StageResult(frame=frame, events=ledger.empty(), stats={"dropped": 0})
    # only texts that occur more than once need a keep decision
    repeated = frame.filter(pl.col("content_hash").is_duplicated())
    members = duplicates.members_frame(repeated, cfg.keep, ctx, extra=("content_hash",))
    pairs = members.select(
        pl.col("_i").alias("left"),
        pl.col("_i").min().over("content_hash").alias("right"),
        pl.lit(1.0).alias("similarity"),
    ).filter(pl.col("left") != pl.col("right"))
    empty = duplicates.pairs_frame([], [], [])
    resolution = duplicates.resolve(members, pairs, empty, cfg.keep)
    return duplicates.apply(
        frame,
        resolution,
        members,
        stage=STAGE,
        reason=reasons.EXACT_DUPLICATE,
        method="exact",
        similarity=lambda pairs: pl.Series([1.0] * pairs.height, dtype=pl.Float64),
        ctx=ctx,
        stats={},
        labels=cfg.label_conflicts,
    )
