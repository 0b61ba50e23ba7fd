"""Exact dedup: one record per normalized text (`content_hash`).

The copies of a text form a cluster; pipeline/dedup/duplicates.py keeps one (a record published in
the parent version first, then the rules of `dedup.keep`) and drops the others with reason
`exact_duplicate`, evidence naming the kept record and similarity 1.0. A cluster whose copies
carry different labels is settled by pipeline/dedup/label_conflicts.py (`dedup.label_conflicts`).

It runs by key (pipeline/stage.py's ByKey), the key being the content hash: each part lists
its records' ids (as 128-bit numbers) by content hash, each key partition keeps those of
the texts it holds more than once (every copy of a text is in one partition) and links each
copy to the first; the clusters are then decided by component (pipeline/stage.py's
Components) from what the keep rule needs of their members (ids, groups, timestamps,
licenses, labels: never a text), and each part drops its copies and renames its clusters by
the decisions.
"""

from __future__ import annotations

import polars as pl

from pipeline.config import DedupConfig
from pipeline.core import reasons
from pipeline.core.identity import record_node
from pipeline.dedup import duplicates, label_conflicts
from pipeline.stage import ByKey, Components, Decided, RunContext, StageResult

STAGE = "exact_dedup"
DROPS = duplicates.Drops(STAGE, reasons.EXACT_DUPLICATE, "exact")


def _keys(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """Each record of a part by its content hash."""
    part = frame if cfg.exact else frame.limit(0)
    return part.select(pl.col("content_hash").alias("_key"), record_node()).collect()


def _repeated(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The records of the texts one key partition holds more than once."""
    return keys.filter(pl.len().over("_key") > 1).collect()


def _edges(repeated: pl.LazyFrame, cfg: DedupConfig) -> tuple[pl.DataFrame, dict]:
    """Each copy of a text linked to its first."""
    edges = repeated.select("node", pl.col("node").min().over("_key").alias("neighbor"))
    edges = edges.filter(pl.col("node") != pl.col("neighbor"))
    return edges.collect(), {}


def _members(part: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """What the keep rule needs of each record of a part, by its document."""
    part = (part if cfg.exact else part.limit(0)).with_columns(record_node())
    return duplicates.member_columns(part, ctx, extra=("node",)).collect()


def _decide(
    members: pl.DataFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Resolve every text's copies: the one kept, the others dropped pointing at it."""
    return duplicates.decide_components(
        members, records, drops=DROPS, cfg=cfg, ctx=ctx, similarity=1.0
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


# content hashes per part, repeated texts per key partition, clusters resolved, drops
exact_dedup = ByKey(
    keys=_keys,
    reduce=_repeated,
    decide=None,
    apply=_apply,
    components=Components(edges=_edges, members=_members, decide=_decide),
)
