"""Benchmark of the runners: the governance stage mapped over parts on Prefect's thread pool
and on a Dask cluster, against one in-process `govern` call on the same records.

One process measures every side on the same ingested records, in the same run:

- **plain**: one `govern(frame, cfg.policy, ctx)` call on the whole ingested frame, no
  Prefect, then its outputs written as `flows/curate.py` writes them (kept records sunk with
  the run-folder writer settings, ledger events, review items);
- **threads**: the `stage-parts` flow of flows/curate.py (for governance) on `ThreadPoolTaskRunner(2)`
  (`task_runner(RunnerConfig(kind="local", workers=2))`), parts of `part_rows` records;
- **dask**: the same flow on `DaskTaskRunner(address=…)` against a
  `distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`.

The Prefect API is a temporary server (`prefect_test_harness`, SQLite) and the Dask cluster
is started once; neither start-up is timed. Every run is timed wall-clock around the call
(for the mapped sides, the flow call: flow run, Dask client, task runs, their API calls and
the parts' own reads and writes), after one untimed first run of each side; sides are
interleaved, 3 repeats, median. A flow hook also notes when the flow run is Completed in the
API: Prefect (3.9) then still joins the flow run's heartbeat thread, which sleeps in 1 s
steps, so a caller waits up to a second more. Every run's kept records (all columns),
review-item count and ledger-event count must equal the plain call's, or the bench fails. A
flow mapping a no-op task over as many parts gives the orchestration cost alone. CPU time
is summed over this process and its descendants (Prefect server, Dask nannies and workers);
peak RSS is this process's and each Dask worker's high-water mark, reset before each run.

The input is bench_spine.py's (real text, repeated with variation, cached under
bench/out/input/), ingested once with `pipeline.ingest.ingest`. The policy is the default one
(secrets quarantined; e-mails and phones redacted, card numbers and IBANs quarantined).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import polars as pl  # noqa: E402
import psutil  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(ROOT), str(BENCH_DIR)]

import bench_spine  # noqa: E402  (the input generator)

OUT = BENCH_DIR / "out"
WORK = OUT / "runners-work"


# ---------------------------------------------------------------------------------------------
# Measuring: peak RSS (Linux VmHWM, reset per run) and CPU time of every process involved


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds() -> float:
    """CPU time so far of this process and its live descendants (the Prefect server, the
    Dask nannies and workers)."""
    total = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _completion_hook(marks: list[float]):
    def hook(flow, flow_run, state) -> None:
        marks.append(time.perf_counter())

    return hook


class Meter:
    """Wall clock, CPU time of all processes, and peak RSS of this process and (for Dask)
    of each worker, over one run."""

    def __init__(self, client=None):
        self.client = client
        self.marks: list[float] = []
        # a flow hook: when the flow run is Completed in the API, before Prefect joins its
        # heartbeat thread (which sleeps in 1 s steps). It holds only the list: the flow,
        # hooks included, travels to the Dask workers with each task's context.
        self.on_completion = _completion_hook(self.marks)

    def __enter__(self) -> Meter:
        if self.client is not None:
            self.client.run(_reset_peak_rss)
        _reset_peak_rss()
        self.rss_before_mb = psutil.Process().memory_info().rss / 2**20
        self.cpu = _cpu_seconds()
        self.marks.clear()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.started
        self.completed = self.marks[0] - self.started if self.marks else self.seconds
        self.cpu = _cpu_seconds() - self.cpu
        self.peak_mb = _peak_rss_mb()
        self.worker_peak_mb = (
            sorted(self.client.run(_peak_rss_mb).values()) if self.client is not None else []
        )


# ---------------------------------------------------------------------------------------------
# The sides


def make_config(data: Path):
    from pipeline.config import RunConfig, SourceDeclaration

    source = SourceDeclaration(
        name="bench",
        location="data/*.jsonl",
        format="jsonl",
        fields={"text": "text", "id": "id", "group": "group", "timestamp": "ts", "label": "label"},
        license="CC-BY-4.0",
        consent="public-release",
        owner="bench",
        base_dir=str(data),
    )
    return RunConfig(name="bench", workdir=str(WORK), sources=[source])


def new_plan(cfg, catalog, runner=None):
    """A run planned as the flow plans it, slimmed as parts_stage_task slims it for the parts."""
    from dataclasses import replace

    from flows.run_plan import plan_run

    if runner is not None:
        cfg = cfg.model_copy(update={"runner": runner})
    plan = plan_run(cfg, catalog)
    return replace(plan, eval_sets=(), locked_test=None, frozen_cutoffs=None)


def run_plain(plan, input_dir: str, meter: Meter) -> None:
    """One govern call on the whole frame, its outputs written as the flow writes them."""
    from pipeline.core import ledger
    from pipeline.govern.stage import govern
    from pipeline.ingest.stage import INTERMEDIATE_PARQUET

    with meter:
        frame = pl.scan_parquet(Path(input_dir) / "*.parquet")
        result = govern(frame, plan.config.policy, plan.context(with_parent=False))
        out = plan.stage_dir("govern")
        out.mkdir(parents=True, exist_ok=True)
        result.frame.sink_parquet(out / "part-00000.parquet", **INTERMEDIATE_PARQUET)
        ledger.write_part(result.events, plan.ledger_dir, "2-govern-00000")
        review = plan.stage_dir("govern-review") / "part-00000.parquet"
        review.parent.mkdir(parents=True, exist_ok=True)
        result.review_items.write_parquet(review)


def run_mapped(plan, input_dir: str, records: int, meter: Meter) -> int:
    """The stage-parts flow of governance on the runner of the plan's config, as
    parts_stage_task calls it."""
    from flows.curate import stage_parts, task_runner

    runner = task_runner(plan.config.runner)
    with meter:
        offsets = list(range(0, max(records, 1), plan.config.runner.part_rows))
        parts = stage_parts.with_options(task_runner=runner, on_completion=[meter.on_completion])(
            plan, "govern", "part", {"part": list(range(len(offsets))), "offset": offsets},
            {"input_dir": input_dir},
        )  # fmt: skip
    return len(parts)


def _noop_task():
    from prefect import task

    from flows.curate import TASK_OPTIONS

    @task(name="noop_part", **TASK_OPTIONS)
    def noop_part(plan, input_dir: str, part: int, offset: int) -> dict:
        return {"stats": {}, "review_items": ""}

    return noop_part


def run_noop(plan, input_dir: str, records: int, meter: Meter) -> int:
    """The same map with a task that does nothing: the orchestration cost alone."""
    from prefect import flow, unmapped

    from flows.curate import task_runner

    noop_part = _noop_task()

    @flow(name="noop-parts")
    def noop_parts(plan, input_dir: str, records: int) -> list:
        offsets = range(0, max(records, 1), plan.config.runner.part_rows)
        futures = noop_part.map(
            plan, unmapped(input_dir), part=list(range(len(offsets))), offset=list(offsets)
        )
        return futures.result()

    runner = task_runner(plan.config.runner)
    with meter:
        parts = noop_parts.with_options(task_runner=runner, on_completion=[meter.on_completion])(
            plan, input_dir, records
        )
    return len(parts)


# ---------------------------------------------------------------------------------------------
# Checking: every side's governed output equals the plain call's


def governed_output(plan) -> dict:
    kept = pl.read_parquet(plan.stage_dir("govern") / "*.parquet").sort("record_id")
    review = pl.read_parquet(plan.stage_dir("govern-review") / "*.parquet")
    events = pl.scan_parquet(plan.ledger_dir / "2-govern-*.parquet").select(pl.len()).collect()
    return {"kept": kept, "review_items": review.height, "events": events.item()}


def check_same(reference: dict, found: dict, label: str) -> None:
    """Fail the bench unless a side's governed output is the plain call's."""
    ids, ref_ids = found["kept"]["record_id"], reference["kept"]["record_id"]
    checks = [
        (ids.equals(ref_ids), f"kept {ids.len():,} records, plain {ref_ids.len():,}"),
        (found["kept"].equals(reference["kept"]), "kept records differ from plain's"),
        (
            found["review_items"] == reference["review_items"],
            f"{found['review_items']} review items, plain {reference['review_items']}",
        ),
        (
            found["events"] == reference["events"],
            f"{found['events']} ledger events, plain {reference['events']}",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise SystemExit(f"{label}: {message}")


# ---------------------------------------------------------------------------------------------


def _median(runs: list[dict]) -> dict:
    ordered = sorted(runs, key=lambda run: run["seconds"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["all_seconds"] = [round(run["seconds"], 3) for run in runs]
    chosen["peak_mb"] = max(run["peak_mb"] for run in runs)
    chosen["worker_peak_mb"] = max((run["worker_peak_mb"] for run in runs), default=[])
    chosen["cpu"] = statistics.median(run["cpu"] for run in runs)
    chosen["completed_seconds"] = statistics.median(run["completed_seconds"] for run in runs)
    chosen["rss_before_mb"] = statistics.median(run["rss_before_mb"] for run in runs)
    return chosen


def _markdown(rows: list[dict], n: int, plain: dict, noop: dict) -> str:
    lines = [
        "| side | part_rows | parts | seconds (median) | flow Completed s | first run s "
        "| records/s | × plain | overhead vs plain s | per part ms | no-op map s (Completed) "
        "| CPU s, all processes | peak RSS MB: main (before); workers |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        runs = row["all_seconds"]
        spread = f" ({min(runs):.2f}–{max(runs):.2f})" if len(runs) > 1 else ""
        mapped = row["side"] != "plain"
        overhead = row["seconds"] - plain["seconds"]
        empty = noop.get((row["side"], row["part_rows"]))
        workers = " / ".join(f"{mb:,.0f}" for mb in row["worker_peak_mb"])
        rows_given = f"{row['part_rows']:,}" if mapped else "—"
        done = f"{row['completed_seconds']:.2f}" if mapped else "—"
        over = f"{overhead:+.2f}" if mapped else "—"
        per_part = f"{overhead / row['parts'] * 1000:+,.0f}" if mapped else "—"
        noop_s = f"{empty['seconds']:.2f} ({empty['completed_seconds']:.2f})" if empty else "—"
        peaks = f"{row['peak_mb']:,.0f} ({row['rss_before_mb']:,.0f})"
        peaks += f"; {workers}" if workers else ""
        lines.append(
            f"| {row['side']} | {rows_given} | {row['parts']} "
            f"| {row['seconds']:.2f}{spread} | {done} | {row['first_seconds']:.2f} "
            f"| {n / row['seconds']:,.0f} | {row['seconds'] / plain['seconds']:.2f} "
            f"| {over} | {per_part} | {noop_s} | {row['cpu']:.1f} | {peaks} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20,000 records, for a smoke run")
    parser.add_argument("--files", type=int, default=10, help="jsonl files of the input")
    parser.add_argument(
        "--part-rows", default="50000,25000", help="part sizes to map with, comma-separated"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    parser.add_argument(
        "--json", type=Path, default=OUT / "runners" / "figures.json", help="figures go here"
    )
    args = parser.parse_args()
    n = 20_000 if args.quick else args.records
    part_rows = [int(value) for value in args.part_rows.split(",") if value.strip()]

    data = bench_spine.input_dir(n, args.files)
    described = bench_spine.describe_input(n)
    print(f"input: {json.dumps(described)}", file=sys.stderr)

    from distributed import Client, LocalCluster
    from prefect.logging.configuration import setup_logging
    from prefect.testing.utilities import prefect_test_harness

    from data_catalog.catalog import Catalog
    from pipeline.config import RunnerConfig
    from pipeline.ingest.stage import ingest

    shutil.rmtree(WORK, ignore_errors=True)
    cfg = make_config(data)
    catalog = Catalog.open(WORK)
    setup_logging()
    started = time.perf_counter()
    with prefect_test_harness(server_startup_timeout=120):
        server_seconds = time.perf_counter() - started
        # ingest once; every side reads these parts
        ingest_plan = new_plan(cfg, catalog)
        input_dir = ingest_plan.stage_dir("ingest")
        started = time.perf_counter()
        ingested = ingest(cfg.source_list, ingest_plan.context(), input_dir)
        ingest_seconds = time.perf_counter() - started
        records = pl.scan_parquet(input_dir / "*.parquet").select(pl.len()).collect().item()
        os.sync()
        started = time.perf_counter()
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            cluster_seconds = time.perf_counter() - started
            sides = [("plain", None, None)]
            for rows in part_rows:
                sides.append(
                    ("threads", rows, RunnerConfig(kind="local", workers=2, part_rows=rows))
                )
            for rows in part_rows:
                sides.append(
                    (
                        "dask",
                        rows,
                        RunnerConfig(
                            kind="dask", address=cluster.scheduler_address, part_rows=rows
                        ),
                    )
                )
            reference = None
            runs: dict[tuple, list[dict]] = {(side, rows): [] for side, rows, _ in sides}
            first: dict[tuple, float] = {}
            noop_runs: dict[tuple, list[float]] = {(s, r): [] for s, r, c in sides if c}
            for number in range(args.repeat + 1):  # run 0: the first, untimed in the medians
                for side, rows, runner in sides:
                    label = f"{side}-{rows or 'whole'}-{number}"
                    print(f"{label} …", file=sys.stderr)
                    plan = new_plan(cfg, catalog, runner)
                    meter = Meter(client if side == "dask" else None)
                    if side == "plain":
                        run_plain(plan, str(input_dir), meter)
                        parts = 1
                    else:
                        parts = run_mapped(plan, str(input_dir), records, meter)
                    found = governed_output(plan)
                    if reference is None:
                        reference = found
                    check_same(reference, found, label)
                    shutil.rmtree(plan.run_dir)
                    result = {
                        "side": side,
                        "part_rows": rows,
                        "parts": parts,
                        "seconds": meter.seconds,
                        "completed_seconds": meter.completed,
                        "rss_before_mb": meter.rss_before_mb,
                        "cpu": meter.cpu,
                        "peak_mb": meter.peak_mb,
                        "worker_peak_mb": meter.worker_peak_mb,
                    }
                    if number == 0:
                        first[(side, rows)] = meter.seconds
                    else:
                        runs[(side, rows)].append(result)
                    if runner is not None:
                        plan = new_plan(cfg, catalog, runner)
                        empty = Meter(client if side == "dask" else None)
                        run_noop(plan, str(input_dir), records, empty)
                        shutil.rmtree(plan.run_dir)
                        if number > 0:
                            noop_runs[(side, rows)].append((empty.seconds, empty.completed))

    rows = []
    for key, side_runs in runs.items():
        row = _median(side_runs)
        row["first_seconds"] = first[key]
        rows.append(row)
    noop = {
        key: {
            "seconds": statistics.median(wall for wall, _ in values),
            "completed_seconds": statistics.median(done for _, done in values),
            "all_seconds": [round(wall, 3) for wall, _ in values],
        }
        for key, values in noop_runs.items()
    }
    plain = rows[0]
    print()
    print(_markdown(rows, records, plain, noop))
    print(
        f"\nrecords: {records:,} ingested ({ingest_seconds:.1f} s, once); kept "
        f"{reference['kept'].height:,}, review items {reference['review_items']:,}, "
        f"govern events {reference['events']:,}: the same on every side and run. "
        f"Not timed: Prefect server start {server_seconds:.1f} s, "
        f"Dask cluster start {cluster_seconds:.1f} s."
    )
    figures = {
        "machine": {
            "cpus": os.cpu_count(),
            "polars_threads": pl.thread_pool_size(),
            "python": platform.python_version(),
            "polars": pl.__version__,
        },
        "code": bench_spine._code_version(),
        "input": described,
        "records": records,
        "ingest_stats": ingested.stats,
        "kept": reference["kept"].height,
        "review_items": reference["review_items"],
        "govern_events": reference["events"],
        "server_start_seconds": round(server_seconds, 2),
        "cluster_start_seconds": round(cluster_seconds, 2),
        "runs": rows,
        "noop": [
            {"side": side, "part_rows": part, **values} for (side, part), values in noop.items()
        ],
        "maxrss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    shutil.rmtree(WORK, ignore_errors=True)
    print(f"figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
