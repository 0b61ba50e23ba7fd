"""The components the split stage assigns: records linked by group, duplicate cluster and
content, where published and locked records already sit, and new records that would join two
splits (bridges, dropped with `split_conflict`)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.clusters import components

HELD_OUT_FIRST = {"test": 0, "validation": 1, "train": 2}


def bridging(members: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
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
    placed = placed_splits(old, columns)
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
    local = local.with_columns(pl.Series("_new_component", component_of(local, columns)))
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


def placed_splits(old: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """The split each published or locked record ends in among the others: its component's
    (test when it holds a locked record, else the most held-out parent split)."""
    local = old.drop("_i").with_row_index("_i")
    local = local.with_columns(pl.Series("_old_component", component_of(local, columns)))
    rank = pl.col("_parent").replace_strict(HELD_OUT_FIRST, default=None)
    split_of = local.group_by("_old_component").agg(
        pl.when(pl.col("_locked").any())
        .then(pl.lit("test"))
        .otherwise(pl.col("_parent").sort_by(rank).drop_nulls().first())
        .alias("_placed")
    )
    return local.join(split_of, on="_old_component")


def component_of(members: pl.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
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
