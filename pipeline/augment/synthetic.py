"""Synthetic records (from sources declared `synthetic:`): out of validation and test, and
capped per split.

Runs after the split stage. Evaluating on generated text measures the generator, not the
task, so by default (`synthetic.held_out: false`) a synthetic record the split put in
validation or test moves to train, unless a real record staying there shares its group,
duplicate cluster or content: moving it would leak, so it is dropped with
`synthetic_held_out` instead. Then `synthetic.max_share` caps each split's synthetic share;
the excess, chosen by a stable hash of the record id, is dropped with `synthetic_cap`.

It runs by key (pipeline/stage.py's ByKey): each part sends its splits' counts, its synthetic
records' ids and the leakage key values of its held-out records (keyed by the value, so a
value's holders from every part meet in one key partition, which finds the values a
synthetic record shares); the decision moves, blocks and caps from ids and counts only, and
each part applies it.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from pipeline.config import SPLITS, SyntheticPolicy
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.leakage import leakage_columns
from pipeline.stage import ByKey, Decided, RunContext, StageResult

STAGE = "synthetic"
HELD_OUT = ("validation", "test")
VALUE_SCHEMA = pl.Schema(
    {"record_id": pl.String, "synthetic": pl.Boolean, "_column": pl.UInt8, "_value": pl.String}
)
CAPPED_SCHEMA = pl.Schema(
    {
        "record_id": pl.String,
        "source": pl.String,
        "split": pl.String,
        "max_share": pl.Float64,
        "allowed": pl.Int64,
        "synthetic": pl.Int64,
    }
)


def _keys(frame: pl.LazyFrame, cfg: SyntheticPolicy, ctx: RunContext) -> pl.DataFrame:
    """What the decision needs of one part: each split's record and synthetic counts, every
    synthetic record's id and split, and the leakage key values of the held-out records (a
    synthetic one may move to train only when no record staying there shares one), keyed by
    the value so that every holder of a value meets in one key partition."""
    keys = _leakage_keys(frame, ctx)
    records = frame.select(
        "record_id", "source", "split", pl.col("synthetic").fill_null(False), *keys
    ).collect()
    counts = records.group_by("split").agg(
        pl.len().cast(pl.UInt32).alias("_records"),
        pl.col("synthetic").sum().cast(pl.UInt32).alias("_synthetic"),
    )
    made = records.filter("synthetic").select("record_id", "source", "split")
    held_out = records.filter(pl.col("split").is_in(HELD_OUT))
    if cfg.held_out:  # nothing moves: no value is needed
        held_out = held_out.clear()
    values = pl.concat(
        [
            held_out.filter(pl.col(key).is_not_null()).select(
                "record_id",
                "synthetic",
                pl.lit(position, pl.UInt8).alias("_column"),
                pl.col(key).cast(pl.String).alias("_value"),
            )
            for position, key in enumerate(keys)
        ]
        or [pl.DataFrame(schema=VALUE_SCHEMA)]
    )
    return pl.concat(
        [
            counts.with_columns(pl.lit("counts").alias("_kind")),
            made.with_columns(pl.lit("synthetic").alias("_kind")),
            values.with_columns(pl.lit("value").alias("_kind")),
        ],
        how="diagonal_relaxed",
    ).with_columns(pl.coalesce(pl.col("_value"), pl.col("split")).nchash.xxh3_64().alias("_key"))


def _meet(keys: pl.LazyFrame, cfg: SyntheticPolicy) -> pl.DataFrame:
    """Pass the counts and the synthetic records on; of the held-out values, keep those a
    synthetic record shares with another held-out record: per (synthetic holder, column),
    how many real records hold the value and which other synthetic ones do."""
    rows = keys.collect()
    values = rows.filter(pl.col("_kind") == "value")
    holders = values.group_by("_column", "_value").agg(
        (~pl.col("synthetic")).sum().alias("_real"),
        pl.col("record_id").filter("synthetic").alias("_with"),
        pl.len().alias("_holders"),
    )
    shared = (
        values.filter("synthetic")
        .join(holders.filter(pl.col("_holders") > 1), on=["_column", "_value"])
        .select(
            "record_id",
            "_column",
            pl.col("_real").cast(pl.UInt32),
            pl.col("_with").list.set_difference(pl.concat_list("record_id")),
            pl.lit("shared").alias("_kind"),
        )
    )
    return pl.concat(
        [rows.filter(pl.col("_kind") != "value").drop("_value", "_key"), shared],
        how="diagonal_relaxed",
    ).drop("synthetic")


def _decide(
    found: pl.LazyFrame, records: pl.LazyFrame, cfg: SyntheticPolicy, ctx: RunContext
) -> Decided:
    """Which synthetic records move to train, which cannot (dropped) and which are over their
    split's cap (dropped), from ids and counts only."""
    found = found.collect()
    keys = _leakage_keys(records, ctx)
    made = found.filter(pl.col("_kind") == "synthetic").select("record_id", "source", "split")
    locked = (
        ctx.locked_test["record_id"].implode()
        if ctx.locked_test is not None
        else pl.Series([], dtype=pl.String).implode()
    )
    candidates = made.filter(pl.col("split").is_in(HELD_OUT) & ~pl.col("record_id").is_in(locked))
    if cfg.held_out:
        candidates = candidates.clear()
    # a shared value blocks a candidate when a real record holds it too, or a synthetic one
    # that stays (a locked test record's)
    shared = found.filter(pl.col("_kind") == "shared").select(
        "record_id", "_column", "_real", "_with"
    )
    locked_with = shared.explode("_with").filter(pl.col("_with").is_in(locked))
    blocking = (
        pl.concat(
            [
                shared.filter(pl.col("_real") > 0).select("record_id", "_column"),
                locked_with.select("record_id", "_column"),
            ]
        )
        .group_by("record_id")
        .agg(pl.col("_column").min())
    )
    candidates = (
        candidates.join(blocking, on="record_id", how="left")
        .with_columns(
            pl.col("_column")
            .replace_strict(list(range(len(keys))), keys, return_dtype=pl.String)
            .alias("shares")
        )
        .drop("_column")
    )
    moved = candidates.filter(pl.col("shares").is_null())
    blocked = candidates.filter(pl.col("shares").is_not_null())
    counts = (
        found.filter(pl.col("_kind") == "counts")
        .group_by("split")
        .agg(pl.col("_records").sum(), pl.col("_synthetic").sum())
    )
    real = dict(counts.select("split", pl.col("_records") - pl.col("_synthetic")).iter_rows())
    after = made.join(blocked.select("record_id"), on="record_id", how="anti").with_columns(
        pl.when(pl.col("record_id").is_in(moved["record_id"].implode()))
        .then(pl.lit("train"))
        .otherwise(pl.col("split"))
        .alias("split")
    )
    capped = _over_cap(after, real, cfg.max_share)
    decisions = pl.concat(
        [
            moved.select("record_id", pl.lit(reasons.MOVED).alias("_action"), "split", "shares"),
            blocked.select(
                "record_id", pl.lit(reasons.DROPPED).alias("_action"), "split", "shares"
            ),
            capped.with_columns(pl.lit(reasons.DROPPED).alias("_action")),
        ],
        how="diagonal_relaxed",
    ).sort("record_id")
    stayed = after.join(capped.select("record_id"), on="record_id", how="anti")
    stats = {
        "moved_to_train": moved.height,
        "dropped_held_out": blocked.height,
        "dropped_cap": dict(capped.group_by("split").len().sort("split").iter_rows()),
        "share": _shares(real, stayed),
    }
    return Decided(decisions, stats)


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: SyntheticPolicy, ctx: RunContext
) -> StageResult:
    """A part's records moved, dropped or kept, and their events."""
    mine = (
        decisions.join(frame.select("record_id"), on="record_id")
        .collect(engine="streaming")
        .sort("record_id")
    )
    moved = mine.filter(pl.col("_action") == reasons.MOVED)
    blocked = mine.filter((pl.col("_action") == reasons.DROPPED) & pl.col("shares").is_not_null())
    capped = mine.filter(pl.col("max_share").is_not_null())
    events = [
        ledger.events(
            moved,
            stage=STAGE,
            action=reasons.MOVED,
            reason=reasons.SYNTHETIC_HELD_OUT,
            evidence=pl.struct(pl.col("split").alias("from"), pl.lit("train").alias("to")),
        ),
        ledger.events(
            blocked,
            stage=STAGE,
            action=reasons.DROPPED,
            reason=reasons.SYNTHETIC_HELD_OUT,
            evidence=pl.struct("split", pl.col("shares").alias("shares_with_real_record")),
        ),
        ledger.events(
            capped,
            stage=STAGE,
            action=reasons.DROPPED,
            reason=reasons.SYNTHETIC_CAP,
            evidence=pl.struct("split", "max_share", "allowed", "synthetic"),
        ),
    ]
    gone = mine.filter(pl.col("_action") == reasons.DROPPED).select("record_id")
    kept = frame.join(gone.lazy(), on="record_id", how="anti", maintain_order="left").with_columns(
        pl.when(pl.col("record_id").is_in(moved["record_id"].implode()))
        .then(pl.lit("train"))
        .otherwise(pl.col("split"))
        .alias("split")
    )
    return StageResult(frame=kept, events=pl.concat(events))


