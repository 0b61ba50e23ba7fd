"""One training run, end to end: the same function behind `thresher train`, `torchrun -m
training` and the Prefect `train` flow.

Open the version (every shard re-hashed), build the tokenizer and model, train, restore
the best weights, evaluate the test split once, save the model, and write the run manifest
and loss curves; register the run in the catalog against the version. Under torchrun every
rank trains; rank 0 alone writes files and catalog rows.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data_catalog import training_runs
from data_catalog.catalog import Catalog
from pipeline.config import load_run_config
from pipeline.config.train import TrainConfig
from pipeline.core.errors import ConfigError, DataError
from training import checkpoint, distributed, manifest, plots
from training.data import TrainingData, check_features, open_training_version
from training.loop import Batcher, Trainer, check_resumable
from training.models import build_model
from training.plan import check_budget, make_plan
from training.probe import measure, memory_kind, peak_memory, reset_peak_memory
from training.seeds import SUMMARY_FILE, checked_seeds, except_seed, record_run
from training.tokenization import TokenizerRecord, load_bpe, load_minilm, train_bpe

MODEL_FILE = "model.pt"
METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "loss_curves.png"


@dataclass(frozen=True)
class TrainResult:
    run_id: str
    run_dir: Path
    manifest: dict[str, Any]

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / manifest.MANIFEST_FILE


def train(
    config_path: str | Path,
    dataset: str | None = "latest",
    resume: str | Path | None = None,
    seed: int | None = None,
    seed_group: dict[str, Any] | None = None,
) -> TrainResult:
    """Train on version `dataset` (hash, prefix or `latest`) of the config's dataset, or
    resume the run in folder `resume` from its last checkpoint. `seed` replaces the config's
    (a run of a seed group, which `seed_group` names)."""
    run_config = load_run_config(config_path)
    cfg = run_config.train or TrainConfig()
    workdir = Path(run_config.workdir)
    resume = Path(resume).resolve() if resume else None  # the catalog keeps absolute paths
    earlier = _earlier_run(resume) if resume else None
    if earlier:
        if dataset not in (None, "latest") and not earlier["dataset"]["hash"].startswith(dataset):
            raise DataError(
                f"run {earlier['run_id']} trains on {earlier['dataset']['hash'][:12]}, not {dataset}; "
                "drop --dataset when resuming"
            )
        dataset = earlier["dataset"]["hash"]
        seed_group = earlier.get("seed_group")
        if seed_group:  # a seed group's run keeps its own seed
            seed = earlier["config"]["seed"]
    if seed is not None:
        cfg = cfg.model_copy(update={"seed": seed})
    world = distributed.start(cfg.device)
    try:
        result = _train(
            run_config.name,
            workdir,
            cfg,
            dataset or "latest",
            earlier,
            Path(resume) if resume else None,
            world,
            seed_group,
        )
        # ranks leave together: one tearing gloo down while another still talks to it can
        # abort with "terminate called without an active exception" (seen once in a clean
        # clone). Not on failure: a rank that raised must not wait for the others.
        world.barrier()
        return result
    finally:
        distributed.stop(world)


def _train(
    name, workdir, cfg: TrainConfig, dataset, earlier, resume_dir, world, seed_group
) -> TrainResult:
    version = open_training_version(workdir, name, dataset)
    check_features(version, cfg)
    config = cfg.model_dump(mode="json")
    config_hash = manifest.config_hash(cfg)
    if earlier:
        run_id, run_dir = earlier["run_id"], resume_dir
        last = checkpoint.latest_checkpoint(run_dir / "checkpoints")
        state = checkpoint.load(last) if last else None
        # refused before the run's manifest or catalog row is touched
        check_resumable(
            earlier["config_hash"], state and state["world_size"], config_hash, world.size
        )
        threads = state["threads"] if state else cfg.threads
    else:
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
        run_id = world.broadcast(f"train-{stamp}")
        run_dir = workdir / "training" / run_id
        last, state, threads = None, None, cfg.threads
    if world.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    world.barrier()
    setup = _prepare(cfg, version, run_dir, world, threads, config_hash)
    data, trainer = setup.trainer.data, setup.trainer
    if earlier:
        plan = earlier.get("plan")  # fixed when the run started (older runs had none)
    else:
        plan = _plan(name, version, setup)
        if plan["over_budget"]:
            if world.is_main:
                shutil.rmtree(run_dir, ignore_errors=True)  # nothing of the run was written
            check_budget(plan)
    record: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "plan": plan,
        "seed_group": seed_group,
        "objective": cfg.objective,
        "dataset": {
            "name": name,
            "hash": version.dataset_hash,
            "manifest_path": str(version.path / "manifest.json"),
            "manifest_sha256": manifest.file_sha256(version.path / "manifest.json"),
            "shards_verified": len(version.manifest["shards"]),
            "records": {
                "train": len(data.train),
                "validation": len(data.validation),
                "train_skipped": data.train.skipped,
                "validation_skipped": data.validation.skipped,
                "skipped_by": {
                    "train": data.train.skipped_by,
                    "validation": data.validation.skipped_by,
                },
            },
        },
        "code": manifest.code(),
        "config": config,
        "config_hash": config_hash,
        "seeds": {
            "seed": cfg.seed,
            "model_init": cfg.seed,
            "per_rank": "seed + rank after model init (dropout)",
            "sampler": "numpy default_rng([seed, epoch])",
        },
        "packages": None,
        "environment": manifest.environment(world.size, world.backend, world.device),
        "determinism": manifest.determinism(),
        "base_model": setup.base_model,
        "tokenizer": setup.tokenizer_record.as_dict(),
        "labels": data.labels if cfg.objective == "classification" else None,
        "started_at": earlier["started_at"] if earlier else manifest.now(),
        "resumed_from": [*(earlier or {}).get("resumed_from", []), *([str(last)] if last else [])],
    }
    catalog = Catalog.open(workdir) if world.is_main else None
    if world.is_main:
        record["packages"] = manifest.package_lock(run_dir)
        manifest.write(run_dir, record)
        training_runs.start(
            catalog,
            run_id=run_id,
            dataset_hash=version.dataset_hash,
            name=name,
            objective=cfg.objective,
            config_hash=config_hash,
            manifest_path=str(run_dir / manifest.MANIFEST_FILE),
            world_size=world.size,
        )
    try:
        reset_peak_memory(world.device)
        began = time.perf_counter()
        progress = trainer.fit(state)
        test_stream = data.final_test()  # model selection is over: the test split, once
        test = trainer.evaluate(test_stream) if len(test_stream) else None
        measured = _measured(progress, time.perf_counter() - began, world)  # every rank
        record["dataset"]["records"].update(test=len(test_stream), test_skipped=test_stream.skipped)
        record["dataset"]["records"]["skipped_by"]["test"] = test_stream.skipped_by
    except BaseException as error:
        if world.is_main:
            record.update(
                status="failed",
                error=f"{type(error).__name__}: {error}",
                finished_at=manifest.now(),
            )
            manifest.write(run_dir, record)
            training_runs.finish(catalog, run_id, "failed", error=record["error"])
        raise
    if world.is_main:
        model_path = run_dir / MODEL_FILE
        checkpoint.save_atomic(
            {"model": trainer.model.state_dict(), "labels": data.labels}, model_path
        )
        (run_dir / METRICS_FILE).write_text(
            "".join(manifest.strict_json(entry) + "\n" for entry in progress.history)
        )
        plots.loss_curves(
            progress.history, run_dir / CURVES_FILE, f"{name} · {run_id}", trainer.lr_schedule()
        )
        saved = sorted((run_dir / "checkpoints").glob("*.pt"))
        record.update(
            status="completed",
            model=manifest.files_with_hashes([model_path], run_dir)[0],
            checkpoints=manifest.files_with_hashes(saved, run_dir),
            metrics={
                "history": progress.history,
                "file": METRICS_FILE,
                "curves": CURVES_FILE,
                "steps": progress.step,
                "epochs_completed": progress.epoch,
                "best_step": progress.best_step,
                "best_validation_loss": None if progress.best_step is None else progress.best_loss,
                "restored_best": cfg.restore_best and progress.best_step is not None,
                "stopped_early": progress.stopped_early,
                "clipped_steps": progress.clipped_steps,
                "nonfinite_steps": progress.nonfinite_steps,
                "overflow_steps": progress.overflow_steps,
                "test": test,
                "test_evaluations": 1 if test else 0,
                "measured": measured,
            },
            finished_at=manifest.now(),
        )
        path = manifest.write(run_dir, record)
        training_runs.finish(
            catalog,
            run_id,
            "completed",
            manifest_sha256=manifest.file_sha256(path),
            best_step=progress.best_step,
            test_metrics=_scalars(test),
        )
        if seed_group:
            record_run(seed_group, path)
    record = world.broadcast(record)
    return TrainResult(run_id, run_dir, record)


@dataclass(frozen=True)
class Setup:
    """What a run, or its plan, builds before the first step."""

    trainer: Trainer
    tokenizer_record: TokenizerRecord
    base_model: dict | None


def _prepare(cfg: TrainConfig, version, run_dir: Path, world, threads, config_hash="") -> Setup:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    if threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    checkpoint.seed_everything(cfg.seed)
    data = TrainingData(version, cfg)
    tokenizer, tokenizer_record = _tokenizer(cfg, data, run_dir, world)
    model, base_model = build_model(cfg, len(tokenizer), len(data.labels))
    checkpoint.seed_everything(cfg.seed + world.rank)  # dropout differs by rank, not the init
    batcher = Batcher(tokenizer, cfg, data.labels)
    trainer = Trainer(cfg, data, model, batcher, world, run_dir, config_hash)
    return Setup(trainer, tokenizer_record, base_model)


def _plan(name: str, version, setup: Setup) -> dict[str, Any]:
    """The plan every rank agrees on: the slowest rank's timings, the largest peak."""
    trainer, world = setup.trainer, setup.trainer.world
    measured = None
    if trainer.cfg.probe_steps:
        every = world.gather(measure(trainer))
        measured = max(every, key=lambda m: m["seconds_per_step"])
        measured["peak_memory_bytes"] = max(m["peak_memory_bytes"] for m in every)
    plan = make_plan(name, version, trainer, setup.tokenizer_record, setup.base_model, measured)
    return world.broadcast(plan)


