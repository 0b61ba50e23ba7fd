"""What a dedup method decided: the records it drops (each pointing at the one kept), the new
cluster ids of the kept ones, and every cluster's members."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

EMPTY_CLUSTERS = {"_i": pl.UInt32, "kept_i": pl.UInt32}


@dataclass
class Resolution:
    # _i, kept_i, record_id, kept_record_id, kept_published, cluster_id (its component's)
    dropped: pl.DataFrame
    cluster_ids: pl.DataFrame  # _i, cluster_id: new cluster ids of kept members
    # _i, kept_i: every member of every duplicate cluster (the kept one and published ones too)
    clusters: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EMPTY_CLUSTERS))
