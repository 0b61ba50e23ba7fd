"""Publishing a run's records and committing the version: the shards written on the run's
workers (flows/runner/strategies.py: publish_shards), the manifest with the facts audits
read beside the hash (how the splits were made, every source's terms, label-conflict rates,
the published, excluded and leaking fields), the accounting checked and the catalog row
written last; then the run's summary, each stage's stats where its registry entry says."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import polars as pl
from prefect import get_run_logger

from data_catalog import splits
from data_catalog.catalog import CATALOG_FILE, Catalog
from flows.report import GATES_FILE
from flows.run_plan import RunPlan
from flows.runner.strategies import publish_shards
from pipeline.config import SPLITS
from pipeline.core import ledger, spill, storage
from pipeline.core.code_version import code_version
from pipeline.publish.reader import read_version
from pipeline.publish.stage import staged_version
from pipeline.publish.version import MANIFEST, StagedVersion
from pipeline.registry import STAGES
from pipeline.split.field_leakage import field_lists, single_feature_check


def staging_dir(plan: RunPlan) -> storage.Location:
    """Where the shards are written: beside the versions (a rename makes one permanent), or
    in the run's remote scratch, where every worker writes."""
    if not plan.scratch_is_local:
        return plan.scratch_root / "staging"
    return plan.workdir / "datasets" / plan.config.name / f".staging-{plan.run_id}"


def publish_task(plan: RunPlan, input_dir: str, stats: dict[str, dict]) -> dict[str, Any]:
    """Write the shards and the manifest; beside the hash, the manifest records how the
    splits were made, every source's terms (synthetic ones with their generator), the
    label-conflict rate per source and the published, excluded and leaking fields."""
    split_stats = stats["split"]
    staging = staging_dir(plan)
    staging.mkdir(parents=True)
    # of every published record, read a range at a time: the shards are planned from them
    ids = pl.scan_parquet(storage.files(input_dir)).select("record_id", "source", "split")
    published = dict(ids.group_by("source").len().collect(engine="streaming").iter_rows())
    split_facts = {  # beside the hash, for audits: how the splits were made and protected
        "split": {
            "strategy": plan.config.split.strategy,
            "cutoffs": split_stats.get("cutoffs"),
            "locked_test": plan.test_lock,
        },
        "protected_eval_sets": [
            {"name": s.name, "items": s.items.height, "path": str(s.folder)} for s in plan.eval_sets
        ],
    }
    fields = _field_facts(plan, input_dir)
    sources = [  # every declared source, with how many of its records this version holds
        {
            "name": s.name,
            "license": s.license,
            "consent": s.consent,
            "owner": s.owner,
            "records": published.get(s.name, 0),
            "synthetic": s.synthetic.model_dump(mode="json") if s.synthetic else None,
        }
        for s in plan.config.source_list
    ]
    shard_plan, shards, accounting = publish_shards(plan, input_dir, ids, staging)
    extra = {
        "code_version": code_version(),
        "sources": sources,
        **split_facts,
        "label_conflicts": label_conflict_rates(list(stats.values())),
        "fields": fields,
    }
    # the published events: each part's, written by its route step
    staged = staged_version(shard_plan, shards, plan.context(), staging, extra, ledger.empty())
    return {
        "path": str(staging),
        "dataset_hash": staged.dataset_hash,
        "split_counts": staged.manifest["split_counts"],
        "fields": fields,
        "label_conflicts": staged.manifest["label_conflicts"],
        "parts": accounting,
    }


def _field_facts(plan: RunPlan, input_dir: str) -> dict[str, Any]:
    """Published and excluded metadata fields, and the single-feature leakage check on the
    train split: a field that alone predicts the label is a warning in the run's report."""
    train = (
        pl.scan_parquet(storage.files(input_dir))
        .filter(pl.col("split") == "train")
        .select("record_id", "label", "metadata")
        # only the records the check reads: labelled, with metadata
        .filter(pl.col("label").is_not_null() & pl.col("metadata").is_not_null())
        .collect(engine="streaming")
    )
    checked = single_feature_check(train, plan.config.field_leakage)
    warnings = [
        f"metadata field {entry['field']!r} alone predicts the train label with balanced "
        f"accuracy {entry['balanced_accuracy']:.3f} (bound "
        f"{plan.config.field_leakage.max_accuracy}): if it is known only after the outcome, "
        "declare it known_after_outcome; never give it to train.features unless that is intended"
        for entry in checked
        if entry["leaks"]
    ]
    for warning in warnings:
        get_run_logger().warning("field leakage: %s", warning)
    return {
        **field_lists(plan.config.source_list),
        "single_feature_check": checked,
        "leakage_warnings": warnings,
    }


