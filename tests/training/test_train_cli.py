"""`thresher train` and the Prefect `train` flow: the same run, summarized."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import thresher
from prefect.logging import disable_run_logger
from trainkit import run_manifest, tiny

from data_catalog import training_runs
from flows.train import train_flow
from training.loop import Trainer, TrainingError


def test_thresher_train_json_prints_one_summary(project):
    measured = project.write_config(tiny(probe_steps=3), "measured.yaml")
    result = thresher("train", "--config", measured, "--json")
    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.splitlines()
    summary = json.loads(line)
    assert summary["status"] == "completed" and summary["objective"] == "causal_lm"
    assert summary["run_id"].startswith("train-")
    assert summary["dataset_hash"] == project.dataset_hash
    assert (summary["steps"], summary["best_step"], summary["stopped_early"]) == (20, 20, False)
    assert set(summary["test"]) == {"loss", "perplexity", "tokens"}
    assert summary["test"]["perplexity"] > 1
    for key in ("run_dir", "manifest", "model", "curves"):
        assert Path(summary[key]).exists(), key
    assert Path(summary["run_dir"]).name == summary["run_id"]
    manifest = run_manifest(Path(summary["run_dir"]))
    assert manifest["metrics"]["test"]["loss"] == summary["test"]["loss"]
    assert "trained causal_lm" in result.stderr and "test: loss" in result.stderr
    took = summary["took"]
    assert took["wall_seconds"] > 0 and took["projected_seconds"] > 0
    assert took["seconds_per_step"] == manifest["metrics"]["measured"]["seconds_per_step"]
    assert "took: " in result.stderr and "(planned " in result.stderr
    (row,) = training_runs.runs(project.catalog)
    assert row["run_id"] == summary["run_id"] and row["status"] == "completed"


def test_thresher_train_on_a_named_version(project):
    result = thresher(
        "train", "-c", project.config, "--dataset", project.dataset_hash[:8], "--json"
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["dataset_hash"] == project.dataset_hash
    unknown = thresher("train", "-c", project.config, "--dataset", "beef0000")
    assert unknown.exit_code == 2 and "no version 'beef0000'" in unknown.stderr


def test_a_missing_config_exits_2_naming_the_file(tmp_path):
    missing = tmp_path / "nowhere" / "thresher.yaml"
    result = thresher("train", "--config", missing, "--json")
    assert result.exit_code == 2
    assert str(missing) in result.stderr.replace("\n", "") and "no such file" in result.stderr
    assert result.stdout == ""


def test_an_invalid_train_section_exits_2(project):
    config = project.write_config(tiny(batch_size=0), "bad.yaml")
    result = thresher("train", "--config", config)
    assert result.exit_code == 2
    assert "train.batch_size" in result.stderr and "bad.yaml" in result.stderr
    config = project.write_config({"objective": "classification", "tokenizer": {"kind": "bpe"}})
    result = thresher("train", "--config", config)
    assert result.exit_code == 2 and "bpe is for causal_lm" in result.stderr


def test_thresher_train_resumes_a_run(project, monkeypatch):
    config = project.write_config(tiny(max_steps=12, checkpoint_every=5), "resume.yaml")
    save = Trainer.save_checkpoint

    def save_then_crash(self):
        save(self)
        raise TrainingError("power cut")

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "save_checkpoint", save_then_crash)
        crashed = thresher("train", "--config", config)
    assert crashed.exit_code == 2 and "power cut" in crashed.stderr
    (run_dir,) = (project.workdir / "training").iterdir()
    assert run_manifest(run_dir)["status"] == "failed"
    result = thresher("train", "--config", config, "--resume", run_dir, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["run_id"], summary["steps"]) == (run_dir.name, 12)
    assert run_manifest(run_dir)["resumed_from"] == [str(run_dir / "checkpoints/step-00000005.pt")]


def test_the_prefect_flow_returns_the_summary(project):
    # `.fn` is the flow's own function, run without a Prefect server; the flow logs through
    # get_run_logger, which needs a flow run context unless run loggers are disabled.
    with disable_run_logger():
        summary = train_flow.fn(config_path=str(project.config))
    assert summary["status"] == "completed" and summary["dataset_hash"] == project.dataset_hash
    assert Path(summary["manifest"]).exists() and Path(summary["model"]).exists()
    assert run_manifest(Path(summary["run_dir"]))["run_id"] == summary["run_id"]
    assert set(summary["test"]) == {"loss", "perplexity", "tokens"}
