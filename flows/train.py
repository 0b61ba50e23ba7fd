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
    config_path: str,
    dataset: str = "latest",
    resume: str | None = None,
    seeds: list[int] | None = None,
) -> dict[str, Any]:
    """One run; with `seeds`, one run per seed and their summary (`runs`, `seed_summary`)."""
    from training.run import train
    from training.seeds import train_seeds

    if seeds:
        results, summary_path = train_seeds(config_path, dataset, seeds)
    else:
        results, summary_path = [train(config_path, dataset, resume=resume)], None
    summaries = [summarize(result.manifest, result.run_dir) for result in results]
    report = refresh_report(config_path, summaries[0]["dataset_hash"])
    logger = get_run_logger()
    for summary in summaries:
        summary["report"] = report
        logger.info(
            "trained %s on %s: test %s; manifest %s",
            summary["objective"],
            summary["dataset_hash"][:16],
            summary["test"],
            summary["manifest"],
        )
    if summary_path is None:
        return summaries[0]
    logger.info("seed summary: %s", summary_path)
    return {"runs": summaries, "seed_summary": str(summary_path), "report": report}
