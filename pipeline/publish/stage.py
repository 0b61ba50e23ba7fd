"""Publish: write a version's shards and manifest into a staging folder, and hash it.

Shards are zstd Parquet files per split, `data/<split>/part-NNNNN.parquet`, at most
`publish.shard_rows` rows each, rows sorted by record_id, written with fixed writer
settings so the same records give the same bytes. The dataset hash is a sha256 over the
shard paths and sha256s, the schema, the split membership and the config hash; times,
parent and code version sit beside it in the manifest, not in it.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import SPLITS, PublishConfig
from pipeline.core import ledger, reasons
from pipeline.core.clusters import with_cluster_ids
from pipeline.core.schema import PUBLISHED_SCHEMA, schema_description
from pipeline.core.storage import file_sha256
from pipeline.publish.version import MANIFEST, NOT_PUBLISHED, StagedVersion, dataset_hash
from pipeline.stage import RunContext

STAGE = "publish"
_ROW_GROUP_ROWS = 20_000
WRITER_THREADS = 2


def write_shards(
    frame: pl.LazyFrame, cfg: PublishConfig, out_dir: Path
) -> tuple[list[dict], dict[str, str], dict[str, int]]:
    """Write every split's shards; return (shard entries, membership hashes, split counts)."""
    shards, membership, counts = [], {}, {}
    with ThreadPoolExecutor(max_workers=WRITER_THREADS) as pool:  # the writer releases the GIL
        for split_name in SPLITS:
            records = (
                frame.filter(pl.col("split") == split_name)
                .select(PUBLISHED_SCHEMA.names())
                .cast(PUBLISHED_SCHEMA)
                .sort("record_id")
                .collect()
            )
            counts[split_name] = records.height
            ids = records["record_id"].str.join("\n").item() if records.height else ""
            membership[split_name] = hashlib.sha256(ids.encode()).hexdigest()
            slices = [
                (
                    f"data/{split_name}/part-{number:05d}.parquet",
                    records.slice(start, cfg.shard_rows),
                )
                for number, start in enumerate(range(0, records.height, cfg.shard_rows))
            ]
            written = pool.map(lambda item: _write_shard(*item, cfg, out_dir), slices)
            shards.extend({"split": split_name, **shard} for shard in written)
    return shards, membership, counts


def _write_shard(relative: str, records: pl.DataFrame, cfg: PublishConfig, out_dir: Path) -> dict:
    target = out_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    compression = "uncompressed" if cfg.compression == "none" else cfg.compression
    records.write_parquet(
        target,
        compression=compression,
        compression_level=cfg.compression_level if compression in ("zstd", "gzip") else None,
        row_group_size=_ROW_GROUP_ROWS,
    )
    return {
        "path": relative,
        "rows": records.height,
        "bytes": target.stat().st_size,
        "sha256": file_sha256(target),
    }


def publish(
    frame: pl.LazyFrame,
    cfg: PublishConfig,
    ctx: RunContext,
    staging_dir: Path,
    extra: dict[str, Any],
) -> StagedVersion:
    """Write shards and manifest to `staging_dir`; `extra` adds sources and code version."""
    shards, membership, counts = write_shards(with_cluster_ids(frame), cfg, staging_dir)
    schema = schema_description(PUBLISHED_SCHEMA)
    manifest = {
        "format": "thresher-manifest/1",
        "name": ctx.config.name,
        "dataset_hash": dataset_hash(shards, schema, membership, ctx.config_hash),
        "parent_version": ctx.parent_version,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": ctx.run_id,
        "config_hash": ctx.config_hash,
        "config": ctx.config.model_dump(mode="json", exclude=NOT_PUBLISHED),
        "schema": schema,
        "split_counts": counts,
        "split_membership": membership,
        "shards": shards,
        **extra,
    }
    (staging_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    published = frame.select("record_id", "source", "split").collect()
    events = ledger.events(
        published,
        stage=STAGE,
        action=reasons.PUBLISHED,
        reason=None,
        evidence=pl.struct("split"),
    )
    return StagedVersion(path=staging_dir, manifest=manifest, events=events)
