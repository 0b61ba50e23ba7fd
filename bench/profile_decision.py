"""Peak RSS and seconds of a by-key stage's one global step (its `decide`), alone in this
process, on what its parts and key partitions found for the spine bench's records: the step
that holds whole-dataset state (issue 22's budget: about 100 bytes a record).

The stage's input is bench/profile_stages.py's output of `--after` (run that first). Its keys,
reduce and exchanges run here once over parts of `runner.part_rows` records, each step's
output written under bench/out/profile/N/<stage>-found (kept for later runs); then `decide`
runs with profile_stages' sampler, which keeps the peak RSS of each of its phases (PHASES: a
phase's peak includes what the decision already held), and the decisions are written.

    .venv/bin/python bench/profile_decision.py --records 3000000 --stage near_dedup --after exact_dedup

Exact and MinHash dedup decide by connected component since issue 58 (no one global step):
their decision's tasks are measured by a run's summary (`steps.<stage>`: `decide_peak_rss_mb`,
`resolve_peak_rss_mb`, `step_seconds`). Here MinHash's one-task decision runs only with
`dedup.minhash.related_threshold` set, the one case that still decides once (`--related`).
"""

from __future__ import annotations

import argparse
import shutil
import time
from importlib import import_module
from pathlib import Path

import polars as pl
from profile_stages import Sampler

from pipeline.config import config_hash
from pipeline.config.loader import load_run_config
from pipeline.registry import STAGES
from pipeline.stage import RunContext, key_partition, sent_to

OUT = Path(__file__).resolve().parent / "out" / "profile"
PHASES = {  # module: the functions timed as phases of a decision
    "pipeline.dedup.near": ["_members_and_pairs", "_evidence_similarity", "_measure_in_parts"],
    "pipeline.dedup.duplicates": ["numbered", "resolve", "decide"],
    "pipeline.dedup.label_conflicts": ["settle"],
}


def found_by_steps(by_key, records: Path, cfg, ctx: RunContext, folder: Path) -> Path:
    """Run keys, reduce and the exchanges over parts, as the runner does (one process);
    return the folder of what the last step found."""
    rows = pl.scan_parquet(records / "*.parquet").select(pl.len()).collect().item()
    size = ctx.config.runner.part_rows
    parts = -(-rows // size)
    pieces = [pl.scan_parquet(records / "*.parquet").slice(p * size, size) for p in range(parts)]
    shutil.rmtree(folder, ignore_errors=True)
    step = folder / "keys"
    step.mkdir(parents=True)
    for p, piece in enumerate(pieces):
        keys = by_key.keys(piece, cfg, ctx).with_columns(pl.lit(p, pl.UInt32).alias("_part"))
        keys.write_parquet(step / f"part-{p:05d}.parquet")
    keys = pl.scan_parquet(step / "*.parquet")
    dtype = keys.collect_schema()["_key"]
    before, step = step, folder / "reduce"
    step.mkdir()
    for k in range(parts):
        partition = keys.filter(key_partition(pl.col("_key"), parts, dtype) == k)
        by_key.reduce(partition, cfg).write_parquet(step / f"partition-{k:05d}.parquet")
    for number, exchange in enumerate(by_key.exchanges):
        before, step = step, folder / f"x{number}"
        step.mkdir()
        incoming = pl.scan_parquet(before / "*.parquet")
        for p, piece in enumerate(pieces):
            exchange(piece, sent_to(incoming, p), cfg, ctx).write_parquet(
                step / f"part-{p:05d}.parquet"
            )
        print(f"  {exchange.__name__} done", flush=True)
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--stage", default="near_dedup")
    parser.add_argument("--after", default="exact_dedup")
    parser.add_argument("--again", action="store_true", help="rerun the steps before decide")
    parser.add_argument("--related", type=float, help="dedup.minhash.related_threshold")
    args = parser.parse_args()
    root = OUT / str(args.records)
    cfg = load_run_config(root / "project" / "thresher.yaml")
    if args.related is not None:
        minhash = cfg.dedup.minhash.model_copy(update={"related_threshold": args.related})
        cfg = cfg.model_copy(update={"dedup": cfg.dedup.model_copy(update={"minhash": minhash})})
    ctx = RunContext(
        run_id="profile", run_dir=root / "run", config=cfg, config_hash=config_hash(cfg)
    )
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    by_key = STAGES[args.stage].function
    settings = STAGES[args.stage].settings(cfg)
    if by_key.by_components(settings):
        raise SystemExit(f"{args.stage} decides by component here: see this file's docstring")
    records = root / args.after
    folder = root / f"{args.stage}-found"
    started = time.perf_counter()
    if args.again or not (folder / "done").exists():
        found = found_by_steps(by_key, records, settings, ctx, folder)
        (folder / "done").write_text(found.name)
        print(f"steps before decide: {time.perf_counter() - started:.0f} s", flush=True)
    found = folder / (folder / "done").read_text()

    sampler = Sampler()
    for module_name, names in PHASES.items():
        module = import_module(module_name)
        for name in names:
            if hasattr(module, name):  # an older checkout (PYTHONPATH) may lack some
                setattr(module, name, sampler.timed(name, getattr(module, name)))
    time.sleep(0.2)
    before = max(sampler.peaks.values())
    started = time.perf_counter()
    sampler.phase = "decide"
    decided = by_key.decide(
        pl.scan_parquet(found / "*.parquet"),
        pl.scan_parquet(records / "*.parquet"),
        settings,
        ctx,
    )
    seconds = time.perf_counter() - started
    time.sleep(0.2)
    peak = max(sampler.peaks.values())
    decided.decisions.write_parquet(root / f"{args.stage}-decisions.parquet")
    print(
        f"{args.stage} decide: {seconds:.1f} s, peak {peak:,.0f} MB "
        f"(started at {before:,.0f} MB), {decided.decisions.height:,} decisions, "
        f"{decided.decisions.estimated_size() / 2**20:,.0f} MB held; {decided.stats}"
    )


if __name__ == "__main__":
    main()
