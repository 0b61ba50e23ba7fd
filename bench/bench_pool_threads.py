"""How many compute threads each process of the local runner's pool should use: embedding
(the semantic dedup stage's MiniLM) on N processes at once, side by side in one run,

  a. torch's default: every core in every process (what a pool process had before
     `flows.runner.workers.thread_share`);
  b. each process its share of the cores (`thread_share(N)`: cores // N).

The texts are the demo's published records (`make demo` first), each process embedding its own
slice of --texts texts, all started together. Prints each process's seconds and the slowest; the
last line is a JSON result.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def embed_slice(threads: int, start: int, count: int, files: list[str]) -> None:
    import polars as pl
    import torch

    if threads:
        torch.set_num_threads(threads)
    from pipeline.text.embeddings import encode, load_model

    texts = pl.concat([pl.read_parquet(f, columns=["text"]) for f in files])["text"]
    load_model()
    started = time.perf_counter()
    encode(texts.slice(start, count), 64)
    print(
        json.dumps({"threads": torch.get_num_threads(), "seconds": time.perf_counter() - started})
    )


def together(processes: int, threads: int, count: int, files: list[str]) -> list[dict]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    running = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", str(threads), str(i * count), str(count)] + files,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )  # fmt: skip
        for i in range(processes)
    ]
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in running]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        threads, start, count = (int(v) for v in sys.argv[2:5])
        embed_slice(threads, start, count, sys.argv[5:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="demo/work", help="the demo's work folder")
    parser.add_argument("--processes", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--texts", type=int, default=1200, help="per process")
    args = parser.parse_args()
    files = sorted(glob.glob(f"{args.demo}/datasets/*/*/data/*/*.parquet"))
    if not files:
        sys.exit(f"no published shards under {args.demo}/datasets: run `make demo` first")
    sys.path.insert(0, str(ROOT))
    from flows.runner.workers import thread_share

    result = {}
    for name, threads in [("torch default", 0), ("thread share", thread_share(args.processes))]:
        ran = together(args.processes, threads, args.texts, files)
        slowest = max(r["seconds"] for r in ran)
        print(f"{name}: {args.processes} processes × {ran[0]['threads']} threads, "
              f"{args.texts:,} texts each: slowest {slowest:.1f} s")  # fmt: skip
        result[name] = {"threads": ran[0]["threads"], "slowest_seconds": round(slowest, 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
