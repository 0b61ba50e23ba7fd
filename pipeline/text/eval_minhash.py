"""MinHash for evaluation sets: the items' LSH band keys and shingles, and the candidates of a
batch of records confirmed by exact Jaccard (pipeline/text/eval_index.py uses them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.config.contamination import MinHashCheck
from pipeline.text import minhash
from pipeline.text.word_ngrams import item_batches, ramp

MINHASH_VERSION = 1


CHAR_NGRAM = 5  # MinHash shingles of text without spaces (MinHashConfig's default)


FALSE_POSITIVE_WEIGHT = 0.2  # LSH banding: candidates are confirmed by exact Jaccard


# records (or items) per MinHash batch: a batch's candidate pairs and their shingles are the
# most a contamination part holds (a part of 10M spine records, two threads: batches of 25,000
# peaked at 1.47 GB, of 10,000 at 0.97 GB, and took no longer)
BATCH_RECORDS = 10_000


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
    shingle hashes; BATCH_RECORDS items at a time."""
    batches = item_batches(texts, BATCH_RECORDS, lambda some: _item_minhash(some, check))
    bands, _ = banding(check)
    empty = pl.DataFrame(
        schema={
            "item": pl.UInt32,
            "keys": pl.Array(pl.UInt64, bands),
            "shingles": pl.List(pl.UInt64),
        }
    )
    return pl.concat([empty, *batches])


def _item_minhash(texts: pl.Series, check: MinHashCheck) -> pl.DataFrame:
    bands, _ = banding(check)
    shingles, keys, present = minhash_sketch(texts, check)
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


@dataclass(frozen=True)
class BandTable:
    """The items' LSH band keys, sorted band by band, so that a batch's candidates are found
    by binary search (a hash join against every item's keys took 1.2 s per 25,000 records
    against the test split of 10M spine records)."""

    keys: np.ndarray  # uint64 (bands, items): each band's keys, sorted
    items: np.ndarray  # uint32 (bands, items): the item of each key

    @classmethod
    def of(cls, items: np.ndarray, keys: np.ndarray) -> BandTable:
        """The table of `keys` (items, bands), row k the band keys of item items[k]."""
        by_band = keys.T
        order = np.argsort(by_band, axis=1, kind="stable")
        return cls(np.take_along_axis(by_band, order, 1), items.astype(np.uint32)[order])

    def candidates(self, docs: np.ndarray, keys: np.ndarray) -> pl.DataFrame:
        """(doc, item), distinct: the items that share a band key with a doc (`keys`: the
        docs' band keys, one row per doc)."""
        found_docs, found_items = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for band, (sorted_keys, items) in enumerate(zip(self.keys, self.items, strict=True)):
            low = np.searchsorted(sorted_keys, keys[:, band], "left")
            counts = np.searchsorted(sorted_keys, keys[:, band], "right") - low
            found_docs.append(np.repeat(docs.astype(np.int64), counts))
            found_items.append(items[np.repeat(low, counts) + ramp(counts)].astype(np.int64))
        return pl.DataFrame(
            {"doc": np.concatenate(found_docs), "item": np.concatenate(found_items)}
        ).unique()


def minhash_batch(
    texts: pl.Series,
    check: MinHashCheck,
    item_keys: BandTable,
    item_sets: pl.DataFrame,
) -> pl.DataFrame:
    """(doc, item, score) of the strongest confirmed item of every matched doc of a batch.
    Only the candidate items' shingles are read out of `item_sets` (item, shingles), not
    every item's for every batch."""
    shingles, keys, present = minhash_sketch(texts, check)
    docs = np.flatnonzero(present)
    candidates = item_keys.candidates(docs, keys[docs])
    wanted = item_sets.join(
        candidates.select(pl.col("item").cast(pl.UInt32)).unique(), on="item", how="semi"
    ).select(pl.col("item").cast(pl.Int64), "shingles")
    item_shingles = wanted.select("item", pl.col("shingles").alias("hash")).explode("hash")
    item_sizes = wanted.select("item", pl.col("shingles").list.len().alias("item_size"))
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
