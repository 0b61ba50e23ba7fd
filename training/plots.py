"""Loss curves as a PNG beside the metrics: training loss per logged step, validation loss
per evaluation, the learning rate underneath."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def loss_curves(history: list[dict[str, Any]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    train = [(e["step"], e["train_loss"]) for e in history if e.get("train_loss") is not None]
    validation = [(e["step"], e["validation_loss"]) for e in history if "validation_loss" in e]
    rates = [(e["step"], e["lr"]) for e in history if "lr" in e]
    figure, (losses, lr) = plt.subplots(
        2, 1, figsize=(7, 5), sharex=True, height_ratios=[3, 1], layout="constrained"
    )
    if train:
        losses.plot(*zip(*train, strict=True), label="train loss", color="tab:blue")
    if validation:
        losses.plot(
            *zip(*validation, strict=True), "o-", label="validation loss", color="tab:orange"
        )
    losses.set_ylabel("loss")
    losses.set_title(title)
    losses.legend()
    losses.grid(alpha=0.3)
    if rates:
        lr.plot(*zip(*rates, strict=True), color="tab:green")
    lr.set_ylabel("learning rate")
    lr.set_xlabel("optimizer step")
    lr.grid(alpha=0.3)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
