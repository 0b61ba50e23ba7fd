"""Benchmark of the boilerplate stage (pipeline/dedup/boilerplate.py) against the same rule written
in plain Python, side by side in one run.

Corpus (deterministic, seed 20240611, cached under bench/out/boilerplate-input/): real text
only. The base texts are the 30 Debian copyright files of tests/fixtures/debian-copyright
(a line that is only " ." rendered as the blank line it stands for, as the stage's tests do)
and the entries of every `/usr/share/doc/*/changelog.Debian.gz` on the machine, read with
the repository's debian_changelog reader (`changes`, the entry's text; the fixtures under
tests/fixtures/debian when the machine has none), normalized as ingest normalizes, and kept
once per distinct text. Every 100th document is a copyright file (they are long: about 7 KB
against 0.5 KB for a changelog entry), cycling through them; the others take the changelog
entries in a shuffled order, cycling too. A base text's first use is the text as is; each
later use is a copy whose first line (joined to its first paragraph) says which copy it is,
so copies are distinct documents, as a crawl of near-identical pages gives. Document i
depends on i alone, so a smaller size is a prefix of a larger one.

Sides, each in its own subprocess (its own peak RSS), with the stage's default settings
(paragraphs, more than 20 distinct documents, at least 20 characters), timed wall-clock
from the records in memory to the output in memory:

- Thresher: `boilerplate(frame, DedupConfig(boilerplate=BoilerplateConfig()), ctx)` on the
  canonical record frame, then its output frame collected (the ledger events come eager).
- Plain Python: the rule as a user writes it (Dolma's paragraph dedup without its Bloom
  filter): split each text on blank lines (`re.split(r"\\n\\s*\\n")`), normalize a segment with
  `" ".join(segment.split())`, count the distinct documents (content hashes) holding it in a
  dict of sets keyed by the xxh3-128 of the normalized segment, then a second pass removes
  the segments found in too many documents and joins the rest with a blank line. One core.

Both sides must give the same edited texts and drop the same records, or the run stops.
Peak RSS is the worker's high-water mark (VmHWM) over the timed window, reset when it starts
(`/proc/self/clear_refs`), so it includes the input held in memory; the RSS at the start of
the window is reported beside it. Runs interleave; the table gives the median.

`.venv/bin/python bench/bench_boilerplate.py [--sizes 10000 100000 300000] [--repeat 3] [--quick]`
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(ROOT)]

from bench_spine import _code_version, _median_run, _peak_rss_mb, _reset_peak_rss  # noqa: E402

OUT = BENCH_DIR / "out"
INPUT = OUT / "boilerplate-input"
WORK = OUT / "boilerplate-work"
FIGURES = OUT / "boilerplate" / "figures.json"
SEED = 20240611
GENERATOR_VERSION = 2  # bump when the generated input changes
COPYRIGHT_EVERY = 100
COPYRIGHTS = ROOT / "tests" / "fixtures" / "debian-copyright"
CHANGELOG_FIXTURES = ROOT / "tests" / "fixtures" / "debian"


# ---------------------------------------------------------------------------------------------
# Input


def copyright_texts() -> list[tuple[str, str]]:
    """(name, text) of each fixture copyright file, " ." lines rendered as blank lines."""
    return [
        (f"{path.stem} copyright", re.sub(r"(?m)^ \.$", "", path.read_text(encoding="utf-8")))
        for path in sorted(COPYRIGHTS.glob("*.copyright"))
    ]


def changelog_entries() -> tuple[list[tuple[str, str]], str]:
    """(entry_id, changes) of every readable entry, and where the changelogs came from."""
    from pipeline.config import SourceDeclaration
    from pipeline.ingest.readers import read_file

    paths = sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz"))
    origin = "/usr/share/doc/*/changelog.Debian.gz"
    if not paths:
        paths = sorted(CHANGELOG_FIXTURES.glob("*/changelog.Debian.gz"))
        origin = "tests/fixtures/debian/*/changelog.Debian.gz"
    source = SourceDeclaration(
        name="debian-changelog",
        location=origin,
        format="debian_changelog",
        license="various",
        consent="public-release",
        owner="bench",
    )
    entries = []
    for path in paths:
        frame = read_file(path, str(path), source)
        frame = frame.filter(pl.col("_error").is_null() & pl.col("changes").is_not_null())
        entries += frame.select("entry_id", "changes").rows()
    return entries, f"{origin} ({len(paths)} files)"


def _distinct(named: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Normalized as ingest normalizes; the first name of each distinct non-empty text."""
    from pipeline.core.normalize import normalize_text

    texts = normalize_text(pl.Series([text for _, text in named], dtype=pl.String)).to_list()
    first: dict[str, str] = {}
    for (name, _), text in zip(named, texts, strict=True):
        if text:
            first.setdefault(text, name)
    return [(name, text) for text, name in first.items()]


