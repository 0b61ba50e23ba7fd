"""The version format: a staged version (shards and manifest in a staging folder) and the
dataset hash, a sha256 over the shard paths and sha256s, the schema, the split membership
and the config hash; times, parent and code version sit beside it in the manifest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.core.storage import Location

# Config settings that stay out of manifests (which travel with the data): webhook URLs
# carry tokens, and who may review is nobody else's business.
NOT_PUBLISHED = {"alerts", "review"}


MANIFEST = "manifest.json"


@dataclass
class StagedVersion:
    """A complete version in a staging folder, waiting for gates and the catalog commit."""

    path: Location  # a local folder, or the run's remote scratch
    manifest: dict[str, Any]
    events: pl.DataFrame

    @property
    def dataset_hash(self) -> str:
        return self.manifest["dataset_hash"]

    @classmethod
    def load(cls, path: Location) -> StagedVersion:
        """A staged version written by an earlier task (its events are in the ledger)."""
        manifest = json.loads((path / MANIFEST).read_text())
        return cls(path=path, manifest=manifest, events=pl.DataFrame(schema=LEDGER_SCHEMA))


def dataset_hash(
    shards: list[dict], schema: list[dict], membership: dict[str, str], config_hash: str
) -> str:
    content = {
        "shards": sorted([shard["path"], shard["sha256"]] for shard in shards),
        "schema": schema,
        "split_membership": membership,
        "config_hash": config_hash,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