def plan(config_path: str | Path, dataset: str = "latest") -> dict[str, Any]:
    """The plan `train` would fix for this config and version, measured in a scratch folder;
    nothing is written to the work folder or the catalog."""
    run_config = load_run_config(config_path)
    cfg = run_config.train or TrainConfig()
    world = distributed.start(cfg.device)
    try:
        version = open_training_version(run_config.workdir, run_config.name, dataset)
        check_features(version, cfg)
        with tempfile.TemporaryDirectory(prefix="thresher-plan-") as scratch:
            setup = _prepare(cfg, version, Path(scratch), world, cfg.threads)
            return _plan(run_config.name, version, setup)
    finally:
        distributed.stop(world)


def _measured(progress, seconds: float, world) -> dict[str, Any]:
    """What the run took (training, its evaluations and the test pass: what the plan
    projects), beside what its plan projected."""
    peak = max(world.gather(peak_memory(world.device)))
    return {
        "wall_seconds": seconds,
        "seconds_per_step": progress.train_seconds / progress.step if progress.step else None,
        "peak_memory_bytes": peak,
        "memory_kind": memory_kind(world.device),
    }


def _tokenizer(cfg: TrainConfig, data: TrainingData, run_dir: Path, world):
    if cfg.tokenizer.kind == "minilm":
        return load_minilm(cfg.tokenizer)
    folder = run_dir / "tokenizer"
    if world.is_main and not (folder / "tokenizer.json").exists():
        texts = (example.text for example in data.train.examples(np.arange(len(data.train))))
        train_bpe(texts, cfg.tokenizer, folder)
    world.barrier()
    return load_bpe(cfg.tokenizer, folder)


