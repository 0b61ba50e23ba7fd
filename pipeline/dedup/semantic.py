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

It runs by key (pipeline/stage.py's ByKey): each part embeds its own texts (a text's vector
does not depend on the texts embedded with it, pipeline/text/embeddings.py), the decision
searches every record's vector at once (1.5 KB a record: this step grows with the dataset)
and resolves the clusters as exact dedup does, and each part drops its duplicates.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.config import DedupConfig, SemanticConfig
from pipeline.core import reasons
from pipeline.dedup import duplicates
from pipeline.stage import ByKey, Decided, RunContext, StageResult
from pipeline.text.embeddings import DIMENSIONS, embed

STAGE = "semantic_dedup"
DROPS = duplicates.Drops(STAGE, reasons.SEMANTIC_DUPLICATE, "semantic")
SEED = 1234
QUERY_BLOCK = 8192  # query rows per search: bounds the memory of faiss's result
NEIGHBOURS = 32  # nearest rows each row is compared with


def _keys(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """What the keep rule needs of each record of a part, and its text's vector: the part's
    texts are embedded here (or read from the cache), so parts embed in parallel."""
    keys = duplicates.member_columns(frame, extra=("content_hash", "text"))
    keys = keys.with_columns(pl.col("record_id").nchash.xxh3_64().alias("_key"))  # any spread
    if cfg.semantic is None:
        return keys.drop("text").limit(0).collect()
    keys = keys.collect()
    cache_dir = Path(ctx.config.workdir) / "cache" / "embeddings"
    embedded = embed(keys["text"], keys["content_hash"], cache_dir, cfg.semantic.batch_size)
    return keys.drop("text").with_columns(
        pl.Series("_vector", embedded.vectors, dtype=pl.Array(pl.Float32, DIMENSIONS)),
        pl.col("content_hash").is_in(embedded.fresh.implode()).alias("_fresh"),
    )


def _every_vector(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The search needs every vector at once: a key partition passes its rows on."""
    return keys.drop("_key").collect()


def _decide(
    vectors: pl.LazyFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Search every record's nearest ones, cluster the duplicates and keep one of each."""
    semantic = cfg.semantic
    if semantic is None:
        return Decided(pl.DataFrame(schema=duplicates.DECISION_SCHEMA), {"dropped": 0})
    started = time.perf_counter()
    found = vectors.collect().sort("record_id")  # the order `numbered` numbers members in
    fresh = found.filter("_fresh")["content_hash"].n_unique()
    matrix = np.ascontiguousarray(found["_vector"].to_numpy(), dtype=np.float32)
    members = duplicates.numbered(found.drop("_vector", "_fresh"), cfg.keep, ctx)
    del found
    floor = min(semantic.threshold, semantic.related_threshold or semantic.threshold)
    pairs, search, partitions = similar_pairs(matrix, floor, semantic)
    is_duplicate = pl.col("similarity") >= semantic.threshold
    duplicate_pairs, related_pairs = pairs.filter(is_duplicate), pairs.filter(~is_duplicate)
    distinct = members["content_hash"].n_unique()
    resolution = duplicates.resolve(members, duplicate_pairs, related_pairs, cfg.keep)
    return duplicates.decide(
        members,
        resolution,
        records,
        drops=DROPS,
        similarity=lambda dropped: pl.Series(cosines(matrix, dropped["_i"], dropped["kept_i"])),
        ctx=ctx,
        stats={
            "records": members.height,
            "embedded_new": fresh,
            "embedded_from_cache": distinct - fresh,
            "search": search,
            "partitions": partitions,
            "duplicate_pairs": duplicate_pairs.height,
            "related_pairs": related_pairs.height,
            "search_seconds": round(time.perf_counter() - started, 3),
        },
    )


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> StageResult:
    """Drop a part's duplicates, give its kept records their cluster ids."""
    kept, events = duplicates.apply_decisions(frame, decisions, DROPS, ctx)
    return StageResult(frame=kept, events=events)


# each part's vectors (embedded in its own task), one search over all of them, then each part
# drops its duplicates
semantic_dedup = ByKey(keys=_keys, reduce=_every_vector, decide=_decide, apply=_apply)


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
