"""Semantic dedup: records whose meaning is (nearly) the same, by embedding similarity.

Each record's text is embedded with all-MiniLM-L6-v2 (pipeline/text/embeddings.py: unit vectors,
cached by content hash), so the inner product of two vectors is the cosine of their texts.
Pairs at least `related_threshold` similar (or `threshold`, when that is unset) are found with
faiss:

- up to `exact_search_max` records, exactly: a flat inner-product index over all of them,
  searched for every record's 32 nearest records, of which those above the floor count (a
  cluster of k near-identical texts gives about 32k pairs, not k^2 / 2, and stays connected);
- above, as in SemDeDup (Abbas et al., 2023): spherical k-means cuts the vectors into
  `partitions` (default about sqrt(records)) and the same search runs within each
  partition only. It costs about n^1.5 instead of n^2 and misses the pairs whose two
  records fall into different partitions: 6-9% of the duplicate pairs on the benchmark
  corpus (bench/README.md), the price of searching 100k records in 9 s instead of 170 s.

Pairs with cosine >= `threshold` are duplicates: pipeline/dedup/duplicates.py clusters them, keeps
one record per cluster by the keep rule (a record published in the parent version first) and
drops the others with reason `semantic_duplicate`, evidence naming the kept record and the
cosine between the two. Pairs with `related_threshold` <= cosine < `threshold` are related:
kept records of different groups share a cluster id, which the split stage can use to keep
them together.
Every similarity is recomputed from the vectors in one place, so both searches report the
same pairs with the same values, whatever faiss's blocking and threads.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import DedupConfig, SemanticConfig
from pipeline.core import ledger, reasons
from pipeline.core.clusters import with_cluster_ids
from pipeline.dedup import duplicates
from pipeline.stage import RunContext, StageResult
from pipeline.text.embeddings import embed

STAGE = "semantic_dedup"
DROPS = duplicates.Drops(STAGE, reasons.SEMANTIC_DUPLICATE, "semantic")
SEED = 1234
QUERY_BLOCK = 8192  # query rows per search: bounds the memory of faiss's result
NEIGHBOURS = 32  # nearest rows each row is compared with


def semantic_dedup(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> StageResult:
    frame = with_cluster_ids(frame)
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
        drops=DROPS,
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
        left, right = _nearest_pairs(vectors, floor)
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
    """The cosine of each pair of rows: their inner product, the vectors being unit length
    (in blocks, so that only a block of pairs' vectors is copied at a time)."""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    result = np.empty(len(left), dtype=np.float32)
    for start in range(0, len(left), QUERY_BLOCK):
        block = slice(start, start + QUERY_BLOCK)
        result[block] = np.einsum("ij,ij->i", vectors[left[block]], vectors[right[block]])
    return result


def _nearest_pairs(vectors: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of rows (left < right) at least `floor` similar, each row paired with at most
    NEIGHBOURS of its nearest rows: a cluster of k near-identical texts then gives about
    k * NEIGHBOURS pairs, not k^2 / 2, and still stays connected."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    wanted = min(NEIGHBOURS + 1, len(vectors))  # + 1: a row finds itself
    lefts, rights = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for start in range(0, len(vectors), QUERY_BLOCK):
        similarity, labels = index.search(vectors[start : start + QUERY_BLOCK], wanted)
        query = np.repeat(np.arange(start, start + len(labels)), wanted)
        found = labels.ravel()
        near = (similarity.ravel() >= floor) & (found >= 0) & (found != query)
        lefts.append(np.minimum(query[near], found[near]))
        rights.append(np.maximum(query[near], found[near]))
    pairs = np.unique(np.stack([np.concatenate(lefts), np.concatenate(rights)]), axis=1)
    return pairs[0], pairs[1]


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
            left, right = _nearest_pairs(vectors[rows], floor)
            # rows is ascending, so left < right still holds in the whole set's numbering
            lefts.append(rows[left])
            rights.append(rows[right])
    return np.concatenate(lefts), np.concatenate(rights)
