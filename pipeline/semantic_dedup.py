"""Semantic dedup: records whose meaning is (nearly) the same, by embedding similarity.

Each record's text is embedded with all-MiniLM-L6-v2 (pipeline/embeddings.py: unit vectors,
cached by content hash), so the inner product of two vectors is the cosine of their texts.
Pairs at least `related_threshold` similar (or `threshold`, when that is unset) are found with
faiss:

- up to `exact_search_max` records, exactly: a flat inner-product index over all of them and
  a range search of every record against it;
- above, as in SemDeDup (Abbas et al., 2023): spherical k-means cuts the vectors into
  `partitions` (default about sqrt(records)) and the exact range search runs within each
  partition only. It costs about n^1.5 instead of n^2 and misses the pairs whose two
  records fall into different partitions: 6-9% of the duplicate pairs on the benchmark
  corpus (bench/README.md), the price of searching 100k records in 9 s instead of 170 s.

Pairs with cosine >= `threshold` are duplicates: pipeline/duplicates.py clusters them, keeps
one record per cluster by the keep rule (a record published in the parent version first) and
drops the others with reason `semantic_duplicate`, evidence naming the kept record and the
cosine between the two. Pairs with `related_threshold` <= cosine < `threshold` are related:
kept records of different groups share a cluster id, so the split stage keeps them together.
Every similarity is recomputed from the vectors in one place, so both searches report the
same pairs with the same values, whatever faiss's blocking and threads.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import duplicates, ledger, reasons
from pipeline.config import DedupConfig, SemanticConfig
from pipeline.embeddings import embed
from pipeline.stage import RunContext, StageResult

STAGE = "semantic_dedup"
SEED = 1234
QUERY_BLOCK = 8192  # query rows per range search: bounds the memory of faiss's result


def semantic_dedup(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> StageResult:
    frame = duplicates.with_cluster_ids(frame)
    semantic = cfg.semantic
    if semantic is None:
        return StageResult(frame=frame, events=ledger.empty(), stats={"dropped": 0})
    members = duplicates.members_frame(frame, cfg.keep, ctx, extra=("text", "content_hash"))
    started = time.perf_counter()
    cache_dir = Path(ctx.config.workdir) / "cache" / "embeddings"
    embedded = embed(members["text"], members["content_hash"], cache_dir, semantic.batch_size)
    vectors = embedded.vectors
    searched = time.perf_counter()
    floor = min(semantic.threshold, semantic.related_threshold or semantic.threshold)
    pairs, search, partitions = similar_pairs(vectors, floor, semantic)
    is_duplicate = pl.col("similarity") >= semantic.threshold
    duplicate_pairs, related_pairs = pairs.filter(is_duplicate), pairs.filter(~is_duplicate)
    finished = time.perf_counter()
    resolution = duplicates.resolve(members, duplicate_pairs, related_pairs, cfg.keep)
    return duplicates.apply(
        frame,
        resolution,
        members.drop("text"),
        stage=STAGE,
        reason=reasons.SEMANTIC_DUPLICATE,
        method="semantic",
        similarity=lambda found: pl.Series(cosines(vectors, found["_i"], found["kept_i"])),
        ctx=ctx,
        stats={
            "records": members.height,
            "embedded_new": embedded.new,
            "embedded_from_cache": embedded.from_cache,
            "search": search,
            "partitions": partitions,
            "duplicate_pairs": duplicate_pairs.height,
            "related_pairs": related_pairs.height,
            "embed_seconds": round(searched - started, 3),
            "search_seconds": round(finished - searched, 3),
        },
    )


def similar_pairs(
    vectors: np.ndarray, floor: float, semantic: SemanticConfig
) -> tuple[pl.DataFrame, str, int]:
    """Row pairs (left < right) at least `floor` similar, sorted, as a pairs frame; with the
    search used ("exact" or "partitioned") and the number of partitions searched."""
    n = len(vectors)
    if n <= semantic.exact_search_max:
        left, right = _range_pairs(vectors, floor)
        search, partitions = "exact", 1
    else:
        partitions = min(n, semantic.partitions or round(math.sqrt(n)))
        left, right = _partitioned_pairs(vectors, floor, partitions)
        search = "partitioned"
    similarity = cosines(vectors, left, right)
    keep = similarity >= floor  # the same cut for both searches, on the recomputed values
    order = np.lexsort((right[keep], left[keep]))
    pairs = duplicates.pairs_frame(
        left[keep][order], right[keep][order], similarity[keep][order].astype(np.float64)
    )
    return pairs, search, partitions


def cosines(vectors: np.ndarray, left, right) -> np.ndarray:
    """The cosine of each pair of rows: their inner product, the vectors being unit length."""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    return np.einsum("ij,ij->i", vectors[left], vectors[right])


def _range_pairs(vectors: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of rows (left < right) whose inner product faiss finds >= floor."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    lefts, rights = [], []
    for start in range(0, len(vectors), QUERY_BLOCK):
        limits, _, labels = index.range_search(vectors[start : start + QUERY_BLOCK], floor)
        query = start + np.repeat(np.arange(len(limits) - 1), np.diff(limits).astype(np.int64))
        later = query < labels  # each pair once, no self pairs
        lefts.append(query[later])
        rights.append(labels[later])
    empty = np.empty(0, dtype=np.int64)
    return np.concatenate([empty, *lefts]), np.concatenate([empty, *rights])


def _partitioned_pairs(
    vectors: np.ndarray, floor: float, partitions: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs within each spherical k-means partition (SemDeDup)."""
    import faiss

    kmeans = faiss.Kmeans(
        vectors.shape[1],
        partitions,
        niter=20,
        spherical=True,
        seed=SEED,
        min_points_per_centroid=1,  # small partitions are fine: no warning for them
        verbose=False,
    )
    kmeans.train(vectors)
    _, assigned = kmeans.index.search(vectors, 1)
    order = np.argsort(assigned[:, 0], kind="stable")
    bounds = np.flatnonzero(np.diff(assigned[order, 0])) + 1
    lefts, rights = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for rows in np.split(order, bounds):
        if len(rows) > 1:
            left, right = _range_pairs(vectors[rows], floor)
            # rows is ascending, so left < right still holds in the whole set's numbering
            lefts.append(rows[left])
            rights.append(rows[right])
    return np.concatenate(lefts), np.concatenate(rights)
