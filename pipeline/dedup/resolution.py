"""What a dedup method decided: the records it drops (each pointing at the one kept), the new
cluster ids of the kept ones, and every cluster's members."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

EMPTY_CLUSTERS = {"_i": pl.UInt32, "kept_i": pl.UInt32}
EMPTY_NAMES = {"_cluster": pl.UInt32, "cluster_id": pl.String}


@dataclass
class Resolution:
    # _i, kept_i, kept_published, _cluster (its component), by _i: numbers only, the strings
    # (record ids, `names`) joined once, at the end
    dropped: pl.DataFrame
    cluster_ids: pl.DataFrame  # _i, cluster_id: new cluster ids of kept members
    # _i, kept_i: every member of every duplicate cluster (the kept one and published ones too)
    clusters: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EMPTY_CLUSTERS))
    # _cluster, cluster_id: each component's new cluster id (its members' smallest)
    names: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EMPTY_NAMES))
