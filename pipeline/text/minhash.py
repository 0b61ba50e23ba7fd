"""MinHash signatures and LSH bands, computed for a whole batch of documents at once.

Shingles: the text is lower-cased and every run of characters that are not letters, marks
or digits becomes one space; shingles are the `ngram` consecutive words (a text shorter than
that is one shingle), or the `char_ngram` consecutive letters and digits (other characters
left out) for a text without whitespace (identifiers) or mostly in a script written
without spaces (Chinese, Japanese, Thai, ...). Tokens are hashed with xxh3-64 (polars-hash) and each
shingle's hash mixes its tokens' hashes in order.

Signatures: one-permutation MinHash (Li, Owen and Zhang 2012) with optimal densification
(Shrivastava 2017), bounded. Every shingle enters as 4 copies (the Jaccard similarity of two
sets of copies is that of the shingle sets); a seeded multiply-add-shift hash sends each
copy to a bin (one of `num_perm`) with a 32-bit value, and a document's signature holds the
smallest value per bin. An empty bin copies the first filled bin among a fixed seeded sequence of 8 probes
(the same for every document); a bin whose probes all miss (a document with few shingles)
takes the minimum of its own hash function over the document's shingles, as classic MinHash
does. For two documents a position then agrees with probability equal to the Jaccard
similarity of their shingle sets, as with `num_perm` separate permutations, at a cost of
about one hash per shingle plus one per bin instead of `num_perm` per shingle.

LSH: bands × rows are chosen like datasketch's MinHashLSH does, minimizing the weighted
false-positive and false-negative areas under the banding S-curve for the threshold.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

EMPTY = np.uint32(0xFFFFFFFF)  # marks an empty bin; values stop one below it
_MIX = np.uint64(0x9E3779B97F4A7C15)
_32 = np.uint64(32)
_CHUNK_ELEMENTS = 1 << 18  # shingle-times-empty-bin products per step: fits in the CPU cache
# What separates words: every run of other characters than letters, marks, digits and spaces
# becomes one space (runs of spaces stay; the empty pieces between them are not words).
NON_WORD = r"[^\p{L}\p{M}\p{N} ]+"
SPACELESS_SCRIPTS = (
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"
)
_PROBES = 8  # densification probes per empty bin before its own hash function decides
# Each shingle enters the set as this many copies (shingle, i): Jaccard similarity is
# unchanged, and short documents fill more bins, so fewer need densifying.
COPIES = 4


def shingle_hashes(texts: pl.Series, ngram: int, char_ngram: int) -> pl.DataFrame:
    """(doc, hash) for every shingle of every text; doc is the text's position in `texts`.
    A text with no letters or digits has no shingles."""
    # Only runs of other characters than letters, marks, digits and spaces are replaced: far
    # fewer matches than replacing every separator; the empty tokens of double spaces go below.
    docs = pl.DataFrame(
        {
            "text": shingle_text(texts),
            "by_character": by_character(texts),
        }
    ).with_row_index("doc")
    words = docs.filter(~pl.col("by_character")).select(
        "doc", pl.col("text").str.split(" ").alias("token")
    )
    chars = docs.filter("by_character").select(
        "doc", pl.col("text").str.replace_all(" ", "", literal=True).str.split("").alias("token")
    )
    return pl.concat([_ngram_hashes(words, ngram), _ngram_hashes(chars, char_ngram)])


def shingle_text(texts: pl.Series) -> pl.Series:
    """The normalization of shingling: lower case, and every run of other characters than
    letters, marks, digits and spaces one space; the words are the non-empty pieces between
    spaces."""
    return texts.str.to_lowercase().str.replace_all(NON_WORD, " ")


def by_character(texts: pl.Series) -> pl.Series:
    """Whether a text is shingled by characters: it has no whitespace, or at least 30% of its
    letters belong to scripts written without spaces between words (Chinese, Japanese, Thai,
    ...), so that a line break does not turn such a text into a few long "words"."""
    characters = ~texts.str.contains(r"\s")
    spaceless = texts.str.contains(SPACELESS_SCRIPTS)
    if spaceless.any():
        rows = spaceless.arg_true()
        some = texts.gather(rows)
        share = some.str.count_matches(SPACELESS_SCRIPTS) / some.str.count_matches(r"\p{L}")
        characters = characters.scatter(rows, characters.gather(rows) | (share >= 0.3))
    return characters


def _ngram_hashes(tokens: pl.DataFrame, n: int) -> pl.DataFrame:
    """(doc, hash) of every run of n consecutive tokens: each token is hashed with xxh3-64
    and a run's hash mixes its n token hashes in order (multiply-xor, then a splitmix64
    finalizer), which costs no string building. A text of fewer than n tokens is one
    shingle: its tokens joined and hashed."""
    tokens = tokens.explode("token").filter(pl.col("token") != "")
    docs = tokens["doc"].to_numpy()
    counts = np.bincount(docs, minlength=int(docs.max()) + 1 if len(docs) else 0)
    long = counts[docs] >= n
    short = (
        tokens.filter(~long)
        .group_by("doc", maintain_order=True)
        .agg(pl.col("token").str.join(" ").nchash.xxh3_64().alias("hash"))
    )
    long_tokens = tokens.filter(long).select(pl.col("token").nchash.xxh3_64())
    token_hashes = long_tokens["token"].to_numpy()
    docs = docs[long]
    windows = max(len(token_hashes) - n + 1, 0)
    mixed = token_hashes[:windows].copy()
    for offset in range(1, n):
        mixed *= _MIX
        mixed ^= token_hashes[offset : offset + windows]
    whole = docs[:windows] == docs[n - 1 : n - 1 + windows]  # the run lies in one document
    grams = pl.DataFrame(
        {"doc": docs[:windows][whole], "hash": finalize(mixed[whole])},
        schema={"doc": pl.UInt32, "hash": pl.UInt64},
    )
    return pl.concat([short, grams])


def finalize(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit affects every output bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _hash_functions(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded odd multipliers and addends: the first COPIES give each copy of a shingle its
    bin and value; the last num_perm are the per-bin hash functions of empty bins."""
    rng = np.random.default_rng(seed)
    size = COPIES + num_perm
    multipliers = rng.integers(0, 2**63, size, dtype=np.uint64) * 2 + 1
    return multipliers, rng.integers(0, 2**64 - 1, size, dtype=np.uint64)


