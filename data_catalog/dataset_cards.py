"""Dataset cards of a published version: the facts, gathered from the catalog, the manifest and
the version's ledger, and the two files rendered from them (pipeline/report/dataset_card.py).

Facts are counts, names and hashes: the ledger's evidence is read only for finding types and
languages, never for offsets or leading characters, so no secret can reach a card.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from data_catalog.catalog import Catalog, VersionRecord
from pipeline.config import SPLITS, PolicyConfig
from pipeline.core import reasons, storage
from pipeline.core.errors import DataError
from pipeline.core.licenses import license_class
from pipeline.core.storage import Location
from pipeline.publish.reader import read_manifest
from pipeline.report.audit import finding_types, secret_types
from pipeline.report.dataset_card import croissant, datasheet

CROISSANT_FILE = "croissant.json"
DATASHEET_FILE = "datasheet.md"
LEDGER = "ledger.parquet"
# Reasons whose evidence names the types found: governance decisions keep the deciding
# finding under `detail`, redaction edits at the top.
FINDING_REASONS = (reasons.SECRET_DETECTED, reasons.PERSONAL_DATA, reasons.PERSONAL_DATA_REDACTED)
DECLARATION_FACTS = (
    "format",
    "description",
    "collected",
    "rights_basis",
    "allowed_uses",
    "removal_contact",
    "synthetic",
)


def card_facts(catalog: Catalog, version: VersionRecord) -> dict[str, Any]:
    """Everything the cards state about a version, as plain JSON-able data."""
    folder = catalog.version_path(version)
    manifest = read_manifest(folder)
    if not (folder / LEDGER).exists():
        raise DataError(f"{folder}: no {LEDGER}; the cards need the version's ledger")
    config = manifest["config"]
    policy = PolicyConfig.model_validate(config["policy"])
    order = {name: rank for rank, name in enumerate(SPLITS)}
    shards = sorted(
        (
            {key: shard[key] for key in ("split", "path", "rows", "bytes", "sha256")}
            for shard in catalog.shards(version.dataset_hash)
        ),
        key=lambda shard: (order.get(shard["split"], len(order)), shard["path"]),
    )
    return {
        "name": version.name,
        "dataset_hash": version.dataset_hash,
        "parent_version": version.parent_hash,
        "created_at": manifest["created_at"],
        "run_id": version.run_id,
        "code_version": version.code_version,
        "config_hash": version.config_hash,
        "status": version.status,
        "status_reason": version.status_reason,
        "url": version.path if "://" in version.path else None,
        "columns": manifest["schema"],
        "split_counts": version.split_counts,
        "shards": shards,
        "sources": [_source(row, policy) for row in _declared_order(catalog, manifest)],
        "split": manifest.get("split", {"strategy": config["split"]["strategy"]}),
        "protected_eval_sets": [
            {"name": s["name"], "items": s["items"]}
            for s in manifest.get("protected_eval_sets", [])
        ],
        "policy": config["policy"],
        "language": config["quality"]["language"],
        "dedup": {"exact": config["dedup"]["exact"], **_dedup_methods(config["dedup"])},
        "ledger": _ledger_facts(storage.scan_parquet([folder / LEDGER])),
        "published": _published_profile(folder, shards),
    }


def write_cards(catalog: Catalog, version: VersionRecord, out_dir: Path) -> dict[str, Path]:
    """Write croissant.json and datasheet.md for a version into `out_dir`; return their paths.

    The Croissant card names its shards by paths relative to itself (`data/train/…`), which
    Croissant readers resolve under the card's folder: so that the card reads its records
    wherever it is written (the report folder, a folder of `thresher card --out`), `out_dir`
    gets a `data/` tree of relative links to the version's shards where the version is on a
    local disk. A version on object storage has no local shards to link: mlcroissant reads
    its records from a local copy of the version with the card written into it."""
    facts = card_facts(catalog, version)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"croissant": out_dir / CROISSANT_FILE, "datasheet": out_dir / DATASHEET_FILE}
    paths["croissant"].write_text(json.dumps(croissant(facts), indent=2, ensure_ascii=False) + "\n")
    paths["datasheet"].write_text(datasheet(facts))
    folder = catalog.version_path(version)
    if storage.is_local(folder):
        _link_shards(folder, [shard["path"] for shard in facts["shards"]], out_dir)
    return paths


def _link_shards(version_folder: Path, shards: list[str], out_dir: Path) -> None:
    """`out_dir/<shard path>` as a relative link to each shard that exists (none of a purged
    version); nothing where `out_dir` is the version's own folder, and never in place of a
    real file (`--out` naming another version's folder keeps its shards)."""
    if out_dir.resolve() == version_folder.resolve():
        return
    for shard in shards:
        target, link = version_folder / shard, out_dir / shard
        if not target.is_file() or (link.exists() and not link.is_symlink()):
            continue  # a real file there (another version's shard): never replaced
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(target.resolve(), link.parent.resolve()))


