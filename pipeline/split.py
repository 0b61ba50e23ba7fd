"""Group-aware split: a group never spans two splits, and splits are stable across versions.

Order of decision (DESIGN.md): the split a group's records had in the parent version, then a
stable hash of the group key. A record without a group is its own group. When the parent
put members of one group in different splits (the grouping changed), the group follows its
lowest record_id that has a parent split; every record that has to move for that gets a
non-terminal `moved` event with reason `split_conflict`, never a silent move.

The hash is xxh3-64 of `salt + group key`, scaled to [0, 1) and cut at the cumulative
fractions, so adding records never moves an existing group.
"""

from __future__ import annotations

import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline import ledger, reasons
from pipeline.config import SPLITS, SplitConfig
from pipeline.stage import RunContext, StageResult

STAGE = "split"


def group_key() -> pl.Expr:
    return (
        pl.when(pl.col("group").is_not_null())
        .then(pl.concat_str(pl.lit("group:"), pl.col("group")))
        .otherwise(pl.concat_str(pl.lit("record:"), pl.col("record_id")))
    )


def hashed_split(key: pl.Expr, cfg: SplitConfig) -> pl.Expr:
    """The split a new group gets from a stable hash of its key."""
    position = pl.concat_str([pl.lit(cfg.salt), key]).nchash.xxh3_64().cast(pl.Float64) / 2.0**64
    names = list(cfg.fractions)
    expr, cut = None, 0.0
    for name in names[:-1]:  # position < cut_1 -> first split, < cut_2 -> second, ...
        cut += cfg.fractions[name]
        branch = pl.when(position < cut) if expr is None else expr.when(position < cut)
        expr = branch.then(pl.lit(name))
    last = pl.lit(names[-1])
    return last if expr is None else expr.otherwise(last)


def split(frame: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext) -> StageResult:
    members = frame.select("record_id", "source", group_key().alias("_group_key"))
    if ctx.parent_splits is not None:
        parent = ctx.parent_splits.select("record_id", pl.col("split").alias("_parent_split"))
        members = members.join(parent, on="record_id", how="left")
    else:
        members = members.with_columns(pl.lit(None, dtype=pl.String).alias("_parent_split"))
    inherited = (
        members.filter(pl.col("_parent_split").is_not_null())
        .sort("record_id")
        .group_by("_group_key")
        .agg(pl.col("_parent_split").first().alias("_inherited"))
    )
    decided = (
        members.join(inherited, on="_group_key", how="left")
        .with_columns(
            pl.coalesce("_inherited", hashed_split(pl.col("_group_key"), cfg)).alias("split")
        )
        .collect()
    )
    moved = decided.filter(
        pl.col("_parent_split").is_not_null() & (pl.col("_parent_split") != pl.col("split"))
    )
    events = ledger.events(
        moved,
        stage=STAGE,
        action=reasons.MOVED,
        reason=reasons.SPLIT_CONFLICT,
        evidence=pl.struct(pl.col("_parent_split").alias("from"), pl.col("split").alias("to")),
    )
    assigned = frame.join(decided.lazy().select("record_id", "split"), on="record_id", how="inner")
    counts = decided.group_by("split").agg(
        pl.len().alias("records"), pl.col("_group_key").n_unique().alias("groups")
    )
    per_split = {
        row["split"]: {"records": row["records"], "groups": row["groups"]}
        for row in counts.iter_rows(named=True)
    }
    stats = {
        "splits": {name: per_split.get(name, {"records": 0, "groups": 0}) for name in SPLITS},
        "inherited_from_parent": decided["_inherited"].is_not_null().sum(),
        "moved": moved.height,
    }
    return StageResult(frame=assigned, events=events, stats=stats)
