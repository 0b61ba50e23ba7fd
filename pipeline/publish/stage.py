"""Publish: write a version's shards and manifest into a staging folder, and hash it.

Shards are zstd Parquet files per split, `data/<split>/part-NNNNN.parquet`, at most
`publish.shard_rows` rows each, rows sorted by record_id, written with fixed writer
settings so the same records give the same bytes. The dataset hash is a sha256 over the
shard paths and sha256s, the schema, the split membership and the config hash; times,
parent and code version sit beside it in the manifest, not in it.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import SPLITS, PublishConfig
from pipeline.core import ledger, reasons, spill
from pipeline.core.clusters import with_cluster_ids
from pipeline.core.schema import LANGUAGE_COLUMNS, PUBLISHED_SCHEMA, schema_description
from pipeline.core.storage import Location, file_sha256, is_local
from pipeline.publish.version import MANIFEST, NOT_PUBLISHED, StagedVersion, dataset_hash
from pipeline.stage import RunContext

STAGE = "publish"
_ROW_GROUP_ROWS = 20_000
WRITER_THREADS = 2


@dataclass(frozen=True)
class ShardPlan:
    """Which shard each published record goes to, from the ids alone: every split's records
    in record_id order, cut every `shard_rows`. Small: one id per shard, whatever the size."""

    shards: tuple[tuple[str, int], ...]  # (split, number) of every shard, in manifest order
    starts: dict[str, list[str]]  # each split's first record_id of each of its shards
    counts: dict[str, int]
    membership: dict[str, str]  # sha256 of each split's sorted record ids

    def path(self, shard: int) -> str:
        split_name, number = self.shards[shard]
        return f"data/{split_name}/part-{number:05d}.parquet"


PLAN_PART_ROWS = 1_000_000  # ids sorted at once while the shards are planned


def plan_shards(ids: pl.LazyFrame | pl.DataFrame, cfg: PublishConfig, scratch: Path) -> ShardPlan:
    """The shards of the records `ids` (record_id, split of every published record). A split
    of more than PLAN_PART_ROWS ids is cut into ranges of ids in `scratch` and each range is
    sorted alone: no step holds every id."""
    shards, starts, counts, membership = [], {}, {}, {}
    shutil.rmtree(scratch, ignore_errors=True)  # an earlier try's ranges
    for split_name in SPLITS:
        mine = ids.lazy().filter(pl.col("split") == split_name).select("record_id")
        counts[split_name] = mine.select(pl.len()).collect(engine="streaming").item()
        digest, starts[split_name] = hashlib.sha256(), []
        placed = 0
        for sorted_ids in _sorted_ranges(mine, counts[split_name], scratch / split_name):
            if sorted_ids.is_empty():  # a range between two equal bounds
                continue
            if placed:
                digest.update(b"\n")
            digest.update(sorted_ids.str.join("\n").item().encode())
            first = -placed % cfg.shard_rows  # the range's first id that starts a shard
            starts[split_name] += sorted_ids.gather_every(cfg.shard_rows, first).to_list()
            placed += sorted_ids.len()
        membership[split_name] = digest.hexdigest()
        shards.extend((split_name, number) for number in range(len(starts[split_name])))
    shutil.rmtree(scratch, ignore_errors=True)
    return ShardPlan(tuple(shards), starts, counts, membership)


def _sorted_ranges(ids: pl.LazyFrame, count: int, scratch: Path) -> Iterator[pl.Series]:
    """`ids`' record ids in sorted order, one sorted range at a time: ranges of about
    PLAN_PART_ROWS ids cut at the quantiles of a sample, written to `scratch` first."""
    if count <= PLAN_PART_ROWS:
        if count:
            yield ids.collect()["record_id"].sort()
        return
    ranges = spill.partitions_for(count, PLAN_PART_ROWS)
    sample = ids.gather_every(max(1, count // (ranges * 64))).collect(engine="streaming")
    sample = sample["record_id"].sort()
    bounds = sample.gather([len(sample) * k // ranges for k in range(1, ranges)])
    range_of = pl.col("record_id").map_batches(
        lambda column: bounds.search_sorted(column, side="right"),
        pl.UInt32,
        is_elementwise=True,
    )
    part = spill.by_key(ids, range_of, ranges, scratch)
    for number in range(ranges):
        yield part(number).collect()["record_id"].sort()
    shutil.rmtree(scratch, ignore_errors=True)


def routed(frame: pl.LazyFrame, plan: ShardPlan) -> pl.DataFrame:
    """The published columns of `frame`'s records (all, or one part), each with `_shard`,
    the number of the shard it goes to."""
    records = _with_languages(with_cluster_ids(frame)).select(PUBLISHED_SCHEMA.names()).collect()
    numbered = []
    for split_name in SPLITS:
        mine = records.filter(pl.col("split") == split_name)
        first = plan.shards.index((split_name, 0)) if plan.starts[split_name] else 0
        within = pl.Series(plan.starts[split_name], dtype=pl.String).search_sorted(
            mine["record_id"], side="right"
        )
        numbered.append(mine.with_columns((within.cast(pl.Int64) - 1 + first).alias("_shard")))
    return pl.concat(numbered)


def _with_languages(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Null language columns where no quality stage identified the records."""
    present = frame.collect_schema().names()
    missing = {name: dtype for name, dtype in LANGUAGE_COLUMNS.items() if name not in present}
    return frame.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in missing.items())