def commit_task(
    plan: RunPlan, staging_dir: str, records_in: int, generated: int, ids_in: int
) -> dict[str, Any]:
    """Check the accounting (counts and record ids), keep the ledger, then write the catalog
    row last."""
    # the parts stay until the version is in: a run killed here is resumed from them
    ledger_path = ledger.consolidate(plan.ledger_dir, plan.run_dir / "ledger.parquet", True)
    log = pl.scan_parquet(ledger_path)
    counts = ledger.check_accounting(log, records_in, generated, ids_in)
    staging = storage.location(staging_dir)
    if plan.locked_test is not None:
        published = read_version(staging, verify=False).membership().collect()
        splits.check_lock_kept(plan.locked_test, published, pl.scan_parquet(ledger_path))
    storage.copy_file(ledger_path, staging / "ledger.parquet")
    gates = [
        json.loads(path.read_text()) for path in sorted((plan.run_dir / "gates").glob("*.json"))
    ]
    (staging / GATES_FILE).write_text(json.dumps(gates, indent=2) + "\n")
    staged = StagedVersion.load(staging)
    catalog = Catalog.open(plan.workdir)
    version, created = catalog.commit(staged, plan.config.source_list, plan.config.publish.location)
    cutoffs = staged.manifest["split"]["cutoffs"]
    if plan.config.split.cutoffs == "quantiles" and plan.frozen_cutoffs is None and cutoffs:
        splits.freeze_cutoffs(catalog, plan.config.name, cutoffs, version.dataset_hash)
    return {
        "dataset_hash": version.dataset_hash,
        "created": created,
        "path": str(catalog.version_path(version)),
        "counts": counts,
    }


def summarize(
    plan: RunPlan,
    records_in: int,
    committed: dict[str, Any],
    stats: dict[str, dict],
    staged: dict[str, Any],
) -> dict[str, Any]:
    """The run's summary from the stages' stats (by stage name), the manifest's facts and
    the ledger."""
    fields, label_conflicts = staged["fields"], staged["label_conflicts"]
    events = pl.scan_parquet(plan.run_dir / "ledger.parquet")
    version_dir = storage.location(committed["path"])
    summary: dict[str, Any] = {
        "run_id": plan.run_id,
        "name": plan.config.name,
        "dataset_hash": committed["dataset_hash"],
        "created": committed["created"],
        "parent_version": plan.parent_version,
        "records_in": records_in,
        "generated": sum(stage.get("generated", 0) for stage in stats.values()),
        **committed["counts"],
        "reasons": ledger.counts_by_reason(events, terminal=True),
        "changes": ledger.counts_by_reason(events, terminal=False),  # edits and moves
    }
    for name, stage_stats in stats.items():  # each where its stage says
        stage = STAGES[name]
        if stage.summary_at:
            *within, key = stage.summary_at
            place = functools.reduce(lambda at, k: at.setdefault(k, {}), within, summary)
            keys = stage.summary_keys or stage_stats
            place[key] = {k: stage_stats[k] for k in keys if k in stage_stats}
    return summary | {
        "label_conflicts": label_conflicts,
        "splits": _published_splits(version_dir, plan.run_dir),
        "fields": {
            "excluded": fields["excluded"],
            "leakage_warnings": fields["leakage_warnings"],
        },
        "review": {
            "queued_new": sum(stage.get("queued_new", 0) for stage in stats.values()),
            "quarantined_items": sum(
                stats[name][STAGES[name].quarantined] for name in stats if STAGES[name].quarantined
            ),
        },
        "paths": {
            "version": str(version_dir),
            "manifest": str(version_dir / MANIFEST),
            "shards": str(version_dir / "data"),
            "ledger": str(plan.run_dir / "ledger.parquet"),
            "catalog": str(plan.workdir / CATALOG_FILE),
            "run": str(plan.run_dir),
            "prefect": _flow_run_url(),
        },
    }


def _flow_run_url() -> str | None:
    """The run's page in the Prefect UI (None without a UI: a temporary server has none)."""
    from prefect.runtime import flow_run
    from prefect.utilities.urls import url_for

    return url_for("flow-run", obj_id=flow_run.get_id())


def label_conflict_rates(stage_stats: list[dict]) -> dict[str, dict[str, float | int]]:
    """Per source: labelled records the dedup stages saw, those in label conflicts, the rate."""
    labelled: dict[str, int] = {}
    conflicting: dict[str, int] = {}
    for stats in stage_stats:
        for source, count in stats.get("labelled_by_source", {}).items():
            labelled[source] = max(labelled.get(source, 0), count)  # exact dedup saw the most
        by_source = stats.get("label_conflicts", {}).get("by_source", {})
        for source, count in by_source.items():
            conflicting[source] = conflicting.get(source, 0) + count
    return {
        source: {
            "labelled": labelled[source],
            "conflicting": conflicting.get(source, 0),
            "rate": round(conflicting.get(source, 0) / labelled[source], 6),
        }
        for source in sorted(labelled)
        if labelled[source]
    }


def _published_splits(version_dir: storage.Location, scratch: Path) -> dict[str, dict[str, int]]:
    """Records and groups per split as published (after every stage, contamination too)."""
    version = read_version(version_dir, verify=False)
    found = {
        name: {
            "records": frame.select(pl.len()).collect(engine="streaming").item(),
            # a record without a group is its own
            "groups": spill.count_distinct(
                frame.select(pl.coalesce("group", "record_id")), scratch
            ),
        }
        for name, frame in version.splits.items()
    }
    return {name: found.get(name, {"records": 0, "groups": 0}) for name in SPLITS}
