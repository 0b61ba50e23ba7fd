"""`thresher train`: one training run in this process (`torchrun -m training` for several)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from flows.cli_common import JsonOption, emit, fail, human, progress_shown, workdir_of
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
    from training.run import train
    from training.seeds import train_seeds

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


def print_plan(plan: dict[str, Any], out: Console) -> None:
    from training.plan import duration, mebibytes

    batch, steps, params = plan["batch"], plan["steps"], plan["parameters"]
    records, validation, device = plan["records"], plan["validation"], plan["device"]
    rows = [
        ("objective", plan["objective"]),
        ("dataset", f"{plan['dataset']['name']} {plan['dataset']['hash'][:16]}"),
        (
            "records",
            f"train {records['train']:,}, validation {records['validation']:,}, "
            f"test {records['test_published']:,} published (read once, at the end)",
        ),
        (
            "steps",
            f"{steps['total']:,} ({steps['per_epoch']:,} per epoch"
            + (f", {plan['epochs']} epochs" if plan["epochs"] else "")
            + f"), warmup {steps['warmup']:,}",
        ),
        (
            "batch",
            f"{batch['per_device']} per device × {batch['grad_accumulation']} accumulation = "
            f"{batch['effective_per_device']} per device per step; global "
            f"{batch['global']} over {batch['world_size']} process(es)",
        ),
        ("schedule", plan["schedule"]),
        ("stopping", plan["stopping"]),
        (
            "validation",
            f"every {_every(validation['every'])} (at most {validation['evaluations_at_most']}): "
            f"{', '.join(validation['metrics'])}; keeps {validation['selection']}; test "
            f"{validation['test']}",
        ),
        (
            "parameters",
            f"{params['total']:,} total, {params['trainable']:,} trainable ({params['method']}); "
            f"weights, gradients and AdamW state about {mebibytes(params['state_bytes'])}",
        ),
        (
            "tokenizer",
            f"{plan['tokenizer']['kind']} (sha256 {plan['tokenizer']['digest'][:12]}), vocabulary "
            f"{plan['tokenizer']['vocab_size']:,}, max length {plan['tokenizer']['max_length']}",
        ),
        (
            "device",
            f"{device['type']}: {device['name']}, {mebibytes(device['memory_bytes'])}"
            + (f", {device['threads']} threads" if "threads" in device else "")
            + f"; precision {plan['precision']}"
            + (", gradient checkpointing" if plan["gradient_checkpointing"] else ""),
        ),
    ]
    measured, projected = plan["measured"], plan["projected"]
    if measured:
        rows.append(
            (
                "measured",
                f"{measured['seconds_per_step'] * 1000:,.1f} ms per step (median of "
                f"{measured['steps_measured']} on a copy of the model), peak memory "
                f"{mebibytes(measured['peak_memory_bytes'])} ({measured['memory_kind']})",
            )
        )
        rows.append(
            (
                "projected",
                f"{duration(projected['wall_seconds'])} ({duration(projected['training_seconds'])} "
                f"training, {duration(projected['evaluation_seconds'])} evaluation)"
                + (f"; cost {projected['cost']:.2f}" if projected["cost"] is not None else ""),
            )
        )
    else:
        rows.append(("measured", "nothing (train.probe_steps is 0)"))
    budget = ", ".join(f"{k} {v}" for k, v in plan["budget"].items()) or "none set"
    rows.append(("budget", budget))
    width = max(len(label) for label, _ in rows)
    for label, text in rows:
        out.print(f"[bold]{label:<{width}}[/]  {text}", highlight=False)
    if plan["over_budget"]:
        for problem in plan["over_budget"]:
            out.print(f"[bold red]over budget:[/] {problem}", highlight=False)
    else:
        out.print("[green]within budget[/]", highlight=False)


def print_seed_summary(group: dict[str, Any], out: Console) -> None:
    from rich.table import Table

    table = Table(title=f"{group['group']}: seeds {', '.join(map(str, group['seeds']))}")
    for column in ("metric", "mean", "std", "min", "max"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for name, values in group["metrics"].items():
        table.add_row(name, *(_figure(values[key]) for key in ("mean", "std", "min", "max")))
    out.print(table)
    out.print(f"  summary  {group['seed_summary']}", highlight=False)


def print_comparison(found: dict[str, Any], out: Console) -> None:
    from training.plan import mebibytes

    out.print(
        f"[bold]A[/] {found['a']['run_id']}  [bold]B[/] {found['b']['run_id']}  on "
        f"{found['dataset_hash'][:16]}; differences are B − A",
        highlight=False,
    )
    settings = "; ".join(f"{k}: {a} → {b}" for k, (a, b) in found["settings"].items())
    out.print(f"settings: {settings or 'none differ'}", highlight=False)
    if found["warning"]:
        out.print(f"[bold yellow]warning:[/] {found['warning']}", highlight=False)
    loss = found["train_loss"]
    if loss["compared"]:
        out.print(
            f"train loss over {loss['compared']} logged steps: largest |B − A| "
            f"{loss['max_abs_difference']:.4g} (step {loss['max_at_step']}), mean "
            f"{loss['mean_abs_difference']:.4g}; at step {loss['end_step']} "
            f"{_signed(loss['at_end'])}"
            + (f" ({loss['relative_at_end']:+.2%})" if loss["relative_at_end"] is not None else ""),
            highlight=False,
        )
    for name, series in found["validation"].items():
        if series["compared"]:
            out.print(
                f"validation {name} at {series['compared']} evaluations: largest |B − A| "
                f"{series['max_abs_difference']:.4g}, at step {series['end_step']} "
                f"{_signed(series['at_end'])}",
                highlight=False,
            )
    for name, values in found["test"].items():
        out.print(
            f"test {name}: A {_figure(values['a'])}, B {_figure(values['b'])} "
            f"({_signed(values['difference'])})",
            highlight=False,
        )
    step, memory = found["seconds_per_step"], found["peak_memory_bytes"]
    if step["ratio"] is not None:
        out.print(
            f"time per step: A {step['a'] * 1000:,.1f} ms, B {step['b'] * 1000:,.1f} ms "
            f"(B/A {step['ratio']:.2f}×)",
            highlight=False,
        )
    if memory["ratio"] is not None:
        out.print(
            f"peak memory ({memory['kind']}): A {mebibytes(memory['a'])}, B "
            f"{mebibytes(memory['b'])} (B/A {memory['ratio']:.2f}×)",
            highlight=False,
        )
    if found.get("plot"):
        out.print(f"  plot  {found['plot']}", highlight=False)


def _every(every: int | str) -> str:
    return every if every == "epoch" else f"{every} steps"


def _figure(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _signed(value: float) -> str:
    return f"{value:+.4g}"
