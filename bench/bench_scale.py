"""Scale benchmark: the default pipeline (semantic dedup off, as by default) through
`thresher run`, as a user runs it, on 1M, 3M or 10M records of the spine bench's real text.

For each size, runner (`local`: the run's process and its pool of processes; `dask`: a
temporary Dask cluster on this machine, `runner: {kind: dask, workers: W, memory_limit:
6GiB}`), worker count (`--workers 1 2 4`, default 2) and as many repeats as asked, one
`thresher run --json` in a fresh project, work folder and PREFECT_HOME
(bench/bench_determinism.py's `measure`): wall seconds, CPU seconds (every process of the
run, polled), records/s, peak RSS of the highest single process and of the whole process
tree (psutil polled), the dataset hash, and the summary's `steps` (seconds, peak RSS,
records in and out per step). Every run of one size must publish the same dataset hash; the
exit code is 1 when one does not. `--part-rows N` sets `runner.part_rows` of every run.

`--code-root DIR` runs another checkout's pipeline code (a worktree of an older commit) with
this venv, for the before/after ratio; that code may not report `steps`.

    .venv/bin/python bench/bench_scale.py --records 1000000 --runners local dask --repeat 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))  # bench/ is not a package

import bench_determinism  # noqa: E402
import bench_spine  # noqa: E402

OUT = BENCH_DIR / "out" / "scale"
PART_ROWS: int | None = None  # runner.part_rows of every run (--part-rows); None: the default


def run_once(
    n: int,
    files: int,
    runner: str,
    workers: int,
    label: str,
    code_root: Path | None,
    memory: str | None,
) -> dict:
    data = bench_spine.input_dir(n, files)
    folder = OUT / label
    result = _measure(label, data, runner, workers, code_root, memory)
    stdout = folder / "stdout.jsonl"
    if result["returncode"] == 0:
        lines = [line for line in stdout.read_text().splitlines() if line.startswith("{")]
        summary = json.loads(lines[-1])
        result["steps"] = summary.get("steps", {})
    result |= {"records": n, "runner": runner, "workers": workers}
    result["records_per_s"] = round(n / result["wall_s"])
    result["cpu_per_wall"] = round(result["cpu_s"] / result["wall_s"], 2)
    return result


def _measure(
    label: str, data: Path, runner: str, workers: int, code_root: Path | None, memory: str | None
) -> dict:
    """bench_determinism.measure with the runner section added to the project it writes."""
    write_project = bench_determinism.write_project

    def with_runner(project: Path, data: Path) -> Path:
        config = write_project(project, data)
        settings = json.loads(config.read_text())
        settings["runner"] = {"kind": runner, "workers": workers}
        if memory and runner != "local":
            settings["runner"]["memory_limit"] = memory
        if PART_ROWS:
            settings["runner"]["part_rows"] = PART_ROWS
        config.write_text(json.dumps(settings, indent=2) + "\n")
        return config

    bench_determinism.write_project = with_runner
    try:
        return bench_determinism.measure(label, data, code_root, OUT)
    finally:
        bench_determinism.write_project = write_project


def markdown(results: list[dict]) -> str:
    lines = [
        "| records | runner, workers | wall s | CPU s | CPU / wall | records/s "
        "| peak RSS MB (one process / tree) | dataset hash | slowest steps (s) |",
        "|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        steps = sorted(r.get("steps", {}).items(), key=lambda item: -item[1]["seconds"])[:5]
        slowest = ", ".join(f"{name} {step['seconds']:.0f}" for name, step in steps) or "—"
        lines.append(
            f"| {r['records']:,} | {r['runner']}, {r['workers']} | {r['wall_s']:.0f} "
            f"| {r['cpu_s']:.0f} | {r['cpu_per_wall']:.2f} | {r['records_per_s']:,} "
            f"| {r['peak_rss_mb']:,} / {r['peak_tree_rss_mb']:,} "
            f"| `{r.get('dataset_hash', 'failed')[:12]}` | {slowest} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--runners", nargs="+", choices=["local", "dask"], default=["local"])
    parser.add_argument("--workers", type=int, nargs="+", default=[2], help="runner.workers")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--code-root", type=Path, help="checkout whose pipeline code runs")
    parser.add_argument("--tag", default="", help="added to every run's folder name")
    parser.add_argument(
        "--worker-memory",
        default="6GiB",
        help="runner.memory_limit of each Dask worker ('' for none)",
    )
    parser.add_argument("--part-rows", type=int, help="runner.part_rows (default: the config's)")
    args = parser.parse_args()
    global PART_ROWS
    PART_ROWS = args.part_rows
    code_root = args.code_root.resolve() if args.code_root else None
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for n in args.records:
        for runner in args.runners:
            for workers, repeat in itertools.product(args.workers, range(args.repeat)):
                label = f"{args.tag}n{n}-{runner}{workers}-{repeat}"
                memory = args.worker_memory or None
                results.append(run_once(n, args.files, runner, workers, label, code_root, memory))
                print(json.dumps({k: v for k, v in results[-1].items() if k != "command"}))
    print(markdown(results))
    (OUT / f"{args.tag}results.json").write_text(json.dumps(results, indent=2) + "\n")
    failed = False
    for n in args.records:
        hashes = {r.get("dataset_hash") for r in results if r["records"] == n}
        if len(hashes) != 1 or None in hashes:
            print(f"{n:,} records: dataset hashes differ or a run failed: {hashes}")
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
