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

It runs by key (pipeline/stage.py's ByKey), as SemDeDup runs at scale: each part embeds one
record in SAMPLE_EVERY (chosen by its id's hash, so the sample does not depend on the parts),
one task trains the k-means centroids on that sample, each part embeds its texts (a text's
vector does not depend on the texts embedded with it, pipeline/text/embeddings.py) and sends
each record to its nearest centroid's key partition, each key partition searches the
k-means partitions it holds (in parallel with the others), and the decision, which holds
only the records in some pair and their pairs, resolves the clusters as exact dedup does;
each part then drops its duplicates. Up to `exact_search_max` records there is one
partition, searched exactly by one task.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.config import DedupConfig, SemanticConfig
from pipeline.core import reasons
from pipeline.dedup import duplicates
from pipeline.stage import ByKey, Decided, RunContext, StageResult, read_by_parts
from pipeline.text.embeddings import DIMENSIONS, cache_dir, cached_vectors, embed

STAGE = "semantic_dedup"
DROPS = duplicates.Drops(STAGE, reasons.SEMANTIC_DUPLICATE, "semantic")
SEED = 1234
QUERY_BLOCK = 8192  # query rows per search: bounds the memory of faiss's result
NEIGHBOURS = 32  # nearest rows each row is compared with
SAMPLE_EVERY = 8  # one record in 8 (by its id's hash) trains the k-means centroids
CANDIDATES = 4  # nearest centroids by the matrix product, then measured row by row
VECTOR = pl.Array(pl.Float32, DIMENSIONS)
FITTED_SCHEMA = pl.Schema(
    {"_centroid": pl.UInt32, "_vector": VECTOR, "_embedded_by_sample": pl.UInt32}
)
COUNTS = ("_texts", "_embedded")  # a key partition's distinct texts, and those embedded now


def _sample(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """The vectors that train the k-means centroids: one record in SAMPLE_EVERY, chosen by
    its id's hash (the same whichever part holds it), embedded here (and cached)."""
    rows = (
        frame.filter(pl.col("record_id").nchash.xxh3_64() % SAMPLE_EVERY == 0)
        .select("record_id", "content_hash", "text")
        .collect()
    )
    embedded = embed(
        rows["text"], rows["content_hash"], cache_dir(ctx.config.workdir), cfg.semantic.batch_size
    )
    return rows.select(
        "record_id",
        "content_hash",
        pl.Series("_vector", embedded.vectors, dtype=VECTOR),
        pl.col("content_hash").is_in(embedded.fresh.implode()).alias("_fresh"),
    )


def _fit(samples: pl.LazyFrame, records: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The k-means centroids (rows `_centroid`, `_vector`) when there are more than
    `exact_search_max` records, none when one exact search covers them all; and, in a row
    without a centroid, how many distinct texts the sample embedded."""
    semantic, sample = cfg.semantic, samples.collect().sort("record_id")
    embedded = sample.filter("_fresh")["content_hash"].n_unique()
    counted = pl.DataFrame([{"_embedded_by_sample": embedded}], schema=FITTED_SCHEMA)
    n = records.select(pl.len()).collect().item()
    if n <= semantic.exact_search_max or sample.height < 2:
        return counted
    wanted = min(n, semantic.partitions or round(math.sqrt(n)), sample.height)
    centroids = train_centroids(_matrix(sample), wanted)
    trained = pl.DataFrame(
        {
            "_centroid": np.arange(len(centroids)),
            "_vector": centroids,
            "_embedded_by_sample": [None] * len(centroids),
        },
        schema=FITTED_SCHEMA,
    )
    return pl.concat([counted, trained])


def _keys(
    frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext, fitted: pl.DataFrame
) -> pl.DataFrame:
    """What the keep rule needs of each record of a part, its text's vector and its nearest
    centroid, whose key partition searches it: the part's texts are embedded here (or read
    from the cache), so parts embed in parallel."""
    keys = duplicates.member_columns(frame, ctx, extra=("content_hash", "text"))
    keys = keys.collect()
    embedded = embed(
        keys["text"], keys["content_hash"], cache_dir(ctx.config.workdir), cfg.semantic.batch_size
    )
    nearest = pl.Series("_centroid", nearest_centroid(embedded.vectors, _centroids(fitted)))
    return keys.drop("text").with_columns(
        pl.Series("_vector", embedded.vectors, dtype=VECTOR),
        pl.col("content_hash").is_in(embedded.fresh.implode()).alias("_fresh"),
        nearest.cast(pl.UInt32),
        (nearest.cast(pl.UInt64) * (1 << 40)).alias("_key"),  # the high bits choose the partition
    )


def _search(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """Search each k-means partition this key partition holds: the records in some pair,
    each with its partners of higher record id and their cosines; and a row without a
    record that counts the distinct texts here (a text's copies share a vector, so a
    partition) and those embedded by this run."""
    rows = keys.collect()
    semantic = cfg.semantic
    rows = rows.sort("_centroid", "record_id")
    counts = pl.DataFrame(
        {
            "_texts": [rows["content_hash"].n_unique()],
            "_embedded": [rows.filter("_fresh")["content_hash"].n_unique()],
        },
        schema=dict.fromkeys(COUNTS, pl.UInt32),
    )
    floor = min(semantic.threshold, semantic.related_threshold or semantic.threshold)
    left, right, similarity = pairs_within(_matrix(rows), rows["_centroid"].to_numpy(), floor)
    partners = (
        pl.DataFrame(
            {
                "_row": pl.Series(left, dtype=pl.UInt32),
                "_partner": rows["record_id"].gather(right),
                "_similarity": similarity.astype(np.float64),
            }
        )
        .group_by("_row", maintain_order=True)
        .agg("_partner", "_similarity")
    )
    in_pairs = pl.Series(np.unique(np.concatenate([left, right])), dtype=pl.UInt32)
    members = (
        rows.drop("_vector", "_fresh", "_centroid", "_key")
        .with_row_index("_row")
        .filter(pl.col("_row").is_in(in_pairs.implode()))
        .join(partners, on="_row", how="left", maintain_order="left")
        .drop("_row")
    )
    return pl.concat([counts, members], how="diagonal_relaxed")


def _decide(
    found: pl.LazyFrame,
    records: pl.LazyFrame,
    cfg: DedupConfig,
    ctx: RunContext,
    fitted: pl.DataFrame,
) -> Decided:
    """Cluster the duplicates the partitions found and keep one of each."""
    semantic = cfg.semantic
    found = found.collect()
    counts = found.filter(pl.col("record_id").is_null())
    rows = found.filter(pl.col("record_id").is_not_null())
    members = duplicates.numbered(rows.drop("_partner", "_similarity", *COUNTS), ctx)
    ids = members.select("record_id", "_i")
    pairs = (
        rows.select("record_id", "_partner", "_similarity")
        .explode("_partner", "_similarity")
        .drop_nulls("_partner")
        .join(ids, on="record_id")
        .join(ids.rename({"record_id": "_partner", "_i": "right"}), on="_partner")
        .select(pl.col("_i").alias("left"), "right", pl.col("_similarity").alias("similarity"))
        .sort("left", "right")
    )
    is_duplicate = pl.col("similarity") >= semantic.threshold
    duplicate_pairs, related_pairs = pairs.filter(is_duplicate), pairs.filter(~is_duplicate)
    resolution = duplicates.resolve(members, duplicate_pairs, related_pairs, cfg.keep)
    centroids = _centroids(fitted)
    new = counts["_embedded"].sum() + fitted["_embedded_by_sample"].sum()
    return duplicates.decide(
        members,
        resolution,
        records,
        drops=DROPS,
        similarity=lambda dropped: _similarity(dropped, pairs, members, records, cfg, ctx),
        ctx=ctx,
        stats={
            "records": records.select(pl.len()).collect().item(),
            "embedded_new": new,
            "embedded_from_cache": counts["_texts"].sum() - new,
            "search": "partitioned" if len(centroids) else "exact",
            "partitions": max(len(centroids), 1),
            "duplicate_pairs": duplicate_pairs.height,
            "related_pairs": related_pairs.height,
        },
    )


def _similarity(
    dropped: pl.DataFrame,
    pairs: pl.DataFrame,
    members: pl.DataFrame,
    records: pl.LazyFrame,
    cfg: DedupConfig,
    ctx: RunContext,
) -> pl.Series:
    """The cosine of each dropped record (`_i`) and the record kept for it (`kept_i`): the
    pair's, or, for a chain (A~B~C: C dropped for A), computed from the two cached vectors."""
    asked = dropped.with_row_index("_order").with_columns(
        pl.min_horizontal("_i", "kept_i").alias("left"),
        pl.max_horizontal("_i", "kept_i").alias("right"),
    )
    known = asked.join(pairs, on=["left", "right"], how="left")
    chains = known.filter(pl.col("similarity").is_null())
    if chains.height:
        hashes = members.select("_i", "content_hash")
        chains = chains.join(hashes, left_on="left", right_on="_i").join(
            hashes.rename({"_i": "right", "content_hash": "_right_hash"}), on="right"
        )
        wanted = pl.concat([chains["content_hash"], chains["_right_hash"]]).unique()
        cache = cache_dir(ctx.config.workdir)
        vectors = cached_vectors(wanted, cache)
        if vectors.height < wanted.len():  # embedded by another worker, with a cache of its own
            missing = wanted.filter(~wanted.is_in(vectors["content_hash"].implode()))
            texts = read_by_parts(
                records,
                ctx.config.runner.part_rows,
                lambda part: part.select("content_hash", "text").filter(
                    pl.col("content_hash").is_in(missing.implode())
                ),
            ).unique("content_hash")
            embed(texts["text"], texts["content_hash"], cache, cfg.semantic.batch_size)
            vectors = cached_vectors(wanted, cache)
        row = {h: i for i, h in enumerate(vectors["content_hash"])}
        matrix = _matrix(vectors.rename({"embedding": "_vector"}))
        left = [row[h] for h in chains["content_hash"]]
        right = [row[h] for h in chains["_right_hash"]]
        measured = chains.select("_order").with_columns(
            pl.Series("_measured", cosines(matrix, left, right).astype(np.float64))
        )
        known = known.join(measured, on="_order", how="left").with_columns(
            pl.coalesce("similarity", "_measured").alias("similarity")
        )
    return known.sort("_order")["similarity"]


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> StageResult:
    """Drop a part's duplicates, give its kept records their cluster ids."""
    kept, events = duplicates.apply_decisions(frame, decisions, DROPS, ctx)
    return StageResult(frame=kept, events=events)


# a sample of each part trains the centroids once; each part's vectors go to their nearest
# centroid's key partition, searched there; one decision; each part drops its duplicates
semantic_dedup = ByKey(
    keys=_keys,
    reduce=_search,
    decide=_decide,
    apply=_apply,
    sample=_sample,
    fit=_fit,
    off=lambda cfg: {"dropped": 0} if cfg.semantic is None else None,
)


def _matrix(rows: pl.DataFrame) -> np.ndarray:
    return np.ascontiguousarray(rows["_vector"].to_numpy(), dtype=np.float32).reshape(
        -1, DIMENSIONS
    )


def _centroids(fitted: pl.DataFrame) -> np.ndarray:
    return _matrix(fitted.filter(pl.col("_centroid").is_not_null()).sort("_centroid"))


def similar_pairs(
    vectors: np.ndarray, floor: float, semantic: SemanticConfig
) -> tuple[pl.DataFrame, str, int]:
    """Row pairs (left < right) at least `floor` similar, sorted, as a pairs frame, found in
    one array as the stage finds them (centroids trained on every SAMPLE_EVERY-th row); with
    the search used ("exact" or "partitioned") and the number of partitions searched."""
    n = len(vectors)
    centroids = np.empty((0, DIMENSIONS), dtype=np.float32)
    if n > semantic.exact_search_max:
        wanted = min(n, semantic.partitions or round(math.sqrt(n)))
        centroids = train_centroids(vectors[::SAMPLE_EVERY], wanted)
    left, right, similarity = pairs_within(vectors, nearest_centroid(vectors, centroids), floor)
    order = np.lexsort((right, left))
    pairs = duplicates.pairs_frame(left[order], right[order], similarity[order].astype(np.float64))
    return pairs, "partitioned" if len(centroids) else "exact", max(len(centroids), 1)


def train_centroids(sample: np.ndarray, wanted: int) -> np.ndarray:
    """Spherical k-means centroids (SemDeDup) of the sample's rows: at most `wanted`, at most
    one per row."""
    import faiss

    kmeans = faiss.Kmeans(
        sample.shape[1],
        min(wanted, len(sample)),
        niter=20,
        spherical=True,
        seed=SEED,
        min_points_per_centroid=1,  # small partitions are fine: no warning for them
        verbose=False,
    )
    kmeans.train(np.ascontiguousarray(sample, dtype=np.float32))
    return np.ascontiguousarray(kmeans.centroids, dtype=np.float32)


def nearest_centroid(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid (0 for every row when there are none). A matrix product
    proposes CANDIDATES, whose inner products are then computed row by row, so that a row's
    answer does not depend on the rows multiplied with it (a part's own); ties go to the lower
    centroid."""
    if not len(centroids):
        return np.zeros(len(vectors), dtype=np.int64)
    wanted = min(CANDIDATES, len(centroids))
    nearest = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), QUERY_BLOCK):
        block = vectors[start : start + QUERY_BLOCK]
        scores = block @ centroids.T
        candidates = np.sort(np.argpartition(-scores, wanted - 1, axis=1)[:, :wanted], axis=1)
        exact = np.einsum("ij,ikj->ik", block, centroids[candidates])
        best = np.argmax(exact, axis=1)  # the first of equals: the lowest centroid
        nearest[start : start + len(block)] = candidates[np.arange(len(block)), best]
    return nearest


def pairs_within(
    vectors: np.ndarray, groups: np.ndarray, floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of rows (left < right) of one group at least `floor` similar, with their
    cosines: each group searched on its own, exactly."""
    order = np.argsort(groups, kind="stable")
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    lefts, rights = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for rows in np.split(order, bounds):
        if len(rows) > 1:
            left, right = _nearest_pairs(vectors[rows], floor)
            # rows is ascending, so left < right still holds in the whole set's numbering
            lefts.append(rows[left])
            rights.append(rows[right])
    left, right = np.concatenate(lefts), np.concatenate(rights)
    similarity = cosines(vectors, left, right)
    keep = similarity >= floor  # the cut on the values recomputed in one place
    return left[keep], right[keep], similarity[keep]


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