# keys: counts, synthetic ids and held-out key values; a key partition finds the shared
# values; the decision moves, blocks and caps from ids; each part applies it
synthetic = ByKey(keys=_keys, reduce=_meet, decide=_decide, apply=_apply)


def _leakage_keys(frame: pl.LazyFrame, ctx: RunContext) -> list[str]:
    names = frame.collect_schema().names()
    return [c for c in leakage_columns(ctx.config.split) if c in names]


def _over_cap(
    synthetic: pl.DataFrame, real: dict[str, int], max_share: dict[str, float]
) -> pl.DataFrame:
    """The synthetic records beyond each capped split's share, by a stable hash order."""
    dropped = []
    for split, share in max_share.items():
        made = synthetic.filter(pl.col("split") == split)
        # the most synthetic records s with s / (real + s) <= share
        allowed = (
            made.height
            if share >= 1
            else math.floor(share * real.get(split, 0) / (1 - share) + 1e-9)
        )
        if made.height <= allowed:
            continue
        order = made.with_columns(xxh3_128_hex(made["record_id"]).alias("_rank"))
        dropped.append(
            order.sort("_rank")
            .slice(allowed)
            .select(
                "record_id",
                "source",
                "split",
                pl.lit(share).alias("max_share"),
                pl.lit(allowed).alias("allowed"),
                pl.lit(made.height).alias("synthetic"),
            )
        )
    if dropped:
        return pl.concat(dropped)
    return pl.DataFrame(schema=CAPPED_SCHEMA)


def _shares(real: dict[str, int], synthetic: pl.DataFrame) -> dict[str, dict[str, float | int]]:
    made = dict(synthetic.group_by("split").len().iter_rows())
    shares = {}
    for split in SPLITS:
        records = real.get(split, 0) + made.get(split, 0)
        shares[split] = {
            "records": records,
            "synthetic": made.get(split, 0),
            "share": round(made.get(split, 0) / records, 4) if records else 0.0,
        }
    return shares


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """Each split's synthetic share as `thresher run` says it (nothing without any)."""
    shares = stats["share"]
    if not any(figures["synthetic"] for figures in shares.values()):
        return []
    said = ", ".join(
        f"{split} {figures['synthetic']} of {figures['records']} ({figures['share']:.1%})"
        for split, figures in shares.items()
    )
    return [f"synthetic: {said}"]
