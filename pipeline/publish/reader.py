"""Reading a published version: its manifest, its shards verified, one LazyFrame per split.

The shards are plain Parquet: polars, DuckDB, pyarrow or Hugging Face `datasets` open them
without Thresher. This module adds the checks a consumer should make first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.core import storage
from pipeline.core.errors import DataError
from pipeline.core.storage import Location, file_sha256
from pipeline.publish.version import MANIFEST, dataset_hash

# Written beside the manifest when a version is withdrawn (`thresher catalog withdraw`).
WITHDRAWN_MARKER = "WITHDRAWN.json"


@dataclass(frozen=True)
class ShardProblem:
    path: str
    problem: str  # "missing" or "sha256 mismatch"
    expected: str
    actual: str | None


@dataclass(frozen=True)
class PublishedVersion:
    path: Location  # a local folder or a fsspec location (pipeline.storage)
    manifest: dict[str, Any]

    @property
    def dataset_hash(self) -> str:
        return self.manifest["dataset_hash"]

    @property
    def split_names(self) -> list[str]:
        return [name for name, rows in self.manifest["split_counts"].items() if rows]

    def split(self, name: str) -> pl.LazyFrame:
        files = [
            self.path / shard["path"] for shard in self.manifest["shards"] if shard["split"] == name
        ]
        if not files:
            raise DataError(
                f"version {self.dataset_hash[:12]} has no {name!r} split (it has: {', '.join(self.split_names)})"
            )
        return storage.scan_parquet(files)

    @property
    def splits(self) -> dict[str, pl.LazyFrame]:
        return {name: self.split(name) for name in self.split_names}

    def membership(self) -> pl.LazyFrame:
        """record_id and split of every record the version holds (none for an empty one)."""
        parts = [frame.select("record_id", "split") for frame in self.splits.values()]
        empty = pl.LazyFrame(schema={"record_id": pl.String, "split": pl.String})
        return pl.concat(parts) if parts else empty


def read_manifest(path: Location) -> dict[str, Any]:
    try:
        return json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: no {MANIFEST}; this is not a published version folder") from None
    except ValueError as error:
        raise DataError(
            f"{path / MANIFEST}: unreadable ({error}); restore it from a copy"
        ) from None


def verify_shards(path: Location, manifest: dict[str, Any]) -> list[ShardProblem]:
    """Re-hash every shard listed in the manifest and read its row count from its footer;
    return the ones that do not match."""
    problems = []
    for shard in manifest["shards"]:
        file = path / shard["path"]
        if not file.exists():
            problems.append(ShardProblem(shard["path"], "missing", shard["sha256"], None))
            continue
        actual = file_sha256(file)
        if actual != shard["sha256"]:
            problems.append(ShardProblem(shard["path"], "sha256 mismatch", shard["sha256"], actual))
            continue
        with file.open("rb") as handle:
            rows = footer_rows(handle)
        if "rows" in shard and rows != shard["rows"]:
            problems.append(ShardProblem(shard["path"], "row count mismatch", shard["rows"], rows))
    return problems


def footer_rows(source) -> int:
    """The row count in a shard's Parquet footer (`source`: an open file or a pyarrow
    buffer): part of checking it, not a read of its rows."""
    import pyarrow.parquet as pq

    return pq.read_metadata(source).num_rows


def recomputed_hash(manifest: dict[str, Any]) -> str:
    """The dataset hash of what the manifest describes (its shards' sha256s, schema, split
    membership and config hash), computed again rather than read from it."""
    try:
        return dataset_hash(
            manifest["shards"],
            manifest["schema"],
            manifest["split_membership"],
            manifest["config_hash"],
        )
    except (KeyError, TypeError) as error:
        raise DataError(f"manifest lacks or mangles {error}; restore it from a copy") from None


def check_identity(path: Location, manifest: dict[str, Any], expected: str | None = None) -> None:
    """The gate every reader passes: the hash recomputed from the manifest must be the one it
    states and the one asked for (`expected`: the catalog's, or a hash or prefix a user gave).
    The split counts must add up from the shards (they are not hashed, but readers use them).
    Shards are checked against the manifest by `verify_shards`: together, the bytes read are
    the bytes the hash names."""
    computed = recomputed_hash(manifest)
    stated = str(manifest.get("dataset_hash", ""))
    if computed != stated or (expected is not None and not computed.startswith(expected.lower())):
        asked = expected or stated
        raise DataError(
            f"{path / MANIFEST} does not describe version {asked[:16]}: its content hashes to "
            f"{computed[:16]} (it states {stated[:16] or 'none'}); it was changed after "
            "publishing — do not use it; restore the version from a copy or publish again"
        )
    counted: dict[str, int] = {}
    for shard in manifest["shards"]:
        counted[shard["split"]] = counted.get(shard["split"], 0) + shard["rows"]
    stated_counts = {split: rows for split, rows in manifest["split_counts"].items() if rows}
    if counted != stated_counts:
        raise DataError(
            f"{path / MANIFEST}: split_counts {stated_counts} do not add up from its shards "
            f"{counted}; it was changed after publishing — restore it from a copy"
        )


def read_version(
    path: str | Location,
    verify: bool = True,
    allow_withdrawn: bool = False,
    expected_hash: str | None = None,
) -> PublishedVersion:
    """Open a version folder (a path or fsspec URL). Its manifest must hash to the hash it
    states and to `expected_hash` when given (`check_identity`); with `verify`, every shard
    must match the manifest too. A withdrawn version is refused unless `allow_withdrawn`."""
    path = storage.location(path)
    manifest = read_manifest(path)
    marker = path / WITHDRAWN_MARKER
    if marker.exists() and not allow_withdrawn:
        withdrawn = json.loads(marker.read_text())
        raise DataError(
            f"version {manifest['dataset_hash'][:12]} at {path} was withdrawn "
            f"({withdrawn['reason']}); do not train on it"
        )
    check_identity(path, manifest, expected_hash)
    if verify:
        problems = verify_shards(path, manifest)
        if problems:
            listed = "; ".join(f"{p.path}: {p.problem}" for p in problems)
            raise DataError(
                f"version {manifest['dataset_hash'][:12]} at {path} failed verification ({listed}); "
                "do not use it — restore the shards or publish again"
            )
    return PublishedVersion(path=path, manifest=manifest)
