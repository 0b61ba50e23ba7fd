"""Exact dedup: one record per normalized text (`content_hash`).

The copies of a text form a cluster; pipeline/dedup/duplicates.py keeps one (a record published in
the parent version first, then the rules of `dedup.keep`) and drops the others with reason
`exact_duplicate`, evidence naming the kept record and similarity 1.0. A cluster whose copies
carry different labels is settled by pipeline/dedup/label_conflicts.py (`dedup.label_conflicts`).

It runs by key (pipeline/stage.py's ByKey), the key being the content hash: each part lists
what the keep rule needs of its records, each key partition keeps the rows of the texts it
holds more than once (every copy of a text is in one partition), the clusters are resolved
from those rows alone (ids, groups, timestamps, licenses, labels: never a text), and each part
drops its copies and renames its clusters by the decisions.
"""

from __future__ import annotations

import polars as pl

from pipeline.config import DedupConfig
from pipeline.core import reasons
from pipeline.dedup import duplicates, label_conflicts
from pipeline.stage import ByKey, Decided, RunContext, StageResult

STAGE = "exact_dedup"
DROPS = duplicates.Drops(STAGE, reasons.EXACT_DUPLICATE, "exact")


def _keys(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """What the keep rule needs of each record of a part, keyed by its content hash."""
    keys = duplicates.member_columns(
        frame if cfg.exact else frame.limit(0), ctx, extra=(pl.col("content_hash").alias("_key"),)
    )
    return keys.collect()


def _repeated(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The rows of the texts one key partition holds more than once."""
    return keys.filter(pl.len().over("_key") > 1).collect()


def _decide(
    repeated: pl.LazyFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Resolve every text's copies: the one kept, the others dropped pointing at it."""
    if not cfg.exact:
        return Decided(pl.DataFrame(schema=duplicates.DECISION_SCHEMA), {"dropped": 0})
    members = duplicates.numbered(repeated.collect(), ctx)
    pairs = members.select(
        pl.col("_i").alias("left"),
        pl.col("_i").min().over("_key").alias("right"),
        pl.lit(1.0).alias("similarity"),
    ).filter(pl.col("left") != pl.col("right"))
    empty = duplicates.pairs_frame([], [], [])
    resolution = duplicates.resolve(members, pairs, empty, cfg.keep)
    return duplicates.decide(
        members.drop("_key"),
        resolution,
        records,
        drops=DROPS,
        similarity=lambda pairs: pl.Series([1.0] * pairs.height, dtype=pl.Float64),
        ctx=ctx,
        stats={},
        labels=cfg.label_conflicts,
    )


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> StageResult:
    """Drop a part's copies, give its kept records their cluster ids and settled labels."""
    kept, events = duplicates.apply_decisions(frame, decisions, DROPS, ctx)
    stats = {}
    if cfg.exact and cfg.label_conflicts is not None:
        stats["labelled_by_source"] = label_conflicts.labelled_by_source(frame)
    return StageResult(frame=kept, events=events, stats=stats)


# what the keep rule needs per part, repeated texts per key partition, clusters resolved, drops
exact_dedup = ByKey(keys=_keys, reduce=_repeated, decide=_decide, apply=_apply)
