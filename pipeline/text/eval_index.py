"""Protected evaluation sets and the index that checks records against them.

An evaluation set is a folder: `items.parquet` (item_id, text, content_hash) and files
prepared for given method settings, each named for its settings, so a run whose settings
match reuses them and any other run computes what it needs in memory:

- `ngrams-v2-n{n}-s{short_n}.parquet`: (n, item, hash, at, words), the distinct word n-gram
  hashes of every item (its n-grams when it has at least n words, else its short_n-grams),
  each with the word position where it first occurs, and the item's count of words;
- `minhash-{digest}.parquet`: (item, keys, shingles), the LSH band keys and the distinct
  shingle hashes of every item that has shingles; the digest covers the MinHash settings;
- `embeddings-{model digest}.npy`: the items' unit vectors (float32, items x 384).

The catalog keeps each file's sha256 (`write_eval_set` returns them) and `load_eval_set`
refuses a set whose files changed. The same items and settings always give the same bytes.

`ContaminationIndex` checks records against one set of items (a registered set, or a run's
test split) with up to four methods; every match is (row, item_id, method, score, span):

- exact: the record's content hash is an item's (ingest's xxh3-128 of the normalized text);
- ngram: words are what pipeline/text/minhash.py shingles (lower case, every run of characters
  other than letters, marks and digits one space). An item of at least `n` words matches a
  record when the word n-grams they share cover at least `min_coverage` of the item's words
  (scored by that share; with 0, one shared n-gram is enough: GPT-3's 13-gram rule); an item
  of `short_n` to `n - 1` words matches a record that holds at least `short_fraction` of its
  short_n-grams, scored by that share; shorter items are skipped
  (`stats["ngram"]["skipped_short"]`). Boilerplate is not evidence: an n-gram held by more
  than `ignore_common_in_items` items is never counted, and one held by more than
  `ignore_common_in_training` training texts (`ignore_common`, run over them first) counts
  only towards a whole copy, a record covering `whole_copy` of the item. `span` holds the
  record's words of the first n-gram that decided;
- minhash: LSH candidates by band keys (pipeline/text/minhash.py), confirmed by the exact Jaccard
  similarity of the two shingle sets (the score) reaching the threshold;
- embedding: the cosine of all-MiniLM-L6-v2 vectors (pipeline/text/embeddings.py) of the record
  and its nearest item (faiss, exact inner product), when it reaches the threshold.

Each method reports at most one item per record, its strongest (highest score, then the
first item); `strongest` picks one match per record across methods.

Word n-gram hashing and matching, and how they are made fast: pipeline/text/word_ngrams.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import ContaminationMethods
from pipeline.core.errors import DataError
from pipeline.core.progress import progress
from pipeline.text.eval_minhash import (
    BATCH_RECORDS,
    BandTable,
    item_minhash,
    minhash_batch,
)
from pipeline.text.eval_sets import (
    ITEMS_FILE,
    checked_items,
    embed_items,
    embedding_file,
    minhash_file,
    ngram_file,
)
from pipeline.text.word_ngrams import (
    GramTable,
    add_document_counts,
    gram_matches,
    gram_tables,
    item_grams,
)

METHODS = ("exact", "ngram", "minhash", "embedding")  # also the order `strongest` breaks ties in
MATCH_SCHEMA = pl.Schema(
    {
        "row": pl.UInt32,
        "item_id": pl.String,
        "method": pl.String,
        "score": pl.Float64,
        "span": pl.String,
    }
)
QUERY_BLOCK = 8192  # embedding queries per faiss search
WORKERS = max(1, min(os.cpu_count() or 1, 8))


# ---------------------------------------------------------------------------------------------
# Evaluation-set folders


# ---------------------------------------------------------------------------------------------
# The index


@dataclass
class ContaminationIndex:
    """Everything needed to check records against one set of eval items (a registered set or
    a run's test split) for given methods."""

    items: pl.DataFrame
    methods: ContaminationMethods
    exact: pl.DataFrame | None = None  # content_hash, item (first item of each hash)
    grams: list[GramTable] = field(default_factory=list)
    minhash: pl.DataFrame | None = None  # item, shingles
    minhash_bands: BandTable | None = None  # the items' band keys
    vectors: np.ndarray | None = None  # item vectors, with `vector_items` their positions
    vector_items: np.ndarray | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        items: pl.DataFrame,
        methods: ContaminationMethods,
        folder: Path | None = None,
        embedding_cache: Path | None = None,
    ) -> ContaminationIndex:
        """Prepare the items for `methods`, reusing the files prepared in `folder` (an
        evaluation set's, verified by `load_eval_set`) where their settings match."""
        items = checked_items(items)
        index = cls(items=items, methods=methods)
        stats: dict[str, Any] = {"items": items.height, "prepared": []}
        reusable = _reusable(folder, items)

        def prepared(name: str) -> Path | None:
            if reusable and (Path(folder) / name).is_file():
                stats["prepared"].append(name)
                return Path(folder) / name
            return None

        if methods.exact is not None:
            index.exact = items.select(
                "content_hash", pl.int_range(pl.len(), dtype=pl.UInt32).alias("item")
            ).unique("content_hash", keep="first", maintain_order=True)
        if methods.ngram is not None:
            path = prepared(ngram_file(methods.ngram))
            grams = pl.read_parquet(path) if path else item_grams(items["text"], methods.ngram)
            index.grams, stats["ngram"] = gram_tables(grams, methods.ngram, items.height)
        if methods.minhash is not None:
            path = prepared(minhash_file(methods.minhash))
            sketches = (
                pl.read_parquet(path) if path else item_minhash(items["text"], methods.minhash)
            )
            index.minhash_bands = BandTable.of(
                sketches["item"].to_numpy(),
                sketches["keys"].to_numpy(),  # (items, bands), an Array column
            )
            index.minhash = sketches.drop("keys")  # the band table holds them
            stats["minhash"] = {"items_with_shingles": index.minhash.height}
        if methods.embedding is not None:
            path = prepared(embedding_file())
            vectors = (
                np.load(path, allow_pickle=False)
                if path
                else embed_items(items, embedding_cache, methods.embedding.batch_size)
            )
            # one vector per distinct text: equal texts would tie, and the first item wins
            first = items.select(pl.col("content_hash").is_first_distinct())["content_hash"]
            index.vector_items = np.flatnonzero(first.to_numpy())
            index.vectors = np.ascontiguousarray(vectors[index.vector_items], dtype=np.float32)
        index.stats = stats
        return index

    @property
    def skipped_short(self) -> int:
        """Items the n-gram method skips: fewer words than short_n."""
        return self.stats.get("ngram", {}).get("skipped_short", 0)

    def matches(self, records: pl.DataFrame, embedding_cache: Path | None = None) -> pl.DataFrame:
        """Every match of `records` (columns text and content_hash; a row's position is its
        `row`): at most one per (row, method), the method's strongest item."""
        missing = [column for column in ("text", "content_hash") if column not in records.columns]
        if missing:
            raise DataError(
                f"records to check lack the column(s) {', '.join(missing)}; pass the text and "
                "the content_hash ingest computes"
            )
        found = [MATCH_SCHEMA.to_frame()]
        if self.items.height and records.height:
            if self.exact is not None:
                found.append(self._exact(records))
            if self.grams:
                found.append(self._ngram(records["text"]))
            if self.minhash is not None:
                found.append(self._minhash(records["text"]))
            if self.vectors is not None:
                found.append(self._embedding(records, embedding_cache))
        order = pl.col("method").replace_strict(list(METHODS), list(range(len(METHODS))))
        return pl.concat(found).sort("row", order)

    def _found(self, row: np.ndarray, item: np.ndarray, method: str, score, span=None):
        return pl.DataFrame(
            {
                "row": pl.Series(row, dtype=pl.UInt32),
                "item_id": self.items["item_id"].gather(pl.Series(item, dtype=pl.UInt32)),
                "method": pl.Series([method] * len(row), dtype=pl.String),
                "score": pl.Series(score, dtype=pl.Float64),
                "span": pl.Series(span if span is not None else [None] * len(row), dtype=pl.String),
            },
            schema=MATCH_SCHEMA,
        )

    # -- exact ------------------------------------------------------------------------------

    def _exact(self, records: pl.DataFrame) -> pl.DataFrame:
        hits = (
            records.select(pl.col("content_hash").cast(pl.String))
            .with_row_index("row")
            .join(self.exact, on="content_hash", how="inner")
            .sort("row")
        )
        return self._found(
            hits["row"].to_numpy(), hits["item"].to_numpy(), "exact", np.ones(hits.height)
        )

    # -- n-grams ----------------------------------------------------------------------------

    def _ngram(self, texts: pl.Series) -> pl.DataFrame:
        found = gram_matches(texts, self.grams, WORKERS)
        return self._found(
            found["doc"].to_numpy(),
            found["item"].to_numpy(),
            "ngram",
            found["score"].to_numpy(),
            found["span"],
        )

    # -- MinHash ----------------------------------------------------------------------------

    def _minhash(self, texts: pl.Series) -> pl.DataFrame:
        check = self.methods.minhash
        texts = texts.cast(pl.String)

        def batch(start: int) -> pl.DataFrame:
            some = texts.slice(start, BATCH_RECORDS)
            found = minhash_batch(some, check, self.minhash_bands, self.minhash)
            return found.with_columns(pl.col("doc") + start)

        starts = list(range(0, texts.len(), BATCH_RECORDS))
        parts = []
        with (
            progress("contamination: MinHash", texts.len()) as advance,
            ThreadPoolExecutor(WORKERS) as pool,
        ):
            for start, part in zip(starts, pool.map(batch, starts), strict=True):
                parts.append(part)
                advance(min(BATCH_RECORDS, texts.len() - start))
        found = (
            pl.concat(parts)
            if parts
            else pl.DataFrame(schema={"doc": pl.Int64, "item": pl.UInt32, "score": pl.Float64})
        )
        return self._found(
            found["doc"].to_numpy(), found["item"].to_numpy(), "minhash", found["score"].to_numpy()
        )

    # -- embeddings -------------------------------------------------------------------------

    def _embedding(self, records: pl.DataFrame, embedding_cache: Path | None) -> pl.DataFrame:
        import faiss

        check = self.methods.embedding
        rows = np.flatnonzero(records["content_hash"].is_not_null().to_numpy())
        some = records.select("text", "content_hash")[rows]
        queries = embed_items(some, embedding_cache, check.batch_size)
        index = faiss.IndexFlatIP(self.vectors.shape[1])
        index.add(self.vectors)
        best_score = np.empty(len(rows), dtype=np.float32)
        best_item = np.empty(len(rows), dtype=np.int64)
        for start in range(0, len(rows), QUERY_BLOCK):
            scores, labels = index.search(queries[start : start + QUERY_BLOCK], 1)
            best_score[start : start + len(labels)] = scores[:, 0]
            best_item[start : start + len(labels)] = labels[:, 0]
        hit = (best_item >= 0) & (best_score >= check.threshold)
        return self._found(
            rows[hit],
            self.vector_items[best_item[hit]],
            "embedding",
            best_score[hit].astype(np.float64),
        )


