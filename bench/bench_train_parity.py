"""Precision and gradient-checkpointing parity, measured as a user measures it: `thresher
train` once per setting on one published version, then `thresher train compare`.

The runs fine-tune MiniLM as the demo does (its version and train section, `make demo`
first) for --steps steps, each in its own process, in a copy of the demo's work folder
(the demo's catalog is left alone). Variants: fp32 (the baseline), bf16 autocast, and fp32
with gradient checkpointing. Prints each comparison and a Markdown table for
bench/README.md.

    .venv/bin/python bench/bench_train_parity.py [--config demo/thresher.yaml] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
THRESHER = str(Path(sys.executable).with_name("thresher"))
VARIANTS = {
    "fp32": {"precision": "fp32"},
    "bf16": {"precision": "bf16"},
    "fp32-checkpointing": {"precision": "fp32", "gradient_checkpointing": True},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "demo" / "thresher.yaml")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "parity")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    config = yaml.safe_load(args.config.read_text())
    workdir = (args.config.parent / config["workdir"]).resolve()
    if not (workdir / "catalog.db").exists():
        sys.exit(f"no published version in {workdir}: run `make demo` first")
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    shutil.copytree(workdir, args.out / "work", ignore=shutil.ignore_patterns("training", "cache"))
    config["workdir"] = str(args.out / "work")
    if isinstance(config.get("sources"), str):  # a sources file beside the demo's config
        config["sources"] = str((args.config.parent / config["sources"]).resolve())
    base = {
        **config["train"],
        "max_steps": args.steps,
        "eval_every": args.steps // 2,
        "checkpoint_every": args.steps * 10,
        "log_every": 1,
        "threads": args.threads,
        "early_stopping": None,
    }
    runs = {}
    for name, changes in VARIANTS.items():
        path = args.out / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**config, "train": {**base, **changes}}, sort_keys=False))
        began = time.perf_counter()
        done = subprocess.run(
            [THRESHER, "train", "--config", str(path), "--json", "--quiet"],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout.splitlines()[0])
        runs[name] = {"summary": summary, "command_seconds": time.perf_counter() - began}
        print(f"{name}: {summary['run_id']} in {runs[name]['command_seconds']:.1f} s", flush=True)

    rows = []
    for variant in ("bf16", "fp32-checkpointing"):
        plot = args.out / f"fp32-vs-{variant}.png"
        done = subprocess.run(
            [THRESHER, "train", "compare", runs["fp32"]["summary"]["run_dir"],
             runs[variant]["summary"]["run_dir"], "--plot", str(plot), "--json"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        print(done.stderr)
        found = json.loads(done.stdout)
        loss, test = found["train_loss"], found["test"]
        rows.append(
            f"| fp32 → {variant} | {loss['max_abs_difference']:.4f} (step {loss['max_at_step']}) "
            f"| {loss['at_end']:+.4f} | {found['validation']['loss']['at_end']:+.4f} "
            f"| {test['accuracy']['a']:.4f} → {test['accuracy']['b']:.4f} "
            f"| {found['seconds_per_step']['a'] * 1000:,.0f} → "
            f"{found['seconds_per_step']['b'] * 1000:,.0f} ms ({found['seconds_per_step']['ratio']:.2f}×) "
            f"| {found['peak_memory_bytes']['a'] / 2**20:,.0f} → "
            f"{found['peak_memory_bytes']['b'] / 2**20:,.0f} MiB ({found['peak_memory_bytes']['ratio']:.2f}×) |"
        )
    print(
        "\n| comparison (A → B) | train loss, largest abs B − A | at the last step | "
        "validation loss at the end | test accuracy | time per step | peak RSS |\n"
        "|---|---|---|---|---|---|---|"
    )
    print("\n".join(rows))
    (args.out / "runs.json").write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
