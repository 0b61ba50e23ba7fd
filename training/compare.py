"""Two completed runs side by side: a parity check of one setting (precision, gradient
checkpointing, accumulation, seed) on the same dataset version.

Differences are B − A: the train loss at every step both logged (largest, mean and final
difference), the validation metrics at every evaluation both made, the test metrics, and
what each run measured (seconds per step, peak memory). Runs on different versions are
refused; runs that differ in more than one training setting are compared with a warning
naming them, since a difference cannot then be put down to one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.errors import DataError
from training import manifest


def open_run(ref: str | Path, workdir: Path | None) -> tuple[Path, dict[str, Any]]:
    """A run folder, or a run id under `<workdir>/training`; its completed manifest."""
    folder = Path(ref)
    if not (folder / manifest.MANIFEST_FILE).exists() and workdir is not None:
        folder = workdir / "training" / str(ref)
    path = folder / manifest.MANIFEST_FILE
    if not path.exists():
        where = (
            f" or under {workdir / 'training'}"
            if workdir
            else " (give --config to look up run ids)"
        )
        raise DataError(f"no training run {ref}: no {manifest.MANIFEST_FILE} there{where}")
    record = json.loads(path.read_text())
    if record["status"] != "completed":
        raise DataError(
            f"run {record['run_id']} is {record['status']}; compare completed runs "
            f"(resume it with `thresher train --config … --resume {folder}`)"
        )
    return folder, record


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(flatten(item, f"{prefix}{key}."))
        return found
    return {prefix.rstrip("."): value}


def setting_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[Any]]:
    """Dotted setting → [A's value, B's value], for every train setting that differs."""
    flat_a, flat_b = flatten(a), flatten(b)
    return {
        key: [flat_a.get(key), flat_b.get(key)]
        for key in sorted(flat_a.keys() | flat_b.keys())
        if flat_a.get(key) != flat_b.get(key)
    }


def _series(history: list[dict[str, Any]], key: str) -> dict[int, float]:
    return {
        entry["step"]: entry[key] for entry in history if isinstance(entry.get(key), int | float)
    }


def _difference(a: dict[int, float], b: dict[int, float]) -> dict[str, Any]:
    steps = sorted(a.keys() & b.keys())
    rows = [{"step": s, "a": a[s], "b": b[s], "difference": b[s] - a[s]} for s in steps]
    if not rows:
        return {"steps": [], "compared": 0}
    gaps = [abs(row["difference"]) for row in rows]
    end = rows[-1]
    return {
        "compared": len(rows),
        "max_abs_difference": max(gaps),
        "max_at_step": rows[gaps.index(max(gaps))]["step"],
        "mean_abs_difference": sum(gaps) / len(gaps),
        "at_end": end["difference"],
        "relative_at_end": end["difference"] / end["a"] if end["a"] else None,
        "end_step": end["step"],
        "steps": rows,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def compare(folder_a: Path, a: dict[str, Any], folder_b: Path, b: dict[str, Any]) -> dict:
    if a["dataset"]["hash"] != b["dataset"]["hash"]:
        raise DataError(
            f"run {a['run_id']} trained on version {a['dataset']['hash'][:12]} and run "
            f"{b['run_id']} on {b['dataset']['hash'][:12]}: a parity check compares runs on "
            "the same version; train both on one (--dataset HASH)"
        )
    differences = setting_differences(a["config"], b["config"])
    training = {
        k: v for k, v in differences.items() if k.split(".")[0] not in manifest.NOT_TRAINING
    }
    history_a, history_b = a["metrics"]["history"], b["metrics"]["history"]
    validation_keys = sorted(
        {key for entry in history_a + history_b for key in entry if key.startswith("validation_")}
        - {"validation_f1_per_label", "validation_examples", "validation_tokens"}
    )
    test_a, test_b = a["metrics"]["test"] or {}, b["metrics"]["test"] or {}
    measured_a = a["metrics"].get("measured") or {}
    measured_b = b["metrics"].get("measured") or {}
    return {
        "a": {"run_id": a["run_id"], "run_dir": str(folder_a)},
        "b": {"run_id": b["run_id"], "run_dir": str(folder_b)},
        "dataset_hash": a["dataset"]["hash"],
        "settings": training,
        "other_settings": {k: v for k, v in differences.items() if k not in training},
        "warning": None
        if len(training) <= 1
        else f"the runs differ in {len(training)} training settings ({', '.join(training)}): "
        "a difference cannot be put down to one of them",
        "train_loss": _difference(
            _series(history_a, "train_loss"), _series(history_b, "train_loss")
        ),
        "validation": {
            key.removeprefix("validation_"): _difference(
                _series(history_a, key), _series(history_b, key)
            )
            for key in validation_keys
        },
        "test": {
            key: {"a": test_a[key], "b": test_b[key], "difference": test_b[key] - test_a[key]}
            for key in sorted(test_a.keys() & test_b.keys())
            if isinstance(test_a[key], int | float) and isinstance(test_b[key], int | float)
        },
        "best_validation_loss": {
            "a": a["metrics"]["best_validation_loss"],
            "b": b["metrics"]["best_validation_loss"],
        },
        "seconds_per_step": {
            "a": measured_a.get("seconds_per_step"),
            "b": measured_b.get("seconds_per_step"),
            "ratio": _ratio(measured_a.get("seconds_per_step"), measured_b.get("seconds_per_step")),
        },
        "peak_memory_bytes": {
            "a": measured_a.get("peak_memory_bytes"),
            "b": measured_b.get("peak_memory_bytes"),
            "ratio": _ratio(
                measured_a.get("peak_memory_bytes"), measured_b.get("peak_memory_bytes")
            ),
            "kind": measured_a.get("memory_kind"),
        },
    }


def plot(comparison: dict[str, Any], path: Path) -> Path:
    """Both train-loss curves, and B − A per step beneath them."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    rows = comparison["train_loss"]["steps"]
    steps = [row["step"] for row in rows]
    figure, (curves, gaps) = pyplot.subplots(
        2, 1, figsize=(8, 5.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    label = comparison["settings"] or {"run": ["A", "B"]}
    names = [
        ", ".join(f"{key} {values[index]}" for key, values in label.items()) for index in (0, 1)
    ]
    curves.plot(steps, [row["a"] for row in rows], label=f"A: {names[0]}", linewidth=1.2)
    curves.plot(steps, [row["b"] for row in rows], label=f"B: {names[1]}", linewidth=1.2)
    curves.set_ylabel("train loss")
    curves.legend()
    curves.set_title(
        f"{comparison['a']['run_id']} (A) vs {comparison['b']['run_id']} (B)", fontsize=9
    )
    gaps.axhline(0, color="grey", linewidth=0.8)
    gaps.plot(steps, [row["difference"] for row in rows], color="tab:red", linewidth=1.0)
    gaps.set_ylabel("B − A")
    gaps.set_xlabel("optimizer step")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return path
