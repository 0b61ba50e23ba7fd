"""Near-duplicate dedup by MinHash LSH (`dedup.minhash`), in bounded memory.

1. Records are read in batches of `batch_records`; each batch's signatures (pipeline/text/minhash.py)
   and LSH band keys are written to Parquet in the run folder, so memory holds one batch.
2. Candidate pairs come from polars group-bys over the band table: every member of a bucket
   (records with equal keys in one band) is linked to the bucket's first record and to the
   member before it, so a bucket of k records gives at most 2(k-1) edges, never all pairs.
   Step 1 writes the band table partitioned by a hash of the key, and the buckets are found
   partition by partition (a bucket lies in one), so memory holds one partition's rows.
   Documents are numbered in record_id order (`_i` of the members frame), never in the order
   rows arrive: which members are linked, and so which weak links verification sees and
   which records are kept, depends on the records alone.
3. With `verify` (the default), each candidate pair's exact Jaccard similarity of shingle sets
   decides: at or above `threshold` a duplicate, at or above `related_threshold` (when set;
   bands are then tuned to it) a link between related records; without `verify` every
   candidate is a duplicate, as in datasketch. Step 1 also writes each batch's shingle sets;
   verification reads each batch's file twice (PairSimilarity._exact), however the pairs
   spread over batches, and holds one batch's sets and the pairs that touch it.
4. pipeline/dedup/duplicates.py clusters the duplicates (union-find), keeps one record per cluster
   and drops the others with reason `near_duplicate`, evidence naming the kept record and
   their similarity (exact Jaccard with `verify`, else the signatures' estimate); a cluster
   whose members carry different labels is settled by pipeline/dedup/label_conflicts.py first.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import DedupConfig, MinHashConfig
from pipeline.core import ledger, reasons
from pipeline.core.arrays import sorted_unique
from pipeline.core.clusters import with_cluster_ids
from pipeline.core.progress import progress
from pipeline.dedup import duplicates
from pipeline.stage import RunContext, StageResult
from pipeline.text import minhash

STAGE = "near_dedup"
THREADS = 2  # batches indexed at once; each holds `batch_records` texts in memory
PAIR_CHUNK = 50_000  # pairs verified at once
BAND_ROWS_PER_PARTITION = 4_000_000  # band-table rows grouped at once (~100 bytes each)
CANDIDATE_SCHEMA = {"left": pl.UInt32, "right": pl.UInt32}


def near_dedup(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> StageResult:
    frame = with_cluster_ids(frame)
    settings = cfg.minhash
    if settings is None:
        return StageResult(frame=frame, events=ledger.empty(), stats={"dropped": 0})
    started = time.perf_counter()
    members = duplicates.members_frame(frame, cfg.keep, ctx)
    work = ctx.run_dir / "near_dedup-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        lowest = settings.related_threshold or settings.threshold  # the least similar pair wanted
        bands, rows = minhash.optimal_bands(
            lowest, settings.num_perm, settings.false_positive_weight
        )
        texts = texts_by_record_id(frame, work)
        partitions = max(1, -(-members.height * bands // BAND_ROWS_PER_PARTITION))
        shingled = index_batches(texts, members.height, settings, bands, rows, work, partitions)
        candidates = candidate_pairs(work)
        measure = PairSimilarity(settings, work)
        similarity = measure(candidates)
        candidates = candidates.with_columns(similarity.alias("similarity"))
        if settings.verify:
            dups = candidates.filter(pl.col("similarity") >= settings.threshold)
            related = candidates.filter(
                pl.col("similarity").is_between(lowest, settings.threshold, closed="left")
            )
        else:
            dups, related = candidates, candidates.clear()
        resolution = duplicates.resolve(members, dups, related, cfg.keep)
        stats = {
            "records": members.height,
            "shingled": shingled,
            "bands": bands,
            "rows": rows,
            "band_partitions": partitions,
            "candidate_pairs": candidates.height,
            "duplicate_pairs": dups.height,
            "related_pairs": related.height,
        }
        result = duplicates.apply(
            frame,
            resolution,
            members,
            stage=STAGE,
            reason=reasons.NEAR_DUPLICATE,
            method="minhash",
            similarity=lambda pairs: measure(pairs.rename({"_i": "right", "kept_i": "left"})),
            ctx=ctx,
            stats=stats,
            labels=cfg.label_conflicts,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.stats["seconds"] = round(time.perf_counter() - started, 3)
    return result


def texts_by_record_id(frame: pl.LazyFrame, work: Path) -> pl.LazyFrame:
    """The texts in record_id order, the numbering of the members frame, written once to the
    work folder so that the batches read them by position."""
    path = work / "texts.parquet"
    frame.select("record_id", "text").sort("record_id").select("text").sink_parquet(
        path, compression="lz4"
    )
    return pl.scan_parquet(path)


def index_batches(
    texts: pl.LazyFrame,
    n: int,
    settings: MinHashConfig,
    bands: int,
    rows: int,
    work: Path,
    partitions: int,
) -> int:
    """Write signatures and band keys of all texts, batch by batch, two batches at a time
    (polars and numpy release the GIL), the band keys in `partitions` partitions by a hash of
    the key; return how many texts have shingles (the others cannot be near duplicates and
    are left out)."""

    def index(number: int) -> int:
        offset = number * settings.batch_records
        batch = texts.slice(offset, settings.batch_records).collect()["text"]
        shingles = minhash.shingle_hashes(batch, settings.ngram, settings.char_ngram)
        signature = minhash.signatures(shingles, len(batch), settings.num_perm, settings.seed)
        present = minhash.has_shingles(shingles, len(batch))
        docs = np.arange(offset, offset + len(batch), dtype=np.uint32)[present]
        signature = signature[present]
        keys = minhash.band_keys(signature, bands, rows)
        if settings.verify:  # verification reads the shingle sets back, batch by batch
            sets = shingles.group_by("doc").agg(pl.col("hash").unique())
            pl.DataFrame({"doc": np.arange(len(batch), dtype=np.uint32)}).join(
                sets, on="doc", how="left", maintain_order="left"
            ).select("hash").write_parquet(work / f"shingles-{number:05d}.parquet")
        else:  # only the estimated similarity reads them again
            pl.DataFrame({"doc": docs, "signature": signature}).write_parquet(
                work / f"signatures-{number:05d}.parquet", compression="lz4"
            )
        band_table = pl.DataFrame(
            {
                "band": np.tile(np.arange(bands, dtype=np.uint16), len(docs)),
                "key": keys.ravel(),
                "doc": np.repeat(docs, bands),
            }
        )
        # the key's high bits are its best mixed
        partition = (pl.col("key") // (1 << 40)) % partitions
        split = band_table.with_columns(partition.alias("_part"))
        for (part,), rows_of_part in split.partition_by("_part", as_dict=True).items():
            folder = work / "bands" / f"part-{part:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            rows_of_part.drop("_part").write_parquet(
                folder / f"batch-{number:05d}.parquet", compression="lz4"
            )
        advance(len(batch))
        return len(docs)

    batches = range(-(-n // settings.batch_records))
    with progress("minhash signatures", n) as advance, ThreadPoolExecutor(THREADS) as pool:
        return sum(pool.map(index, batches))


def candidate_pairs(work: Path) -> pl.DataFrame:
    """(left, right) row pairs that share a bucket in some band: every member of a bucket
    paired with the bucket's smallest row and with the member before it (at most 2(k-1)
    pairs for k members, so verification still has a second path when the smallest row
    is the odd one out), left < right, each pair once, sorted. Found partition by partition
    of the band table: a bucket's rows are all in one."""
    found = [_partition_pairs(folder) for folder in sorted((work / "bands").glob("part-*"))]
    # unique on one uint64 key a pair: polars' unique on the two columns held a hash table
    # about ten times the pairs' size
    return _pairs_of_keys(sorted_unique(np.concatenate([np.empty(0, np.uint64), *found])))


