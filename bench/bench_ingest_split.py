"""Benchmark of large input files (issue 52): a JSON Lines file cut into pieces that several
worker processes read, against one task reading it whole; and a CSV file (plain and gzip)
streamed in blocks, against the code before issue 52, which read it whole.

    nice -n 10 .venv/bin/python bench/bench_ingest_split.py            # files of ~2 GB
    .venv/bin/python bench/bench_ingest_split.py --gigabytes 0.1       # a quick look

The inputs are bench_spine's records from real text (`cached_records`), repeated with fresh
ids to about `--gigabytes` each, written once under bench/out/split/ (the CSV's changelog
entries hold newlines: quoted fields over several lines). Every measurement runs in a fresh
process that calls ingest's `plan_parts` and `read_part` as the curate flow's tasks do:

- JSON Lines, one task: one part, the whole file read by one process.
- JSON Lines, in parts: parts of `--part-mb`, read by `--workers` processes
  (`ProcessPoolExecutor`, spawned); planning (the newline count) is timed apart.
- CSV (and CSV gzip): one part in one process, with this tree's code and with the code of
  `--before` (a git worktree of the commit before issue 52, first on sys.path), killed if
  its RSS passes `--before-cap-gb` (polled; an address-space limit left polars hung).

Wall time is taken from planning to the last part written; CPU time is user + system of the
process and its workers; peak RSS is ru_maxrss of each process (for parts: the largest
worker's, and the planning process's). Each side's records are digested (count and a hash of
ids, locations and content hashes), and sides reading the same file must agree. Results
are printed as a Markdown table and written to bench/out/split/figures.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out" / "split"
BASE_RECORDS = 250_000
FIELDS = {"text": "text", "id": "id", "group": "group", "timestamp": "ts", "label": "label"}


def build_inputs(gigabytes: float) -> dict[str, Path]:
    """The JSON Lines, CSV and CSV gzip files of about `gigabytes`, built once."""
    target = OUT / f"input-{gigabytes:g}gb"
    paths = {
        "jsonl": target / "records.jsonl",
        "csv": target / "records.csv",
        "csv.gz": target / "records.csv.gz",
    }
    if (target / "DONE").exists():
        return paths
    sys.path.insert(0, str(BENCH_DIR))
    import polars as pl
    from bench_spine import cached_records

    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    records = cached_records(BASE_RECORDS)
    started = time.perf_counter()
    for kind in ("jsonl", "csv"):
        with paths[kind].open("wb") as handle:
            copy = 0
            while handle.tell() < gigabytes * 1e9:
                fresh = records.with_columns(pl.col("id") + f"-{copy}")
                if kind == "jsonl":
                    fresh.write_ndjson(handle)
                else:
                    fresh.write_csv(handle, include_header=copy == 0)
                copy += 1
    with paths["csv"].open("rb") as plain, gzip.open(paths["csv.gz"], "wb", 1) as packed:
        shutil.copyfileobj(plain, packed, 16 << 20)
    (target / "DONE").write_text("built\n")
    print(f"built the inputs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return paths


# ---------------------------------------------------------------------------------------------
# One measurement, in its own process


def _read_one(part, source, out_dir: str) -> tuple[int, int]:
    """A worker's task: read one part; its rows and this worker's peak RSS so far."""
    from pipeline.ingest.stage import read_part

    rows_in, _ = read_part(part, source, Path(out_dir))
    return rows_in, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(path: Path, fmt: str, part_bytes: int, workers: int, work: Path) -> dict:
    import polars as pl

    from pipeline.config import SourceDeclaration
    from pipeline.ingest.stage import plan_parts

    source = SourceDeclaration(
        name="bench", location=str(path), format=fmt, fields=FIELDS,
        license="CC-BY-4.0", consent="public-release", owner="bench",
    )  # fmt: skip
    out = work / "ingested"
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    parts = plan_parts([source], part_bytes)
    planned = time.perf_counter()
    worker_peaks = []
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=spawn) as pool:
            tasks = [pool.submit(_read_one, part, source, str(out)) for part in parts]
            done = [task.result() for task in tasks]
        rows_in = sum(rows for rows, _ in done)
        worker_peaks = [peak for _, peak in done]
    else:
        rows_in = sum(_read_one(part, source, str(out))[0] for part in parts)
    ended = time.perf_counter()
    records = pl.scan_parquet(sorted(out.glob("part-*.parquet")))
    digest = records.select(
        pl.len().alias("records"),
        pl.concat_str("record_id", "location", "content_hash").hash(seed=52).sum().alias("hash"),
    ).collect()
    shutil.rmtree(work, ignore_errors=True)
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "parts": len(parts),
        "rows_in": rows_in,
        "records": digest["records"][0],
        "digest": str(digest["hash"][0]),
        "plan_s": planned - started,
        "wall_s": ended - started,
        "cpu_s": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
        "peak_rss_mb": own.ru_maxrss / 1024,
        "worker_peak_rss_mb": max(worker_peaks, default=0) / 1024,
    }


def run_side(code: Path, path: Path, fmt: str, part_bytes: int, workers: int, cap_gb=None):
    """One measurement in a fresh process running the code of `code`; killed once its RSS
    passes `cap_gb`."""
    command = [sys.executable, __file__, "--measure", str(path), fmt, str(part_bytes)]
    command += [str(workers), str(code)]
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=code) as process:
        watched = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                rss = watched.memory_info().rss
            except psutil.Error:
                rss = 0
            if cap_gb and rss > cap_gb * (1 << 30):
                process.kill()
                seconds = time.perf_counter() - started
                return {"failed": f"killed: RSS past {cap_gb:g} GiB after {seconds:.0f} s"}
            time.sleep(0.2)
        out = process.stdout.read()
    if process.returncode != 0:
        return {"failed": f"exit {process.returncode}"}
    return json.loads(out.strip().splitlines()[-1])


def _measure_here(args: list[str]) -> None:
    path, fmt, part_bytes, workers, code = args
    sys.path.insert(0, code)
    work = OUT / "work" / f"{os.getpid()}"
    figures = measure(Path(path), fmt, int(part_bytes), int(workers), work)
    print(json.dumps(figures))


# ---------------------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        _measure_here(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=2.0, help="size of each input file")
    parser.add_argument("--part-mb", type=int, default=64, help="JSON Lines parts (MB)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--before", type=Path, default=Path("/work/before52"))
    parser.add_argument("--before-cap-gb", type=float, default=10.0)
    args = parser.parse_args()
    paths = build_inputs(args.gigabytes)
    huge = 1 << 50
    rows = [
        ("jsonl", "one task", ROOT, paths["jsonl"], "jsonl", huge, 1, None),
        ("jsonl", f"parts of {args.part_mb} MB, {args.workers} workers", ROOT,
         paths["jsonl"], "jsonl", args.part_mb << 20, args.workers, None),
    ]  # fmt: skip
    for kind in ("csv", "csv.gz"):
        rows.append((kind, "streamed (this tree)", ROOT, paths[kind], "csv", huge, 1, None))
        rows.append(
            (kind, "read whole (before)", args.before, paths[kind], "csv", huge, 1,
             args.before_cap_gb)
        )  # fmt: skip
    figures = []
    for kind, side, code, path, fmt, part_bytes, workers, cap in rows:
        print(f"measuring {kind}: {side} …", file=sys.stderr)
        result = run_side(code, path, fmt, part_bytes, workers, cap)
        figures.append({"input": kind, "side": side, "bytes": path.stat().st_size, **result})
    (OUT / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print_table(figures)


def print_table(figures: list[dict]) -> None:
    print("| input | side | parts | plan s | wall s | CPU s | peak RSS MB | records | digest |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in figures:
        name = f"{row['input']} ({row['bytes'] / 1e9:.2f} GB)"
        if "failed" in row:
            print(f"| {name} | {row['side']} | | | | | | failed: {row['failed']} | |")
            continue
        peak = f"{row['peak_rss_mb']:,.0f}"
        if row["worker_peak_rss_mb"]:
            peak = f"{row['worker_peak_rss_mb']:,.0f} per worker ({peak} planner)"
        print(
            f"| {name} | {row['side']} | {row['parts']} | {row['plan_s']:.1f} | "
            f"{row['wall_s']:.1f} | {row['cpu_s']:.1f} | {peak} | {row['records']:,} | "
            f"{row['digest'][-6:]} |"
        )


if __name__ == "__main__":
    main()
