"""Training runs in the catalog: registered against the version they trained on, listed by
`catalog show` and by `catalog affected` for a deletion request."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest
from helpers import stage_version
from typer.testing import CliRunner

from data_catalog import deletions, training_runs
from data_catalog.catalog import Catalog
from flows.cli import app
from pipeline.core.errors import DataError
from pipeline.publish.reader import read_version

runner = CliRunner()


@pytest.fixture
def published(tmp_path, sms_spam):
    """A catalog with two real versions of `sms` (100 and 150 SMS messages)."""
    catalog = Catalog.open(tmp_path / "work")
    first, cfg = stage_version(tmp_path, sms_spam, stop=100)
    old, _ = catalog.commit(first, cfg.source_list)
    second, cfg = stage_version(tmp_path, sms_spam, stop=150, run_id="run-2")
    new, _ = catalog.commit(second, cfg.source_list)
    return catalog, old, new


def start(catalog, run_id, version, **changes) -> None:
    arguments = {
        "run_id": run_id,
        "dataset_hash": version.dataset_hash,
        "name": version.name,
        "objective": "classification",
        "config_hash": "c" * 64,
        "manifest_path": f"training/{run_id}/manifest.json",
        "world_size": 2,
    }
    training_runs.start(catalog, **{**arguments, **changes})


def thresher(*args):
    # wide enough that rich keeps each table row on one line
    return runner.invoke(
        app, [str(a) for a in args], catch_exceptions=False, env={"COLUMNS": "200"}
    )


def test_start_and_finish_round_trip(published):
    catalog, old, _ = published
    start(catalog, "train-1", old)
    (running,) = training_runs.for_version(catalog, old.dataset_hash)
    assert running["status"] == "running" and running["finished_at"] is None
    assert (running["name"], running["objective"], running["world_size"]) == (
        "sms",
        "classification",
        2,
    )
    assert running["manifest_path"] == "training/train-1/manifest.json"
    metrics = {"accuracy": 0.9712345, "loss": 0.08123}
    training_runs.finish(
        catalog,
        "train-1",
        "completed",
        manifest_sha256="a" * 64,
        best_step=120,
        test_metrics=metrics,
    )
    (done,) = training_runs.runs(catalog, "sms")
    assert done["status"] == "completed" and done["test_metrics"] == metrics
    assert (done["best_step"], done["manifest_sha256"], done["error"]) == (120, "a" * 64, None)
    assert done["started_at"] == running["started_at"] and done["finished_at"] is not None
    assert training_runs.runs(catalog, "other") == []
    with pytest.raises(DataError, match="completed, failed, not 'done'"):
        training_runs.finish(catalog, "train-1", "done")
    with pytest.raises(DataError, match="no training run 'nope'"):
        training_runs.finish(catalog, "nope", "failed", error="x")


def test_a_resumed_run_keeps_started_at_and_runs_again(published):
    catalog, old, _ = published
    start(catalog, "train-1", old)
    training_runs.finish(catalog, "train-1", "failed", error="CUDA out of memory")
    (failed,) = training_runs.runs(catalog)
    assert (failed["status"], failed["error"]) == ("failed", "CUDA out of memory")
    start(catalog, "train-1", old, world_size=4)
    (resumed,) = training_runs.runs(catalog)
    assert (resumed["status"], resumed["error"], resumed["finished_at"]) == ("running", None, None)
    assert resumed["started_at"] == failed["started_at"] and resumed["world_size"] == 4
    training_runs.finish(catalog, "train-1", "completed", best_step=7)
    assert training_runs.runs(catalog)[0]["status"] == "completed"


def test_a_run_needs_a_cataloged_published_version_of_its_dataset(published):
    catalog, old, new = published
    with pytest.raises(DataError, match="version '0+' is not in the catalog"):
        start(catalog, "train-1", old, dataset_hash="0" * 64)
    with pytest.raises(DataError, match="belongs to dataset 'sms', not 'mail'"):
        start(catalog, "train-1", old, name="mail")
    start(catalog, "train-1", old)
    with pytest.raises(DataError, match="a resumed run keeps its version"):
        start(catalog, "train-1", new)
    catalog.withdraw(new.dataset_hash, "a deletion request")
    with pytest.raises(DataError, match="was withdrawn \\(a deletion request\\)"):
        start(catalog, "train-2", new)
    assert [run["run_id"] for run in training_runs.runs(catalog)] == ["train-1"]


def test_for_version_lists_only_that_versions_runs(published):
    catalog, old, new = published
    start(catalog, "train-a", old)
    start(catalog, "train-b", new)
    start(catalog, "train-c", old)
    assert [r["run_id"] for r in training_runs.for_version(catalog, old.dataset_hash)] == [
        "train-a",
        "train-c",
    ]
    assert [r["run_id"] for r in training_runs.for_version(catalog, new.dataset_hash)] == [
        "train-b"
    ]


def test_catalog_show_lists_the_training_runs(published):
    catalog, old, new = published
    workdir = catalog.workdir
    start(catalog, "train-1", old)
    training_runs.finish(
        catalog, "train-1", "completed", best_step=120, test_metrics={"accuracy": 0.9712345}
    )
    text = thresher("catalog", "show", old.dataset_hash[:12], "-w", workdir)
    assert text.exit_code == 0, text.stderr
    assert "training runs" in text.stdout and "accuracy=0.9712" in text.stdout
    row = next(line for line in text.stdout.splitlines() if "train-1" in line)
    assert "classification" in row and "completed" in row and "120" in row
    assert "training/train-1/manifest.json" in text.stdout
    shown = json.loads(
        thresher("catalog", "show", old.dataset_hash, "-w", workdir, "--json").stdout
    )
    (run,) = shown["training_runs"]
    assert (run["run_id"], run["status"], run["best_step"]) == ("train-1", "completed", 120)
    assert run["test_metrics"] == {"accuracy": 0.9712345}
    assert datetime.fromisoformat(run["started_at"]) <= datetime.fromisoformat(run["finished_at"])
    untrained = thresher("catalog", "show", new.dataset_hash, "-w", workdir)
    assert "training runs: none" in untrained.stdout
    assert (
        json.loads(thresher("catalog", "show", new.dataset_hash, "-w", workdir, "--json").stdout)[
            "training_runs"
        ]
        == []
    )


def test_catalog_affected_lists_the_runs_on_a_version_that_held_the_record(published):
    catalog, old, new = published
    start(catalog, "train-old", old)
    start(catalog, "train-new", new)
    training_runs.finish(catalog, "train-new", "completed", best_step=3)
    held = set(
        pl.concat([f.collect() for f in read_version(catalog.version_path(old)).splits.values()])[
            "record_id"
        ]
    )
    late = next(
        record_id
        for split in read_version(catalog.version_path(new)).splits.values()
        for record_id in split.collect()["record_id"]
        if record_id not in held
    )
    request = deletions.record_request(catalog, "record_id", late, "the sender asked")
    (hit,) = deletions.affected(catalog, request)
    assert hit.version.dataset_hash == new.dataset_hash
    assert [run["run_id"] for run in hit.training_runs] == ["train-new"]
    result = thresher("catalog", "affected", request, "-w", catalog.workdir, "--json")
    assert result.exit_code == 1
    (line,) = map(json.loads, result.stdout.splitlines())
    assert line["dataset_hash"] == new.dataset_hash
    assert line["training_runs"] == [{"run_id": "train-new", "status": "completed"}]
    text = thresher("catalog", "affected", request, "-w", catalog.workdir)
    assert "training run train-new (classification): completed" in text.stderr
    assert "train-old" not in text.stderr
