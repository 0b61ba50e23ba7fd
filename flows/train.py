"""The Prefect `train` flow: the same training function as `thresher train`, as a flow run
(for deployments and `prefect deployment run 'train/…'`)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from flows.alerts import on_failure
from flows.report import refresh_report
from flows.train_cli import summarize


@flow(name="train", on_failure=[on_failure], on_crashed=[on_failure])
def train_flow(
    config_path: str, dataset: str = "latest", resume: str | None = None
) -> dict[str, Any]:
    from training.run import train

    result = train(config_path, dataset, resume=resume)
    summary = summarize(result.manifest, result.run_dir)
    summary["report"] = refresh_report(config_path, summary["dataset_hash"])
    get_run_logger().info(
        "trained %s on %s: test %s; manifest %s",
        summary["objective"],
        summary["dataset_hash"][:16],
        summary["test"],
        summary["manifest"],
    )
    return summary
