"""The plan fixed before a run: what it trains, how long, with what memory; the budget."""

from __future__ import annotations

import json
import math

import pytest
import torch
from helpers import thresher
from trainkit import run_manifest, same_weights, tiny, weights

from data_catalog import training_runs
from training.loop import TrainingError
from training.models import CausalLM
from training.plan import OverBudget, checkpoints_between, evaluation_steps
from training.run import MODEL_FILE, plan, train
from training.units import duration, mebibytes


def test_the_plan_names_data_steps_batch_parameters_and_measures_a_few_steps(project):
    config = project.write_config(
        tiny(grad_accumulation=2, warmup_steps=3, probe_steps=3), "plan.yaml"
    )
    found = plan(config)
    assert found["dataset"] == {"name": "sms", "hash": project.dataset_hash}
    assert found["objective"] == "causal_lm: predict each next token of the text"
    counts = json.loads((project.version_path / "manifest.json").read_text())["split_counts"]
    assert found["records"]["train"] == counts["train"]
    assert found["records"]["validation"] == counts["validation"]
    assert found["records"]["test_published"] == counts["test"]
    assert found["steps"] == {
        "total": 20,
        "per_epoch": -(-counts["train"] // 16),
        "warmup": 3,
    }
    assert found["batch"] == {
        "per_device": 8,
        "grad_accumulation": 2,
        "effective_per_device": 16,
        "world_size": 1,
        "global": 16,
    }
    assert found["stopping"] == "after train.max_steps 20 steps"
    assert found["validation"]["evaluations_at_most"] == 2  # every 10 steps of 20
    vocab = found["tokenizer"]["vocab_size"]
    expected = sum(p.numel() for p in CausalLM(vocab, 32, 32, 1, 2, 0.1).parameters())
    assert found["parameters"]["total"] == found["parameters"]["trainable"] == expected
    assert found["parameters"]["method"] == "from scratch: every parameter"
    assert found["tokenizer"]["kind"] == "bpe" and found["tokenizer"]["max_length"] == 32
    assert found["device"]["type"] == "cpu" and found["device"]["threads"] == 1
    measured, projected = found["measured"], found["projected"]
    assert measured["steps_measured"] == 3 and measured["seconds_per_step"] > 0
    assert measured["peak_memory_bytes"] > 50 * 2**20  # the process: python, torch, the data
    assert projected["training_seconds"] == pytest.approx(20 * measured["seconds_per_step"])
    assert projected["wall_seconds"] > projected["training_seconds"]  # and the evaluations
    assert found["over_budget"] == [] and found["budget"] == {}
    # planning writes nothing: no run folder, no catalog row
    assert not (project.workdir / "training").exists()
    assert training_runs.runs(project.catalog) == []


def test_evaluations_counted_as_the_loop_makes_them():
    assert evaluation_steps(20, 7, "epoch") == 3  # steps 7, 14 and the last, 20
    assert evaluation_steps(21, 7, "epoch") == 3
    assert evaluation_steps(20, 7, 10) == 2
    assert evaluation_steps(25, 7, 10) == 3
    assert checkpoints_between(20, 7, "epoch") == 2  # steps 7 and 14, not the last
    assert checkpoints_between(20, 7, 10) == 1 and checkpoints_between(21, 7, 10) == 2


def test_measuring_leaves_the_run_exactly_as_without_it(project):
    measured = train(project.write_config(tiny(probe_steps=3), "measured.yaml"))
    unmeasured = train(project.write_config(tiny(probe_steps=0), "unmeasured.yaml"))
    assert same_weights(
        weights(measured.run_dir / MODEL_FILE), weights(unmeasured.run_dir / MODEL_FILE)
    )
    losses = [
        [entry.get("train_loss") for entry in result.manifest["metrics"]["history"]]
        for result in (measured, unmeasured)
    ]
    assert losses[0] == losses[1]
    # the two configs differ only in what the plan measures: one training config hash
    assert measured.manifest["config_hash"] == unmeasured.manifest["config_hash"]
    record = run_manifest(measured.run_dir)
    assert list(record)[:3] == ["run_id", "status", "plan"]
    evaluations = [e for e in record["metrics"]["history"] if "validation_loss" in e]
    assert len(evaluations) == record["plan"]["validation"]["evaluations_at_most"] == 2
    assert record["plan"]["measured"]["steps_measured"] == 3
    assert run_manifest(unmeasured.run_dir)["plan"]["measured"] is None
    taken = record["metrics"]["measured"]
    assert taken["seconds_per_step"] > 0 and taken["peak_memory_bytes"] > 0
    assert taken["memory_kind"] == "process peak RSS"


def test_a_run_over_budget_is_refused_before_it_starts(project):
    config = project.write_config(tiny(budget={"max_steps": 15}), "steps.yaml")
    with pytest.raises(OverBudget, match=r"max_steps 15: the run takes 20 steps, 5 more"):
        train(config)
    assert list((project.workdir / "training").iterdir()) == []  # no run folder left
    assert training_runs.runs(project.catalog) == []
    refused = thresher("train", "--config", config)
    assert refused.exit_code == 2
    assert "so it was not started: train.budget.max_steps 15" in refused.stderr.replace("\n", " ")
    tight = project.write_config(
        tiny(probe_steps=3, budget={"max_wall_time": "0.001s", "max_memory": "1MB"}), "tight.yaml"
    )
    found = plan(tight)
    wall, memory = found["over_budget"]
    projected = found["projected"]
    seconds, peak = projected["wall_seconds"], projected["peak_memory_bytes"]
    assert wall.startswith(
        f"train.budget.max_wall_time 0.001s: projected {duration(seconds)}, "
        f"{duration(seconds - 0.001)} over ({seconds / 0.001:.2f}× the limit"
    )
    assert memory.startswith(
        f"train.budget.max_memory 1MB: measured peak {mebibytes(peak)}, "
        f"{mebibytes(peak - 10**6)} over"
    )
    assert seconds == pytest.approx(
        projected["training_seconds"]
        + projected["evaluation_seconds"]
        + projected["saving_seconds"]
    )
    result = thresher("train", "plan", "--config", tight)
    assert result.exit_code == 1
    assert "over budget: train.budget.max_wall_time 0.001s" in result.stdout
    within = thresher("train", "plan", "--config", project.config, "--json")
    assert within.exit_code == 0
    assert json.loads(within.stdout)["dataset"]["hash"] == project.dataset_hash
    assert "within budget" in within.stderr


def test_a_budget_on_time_or_memory_needs_measured_steps(project):
    config = project.write_config(tiny(probe_steps=0, budget={"max_memory": "8GiB"}), "x.yaml")
    result = thresher("train", "plan", "--config", config)
    assert (
        result.exit_code == 2 and "train.budget.max_memory needs a measured plan" in result.stderr
    )


def test_a_frozen_base_trains_the_head_only(tmp_path, sms_spam):
    from trainkit import sms_project

    project = sms_project(
        tmp_path,
        sms_spam,
        60,
        {"freeze_base": True, "max_steps": 2, "batch_size": 4, "threads": 1, "probe_steps": 0},
    )
    found = plan(project.config)
    parameters = found["parameters"]
    labels = len(found["objective"].split("labels: ")[1].split(","))
    hidden = 384  # all-MiniLM-L6-v2
    assert parameters["trainable"] == hidden * labels + labels
    assert parameters["total"] > 22_000_000 and parameters["method"].startswith("frozen base")
    assert found["base_model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert torch.get_num_threads() == 1


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`:UserWarning")
def test_non_finite_steps_while_measuring_are_left_to_the_run(project, monkeypatch):
    import training.loop

    real = training.loop.loss_sum

    def nan_loss(model, batch, objective):
        loss, count, logits = real(model, batch, objective)
        return loss * math.nan, count, logits

    monkeypatch.setattr(training.loop, "loss_sum", nan_loss)
    config = project.write_config(tiny(max_nonfinite_steps=2, probe_steps=3), "nan.yaml")
    with pytest.raises(TrainingError, match="2 steps had a non-finite loss"):
        train(config)  # the 4 measured steps were all non-finite: the run started anyway
    (row,) = training_runs.runs(project.catalog)
    assert row["status"] == "failed"
    assert run_manifest(project.workdir / "training" / row["run_id"])["plan"]["measured"]
