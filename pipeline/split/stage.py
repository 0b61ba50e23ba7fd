"""Split: train, validation and test that never leak and stay stable across versions.

Records are assigned in connected components, linked by a shared `group` (strategies group
and group_time), `cluster_id` (duplicate and related clusters from dedup) or `content_hash`.
A component's split is decided in this order (DESIGN.md, "Split stability"):

1. `test` when it holds a record of the locked test set;
2. its members' split in the parent version; when they were in different splits, the most
   held-out one: test, then validation, then train;
3. new: `group` cuts xxh3-64(salt + the component's smallest key) / 2^64 at the cumulative
   fractions, the key being `group:<group>` or `record:<record_id>`, so adding records does
   not move a component unless it joins another one; with `stratify: label` new components
   instead fill each label's deficit, in hash order. `time` and `group_time` take the window
   holding the component's anchor time (its earliest or latest record time).

Windows: train before the validation cutoff, validation before the test cutoff, test from it.
`quantiles` cutoffs are the frozen ones of the first publish (ctx.frozen_cutoffs) or cut at
the fractions of the record times. With time strategies a record whose own time lies in
another window is dropped, or moved with its component (`group_time_conflict`); a component
without any time is dropped (`missing_timestamp`). Locked records are never dropped here (they
move with their component), nor is a component without time that has a parent split. A record that leaves its parent split
gets a `moved` event (`locked_test` or `split_conflict`): nothing moves silently. A new
record that would join records of two splits (directly or through other new records: a
sender's new message repeating another sender's test message) is dropped (`split_conflict`),
so published records stay where they are.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.config import SPLITS, SplitConfig
from pipeline.core import ledger, reasons
from pipeline.core.errors import DataError
from pipeline.core.identity import with_cluster_ids
from pipeline.dedup.duplicates import components
from pipeline.leakage import leakage_columns
from pipeline.stage import RunContext, StageResult

STAGE = "split"
HELD_OUT_FIRST = {"test": 0, "validation": 1, "train": 2}
FRACTION_DRIFT = 0.1  # a split further than this from its fraction gets a warning
ISO = "%Y-%m-%dT%H:%M:%S%.f%:z"  # as datetime.isoformat()
_OPTIONAL = {
    "group": pl.String,
    "content_hash": pl.String,
    "timestamp": pl.Datetime("us", "UTC"),
    "label": pl.String,
}


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


def split(frame: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext) -> StageResult:
    timed = cfg.strategy != "group"
    columns = leakage_columns(cfg)
    members = _members(frame, ctx)
    bridges = _bridging(members, columns)
    members = members.join(bridges, on="_i", how="anti").drop("_i").with_row_index("_i")
    members = members.with_columns(pl.Series("_component", _component_of(members, columns)))
    cutoffs, frozen = resolve_cutoffs(cfg, ctx, members["timestamp"]) if timed else ({}, False)
    units = _decide(members, cfg, cutoffs)
    if cfg.stratify == "label":
        units = _stratified(units, members, cfg)

    # each record against its component: under time strategies, its own window and time
    own = time_split(pl.col("timestamp"), cutoffs) if timed else pl.lit(None, pl.String)
    conflict = pl.col("_time_split").is_not_null() & (pl.col("_time_split") != pl.col("split"))
    records = (
        members.join(units, on="_component")
        .with_columns(own.alias("_time_split"))
        .with_columns(
            # a locked or already published record keeps its place: it is never dropped here
            pl.when(pl.lit(timed) & pl.col("_anchor").is_null() & (pl.col("_decided_by") == "new"))
            .then(pl.lit(reasons.MISSING_TIMESTAMP))
            .when(conflict & pl.lit(cfg.on_conflict == "drop") & ~pl.col("_locked"))
            .then(pl.lit(reasons.GROUP_TIME_CONFLICT))
            .alias("_dropped"),
            (conflict & (pl.lit(cfg.on_conflict == "move") | pl.col("_locked"))).alias(
                "_time_moved"
            ),
        )
        .sort("record_id")
    )
    kept = records.filter(pl.col("_dropped").is_null())
    events = pl.concat([_bridge_events(bridges), _events(records, kept)])

    assigned = frame.join(
        kept.lazy().select("record_id", "split"), on="record_id", maintain_order="left"
    )
    stats = _stats(units, records, kept, events)
    if bridges.height:
        stats["dropped"][reasons.SPLIT_CONFLICT] = bridges.height
    if timed:
        stats["cutoffs"] = {name: when.isoformat() for name, when in cutoffs.items()}
        stats["cutoffs_frozen"] = frozen
    stats["warnings"] = _drift(stats["splits"], cfg)
    return StageResult(frame=assigned, events=events, stats=stats)


def _drift(splits: dict[str, dict], cfg: SplitConfig) -> list[str]:
    """Splits far from their configured fraction: time cutoffs, a lock or a few large groups
    decide more than the fractions do, and a user should know."""
    total = sum(counts["records"] for counts in splits.values())
    warnings = []
    for name, fraction in cfg.fractions.items():
        share = splits[name]["records"] / total if total else 0.0
        if fraction > 0 and (share == 0 or abs(share - fraction) > FRACTION_DRIFT):
            why = (
                "the time cutoffs decide (split.cutoffs, anchor, on_conflict)"
                if cfg.strategy != "group"
                else "large groups or clusters, a parent version or a lock decide"
            )
            warnings.append(
                f"split {name} holds {share:.0%} of the records, the config asks {fraction:.0%}: {why}"
            )
    return warnings


def _decide(members: pl.DataFrame, cfg: SplitConfig, cutoffs: dict[str, datetime]) -> pl.DataFrame:
    """One row per component: its size, smallest key, anchor time, split and what decided it
    (`locked`, `parent` or `new`)."""
    timed = cfg.strategy != "group"
    anchor = pl.col("timestamp").min() if cfg.anchor == "earliest" else pl.col("timestamp").max()
    new = (
        time_split(pl.col("_anchor"), cutoffs)
        if timed
        else hashed_split(pl.col("_smallest_key"), cfg)
    )
    return (
        members.group_by("_component")
        .agg(
            pl.len().alias("_size"),
            pl.col("_key").min().alias("_smallest_key"),
            pl.col("_locked").any().alias("_any_locked"),
            # members published in different splits: the most held-out wins, so a record once
            # held out is never trained on (test, then validation, then train)
            pl.col("_parent")
            .sort_by(pl.col("_parent").replace_strict(HELD_OUT_FIRST, default=None), "record_id")
            .drop_nulls()
            .first()
            .alias("_inherited"),
            anchor.alias("_anchor"),
        )
        .with_columns(
            pl.when("_any_locked")
            .then(pl.lit("locked"))
            .when(pl.col("_inherited").is_not_null())
            .then(pl.lit("parent"))
            .otherwise(pl.lit("new"))
            .alias("_decided_by"),
            pl.when("_any_locked")
            .then(pl.lit("test"))
            .otherwise(pl.coalesce("_inherited", new))
            .alias("split"),
        )
        .drop("_any_locked", "_inherited")
    )


def _members(frame: pl.LazyFrame, ctx: RunContext) -> pl.DataFrame:
    """One row per record: what links it, its parent split, whether it is locked, its key."""
    frame = with_cluster_ids(frame)
    present = frame.collect_schema().names()
    optional = [
        pl.col(name) if name in present else pl.lit(None, dtype).alias(name)
        for name, dtype in _OPTIONAL.items()
    ]
    members = frame.select("record_id", "source", "cluster_id", *optional)
    parent = pl.LazyFrame(schema={"record_id": pl.String, "split": pl.String})
    if ctx.parent_splits is not None:
        parent = ctx.parent_splits
    locked = pl.LazyFrame(schema={"record_id": pl.String})
    if ctx.locked_test is not None:
        locked = ctx.locked_test.lazy().select("record_id").unique()
    return (
        members.join(
            parent.select("record_id", pl.col("split").alias("_parent")), on="record_id", how="left"
        )
        .join(locked.with_columns(pl.lit(True).alias("_locked")), on="record_id", how="left")
        .with_columns(pl.col("_locked").fill_null(False), group_key().alias("_key"))
        .collect()
        .with_row_index("_i")
    )


def _bridging(members: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """New records (no parent split, not locked) whose links, directly or through other new
    records, reach published records that end in two different splits. Joining them would
    move published records; they are dropped instead. Columns: _i, record_id, source, _splits
    (the splits they would join)."""
    empty = pl.DataFrame(
        schema={
            "_i": pl.UInt32,
            "record_id": pl.String,
            "source": pl.String,
            "_splits": pl.List(pl.String),
        }
    )
    known = pl.col("_parent").is_not_null() | pl.col("_locked")
    old, new = members.filter(known), members.filter(~known)
    if old.height == 0 or new.height == 0:
        return empty
    placed = _placed(old, columns)
    reached = pl.concat(
        [
            new.select("_i", column)
            .join(placed.select(column, "_placed").drop_nulls(column).unique(), on=column)
            .select("_i", "_placed")
            for column in columns
        ]
    )
    if reached.height == 0:
        return empty
    local = new.rename({"_i": "_member"}).with_row_index("_i")
    local = local.with_columns(pl.Series("_new_component", _component_of(local, columns)))
    splits = (
        local.join(reached.rename({"_i": "_member"}), on="_member")
        .group_by("_new_component")
        .agg(pl.col("_placed").unique().sort().alias("_splits"))
        .filter(pl.col("_splits").list.len() > 1)
    )
    return (
        local.join(splits, on="_new_component")
        .select(pl.col("_member").alias("_i"), "record_id", "source", "_splits")
        .cast(empty.schema)
    )


def _placed(old: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """The split each published or locked record ends in among the others: its component's
    (test when it holds a locked record, else the most held-out parent split)."""
    local = old.drop("_i").with_row_index("_i")
    local = local.with_columns(pl.Series("_old_component", _component_of(local, columns)))
    rank = pl.col("_parent").replace_strict(HELD_OUT_FIRST, default=None)
    split_of = local.group_by("_old_component").agg(
        pl.when(pl.col("_locked").any())
        .then(pl.lit("test"))
        .otherwise(pl.col("_parent").sort_by(rank).drop_nulls().first())
        .alias("_placed")
    )
    return local.join(split_of, on="_old_component")


def _bridge_events(bridges: pl.DataFrame) -> pl.DataFrame:
    return ledger.events(
        bridges,
        stage=STAGE,
        action=reasons.DROPPED,
        reason=reasons.SPLIT_CONFLICT,
        evidence=pl.struct(pl.col("_splits").alias("would_join")),
    )


def _component_of(members: pl.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """For each row, the smallest row index of its component: each record is linked to the
    first record sharing each of its non-null `columns`; a record linked to none is alone."""
    left, right = [], []
    for column in columns:
        linked = members.filter(pl.col(column).is_not_null()).select(
            "_i", pl.col("_i").min().over(column).alias("_first")
        )
        linked = linked.filter(pl.col("_i") != pl.col("_first"))
        left.append(linked["_i"].to_numpy())
        right.append(linked["_first"].to_numpy())
    component = members["_i"].to_numpy().copy()
    if sum(len(edges) for edges in left):
        nodes, roots = components(np.concatenate(left), np.concatenate(right))
        component[nodes] = roots
    return component


def _stratified(units: pl.DataFrame, members: pl.DataFrame, cfg: SplitConfig) -> pl.DataFrame:
    """New components of each label stratum (a component's most common label, ties to the
    smallest) go, in hash order, to the split furthest below its fraction of the stratum's
    records, counting the stratum's locked and inherited components."""
    labels = (
        members.filter(pl.col("label").is_not_null())
        .group_by("_component", "label")
        .len()
        .sort("len", "label", descending=[True, False])
        .group_by("_component", maintain_order=True)
        .first()
        .select("_component", pl.col("label").alias("_stratum"))
    )
    units = units.join(labels, on="_component", how="left")
    names = list(cfg.fractions)
    targets = [cfg.fractions[name] for name in names]
    chosen_components, chosen_splits = [], []
    for stratum in units.partition_by("_stratum"):
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
    return (
        units.join(chosen, on="_component", how="left")
        .with_columns(pl.coalesce("_stratified", "split").alias("split"))
        .drop("_stratified", "_stratum")
    )