def _partition_pairs(folder: Path) -> np.ndarray:
    """The pair keys (_pair_keys) of one partition of the band table, each once."""
    bands = pl.scan_parquet(folder / "*.parquet")
    shared = (
        bands.group_by("band", "key")
        .agg(pl.col("doc").min().alias("root"), pl.len().alias("size"))
        .filter(pl.col("size") > 1)
    )
    members = (
        bands.join(shared, on=["band", "key"])
        .select("band", "key", "root", "doc")
        .collect(engine="streaming")
        .sort("band", "key", "doc")
    )
    previous = members.select(pl.col("doc").shift(1).over("band", "key"))["doc"]
    doc = members["doc"].to_numpy()
    linked = previous.is_not_null().to_numpy()
    left = np.concatenate([members["root"].to_numpy(), previous.fill_null(0).to_numpy()[linked]])
    right = np.concatenate([doc, doc[linked]])
    apart = left != right
    return sorted_unique(_pair_keys(left[apart], right[apart]))


class PairSimilarity:
    """The similarity of (left, right) row pairs: exact Jaccard of their shingle sets with
    `verify`, else the fraction of equal signature positions. The similarities it measured
    (and the signatures it read) are kept for later calls, by a sorted array of pair keys
    (left << 32 | right, left < right): at tens of millions of pairs a join would hold a hash
    table several times their size."""

    def __init__(self, settings: MinHashConfig, work: Path):
        self.settings, self.work = settings, work
        self.signatures = pl.DataFrame(
            schema={"doc": pl.UInt32, "signature": pl.Array(pl.UInt32, settings.num_perm)}
        )
        self.keys = np.empty(0, dtype=np.uint64)  # sorted
        self.values = np.empty(0, dtype=np.float64)

    def __call__(self, pairs: pl.DataFrame) -> pl.Series:
        """Similarities in the order of `pairs`; pairs measured before are not measured again."""
        keys = _pair_keys(pairs["left"].to_numpy(), pairs["right"].to_numpy())
        found, at = self._lookup(keys)
        missing = sorted_unique(keys[~found])
        if missing.size:
            new = _pairs_of_keys(missing)
            keys_and_new = np.concatenate([self.keys, missing])
            order = np.argsort(keys_and_new)
            values = np.concatenate([self.values, self._measure(new).to_numpy()])
            self.keys, self.values = keys_and_new[order], values[order]
            found, at = self._lookup(keys)
        return pl.Series("similarity", self.values[at], dtype=pl.Float64)

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        found = self.keys[at] == keys if len(self.keys) else np.zeros(len(keys), dtype=bool)
        return found, at

    def _measure(self, pairs: pl.DataFrame) -> pl.Series:
        if not pairs.height:
            return pl.Series("similarity", [], dtype=pl.Float64)
        return (self._exact if self.settings.verify else self._estimated)(pairs)

    def _exact(self, pairs: pl.DataFrame) -> pl.Series:
        """Exact Jaccard in two passes over the shingle files, so each batch's file is read
        twice however the pairs spread over batches: first each right row's set is gathered,
        batch by batch of the right rows, into files sorted by the left row's batch; then,
        batch by batch of the left rows, the left sets meet those right sets PAIR_CHUNK
        pairs at a time. Memory holds one batch's sets and the pairs that touch it."""
        size = self.settings.batch_records
        numbered = pairs.with_row_index("_pair").with_columns(
            (pl.col("left") // size).alias("_left_batch"),
            (pl.col("right") // size).alias("_right_batch"),
        )
        staged = self.work / "right-sets"
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir()
        by_right = numbered.partition_by("_right_batch", as_dict=True, include_key=False)
        for (right_batch,), block in by_right.items():
            sets = self._batch_sets(right_batch).gather(block["right"] % size)
            block.select("_pair", "_left_batch", "left").with_columns(sets.alias("right_set")).sort(
                "_left_batch"
            ).write_parquet(staged / f"right-{right_batch:05d}.parquet", row_group_size=PAIR_CHUNK)
        del by_right
        parts = []
        right_sets = pl.scan_parquet(staged / "*.parquet")
        for left_batch in numbered["_left_batch"].unique().sort():
            left_sets = self._batch_sets(left_batch)
            block = right_sets.filter(pl.col("_left_batch") == left_batch).collect()
            for start in range(0, block.height, PAIR_CHUNK):
                chunk = block.slice(start, PAIR_CHUNK)
                left = left_sets.gather(chunk["left"] % size)
                right = chunk["right_set"]
                common = left.list.set_intersection(right).list.len().fill_null(0)
                union = left.list.len().fill_null(0) + right.list.len().fill_null(0) - common
                similarity = (common.cast(pl.Float64) / union).fill_nan(0.0)
                parts.append(chunk.select("_pair", similarity.alias("similarity")))
        shutil.rmtree(staged, ignore_errors=True)
        return pl.concat(parts).sort("_pair")["similarity"]

    def _batch_sets(self, batch: int) -> pl.Series:
        """The shingle sets of one batch's texts, by position."""
        return pl.read_parquet(self.work / f"shingles-{batch:05d}.parquet")["hash"]

    def _estimated(self, pairs: pl.DataFrame) -> pl.Series:
        rows = pl.concat([pairs["left"], pairs["right"]]).unique()
        new = rows.filter(~rows.is_in(self.signatures["doc"].implode()))
        if new.len():
            stored = pl.scan_parquet(self.work / "signatures-*.parquet")
            found = stored.filter(pl.col("doc").is_in(new.implode())).collect()
            self.signatures = pl.concat([self.signatures, found]).sort("doc")
        order = self.signatures["doc"].to_numpy()
        matrix = self.signatures["signature"].to_numpy()
        left = matrix[np.searchsorted(order, pairs["left"].to_numpy())]
        right = matrix[np.searchsorted(order, pairs["right"].to_numpy())]
        return pl.Series("similarity", minhash.estimated_jaccard(left, right))


def _pair_keys(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """One uint64 per unordered pair of rows: the smaller row in the high half."""
    low, high = np.minimum(left, right), np.maximum(left, right)
    return (low.astype(np.uint64) << np.uint64(32)) | high.astype(np.uint64)


def _pairs_of_keys(keys: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"left": (keys >> np.uint64(32)).astype(np.uint32), "right": keys.astype(np.uint32)},
        schema=CANDIDATE_SCHEMA,
    )