def ignore_common(indexes: list[ContaminationIndex], training: Iterable[pl.Series]) -> None:
    """Count, over the training texts (in batches, each hashed once for every index), the
    texts holding each item n-gram; those more than `ignore_common_in_training` of them hold
    are evidence only of a whole copy (`whole_copy`) from then on."""
    counted = [
        index for index in indexes
        if index.grams and index.methods.ngram and index.methods.ngram.ignore_common_in_training
    ]  # fmt: skip
    tables = [table for index in counted for table in index.grams]
    if not tables:
        return
    counts = [np.zeros(len(table.hashes), dtype=np.int32) for table in tables]
    for texts in training:
        add_document_counts(texts, tables, counts, WORKERS)
    for index in counted:
        limit = index.methods.ngram.ignore_common_in_training
        common = [counts.pop(0) > limit for _ in index.grams]
        index.grams = [table.with_common(c) for table, c in zip(index.grams, common, strict=True)]
        index.stats["ngram"]["common_in_training"] = int(sum(c.sum() for c in common))


def strongest(matches: pl.DataFrame) -> pl.DataFrame:
    """One match per record row: the highest score; on a tie the method first in METHODS,
    then the first evaluation set (when named) and item by name."""
    order = pl.col("method").replace_strict(list(METHODS), list(range(len(METHODS))))
    names = [column for column in ("eval_set", "item_id") if column in matches.columns]
    ranked = matches.sort(
        "row", pl.col("score"), order, *names, descending=[False, True, *[False] * (1 + len(names))]
    )
    return ranked.unique("row", keep="first", maintain_order=True)


def _reusable(folder: Path | None, items: pl.DataFrame) -> bool:
    """Whether `folder` holds files prepared for these very items."""
    if folder is None or not (Path(folder) / ITEMS_FILE).is_file():
        return False
    stored = pl.read_parquet(Path(folder) / ITEMS_FILE, columns=["item_id", "content_hash"])
    return stored.equals(items.select("item_id", "content_hash"))


# ---------------------------------------------------------------------------------------------
# MinHash
