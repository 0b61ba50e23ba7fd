"""Leakage check: no group, duplicate cluster or content may sit in two splits.

The split stage assigns whole components of records linked by these columns, so its output
cannot leak; the flow checks it anyway, so that a bug there fails the run loudly instead of
publishing a version whose test set shares records' groups or texts with train.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

from pipeline.config import SPLITS, SplitConfig
from pipeline.core import spill
from pipeline.core.errors import DataError

EXAMPLES = 5
# the published gate runs in the run's process: over the 3.2M records of the 10M spine run's
# version, partitions of 2M rows took its peak (traced alone) to 1.03 GB, of 500,000 rows to
# 0.59 GB, in the same time
SPANNING_PART_ROWS = 500_000
_SPLIT_ORDER = {name: rank for rank, name in enumerate(SPLITS)}


class LeakageError(DataError):
    """A group, duplicate cluster or content hash appears in more than one split."""


def leakage_columns(cfg: SplitConfig) -> tuple[str, ...]:
    """The columns whose values must not span splits: `time` ignores groups."""
    if cfg.strategy == "time":
        return ("cluster_id", "content_hash")
    return ("group", "cluster_id", "content_hash")


def spanning(frame: pl.LazyFrame, column: str) -> pl.DataFrame:
    """(value, split, first_record: its smallest record_id there) for each non-null value of
    `column` found in more than one split. A value's rows share a hash partition, so each
    partition of at most SPANNING_PART_ROWS rows is checked alone (one group-by over every
    published record held 1.3 GB at 10M)."""
    needed = dict.fromkeys([column, "split", "record_id"])  # the column may be record_id
    rows = frame.filter(pl.col(column).is_not_null()).select(*needed)
    count = rows.select(pl.len()).collect(engine="streaming").item()
    parts = spill.partitions_for(count, SPANNING_PART_ROWS)
    with tempfile.TemporaryDirectory(prefix="thresher-leakage-") as scratch:
        partition = spill.by_hash(rows, column, parts, Path(scratch))
        found = pl.concat(
            partition(part)
            .group_by(column, "split")
            .agg(pl.col("record_id").min().alias("first_record"))
            .filter(pl.len().over(column) > 1)
            .collect()
            for part in range(parts)
        )
    return found.sort(column, pl.col("split").replace_strict(_SPLIT_ORDER, default=len(SPLITS)))


def check_disjoint(assigned: pl.DataFrame | pl.LazyFrame, by: tuple[str, ...]) -> None:
    """Raise LeakageError when a non-null value of a column in `by` is in two splits."""
    frame = assigned.lazy()
    present = frame.collect_schema().names()
    findings = []
    for column in (name for name in by if name in present):
        spread = spanning(frame, column)
        if spread.height:
            findings.append(_describe(column, spread))
    if findings:
        raise LeakageError(
            "leakage: "
            + " ".join(findings)
            + " This is a bug in the split stage, which builds splits that cannot leak: "
            "please report it with this run's config and ledger."
        )


def _describe(column: str, spread: pl.DataFrame) -> str:
    values = spread[column].unique(maintain_order=True)
    examples = []
    for value in values.head(EXAMPLES):
        rows = spread.filter(pl.col(column) == value)
        places = [
            f"{split} (record {record_id})"
            for split, record_id in rows.select("split", "first_record").iter_rows()
        ]
        shown = str(value) if len(str(value)) <= 64 else str(value)[:63] + "…"
        examples.append(f"{column} {shown} is in {', '.join(places[:-1])} and {places[-1]}")
    if values.len() > EXAMPLES:
        examples.append(f"and {values.len() - EXAMPLES} more")
    return f"{values.len()} {column} value(s) in more than one split: {'; '.join(examples)}."
