"""The stage contract: `stage(frame, cfg, ctx) -> StageResult(frame, events, stats)`.

A stage measures and decides. Catalog state it needs arrives in the RunContext as data,
loaded by the flow; a stage never writes outside the run's folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.config import RunConfig

if TYPE_CHECKING:
    from pipeline.text.eval_index import EvalSet


@dataclass(frozen=True)
class RunContext:
    run_id: str
    run_dir: Path
    config: RunConfig
    config_hash: str
    parent_version: str | None = None
    # record_id -> split of the parent version (columns: record_id, split), when one exists.
    parent_splits: pl.LazyFrame | None = None
    # Open deletion requests (columns: request_id, kind, value), kind one of DELETION_KINDS.
    deletions: pl.DataFrame | None = None
    # Reviewer decisions (REVIEW_DECISION_SCHEMA).
    review_decisions: pl.DataFrame | None = None
    # The locked test set of this dataset name (columns: record_id), when one is locked.
    locked_test: pl.DataFrame | None = None
    # Time cutoffs frozen at the dataset's first publish ({"validation": datetime, ...}).
    frozen_cutoffs: dict[str, datetime] | None = None
    # Protected evaluation sets, verified against the catalog's sha256s by the flow.
    eval_sets: tuple[EvalSet, ...] = ()


@dataclass
class StageResult:
    frame: pl.LazyFrame
    events: pl.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    # Records for the reviewer queue (REVIEW_ITEM_SCHEMA), secrets already masked.
    review_items: pl.DataFrame | None = None
