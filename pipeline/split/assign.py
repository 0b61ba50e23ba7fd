"""Where a component goes: a stable hash of its smallest key (group strategies), its time
against the cutoffs (time strategies, quantile cutoffs frozen at the first publish), or the
stratified order that keeps each label's share."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import polars as pl

from pipeline.config.base import SPLITS
from pipeline.config.split import SplitConfig
from pipeline.core.errors import DataError
from pipeline.stage import RunContext


def group_key() -> pl.Expr:
    return (
        pl.when(pl.col("group").is_not_null())
        .then(pl.concat_str(pl.lit("group:"), pl.col("group")))
        .otherwise(pl.concat_str(pl.lit("record:"), pl.col("record_id")))
    )


def hash_position(key: pl.Expr, cfg: SplitConfig) -> pl.Expr:
    """xxh3-64 of salt + key, scaled to [0, 1)."""
    return pl.concat_str([pl.lit(cfg.salt), key]).nchash.xxh3_64().cast(pl.Float64) / 2.0**64


def hashed_split(key: pl.Expr, cfg: SplitConfig) -> pl.Expr:
    """The split a new component gets from a stable hash of its key."""
    position = hash_position(key, cfg)
    names = list(cfg.fractions)
    expr, cut = None, 0.0
    for name in names[:-1]:  # position < cut_1 -> first split, < cut_2 -> second, ...
        cut += cfg.fractions[name]
        branch = pl.when(position < cut) if expr is None else expr.when(position < cut)
        expr = branch.then(pl.lit(name))
    last = pl.lit(names[-1])
    return last if expr is None else expr.otherwise(last)


def time_split(when: pl.Expr, cutoffs: dict[str, datetime]) -> pl.Expr:
    """The split whose window holds `when` (null for a null time); a split without a cutoff
    has an empty window."""
    expr = pl.when(when.is_null()).then(pl.lit(None, pl.String))
    for name in ("test", "validation"):
        if name in cutoffs:
            expr = expr.when(when >= pl.lit(cutoffs[name])).then(pl.lit(name))
    return expr.otherwise(pl.lit("train"))


def resolve_cutoffs(
    cfg: SplitConfig, ctx: RunContext, times: pl.Series
) -> tuple[dict[str, datetime], bool]:
    """The cutoffs to use, and whether they are the frozen ones of the first publish."""
    if isinstance(cfg.cutoffs, dict):
        return dict(cfg.cutoffs), False
    held_out = [name for name in SPLITS[1:] if cfg.fractions.get(name, 0) > 0]
    if ctx.frozen_cutoffs is not None:
        unfrozen = [name for name in held_out if name not in ctx.frozen_cutoffs]
        if unfrozen:
            raise DataError(
                f"the time cutoffs of {ctx.config.name!r} were frozen at its first publish for "
                f"{', '.join(ctx.frozen_cutoffs) or 'no split'}, and the config now also holds out "
                f"{', '.join(unfrozen)}; give fixed cutoffs (split.cutoffs: {{validation: …, "
                "test: …}) or publish under a new dataset name"
            )
        frozen = {name: ctx.frozen_cutoffs[name] for name in held_out}
        return {
            name: when if when.tzinfo else when.replace(tzinfo=UTC) for name, when in frozen.items()
        }, True
    times = times.drop_nulls()
    cutoffs, share = {}, 0.0
    for name in SPLITS:  # a held-out split starts at the quantile of the fractions before it
        if name in held_out and times.len():
            cutoffs[name] = times.quantile(share, interpolation="lower")
        share += cfg.fractions.get(name, 0.0)
    return cutoffs, False


def stratified(
    units: pl.DataFrame, members: pl.DataFrame, cfg: SplitConfig
) -> tuple[pl.DataFrame, dict[str, int]]:
    """New components of each label stratum (a component's most common label, ties to the
    smallest) go, in hash order, to the split furthest below its fraction of the stratum's
    records, counting the stratum's locked and inherited components.

    A label of fewer components than the smallest fraction needs to get one (10 for 10%)
    cannot be spread: alone, each such component would go to train. Those labels are pooled
    into one stratum, which holds the fractions; the counts of what was pooled are returned.
    """
    labels = (
        members.filter(pl.col("label").is_not_null())
        .group_by("_component", "label")
        .len()
        .sort("len", "label", descending=[True, False])
        .group_by("_component", maintain_order=True)
        .first()
        .select("_component", pl.col("label").alias("_stratum"))
    )
    smallest = min(fraction for fraction in cfg.fractions.values() if fraction > 0)
    needed = math.ceil(1 / smallest - 1e-9)
    units = units.join(labels, on="_component", how="left").with_columns(
        (pl.col("_stratum").is_not_null() & (pl.len().over("_stratum") < needed)).alias("_pooled")
    )
    pooled = units.filter("_pooled")
    facts = {
        "min_components": needed,
        "pooled_labels": pooled["_stratum"].n_unique(),
        "pooled_records": int(pooled["_size"].sum()),
    }
    units = units.with_columns(
        pl.when("_pooled").then(None).otherwise(pl.col("_stratum")).alias("_stratum")
    )
    names = list(cfg.fractions)
    targets = [cfg.fractions[name] for name in names]
    chosen_components, chosen_splits = [], []
    for stratum in units.partition_by("_stratum", "_pooled"):
        fixed = stratum.filter(pl.col("_decided_by") != "new")
        sizes = dict(fixed.group_by("split").agg(pl.col("_size").sum()).iter_rows())
        counts = [sizes.get(name, 0) for name in names]
        placed = fixed["_size"].sum()
        new = (
            stratum.filter(pl.col("_decided_by") == "new")
            .with_columns(hash_position(pl.col("_smallest_key"), cfg).alias("_position"))
            .sort("_position", "_smallest_key")
        )
        for component, size in new.select("_component", "_size").iter_rows():
            placed += size
            deficits = [
                target * placed - count for target, count in zip(targets, counts, strict=True)
            ]
            pick = deficits.index(max(deficits))  # ties: the first in split order
            counts[pick] += size
            chosen_components.append(component)
            chosen_splits.append(names[pick])
    chosen = pl.DataFrame(
        {"_component": chosen_components, "_stratified": chosen_splits},
        schema={"_component": units.schema["_component"], "_stratified": pl.String},
    )
    assigned = (
        units.join(chosen, on="_component", how="left")
        .with_columns(pl.coalesce("_stratified", "split").alias("split"))
        .drop("_stratified", "_stratum", "_pooled")
    )
    return assigned, facts
