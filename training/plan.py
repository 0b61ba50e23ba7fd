"""The plan of a run, fixed before its first step: what it trains on, how long, with what
memory, and whether that fits `train.budget`.

Time per step and peak memory are measured, not guessed: a few real steps of the run's own
first batches on a copy of the model, with its own optimizer, under the run's random state
saved and restored around them, so the run itself (and its exact resume) is unchanged. On a
CPU the peak is the process's peak resident memory during those steps (Linux resets it
through /proc/self/clear_refs), so it includes everything the process holds, the model the
run will train among it; on a GPU it is the peak allocated by torch.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import os
import resource
import statistics
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.config.train import TrainConfig
from pipeline.core.errors import ThresherError
from training import checkpoint
from training.data import TrainingData, batches, rank_share
from training.loop import Trainer, loss_sum


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


def _interval(trainer: Trainer, every: int | str) -> int:
    return trainer.steps_per_epoch if every == "epoch" else every


def evaluation_steps(total_steps: int, steps_per_epoch: int, every: int | str) -> int:
    """How many validations a run of `total_steps` makes at most (early stopping: fewer)."""
    interval = steps_per_epoch if every == "epoch" else every
    return total_steps // interval + (total_steps % interval != 0)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError):  # not Linux: the peak since the process started
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak RSS


def peak_memory(device: torch.device) -> int:
    """Bytes: peak allocated on the GPU, or the process's peak resident memory."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory_kind(device: torch.device) -> str:
    return "GPU peak allocated" if device.type == "cuda" else "process peak RSS"


def measure(trainer: Trainer) -> dict[str, Any]:
    """Seconds per optimizer step, per evaluation batch and per checkpoint, and peak memory,
    from `probe_steps` steps (after one unmeasured step) of the run's first batches on a
    copy of the trainer's model; the random states are restored afterwards."""
    cfg, data, world, batcher = trainer.cfg, trainer.data, trainer.world, trainer.batcher
    saved = checkpoint.rng_state(world.device)
    reset_peak_memory(world.device)
    with tempfile.TemporaryDirectory(prefix="thresher-probe-") as scratch:
        # timing steps: a non-finite one is the run's to count, and to report
        tolerant = cfg.model_copy(update={"max_nonfinite_steps": math.inf})
        probe = Trainer(tolerant, data, copy.deepcopy(trainer.model), batcher, world, Path(scratch))
        probe._say = lambda message: None
        order = rank_share(
            data.train.order(cfg.seed, 0, cfg.shuffle_window), world.rank, world.size
        )
        wanted = (cfg.probe_steps + 1) * cfg.grad_accumulation
        micro = list(islice(batches(order, cfg.batch_size), wanted))
        seconds = []
        for start in range(0, len(micro), cfg.grad_accumulation):
            group = micro[start : start + cfg.grad_accumulation]
            began = time.perf_counter()
            probe._step([batcher(data.train.examples(positions)) for positions in group])
            seconds.append(time.perf_counter() - began)
        # the copy is the extra: the run's own model sits idle in memory meanwhile
        peak = peak_memory(world.device) - _bytes(trainer.model)
        if not probe.optimizer.state:  # no step was taken (non-finite): AdamW's moments
            peak += 8 * sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        evaluation = _evaluation_batch_seconds(probe)
        saving = _checkpoint_seconds(probe, Path(scratch))
        del probe
    gc.collect()
    checkpoint.set_rng_state(saved, world.device)
    measured = seconds[1:] or seconds  # the first step pays one-time costs
    return {
        "steps_measured": len(measured),
        "seconds_per_step": statistics.median(measured),
        "seconds_per_evaluation_batch": evaluation,
        **saving,
        "peak_memory_bytes": peak,
        "memory_kind": memory_kind(world.device),
    }


def _bytes(model: nn.Module) -> int:
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


@torch.no_grad()
def _evaluation_batch_seconds(trainer: Trainer) -> float:
    """The median of three forward passes over the first batch of the validation split."""
    data, device = trainer.data, trainer.world.device
    stream = data.validation if len(data.validation) else data.train
    positions = np.arange(min(len(stream), trainer.cfg.batch_size))
    trainer.model.eval()
    batch = {k: v.to(device) for k, v in trainer.batcher(stream.examples(positions)).items()}
    seconds = []
    for _ in range(3):
        began = time.perf_counter()
        with trainer.autocast():
            loss_sum(trainer.model, batch, trainer.cfg.objective)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds)


def _checkpoint_seconds(trainer: Trainer, scratch: Path) -> dict[str, float]:
    """Seconds to write a checkpoint (model and optimizer) and a model alone, as the run does."""
    began = time.perf_counter()
    checkpoint.save_atomic(
        {"model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict()},
        scratch / "checkpoint.pt",
    )
    middle = time.perf_counter()
    checkpoint.save_atomic({"model": trainer.model.state_dict()}, scratch / "model.pt")
    return {
        "seconds_per_checkpoint": middle - began,
        "seconds_per_model_save": time.perf_counter() - middle,
    }


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
        saving = (trainer.total_steps - 1) // _interval(trainer, cfg.checkpoint_every) * measured[
            "seconds_per_checkpoint"
        ] + (evaluations + 1) * measured["seconds_per_model_save"]
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


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def mebibytes(count: float) -> str:
    return f"{count / 2**20:,.0f} MiB"
