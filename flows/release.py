"""The `release-approved` flow: run `curate` again when reviewers approved records of the
dataset since its last successful run, so that the approved records pass every later stage
(dedup, split, contamination) and reach a published version.

The `release-approved/on-approval` deployment runs it when `thresher review approve` emits a
`thresher.review.approved` event, and every 15 minutes for approvals made while no Prefect
server was in reach; with nothing newly approved it returns without running.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC
from typing import Any

from prefect import flow, get_run_logger

from data_catalog import review_queue
from data_catalog.catalog import Catalog
from flows.alerts import on_failure
from flows.curate import curate
from flows.lost_runs import sweep_interrupted_runs
from pipeline.config import load_run_config

APPROVED_EVENT = "thresher.review.approved"


def dataset_resource(name: str) -> dict[str, str]:
    """The Prefect event resource of a dataset name."""
    return {"prefect.resource.id": f"thresher.dataset.{name}", "prefect.resource.name": name}


def approved_since_last_run(catalog: Catalog, name: str) -> int:
    """Items of dataset `name` approved after its last successful run started."""
    succeeded = [run for run in catalog.runs(name) if run["status"] == "succeeded"]
    since = max((run["started_at"] for run in succeeded), default=None)
    approved = review_queue.items(catalog, status="approved")
    return sum(
        1
        for item in approved
        if item["dataset"] == name and (since is None or _utc(item["decided_at"]) > _utc(since))
    )


def _utc(moment):
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite drops the zone


@flow(name="release-approved", on_failure=[on_failure], on_crashed=[on_failure])
def release_approved(config_path: str) -> dict[str, Any]:
    cfg = load_run_config(config_path)
    catalog = Catalog.open(cfg.workdir)
    logger = get_run_logger()
    sweep_interrupted_runs(cfg, catalog)  # a killed run's row must not read as running
    if any(run["status"] == "running" for run in catalog.runs(cfg.name)):
        logger.info("%s: a curate run is in progress; the next check takes these", cfg.name)
        return {"name": cfg.name, "approved": None, "dataset_hash": None}
    approved = approved_since_last_run(catalog, cfg.name)
    if not approved:
        logger.info("%s: no records approved since the last successful run", cfg.name)
        return {"name": cfg.name, "approved": 0, "dataset_hash": None}
    logger.info("%s: %d approved review item(s); running curate", cfg.name, approved)
    summary = curate(config_path)
    return {"name": cfg.name, "approved": approved, "dataset_hash": summary["dataset_hash"]}


def emit_approved(dataset: str, item_ids: list[int]) -> bool:
    """Tell a Prefect server (PREFECT_API_URL) that items of `dataset` were approved; without
    one, do nothing (the schedule catches up). Only ids travel, never record content."""
    if not os.environ.get("PREFECT_API_URL") or not item_ids:
        return False
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    sent = emit_event(
        APPROVED_EVENT, resource=dataset_resource(dataset), payload={"item_ids": item_ids}
    )
    quiet = logging.getLogger("EventsWorker")  # "still processing items" while it drains
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        EventsWorker.drain_all(timeout=10)
    finally:
        quiet.setLevel(level)
    return sent is not None
