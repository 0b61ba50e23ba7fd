"""End to end against datatrove 0.10.1: the same records through `thresher run` and through a
FineWeb-style datatrove pipeline, one after the other, each measured as a user runs it.

Input: the spine bench's records (bench_spine.input_dir: real SMS and Debian changelog text
repeated with variation, ~15% exact duplicates), --records of them (500,000) over --files
jsonl files (100), cached under bench/out/input/.

Sides (the machine has 2 cores; both use 2 worker processes):

- Thresher: `thresher run --config thresher.yaml --json` in a fresh project, work folder and
  PREFECT_HOME (bench_determinism.measure), once per --profiles entry: `default` leaves every
  section at its default (quality profile short_messages: encoding, lorem ipsum, language
  id, no Gopher), `prose` sets `quality.default_profile: prose` so that the quality stage
  runs the filter family datatrove runs (Gopher quality and repetition, C4, FineWeb line
  rules) plus language id. Every run also does governance (licence, consent, PII and
  secrets scans), exact, MinHash near and boilerplate dedup, the split, contamination
  checks, the ledger of every decision and a publish with a manifest.
- datatrove: bench/datatrove_pipeline.py in its own venv (bench/out/datatrove-venv, `make
  bench/out/datatrove-venv/bin/python`), LocalPipelineExecutor tasks=2 workers=2: the four
  FineWeb filters, exact dedup (3 stages), MinHash (4 stages), Parquet out. No language id
  (LanguageFilter downloads its model at run time), no governance, split or manifest.

Measured the same way for both: wall seconds of the whole command, CPU seconds (user + system
of every process of its tree, psutil polled every 0.25 s), peak RSS of the highest single
process (os.wait4) and of the tree (polled). The ratio is Thresher wall ÷ datatrove wall.
Results: a Markdown table on stdout and bench/out/vs_datatrove/figures.json.

    .venv/bin/python bench/bench_vs_datatrove.py                    # 500k records
    .venv/bin/python bench/bench_vs_datatrove.py --records 5000     # smoke test, ~2 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))  # bench/ is not a package

import bench_determinism  # noqa: E402
import bench_spine  # noqa: E402

OUT = BENCH_DIR / "out" / "vs_datatrove"
DATATROVE_PYTHON = BENCH_DIR / "out" / "datatrove-venv" / "bin" / "python"
DRIVER = BENCH_DIR / "datatrove_pipeline.py"


def run_thresher(profile: str, data: Path) -> dict:
    """bench_determinism.measure, with `quality.default_profile` set unless `default`."""
    write_project = bench_determinism.write_project

    def with_profile(project: Path, data: Path) -> Path:
        config = write_project(project, data)
        if profile != "default":
            settings = json.loads(config.read_text())
            settings["quality"] = {"default_profile": profile}
            config.write_text(json.dumps(settings, indent=2) + "\n")
        return config

    bench_determinism.write_project = with_profile
    try:
        result = bench_determinism.measure(f"thresher-{profile}", data, None, OUT)
    finally:
        bench_determinism.write_project = write_project
    return result | {"tool": f"Thresher ({profile} config)", "records_out": result.get("published")}


def run_datatrove(data: Path, tasks: int, workers: int) -> dict:
    """The driver in datatrove's venv, its process tree polled as bench_determinism.measure
    polls a `thresher run` (that helper builds the thresher command itself, so it is not
    reused here)."""
    folder = OUT / "datatrove"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [str(DATATROVE_PYTHON), str(DRIVER), "--input", str(data / "data")]
    command += ["--work", str(folder / "work"), "--tasks", str(tasks), "--workers", str(workers)]
    env = os.environ | {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    print(f"[datatrove] {data.name}: datatrove_pipeline.py …", file=sys.stderr, flush=True)
    stdout_path, stderr_path = folder / "stdout.json", folder / "stderr.log"
    started = time.perf_counter()
    with stdout_path.open("w") as stdout, stderr_path.open("w") as stderr:
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)
        status, usage, cpu, tree_peak, _ = bench_determinism.watched(process)
    wall = time.perf_counter() - started
    result = {
        "tool": "datatrove 0.10.1",
        "label": "datatrove",
        "returncode": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "peak_tree_rss_mb": round(tree_peak / 2**20),
        "cpu_s": round(sum(cpu.values()), 1),
        "command": command,
        "stderr": str(stderr_path),
    }
    if result["returncode"]:
        tail = "\n".join(stderr_path.read_text().splitlines()[-15:])
        print(f"[datatrove] failed with exit code {result['returncode']}:\n{tail}", file=sys.stderr)
        return result
    report = json.loads(stdout_path.read_text().splitlines()[-1])
    stages = {name: part["seconds"] for name, part in report.items() if isinstance(part, dict)}
    result |= {"records_in": report["records_in"], "records_out": report["records_out"]}
    result |= {"stage_seconds": stages, "report": str(stdout_path)}
    return result


def markdown(rows: list[dict], datatrove_wall: float | None) -> str:
    lines = [
        "| tool | records in | records out | wall s | CPU s | CPU / wall "
        "| peak RSS MB (one process / tree) | wall ÷ datatrove's |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row["returncode"]:
            lines.append(f"| {row['tool']} | failed (exit {row['returncode']}) ||||||")
            continue
        ratio = f"{row['wall_s'] / datatrove_wall:.2f}" if datatrove_wall else "—"
        lines.append(
            f"| {row['tool']} | {row['records_in']:,} | {row['records_out']:,} "
            f"| {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['cpu_s'] / row['wall_s']:.2f} "
            f"| {row['peak_rss_mb']:,} / {row['peak_tree_rss_mb']:,} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument(
        "--profiles",
        nargs="+",
        choices=["default", "prose"],
        default=["default", "prose"],
        help="Thresher runs: the default config, and/or quality.default_profile: prose",
    )
    parser.add_argument("--tasks", type=int, default=2, help="datatrove tasks")
    parser.add_argument("--workers", type=int, default=2, help="datatrove worker processes")
    args = parser.parse_args()
    if not DATATROVE_PYTHON.exists():
        sys.exit("no datatrove venv: run `make bench/out/datatrove-venv/bin/python` first")

    data = bench_spine.input_dir(args.records, args.files)
    OUT.mkdir(parents=True, exist_ok=True)
    os.sync()
    rows = [run_thresher(profile, data) for profile in args.profiles]
    rows.append(run_datatrove(data, args.tasks, args.workers))
    datatrove = rows[-1]
    datatrove_wall = None if datatrove["returncode"] else datatrove["wall_s"]
    for row in rows:
        if not row["returncode"]:
            row["cpu_per_wall"] = round(row["cpu_s"] / row["wall_s"], 2)
            if datatrove_wall:
                row["wall_ratio_vs_datatrove"] = round(row["wall_s"] / datatrove_wall, 3)
    table = markdown(rows, datatrove_wall)
    print(table)
    figures = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": bench_spine._code_version(),
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(),
        },
        "input": {"records": args.records, "files": args.files, "folder": str(data)},
        "datatrove": {"tasks": args.tasks, "workers": args.workers},
        "runs": rows,
        "table": table,
    }
    (OUT / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(f"figures: {OUT / 'figures.json'}", file=sys.stderr)
    sys.exit(1 if any(row["returncode"] for row in rows) else 0)


if __name__ == "__main__":
    main()
