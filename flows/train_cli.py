"""`thresher train`: one training run in this process (`torchrun -m training` for several)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from flows.cli_common import JsonOption, emit, fail, human, progress_shown
from pipeline.core.errors import ThresherError


def train(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Run config with a train: section.")
    ],
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset hash, unique prefix, or latest.")
    ] = "latest",
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="A training run folder: go on from its last checkpoint."),
    ] = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Train on a published version, verified shard by shard; write a run manifest."""
    from training.run import train as run_training

    try:
        with progress_shown(quiet):
            result = run_training(
                config, None if resume and dataset == "latest" else dataset, resume
            )
    except ThresherError as error:
        fail(str(error))
    summary = summarize(result.manifest, result.run_dir)
    from flows.report import refresh_report

    summary["report"] = refresh_report(config, summary["dataset_hash"])
    if as_json:
        emit(summary)
    print_summary(summary, human(as_json))


def summarize(record: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    metrics = record["metrics"]
    return {
        "run_id": record["run_id"],
        "status": record["status"],
        "objective": record["objective"],
        "dataset_hash": record["dataset"]["hash"],
        "steps": metrics["steps"],
        "best_step": metrics["best_step"],
        "stopped_early": metrics["stopped_early"],
        "test": {k: v for k, v in (metrics["test"] or {}).items() if not isinstance(v, dict)},
        "records": record["dataset"]["records"],
        "run_dir": str(run_dir),
        "manifest": str(run_dir / "run_manifest.json"),
        "model": str(run_dir / record["model"]["path"]),
        "curves": str(run_dir / metrics["curves"]),
    }


def print_summary(summary: dict[str, Any], out: Console) -> None:
    test = ", ".join(f"{key} {value:.4g}" for key, value in summary["test"].items())
    out.print(
        f"[bold]trained[/] {summary['objective']} on {summary['dataset_hash'][:16]}: "
        f"{summary['steps']} steps, best step {summary['best_step']}"
        + (" (stopped early)" if summary["stopped_early"] else ""),
        highlight=False,
    )
    out.print(f"test: {test or 'no test split'}", highlight=False)
    out.print(f"records: {records_used(summary['records'])}", highlight=False)
    for label in ("model", "manifest", "curves", "report"):
        if summary.get(label):
            out.print(f"  {label:<9}{summary[label]}", highlight=False)


def records_used(records: dict[str, Any]) -> str:
    """`train 32 (104 skipped: no label 104), validation 8, test 9`."""
    from training.data import skipped_text

    skipped_by = records.get("skipped_by", {})
    return ", ".join(
        f"{split} {records[split]}{skipped_text(skipped_by.get(split, {}))}"
        for split in ("train", "validation", "test")
        if split in records
    )
