"""The training loop: accumulation, AdamW with warmup and cosine decay, clipping, mixed
precision, non-finite steps, validation, early stopping, exact checkpoints, a final test.

A step is one optimizer step over `grad_accumulation` micro-batches. The loss of a step is
the sum over its examples (classification) or target tokens (causal_lm) divided by their
number across all ranks, so accumulating 4 batches of 2 gives the gradient of one batch of
8, and data parallelism gives the gradient of the global batch.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR

from pipeline.config.train import TrainConfig
from pipeline.core import progress as shown
from pipeline.core.errors import ThresherError
from training import checkpoint
from training.data import SplitStream, TrainingData, batches, rank_share
from training.distributed import World
from training.models import parameter_groups

IGNORE = -100  # target id left out of the causal LM loss (padding)


class TrainingError(ThresherError):
    """The run cannot go on (too many non-finite steps, a checkpoint that does not fit)."""


def lr_multiplier(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup from 0 over `warmup` steps, then cosine decay to `min_ratio` at `total`."""
    if step < warmup:
        return step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass
class Progress:
    """Everything a checkpoint restores besides the module, optimizer and random states."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # micro-batches of this epoch already trained on
    best_loss: float = math.inf
    best_step: int | None = None
    bad_evals: int = 0
    clipped_steps: int = 0
    nonfinite_steps: int = 0
    overflow_steps: int = 0  # fp16 steps the grad scaler skipped
    stopped_early: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    unlogged_losses: list[float] = field(default_factory=list)  # steps since the last log
    grad_norm: float = math.nan  # of the last step
    lr: float = math.nan  # of the last step
    train_seconds: float = 0.0  # reading, forward, backward and step, over every step so far


class Batcher:
    """Examples to tensors: padding to the longest in the batch, truncation at max_length."""

    def __init__(self, tokenizer, cfg: TrainConfig, labels: list[str]):
        self.tokenizer = tokenizer
        self.objective = cfg.objective
        self.max_length = cfg.tokenizer.max_length
        self.label_ids = {label: index for index, label in enumerate(labels)}
        if cfg.tokenizer.kind == "minilm":
            self.begin, self.end = tokenizer.cls_token_id, tokenizer.sep_token_id
        else:
            self.begin, self.end = tokenizer.bos_token_id, tokenizer.eos_token_id

    def __call__(self, examples) -> dict[str, torch.Tensor]:
        texts = [example.text for example in examples]
        if self.objective == "classification":
            encoded = self.tokenizer(
                texts,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            labels = [self.label_ids[example.label] for example in examples]
            return {
                "input_ids": encoded["input_ids"],
                "attention_mask": encoded["attention_mask"],
                "labels": torch.tensor(labels),
            }
        pieces = self.tokenizer(
            texts, add_special_tokens=False, truncation=True, max_length=self.max_length - 2
        )["input_ids"]
        sequences = [[self.begin, *ids, self.end] for ids in pieces]
        width = max(len(ids) for ids in sequences)
        input_ids = torch.full((len(sequences), width), self.tokenizer.pad_token_id)
        targets = torch.full((len(sequences), width), IGNORE)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            targets[row, : len(ids)] = torch.tensor(ids)
        return {"input_ids": input_ids, "attention_mask": targets != IGNORE, "labels": targets}


def loss_sum(model: nn.Module, batch: dict[str, torch.Tensor], objective: str):
    """(summed loss, number of targets, logits) of one batch."""
    logits = model(batch["input_ids"], batch["attention_mask"])
    if objective == "classification":
        loss = F.cross_entropy(logits.float(), batch["labels"], reduction="sum")
        return loss, batch["labels"].numel(), logits
    targets = batch["labels"][:, 1:]
    loss = F.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(),
        targets.flatten(),
        ignore_index=IGNORE,
        reduction="sum",
    )
    return loss, int((targets != IGNORE).sum()), logits


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        data: TrainingData,
        model: nn.Module,
        batcher: Batcher,
        world: World,
        run_dir: Path,
        config_hash: str = "",
    ):
        self.cfg, self.data, self.batcher, self.world = cfg, data, batcher, world
        self.config_hash = config_hash
        self.run_dir = run_dir
        self.checkpoints = run_dir / "checkpoints"
        self.model = model.to(world.device)
        self.trained = (
            DistributedDataParallel(
                self.model, device_ids=[world.device.index] if world.device.type == "cuda" else None
            )
            if world.size > 1
            else self.model
        )
        # fused: the update of every parameter in one kernel; on a CPU the per-tensor loop took
        # a fifth of a MiniLM step
        self.optimizer = AdamW(
            parameter_groups(self.model, cfg.weight_decay),
            lr=cfg.lr,
            betas=cfg.betas,
            eps=cfg.eps,
            fused=True,
        )
        share = len(rank_share(np.arange(len(data.train)), world.rank, world.size))
        self.micro_batches_per_epoch = math.ceil(share / cfg.batch_size)
        self.steps_per_epoch = math.ceil(self.micro_batches_per_epoch / cfg.grad_accumulation)
        self.total_steps = cfg.max_steps or cfg.epochs * self.steps_per_epoch
        self.warmup_steps = (
            cfg.warmup_steps
            if cfg.warmup_steps is not None
            else round(cfg.warmup_ratio * self.total_steps)
        )
        self.scheduler = LambdaLR(
            self.optimizer,
            lambda step: lr_multiplier(step, self.warmup_steps, self.total_steps, cfg.min_lr_ratio),
        )
        self.precision = resolve_precision(cfg.precision, world.device)
        self.scaler = torch.amp.GradScaler(world.device.type, enabled=self.precision == "fp16")
        self.progress = Progress()
        self._busy_seconds = 0.0  # reading, forward, backward and step since the last log

    @property
    def effective_batch(self) -> int:
        return self.cfg.batch_size * self.cfg.grad_accumulation * self.world.size

    def autocast(self):
        if self.precision == "fp32":
            return nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(self.world.device.type, dtype=dtype)

    # the loop ------------------------------------------------------------------------------

    def fit(self, resume_state: dict[str, Any] | None = None) -> Progress:
        """Train to the end; from a checkpoint's state when one is given."""
        if resume_state is not None:
            self.restore(resume_state)
        else:
            self._say(
                f"training {self.total_steps} steps ({self.steps_per_epoch} per epoch) on "
                f"train {self.data.train.described()}, validation "
                f"{self.data.validation.described()}; effective batch {self.effective_batch} = "
                f"{self.cfg.batch_size} per device × {self.cfg.grad_accumulation} accumulation × "
                f"{self.world.size} processes; precision {self.precision}"
            )
        progress = self.progress
        shown.start("training", self.total_steps, "steps")
        shown.advance("training", progress.step)  # a resumed run starts where it stopped
        while progress.step < self.total_steps and not progress.stopped_early:
            order = self.data.train.order(self.cfg.seed, progress.epoch, self.cfg.shuffle_window)
            share = rank_share(order, self.world.rank, self.world.size)
            micro = list(batches(share, self.cfg.batch_size, start=progress.position))
            for start in range(0, len(micro), self.cfg.grad_accumulation):
                group = micro[start : start + self.cfg.grad_accumulation]
                began = time.perf_counter()
                self._step([self.batcher(self.data.train.examples(p)) for p in group])
                elapsed = time.perf_counter() - began
                self._busy_seconds += elapsed
                progress.train_seconds += elapsed
                progress.step += 1
                shown.advance("training", 1)
                progress.position += len(group)
                epoch_ended = progress.position >= self.micro_batches_per_epoch
                if epoch_ended:
                    progress.epoch += 1
                    progress.position = 0
                self._after_step(epoch_ended)
                if progress.step >= self.total_steps or progress.stopped_early:
                    break
        shown.finish("training", f"{progress.step} steps")
        if self.cfg.restore_best and progress.best_step not in (None, progress.step):
            self.world.barrier()
            self.model.load_state_dict(checkpoint.load(self.checkpoints / "best.pt")["model"])
            self._say(
                f"restored the best weights: step {progress.best_step}, validation loss {progress.best_loss:.4f}"
            )
        return progress

    def _step(self, group: list[dict[str, torch.Tensor]]) -> None:
        self.trained.train()
        counts = [self._targets(batch) for batch in group]
        total = float(self.world.sum(torch.tensor(float(sum(counts)))))
        summed = torch.zeros((), dtype=torch.float64)
        for index, batch in enumerate(group):
            batch = {key: value.to(self.world.device) for key, value in batch.items()}
            last = index == len(group) - 1
            sync = nullcontext() if last or self.world.size == 1 else self.trained.no_sync()
            with sync:
                with self.autocast():
                    loss, _, _ = loss_sum(self.trained, batch, self.cfg.objective)
                # DDP averages gradients over ranks: scale so the result is the global mean.
                self.scaler.scale(loss * (self.world.size / total)).backward()
            summed += loss.detach().double().cpu()
        self.scaler.unscale_(self.optimizer)
        limit = self.cfg.clip_grad_norm or math.inf
        grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), limit))
        step_loss = float(self.world.sum(summed)) / total
        progress = self.progress
        if math.isfinite(grad_norm) and math.isfinite(step_loss):
            progress.clipped_steps += grad_norm > limit
            self.scaler.step(self.optimizer)
        elif self.scaler.is_enabled() and math.isfinite(step_loss):
            # fp16 gradients overflowed: the scaler lowers its scale and goes on (the loss,
            # computed in fp32, is fine)
            progress.overflow_steps += 1
        else:
            progress.nonfinite_steps += 1
            self._say(f"step {progress.step + 1}: non-finite loss or gradient; step skipped")
            if progress.nonfinite_steps >= self.cfg.max_nonfinite_steps:
                raise TrainingError(
                    f"{progress.nonfinite_steps} steps had a non-finite loss or gradient "
                    f"(train.max_nonfinite_steps = {self.cfg.max_nonfinite_steps}); lower "
                    "train.lr, set train.clip_grad_norm, or use precision fp32"
                )
        self.scaler.update()
        progress.lr = self.scheduler.get_last_lr()[0]  # the rate this step used
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        progress.unlogged_losses.append(step_loss)
        progress.grad_norm = grad_norm

    def _targets(self, batch: dict[str, torch.Tensor]) -> int:
        if self.cfg.objective == "classification":
            return batch["labels"].numel()
        return int((batch["labels"][:, 1:] != IGNORE).sum())

    def _after_step(self, epoch_ended: bool) -> None:
        cfg, progress = self.cfg, self.progress
        last = progress.step >= self.total_steps
        if progress.step % cfg.log_every == 0 or last:
            self._log()
        if _due(cfg.eval_every, progress.step, epoch_ended) or (
            last and not self._evaluated_at(progress.step)
        ):
            self._validate()
        if _due(cfg.checkpoint_every, progress.step, epoch_ended) and not last:
            self.save_checkpoint()

    def _log(self) -> None:
        elapsed = self._busy_seconds
        steps = len(self.progress.unlogged_losses)
        losses = [loss for loss in self.progress.unlogged_losses if math.isfinite(loss)]
        entry = {
            "step": self.progress.step,
            "epoch": self.progress.epoch,
            # skipped (non-finite) steps are left out; None when every step since the last log was
            "train_loss": sum(losses) / len(losses) if losses else None,
            "lr": self.progress.lr,
            "grad_norm": self.progress.grad_norm,
            "samples_per_s": steps * self.effective_batch / elapsed if elapsed else None,
        }
        self.progress.history.append(entry)
        remaining = (self.total_steps - self.progress.step) * elapsed / max(1, steps)
        self._say(
            f"step {entry['step']}/{self.total_steps} epoch {entry['epoch']} "
            f"loss {_number(entry['train_loss'])} lr {entry['lr']:.2e} "
            f"grad_norm {_number(entry['grad_norm'])} "
            f"{entry['samples_per_s'] or 0:.1f} samples/s, about {remaining:.0f} s left"
        )
        self.progress.unlogged_losses = []
        self._busy_seconds = 0.0

    def _evaluated_at(self, step: int) -> bool:
        return any(
            entry["step"] == step and "validation_loss" in entry for entry in self.progress.history
        )

    def _validate(self) -> None:
        if not len(self.data.validation):
            return
        progress = self.progress
        metrics = self.evaluate(self.data.validation)
        entry = {"step": progress.step, "epoch": progress.epoch}
        entry.update({f"validation_{key}": value for key, value in metrics.items()})
        progress.history.append(entry)
        improved = metrics["loss"] < progress.best_loss - (
            self.cfg.early_stopping.min_delta if self.cfg.early_stopping else 0.0
        )
        if improved:
            progress.best_loss, progress.best_step, progress.bad_evals = (
                metrics["loss"],
                progress.step,
                0,
            )
            if self.world.is_main:
                checkpoint.save_atomic(
                    {"model": self.model.state_dict(), "step": progress.step},
                    self.checkpoints / "best.pt",
                )
        else:
            progress.bad_evals += 1
        stopping = self.cfg.early_stopping
        if stopping and progress.bad_evals >= stopping.patience:
            progress.stopped_early = True
        self._say(
            f"validation at step {progress.step}: "
            + " ".join(
                f"{key} {value:.4f}" for key, value in metrics.items() if isinstance(value, float)
            )
            + (" (best)" if improved else f" (no improvement: {progress.bad_evals})")
            + (" — stopping early" if progress.stopped_early else "")
        )

    @torch.no_grad()
    def evaluate(self, stream: SplitStream) -> dict[str, Any]:
        """Loss (and accuracy, macro F1 for classification) over a whole split, all ranks."""
        self.model.eval()
        share = np.arange(len(stream))[self.world.rank :: self.world.size]
        classes = len(self.batcher.label_ids)
        sums = torch.zeros(2, dtype=torch.float64)  # summed loss, targets
        confusion = torch.zeros(max(classes, 1) ** 2, dtype=torch.float64)
        for examples in _by_length(stream, share, self.cfg.batch_size):
            batch = {k: v.to(self.world.device) for k, v in self.batcher(examples).items()}
            with self.autocast():
                loss, count, logits = loss_sum(self.model, batch, self.cfg.objective)
            sums += torch.tensor([float(loss), float(count)], dtype=torch.float64)
            if self.cfg.objective == "classification":
                pairs = batch["labels"].cpu() * classes + logits.argmax(-1).cpu()
                confusion += torch.bincount(pairs, minlength=classes**2).double()
        sums, confusion = self.world.sum(sums), self.world.sum(confusion)
        loss = float(sums[0] / sums[1])
        if self.cfg.objective == "causal_lm":
            return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "tokens": int(sums[1])}
        return {
            "loss": loss,
            **classification_metrics(
                confusion.view(classes, classes), list(self.batcher.label_ids)
            ),
        }

    # checkpoints -----------------------------------------------------------------------------

    def save_checkpoint(self) -> Path | None:
        states = self.world.gather(checkpoint.rng_state(self.world.device))
        if not self.world.is_main:
            self.world.barrier()
            return None
        path = self.checkpoints / f"step-{self.progress.step:08d}.pt"
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": asdict(self.progress),
            "rng": states,  # one per rank
            "sampler": {
                "seed": self.cfg.seed,
                "epoch": self.progress.epoch,
                "position": self.progress.position,
                "window": self.cfg.shuffle_window,
            },
            "world_size": self.world.size,
            "threads": torch.get_num_threads(),
            "config_hash": self.config_hash,
        }
        checkpoint.save_atomic(state, path)
        for old in sorted(self.checkpoints.glob("step-*.pt"))[: -self.cfg.keep_checkpoints]:
            old.unlink()
        self.world.barrier()
        return path

    def restore(self, state: dict[str, Any]) -> None:
        check_resumable(
            state["config_hash"], state["world_size"], self.config_hash, self.world.size
        )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.progress = Progress(**state["progress"])
        checkpoint.set_rng_state(state["rng"][self.world.rank], self.world.device)
        self._say(
            f"resumed at step {self.progress.step} (epoch {self.progress.epoch}, "
            f"micro-batch {self.progress.position} of the epoch)"
        )

    def lr_schedule(self) -> list[tuple[int, float]]:
        """(optimizer step, the learning rate it uses) at the steps the loss-curve picture
        draws: step k (1-based, as the history counts) uses the multiplier of k - 1."""
        from training.plots import thinned_steps

        return [
            (step, self.cfg.lr * lr_multiplier(step - 1, self.warmup_steps, self.total_steps,
                                               self.cfg.min_lr_ratio))
            for step in thinned_steps(self.total_steps)
        ]  # fmt: skip

    def _say(self, message: str) -> None:
        if self.world.is_main:
            print(message, file=sys.stderr, flush=True)


