"""Word n-grams for the ngram method of pipeline/text/eval_index.py: the hashes of the words of
texts and of their n-grams, the items' n-grams (`item_grams`, stored in an evaluation set's
`ngrams-v{NGRAM_VERSION}-...` file; `gram_tables` indexes them) and the records' matches
against them (`gram_matches`).

Word n-grams are hashed with numpy over the texts' UTF-8 bytes, in batches of about 4 MB on
worker threads (numpy and polars release the GIL): a text of ASCII characters only is
lower-cased and cut into words byte by byte; any other text first goes through polars (lower
case; other characters than letters, marks and digits become spaces), so both give the
words of the documented rule (tests/pipeline/text/test_eval_index.py checks them against
pipeline/text/minhash.py). A word's hash masks its bytes 8 at a time, mixes in its length and
goes through splitmix64's finalizer; an n-gram's hash is the polynomial sum of w_j *
B^(n-1-j) modulo 2^64 over its words' hashes w_j, every window's at once from prefix sums.
Item n-grams sit in a sorted array behind a table of about 64 slots per n-gram, indexed by
the top bits of the hash, so all but about 1 in 64 record n-grams are ruled out by one
lookup before the binary search. A record's n-grams are never kept beyond its batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

from pipeline.config import NgramCheck
from pipeline.core.progress import progress
from pipeline.text import minhash

NGRAM_VERSION = 2  # bump when the file's content changes (v2: positions and word counts)
BATCH_BYTES = 1 << 22  # text bytes per n-gram batch (each batch costs some fixed work)
# (text, item) pairs counted at once: an n-gram that many items share (boilerplate) expands
# to one pair per item for every text holding it (10M spine records: 18M pairs in one batch)
PAIR_BUDGET = 1 << 16
# items whose n-grams are hashed at once (preparing the 315,000 test items of the 10M spine
# run all at once, n-grams and MinHash sketches, took 1.9 GB)
ITEM_BATCH = 50_000

# an item's distinct n-grams, each with the word position of its first occurrence, and the
# item's count of words (the same on each of its rows)
_GRAMS_SCHEMA = pl.Schema(
    {"n": pl.UInt8, "item": pl.UInt32, "hash": pl.UInt64, "at": pl.UInt32, "words": pl.UInt32}
)
_GRAM_MATCHES = pl.Schema(
    {"doc": pl.Int64, "item": pl.Int64, "score": pl.Float64, "span": pl.String}
)
_U8 = np.uint8
_LENGTH_MIX = np.uint64(0x9E3779B97F4A7C15)
_CHUNK_MIX = np.uint64(0xC2B2AE3D27D4EB4F)
_GRAM_BASE = np.uint64(0xD6E8FEB86659FD93)  # odd, so invertible modulo 2^64
_GRAM_BASE_INVERSE = np.uint64(pow(int(_GRAM_BASE), -1, 1 << 64))
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
# Non-ASCII characters that separate words; ASCII ones are found byte by byte.
_UNICODE_NON_WORD = r"[^\p{L}\p{M}\p{N}\x00-\x7F]+"


# ---------------------------------------------------------------------------------------------
# Items


def item_grams(texts: pl.Series, check: NgramCheck) -> pl.DataFrame:
    """(n, item, hash, at, words): the distinct n-grams of items of at least n words and the
    distinct short_n-grams of items of short_n to n - 1 words, each at its first position,
    sorted; ITEM_BATCH items at a time."""
    lengths = sorted({check.n, check.short_n}, reverse=True)
    by_length: dict[int, list[pl.DataFrame]] = {n: [] for n in lengths}
    for batch in item_batches(texts, ITEM_BATCH, lambda some: _item_grams(some, check)):
        for n in lengths:
            by_length[n].append(batch.filter(pl.col("n") == n))
    return pl.concat([_GRAMS_SCHEMA.to_frame(), *(f for n in lengths for f in by_length[n])])


def item_batches(
    texts: pl.Series, size: int, prepare: Callable[[pl.Series], pl.DataFrame]
) -> Iterator[pl.DataFrame]:
    """`prepare` of `size` items' texts at a time, its `item` column numbered over all."""
    texts = texts.cast(pl.String)
    for start in range(0, texts.len(), size):
        yield prepare(texts.slice(start, size)).with_columns(pl.col("item") + start)