def _declared_order(catalog: Catalog, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The version's sources from the catalog, in the order the run config declared them."""
    rank = {source["name"]: at for at, source in enumerate(manifest.get("sources", []))}
    rows = catalog.sources(manifest["dataset_hash"])
    return sorted(rows, key=lambda row: (rank.get(row["source"], len(rank)), row["source"]))


def _source(row: dict[str, Any], policy: PolicyConfig) -> dict[str, Any]:
    declaration = row["declaration"]
    classes = policy.for_source(row["source"]).licenses.classes
    return {
        "name": row["source"],
        "license": row["license"],
        "license_class": license_class(row["license"], classes),
        "consent": row["consent"],
        "owner": row["owner"],
        "records": row["records"],
        **{key: declaration.get(key) for key in DECLARATION_FACTS},
    }


def _dedup_methods(dedup: dict[str, Any]) -> dict[str, float | None]:
    """The similarity threshold of each fuzzy method, None where it was off."""
    return {
        method: dedup[method]["threshold"] if dedup.get(method) else None
        for method in ("minhash", "semantic")
    }


def _ledger_facts(ledger: pl.LazyFrame) -> dict[str, Any]:
    terminal = ledger.filter(pl.col("terminal"))
    steps = (
        ledger.group_by("stage", "action", "reason", maintain_order=True)  # stage order
        .agg(pl.len().alias("records"))
        .collect()
    )
    by_source = (
        terminal.group_by("source", "action", "reason")
        .agg(pl.len())
        .sort("source", "action", "reason")
        .collect()
    )
    findings = (
        ledger.filter(pl.col("reason").is_in(FINDING_REASONS))
        .select(
            "action",
            "reason",
            finding_types().alias("type"),
        )
        .explode("type")
        .group_by("reason", "action", "type")
        .agg(pl.len().alias("records"))
        .sort("reason", "records", "type", descending=[False, True, False])
        .collect()
    )
    # secrets in records another reason decided first (a license): found, counted, not shown
    secrets_elsewhere = (
        terminal.filter(pl.col("stage") == "govern", pl.col("reason") != reasons.SECRET_DETECTED)
        .select(secret_types().alias("type"))
        .explode("type")
        .drop_nulls()
        .group_by("type")
        .agg(pl.len())
        .collect()
    )
    languages = (
        terminal.filter(pl.col("reason").is_in(reasons.LANGUAGE_REASONS))
        .group_by(pl.col("evidence").str.json_path_match("$.language").alias("language"))
        .agg(pl.len())
        .collect()
    )
    outcomes_by_source: dict[str, dict[str, dict[str, int]]] = {}
    for source, action, reason, records in by_source.iter_rows():  # `published` has no reason
        outcomes_by_source.setdefault(source, {}).setdefault(action, {})[reason or action] = records
    generated = ledger.filter(pl.col("action") == reasons.GENERATED).select(pl.len()).collect()
    return {
        "records_in": terminal.select(pl.len()).collect().item() - generated.item(),
        "generated": generated.item(),
        "outcomes": {
            action: int(by_source.filter(pl.col("action") == action)["len"].sum())
            for action in reasons.TERMINAL_ACTIONS
        },
        "steps": steps.to_dicts(),
        "by_source": outcomes_by_source,
        "findings": findings.to_dicts(),
        "secrets_elsewhere": _sorted_counts(secrets_elsewhere),
        "languages_dropped": _sorted_counts(languages),
    }


def _sorted_counts(counts: pl.DataFrame) -> dict[str, int]:
    """{value: count}, the largest first, from a two-column frame (value, len)."""
    ordered = counts.sort(["len", counts.columns[0]], descending=[True, False], nulls_last=True)
    return {str(value): count for value, count in ordered.iter_rows()}


def _published_profile(folder: Location, shards: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Labels per split, the time span and the number of groups of the published records;
    None when the shards are gone (a purged version)."""
    files = [folder / shard["path"] for shard in shards]
    if not files or not all(file.exists() for file in files):
        return None
    records = storage.scan_parquet(files)
    labels = (
        records.filter(pl.col("label").is_not_null()).group_by("split", "label").agg(pl.len())
    ).collect()
    span = records.select(
        pl.col("timestamp").min().alias("first"),
        pl.col("timestamp").max().alias("last"),
        pl.coalesce("group", "record_id").n_unique().alias("groups"),  # no group: its own
    ).collect()
    first, last, groups = span.row(0)
    return {
        "labels": {
            split: _sorted_counts(labels.filter(pl.col("split") == split).drop("split"))
            for split in SPLITS
            if split in labels["split"]
        },
        "first_timestamp": first.isoformat() if first else None,
        "last_timestamp": last.isoformat() if last else None,
        "groups": groups,
    }
