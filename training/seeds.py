"""A seed group: the same config and version trained under several seeds, one run after the
other, and one summary of each metric across them (mean, sample standard deviation, min,
max), so a result is not taken from one favourable seed.

Each run's manifest names the group and its summary (`seed_group`); the summary lists the
runs and is rewritten after each one, so a group that stops part way says how far it got.
"""

from __future__ import annotations

import math
import secrets
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from data_catalog.catalog import Catalog
from pipeline.config import load_run_config
from pipeline.core.errors import ConfigError
from training import manifest
from training.run import TrainResult, train

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
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds needs two or more different seeds, got {seeds}")
    return seeds


def train_seeds(
    config_path: str | Path, dataset: str, seeds: list[int]
) -> tuple[list[TrainResult], Path]:
    """Train the config under each seed on one version; return the runs and the summary."""
    checked_seeds(seeds)
    run_config = load_run_config(config_path)
    workdir = Path(run_config.workdir).resolve()
    dataset_hash = Catalog.open(workdir).version(dataset, run_config.name).dataset_hash
    group_id = f"seeds-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    folder = workdir / "training" / group_id
    folder.mkdir(parents=True)
    group = {"id": group_id, "seeds": seeds, "summary": str(folder / SUMMARY_FILE)}
    results: list[TrainResult] = []
    for seed in seeds:
        results.append(train(config_path, dataset_hash, seed=seed, seed_group=group))
        write_summary(folder, group, results)
    return results, folder / SUMMARY_FILE


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


def write_summary(folder: Path, group: dict[str, Any], results: list[TrainResult]) -> Path:
    records = [result.manifest for result in results]
    per_run = [metric_values(record) for record in records]
    names = sorted({name for values in per_run for name in values})
    summary = {
        "group": group["id"],
        "seeds": group["seeds"],
        "completed": len(records),
        "complete": len(records) == len(group["seeds"]),
        "dataset_hash": records[0]["dataset"]["hash"],
        "config_hash_except_seed": manifest.json_hash(
            {key: value for key, value in records[0]["config"].items() if key != "seed"}
        ),
        "runs": [
            {
                "seed": record["config"]["seed"],
                "run_id": record["run_id"],
                "manifest": str(result.manifest_path),
                "metrics": values,
            }
            for result, record, values in zip(results, records, per_run, strict=True)
        ],
        "metrics": {
            name: spread([values[name] for values in per_run if name in values]) for name in names
        },
        "std": "sample standard deviation (n − 1)",
    }
    path = folder / SUMMARY_FILE
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(manifest.strict_json(summary, indent=2) + "\n")
    temporary.replace(path)
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