def _item_grams(texts: pl.Series, check: NgramCheck) -> pl.DataFrame:
    frames = [_GRAMS_SCHEMA.to_frame()]
    for words in word_hashes(texts):
        counts = np.diff(words.bounds)
        rules = [(check.n, counts >= check.n)]
        if check.short_n < check.n:
            rules.append((check.short_n, (counts >= check.short_n) & (counts < check.n)))
        for n, chosen in rules:
            start = np.flatnonzero(np.repeat(chosen, counts))  # words of the chosen texts
            text, inside = words.windows(start, n)
            start, text = start[inside], text[inside]
            grams = gram_hashes(words.hashes, n)[start]
            frames.append(
                pl.DataFrame(
                    {
                        "n": np.full(len(grams), n),
                        "item": words.rows[text],
                        "hash": grams,
                        "at": start - words.bounds[text],
                        "words": counts[text],
                    },
                    schema=_GRAMS_SCHEMA,
                )
            )
    grams = pl.concat(frames).sort(
        "n", "item", "hash", "at", descending=[True, False, False, False]
    )
    return grams.unique(["n", "item", "hash"], keep="first", maintain_order=True)


def gram_tables(
    grams: pl.DataFrame, check: NgramCheck, n_items: int
) -> tuple[list[GramTable], dict[str, Any]]:
    """The tables of the n-gram and the short_n-gram rules (each when some item has its
    n-grams) and their stats: the settings, how many items each rule takes or skips, and how
    many n-grams are too common among the items to be evidence."""
    tables = []
    long = grams.filter(pl.col("n") == check.n)
    short = grams.filter(pl.col("n") == check.short_n) if check.short_n < check.n else long.clear()
    most = check.ignore_common_in_items
    copy = check.whole_copy if check.whole_copy is not None else np.inf
    if long.height:
        long_rule = (check.n, n_items, check.min_coverage, True, most, copy)
        tables.append(GramTable.of(long, *long_rule))
    if short.height:
        short_rule = (check.short_n, n_items, check.short_fraction, False, most, copy)
        tables.append(GramTable.of(short, *short_rule))
    long_items, short_items = long["item"].n_unique(), short["item"].n_unique()
    stats = {"n": check.n, "short_n": check.short_n, "long_items": long_items}
    stats |= {"short_items": short_items, "skipped_short": n_items - long_items - short_items}
    stats["common_in_items"] = sum(int(table.ignored.sum()) for table in tables)
    return tables, stats


