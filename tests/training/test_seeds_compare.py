"""Several seeds summarized as one result, and two runs compared setting by setting."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
from helpers import thresher
from trainkit import run_manifest, same_weights, tiny, weights

from flows.report import _training_runs
from pipeline.core.errors import ConfigError, DataError
from training import compare
from training.run import MODEL_FILE, train
from training.seeds import parse_seeds

pytestmark = pytest.mark.xdist_group("seed_runs")  # the runs below are made once per module

FAST = {"max_steps": 12, "eval_every": 6, "checkpoint_every": 100, "log_every": 2}


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory, sms_spam):
    """`thresher train --seeds 13,14` on 200 SMS, and seed 13 once more in bf16."""
    from trainkit import sms_project

    project = sms_project(tmp_path_factory.mktemp("seeds"), sms_spam, 200, tiny(**FAST))
    result = thresher("train", "--config", project.config, "--seeds", "13,14", "--json")
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    bf16 = train(project.write_config(tiny(**FAST, precision="bf16"), "bf16.yaml"))
    return project, lines, bf16, result.stderr


def test_each_seed_trains_once_and_one_summary_spans_them(seed_runs):
    project, lines, _, shown = seed_runs
    *runs, summary = lines
    assert [run["status"] for run in runs] == ["completed", "completed"]
    records = [run_manifest(project.workdir / "training" / run["run_id"]) for run in runs]
    assert [record["config"]["seed"] for record in records] == [13, 14]
    assert not same_weights(
        *(weights(project.workdir / "training" / r["run_id"] / MODEL_FILE) for r in runs)
    )
    group = records[0]["seed_group"]
    assert group == records[1]["seed_group"] and group["seeds"] == [13, 14]
    assert summary["seed_summary"] == group["summary"]
    assert json.loads(Path(group["summary"]).read_text())["complete"] is True
    for name in ("test_loss", "test_perplexity", "best_validation_loss"):
        values = [
            record["metrics"]["test"][name.removeprefix("test_")]
            if name.startswith("test_")
            else record["metrics"][name]
            for record in records
        ]
        assert summary["metrics"][name] == {
            "mean": pytest.approx(statistics.fmean(values)),
            "std": pytest.approx(statistics.stdev(values)),
            "min": min(values),
            "max": max(values),
            "n": 2,
        }
    assert [run["seed"] for run in summary["runs"]] == [13, 14]
    assert "test_loss" in shown and "seeds 13, 14" in shown


def test_the_report_lists_each_run_with_its_seed_and_the_group_summary(seed_runs):
    """What the report's training section shows (the demo test renders the section)."""
    project, lines, bf16, _ = seed_runs
    *runs, summary = lines
    found, groups = _training_runs(project.catalog, project.dataset_hash)
    assert [(row["run_id"], row["seed"], row["seed_group"]) for row in found] == [
        (runs[0]["run_id"], 13, summary["group"]),
        (runs[1]["run_id"], 14, summary["group"]),
        (bf16.run_id, 13, None),
    ]
    (group,) = groups
    assert group["summary"] == summary["seed_summary"]
    assert group["metrics"] == summary["metrics"] and group["complete"] is True


def test_seeds_must_be_two_or_more_different_integers():
    assert parse_seeds("13, 14,15") == [13, 14, 15]
    for bad in ("13", "13,13", "a,b"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)