def signatures(shingles: pl.DataFrame, n_docs: int, num_perm: int, seed: int) -> np.ndarray:
    """(n_docs, num_perm) uint32 signatures; rows of documents without shingles are all
    zero and must not be indexed (see `has_shingles`)."""
    shingles = shingles.sort("doc")
    hashes, docs = shingles["hash"].to_numpy(), shingles["doc"].to_numpy().astype(np.int64)
    mult, add = _hash_functions(seed, num_perm)
    filled = np.full(n_docs * num_perm, EMPTY, dtype=np.uint32)
    for copy in range(COPIES):  # each copy of a shingle is one more element of the set
        # one multiply-add: its high half picks the bin, its low half is the value
        mixed = hashes * mult[copy] + add[copy]
        bins = ((mixed >> _32) * np.uint64(num_perm)) >> _32
        slots = docs * num_perm + bins.astype(np.int64)
        np.minimum.at(filled, slots, np.minimum(mixed.astype(np.uint32), EMPTY - 1))
    counts = np.bincount(docs, minlength=n_docs)
    signature = filled.copy()
    empty = np.flatnonzero((filled == EMPTY) & np.repeat(counts > 0, num_perm))
    bin_of = empty % num_perm
    for probe in _probes(seed, num_perm):  # an empty bin copies the first filled bin it probes
        source = filled[empty - bin_of + probe[bin_of]]
        missed = source == EMPTY
        signature[empty] = source  # a miss writes EMPTY, which a later probe replaces
        empty, bin_of = empty[missed], bin_of[missed]
    # the rest (mostly bins of documents with very few shingles) take their own hash function
    functions = slice(COPIES, None)
    signature[empty] = _some_bins(hashes, counts, empty, num_perm, mult[functions], add[functions])
    signature[np.repeat(counts == 0, num_perm)] = 0
    return signature.reshape(n_docs, num_perm)


@cache
def _probes(seed: int, num_perm: int) -> np.ndarray:
    """The bins an empty bin looks at, in order: the same for every document."""
    return np.random.default_rng([seed, 1]).integers(0, num_perm, (_PROBES, num_perm))


def _some_bins(hashes, counts, slots, num_perm, mult, add) -> np.ndarray:
    """The hash-function minimum of single (document, bin) slots, each over its document's
    shingles (sorted by doc)."""
    result = np.empty(len(slots), dtype=np.uint32)
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
