"""Measuring a run before it starts: a few real steps of its own first batches on a copy of
the model, with its own optimizer, under the run's random states saved and restored around
them, so the run itself (and its exact resume) is unchanged.

On a CPU the peak memory is the process's peak resident memory during those steps (Linux
resets it through /proc/self/clear_refs first), less the weights of the run's own model,
idle meanwhile; on a GPU it is the peak allocated by torch, less the same.
"""

from __future__ import annotations

import copy
import gc
import math
import statistics
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.core.resources import peak_rss_mb, reset_peak_rss
from training import checkpoint
from training.data import batches, rank_share
from training.loop import Trainer, loss_sum


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        reset_peak_rss()


def peak_memory(device: torch.device) -> int:
    """Bytes: peak allocated on the GPU, or the process's peak resident memory."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return round(peak_rss_mb() * 2**20)


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
