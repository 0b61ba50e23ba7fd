"""Clusters of records: connected components of a graph of record pairs (union-find for all
edges at once), and the cluster id a record has before any dedup stage clusters it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from pipeline.core.arrays import sorted_unique


def components(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of the graph with edges (left[k], right[k]), by union-find done
    for all edges at once: each round hooks the larger root of every edge under the smaller,
    then compresses paths by pointer jumping. Returns (nodes, the smallest node of each
    node's component)."""
    nodes = sorted_unique(np.concatenate([left, right]))
    index = np.uint32 if len(nodes) < 2**32 else np.int64  # half the memory of int64 positions
    a = np.searchsorted(nodes, left).astype(index)
    b = np.searchsorted(nodes, right).astype(index)
    parent = np.arange(len(nodes), dtype=index)
    while True:
        root_a, root_b = parent[a], parent[b]
        apart = root_a != root_b
        if not apart.any():
            return nodes, nodes[parent]
        low, high = (
            np.minimum(root_a[apart], root_b[apart]),
            np.maximum(root_a[apart], root_b[apart]),
        )
        np.minimum.at(parent, high, low)
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand


def with_cluster_ids(frame: pl.LazyFrame) -> pl.LazyFrame:
    """A record that no dedup stage has clustered yet is its own cluster."""
    if "cluster_id" in frame.collect_schema().names():
        return frame
    return frame.with_columns(pl.col("record_id").alias("cluster_id"))


# Components across partitions: the large-star / small-star rounds of Kiveris et al.,
# "Connected Components in Map Reduce and Beyond" (SoCC 2014). Each step is a group-by on one
# endpoint of the edges, so a task holds one partition's edges (those whose `node` hashes to
# it) and nothing of the rest; O(log n) rounds in practice. At the fixed point the graph is a
# forest of stars, each centred on its component's smallest node: an edge (node, neighbor)
# then names the label. Union-find per partition with merge rounds was the other choice: it
# needs a relabelling pass after every round, and how many rounds depends on how the edges
# fall into partitions.
EDGES = {"node": pl.UInt64, "neighbor": pl.UInt64}
LABELS = {"node": pl.UInt64, "_component": pl.UInt64}  # each node's component: its smallest node


def large_star(edges: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Each node hooks its larger neighbors onto the smallest of its neighborhood (itself
    included). `edges` holds both orientations of every edge whose `node` is in this
    partition. Returns the new edges (node > neighbor, each once) and whether any changed."""
    least = pl.min_horizontal(pl.col("neighbor").min().over("node"), "node")
    rows = edges.with_columns(least.alias("_least"))
    larger = rows.filter(pl.col("neighbor") > pl.col("node"))
    changed = bool((larger["_least"] < larger["node"]).any())
    out = larger.select(pl.col("neighbor").alias("node"), pl.col("_least").alias("neighbor"))
    return out.unique(), changed


def small_star(edges: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Each node hooks itself and its smaller neighbors onto the smallest of them. `edges`
    holds every edge once, as (node, neighbor) with node > neighbor, whose `node` is in this
    partition. Returns the new edges (node > neighbor) and whether any node had more than one
    smaller neighbor (else nothing changed)."""
    rows = edges.with_columns(pl.col("neighbor").min().over("node").alias("_least"))
    changed = rows.height > rows["node"].n_unique()
    hooked = pl.concat(
        [
            rows.select("node", pl.col("_least").alias("neighbor")),
            rows.filter(pl.col("neighbor") != pl.col("_least")).select(
                pl.col("neighbor").alias("node"), pl.col("_least").alias("neighbor")
            ),
        ]
    )
    return hooked.unique(), changed


def both_ways(edges: pl.DataFrame) -> pl.DataFrame:
    """Every edge in both orientations, as large_star reads them."""
    flipped = edges.select(pl.col("neighbor").alias("node"), pl.col("node").alias("neighbor"))
    return pl.concat([edges.select("node", "neighbor"), flipped])


def star_labels(edges: pl.DataFrame) -> pl.DataFrame:
    """The labels of the nodes of one partition of a star forest (both orientations of its
    edges, as the last round left them): a leaf's one smaller neighbor, a centre itself."""
    return (
        edges.group_by("node")
        .agg(pl.col("neighbor").min())
        .select("node", pl.min_horizontal("node", "neighbor").alias("_component"))
    )


def star_rounds(
    edges: pl.DataFrame, partition: Callable[[pl.Expr], pl.Expr], partitions: int
) -> tuple[pl.DataFrame, int]:
    """Components as the runner finds them, in this process: large-star and small-star
    rounds, each step on one node partition's edges at a time (`partition(node)` names it).
    The label of every node in an edge (LABELS), and the rounds it took."""

    def by_partition(rows: pl.DataFrame) -> list[pl.DataFrame]:
        return [rows.filter(partition(pl.col("node")) == k) for k in range(partitions)]

    current, rounds = both_ways(edges), 0
    while True:
        rounds += 1
        large = [large_star(rows) for rows in by_partition(current)]
        small = [small_star(rows) for rows in by_partition(pl.concat(e for e, _ in large))]
        current = both_ways(pl.concat(e for e, _ in small))
        if not any(changed for _, changed in large + small):
            break
    labels = pl.concat(star_labels(rows) for rows in by_partition(current))
    return labels, rounds
