"""MinHash signatures and LSH bands, computed for a whole batch of documents at once.

Shingles: the text is lower-cased and every run of characters that are not letters or digits
becomes one space; shingles are the `ngram` consecutive words (a text shorter than that is
one shingle), or the `char_ngram` consecutive characters for a text without any whitespace
(Chinese, Japanese, identifiers). Each shingle is hashed with xxh3-64 (polars-hash).

Signatures: one-permutation MinHash with optimal densification (Li, Owen and Zhang 2012;
Shrivastava 2017). A seeded multiply-shift hash splits each shingle hash into a bin (one of
`num_perm`) and a 32-bit value; a document's signature holds the smallest value per bin.
An empty bin copies the bin that a fixed seeded sequence of probes (the same for every
document) first finds filled. Two signatures agree in a position with probability equal to
the Jaccard similarity of the shingle sets, as with `num_perm` separate permutations, but
each shingle is hashed once instead of `num_perm` times.

LSH: bands × rows are chosen like datasketch's MinHashLSH does, minimizing the weighted
false-positive and false-negative areas under the banding S-curve for the threshold.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

EMPTY = np.uint64(1 << 32)  # beyond every 32-bit value: marks an empty bin
_MIX = np.uint64(0x9E3779B97F4A7C15)
_32 = np.uint64(32)
_CHUNK_ELEMENTS = 1 << 18  # shingle-times-empty-bin products per step: fits in the CPU cache
_STEP_SHINGLES = 1024
THREADS = 2
_SHORT_DOC_SHINGLES = 2  # per bin: below, a document computes all its bins' hash functions


def normalized(texts: pl.Series) -> pl.Series:
    return texts.str.to_lowercase().str.replace_all(r"[^\p{L}\p{N}]+", " ").str.strip_chars()


def shingle_hashes(texts: pl.Series, ngram: int, char_ngram: int) -> pl.DataFrame:
    """(doc, hash) for every shingle of every text; doc is the text's position in `texts`.
    A text with no letters or digits has no shingles."""
    docs = (
        pl.DataFrame({"text": normalized(texts), "spaced": texts.str.contains(r"\s")})
        .with_row_index("doc")
        .filter(pl.col("text") != "")
    )
    words = docs.filter("spaced").select("doc", pl.col("text").str.split(" ").alias("token"))
    chars = docs.filter(~pl.col("spaced")).select(
        "doc", pl.col("text").str.split("").alias("token")
    )
    parts = [_ngrams(words, ngram), _ngrams(chars, char_ngram)]
    return pl.concat(parts).select("doc", pl.col("shingle").nchash.xxh3_64().alias("hash"))


def _ngrams(tokens: pl.DataFrame, n: int) -> pl.DataFrame:
    tokens = tokens.filter(pl.col("token").list.len() > 0)
    short = tokens.filter(pl.col("token").list.len() < n).select(
        "doc", pl.col("token").list.join(" ").alias("shingle")
    )
    exploded = tokens.filter(pl.col("token").list.len() >= n).explode("token")
    grams = exploded.select(
        "doc",
        pl.concat_str([pl.col("token").shift(-k) for k in range(n)], separator=" ").alias(
            "shingle"
        ),
        (pl.col("doc").shift(-(n - 1)) == pl.col("doc")).alias("_whole"),
    ).filter(pl.col("_whole"))
    return pl.concat([short, grams.drop("_whole")])


def _hash_functions(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded odd multipliers and addends: [0] and [1] split a shingle hash into bin and
    value; [2:] are the per-bin hash functions of empty bins."""
    rng = np.random.default_rng(seed)
    multipliers = rng.integers(0, 2**63, num_perm + 2, dtype=np.uint64) * 2 + 1
    return multipliers, rng.integers(0, 2**64 - 1, num_perm + 2, dtype=np.uint64)


