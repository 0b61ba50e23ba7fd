"""Synthetic records (from sources declared `synthetic:`): out of validation and test, and
capped per split.

Runs after the split stage. Evaluating on generated text measures the generator, not the
task, so by default (`synthetic.held_out: false`) a synthetic record the split put in
validation or test moves to train, unless a real record staying there shares its group,
duplicate cluster or content: moving it would leak, so it is dropped with
`synthetic_held_out` instead. Then `synthetic.max_share` caps each split's synthetic share;
the excess, chosen by a stable hash of the record id, is dropped with `synthetic_cap`.
"""

from __future__ import annotations

import math

import polars as pl

from pipeline.config import SPLITS, SyntheticPolicy
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.leakage import leakage_columns
from pipeline.stage import RunContext, StageResult

STAGE = "synthetic"
HELD_OUT = ("validation", "test")


def synthetic(frame: pl.LazyFrame, cfg: SyntheticPolicy, ctx: RunContext) -> StageResult:
    keys = [c for c in leakage_columns(ctx.config.split) if c in frame.collect_schema().names()]
    records = frame.select(
        "record_id", "source", "split", pl.col("synthetic").fill_null(False), *keys
    ).collect()
    locked = (
        ctx.locked_test["record_id"]
        if ctx.locked_test is not None
        else pl.Series([], dtype=pl.String)
    )
    moved, blocked = (
        _leave_held_out(records, keys, locked)
        if not cfg.held_out
        else (_none(records), _none(records))
    )
    to_train = (
        pl.when(pl.col("record_id").is_in(moved["record_id"].implode()))
        .then(pl.lit("train"))
        .otherwise(pl.col("split"))
        .alias("split")
    )
    records = records.join(blocked.select("record_id"), on="record_id", how="anti")
    records = records.with_columns(to_train)
    capped = _over_cap(records, cfg.max_share)
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
    gone = pl.concat([blocked.select("record_id"), capped.select("record_id")])
    kept = frame.join(gone.lazy(), on="record_id", how="anti", maintain_order="left").with_columns(
        pl.when(pl.col("record_id").is_in(moved["record_id"].implode()))
        .then(pl.lit("train"))
        .otherwise(pl.col("split"))
        .alias("split")
    )
    remaining = records.join(capped.select("record_id"), on="record_id", how="anti")
    stats = {
        "moved_to_train": moved.height,
        "dropped_held_out": blocked.height,
        "dropped_cap": dict(capped.group_by("split").len().sort("split").iter_rows()),
        "share": _shares(remaining),
    }
    return StageResult(frame=kept, events=pl.concat(events), stats=stats)


def _none(records: pl.DataFrame) -> pl.DataFrame:
    return records.clear().with_columns(pl.lit(None, pl.String).alias("shares"))


def _leave_held_out(
    records: pl.DataFrame, keys: list[str], locked: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(synthetic records that can move to train, those that cannot: a real record staying
    in their split shares a key with them). Records of a locked test set stay put."""
    held_out = records.filter(pl.col("split").is_in(HELD_OUT))
    candidates = held_out.filter(pl.col("synthetic") & ~pl.col("record_id").is_in(locked.implode()))
    staying = held_out.join(candidates.select("record_id"), on="record_id", how="anti")
    shares = pl.lit(None, pl.String)
    for key in keys:  # the first key a candidate shares with a staying record names why
        taken = staying[key].drop_nulls().unique().implode()
        shares = (
            pl.when(shares.is_null() & pl.col(key).is_in(taken)).then(pl.lit(key)).otherwise(shares)
        )
    candidates = candidates.with_columns(shares.alias("shares"))
    return (
        candidates.filter(pl.col("shares").is_null()),
        candidates.filter(pl.col("shares").is_not_null()),
    )


def _over_cap(records: pl.DataFrame, max_share: dict[str, float]) -> pl.DataFrame:
    """The synthetic records beyond each capped split's share, by a stable hash order."""
    dropped = []
    for split, share in max_share.items():
        in_split = records.filter(pl.col("split") == split)
        synthetic = in_split.filter("synthetic")
        real = in_split.height - synthetic.height
        # the most synthetic records s with s / (real + s) <= share
        allowed = synthetic.height if share >= 1 else math.floor(share * real / (1 - share) + 1e-9)
        if synthetic.height <= allowed:
            continue
        order = synthetic.with_columns(xxh3_128_hex(synthetic["record_id"]).alias("_rank"))
        dropped.append(
            order.sort("_rank")
            .slice(allowed)
            .select(
                "record_id",
                "source",
                "split",
                pl.lit(share).alias("max_share"),
                pl.lit(allowed).alias("allowed"),
                pl.lit(synthetic.height).alias("synthetic"),
            )
        )
    if dropped:
        return pl.concat(dropped)
    return pl.DataFrame(
        schema={
            "record_id": pl.String,
            "source": pl.String,
            "split": pl.String,
            "max_share": pl.Float64,
            "allowed": pl.Int64,
            "synthetic": pl.Int64,
        }
    )


def _shares(records: pl.DataFrame) -> dict[str, dict[str, float | int]]:
    counted = records.group_by("split").agg(
        pl.len().alias("records"), pl.col("synthetic").sum().alias("synthetic")
    )
    found = {row["split"]: row for row in counted.iter_rows(named=True)}
    return {
        split: {
            "records": found.get(split, {}).get("records", 0),
            "synthetic": found.get(split, {}).get("synthetic", 0),
            "share": round(found[split]["synthetic"] / found[split]["records"], 4)
            if split in found and found[split]["records"]
            else 0.0,
        }
        for split in SPLITS
    }