def build_corpus(n: int) -> tuple[pl.DataFrame, dict]:
    """`n` records in the canonical schema (plus cluster_id), and a description."""
    from pipeline.core.identity import KEY_SEPARATOR, xxh3_128_hex
    from pipeline.core.schema import RECORD_SCHEMA

    copyrights = _distinct(copyright_texts())
    raw_entries, origin = changelog_entries()
    entries = _distinct(raw_entries)
    random.Random(SEED).shuffle(entries)
    rows = []
    changelog_docs = 0
    for i in range(n):
        if i % COPYRIGHT_EVERY == 0:
            k = i // COPYRIGHT_EVERY
            source, (name, base), copy = "debian-copyright", copyrights[k % len(copyrights)], k // len(copyrights)  # fmt: skip
        else:
            j = changelog_docs
            changelog_docs += 1
            source, (name, base), copy = "debian-changelog", entries[j % len(entries)], j // len(entries)  # fmt: skip
        text = base if copy == 0 else f"Copy {copy} of {name}, document {i}\n{base}"
        rows.append((source, f"{name}#{copy}", f"document-{i}", text))
    frame = pl.DataFrame(rows, schema=["source", "location", "id", "text"], orient="row")
    key = pl.concat_str(["source", "id"], separator=KEY_SEPARATOR)  # entry ids repeat
    hashes = xxh3_128_hex(frame["text"])
    frame = frame.with_columns(
        xxh3_128_hex(frame.select(key).to_series()).alias("record_id"),
        hashes.alias("source_content_hash"),
        hashes.alias("content_hash"),
    )
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in RECORD_SCHEMA.items() if c not in frame]
    frame = (
        frame.with_columns(missing)
        .select(RECORD_SCHEMA.names())
        .cast(RECORD_SCHEMA)
        .with_columns(pl.col("record_id").alias("cluster_id"))
    )
    if frame["content_hash"].n_unique() != n:  # then documents and distinct texts differ
        raise SystemExit("the corpus holds a text twice; the generator is broken")
    if frame["record_id"].n_unique() != n:
        raise SystemExit("two documents share a record_id; the generator is broken")
    description = {
        "documents": n,
        "text_mb": round(frame["text"].str.len_bytes().sum() / 1e6, 1),
        "copyright_documents": n - changelog_docs,
        "changelog_documents": changelog_docs,
        "copyright_base_texts": len(copyrights),
        "changelog_entries_read": len(raw_entries),
        "changelog_base_texts": len(entries),
        "changelogs": origin,
    }
    return frame, description