EVALUATION_WINDOW = 64  # batches read at once to be sorted by length


def _by_length(stream: SplitStream, share: np.ndarray, batch_size: int):
    """The examples at `share` in batches, sorted by text length within windows of
    EVALUATION_WINDOW batches: a batch pads to its longest text, and a loss summed over
    the whole split does not depend on which examples share a batch."""
    for window in batches(share, batch_size * EVALUATION_WINDOW):
        examples = stream.examples(window)
        examples.sort(key=lambda example: len(example.text))
        for begin in range(0, len(examples), batch_size):
            yield examples[begin : begin + batch_size]


def check_resumable(
    saved_hash: str, saved_world: int | None, config_hash: str, world_size: int
) -> None:
    if saved_hash != config_hash:
        raise TrainingError(
            f"the run was started with another train config (config hash {saved_hash[:12]}, "
            f"now {config_hash[:12]}); resume with the config it started with, or start a new run"
        )
    if saved_world is not None and saved_world != world_size:
        how = (
            "`thresher train --resume`"
            if saved_world == 1
            else f"`torchrun --nproc-per-node {saved_world} -m training --resume`"
        )
        raise TrainingError(
            f"the checkpoint was written by {saved_world} process(es) and this run has "
            f"{world_size}; resume with {how} so each rank reads the same share of the data"
        )


def _number(value: float | None) -> str:
    return "skipped" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _due(every: int | str, step: int, epoch_ended: bool) -> bool:
    return epoch_ended if every == "epoch" else step % every == 0


def resolve_precision(wanted: str, device: torch.device) -> str:
    if wanted == "auto":
        gpu_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return "bf16" if gpu_bf16 else "fp32"
    if wanted == "fp16" and device.type != "cuda":
        raise TrainingError("precision fp16 needs a GPU; on the CPU use bf16 or fp32")
    return wanted


def classification_metrics(confusion: torch.Tensor, labels: list[str]) -> dict[str, Any]:
    """Accuracy, macro F1 over the labels that occur, and F1 per label."""
    true_positive = confusion.diag()
    predicted, actual = confusion.sum(0), confusion.sum(1)
    f1 = {}
    for index, label in enumerate(labels):
        denominator = float(predicted[index] + actual[index])
        if denominator:
            f1[label] = float(2 * true_positive[index] / denominator)
    total = float(confusion.sum())
    return {
        "accuracy": float(true_positive.sum()) / total if total else math.nan,
        "macro_f1": sum(f1.values()) / len(f1) if f1 else math.nan,
        "f1_per_label": f1,
        "examples": int(total),
    }
