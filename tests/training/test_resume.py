"""Checkpoints resume exactly: a run killed mid-way and resumed ends with the weights of the
run that was never interrupted, bit for bit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from trainkit import run_manifest, same_weights, tiny, weights

import training
from data_catalog import training_runs
from pipeline.core.errors import DataError
from training.loop import Trainer, TrainingError
from training.run import train

REPO = Path(training.__file__).resolve().parents[1]
LONG = tiny(max_steps=200, checkpoint_every=10, eval_every=50, log_every=50)


def history_without_timings(result) -> list[dict]:
    return [
        {k: v for k, v in entry.items() if k != "samples_per_s"}
        for entry in result.manifest["metrics"]["history"]
    ]


def kill_after_checkpoint(config: Path, workdir: Path, logs: Path, step: int) -> Path:
    """Start `python -m training`, SIGKILL it once checkpoint `step` exists; its run folder."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(logs, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "training", "--config", str(config)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 240
        found: list[Path] = []
        while not found and process.poll() is None and time.monotonic() < deadline:
            found = list(workdir.glob(f"training/*/checkpoints/step-{step:08d}.pt"))
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert found, f"no checkpoint at step {step}:\n{logs.read_text()[-3000:]}"
    assert process.returncode == -signal.SIGKILL, logs.read_text()[-3000:]
    return found[0].parent.parent


def test_a_killed_run_resumes_to_the_uninterrupted_weights(project, tmp_path):
    config = project.write_config(LONG, "long.yaml")
    run_dir = kill_after_checkpoint(config, project.workdir, tmp_path / "killed.log", 10)
    killed = run_manifest(run_dir)
    assert killed["status"] == "running"
    assert not (run_dir / "model.pt").exists()
    (row,) = training_runs.runs(project.catalog)
    assert (row["run_id"], row["status"]) == (run_dir.name, "running")
    latest = sorted((run_dir / "checkpoints").glob("step-*.pt"))[-1]
    assert latest.name < "step-00000200.pt"

    resumed = train(config, resume=run_dir)
    uninterrupted = train(config)

    assert resumed.run_id == run_dir.name and resumed.run_dir == run_dir
    assert resumed.manifest["resumed_from"] == [str(latest)]
    assert resumed.manifest["started_at"] == killed["started_at"]
    assert resumed.manifest["status"] == "completed" and resumed.manifest["metrics"]["steps"] == 200
    assert resumed.manifest["metrics"]["epochs_completed"] >= 2  # resumed across epoch ends
    final = weights(run_dir / "model.pt")
    assert same_weights(final, weights(uninterrupted.run_dir / "model.pt"))
    assert history_without_timings(resumed) == history_without_timings(uninterrupted)
    assert resumed.manifest["metrics"]["test"] == uninterrupted.manifest["metrics"]["test"]
    assert resumed.manifest["tokenizer"]["digest"] == uninterrupted.manifest["tokenizer"]["digest"]
    rows = {r["run_id"]: r for r in training_runs.runs(project.catalog)}
    assert len(rows) == 2 and {r["status"] for r in rows.values()} == {"completed"}
    assert rows[run_dir.name]["started_at"] == row["started_at"]


class Crash(Exception):
    pass


@pytest.fixture
def crashed(project, monkeypatch):
    """A run that crashed right after writing its checkpoint at step 10: (config, run folder)."""
    save = Trainer.save_checkpoint

    def save_then_crash(self):
        path = save(self)
        if self.progress.step == 10:
            raise Crash("power cut")
        return path

    config = project.write_config(tiny(max_steps=30, eval_every=5), "crash.yaml")
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "save_checkpoint", save_then_crash)
        with pytest.raises(Crash):
            train(config)
    (run_dir,) = (project.workdir / "training").iterdir()
    assert run_manifest(run_dir)["status"] == "failed"
    return config, run_dir