def corpus_path(n: int) -> tuple[Path, dict]:
    """The corpus of `n` documents as Parquet, built on first use."""
    path = INPUT / f"v{GENERATOR_VERSION}-n{n}.parquet"
    about = path.with_suffix(".json")
    if not path.exists() or not about.exists():
        INPUT.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        print(f"building {n:,} documents from real text …", file=sys.stderr, flush=True)
        frame, description = build_corpus(n)
        frame.write_parquet(path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)
        about.write_text(json.dumps(description, indent=2) + "\n")
        print(f"  built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path, json.loads(about.read_text())


# ---------------------------------------------------------------------------------------------
# The sides, each in a fresh subprocess; each writes its edited texts and dropped records

BLANK_LINES = re.compile(r"\n\s*\n")


def plain_boilerplate(
    ids: list[str], texts: list[str], hashes: list[str], max_documents: int, min_chars: int
) -> tuple[dict[str, str], list[str], int]:
    """The rule written plainly: (record_id -> edited text, dropped record_ids, flagged)."""
    import xxhash

    def segments(text: str) -> list[str]:
        return [segment for segment in BLANK_LINES.split(text) if segment.strip()]

    def key(segment: str) -> str | None:
        normalized = " ".join(segment.split())
        if len(normalized) < min_chars:
            return None
        return xxhash.xxh3_128_hexdigest(normalized.encode())

    holders: dict[str, set[str]] = defaultdict(set)
    for text, document in zip(texts, hashes, strict=True):
        for segment in segments(text):
            digest = key(segment)
            if digest is not None:
                holders[digest].add(document)
    flagged = {digest for digest, documents in holders.items() if len(documents) > max_documents}
    edited: dict[str, str] = {}
    dropped: list[str] = []
    for record_id, text in zip(ids, texts, strict=True):
        parts = segments(text)
        kept = [segment for segment in parts if key(segment) not in flagged]
        if len(kept) < len(parts):
            if kept:
                edited[record_id] = "\n\n".join(kept)
            else:
                dropped.append(record_id)
    return edited, dropped, len(flagged)


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def run_thresher(corpus: Path) -> tuple[dict, pl.DataFrame, list[str]]:
    from pipeline.config import BoilerplateConfig, DedupConfig, RunConfig, config_hash
    from pipeline.core import reasons
    from pipeline.dedup.boilerplate import boilerplate
    from pipeline.stage import RunContext

    cfg = DedupConfig(boilerplate=BoilerplateConfig())
    run_cfg = RunConfig(name="bench", workdir=str(WORK), sources=[], dedup=cfg)
    ctx = RunContext(
        run_id="bench", run_dir=WORK / "run", config=run_cfg, config_hash=config_hash(run_cfg)
    )
    frame = pl.read_parquet(corpus)
    input_rss = _rss_mb()
    _reset_peak_rss()
    started, cpu = time.perf_counter(), time.process_time()
    result = boilerplate(frame.lazy(), cfg, ctx)
    out = result.frame.collect()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _peak_rss_mb()
    events = result.events
    edited_ids = events.filter(pl.col("action") == reasons.EDITED)["record_id"]
    dropped = events.filter(pl.col("action") == reasons.DROPPED)["record_id"].to_list()
    if out.height != frame.height - len(dropped):
        raise SystemExit("Thresher: records out + dropped != records in")
    edited = out.filter(pl.col("record_id").is_in(edited_ids.implode())).select("record_id", "text")
    figures = {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "input_rss_mb": input_rss,
        "peak_rss_mb": peak,
        "flagged_segments": result.stats["boilerplate_segments"],
        "chars_removed": result.stats["chars_removed"],
    }
    return figures, edited, dropped


def run_plain(corpus: Path) -> tuple[dict, pl.DataFrame, list[str]]:
    from pipeline.config import BoilerplateConfig

    settings = BoilerplateConfig()
    records = pl.read_parquet(corpus, columns=["record_id", "text", "content_hash"])
    ids, texts, hashes = (records[c].to_list() for c in ("record_id", "text", "content_hash"))
    del records
    input_rss = _rss_mb()
    _reset_peak_rss()
    started, cpu = time.perf_counter(), time.process_time()
    edited, dropped, flagged = plain_boilerplate(
        ids, texts, hashes, settings.max_documents, settings.min_chars
    )
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _peak_rss_mb()
    figures = {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "input_rss_mb": input_rss,
        "peak_rss_mb": peak,
        "flagged_segments": flagged,
    }
    frame = pl.DataFrame(
        {"record_id": list(edited), "text": list(edited.values())},
        schema={"record_id": pl.String, "text": pl.String},
    )
    return figures, frame, dropped


def worker(side: str, corpus: Path, work: Path) -> None:
    run = run_thresher if side == "thresher" else run_plain
    figures, edited, dropped = run(corpus)
    edited.sort("record_id").write_parquet(work / "edited.parquet")
    (work / "dropped.json").write_text(json.dumps(sorted(dropped)))
    (work / "result.json").write_text(json.dumps(figures) + "\n")


def measure(side: str, corpus: Path, label: str) -> dict:
    """Run one side in a fresh interpreter; return its figures and outputs."""
    work = WORK / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = [sys.executable, __file__, "--worker", side, "--corpus", str(corpus)]
    command += ["--work", str(work)]
    process = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: the {side} worker failed ({os.waitstatus_to_exitcode(status)})")
    result = json.loads((work / "result.json").read_text())
    result["process_peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    result["peak_rss_mb"] = result["peak_rss_mb"] or result["process_peak_rss_mb"]
    result["edited"] = pl.read_parquet(work / "edited.parquet")
    result["dropped"] = json.loads((work / "dropped.json").read_text())
    print(
        f"  {label}: {result['seconds']:.2f} s, peak RSS {result['peak_rss_mb']:,.0f} MB",
        file=sys.stderr,
        flush=True,
    )
    shutil.rmtree(work, ignore_errors=True)
    return result


def check_agreement(n: int, thresher: dict, plain: dict) -> None:
    if not thresher["edited"].equals(plain["edited"]):
        joined = thresher["edited"].join(plain["edited"], on="record_id", how="full")
        differing = joined.filter(pl.col("text").ne_missing(pl.col("text_right")))
        raise SystemExit(
            f"{n:,} documents: the edited texts differ for {differing.height} records, "
            f"e.g. {differing.head(3).rows()}"
        )
    if thresher["dropped"] != plain["dropped"]:
        raise SystemExit(
            f"{n:,} documents: dropped sets differ ({len(thresher['dropped'])} "
            f"against {len(plain['dropped'])})"
        )
    if thresher["flagged_segments"] != plain["flagged_segments"]:
        raise SystemExit(
            f"{n:,} documents: {thresher['flagged_segments']} flagged segments against "
            f"{plain['flagged_segments']}"
        )


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of each side")
    parser.add_argument("--quick", action="store_true", help="10,000 documents, one run each")
    parser.add_argument("--json", type=Path, default=FIGURES)
    parser.add_argument("--worker", choices=["thresher", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.corpus, args.work)
        return
    sizes, repeat = ([10_000], 1) if args.quick else (args.sizes, args.repeat)

    rows = []
    for n in sizes:
        corpus, description = corpus_path(n)
        runs: dict[str, list[dict]] = {"plain": [], "thresher": []}
        for run in range(repeat):
            for side in ("plain", "thresher"):
                runs[side].append(measure(side, corpus, f"{side}-n{n}-run{run}"))
            check_agreement(n, runs["thresher"][-1], runs["plain"][-1])
        first = runs["thresher"][0]
        outcome = {
            "edited": first["edited"].height,
            "dropped": len(first["dropped"]),
            "flagged_segments": first["flagged_segments"],
            "chars_removed": first["chars_removed"],
        }
        for side, side_runs in runs.items():
            chosen = _median_run(
                [{k: v for k, v in r.items() if k not in ("edited", "dropped")} for r in side_runs]
            )
            rows.append({"side": side, **description, **outcome, **chosen})

    stage_sha = hashlib.sha256(
        (ROOT / "pipeline" / "dedup" / "boilerplate.py").read_bytes()
    ).hexdigest()
    figures = {
        "code": _code_version(),
        "boilerplate_py_sha256": stage_sha[:16],
        "cpus": os.cpu_count(),
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"code {figures['code']}, pipeline/dedup/boilerplate.py sha256 {stage_sha[:16]}, "
        f"{figures['cpus']} CPUs, runs per side: {repeat}\n"
    )
    print(
        "| side | docs | MB | seconds (median) | docs/s | × plain | CPU s | input RSS MB "
        "| peak RSS MB | edited | dropped | flagged segments |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    plain_seconds = {r["documents"]: r["seconds"] for r in rows if r["side"] == "plain"}
    for r in rows:
        spread = r["all_seconds"]
        seconds = f"{r['seconds']:.2f}" + (
            f" ({min(spread):.2f}–{max(spread):.2f})" if len(spread) > 1 else ""
        )
        name = "plain Python" if r["side"] == "plain" else "Thresher boilerplate"
        speedup = plain_seconds[r["documents"]] / r["seconds"]
        print(
            f"| {name} | {r['documents']:,} | {r['text_mb']} | {seconds} "
            f"| {r['documents'] / r['seconds']:,.0f} | {speedup:.1f} | {r['cpu_seconds']:.2f} "
            f"| {r['input_rss_mb']:,.0f} | {r['peak_rss_mb']:,.0f} | {r['edited']:,} "
            f"| {r['dropped']:,} | {r['flagged_segments']:,} |"
        )
    print(f"\nfigures: {args.json}")


if __name__ == "__main__":
    main()
