"""What a part costs beyond its work: a no-op step mapped over many parts, side by side in one
run, the way steps ran before issue 52 (a Prefect task run per part, on Prefect's thread
pool or prefect-dask's DaskTaskRunner, reporting to a Prefect server) and the way
flows/runner runs them now (plain functions on a pool of processes or on Dask).

Each side maps a step that sleeps `--work-ms` (default 0: the overhead alone) over `--parts`
items, after one untimed warm-up map; the figure is the median of `--repeat` maps, divided
by the parts and multiplied by the workers (what one worker spends on a part besides its
work). The Prefect server is a temporary one (`prefect_test_harness`), the Dask cluster one
`LocalCluster(2 workers, 1 thread each)`; neither start is timed.

    .venv/bin/python bench/bench_part_overhead.py --parts 64 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flows.runner import workers  # noqa: E402
from pipeline.config import RunnerConfig  # noqa: E402

WORKERS = 2


def step(work_ms: int) -> int:
    if work_ms:
        time.sleep(work_ms / 1000)
    return work_ms


def timed(map_once, parts: int, repeat: int) -> float:
    map_once()  # warm-up: processes, imports, connections
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        map_once()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def prefect_sides(parts: int, work_ms: int, repeat: int, address: str) -> dict[str, float]:
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect.testing.utilities import prefect_test_harness
    from prefect_dask import DaskTaskRunner

    step_task = task(step, name="step", persist_result=False)
    results = {}
    with prefect_test_harness():
        for label, runner in [
            ("before: a Prefect task per part, threads", ThreadPoolTaskRunner(WORKERS)),
            ("before: a Prefect task per part, Dask", DaskTaskRunner(address=address)),
        ]:

            @flow(task_runner=runner)
            def mapped() -> None:
                futures = step_task.map([work_ms] * parts)
                for future in futures:
                    future.result()

            results[label] = timed(mapped, parts, repeat)
    return results


def runner_sides(parts: int, work_ms: int, repeat: int, address: str) -> dict[str, float]:
    results = {}
    calls = [{"work_ms": work_ms}] * parts
    for label, runner in [
        ("now: a pool of processes", RunnerConfig(kind="local", workers=WORKERS)),
        ("now: Dask", RunnerConfig(kind="dask", address=address)),
    ]:
        with workers.opened(runner) as run_on:
            results[label] = timed(lambda: list(run_on.map(step, calls)), parts, repeat)  # noqa: B023
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=64)
    parser.add_argument("--work-ms", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=WORKERS, threads_per_worker=1, dashboard_address=None, processes=True
    ) as cluster:
        address = cluster.scheduler_address
        results = runner_sides(args.parts, args.work_ms, args.repeat, address)
        results |= prefect_sides(args.parts, args.work_ms, args.repeat, address)
    print(f"{args.parts} parts of {args.work_ms} ms of work, {WORKERS} workers, median of "
          f"{args.repeat}")  # fmt: skip
    print("| side | wall s for the map | overhead per part (ms, a worker's) |")
    print("|---|---:|---:|")
    for label, seconds in results.items():
        per_part = (seconds * WORKERS / args.parts - args.work_ms / 1000) * 1000
        print(f"| {label} | {seconds:.2f} | {per_part:.0f} |")


if __name__ == "__main__":
    main()
