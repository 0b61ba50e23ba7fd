"""MinHash for evaluation sets: the items' LSH band keys and shingles, and the candidates of a
batch of records confirmed by exact Jaccard (pipeline/text/eval_index.py uses them)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.config.contamination import MinHashCheck
from pipeline.text import minhash

MINHASH_VERSION = 1


CHAR_NGRAM = 5  # MinHash shingles of text without spaces (MinHashConfig's default)


FALSE_POSITIVE_WEIGHT = 0.2  # LSH banding: candidates are confirmed by exact Jaccard


# records per MinHash batch: their shingles are the most a contamination part holds
BATCH_RECORDS = 25_000


def banding(check: MinHashCheck) -> tuple[int, int]:
    return minhash.optimal_bands(check.threshold, check.num_perm, FALSE_POSITIVE_WEIGHT)


def minhash_sketch(
    texts: pl.Series, check: MinHashCheck
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """(distinct shingles (doc, hash), band keys, which docs have shingles)."""
    bands, rows = banding(check)
    shingles = minhash.shingle_hashes(texts, check.ngram, CHAR_NGRAM).unique()
    signature = minhash.signatures(shingles, texts.len(), check.num_perm, check.seed)
    keys = minhash.band_keys(signature, bands, rows)
    return shingles, keys, minhash.has_shingles(shingles, texts.len())


def item_minhash(texts: pl.Series, check: MinHashCheck) -> pl.DataFrame:
    """(item, keys, shingles) of every item with shingles: band keys and sorted distinct
    shingle hashes."""
    bands, _ = banding(check)
    shingles, keys, present = minhash_sketch(texts.cast(pl.String), check)
    items = np.flatnonzero(present)
    sets = (
        shingles.rename({"doc": "item"})
        .group_by("item")
        .agg(pl.col("hash").sort().alias("shingles"))
    )
    return (
        pl.DataFrame(
            {"item": pl.Series(items, dtype=pl.UInt32), "keys": keys[items]},
            schema={"item": pl.UInt32, "keys": pl.Array(pl.UInt64, bands)},
        )
        .join(sets, on="item", how="left")
        .sort("item")
    )


def band_frame(owners: np.ndarray, keys: np.ndarray, name: str) -> pl.DataFrame:
    """(owner, band, key) for a (owners, bands) array of band keys."""
    bands = keys.shape[1] if keys.ndim == 2 else 0
    return pl.DataFrame(
        {
            name: np.repeat(owners.astype(np.int64), bands),
            "band": np.tile(np.arange(bands, dtype=np.uint16), len(owners)),
            "key": keys.ravel(),
        },
        schema={name: pl.Int64, "band": pl.UInt16, "key": pl.UInt64},
    )


def minhash_batch(
    texts: pl.Series,
    check: MinHashCheck,
    bands: int,
    rows: int,
    item_keys: pl.DataFrame,
    item_shingles: pl.DataFrame,
    item_sizes: pl.DataFrame,
) -> pl.DataFrame:
    """(doc, item, score) of the strongest confirmed item of every matched doc of a batch."""
    shingles, keys, present = minhash_sketch(texts, check)
    docs = np.flatnonzero(present)
    record_keys = band_frame(docs, keys[docs], "doc")
    candidates = record_keys.join(item_keys, on=["band", "key"]).select("doc", "item").unique()
    record_sizes = (
        shingles.group_by("doc").len("doc_size").with_columns(pl.col("doc").cast(pl.Int64))
    )
    shared = (
        candidates.join(shingles.with_columns(pl.col("doc").cast(pl.Int64)), on="doc")
        .join(item_shingles, on=["item", "hash"], how="semi")
        .group_by("doc", "item")
        .len("shared")
    )
    scored = (
        candidates.join(shared, on=["doc", "item"], how="left")
        .join(record_sizes, on="doc")
        .join(item_sizes, on="item")
        .with_columns(
            (
                pl.col("shared").fill_null(0)
                / (pl.col("doc_size") + pl.col("item_size") - pl.col("shared").fill_null(0))
            ).alias("score")
        )
        .filter(pl.col("score") >= check.threshold)
    )
    return (
        scored.sort("doc", pl.col("score"), "item", descending=[False, True, False])
        .unique("doc", keep="first", maintain_order=True)
        .select("doc", "item", "score")
    )