@dataclass(frozen=True)
class GramTable:
    """The n-grams of the items of one length rule: sorted distinct hashes, the items holding
    each (hashes[k] is held by items[starts[k]:starts[k + 1]], first at word positions[...]),
    each item's count of distinct n-grams and of words, the n-grams that are not evidence
    (too common), and a table over the top bits of the hashes that rules most others out."""

    n: int
    hashes: np.ndarray  # uint64, sorted, distinct
    starts: np.ndarray  # int64
    items: np.ndarray  # int64
    positions: np.ndarray  # int64, beside items
    sizes: np.ndarray  # int64, by item position: distinct n-grams
    words: np.ndarray  # int64, by item position
    # by_coverage: a record matches an item when the item words its shared n-grams cover
    # reach `minimum` of its words (0: one shared n-gram is enough); else when the share of
    # the item's n-grams it holds does
    minimum: float
    by_coverage: bool
    whole_copy: float  # a record holding this share of an item matches, common n-grams or not
    ignored: np.ndarray  # bool, beside hashes: held by too many items, never evidence
    common: np.ndarray  # bool, beside hashes: held by too many training records (see above)
    table: np.ndarray  # bool
    shift: np.uint64

    @classmethod
    def of(
        cls,
        grams: pl.DataFrame,
        n: int,
        n_items: int,
        minimum: float,
        by_coverage: bool,
        most_items: int | None,
        whole_copy: float,
    ) -> GramTable:
        """The table of `grams`; an n-gram held by more than `most_items` items is ignored."""
        grams = grams.sort("hash", "item")
        ordered = grams["hash"].to_numpy()  # sorted: each hash's first row is where it changes
        first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        first = first[: len(ordered)]  # none for no grams
        hashes = ordered[first]
        items = grams["item"].to_numpy().astype(np.int64)
        starts = np.append(first, len(items)).astype(np.int64)
        sizes = np.bincount(items, minlength=n_items).astype(np.int64)
        words = np.zeros(n_items, dtype=np.int64)
        words[items] = grams["words"].to_numpy()
        holders = np.diff(starts)
        ignored = holders > most_items if most_items is not None else np.zeros(len(hashes), bool)
        # about 64 slots per hash: 1 in 64 other n-grams gets to the binary search
        bits = int(np.clip(len(hashes).bit_length() + 6, 16, 26))
        shift = np.uint64(64 - bits)
        table = np.zeros(1 << bits, dtype=bool)
        table[hashes >> shift] = True
        positions = grams["at"].to_numpy().astype(np.int64)
        return cls(
            n, hashes, starts, items, positions, sizes, words, minimum, by_coverage, whole_copy,
            ignored, np.zeros(len(hashes), dtype=bool), table, shift,
        )  # fmt: skip

    def find(self, grams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `grams`, keys) of the n-grams that items hold and that are evidence."""
        maybe = np.flatnonzero(self.table[grams >> self.shift])
        found = np.searchsorted(self.hashes, grams[maybe])
        found[found == len(self.hashes)] = 0
        hit = (self.hashes[found] == grams[maybe]) & ~self.ignored[found]
        return maybe[hit], found[hit]

    def with_common(self, common: np.ndarray) -> GramTable:
        """This table with the n-grams flagged in `common` (beside hashes) common in training:
        evidence only of a whole copy."""
        return replace(self, common=common)

    def shared(self, text: np.ndarray, at: np.ndarray, key: np.ndarray) -> np.ndarray:
        """(text, item, shared, at, covered) for n-grams found in texts (at: a word position
        in text order): `shared` counts the distinct n-grams a text and an item share, `at`
        is where the first of them starts in the text, `covered` counts the item's words
        that those n-grams cover."""
        if not len(text):
            return np.zeros((0, 5), dtype=np.int64)
        first = _first_of_each(text << 32 | key)  # each distinct n-gram of a text once
        text, at, key = text[first], at[first], key[first]
        holders = self.starts[key + 1] - self.starts[key]
        held = np.repeat(self.starts[key], holders) + ramp(holders)
        item, where = self.items[held], self.positions[held]
        pair, at = np.repeat(text, holders) << 32 | item, np.repeat(at, holders)
        order = np.lexsort((where, pair))  # by pair, then where the n-gram is in the item
        pair, at, where = pair[order], at[order], where[order]
        first = np.flatnonzero(_first_of_each(pair, ordered=True))
        shared = np.diff(np.append(first, len(pair)))
        # the words of a union of windows of n words: each window up to where the next begins
        step = np.full(len(where), self.n, dtype=np.int64)
        step[:-1] = np.minimum(np.diff(where), self.n)
        step[np.append(first[1:], len(pair)) - 1] = self.n  # each pair's last window
        covered, earliest = np.add.reduceat(step, first), np.minimum.reduceat(at, first)
        return np.stack(
            [pair[first] >> 32, pair[first] & 0xFFFFFFFF, shared, earliest, covered], axis=1
        )


def add_document_counts(
    texts: pl.Series, tables: list[GramTable], counts: list[np.ndarray], workers: int
) -> None:
    """Add to `counts` (per table, beside its hashes) how many of `texts` hold each of its
    n-grams, the texts hashed once for all tables, in batches of about BATCH_BYTES on
    `workers` threads; each batch hands back only the n-grams it met."""
    texts = texts.cast(pl.String)
    bounds = _byte_batches(texts.str.len_bytes().fill_null(0).to_numpy(), BATCH_BYTES)

    def batch(bound: tuple[int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
        hashed = word_hashes(texts.slice(bound[0], bound[1] - bound[0]))
        return [_holding(hashed, table) for table in tables]

    with ThreadPoolExecutor(workers) as pool:
        for found in pool.map(batch, bounds):
            for total, (keys, held) in zip(counts, found, strict=True):
                total[keys] += held  # keys are distinct


def _holding(hashed: list[_Words], table: GramTable) -> tuple[np.ndarray, np.ndarray]:
    """(keys, how many of the hashed texts hold each) of the table's n-grams they hold."""
    pairs = [np.zeros(0, dtype=np.int64)]
    for words in hashed:
        start, key = table.find(gram_hashes(words.hashes, table.n))
        text, inside = words.windows(start, table.n)
        pairs.append(np.unique(words.rows[text[inside]].astype(np.int64) << 32 | key[inside]))
    keys, held = np.unique(np.concatenate(pairs) & 0xFFFFFFFF, return_counts=True)
    return keys, held.astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Records


