"""Phase-by-phase peak RSS of the stages that still read the whole dataset in the flow's
process (issue 22), on the spine bench's records: a profile that finds what to bound next,
not a benchmark against a peer (bench_scale.py measures the whole run).

The records are ingested once (cached under bench/out/profile/N/ingest); then each stage of
`--stages` runs on the previous one's output, as flows/curate.py runs it (default config,
no Prefect), and its output is written for the next. A thread samples this process's RSS
every 0.1 s; the peak is kept per phase, a phase being the stage or one of its steps listed
in PHASES (a step's peak includes what the stage already held).

    .venv/bin/python bench/profile_stages.py --records 3000000 \\
        --stages exact_dedup near_dedup boilerplate semantic_dedup split synthetic augment contamination
    .venv/bin/python bench/profile_stages.py --records 3000000 --stages contamination --after augment
"""

from __future__ import annotations

import argparse
import functools
import threading
import time
from dataclasses import fields, replace
from importlib import import_module
from pathlib import Path

import bench_determinism
import bench_spine
import polars as pl
import psutil

from pipeline.config import config_hash
from pipeline.config.loader import load_run_config
from pipeline.ingest.stage import ingest
from pipeline.registry import STAGES
from pipeline.stage import ByKey, RunContext

OUT = Path(__file__).resolve().parent / "out" / "profile"
PHASES = {  # module: the functions and methods timed as steps
    "pipeline.dedup.near": ["_part_sketches", "_members_and_pairs", "_evidence_similarity"],
    "pipeline.dedup.duplicates": [
        "numbered", "resolve", "decide", "apply_decisions", "apply",
    ],
    "pipeline.dedup.label_conflicts": ["settle"],
    "pipeline.contamination.stage": ["_targets", "_batch_matches", "_decide", "_reviewed"],
}  # fmt: skip


class Sampler:
    def __init__(self):
        self.process, self.phase, self.peaks = psutil.Process(), "start", {}
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            rss = self.process.memory_info().rss / 2**20
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)
            time.sleep(0.1)

    def timed(self, name: str, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            outer, self.phase = self.phase, name
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - started
                print(f"  {name}: {seconds:.1f} s, peak {self.peaks.get(name, 0):,.0f} MB")
                self.phase = outer

        return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--stages", nargs="+", default=["exact_dedup", "near_dedup"])
    parser.add_argument("--after", default="ingest", help="the stage whose output is the input")
    args = parser.parse_args()
    sampler = Sampler()
    for module_name, names in PHASES.items():
        module = import_module(module_name)
        for name in names:
            owner, _, attribute = name.rpartition(".")
            target = getattr(module, owner) if owner else module
            setattr(target, attribute, sampler.timed(name, getattr(target, attribute)))

    for stage in list(STAGES.values()):  # a by-key stage's steps are phases too
        by_key = stage.function
        if isinstance(by_key, ByKey):
            steps = {
                f.name: getattr(by_key, f.name) for f in fields(ByKey) if f.name != "exchanges"
            }
            timed = {
                step: sampler.timed(f"{stage.name}.{step}", call) for step, call in steps.items()
            }
            exchanges = tuple(
                sampler.timed(f"{stage.name}.{call.__name__.lstrip('_')}", call)
                for call in by_key.exchanges
            )
            STAGES[stage.name] = replace(stage, function=ByKey(**timed, exchanges=exchanges))

    root = OUT / str(args.records)
    if not (root / "project").exists():
        bench_determinism.write_project(root / "project", bench_spine.input_dir(args.records, 100))
    cfg = load_run_config(root / "project" / "thresher.yaml")
    ctx = RunContext(
        run_id="profile", run_dir=root / "run", config=cfg, config_hash=config_hash(cfg)
    )
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    if not (root / "ingest").exists():
        ingest(cfg.source_list, ctx, root / "ingest")
    previous = root / args.after
    for name in args.stages:
        sampler.peaks.clear()
        sampler.phase, started = name, time.perf_counter()
        result = STAGES[name](pl.scan_parquet(previous / "*.parquet"), cfg, ctx)
        (root / name).mkdir(exist_ok=True)
        result.frame.sink_parquet(root / name / "part-00000.parquet")
        counts = {k: v for k, v in result.stats.items() if isinstance(v, int | float)}
        print(
            f"{name}: {time.perf_counter() - started:.1f} s, peak "
            f"{max(sampler.peaks.values()):,.0f} MB, {counts}",
            flush=True,
        )
        del result
        previous = root / name


if __name__ == "__main__":
    main()
