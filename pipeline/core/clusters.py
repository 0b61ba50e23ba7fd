"""Clusters of records: connected components of a graph of record pairs (union-find for all
edges at once), and the cluster id a record has before any dedup stage clusters it."""

from __future__ import annotations

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