def write_shard(
    records: pl.DataFrame | pl.LazyFrame,
    shard: int,
    plan: ShardPlan,
    cfg: PublishConfig,
    out_dir: Location,
) -> dict:
    """Write shard number `shard` of `plan` from its records (in any order); its manifest entry."""
    relative = plan.path(shard)
    target = out_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    compression = "uncompressed" if cfg.compression == "none" else cfg.compression
    rows = records.lazy().select(PUBLISHED_SCHEMA.names()).cast(PUBLISHED_SCHEMA)
    rows = rows.sort("record_id").collect()
    written = io.BytesIO() if not is_local(target) else target  # remote: hashed as sent
    rows.write_parquet(
        written,
        compression=compression,
        compression_level=cfg.compression_level if compression in ("zstd", "gzip") else None,
        row_group_size=_ROW_GROUP_ROWS,
    )
    if isinstance(written, io.BytesIO):
        content = written.getvalue()
        target.fs.pipe_file(target.path, content)
        size, sha256 = len(content), hashlib.sha256(content).hexdigest()
    else:
        size, sha256 = target.stat().st_size, file_sha256(target)
    return {
        "split": plan.shards[shard][0],
        "path": relative,
        "rows": rows.height,
        "bytes": size,
        "sha256": sha256,
    }


def publish(
    frame: pl.LazyFrame,
    cfg: PublishConfig,
    ctx: RunContext,
    staging_dir: Path,
    extra: dict[str, Any],
) -> StagedVersion:
    """Write shards and manifest to `staging_dir`; `extra` adds sources and code version.
    The flow runs the same steps over parts: plan from the ids, route each part's records,
    write each shard from what the parts routed to it, then the manifest."""
    ids = frame.select("record_id", "source", "split").collect()
    plan = plan_shards(ids, cfg, ctx.run_dir / "publish-plan")
    records = routed(frame, plan).partition_by("_shard", as_dict=True)
    with ThreadPoolExecutor(max_workers=WRITER_THREADS) as pool:  # the writer releases the GIL
        shards = list(
            pool.map(
                lambda shard: write_shard(records[(shard,)], shard, plan, cfg, staging_dir),
                range(len(plan.shards)),
            )
        )
    return staged_version(plan, shards, ctx, staging_dir, extra, published_events(ids))


def staged_version(
    plan: ShardPlan,
    shards: list[dict],
    ctx: RunContext,
    staging_dir: Location,
    extra: dict[str, Any],
    events: pl.DataFrame,
) -> StagedVersion:
    """The manifest, written last, over the written `shards`, with the `published` events
    of its records."""
    schema = schema_description(PUBLISHED_SCHEMA)
    manifest = {
        "format": "thresher-manifest/1",
        "name": ctx.config.name,
        "dataset_hash": dataset_hash(shards, schema, plan.membership, ctx.config_hash),
        "parent_version": ctx.parent_version,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": ctx.run_id,
        "config_hash": ctx.config_hash,
        "config": ctx.config.model_dump(mode="json", exclude=NOT_PUBLISHED),
        "schema": schema,
        "split_counts": plan.counts,
        "split_membership": plan.membership,
        "shards": shards,
        **extra,
    }
    (staging_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return StagedVersion(path=staging_dir, manifest=manifest, events=events)


def published_events(ids: pl.DataFrame) -> pl.DataFrame:
    """A `published` event per record of `ids` (record_id, source, split)."""
    return ledger.events(
        ids, stage=STAGE, action=reasons.PUBLISHED, reason=None, evidence=pl.struct("split")
    )
