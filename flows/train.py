"""The Prefect `train` flow: the same training function as `thresher train`, as a flow run
(for deployments and `prefect deployment run 'train/…'`)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from flows.alerts import on_failure
from flows.train_cli import train_and_summarize


@flow(name="train", on_failure=[on_failure], on_crashed=[on_failure])
def train_flow(
    config_path: str,
    dataset: str = "latest",
    resume: str | None = None,
    seeds: list[int] | None = None,
) -> dict[str, Any]:
    """One run; with `seeds`, one run per seed and their summary (`runs`, `seed_summary`)."""
    summaries, group = train_and_summarize(config_path, dataset, resume, seeds)
    logger = get_run_logger()
    for summary in summaries:
        logger.info(
            "trained %s on %s: test %s; manifest %s",
            summary["objective"],
            summary["dataset_hash"][:16],
            summary["test"],
            summary["manifest"],
        )
    if group is None:
        return summaries[0]
    logger.info("seed summary: %s", group["seed_summary"])
    return {
        "runs": summaries,
        "seed_summary": group["seed_summary"],
        "report": summaries[0]["report"],
    }