def _events(records: pl.DataFrame, kept: pl.DataFrame) -> pl.DataFrame:
    """A terminal `dropped` event per dropped record; `moved` events for time conflicts moved
    with their component and for records leaving their parent split."""
    dropped = records.filter(pl.col("_dropped").is_not_null())
    against_parent = kept.filter(
        pl.col("_parent").is_not_null() & (pl.col("_parent") != pl.col("split"))
    )
    moved_reason = (
        pl.when(pl.col("_decided_by") == "locked")
        .then(pl.lit(reasons.LOCKED_TEST))
        .otherwise(pl.lit(reasons.SPLIT_CONFLICT))
    )
    parts = [
        ledger.events(
            dropped.filter(pl.col("_dropped") == reasons.MISSING_TIMESTAMP),
            stage=STAGE,
            action=reasons.DROPPED,
            reason=reasons.MISSING_TIMESTAMP,
            evidence=pl.struct(pl.col("_size").alias("component_records")),
        ),
        ledger.events(
            dropped.filter(pl.col("_dropped") == reasons.GROUP_TIME_CONFLICT),
            stage=STAGE,
            action=reasons.DROPPED,
            reason=reasons.GROUP_TIME_CONFLICT,
            evidence=pl.struct(
                "split",
                pl.col("_time_split").alias("time_split"),
                pl.col("timestamp").dt.to_string(ISO),
            ),
        ),
        ledger.events(
            kept.filter("_time_moved"),
            stage=STAGE,
            action=reasons.MOVED,
            reason=pl.when("_locked")
            .then(pl.lit(reasons.LOCKED_TEST))
            .otherwise(pl.lit(reasons.GROUP_TIME_CONFLICT)),
            evidence=pl.struct(
                pl.col("_time_split").alias("from"),
                pl.col("split").alias("to"),
                pl.col("timestamp").dt.to_string(ISO),
            ),
        ),
        ledger.events(
            against_parent,
            stage=STAGE,
            action=reasons.MOVED,
            reason=moved_reason,
            evidence=pl.struct(pl.col("_parent").alias("from"), pl.col("split").alias("to")),
        ),
    ]
    return pl.concat(parts)


def _stats(
    units: pl.DataFrame, records: pl.DataFrame, kept: pl.DataFrame, events: pl.DataFrame
) -> dict:
    counts = kept.group_by("split").agg(
        pl.len().alias("records"),
        pl.col("_key").n_unique().alias("groups"),
        pl.col("_component").n_unique().alias("components"),
    )
    per_split = {row.pop("split"): row for row in counts.iter_rows(named=True)}
    empty = {"records": 0, "groups": 0, "components": 0}
    dropped = records.filter(pl.col("_dropped").is_not_null())["_dropped"].value_counts()
    return {
        "splits": {name: per_split.get(name, dict(empty)) for name in SPLITS},
        "inherited_from_parent": kept.filter(pl.col("_decided_by") == "parent").height,
        "locked": kept.filter("_locked").height,
        "in_locked_components": kept.filter(pl.col("_decided_by") == "locked").height,
        "moved": events.filter(pl.col("action") == reasons.MOVED).height,
        "dropped": dict(sorted(dropped.iter_rows())),
        "components": units.height,
    }
