"""Split: train, validation and test that never leak and stay stable across versions.

Records are assigned in connected components, linked by a shared `group` (strategies group
and group_time), `cluster_id` (duplicate and related clusters from dedup) or `content_hash`.
A component's split is decided in this order (README, "Splits and contamination"):

1. `test` when it holds a record of the locked test set;
2. its members' split in the parent version; when they were in different splits, the most
   held-out one: test, then validation, then train;
3. new: `group` cuts xxh3-64(salt + the component's smallest key) / 2^64 at the cumulative
   fractions, the key being `group:<group>` or `record:<record_id>`, so adding records does
   not move a component unless it joins another one; with `stratify: label` new components
   instead fill each label's deficit, in hash order (labels too rare to spread pooled).
   `time` and `group_time` take the window holding the component's anchor time (its
   earliest or latest record time).

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

It runs by key (pipeline/stage.py's ByKey) and decides by component (its Components): each
part lists its records' link values (group, cluster, content hash), every record sharing a
value is linked to the first in the value's key partition, the components are found across
node partitions (pipeline/core/clusters.py's star rounds), and each component partition
decides its whole components from what its members carry (ids, source, links, time, label:
never a text; a record linked to none is a component of its own). Each part then takes its
records' splits and events. Stratified filling, `quantiles` cutoffs and the `time` strategy
still decide every record in one task (`_by_component`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.config import SPLITS, SplitConfig
from pipeline.core import ledger, reasons
from pipeline.core.clusters import with_cluster_ids
from pipeline.core.identity import record_node
from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.leakage import leakage_columns
from pipeline.split.assign import group_key, hashed_split, resolve_cutoffs, stratified, time_split
from pipeline.split.components import HELD_OUT_FIRST, bridging, component_of
from pipeline.stage import ByKey, Components, Decided, RunContext, StageResult

STAGE = "split"
FRACTION_DRIFT = 0.1  # a split further than this from its fraction gets a warning
ISO = "%Y-%m-%dT%H:%M:%S%.f%:z"  # as datetime.isoformat()
_OPTIONAL = {
    "group": pl.String,
    "content_hash": pl.String,
    "timestamp": pl.Datetime("us", "UTC"),
    "label": pl.String,
}


def _keys(frame: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext) -> pl.DataFrame:
    """What links each record of a part to others (never its text); none where every record
    is decided in one task, which reads the stage's input itself."""
    part = frame if _by_component(cfg) else frame.limit(0)
    return _links(with_cluster_ids(part), cfg).collect()


def _linking(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Each record's id, source and what may link it (a missing optional column as null)."""
    present = frame.collect_schema().names()
    optional = [
        pl.col(name) if name in present else pl.lit(None, dtype).alias(name)
        for name, dtype in _OPTIONAL.items()
    ]
    return frame.select("record_id", "source", "cluster_id", *optional)


def _links(frame: pl.LazyFrame, cfg: SplitConfig) -> pl.LazyFrame:
    """One row per non-null link value of each record (`_link`: the column's name and the
    value), keyed by its hash: every record sharing a value meets in one key partition."""
    frame = _linking(frame)
    rows = [
        frame.filter(pl.col(column).is_not_null()).select(
            record_node(),
            pl.concat_str(pl.lit(f"{column}\x1f"), pl.col(column)).alias("_link"),
        )
        for column in leakage_columns(cfg)
    ]
    return pl.concat(rows).with_columns(pl.col("_link").nchash.xxh3_64().alias("_key"))


def _reduce(keys: pl.LazyFrame, cfg: SplitConfig) -> pl.DataFrame:
    """The link values one key partition holds more than once."""
    return keys.filter(pl.len().over("_link") > 1).collect()


def _edges(shared: pl.LazyFrame, cfg: SplitConfig) -> tuple[pl.DataFrame, dict]:
    """Each record sharing a link value linked to the first record holding it."""
    edges = shared.select("node", pl.col("node").min().over("_link").alias("neighbor"))
    return edges.filter(pl.col("node") != pl.col("neighbor")).collect(), {}


def _component_members(part: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext) -> pl.DataFrame:
    """What the decision needs of each record of a part, by its node."""
    return _linking(with_cluster_ids(part)).with_columns(record_node()).collect()


def _by_component(cfg: SplitConfig) -> bool:
    """Every component is decided alone unless the decision needs all of them: stratified
    filling goes through every new component of a label in hash order, `quantiles` cutoffs
    are quantiles of every record time, and under `time` a group (no link there) spans
    components while the stats count each split's groups (these decided in one task)."""
    return cfg.stratify is None and cfg.cutoffs != "quantiles" and cfg.strategy != "time"


def _assign(
    found: pl.LazyFrame, records: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext
) -> Decided:
    """Every record's split, from what links each of the stage's input `records`, read at
    once (about 200 bytes a record): one row per record that goes on (record_id, split) and
    one per ledger event (drops and moves, in their order, `_order`)."""
    links = _linking(with_cluster_ids(records))
    decisions, stats, facts = _assigned(_members(links, ctx), cfg, ctx)
    stats |= facts
    stats |= _whole(stats, cfg, ctx)
    if (pooled := facts.get("stratify")) and pooled["pooled_labels"]:
        stats["warnings"].append(
            f"split.stratify: {pooled['pooled_labels']:,} labels of fewer than "
            f"{pooled['min_components']} components ({pooled['pooled_records']:,} records) "
            "were pooled into one stratum: alone, none could be spread over the splits"
        )
    return Decided(decisions=decisions, stats=stats)


def _decide_components(
    members: pl.DataFrame, records: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext
) -> Decided:
    """The splits of the whole components one partition holds (every record is in one, a
    record linked to none alone), each decision sent to its record's part. Its stats add up
    over the partitions (`_whole` adds what only their sum tells)."""
    where = members.select("record_id", pl.col("_part").alias("_to_part"))
    links = members.drop("node", "_component", "_part").lazy()
    decisions, counts, _ = _assigned(_members(links, ctx), cfg, ctx)
    return Decided(decisions.join(where, on="record_id", how="left"), counts)


def _whole(stats: dict[str, Any], cfg: SplitConfig, ctx: RunContext) -> dict[str, Any]:
    """What the sum of every component's counts tells: the splits in their order, warnings
    for a split far from its fraction, and the time cutoffs (given, or frozen at the first
    publish, when decided by component)."""
    order = ("records", "groups", "components")
    splits = {name: {key: stats["splits"][name][key] for key in order} for name in SPLITS}
    whole = {"splits": splits, "warnings": _drift(splits, cfg)}
    if cfg.strategy != "group" and "cutoffs" not in stats:
        cutoffs, frozen = resolve_cutoffs(cfg, ctx, pl.Series("timestamp", [], pl.Datetime))
        whole["cutoffs"] = {name: when.isoformat() for name, when in cutoffs.items()}
        whole["cutoffs_frozen"] = frozen
    return whole


def _assigned(
    members: pl.DataFrame, cfg: SplitConfig, ctx: RunContext
) -> tuple[pl.DataFrame, dict[str, Any], dict[str, Any]]:
    """The decisions for `members` (whole components), their counts (which add up over
    components) and the facts of the whole (cutoffs, stratification)."""
    timed = cfg.strategy != "group"
    columns = leakage_columns(cfg)
    bridges = bridging(members, columns)
    members = members.join(bridges, on="_i", how="anti").drop("_i").with_row_index("_i")
    members = members.with_columns(pl.Series("_component", component_of(members, columns)))
    cutoffs, frozen = resolve_cutoffs(cfg, ctx, members["timestamp"]) if timed else ({}, False)
    units = _decide(members, cfg, cutoffs)
    facts: dict[str, Any] = {}
    if cfg.stratify == "label":
        units, facts["stratify"] = stratified(units, members, cfg)
    if timed:
        facts["cutoffs"] = {name: when.isoformat() for name, when in cutoffs.items()}
        facts["cutoffs_frozen"] = frozen

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
    events = pl.concat([bridge_events(bridges), _events(records, kept)]).with_row_index("_order")

    counts = _stats(units, records, kept, events)
    if bridges.height:
        counts["dropped"][reasons.SPLIT_CONFLICT] = bridges.height
    decisions = pl.concat([kept.select("record_id", "split"), events], how="diagonal")
    return decisions, counts, facts


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: SplitConfig, ctx: RunContext
) -> StageResult:
    """A part's records that go on, with their split, and its records' events."""
    # the decisions file is read, never held
    mine = decisions.join(frame.select("record_id"), on="record_id").collect(engine="streaming")
    events = mine.filter(pl.col("action").is_not_null()).sort("record_id", "_order")
    assigned = frame.join(
        mine.lazy().filter(pl.col("action").is_null()).select("record_id", "split"),
        on="record_id",
        maintain_order="left",
    )
    return StageResult(frame=assigned, events=events.select(LEDGER_SCHEMA.names()))


