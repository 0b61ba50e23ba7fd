"""The plan of a run, fixed before its first step: what it trains on, how long, with what
memory, and whether that fits `train.budget`. Time per step and peak memory are measured,
not guessed (training/probe.py); the wall time is projected from them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.config.train import TrainConfig
from pipeline.core.errors import ThresherError
from training.data import TrainingData
from training.loop import Trainer
from training.units import duration, mebibytes


class OverBudget(ThresherError):
    """The plan projects more than `train.budget` allows."""


def parameters(model: nn.Module, cfg: TrainConfig) -> dict[str, Any]:
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if cfg.objective == "causal_lm":
        method = "from scratch: every parameter"
    elif cfg.freeze_base:
        method = "frozen base: the classification head only"
    else:
        method = "full fine-tuning: encoder and head"
    return {
        "total": total,
        "trainable": trainable,
        "frozen": total - trainable,
        "method": method,
        # fp32 weights, plus a gradient and AdamW's two moments per trainable parameter
        "state_bytes": 4 * total + 12 * trainable,
    }


def evaluation_steps(total_steps: int, steps_per_epoch: int, every: int | str) -> int:
    """How many validations a run of `total_steps` makes at most (early stopping: fewer):
    every `every` steps (or epoch) and at the last step."""
    interval = steps_per_epoch if every == "epoch" else every
    return total_steps // interval + (total_steps % interval != 0)


def checkpoints_between(total_steps: int, steps_per_epoch: int, every: int | str) -> int:
    """Checkpoints a run writes: every `every` steps (or epoch), but not at the last step."""
    return evaluation_steps(total_steps, steps_per_epoch, every) - 1


def make_plan(
    name: str,
    version,
    trainer: Trainer,
    tokenizer_record,
    base_model: dict | None,
    measured: dict[str, Any] | None,
) -> dict[str, Any]:
    """Everything the run is about to do and what it will cost, before its first step."""
    cfg, data, world = trainer.cfg, trainer.data, trainer.world
    split_counts = version.manifest.get("split_counts", {})
    evaluations = (
        evaluation_steps(trainer.total_steps, trainer.steps_per_epoch, cfg.eval_every)
        if len(data.validation)
        else 0
    )
    validation_batches = math.ceil(len(data.validation) / (cfg.batch_size * world.size))
    test_records = split_counts.get("test", 0)
    test_batches = math.ceil(test_records / (cfg.batch_size * world.size))
    plan: dict[str, Any] = {
        "objective": _objective(cfg, data),
        "dataset": {"name": name, "hash": version.dataset_hash},
        "records": {
            "train": len(data.train),
            "validation": len(data.validation),
            "test_published": test_records,  # read once, after training; eligibility then
            "train_skipped": data.train.skipped,
            "validation_skipped": data.validation.skipped,
        },
        "validation": {
            "every": cfg.eval_every,
            "evaluations_at_most": evaluations,
            "metrics": ["loss", "accuracy", "macro_f1"]
            if cfg.objective == "classification"
            else ["loss", "perplexity"],
            "selection": "the weights of the lowest validation loss"
            if cfg.restore_best
            else "the last weights",
            "test": "evaluated once, after the model is chosen",
        },
        "epochs": cfg.epochs if cfg.max_steps is None else None,
        "steps": {
            "total": trainer.total_steps,
            "per_epoch": trainer.steps_per_epoch,
            "warmup": trainer.warmup_steps,
        },
        "batch": {
            "per_device": cfg.batch_size,
            "grad_accumulation": cfg.grad_accumulation,
            "effective_per_device": cfg.batch_size * cfg.grad_accumulation,
            "world_size": world.size,
            "global": trainer.effective_batch,
        },
        "schedule": (
            f"AdamW lr {cfg.lr:g}: linear warmup over {trainer.warmup_steps} steps, then cosine "
            f"decay to {cfg.lr * cfg.min_lr_ratio:g} at step {trainer.total_steps}"
        ),
        "stopping": _stopping(cfg, trainer),
        "parameters": parameters(trainer.model, cfg),
        "base_model": base_model,
        "tokenizer": {
            "kind": tokenizer_record.kind,
            "digest": tokenizer_record.digest,
            "vocab_size": tokenizer_record.vocab_size,
            "max_length": tokenizer_record.max_length,
        },
        "precision": trainer.precision,
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "device": device_description(world.device),
        "measured": measured,
        "projected": None,
        "budget": cfg.budget.model_dump(exclude_none=True),
    }
    if measured:
        step_seconds = trainer.total_steps * measured["seconds_per_step"]
        eval_seconds = (evaluations * validation_batches + test_batches) * (
            measured["seconds_per_evaluation_batch"] or 0.0
        )
        # checkpoints between steps; the best weights at most at every evaluation, and the model
        checkpoints = checkpoints_between(
            trainer.total_steps, trainer.steps_per_epoch, cfg.checkpoint_every
        )
        saving = (
            checkpoints * measured["seconds_per_checkpoint"]
            + (evaluations + 1) * measured["seconds_per_model_save"]
        )
        wall = step_seconds + eval_seconds + saving
        plan["projected"] = {
            "wall_seconds": wall,
            "training_seconds": step_seconds,
            "evaluation_seconds": eval_seconds,
            "saving_seconds": saving,
            "peak_memory_bytes": measured["peak_memory_bytes"],
            "cost": None
            if cfg.budget.price_per_hour is None
            else wall / 3600 * cfg.budget.price_per_hour * world.size,
        }
    plan["over_budget"] = over_budget(plan, cfg)
    return plan


def over_budget(plan: dict[str, Any], cfg: TrainConfig) -> list[str]:
    """One sentence per limit the plan exceeds: which limit, and by how much."""
    budget, projected = cfg.budget, plan["projected"] or {}
    found = []
    steps = plan["steps"]["total"]
    if budget.max_steps is not None and steps > budget.max_steps:
        found.append(
            f"train.budget.max_steps {budget.max_steps}: the run takes {steps} steps, "
            f"{steps - budget.max_steps} more (lower train.max_steps or train.epochs, or raise "
            "train.batch_size or train.grad_accumulation)"
        )
    wall = projected.get("wall_seconds")
    if budget.wall_seconds is not None and wall is not None and wall > budget.wall_seconds:
        found.append(
            f"train.budget.max_wall_time {budget.max_wall_time}: projected {duration(wall)}, "
            f"{duration(wall - budget.wall_seconds)} over "
            f"({wall / budget.wall_seconds:.2f}× the limit; lower train.max_steps or "
            "train.epochs, or evaluate less often: train.eval_every)"
        )
    memory = projected.get("peak_memory_bytes")
    if budget.memory_bytes is not None and memory is not None and memory > budget.memory_bytes:
        found.append(
            f"train.budget.max_memory {budget.max_memory}: measured peak {mebibytes(memory)}, "
            f"{mebibytes(memory - budget.memory_bytes)} over (lower train.batch_size and raise "
            "train.grad_accumulation, shorten train.tokenizer.max_length, or set "
            "train.gradient_checkpointing)"
        )
    return found


def check_budget(plan: dict[str, Any]) -> None:
    if plan["over_budget"]:
        raise OverBudget(
            "the run would exceed its budget, so it was not started: "
            + "; ".join(plan["over_budget"])
            + ". Or raise the limit in train.budget (`thresher train plan` shows the plan)"
        )


def device_description(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        return {
            "type": "cuda",
            "name": properties.name,
            "memory_bytes": properties.total_memory,
        }
    return {
        "type": "cpu",
        "name": _cpu_name(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "threads": torch.get_num_threads(),
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _objective(cfg: TrainConfig, data: TrainingData) -> str:
    if cfg.objective == "classification":
        return (
            f"classification: predict the label ({len(data.labels)} labels: "
            f"{', '.join(data.labels)}) from the text"
        )
    return "causal_lm: predict each next token of the text"


def _stopping(cfg: TrainConfig, trainer: Trainer) -> str:
    rule = (
        f"after train.max_steps {cfg.max_steps} steps"
        if cfg.max_steps
        else f"after {cfg.epochs} epochs ({trainer.total_steps} steps)"
    )
    if cfg.early_stopping and len(trainer.data.validation):
        stopping = cfg.early_stopping
        rule += (
            f", or earlier when {stopping.patience} evaluations in a row do not lower the "
            f"validation loss by more than {stopping.min_delta:g}"
        )
    return rule
