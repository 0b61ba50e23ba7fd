"""What `thresher train plan`, `train --seeds` and `train compare` print: the plan row by
row, a seed group's spread per metric, and two runs' differences (B − A)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from training.units import duration, mebibytes


def print_plan(plan: dict[str, Any], out: Console) -> None:
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
                f"training, {duration(projected['evaluation_seconds'])} evaluation, "
                f"{duration(projected['saving_seconds'])} saving)"
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