# the links of every part, every record's component found across key partitions and each
# component's split decided where it lies (or every record's at once: `_by_component`), then
# each part given its split
split = ByKey(
    keys=_keys,
    reduce=_reduce,
    decide=_assign,
    apply=_apply,
    components=Components(
        edges=_edges,
        members=_component_members,
        decide=_decide_components,
        whole=_whole,
        applies=_by_component,
        singletons=True,
    ),
)


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


def _members(links: pl.LazyFrame, ctx: RunContext) -> pl.DataFrame:
    """One row per record, in record_id order (however the parts were cut): what links it,
    its parent split, whether it is locked, its key."""
    links = links.sort("record_id").collect()
    parent = pl.LazyFrame(schema={"record_id": pl.String, "split": pl.String})
    if ctx.parent_splits is not None:  # only the links' rows of the parent are read
        mine = pl.col("record_id").is_in(links["record_id"].implode())
        parent = ctx.parent_splits.filter(mine).collect(engine="streaming").lazy()
    locked = pl.LazyFrame(schema={"record_id": pl.String})
    if ctx.locked_test is not None:
        locked = ctx.locked_test.lazy().select("record_id").unique()
    return (
        links.lazy()
        .join(
            parent.select("record_id", pl.col("split").alias("_parent")),
            on="record_id",
            how="left",
            maintain_order="left",
        )
        .join(
            locked.with_columns(pl.lit(True).alias("_locked")),
            on="record_id",
            how="left",
            maintain_order="left",
        )
        .with_columns(pl.col("_locked").fill_null(False), group_key().alias("_key"))
        .collect()
        .with_row_index("_i")
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


def bridge_events(bridges: pl.DataFrame) -> pl.DataFrame:
    return ledger.events(
        bridges,
        stage=STAGE,
        action=reasons.DROPPED,
        reason=reasons.SPLIT_CONFLICT,
        evidence=pl.struct(pl.col("_splits").alias("would_join")),
    )


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """The split's cutoffs, warnings and locked test set as `thresher run` says them."""
    lines = []
    if stats.get("cutoffs"):
        frozen = " (frozen)" if stats.get("cutoffs_frozen") else ""
        cutoffs = ", ".join(f"{name} from {when}" for name, when in stats["cutoffs"].items())
        lines.append(f"time cutoffs{frozen}: {cutoffs}")
    lines += [f"warning: {warning}" for warning in stats.get("warnings", [])]
    if stats.get("locked"):
        lines.append(f"locked test set: {stats['locked']} record(s) held in test")
    return lines
