"""A seed group: the same config and version trained under several seeds, one run after the
other (`training.run.train_seeds`), and one summary of each metric across them (mean, sample
standard deviation, min, max), so a result is not taken from one favourable seed.

Each run's manifest names the group and its summary (`seed_group`); the summary lists the
runs and is rewritten after each one, so a group that stops part way says how far it got.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from pipeline.config.train import TrainConfig
from pipeline.core.errors import ConfigError
from training import manifest

SUMMARY_FILE = "seed_summary.json"


def parse_seeds(text: str) -> list[int]:
    """`13,14,15` → [13, 14, 15]; at least two, all different."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(
            f"--seeds takes integers separated by commas (13,14,15), not {text!r}"
        ) from None
    return checked_seeds(seeds)


def checked_seeds(seeds: list[int]) -> list[int]:
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds needs two or more different seeds, each 0 or more, got {seeds}")
    return seeds


def except_seed(config: dict[str, Any]) -> str:
    """The train config's hash with the seed left out: one for every run of a group."""
    return manifest.config_hash(TrainConfig.model_validate({**config, "seed": 0}))


def record_run(group: dict[str, Any], manifest_path: Path) -> Path:
    """Add a completed run to its group's summary and rewrite it from every run's manifest
    (a manifest moved away since is left out). A run of another config is refused."""
    path = Path(group["summary"])
    earlier = json.loads(path.read_text()) if path.exists() else {"runs": []}
    runs = []
    for listed in [*(Path(run["manifest"]) for run in earlier["runs"]), manifest_path]:
        if listed not in (p for p, _ in runs) and listed.exists():
            runs.append((listed, json.loads(listed.read_text())))
    expected = earlier.get("config_hash_except_seed")
    added = except_seed(runs[-1][1]["config"])
    if expected and added != expected:
        raise ConfigError(
            f"run {runs[-1][1]['run_id']} trained another config than seed group {group['id']} "
            "(its runs must differ in the seed alone); it was not added to the group's summary"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_summary(path, group, runs)


def metric_values(record: dict[str, Any]) -> dict[str, float]:
    """A completed run's scalar results: test metrics, best validation loss, speed."""
    metrics = record["metrics"]
    values = {
        f"test_{key}": value
        for key, value in (metrics["test"] or {}).items()
        if isinstance(value, int | float) and key not in ("examples", "tokens")
    }
    values["best_validation_loss"] = metrics["best_validation_loss"]
    values["steps"] = metrics["steps"]
    values["seconds_per_step"] = (metrics.get("measured") or {}).get("seconds_per_step")
    return {key: value for key, value in values.items() if _finite(value)}


def spread(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,  # n − 1
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def write_summary(
    path: Path, group: dict[str, Any], runs: list[tuple[Path, dict[str, Any]]]
) -> Path:
    per_run = [metric_values(record) for _, record in runs]
    names = sorted({name for values in per_run for name in values})
    summary = {
        "group": group["id"],
        "seeds": group["seeds"],
        "completed": len(runs),
        "complete": len(runs) == len(group["seeds"]),
        "dataset_hash": runs[0][1]["dataset"]["hash"],
        "config_hash_except_seed": except_seed(runs[0][1]["config"]),
        "runs": [
            {
                "seed": record["config"]["seed"],
                "run_id": record["run_id"],
                "manifest": str(manifest_path),
                "metrics": values,
            }
            for (manifest_path, record), values in zip(runs, per_run, strict=True)
        ],
        "metrics": {
            name: spread([values[name] for values in per_run if name in values]) for name in names
        },
        "std": "sample standard deviation (n − 1)",
    }
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(manifest.strict_json(summary, indent=2) + "\n")
    temporary.replace(path)
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