def gram_matches(texts: pl.Series, tables: list[GramTable], workers: int) -> pl.DataFrame:
    """(doc, item, score, span) of the strongest item of every matched text, the texts taken
    in batches of about BATCH_BYTES on `workers` threads."""
    texts = texts.cast(pl.String)
    lengths = texts.str.len_bytes().fill_null(0).to_numpy()
    bounds = _byte_batches(lengths, BATCH_BYTES)

    def batch(bound: tuple[int, int]) -> pl.DataFrame:
        start, stop = bound
        found = _batch_matches(texts.slice(start, stop - start), tables)
        return found.with_columns(pl.col("doc") + start)

    parts = [_GRAM_MATCHES.to_frame()]
    with (
        progress("contamination: n-grams", texts.len()) as advance,
        ThreadPoolExecutor(workers) as pool,
    ):
        for (start, stop), part in zip(bounds, pool.map(batch, bounds), strict=True):
            parts.append(part)
            advance(stop - start)
    return pl.concat(parts)


def _batch_matches(texts: pl.Series, tables: list[GramTable]) -> pl.DataFrame:
    """(doc, item, score, span) of the strongest item of every matched doc of a batch."""
    found = [np.zeros((0, 5))]
    for words in word_hashes(texts):
        for table in tables:
            start, key = table.find(gram_hashes(words.hashes, table.n))
            text, inside = words.windows(start, table.n)
            text, start, key = text[inside], start[inside], key[inside]
            holders = table.starts[key + 1] - table.starts[key]
            for low, high in _whole_texts(text, holders, PAIR_BUDGET):
                at, where, keys = text[low:high], start[low:high], key[low:high]
                shared = table.shared(words.rows[at], where - words.bounds[at], keys)
                score = _scores(table, shared)
                evidence = ~table.common[keys]  # rare n-grams: evidence of a partial copy
                if evidence.all():
                    partial, first = score, shared[:, 3]
                else:
                    partial, first = np.zeros(len(shared)), shared[:, 3].copy()
                    at = at[evidence]
                    rare = table.shared(
                        words.rows[at], where[evidence] - words.bounds[at], keys[evidence]
                    )
                    pairs = np.searchsorted(_pair_keys(shared), _pair_keys(rare))
                    partial[pairs], first[pairs] = _scores(table, rare), rare[:, 3]
                matched = (partial > 0) & (partial >= table.minimum - 1e-12)
                whole = score >= table.whole_copy - 1e-12
                keep = matched | whole
                score = np.where(matched, partial, score)
                columns = [shared[keep, 0], shared[keep, 1], score[keep], first[keep]]
                found.append(_strongest(np.stack([*columns, np.full(keep.sum(), table.n)], 1)))
    found = _strongest(np.concatenate(found))
    rows = found[:, 0].astype(np.int64)
    # the span: the words of the first shared n-gram, as polars cuts the normalized text
    words_of = (
        minhash.shingle_text(texts.gather(pl.Series(rows, dtype=pl.UInt32)))
        .str.split(" ")
        .list.eval(pl.element().filter(pl.element() != ""))
    )
    spans = pl.DataFrame(
        {"words": words_of, "at": found[:, 3].astype(np.int64), "n": found[:, 4].astype(np.int64)}
    ).select(pl.col("words").list.slice("at", "n").list.join(" "))
    return pl.DataFrame(
        {"doc": rows, "item": found[:, 1].astype(np.int64), "score": found[:, 2]},
        schema={"doc": pl.Int64, "item": pl.Int64, "score": pl.Float64},
    ).with_columns(spans.to_series().alias("span"))


