"""The training loop: determinism, gradient accumulation, early stopping with the best
weights restored, non-finite steps, gradient clipping."""

from __future__ import annotations

import json
import math

import pytest
import torch
from trainkit import run_manifest, same_weights, tiny, weights

import training.loop
from data_catalog import training_runs
from training.loop import Trainer, TrainingError
from training.run import train


def run(project, name, **changes):
    return train(project.write_config(tiny(**changes), f"{name}.yaml"))


def train_losses(result) -> list[float]:
    return [e["train_loss"] for e in result.manifest["metrics"]["history"] if "train_loss" in e]


def test_same_seed_same_weights_other_seed_other_weights(project):
    first, second = run(project, "a"), run(project, "b")
    other = run(project, "c", seed=14)
    assert first.run_id != second.run_id
    assert same_weights(weights(first.run_dir / "model.pt"), weights(second.run_dir / "model.pt"))
    assert train_losses(first) == train_losses(second) and len(train_losses(first)) == 20
    assert first.manifest["tokenizer"]["digest"] == second.manifest["tokenizer"]["digest"]
    assert first.manifest["metrics"]["test"] == second.manifest["metrics"]["test"]
    assert not same_weights(
        weights(first.run_dir / "model.pt"), weights(other.run_dir / "model.pt")
    )
    assert train_losses(first) != train_losses(other)
    assert first.manifest["determinism"]["deterministic_algorithms"] is True
    assert first.manifest["determinism"]["torch_threads"] == 1


def one_step(project, name, batch_size, grad_accumulation):
    """One optimizer step, no dropout, warmup or clipping. A large AdamW eps makes the first
    update about lr × gradient / eps instead of lr × sign(gradient), so the weights show the
    gradient itself."""
    result = run(
        project,
        name,
        batch_size=batch_size,
        grad_accumulation=grad_accumulation,
        max_steps=1,
        warmup_steps=0,
        clip_grad_norm=None,
        weight_decay=0.0,
        lr=10.0,
        eps=10.0,
        model={"dropout": 0.0},
    )
    assert result.manifest["plan"]["batch"]["global"] == batch_size * grad_accumulation
    return weights(result.run_dir / "model.pt")


def test_gradient_accumulation_equals_the_large_batch(project):
    """4 micro-batches of 2 see the same 8 examples as one batch of 8 (the order is per
    example), and the loss is normalized by the targets of all 8 — not averaged per batch."""
    accumulated = one_step(project, "accumulated", 2, 4)
    large = one_step(project, "large", 8, 1)
    small = one_step(project, "small", 2, 1)  # another gradient: the check can fail
    for name, tensor in large.items():
        torch.testing.assert_close(accumulated[name], tensor, atol=1e-6, rtol=0)
    moved = max(float((large[k] - small[k]).abs().max()) for k in large)
    assert moved > 1e-2  # the step moved weights by about 0.3; accumulation differs by ~1e-7


def scripted_validation(losses):
    """Stands in for Trainer.evaluate: these validation losses in order; the test split is
    evaluated for real."""
    remaining, evaluate = list(losses), Trainer.evaluate

    def scripted(trainer, stream):
        if stream.split != "validation":
            return evaluate(trainer, stream)
        return {"loss": remaining.pop(0)}

    return scripted


EARLY = {
    "max_steps": 20,
    "eval_every": 2,
    "checkpoint_every": 100,
    "early_stopping": {"patience": 2},
}


