"""`thresher train`: a run in this process (`torchrun -m training` for several processes), a
seed group, the plan before a run (`train plan`), two runs compared (`train compare`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from flows.cli_common import JsonOption, emit, fail, human, progress_shown, workdir_of
from flows.train_views import print_comparison, print_plan, print_seed_summary
from pipeline.core.errors import ThresherError

train_app = typer.Typer(
    help="`thresher train --config C`: train on a published version, verified shard by shard. "
    "`train plan`: the plan before a run. `train compare`: two runs side by side.",
    invoke_without_command=True,
)


@train_app.callback()
def train(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Run config with a train: section.")
    ] = None,
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset hash, unique prefix, or latest.")
    ] = "latest",
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="A training run folder: go on from its last checkpoint."),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds", help="Train once per seed (13,14,15) and summarize the metrics across them."
        ),
    ] = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Train on a published version, verified shard by shard; write a run manifest."""
    if ctx.invoked_subcommand:
        given = [name for name, value in (("--config", config), ("--resume", resume),
                 ("--seeds", seeds), ("--json", as_json), ("--quiet", quiet)) if value]  # fmt: skip
        if given or dataset != "latest":
            fail(
                f"put {', '.join(given) or '--dataset'} after `{ctx.invoked_subcommand}`: "
                f"thresher train {ctx.invoked_subcommand} --config …"
            )
        return
    if config is None:
        fail("thresher train needs --config (a run config with a train: section)")
    from training.seeds import parse_seeds

    try:
        with progress_shown(quiet):
            summaries, group = train_and_summarize(
                config, dataset, resume, parse_seeds(seeds) if seeds else None
            )
    except ThresherError as error:
        fail(str(error))
    for summary in summaries:
        if as_json:
            emit(summary)
        print_summary(summary, human(as_json))
    if group:
        print_seed_summary(group, human(as_json))
        if as_json:
            emit(group)


def train_and_summarize(
    config: str | Path, dataset: str, resume: str | Path | None, seeds: list[int] | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One run (or, with `seeds`, one per seed): each run's summary with the refreshed
    report, and the seed group's summary (None without seeds). For the CLI and the flow."""
    from flows.report import refresh_report
    from pipeline.core.errors import ConfigError
    from training.run import train, train_seeds

    if seeds and resume:
        raise ConfigError(
            "seeds start new runs; resume one run of a seed group with --resume RUN_DIR alone"
        )
    if seeds:
        results, summary_path = train_seeds(config, dataset, seeds)
        group = {"seed_summary": str(summary_path), **json.loads(summary_path.read_text())}
    else:
        results = [train(config, None if resume and dataset == "latest" else dataset, resume)]
        group = None
    summaries = [summarize(result.manifest, result.run_dir) for result in results]
    report = refresh_report(config, summaries[0]["dataset_hash"])
    for summary in summaries:
        summary["report"] = report
    return summaries, group


@train_app.command("plan")
def plan_command(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Run config with a train: section.")
    ],
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset hash, unique prefix, or latest.")
    ] = "latest",
    as_json: JsonOption = False,
) -> None:
    """The plan a run would fix before its first step: data, steps, batch, parameters, device,
    measured time per step and peak memory, projected wall time; exit 1 when over budget."""
    from training.run import plan

    try:
        found = plan(config, dataset)
    except ThresherError as error:
        fail(str(error))
    if as_json:
        emit(found)
    print_plan(found, human(as_json))
    if found["over_budget"]:
        raise typer.Exit(1)


@train_app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="Run A: a run folder, or a run id with --config.")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared with A (differences are B − A).")],
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Find run ids in this config's work folder."),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write both loss curves and B − A to this PNG.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compare two completed runs on one version: loss per step, validation and test metrics,
    time per step, peak memory."""
    from training import compare

    workdir = workdir_of(None, config) if config else None
    try:
        folder_a, a = compare.open_run(run_a, workdir)
        folder_b, b = compare.open_run(run_b, workdir)
        found = compare.compare(folder_a, a, folder_b, b)
    except ThresherError as error:
        fail(str(error))
    if plot:
        found["plot"] = str(compare.plot(found, plot))
    if as_json:
        emit(found)
    print_comparison(found, human(as_json))


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
        "took": _took(record),
    }


def _took(record: dict[str, Any]) -> dict[str, Any] | None:
    """What the run took beside what its plan projected (a resumed run: this attempt)."""
    measured = record["metrics"].get("measured")
    if not measured:
        return None
    projected = (record.get("plan") or {}).get("projected") or {}
    return {
        "wall_seconds": measured["wall_seconds"],
        "projected_seconds": projected.get("wall_seconds"),
        "seconds_per_step": measured["seconds_per_step"],
        "peak_memory_bytes": measured["peak_memory_bytes"],
        "memory_kind": measured["memory_kind"],
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
    took = summary.get("took")
    if took:
        from training.units import duration, mebibytes

        planned = took["projected_seconds"]
        out.print(
            f"took: {duration(took['wall_seconds'])}"
            + (f" (planned {duration(planned)})" if planned is not None else "")
            + (
                f", {took['seconds_per_step'] * 1000:,.0f} ms per step"
                if took["seconds_per_step"]
                else ""
            )
            + f", peak {mebibytes(took['peak_memory_bytes'])} ({took['memory_kind']})",
            highlight=False,
        )
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