def test_compare_fp32_with_bf16(seed_runs, tmp_path):
    project, lines, bf16, _ = seed_runs
    fp32_dir = project.workdir / "training" / lines[0]["run_id"]
    found = compare.compare(
        *compare.open_run(fp32_dir, None), *compare.open_run(bf16.run_id, project.workdir)
    )
    assert found["settings"] == {"precision": ["auto", "bf16"]} and found["warning"] is None
    history_a = run_manifest(fp32_dir)["metrics"]["history"]
    history_b = bf16.manifest["metrics"]["history"]
    losses_a = {e["step"]: e["train_loss"] for e in history_a if "train_loss" in e}
    losses_b = {e["step"]: e["train_loss"] for e in history_b if "train_loss" in e}
    loss = found["train_loss"]
    assert loss["compared"] == 6 and [row["step"] for row in loss["steps"]] == sorted(losses_a)
    assert loss["at_end"] == losses_b[12] - losses_a[12]
    assert loss["max_abs_difference"] == max(abs(losses_b[s] - losses_a[s]) for s in losses_a)
    # bf16 autocast on the CPU follows fp32 closely on this model, but not bit for bit
    assert 0 < loss["max_abs_difference"] < 0.05
    assert found["validation"]["loss"]["compared"] == 2
    test_a, test_b = run_manifest(fp32_dir)["metrics"]["test"], bf16.manifest["metrics"]["test"]
    assert found["test"]["loss"]["difference"] == test_b["loss"] - test_a["loss"]
    assert found["seconds_per_step"]["ratio"] > 0 and found["peak_memory_bytes"]["a"] > 0
    result = thresher(
        "train", "compare", lines[0]["run_id"], bf16.run_id, "--config", project.config,
        "--plot", tmp_path / "parity.png",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "settings: precision: auto → bf16" in result.stdout
    assert "train loss over 6 logged steps" in result.stdout
    assert (tmp_path / "parity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_refuses_other_versions_and_warns_of_several_settings(seed_runs, tmp_path):
    project, lines, bf16, _ = seed_runs
    seed_13 = project.workdir / "training" / lines[0]["run_id"]
    other = tmp_path / "other"
    shutil.copytree(bf16.run_dir, other)
    record = run_manifest(other)
    record["config"]["lr"] = 1.0
    (other / "run_manifest.json").write_text(json.dumps(record))
    found = compare.compare(*compare.open_run(seed_13, None), *compare.open_run(other, None))
    assert set(found["settings"]) == {"lr", "precision"}
    assert found["warning"].startswith("the runs differ in 2 training settings (lr, precision)")
    record["dataset"]["hash"] = "0" * 64
    (other / "run_manifest.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match="a parity check compares runs on the same version"):
        compare.compare(*compare.open_run(seed_13, None), *compare.open_run(other, None))
    missing = thresher("train", "compare", "train-nothing", lines[0]["run_id"])
    assert missing.exit_code == 2 and "no training run train-nothing" in missing.stderr


def test_the_train_flow_runs_a_seed_group(project):
    from prefect.logging import disable_run_logger

    from flows.train import train_flow

    config = project.write_config(tiny(max_steps=4, eval_every=2, checkpoint_every=100))
    with disable_run_logger():
        found = train_flow.fn(config_path=str(config), seeds=[7, 8])
    assert [run["status"] for run in found["runs"]] == ["completed", "completed"]
    summary = json.loads(Path(found["seed_summary"]).read_text())
    assert summary["seeds"] == [7, 8] and summary["metrics"]["steps"]["mean"] == 4
    assert [run["run_id"] for run in summary["runs"]] == [run["run_id"] for run in found["runs"]]


def test_a_stopped_run_of_a_group_resumes_under_its_seed_and_completes_the_summary(
    project, monkeypatch
):
    from training.loop import Trainer, TrainingError

    config = project.write_config(tiny(max_steps=8, eval_every=4, checkpoint_every=4))
    save, saved = Trainer.save_checkpoint, []

    def crash_in_the_second_run(self):
        path = save(self)
        saved.append(self.cfg.seed)
        if self.cfg.seed == 6:
            raise TrainingError("power cut")
        return path

    monkeypatch.setattr(Trainer, "save_checkpoint", crash_in_the_second_run)
    stopped = thresher("train", "--config", config, "--seeds", "5,6")
    assert stopped.exit_code == 2 and "power cut" in stopped.stderr
    runs = sorted(
        (project.workdir / "training").glob("train-*"),
        key=lambda run: run_manifest(run)["config"]["seed"],
    )
    records = [run_manifest(run) for run in runs]
    assert [(r["config"]["seed"], r["status"]) for r in records] == [
        (5, "completed"),
        (6, "failed"),
    ]
    group = records[0]["seed_group"]
    partial = json.loads(Path(group["summary"]).read_text())
    assert (partial["completed"], partial["complete"]) == (1, False)
    monkeypatch.setattr(Trainer, "save_checkpoint", save)
    resumed = thresher("train", "--config", config, "--resume", runs[1], "--json")
    assert resumed.exit_code == 0, resumed.stderr
    record = run_manifest(runs[1])
    assert record["config"]["seed"] == 6 and record["seed_group"] == group
    summary = json.loads(Path(group["summary"]).read_text())
    assert summary["complete"] is True and [r["seed"] for r in summary["runs"]] == [5, 6]
    assert summary["metrics"]["steps"] == {"mean": 8, "std": 0.0, "min": 8, "max": 8, "n": 2}


def test_misused_train_options_exit_2(project):
    both = thresher("train", "--config", project.config, "--seeds", "1,2", "--resume", project.root)
    assert both.exit_code == 2 and "resume one run of a seed group" in both.stderr
    assert thresher("train").exit_code == 2
    misplaced = thresher("train", "--json", "plan", "--config", project.config)
    assert misplaced.exit_code == 2 and "put --json after `plan`" in misplaced.stderr
    negative = thresher("train", "--config", project.config, "--seeds", "-1,2")
    assert negative.exit_code == 2 and "each 0 or more" in negative.stderr


def test_a_run_of_another_config_is_not_added_to_a_group(seed_runs):
    from training.seeds import record_run

    project, lines, bf16, _ = seed_runs
    group = run_manifest(project.workdir / "training" / lines[0]["run_id"])["seed_group"]
    before = Path(group["summary"]).read_text()
    with pytest.raises(ConfigError, match="trained another config than seed group"):
        record_run(group, bf16.manifest_path)  # bf16: not the group's precision
    assert Path(group["summary"]).read_text() == before
