"""Resuming a run that failed or was killed: the next run of the same inputs, config, code
and catalog state reuses the steps that finished, with their records, events and stats.

Each step that finishes (ingest, a stage, a gate) writes `steps/<step>.json` in its run
folder: its result (paths inside the run folder, stats, how its parts ran). A run that ends
without a version keeps its ledger parts beside those markers and the output of the last
stage that finished (each earlier one is removed once the stage after it and its gate are
done), except ingest's records (unscreened text: they may hold secrets), so that ingest is
redone unless governance finished. The stage that failed is redone whole. The next run of the same dataset name takes them over when it reads
what that run read, as its `resume.json` records it: flows/unchanged.fingerprint, the one
statement of what a run depends on (the config, the code and packages, every source file's
content, the parent version, the deletion requests, the review decisions, the test lock,
the frozen cutoffs and the protected evaluation sets), compared as `thresher run` compares
it with the latest version's (a file whose size and modification time are unchanged keeps
its recorded content hash; any other is hashed). The kept files of any other earlier run of
that name are deleted then. Two runs started together never share one: each first
claims a kept run by renaming its markers' folder, which only one rename can do. Every
decision depends only on those, so a resumed run publishes the dataset a fresh run would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from flows import unchanged
from flows.run_plan import RunPlan

KEY_FILE = "resume.json"
STEPS = "steps"
KEPT = ("stages", "ledger-parts", STEPS)  # what a run without a version keeps for the next


def start(plan: RunPlan, inputs: dict[str, Any] | None) -> None:
    """Record what this run reads (flows/unchanged.fingerprint; None when that cannot be
    known), for a later run to compare with its own."""
    (plan.run_dir / KEY_FILE).write_text(
        json.dumps({"name": plan.config.name, "inputs": inputs}, default=str) + "\n"
    )


def save(plan: RunPlan, step: str, result: dict[str, Any]) -> None:
    """Mark a step finished, with its result; written last, so a marker means done."""
    folder = plan.run_dir / STEPS
    folder.mkdir(exist_ok=True)
    target = folder / _file(step)
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(_relative(result, plan.run_dir), default=str))
    partial.replace(target)


def finished(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The finished steps of a run folder, by step name, with paths made absolute again."""
    return _markers(run_dir / STEPS, run_dir)


def _markers(folder: Path, run_dir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for marker in sorted(folder.glob("*.json")):
        found[marker.stem.replace("-", " ")] = _absolute(json.loads(marker.read_text()), run_dir)
    return found


def keep_for_resume(run_dir: Path) -> None:
    """A run ended without a version: keep what the next run may reuse (the output of the
    last stage that finished: flows/curate.py removed the others' once spent); never the
    ingested records (unscreened text), nor the intermediate files of the stage that failed
    (keys, exchanges, decisions: the next run redoes that stage whole), nor a run folder with
    no finished step."""
    steps = finished(run_dir)
    if not steps or not (run_dir / KEY_FILE).exists():
        discard(run_dir)
        return
    shutil.rmtree(run_dir / "stages" / "ingest", ignore_errors=True)
    for spent in (run_dir / "stages").glob("*-*"):  # the failed stage's: it is redone whole
        shutil.rmtree(spent, ignore_errors=True)
    if "govern" not in steps:  # governance must read the ingested records again
        (run_dir / STEPS / "ingest.json").unlink(missing_ok=True)


def discard(run_dir: Path) -> None:
    for name in KEPT:
        shutil.rmtree(run_dir / name, ignore_errors=True)


def adopt(plan: RunPlan, order: list[tuple[str, str | None]]) -> tuple[str | None, dict]:
    """Take over the finished steps of the newest earlier run of this dataset that read what
    this one reads (its records, ledger parts and markers move into this run's folder), and
    delete the kept files of every other. `order` lists the steps in run order, each with the
    name of its ledger part (None for a gate). Returns that run's id (None when there is
    none) and the steps taken over: the finished ones up to the first that is not."""
    inputs = json.loads((plan.run_dir / KEY_FILE).read_text())["inputs"]
    adopted, steps = None, {}
    for run_dir in sorted((plan.run_dir.parent).iterdir(), reverse=True):
        if run_dir == plan.run_dir or not (run_dir / STEPS).is_dir():
            continue
        if (run_dir / "owner.json").exists():  # still running (the sweep removed dead owners)
            continue
        kept = json.loads((run_dir / KEY_FILE).read_text()) if (run_dir / KEY_FILE).exists() else {}
        if kept.get("name") != plan.config.name:
            continue
        claimed = _claim(run_dir, plan.run_dir)
        if claimed is None:  # another run started beside this one took it first
            continue
        same = inputs is not None and kept.get("inputs") is not None
        if adopted is None and same and not unchanged.differences(kept["inputs"], inputs):
            steps = _move(run_dir, claimed, plan.run_dir, order)
            adopted = run_dir.name if steps else None
        shutil.rmtree(claimed, ignore_errors=True)
        discard(run_dir)
    return adopted, steps


def _claim(old: Path, new: Path) -> Path | None:
    """Take an earlier run's markers for this run alone: two runs that start together may
    both find it, and only one rename of its markers' folder succeeds."""
    claimed = old / f"{STEPS}-taken-by-{new.name}"
    try:
        (old / STEPS).rename(claimed)
    except FileNotFoundError:
        return None
    return claimed


def _move(
    old: Path, markers: Path, new: Path, order: list[tuple[str, str | None]]
) -> dict[str, dict]:
    """Move a run's finished steps (marker, records, events, saved gate) into another, in run
    order, up to the first step not finished or whose events are not all there. `markers`
    is the old run's claimed markers' folder."""
    done = _markers(markers, old)
    for folder in (STEPS, "stages", "ledger-parts", "gates"):
        (new / folder).mkdir(exist_ok=True)
    for step, part in order:
        if step not in done:
            break
        moved = [markers / _file(step)]
        if step.endswith(" gate"):
            moved += (old / "gates").glob(f"*-{step.removesuffix(' gate')}.json")
        else:
            events = [p for p in (old / "ledger-parts").glob(f"{part}*.parquet")
                      if p.stem == part or p.stem.startswith(f"{part}-")]  # fmt: skip
            accounting = done[step].get("parts", {})
            if len(events) != accounting.get("ledger_parts", accounting.get("parts", 1)):
                break  # killed while its events were consolidated or written
            moved += [*events, old / "stages" / step]
        for path in moved:
            if path.exists():
                folder = STEPS if path.parent == markers else path.parent.name
                path.rename(new / folder / path.name)
    taken = finished(new)
    return {step: taken[step] for step, _ in order if step in taken}


def _file(step: str) -> str:
    return f"{step.replace(' ', '-')}.json"  # stage names hold underscores, never dashes


def _relative(value: Any, root: Path) -> Any:
    if isinstance(value, dict):
        return {key: _relative(item, root) for key, item in value.items()}
    if isinstance(value, str) and value.startswith(f"{root}/"):
        return {"$run": value.removeprefix(f"{root}/")}
    return value


def _absolute(value: Any, root: Path) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$run"}:
            return str(root / value["$run"])
        return {key: _absolute(item, root) for key, item in value.items()}
    return value