def test_a_crashed_run_resumes_in_process_to_the_same_weights(project, crashed):
    config, run_dir = crashed
    resumed = train(config, resume=run_dir)
    assert resumed.manifest["resumed_from"] == [str(run_dir / "checkpoints" / "step-00000010.pt")]
    whole = train(config)
    assert same_weights(weights(run_dir / "model.pt"), weights(whole.run_dir / "model.pt"))
    assert history_without_timings(resumed) == history_without_timings(whole)
    (row,) = [r for r in training_runs.runs(project.catalog) if r["run_id"] == run_dir.name]
    assert (row["status"], row["error"]) == ("completed", None)


def test_resuming_a_completed_run_is_refused(project):
    done = train(project.config)
    with pytest.raises(DataError, match="has completed; there is nothing to resume"):
        train(project.config, resume=done.run_dir)
    with pytest.raises(DataError, match="--resume takes a training run folder"):
        train(project.config, resume=project.root)


def test_resuming_with_another_train_config_is_refused(project, crashed):
    config, run_dir = crashed
    changed = project.write_config(tiny(max_steps=30, eval_every=5, lr=1e-3), "changed.yaml")
    with pytest.raises(TrainingError, match="another train config"):
        train(changed, resume=run_dir)
    with pytest.raises(DataError, match="drop --dataset when resuming"):
        train(config, dataset="0123abcd", resume=run_dir)
    resumed = train(config, resume=run_dir)  # the run's own config still resumes it
    assert resumed.manifest["status"] == "completed"


def test_a_refused_resume_leaves_the_run_record_alone(project, crashed):
    config, run_dir = crashed
    before = run_manifest(run_dir)
    (row,) = training_runs.runs(project.catalog)
    changed = project.write_config(tiny(max_steps=30, eval_every=5, lr=1e-3), "changed.yaml")
    with pytest.raises(TrainingError, match="another train config"):
        train(changed, resume=run_dir)
    after = run_manifest(run_dir)
    assert after["config"] == before["config"]
    assert after["config_hash"] == before["config_hash"]
    assert after.get("error") == before.get("error")
    assert training_runs.runs(project.catalog)[0]["config_hash"] == row["config_hash"]


def test_resuming_with_another_world_size_is_refused(project, crashed):
    config, run_dir = crashed
    path = run_dir / "checkpoints" / "step-00000010.pt"
    state = torch.load(path, weights_only=True)
    state["world_size"] = 2
    torch.save(state, path)
    with pytest.raises(TrainingError, match=r"written by 2 process\(es\).*--nproc-per-node 2"):
        train(config, resume=run_dir)


def test_checkpoints_load_as_plain_tensors_and_hold_every_state(project, crashed):
    config, run_dir = crashed
    path = run_dir / "checkpoints" / "step-00000010.pt"
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert {
        "model",
        "optimizer",
        "scheduler",
        "scaler",
        "progress",
        "rng",
        "sampler",
        "world_size",
        "threads",
        "config_hash",
    } <= state.keys()
    assert state["config_hash"] == run_manifest(run_dir)["config_hash"]
    assert (state["world_size"], state["threads"]) == (1, 1)
    progress = state["progress"]
    assert (progress["step"], progress["epoch"], progress["position"]) == (10, 0, 10)
    assert progress["best_step"] == 10 and progress["history"]
    assert state["sampler"] == {"seed": 13, "epoch": 0, "position": 10, "window": 50_000}
    assert state["scheduler"]["last_epoch"] == 10
    moments = state["optimizer"]["state"]
    assert len(moments) == len(state["model"])  # one per parameter (the output is tied)
    assert all(float(moment["step"]) == 10 for moment in moments.values())
    assert state["scaler"] == {}  # a CPU run scales no loss
    (rng,) = state["rng"]  # one per rank
    assert {"python", "numpy", "torch", "cuda"} <= rng.keys()
    assert rng["torch"].dtype == torch.uint8
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert best["step"] == 10
    assert same_weights(best["model"], state["model"])
