"""Earlier runs of a dataset that died without saying how they ended (SIGKILL, power loss):
their rows are marked failed and what they left is tidied, before a new run of it starts."""

from __future__ import annotations

import json
import shutil
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from data_catalog.catalog import CATALOG_FILE, Catalog
from flows import resume as resume_steps
from flows.alerts import report_interrupted
from flows.run_plan import OWNER_FILE, scratch_of
from pipeline.config import RunConfig
from pipeline.core import storage
from pipeline.publish.version import MANIFEST

# A `running` row without its owner file lost the file, unless it is a run this young (clocks
# apart, or an older Thresher that removed the file just before its row was finished).
LOST_OWNER_GRACE_S = 60.0


def sweep_interrupted_runs(cfg: RunConfig, catalog: Catalog) -> None:
    """A run killed before its clean-up (SIGKILL, power loss) leaves files holding record
    text: delete the unscreened ones (the rest wait for resume), mark the run failed once its
    process is gone, and alert: no state hook ran for it."""
    workdir = Path(cfg.workdir)
    running = {run["run_id"] for run in catalog.runs() if run["status"] == "running"}
    for run_dir in sorted((workdir / "runs").glob("*")):
        owner_file = run_dir / OWNER_FILE
        if not owner_file.exists():
            continue
        owner = json.loads(owner_file.read_text())
        if _alive(owner):
            continue
        _tidy_interrupted(run_dir, cfg, catalog)
        owner_file.unlink()
        if run_dir.name in running:
            reason = f"interrupted: its process ended (run {run_dir.name}, pid {owner['pid']})"
            catalog.finish_run(run_dir.name, "failed", error=reason)
            report_interrupted(cfg, catalog, owner.get("flow_run_id") or run_dir.name, reason)
    _fail_lost_runs(cfg, catalog)


def _fail_lost_runs(cfg: RunConfig, catalog: Catalog) -> None:
    """A run of this dataset still `running` in the catalog without its owner file lost it
    (deleted, alone or with its run folder): mark it failed and alert. A missing run folder
    counts only with this work folder's own catalog: a shared catalog's run may be running in
    another machine's work folder."""
    runs = Path(cfg.workdir) / "runs"
    for run in catalog.runs(cfg.name):
        run_dir = runs / run["run_id"]
        if run["status"] != "running" or (run_dir / OWNER_FILE).exists():
            continue  # ended, or judged by its owner file (sweep_interrupted_runs)
        if run_dir.is_dir():
            if _age_s(run["started_at"]) < LOST_OWNER_GRACE_S:
                continue
            lost = "its owner file"
        elif _own_catalog(catalog, cfg):
            lost = "its run folder"
        else:
            continue
        if not _running(catalog, cfg.name, run["run_id"]):
            continue  # it ended since the list was read (and then removed its owner file)
        _tidy_interrupted(run_dir, cfg, catalog)
        reason = f"interrupted: its process is gone and {lost} was lost (run {run['run_id']})"
        catalog.finish_run(run["run_id"], "failed", error=reason)
        report_interrupted(cfg, catalog, run["run_id"], reason)


def _tidy_interrupted(run_dir: Path, cfg: RunConfig, catalog: Catalog) -> None:
    """Delete what an interrupted run left that holds unscreened text, and its staging (in
    the work folder, or in the run's own scratch, removed whole: runner.scratch)."""
    scratch = scratch_of(cfg, run_dir.name)
    if scratch is not None:
        resume_steps.discard(run_dir)
        scratch_root = storage.location(scratch)
        _remove_partial_copy(scratch_root / "staging", cfg, catalog)
        storage.remove_tree(scratch_root)
    elif run_dir.is_dir():
        resume_steps.keep_for_resume(run_dir)
    for staging in (Path(cfg.workdir) / "datasets").glob(f"*/.staging-{run_dir.name}"):
        _remove_partial_copy(staging, cfg, catalog)
        shutil.rmtree(staging, ignore_errors=True)


def _running(catalog: Catalog, name: str, run_id: str) -> bool:
    return any(r["run_id"] == run_id and r["status"] == "running" for r in catalog.runs(name))


def _age_s(started_at: datetime) -> float:
    if started_at.tzinfo is None:  # SQLite keeps the UTC time without its zone
        started_at = started_at.replace(tzinfo=UTC)
    return (datetime.now(UTC) - started_at).total_seconds()


def _own_catalog(catalog: Catalog, cfg: RunConfig) -> bool:
    """Whether the catalog is the work folder's SQLite file (every run it lists ran here)."""
    url = catalog.engine.url
    own = Path(cfg.workdir).resolve() / CATALOG_FILE
    return url.get_backend_name() == "sqlite" and Path(url.database or "").resolve() == own


def _remove_partial_copy(staging: storage.Location, cfg: RunConfig, catalog: Catalog) -> None:
    """A run killed while copying its version to `publish.location` leaves part of it there:
    remove it unless the catalog holds that version (then it is complete)."""
    manifest = staging / MANIFEST
    if cfg.publish.location is None or not manifest.exists():
        return
    staged = json.loads(manifest.read_text())
    if catalog.find(staged["dataset_hash"]) is None:
        stored = catalog.stored_path(staged["name"], staged["dataset_hash"], cfg.publish.location)
        storage.remove_tree(catalog.version_path(stored))


def _alive(owner: dict[str, Any]) -> bool:
    if owner["host"] != socket.gethostname():
        return True  # another machine's run: not ours to judge
    try:
        process = psutil.Process(owner["pid"])
        # a later process may have been given the same pid
        return owner.get("started") is None or process.create_time() == owner["started"]
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
