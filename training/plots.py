"""Loss curves as a PNG beside the metrics: training loss per logged step, validation loss
per evaluation, the learning-rate schedule underneath (every step, not only the logged ones),
readable for runs of any length: markers where points are few, integer step ticks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKERS_UP_TO = 60  # points in a series: fewer get a marker each (a 2-step run is 2 dots)
SCHEDULE_POINTS = 2_000  # the schedule drawn with at most this many points


def thinned_steps(total: int, points: int = SCHEDULE_POINTS) -> list[int]:
    """About `points` of the steps 1..`total`, evenly spaced, the last one included."""
    steps = [*range(1, total + 1, max(1, -(-total // points)))]
    if steps and steps[-1] != total:
        steps.append(total)
    return steps


def curve_data(
    history: list[dict[str, Any]], schedule: list[tuple[int, float]]
) -> dict[str, list[tuple[int, float]]]:
    """The series the picture draws: (step, value) of the train and validation losses, the
    learning rate at every step (thinned to SCHEDULE_POINTS, the last step kept), and the
    rates the logged steps used."""
    thinned = [schedule[i - 1] for i in thinned_steps(len(schedule))]
    return {
        "train_loss": [
            (e["step"], e["train_loss"]) for e in history if e.get("train_loss") is not None
        ],
        "validation_loss": [
            (e["step"], e["validation_loss"]) for e in history if "validation_loss" in e
        ],
        "lr_schedule": thinned,
        "lr_logged": [(e["step"], e["lr"]) for e in history if e.get("lr") is not None],
    }


def loss_curves(
    history: list[dict[str, Any]],
    path: Path,
    title: str,
    schedule: list[tuple[int, float]] = (),
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    data = curve_data(history, list(schedule))
    figure, (losses, lr) = plt.subplots(
        2, 1, figsize=(7, 5), sharex=True, height_ratios=[3, 1], layout="constrained"
    )

    def draw(axes, points, linestyle="-", **options):
        if points:
            marker = "o" if len(points) <= MARKERS_UP_TO else None
            axes.plot(
                *zip(*points, strict=True), linestyle=linestyle, marker=marker, markersize=4,
                **options,
            )  # fmt: skip

    draw(losses, data["train_loss"], label="train loss", color="tab:blue")
    draw(losses, data["validation_loss"], label="validation loss", color="tab:orange")
    steps = [step for series in data.values() for step, _ in series]
    if len(data["train_loss"]) == 1:
        ((step, value),) = data["train_loss"]
        losses.annotate(f"{value:.4g}", (step, value), textcoords="offset points", xytext=(6, 6))
    losses.set_ylabel("loss")
    losses.set_title(title)
    if data["train_loss"] or data["validation_loss"]:
        losses.legend()
    losses.grid(alpha=0.3)
    if data["lr_schedule"]:
        lr.plot(*zip(*data["lr_schedule"], strict=True), color="tab:green", label="schedule")
    draw(lr, data["lr_logged"], linestyle="none", color="tab:green")
    lr.set_ylabel("learning rate")
    lr.set_xlabel("optimizer step")
    lr.grid(alpha=0.3)
    lr.xaxis.set_major_locator(MaxNLocator(integer=True))
    if steps:
        lr.set_xlim(0, max(steps) + max(1, max(steps) // 50))
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