def signatures(shingles: pl.DataFrame, n_docs: int, num_perm: int, seed: int) -> np.ndarray:
    """(n_docs, num_perm) uint32 signatures; rows of documents without shingles are all
    zero and must not be indexed (see `has_shingles`)."""
    shingles = shingles.sort("doc")
    hashes, docs = shingles["hash"].to_numpy(), shingles["doc"].to_numpy().astype(np.int64)
    mult, add = _hash_functions(seed, num_perm)
    bins = (((hashes * mult[0] + add[0]) >> _32) * np.uint64(num_perm)) >> _32
    values = (hashes * mult[1] + add[1]) >> _32
    signature = np.full(n_docs * num_perm, EMPTY, dtype=np.uint64)
    np.minimum.at(signature, docs * num_perm + bins.astype(np.int64), values)
    counts = np.bincount(docs, minlength=n_docs)
    empty = (signature == EMPTY) & np.repeat(counts > 0, num_perm)
    # Empty bins take their own hash function's minimum over the document's shingles: for
    # short documents (most bins empty) all bins at once, for long ones bin by bin.
    short = (counts > 0) & (counts < _SHORT_DOC_SHINGLES * num_perm)
    in_short = short[docs]
    all_bins = _all_bins(hashes[in_short], docs[in_short], mult[2:], add[2:])
    short_empty = empty.reshape(n_docs, num_perm)[short]
    signature.reshape(n_docs, num_perm)[np.flatnonzero(short)] = np.where(
        short_empty, all_bins, signature.reshape(n_docs, num_perm)[short]
    )
    long_empty = np.flatnonzero(empty & np.repeat(~short, num_perm))
    signature[long_empty] = _some_bins(hashes, counts, long_empty, num_perm, mult[2:], add[2:])
    signature[np.repeat(counts == 0, num_perm)] = 0
    return signature.reshape(n_docs, num_perm).astype(np.uint32)


def _all_bins(hashes: np.ndarray, docs: np.ndarray, mult: np.ndarray, add: np.ndarray):
    """Every bin's hash-function minimum for each document (shingles sorted by doc), in
    steps of whole documents that keep the shingle-by-bin products in the CPU cache."""
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else docs
    bounds = np.r_[starts, len(docs)]
    result = np.empty((len(starts), len(mult)), dtype=np.uint64)

    def fill(first: int, stop: int) -> None:
        while first < stop:
            last = int(np.searchsorted(bounds, bounds[first] + _STEP_SHINGLES, side="right")) - 1
            last = min(max(last, first + 1), stop)
            low, high = bounds[first], bounds[last]
            products = np.multiply.outer(hashes[low:high], mult)
            products += add
            result[first:last] = np.minimum.reduceat(products, starts[first:last] - low, axis=0)
            first = last

    halves = [(0, len(starts) // 2), (len(starts) // 2, len(starts))]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:  # numpy releases the GIL here
        list(pool.map(lambda half: fill(*half), halves))
    return result >> _32


def _some_bins(hashes, counts, slots, num_perm, mult, add) -> np.ndarray:
    """The hash-function minimum of single (document, bin) slots, each over its document's
    shingles (sorted by doc)."""
    result = np.empty(len(slots), dtype=np.uint64)
    starts = np.cumsum(counts) - counts
    for chunk in _chunks(counts[slots // num_perm], _CHUNK_ELEMENTS):
        doc, fn = slots[chunk] // num_perm, slots[chunk] % num_perm
        lengths = counts[doc]
        offsets = np.cumsum(lengths) - lengths
        positions = np.repeat(starts[doc] - offsets, lengths) + np.arange(lengths.sum())
        values = hashes[positions] * np.repeat(mult[fn], lengths) + np.repeat(add[fn], lengths)
        result[chunk] = np.minimum.reduceat(values, offsets) >> _32
    return result


def _chunks(lengths: np.ndarray, budget: int) -> list[slice]:
    """Consecutive slices of `lengths` whose sums stay near `budget`."""
    ends = np.searchsorted(np.cumsum(lengths), np.arange(budget, lengths.sum() + budget, budget))
    bounds = np.unique(np.r_[0, np.minimum(ends + 1, len(lengths))])
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def has_shingles(shingles: pl.DataFrame, n_docs: int) -> np.ndarray:
    present = np.zeros(n_docs, dtype=bool)
    present[shingles["doc"].to_numpy()] = True
    return present


def band_keys(signature: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands) uint64: a 64-bit hash of each band's rows."""
    keys = np.empty((signature.shape[0], bands), dtype=np.uint64)
    for band in range(bands):
        key = np.zeros(signature.shape[0], dtype=np.uint64)
        for column in signature[:, band * rows : (band + 1) * rows].T:
            key = (key ^ column.astype(np.uint64)) * _MIX
        keys[:, band] = key ^ (key >> np.uint64(29))
    return keys


def estimated_jaccard(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Fraction of equal positions of paired signature rows."""
    return (left == right).mean(axis=1)


@cache
def optimal_bands(
    threshold: float, num_perm: int, false_positive_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) minimizing the weighted false-positive area below the threshold plus the
    false-negative area above it, as datasketch's `_optimal_param`."""
    below = np.linspace(0.0, threshold, 1001)
    above = np.linspace(threshold, 1.0, 1001)
    best, best_error = (1, num_perm), float("inf")
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            false_pos = np.trapezoid(1 - (1 - below**rows) ** bands, below)
            false_neg = np.trapezoid((1 - above**rows) ** bands, above)
            error = false_pos * false_positive_weight + false_neg * (1 - false_positive_weight)
            if error < best_error:
                best, best_error = (bands, rows), error
    return best