def test_early_stopping_restores_the_best_checkpoint(project, monkeypatch):
    monkeypatch.setattr(Trainer, "evaluate", scripted_validation([3.0, 2.0, 2.5, 2.6, 2.7]))
    restored = run(project, "restored", **EARLY)
    monkeypatch.setattr(Trainer, "evaluate", scripted_validation([3.0, 2.0, 2.5, 2.6, 2.7]))
    kept_last = run(project, "last", **EARLY, restore_best=False)

    metrics = restored.manifest["metrics"]
    assert metrics["stopped_early"] is True
    assert (metrics["steps"], metrics["best_step"], metrics["best_validation_loss"]) == (8, 4, 2.0)
    assert metrics["restored_best"] is True
    validation = [
        (e["step"], e["validation_loss"]) for e in metrics["history"] if "validation_loss" in e
    ]
    assert validation == [(2, 3.0), (4, 2.0), (6, 2.5), (8, 2.6)]
    best = torch.load(restored.run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert best["step"] == 4
    final = weights(restored.run_dir / "model.pt")
    assert same_weights(final, best["model"])

    last = weights(kept_last.run_dir / "model.pt")
    assert kept_last.manifest["metrics"]["restored_best"] is False
    assert kept_last.manifest["metrics"]["steps"] == 8
    assert not same_weights(last, final)
    same_best = torch.load(kept_last.run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert same_weights(same_best["model"], best["model"])  # same run up to step 4


def test_min_delta_counts_small_improvements_as_none(project, monkeypatch):
    monkeypatch.setattr(Trainer, "evaluate", scripted_validation([3.0, 2.95, 2.9, 1.0]))
    result = run(project, "delta", **{**EARLY, "early_stopping": {"patience": 2, "min_delta": 0.1}})
    metrics = result.manifest["metrics"]
    assert (metrics["stopped_early"], metrics["steps"], metrics["best_step"]) == (True, 6, 2)


class NaNLoss:
    """Wraps training.loop.loss_sum: the training loss is NaN at the chosen steps (1-based;
    one forward per step without accumulation), or always."""

    def __init__(self, steps=None):
        self.steps, self.calls = steps, 0
        self.loss_sum = training.loop.loss_sum

    def __call__(self, model, batch, objective):
        loss, count, logits = self.loss_sum(model, batch, objective)
        if model.training:
            self.calls += 1
            if self.steps is None or self.calls in self.steps:
                loss = loss * math.nan
        return loss, count, logits


def test_non_finite_steps_are_skipped_and_counted(project, monkeypatch):
    monkeypatch.setattr(training.loop, "loss_sum", NaNLoss({2, 5, 6}))
    result = run(
        project,
        "nan",
        max_steps=6,
        eval_every=100,
        checkpoint_every=4,
        keep_checkpoints=5,
        restore_best=False,
        probe_steps=0,  # NaNLoss counts the forwards of training steps from the first
    )
    metrics = result.manifest["metrics"]
    assert (metrics["steps"], metrics["nonfinite_steps"], metrics["overflow_steps"]) == (6, 3, 0)
    losses = train_losses(result)
    # a log entry of skipped steps only has no train loss
    assert [loss is None for loss in losses] == [False, True, False, False, True, True]
    final = weights(result.run_dir / "model.pt")
    assert all(torch.isfinite(t).all() for t in final.values())
    # steps 5 and 6 were skipped: the weights are those of step 4
    at_four = weights(result.run_dir / "checkpoints" / "step-00000004.pt")
    assert same_weights(final, at_four)
    assert result.manifest["status"] == "completed"


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as RFC 8259, jq and JSON.parse do."""

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_manifest_and_metrics_stay_strict_json_after_non_finite_steps(project, monkeypatch):
    monkeypatch.setattr(training.loop, "loss_sum", NaNLoss({2}))
    result = run(project, "nan-json", max_steps=3, eval_every=100, probe_steps=0)
    assert result.manifest["metrics"]["nonfinite_steps"] == 1
    for line in (result.run_dir / "metrics.jsonl").read_text().splitlines():
        strict_json(line)
    strict_json((result.run_dir / "run_manifest.json").read_text())


# a skipped first step makes torch warn that the scheduler stepped before the optimizer
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`:UserWarning")
def test_too_many_non_finite_steps_fail_the_run(project, monkeypatch):
    monkeypatch.setattr(training.loop, "loss_sum", NaNLoss())
    config = project.write_config(tiny(max_nonfinite_steps=2, probe_steps=0), "always-nan.yaml")
    with pytest.raises(TrainingError, match="2 steps had a non-finite loss"):
        train(config)
    (row,) = training_runs.runs(project.catalog)
    assert row["status"] == "failed" and "TrainingError" in row["error"]
    assert row["finished_at"] is not None
    run_dir = project.workdir / "training" / row["run_id"]
    recorded = run_manifest(run_dir)
    assert recorded["status"] == "failed" and "non-finite" in recorded["error"]
    assert not (run_dir / "model.pt").exists()


def test_every_step_is_clipped_under_a_tiny_norm(project):
    clipped = run(project, "clipped", clip_grad_norm=1e-6, max_steps=10)
    assert (
        clipped.manifest["metrics"]["clipped_steps"] == clipped.manifest["metrics"]["steps"] == 10
    )
    free = run(project, "free", clip_grad_norm=None, max_steps=10)
    assert free.manifest["metrics"]["clipped_steps"] == 0
    norms = [e["grad_norm"] for e in clipped.manifest["metrics"]["history"] if "grad_norm" in e]
    assert len(norms) == 10 and min(norms) > 1e-6  # the norm before clipping is logged
    assert not same_weights(
        weights(clipped.run_dir / "model.pt"), weights(free.run_dir / "model.pt")
    )


def test_metrics_file_holds_the_history(project):
    result = run(project, "metrics", max_steps=4, eval_every=2)
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == result.manifest["metrics"]["history"]
    assert run_manifest(result.run_dir)["status"] == "completed"


def test_every_trainable_parameter_of_the_classifier_gets_a_gradient():
    """DistributedDataParallel reduces a bucket only when all its parameters have gradients:
    a trainable parameter the forward never uses (BERT's pooler) stalls data-parallel runs."""
    from training.models import MiniLMClassifier

    model = MiniLMClassifier(num_labels=2, dropout=0.0, freeze_base=False)
    ids = torch.tensor([[101, 7592, 2088, 102]])
    model(ids, torch.ones_like(ids)).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []
