"""The loss-curve picture's data: readable for a run of two steps and of a hundred thousand."""

from __future__ import annotations

import pytest

from training.loop import lr_multiplier
from training.plots import MARKERS_UP_TO, SCHEDULE_POINTS, curve_data, loss_curves


def _schedule(total: int, warmup: int) -> list[tuple[int, float]]:
    return [
        (step, 1e-4 * lr_multiplier(step - 1, warmup, total, 0.1)) for step in range(1, total + 1)
    ]


def test_a_short_run_draws_every_point_and_the_whole_schedule(tmp_path):
    history = [
        {"step": 2, "epoch": 0, "train_loss": 0.61, "lr": 1e-4},
        {"step": 2, "epoch": 0, "validation_loss": 0.55, "validation_accuracy": 0.8},
    ]
    data = curve_data(history, _schedule(2, 1))
    assert data["train_loss"] == [(2, 0.61)] and data["validation_loss"] == [(2, 0.55)]
    # the schedule at every step, not only where a log entry recorded it
    assert data["lr_schedule"] == [(1, 0.0), (2, 1e-4)]
    assert data["lr_logged"] == [(2, 1e-4)]
    assert all(isinstance(step, int) for series in data.values() for step, _ in series)
    png = loss_curves(history, tmp_path / "short.png", "short run", _schedule(2, 1))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_long_run_thins_the_schedule_and_keeps_its_last_step():
    schedule = _schedule(100_000, 1_000)
    rates = dict(schedule)
    history = [{"step": s, "train_loss": 1 / s, "lr": rates[s]} for s in range(100, 100_001, 100)]
    data = curve_data(history, schedule)
    assert len(data["lr_schedule"]) <= SCHEDULE_POINTS + 1
    assert data["lr_schedule"][0] == (1, 0.0) and data["lr_schedule"][-1] == schedule[-1]
    assert data["lr_schedule"][-1][1] == pytest.approx(1e-5)  # cosine decay to min_lr_ratio
    assert len(data["train_loss"]) == 1_000 > MARKERS_UP_TO
