"""Data parallelism on the CPU: `torchrun --nproc-per-node 2 -m training` with gloo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from trainkit import run_manifest, sms_project, tiny, weights

import training
from data_catalog import training_runs
from pipeline.core.storage import file_sha256
from training.run import train

REPO = Path(training.__file__).resolve().parents[1]
TORCHRUN = Path(sys.executable).parent / "torchrun"

pytestmark = pytest.mark.services  # two torchrun processes (gloo)


def torchrun(config: Path, processes: int = 2) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "HF_HUB_OFFLINE": "1",
    }
    command = [str(TORCHRUN), "--standalone", "--nproc-per-node", str(processes)]
    done = subprocess.run(
        [*command, "-m", "training", "--config", str(config)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def test_two_processes_train_one_model(tmp_path, sms_spam):
    project = sms_project(
        tmp_path,
        sms_spam,
        200,
        tiny(
            batch_size=4,
            grad_accumulation=2,
            max_steps=12,
            eval_every=6,
            checkpoint_every=4,
            probe_steps=3,
        ),  # fmt: skip
    )
    done = torchrun(project.config)
    manifest_path = Path(done.stdout.strip().splitlines()[-1])  # rank 0 prints it, alone
    assert manifest_path.name == "run_manifest.json" and manifest_path.exists()
    assert done.stdout.count("run_manifest.json") == 1
    run_dir = manifest_path.parent
    manifest = run_manifest(run_dir)

    assert manifest["status"] == "completed"
    assert manifest["environment"]["world_size"] == 2
    assert manifest["environment"]["backend"] == "gloo"
    plan = manifest["plan"]
    assert plan["batch"] == {
        "per_device": 4,
        "grad_accumulation": 2,
        "effective_per_device": 8,
        "world_size": 2,
        "global": 16,
    }
    # every rank measured its steps; the plan holds the slowest and the largest peak
    assert plan["measured"]["steps_measured"] == 3 and plan["measured"]["seconds_per_step"] > 0
    assert manifest["metrics"]["measured"]["peak_memory_bytes"] > 0
    # 172 train records: 86 per rank, 22 micro-batches of 4, 11 steps of 2 per epoch
    assert manifest["dataset"]["records"]["train"] == 172
    assert plan["steps"]["per_epoch"] == 11
    assert manifest["metrics"]["steps"] == 12 and manifest["metrics"]["epochs_completed"] == 1
    assert manifest["dataset"]["hash"] == project.dataset_hash
    # one catalog row for the whole group of ranks, naming that version and both ranks
    (row,) = training_runs.runs(project.catalog)
    assert (row["dataset_hash"], row["world_size"], row["status"]) == (project.dataset_hash, 2, "completed")  # fmt: skip
    assert row["manifest_sha256"] == file_sha256(manifest_path)

    files = [manifest["model"], *manifest["checkpoints"]]
    assert {f["path"] for f in manifest["checkpoints"]} == {
        "checkpoints/best.pt",
        "checkpoints/step-00000004.pt",
        "checkpoints/step-00000008.pt",
    }
    for recorded in files:
        assert file_sha256(run_dir / recorded["path"]) == recorded["sha256"], recorded["path"]

    (row,) = training_runs.for_version(project.catalog, project.dataset_hash)
    assert (row["run_id"], row["status"], row["world_size"]) == (run_dir.name, "completed", 2)
    assert row["dataset_hash"] == manifest["dataset"]["hash"]
    assert row["manifest_sha256"] == file_sha256(manifest_path)
    assert row["test_metrics"]["loss"] == manifest["metrics"]["test"]["loss"]


def test_a_data_parallel_step_equals_the_global_batch_in_one_process(tmp_path, sms_spam):
    """Rank r takes every 2nd example of the order, so 2 ranks × 4 see the single process's
    first 8; the loss is normalized over both ranks' targets. A large AdamW eps makes the
    update proportional to the gradient (see test_loop)."""
    one_step = {
        "max_steps": 1,
        "warmup_steps": 0,
        "clip_grad_norm": None,
        "weight_decay": 0.0,
        "lr": 10.0,
        "eps": 10.0,
        "model": {"dropout": 0.0},
    }
    project = sms_project(tmp_path, sms_spam, 200, tiny(batch_size=4, **one_step))
    done = torchrun(project.config)
    parallel = weights(Path(done.stdout.strip().splitlines()[-1]).parent / "model.pt")
    single = train(project.write_config(tiny(batch_size=8, **one_step), "single.yaml"))
    alone = weights(single.run_dir / "model.pt")
    for name, tensor in alone.items():
        torch.testing.assert_close(parallel[name], tensor, atol=1e-6, rtol=0)
    half = train(project.write_config(tiny(batch_size=4, **one_step), "half.yaml"))
    moved = weights(half.run_dir / "model.pt")
    assert max(float((moved[k] - alone[k]).abs().max()) for k in alone) > 1e-2
