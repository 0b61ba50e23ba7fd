"""How many (text, item) pairs the n-gram check counts at once (`word_ngrams.PAIR_BUDGET`):
time and peak RSS of matching records against the test split of a 10M scale run, one fresh
process per budget, the matches compared equal. A profile of one setting, not a benchmark
against a peer (the contamination bench compares the check with plain Python).

The input is a version published by bench_scale.py (its test split is the index; the
records are the first `--records` of its test split, which match themselves and share its
boilerplate, and as many of its train split):

    .venv/bin/python bench/profile_contamination.py \\
        --version bench/out/scale/s19n10000000-local-0/project/work/datasets/determinism/7fff…
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import psutil


def _texts(version: Path, records: int) -> pl.Series:
    splits = [
        pl.scan_parquet(version / "data" / split / "*.parquet").select("text").head(records)
        for split in ("test", "train")
    ]
    return pl.concat(splits).collect()["text"]


def measure(version: Path, records: int, budget: int, out: Path, every_method: bool) -> dict:
    """In this process: build the test split's n-gram tables (`every_method`: its whole index,
    the default methods), match, write the matches."""
    from pipeline.config import ContaminationMethods
    from pipeline.contamination.stage import CHECK_BATCH
    from pipeline.core.resources import peak_rss_mb, reset_peak_rss
    from pipeline.text import word_ngrams
    from pipeline.text.eval_index import ContaminationIndex
    from pipeline.text.eval_sets import eval_items

    test = pl.scan_parquet(version / "data" / "test" / "*.parquet").select("text").collect()
    methods = (
        ContaminationMethods() if every_method else ContaminationMethods(exact=None, minhash=None)
    )
    index = ContaminationIndex.build(eval_items(test["text"]), methods)
    del test
    texts = _texts(version, records)
    word_ngrams.PAIR_BUDGET = budget
    gc.collect()
    resident = psutil.Process().memory_info().rss / 2**20
    reset_peak_rss()
    started = time.perf_counter()
    if every_method:  # as the stage checks a part: CHECK_BATCH records at a time
        checked = eval_items(texts).select("text", "content_hash")
        batches = range(0, checked.height, CHECK_BATCH)
        found = pl.concat(index.matches(checked.slice(at, CHECK_BATCH)) for at in batches)
    else:
        found = word_ngrams.gram_matches(texts, index.grams, 1)
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    found.write_parquet(out)
    result = {
        "budget": budget,
        "seconds": round(seconds, 1),
        "before_mb": round(resident),  # the index and the records
        "peak_rss_mb": round(peak),  # while matching
        "matches": found.height,
    }
    if every_method:  # each method alone on one batch of test records, then of train records
        for split, at in (("test", 0), ("train", records)):  # the train texts follow the test
            batch = checked.slice(at, CHECK_BATCH)
            for method in ("exact", "ngram", "minhash"):
                gc.collect()
                reset_peak_rss()
                started = time.perf_counter()
                getattr(index, f"_{method}")(batch if method == "exact" else batch["text"])
                result[f"{split} {method}"] = {
                    "seconds": round(time.perf_counter() - started, 1),
                    "peak_rss_mb": round(peak_rss_mb()),
                }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", type=Path, required=True)
    parser.add_argument("--records", type=int, default=150_000, help="of each split")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1 << 16, 1 << 20, 1 << 40])
    parser.add_argument("--every-method", action="store_true", help="exact, n-grams and MinHash")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(
            json.dumps(measure(args.version, args.records, args.one, args.out, args.every_method))
        )
        return
    with tempfile.TemporaryDirectory() as work:
        results = []
        for budget in args.budgets:
            out = Path(work) / f"{budget}.parquet"
            command = [sys.executable, __file__, "--version", str(args.version)]
            command += ["--records", str(args.records), "--one", str(budget), "--out", str(out)]
            command += ["--every-method"] if args.every_method else []
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            same = pl.read_parquet(out).equals(
                pl.read_parquet(Path(work) / f"{args.budgets[0]}.parquet")
            )
            results[-1]["same_matches"] = same
            print(json.dumps(results[-1]), flush=True)
    print("| pairs at once | s | RSS before MB | peak RSS matching MB | matches | the same |")
    print("|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(
            f"| {r['budget']:,} | {r['seconds']} | {r['before_mb']:,} | {r['peak_rss_mb']:,} "
            f"| {r['matches']:,} | {r['same_matches']} |"
        )


if __name__ == "__main__":
    main()