def _earlier_run(run_dir: Path) -> dict[str, Any]:
    path = run_dir / manifest.MANIFEST_FILE
    if not path.exists():
        raise DataError(
            f"{run_dir}: no {manifest.MANIFEST_FILE}; --resume takes a training run folder"
        )
    earlier = json.loads(path.read_text())
    if earlier["status"] == "completed":
        raise DataError(
            f"run {earlier['run_id']} in {run_dir} has completed; there is nothing to resume"
        )
    return earlier


def _scalars(metrics: dict[str, Any] | None) -> dict[str, float] | None:
    if metrics is None:
        return None
    return {key: value for key, value in metrics.items() if isinstance(value, int | float)}


def train_seeds(
    config_path: str | Path, dataset: str, seeds: list[int]
) -> tuple[list[TrainResult], Path]:
    """Train the config under each seed on one version; return the runs and the summary
    (which each run rewrites as it completes)."""
    checked_seeds(seeds)
    run_config = load_run_config(config_path)
    workdir = Path(run_config.workdir).resolve()
    dataset_hash = Catalog.open(workdir).version(dataset, run_config.name).dataset_hash
    group_id = f"seeds-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    summary = workdir / "training" / group_id / SUMMARY_FILE
    group = {"id": group_id, "seeds": seeds, "summary": str(summary)}
    results: list[TrainResult] = []
    first = except_seed(_train_section(config_path))
    for seed in seeds:
        if except_seed(_train_section(config_path)) != first:
            raise ConfigError(
                f"{config_path} changed while seed group {group_id} was training: its runs "
                "must differ in the seed alone; start the group again"
            )
        results.append(train(config_path, dataset_hash, seed=seed, seed_group=group))
    return results, summary


def _train_section(config_path: str | Path) -> dict[str, Any]:
    return (load_run_config(config_path).train or TrainConfig()).model_dump(mode="json")
