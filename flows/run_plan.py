"""A run's plan: its id, folder and owner file, the catalog state its stages read (loaded
once), and the sweep that settles earlier runs of the dataset that died without saying how
they ended. `plan_run` makes it; the flow (flows/curate.py), resume (flows/resume.py) and
the runner's steps read it."""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import psutil

from data_catalog import deletions, eval_sets, review_queue, splits
from data_catalog.catalog import Catalog, now
from flows.report import repair_missing_reports
from pipeline.config import RunConfig, config_hash
from pipeline.core import storage
from pipeline.core.errors import ConfigError
from pipeline.core.schema import EvalSet
from pipeline.publish.reader import read_version
from pipeline.publish.version import NOT_PUBLISHED
from pipeline.stage import RunContext

# host, pid, process start time and Prefect flow run of the process running it, while it runs:
# written before the run's catalog row, removed once the row says how the run ended
OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class RunPlan:
    """Everything a task needs to find its inputs: small, picklable, no frames."""

    run_id: str
    run_dir: Path
    started_at: datetime
    config: RunConfig
    config_hash: str
    parent_version: str | None
    parent_path: Path | None
    deletions: pl.DataFrame  # catalog state the stages need, loaded once
    review_decisions: pl.DataFrame
    locked_test: pl.DataFrame | None  # record ids of the test set locked for this name
    test_lock: str | None  # the version whose test set is locked
    frozen_cutoffs: dict | None
    eval_sets: tuple[EvalSet, ...]
    part_rows: int = 0  # records per part of the stage being run (`_slim` sizes them)
    scratch: str = ""  # the run's intermediate files: runner.scratch/<name>/<run id>, or run_dir

    @property
    def scratch_root(self) -> storage.Location:
        return storage.location(self.scratch or self.run_dir)

    @property
    def scratch_is_local(self) -> bool:
        return storage.is_local(self.scratch_root)

    @property
    def scratch_in_run_dir(self) -> bool:
        """The default: the run's intermediate files in its run folder, where a failed run
        keeps them for the next to resume from."""
        return self.scratch_root == self.run_dir

    @property
    def workdir(self) -> Path:
        return Path(self.config.workdir)

    @property
    def ledger_dir(self) -> storage.Location:
        return self.scratch_root / "ledger-parts"

    def stage_dir(self, stage: str) -> storage.Location:
        return self.scratch_root / "stages" / stage

    def context(self, with_parent: bool = True) -> RunContext:
        parent_splits = None
        if with_parent and self.parent_path is not None:
            # verified in plan_run
            parent = read_version(self.parent_path, verify=False, expected_hash=self.parent_version)
            parent_splits = parent.membership()
        return RunContext(
            run_id=self.run_id,
            run_dir=self.run_dir,
            config=self.config,
            config_hash=self.config_hash,
            parent_version=self.parent_version,
            parent_splits=parent_splits,
            deletions=self.deletions,
            review_decisions=self.review_decisions,
            locked_test=self.locked_test,
            frozen_cutoffs=self.frozen_cutoffs,
            eval_sets=self.eval_sets,
        )


def _owner() -> dict[str, Any]:
    from prefect.runtime import flow_run

    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": psutil.Process().create_time(),
        "flow_run_id": flow_run.id,
    }


def _check_languages(cfg: RunConfig) -> None:
    """Language codes py3langid does not know stop the run before it reads anything (the
    config's schema checks only their form)."""
    language = cfg.quality.language
    named = {"allow": language.allow or [], "candidates": language.candidates or []}
    if not any(named.values()):
        return
    from pipeline.text.langid import languages

    known = set(languages())
    for field, codes in named.items():
        unknown = sorted(set(codes) - known)
        if unknown:
            raise ConfigError(
                f"quality.language.{field}: unknown language code(s) {', '.join(unknown)}; "
                f"py3langid knows {', '.join(sorted(known))}"
            )


def scratch_of(cfg: RunConfig, run_id: str) -> str | None:
    """Where a run of `cfg` keeps its intermediate files when `runner.scratch` is set: each run
    its own prefix, runner.scratch/<name>/<run id>."""
    scratch = cfg.runner.scratch
    return f"{scratch.rstrip('/')}/{cfg.name}/{run_id}" if scratch else None


def plan_run(cfg: RunConfig, catalog: Catalog, started_at: datetime | None = None) -> RunPlan:
    _check_languages(cfg)
    repair_missing_reports(catalog)  # of versions whose run was killed after their commit
    catalog.point_every_latest()  # also gives work folders made before pointers their own
    protected = eval_sets.load(catalog, cfg.contamination.protected)  # files verified
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    run_dir = Path(cfg.workdir) / "runs" / run_id
    run_dir.mkdir(parents=True)
    partial = run_dir / f"{OWNER_FILE}.partial"  # the sweep of a run starting now reads it
    partial.write_text(json.dumps(_owner()))
    partial.replace(run_dir / OWNER_FILE)
    parent = catalog.latest(cfg.name)
    if parent is not None:  # its splits decide ours: re-hash its shards once, trust nothing
        read_version(catalog.version_path(parent), verify=True, expected_hash=parent.dataset_hash)
    digest = config_hash(cfg)
    lock = splits.active_lock(catalog, cfg.name)
    (run_dir / "config.json").write_text(
        json.dumps(
            {"config_hash": digest, "config": cfg.model_dump(mode="json", exclude=NOT_PUBLISHED)},
            indent=2,
        )
        + "\n"
    )
    return RunPlan(
        run_id=run_id,
        run_dir=run_dir,
        scratch=scratch_of(cfg, run_id) or str(run_dir),
        started_at=started_at or now(),
        config=cfg,
        config_hash=digest,
        parent_version=parent.dataset_hash if parent else None,
        parent_path=catalog.version_path(parent) if parent else None,
        deletions=deletions.requests_frame(catalog),
        review_decisions=review_queue.decisions_frame(catalog),
        locked_test=splits.locked_ids(catalog, lock) if lock else None,
        test_lock=lock.dataset_hash if lock else None,
        frozen_cutoffs=splits.frozen_cutoffs(catalog, cfg.name),
        eval_sets=protected,
    )