def _scores(table: GramTable, shared: np.ndarray) -> np.ndarray:
    """Per (text, item) row of `GramTable.shared`: the share of the item's words covered (by
    coverage), else the share of its n-grams held."""
    if table.by_coverage:
        return np.minimum(shared[:, 4] / table.words[shared[:, 1]], 1.0)
    return shared[:, 2] / table.sizes[shared[:, 1]]


def _pair_keys(shared: np.ndarray) -> np.ndarray:
    """(text, item) rows of `GramTable.shared` as one sortable key (they come sorted by it)."""
    return shared[:, 0] << 32 | shared[:, 1]


def _strongest(found: np.ndarray) -> np.ndarray:
    """The row of the best score per doc (rows: doc, item, score, at, n), the first item of
    equal scores; of equal items, the earlier row."""
    order = np.lexsort((found[:, 1], -found[:, 2], found[:, 0]))
    return found[order][_first_of_each(found[order, 0], ordered=True)]


def _whole_texts(text: np.ndarray, holders: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """(low, high) ranges of the found n-grams (`text` non-decreasing) holding about `budget`
    (text, item) pairs each, every text's n-grams within one range: a text's score against an
    item counts all its n-grams."""
    ends = np.cumsum(holders)
    ranges, low = [], 0
    while low < len(text):
        high = int(np.searchsorted(ends, (ends[low - 1] if low else 0) + budget, side="right"))
        high = int(np.searchsorted(text, text[max(high, low + 1) - 1], side="right"))
        ranges.append((low, high))
        low = high
    return ranges


def _byte_batches(lengths: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive (start, stop) row ranges of about `budget` bytes each."""
    if not len(lengths):
        return []
    ends = np.searchsorted(np.cumsum(lengths), np.arange(budget, lengths.sum() + budget, budget))
    bounds = np.unique(np.r_[0, np.minimum(ends + 1, len(lengths)), len(lengths)])
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


# ---------------------------------------------------------------------------------------------
# Hashing


def word_hashes(texts: pl.Series) -> list[_Words]:
    """The hashed words of texts: of the texts of ASCII characters only, then of the others."""
    ascii_rows = (texts.str.len_bytes() == texts.str.len_chars()).fill_null(True).to_numpy()
    if ascii_rows.all():
        return [_word_hashes(np.arange(texts.len()), *_buffers(texts), ascii=True)]
    rows, others = np.flatnonzero(ascii_rows), np.flatnonzero(~ascii_rows)
    prepared = texts.gather(others).str.to_lowercase().str.replace_all(_UNICODE_NON_WORD, " ")
    return [
        _word_hashes(rows, *_buffers(texts.gather(rows)), ascii=True),
        _word_hashes(others, *_buffers(prepared), ascii=False),
    ]


@dataclass(frozen=True)
class _Words:
    """The words of some texts, hashed: the words of text `rows[r]` are
    hashes[bounds[r]:bounds[r + 1]], in order."""

    rows: np.ndarray  # int64: positions of the texts
    bounds: np.ndarray  # int64, len(rows) + 1
    hashes: np.ndarray  # uint64

    def windows(self, start: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """For windows of n words starting at word `start`: (which text, whether the
        window lies within it)."""
        text = np.searchsorted(self.bounds, start, side="right") - 1
        return text, start + n <= self.bounds[text + 1]


def _buffers(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, UTF-8 bytes) of a string Series, each text followed by a space (so no
    word runs from one text into the next); a null is empty."""
    array = (texts.fill_null("") + " ").to_arrow()
    if array.type != pa.large_string():
        array = array.cast(pa.large_string())
    _, offsets, values = array.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.zeros(0, dtype=_U8) if values is None else np.frombuffer(values, dtype=_U8)
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


def _word_hashes(rows: np.ndarray, offsets: np.ndarray, data: np.ndarray, ascii: bool) -> _Words:
    """Words are runs of ASCII letters and digits and of non-ASCII bytes (`ascii`: there are
    none; else the text is lower-cased already and the non-ASCII characters that separate
    words are spaces). A word's hash mixes its bytes 8 at a time, letters lower-cased."""
    size = len(data)
    padded = np.zeros(size + 16 - size % 8, dtype=_U8)
    # ASCII: setting bit 5 lower-cases a letter and leaves a digit as it is
    lower = np.bitwise_or(data, _U8(32), out=padded[:size]) if ascii else data
    word = np.zeros(size + 2, dtype=bool)  # a non-word before and after
    inner = word[1:-1]
    np.less(lower - _U8(97), _U8(26), out=inner)
    inner |= (data - _U8(48)) < _U8(10)
    if not ascii:
        padded[:size] = data
        inner |= data >= _U8(128)
    edges = np.flatnonzero(word[1:] != word[:-1])
    starts, ends = edges[0::2], edges[1::2]
    bounds = np.searchsorted(starts, offsets)
    # 8 bytes from every position (unaligned little-endian loads), masked to the word
    at = as_strided(padded.view("<u8"), shape=(size,), strides=(1,))
    length = ends - starts
    value = at[starts] & _MASKS[np.minimum(length, 8)]
    value ^= length.astype(np.uint64) * _LENGTH_MIX
    long = np.flatnonzero(length > 8)
    chunk = 8
    while len(long):
        left = length[long] - chunk
        piece = at[starts[long] + chunk] & _MASKS[np.minimum(left, 8)]
        value[long] = (value[long] * _CHUNK_MIX) ^ piece
        long = long[left > 8]
        chunk += 8
    return _Words(rows, bounds, minhash.finalize(value))


_POWERS: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _powers(size: int) -> tuple[np.ndarray, np.ndarray]:
    """GRAM_BASE^i and its inverse^i for i < size (at least): computed once, then grown."""
    known = _POWERS.get("powers")
    if known is None or len(known[0]) < size:
        size = 1 << max(size - 1, 1 << 16).bit_length()
        powers = []
        for base in (_GRAM_BASE, _GRAM_BASE_INVERSE):
            values = np.empty(size, dtype=np.uint64)
            values[0] = 1
            np.cumprod(np.full(size - 1, base, dtype=np.uint64), out=values[1:])
            powers.append(values)
        known = _POWERS["powers"] = (powers[0], powers[1])
    return known


def gram_hashes(words: np.ndarray, n: int) -> np.ndarray:
    """The hash of every run of n consecutive words (by its first word; runs that cross from
    one text into the next are there too): for word hashes w_0 .. w_{n-1}, the sum of
    w_j * B^(n-1-j) modulo 2^64, every run's at once from prefix sums of w_i * B^-i. The
    words' hashes are uniformly mixed, so these are too."""
    windows = len(words) - n + 1
    if windows <= 0:
        return np.zeros(0, dtype=np.uint64)
    forward, inverse = _powers(len(words) + 1)
    prefix = np.empty(len(words) + 1, dtype=np.uint64)
    prefix[0] = 0
    np.cumsum(words * inverse[: len(words)], out=prefix[1:])
    grams = prefix[n:] - prefix[:windows]
    grams *= forward[n - 1 : n - 1 + windows]
    return grams


def _first_of_each(keys: np.ndarray, ordered: bool = False) -> np.ndarray:
    """A mask of the first occurrence of every key (`ordered`: equal keys are adjacent)."""
    if ordered:
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        return first
    _, index = np.unique(keys, return_index=True)
    first = np.zeros(len(keys), dtype=bool)
    first[index] = True
    return first


def ramp(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c - 1 for every count c, concatenated."""
    ends = np.cumsum(counts)
    return np.arange(ends[-1] if len(ends) else 0) - np.repeat(ends - counts, counts)
