"""Exports the catalog vouches for: `thresher export` records the sha256 of each export's
manifest, and readers of an export (training/readers.py) check it here, so that an export
whose files and manifest were rewritten together is refused."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import insert, select

from data_catalog import tables
from data_catalog.catalog import Catalog, now
from pipeline.core.errors import DataError


def record(catalog: Catalog, digest: str, dataset_hash: str, fmt: str, path: Path) -> None:
    with catalog.engine.begin() as connection:
        known = connection.execute(
            select(tables.exports.c.digest).where(tables.exports.c.digest == digest)
        ).first()
        if known is None:
            connection.execute(
                insert(tables.exports).values(
                    digest=digest,
                    dataset_hash=dataset_hash,
                    format=fmt,
                    path=str(path),
                    created_at=now(),
                )
            )


def check(catalog: Catalog, folder: Path, digest: str, manifest: dict) -> None:
    """Refuse the export at `folder` unless the catalog recorded its manifest's `digest`, for
    the version the manifest names, and that version is still published with the source
    shards the manifest lists."""
    with catalog.engine.connect() as connection:
        row = connection.execute(
            select(tables.exports).where(tables.exports.c.digest == digest)
        ).first()
    named = manifest["dataset"]["hash"]
    if row is None:
        raise DataError(
            f"export {folder}: the catalog at {catalog.workdir} never recorded an export whose "
            f"manifest hashes to {digest[:16]} (it names version {named[:16]}); its manifest "
            "was changed or it comes from elsewhere — export the version again"
        )
    if row.dataset_hash != named:
        raise DataError(
            f"export {folder}: its manifest names version {named[:16]}, the catalog recorded "
            f"it as an export of {row.dataset_hash[:16]}; export the version again"
        )
    version = catalog.version(row.dataset_hash)
    if version.status == "withdrawn":
        raise DataError(
            f"export {folder} is of version {named[:16]}, withdrawn ({version.status_reason}); "
            "do not train on it"
        )
    cataloged = {shard["path"]: shard["sha256"] for shard in catalog.shards(row.dataset_hash)}
    differing = [
        shard["path"]
        for shard in manifest["source_shards"]
        if cataloged.get(shard["path"]) != shard["sha256"]
    ]
    if differing:
        raise DataError(
            f"export {folder}: source shards {', '.join(differing)} are not those of version "
            f"{named[:16]} in the catalog; export the version again"
        )
