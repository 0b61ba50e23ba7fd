"""Near-duplicate dedup by MinHash LSH (`dedup.minhash`), run by key in bounded memory.

It runs as a ByKey (pipeline/stage.py) with two exchanges between its parts:

1. keys, per part: each text's signature (pipeline/text/minhash.py, `batch_records` texts at
   a time) and its LSH band keys, one row per (band, key, document). A document is the uint64
   of its record id's first 16 hex digits (`doc_ids`): its order is the record-id order.
2. reduce, per key partition: candidate pairs from the buckets (records with equal keys in one
   band; a bucket lies in one partition): every member linked to the bucket's first document
   and to the member before it, so a bucket of k records gives at most 2(k-1) pairs, never
   all, and a weak link still leaves verification a second path. Which members are linked
   depends on the record ids alone, never on the order rows arrive or how they are parted.
3. gather, per part: the pairs whose right document it holds, each once, with that
   document's shingle set (with `verify`, the default) or signature, sent to the left
   document's part;
4. measure, per part: the exact Jaccard similarity of each pair's shingle sets (or, without
   `verify`, the share of equal signature positions, as in datasketch);
5. decide, once: pairs at or above `threshold` are duplicates, pairs at or above
   `related_threshold` (when set; bands are then tuned to it) link related records;
   pipeline/dedup/duplicates.py clusters them (union-find), keeps one record per cluster and
   drops the others with reason `near_duplicate`, evidence naming the kept record and their
   similarity; a cluster whose members carry different labels is settled by
   pipeline/dedup/label_conflicts.py first. It reads the keep rule's columns of the records in
   some pair only, and the texts of the few dropped records whose kept record was not their
   candidate (a chain A~B~C), to measure those pairs too;
6. apply, per part: the part's drops and new cluster ids.

No step holds more than one part's texts; the decision holds pairs and the members of pairs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import DedupConfig, MinHashConfig
from pipeline.core import clusters, reasons
from pipeline.dedup import duplicates, label_conflicts
from pipeline.stage import (
    ByKey,
    Components,
    Decided,
    RunContext,
    StageResult,
    read_by_parts,
    sent_to,
)
from pipeline.text import minhash

STAGE = "near_dedup"
DROPS = duplicates.Drops(STAGE, reasons.NEAR_DUPLICATE, "minhash")
PAIR_CHUNK = 50_000  # pairs measured at once
KEY_SCHEMA = {"_key": pl.UInt64, "band": pl.UInt16, "doc": pl.UInt64}
PAIR_SCHEMA = {"left": pl.UInt64, "right": pl.UInt64, "similarity": pl.Float64}


def _bands(settings: MinHashConfig) -> tuple[int, int]:
    lowest = settings.related_threshold or settings.threshold  # the least similar pair wanted
    return minhash.optimal_bands(lowest, settings.num_perm, settings.false_positive_weight)


def _keys(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """The band keys of a part's texts that have shingles (the others cannot be near
    duplicates), `batch_records` texts at a time."""
    settings = cfg.minhash
    if settings is None:
        return pl.DataFrame(schema=KEY_SCHEMA)
    bands, rows = _bands(settings)
    records = frame.select("record_id", "text").collect()
    found = [pl.DataFrame(schema=KEY_SCHEMA)]
    for batch in records.iter_slices(settings.batch_records):
        shingles = minhash.shingle_hashes(batch["text"], settings.ngram, settings.char_ngram)
        signature = minhash.signatures(shingles, batch.height, settings.num_perm, settings.seed)
        present = minhash.has_shingles(shingles, batch.height)
        docs = duplicates.doc_ids(batch["record_id"]).to_numpy()[present]
        keys = minhash.band_keys(signature[present], bands, rows)
        found.append(
            pl.DataFrame(
                {
                    "_key": keys.ravel(),
                    "band": np.tile(np.arange(bands, dtype=np.uint16), len(docs)),
                    "doc": np.repeat(docs, bands),
                },
                schema=KEY_SCHEMA,
            )
        )
    return pl.concat(found)


def _candidates(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The candidate pairs of one key partition's buckets, each once, left < right, sent to
    the part of the right document (`_to_part`)."""
    bucket = ("band", "_key")
    shared = keys.group_by(bucket).agg(pl.len().alias("size")).filter(pl.col("size") > 1)
    members = (
        keys.join(shared.select(bucket), on=bucket, how="semi")
        .collect(engine="streaming")
        .sort("band", "_key", "doc")
    )
    linked = members.select(
        pl.col("doc").alias("right"),
        pl.col("_part").alias("_to_part"),
        pl.col("doc").first().over(bucket).alias("root"),
        pl.col("_part").first().over(bucket).alias("root_part"),
        pl.col("doc").shift(1).over(bucket).alias("previous"),
        pl.col("_part").shift(1).over(bucket).alias("previous_part"),
    )
    pairs = pl.concat(
        [
            linked.select(left="root", left_part="root_part", right="right", _to_part="_to_part"),
            linked.filter(pl.col("previous").is_not_null()).select(
                left="previous", left_part="previous_part", right="right", _to_part="_to_part"
            ),
        ]
    )
    return (
        pairs.filter(pl.col("left") != pl.col("right"))
        .unique(["left", "right"])
        .sort("left", "right")
    )


def _gather(
    part: pl.LazyFrame, pairs: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> pl.DataFrame:
    """The pairs whose right document is in this part, each once (several key partitions
    find some), with that document's sketch, sent to the left document's part."""
    return pl.concat(_gathered(part, pairs.unique(["left", "right"]).collect(), cfg.minhash))


def _gathered(part: pl.LazyFrame, pairs: pl.DataFrame, settings: MinHashConfig):
    """`_gather`'s rows, PAIR_CHUNK pairs at a time: a document in many pairs (a chain's
    kept record) has its sketch copied into each of its rows."""
    sketches = _part_sketches(part, pairs["right"], settings)
    sketches = sketches.rename({"doc": "right", "sketch": "right_sketch"})
    yield pl.DataFrame(schema={"left": pl.UInt64, "right": pl.UInt64, "right_sketch":
                               _sketch_dtype(settings), "_to_part": pl.UInt32})  # fmt: skip
    for chunk in pairs.iter_slices(PAIR_CHUNK):
        yield chunk.join(sketches, on="right").select(
            "left", "right", "right_sketch", pl.col("left_part").alias("_to_part")
        )


def _measure(
    part: pl.LazyFrame, gathered: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> pl.DataFrame:
    """The similarity of the pairs whose left document is in this part, PAIR_CHUNK at a time."""
    settings = cfg.minhash
    lefts = _part_sketches(part, gathered.select("left").collect()["left"], settings)
    measured = [pl.DataFrame(schema=PAIR_SCHEMA)]
    for chunk in gathered.collect_batches(chunk_size=PAIR_CHUNK):
        chunk = chunk.join(lefts.rename({"doc": "left"}), on="left")
        similarity = _similarity(chunk["sketch"], chunk["right_sketch"], settings)
        measured.append(chunk.select("left", "right", similarity.alias("similarity")))
    return pl.concat(measured).sort("left", "right")


def _part_sketches(part: pl.LazyFrame, docs: pl.Series, settings: MinHashConfig) -> pl.DataFrame:
    """(doc, sketch) of the part's records among `docs` (none read when there are none)."""
    if docs.is_empty():
        return pl.DataFrame(schema={"doc": pl.UInt64, "sketch": _sketch_dtype(settings)})
    records = (
        part.select(duplicates.doc_of_record(), "text")
        .filter(pl.col("doc").is_in(docs.unique().implode()))
        .collect()
    )
    return records.select("doc", _sketches(records["text"], settings).alias("sketch"))


def _sketches(texts: pl.Series, settings: MinHashConfig) -> pl.Series:
    """What the similarity of two texts is measured on: the set of their shingle hashes with
    `verify`, else their signature; `batch_records` texts at a time."""
    found = []
    for start in range(0, len(texts), settings.batch_records):
        batch = texts.slice(start, settings.batch_records)
        shingles = minhash.shingle_hashes(batch, settings.ngram, settings.char_ngram)
        if settings.verify:
            sets = shingles.group_by("doc").agg(pl.col("hash").unique())
            found.append(
                pl.DataFrame({"doc": np.arange(len(batch), dtype=np.uint32)}).join(
                    sets, on="doc", how="left", maintain_order="left"
                )["hash"]
            )
        else:
            signature = minhash.signatures(shingles, len(batch), settings.num_perm, settings.seed)
            found.append(pl.Series("hash", signature, pl.Array(pl.UInt32, settings.num_perm)))
    if not found:
        return pl.Series("hash", [], _sketch_dtype(settings))
    return pl.concat(found)


def _sketch_dtype(settings: MinHashConfig | None) -> pl.DataType:
    if settings is None or settings.verify:
        return pl.List(pl.UInt64)
    return pl.Array(pl.UInt32, settings.num_perm)


def _similarity(left: pl.Series, right: pl.Series, settings: MinHashConfig) -> pl.Series:
    """Exact Jaccard of shingle sets, or the share of equal signature positions."""
    if not settings.verify:
        return pl.Series(minhash.estimated_jaccard(left.to_numpy(), right.to_numpy()))
    common = left.list.set_intersection(right).list.len().fill_null(0)
    union = left.list.len().fill_null(0) + right.list.len().fill_null(0) - common
    return (common.cast(pl.Float64) / union).fill_nan(0.0)


def _decide(
    measured: pl.LazyFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Duplicates and related pairs from the measured candidates; clusters resolved from the
    keep rule's columns of the records in some pair."""
    settings = cfg.minhash
    if settings is None:
        return Decided(pl.DataFrame(schema=duplicates.DECISION_SCHEMA), {"dropped": 0})
    bands, rows = _bands(settings)
    lowest = settings.related_threshold or settings.threshold
    members, pairs = _members_and_pairs(measured, records, lowest, cfg, ctx)
    ends = ["left", "right"]  # resolving reads no similarity: each pair held as 8 bytes
    if settings.verify and settings.related_threshold is not None:
        duplicate = pl.col("similarity") >= settings.threshold
        dups, related = pairs.filter(duplicate).select(ends), pairs.filter(~duplicate).select(ends)
    else:  # every pair is at or above the threshold, or (estimates) taken as a duplicate
        dups, related = pairs.select(ends), pairs.clear().select(ends)
    del pairs
    resolution = duplicates.resolve(members, dups, related, cfg.keep)
    stats = {
        "records": records.select(pl.len()).collect().item(),
        "bands": bands,
        "rows": rows,
        "candidate_pairs": measured.select(pl.len()).collect().item(),
        "duplicate_pairs": dups.height,
        "related_pairs": related.height,
    }
    del dups, related  # the evidence reads the few pairs it names from `measured`
    return duplicates.decide(
        members.drop("doc"),
        resolution,
        records,
        drops=DROPS,
        similarity=lambda asked: _evidence_similarity(asked, measured, members, records, cfg, ctx),
        ctx=ctx,
        stats=stats,
        labels=cfg.label_conflicts,
    )


def _members_and_pairs(
    measured: pl.LazyFrame, records: pl.LazyFrame, lowest: float, cfg: DedupConfig, ctx: RunContext
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The members (duplicates.numbered, with `doc`) of the measured pairs at or above
    `lowest` (every pair without `verify`: its estimate is not the similarity), and those pairs
    by the members' `_i`, smaller first. Below `lowest`, a chain's evidence measures again."""
    if cfg.minhash.verify:
        measured = measured.filter(pl.col("similarity") >= lowest)
    docs = pl.concat([measured.select(doc="left"), measured.select(doc="right")]).unique()
    paired = pl.col("doc").is_in(docs.collect(engine="streaming")["doc"].implode())
    members = read_by_parts(
        records,
        ctx.config.runner.part_rows,
        lambda part: duplicates.member_columns(
            part.with_columns(duplicates.doc_of_record()).filter(paired), ctx, extra=("doc",)
        ),
    )
    if members["doc"].n_unique() < members.height:
        shared = members.filter(pl.col("doc").is_duplicated())["record_id"].head(2).to_list()
        raise ValueError(
            f"record ids {shared} share their first 64 bits: near dedup cannot tell them apart"
        )
    members = duplicates.numbered(members, ctx)
    index = members.lazy().select("doc", "_i")
    pairs = (  # streamed: the pairs by doc are never held
        measured.join(index.rename({"doc": "left", "_i": "a"}), on="left")
        .join(index.rename({"doc": "right", "_i": "b"}), on="right")
        .select(
            pl.min_horizontal("a", "b").alias("left"),
            pl.max_horizontal("a", "b").alias("right"),
            "similarity",
        )
        .collect(engine="streaming")
    )  # in any order: resolve's clusters do not depend on it
    return members, pairs


def _evidence_similarity(
    asked: pl.DataFrame,
    measured: pl.LazyFrame,
    members: pl.DataFrame,
    records: pl.LazyFrame,
    cfg: DedupConfig,
    ctx: RunContext,
) -> pl.Series:
    """The similarity of each (_i, kept_i): measured already when the two were candidates
    (read from `measured`, whose pairs have left < right by doc), else (a chain) measured
    here, as the exchanges do, part by part of the records."""
    docs = members.select("_i", "doc")
    kept_docs = docs.rename({"_i": "kept_i", "doc": "kept_doc"})
    wanted = (
        asked.select("_i", "kept_i")
        .join(docs, on="_i", how="left", maintain_order="left")
        .join(kept_docs, on="kept_i", how="left", maintain_order="left")
        .select(
            pl.min_horizontal("_i", "kept_i").alias("left"),
            pl.max_horizontal("_i", "kept_i").alias("right"),
            pl.min_horizontal("doc", "kept_doc").alias("left_doc"),
            pl.max_horizontal("doc", "kept_doc").alias("right_doc"),
        )
    )
    by_docs = ["left_doc", "right_doc"]
    found = (
        measured.select(
            pl.col("left").alias("left_doc"), pl.col("right").alias("right_doc"), "similarity"
        )
        .join(wanted.lazy().select(by_docs).unique(), on=by_docs, how="semi")
        .unique(by_docs)  # several key partitions may have measured a pair
        .collect(engine="streaming")
    )
    wanted = wanted.join(found, on=by_docs, how="left", maintain_order="left")
    missing = wanted.filter(pl.col("similarity").is_null()).unique(["left", "right"])
    if missing.height:
        chained = _measure_in_parts(missing.drop("similarity"), records, cfg, ctx)
        wanted = wanted.join(chained, on=["left", "right"], how="left", maintain_order="left")
        wanted = wanted.with_columns(pl.coalesce("similarity", "new").alias("similarity"))
    return wanted["similarity"].cast(pl.Float64)


def _measure_in_parts(
    pairs: pl.DataFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> pl.DataFrame:
    """The similarity (`new`) of pairs (left, right, left_doc, right_doc) of any records, by
    the gather and measure steps run here over parts of `runner.part_rows` records: memory
    holds one part's texts and the sketches sent to it, spilled to the run folder between."""
    size = ctx.config.runner.part_rows
    wanted = pl.concat([pairs["left_doc"], pairs["right_doc"]]).unique().implode()
    parts = -(-records.select(pl.len()).collect().item() // size)
    where = pl.concat(  # a part at a time: the record ids of all records are never held
        records.slice(j * size, size)
        .select(duplicates.doc_of_record())
        .filter(pl.col("doc").is_in(wanted))
        .with_columns(pl.lit(j, pl.UInt32).alias("part"))
        .collect()
        for j in range(parts)
    )
    sent = pairs.select(pl.col("left_doc").alias("left"), pl.col("right_doc").alias("right"))
    sent = sent.join(where.rename({"doc": "left", "part": "left_part"}), on="left").join(
        where.rename({"doc": "right", "part": "_to_part"}), on="right"
    )
    # on the process running the step: a worker of a cluster may not see the run folder
    work = Path(tempfile.mkdtemp(prefix="near_dedup-evidence-"))
    try:
        for j in range(parts):
            asked = sent_to(sent.lazy(), j).collect()
            part = records.slice(j * size, size)
            for c, gathered in enumerate(_gathered(part, asked, cfg.minhash)):
                for (i,), rows in gathered.partition_by("_to_part", as_dict=True).items():
                    (work / f"to-{i:05d}").mkdir(parents=True, exist_ok=True)
                    name = f"from-{j:05d}-{c:05d}.parquet"
                    rows.drop("_to_part").write_parquet(work / f"to-{i:05d}" / name)
        measured = [pl.DataFrame(schema=PAIR_SCHEMA)]
        for i in range(parts):
            if (work / f"to-{i:05d}").exists():
                incoming = pl.scan_parquet(work / f"to-{i:05d}" / "*.parquet")
                measured.append(_measure(records.slice(i * size, size), incoming, cfg, ctx))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return pairs.join(
        pl.concat(measured).rename({"left": "left_doc", "right": "right_doc", "similarity": "new"}),
        on=["left_doc", "right_doc"],
    ).select("left", "right", "new")


def _edges(measured: pl.LazyFrame, cfg: DedupConfig) -> tuple[pl.DataFrame, dict]:
    """The duplicate pairs among one part's measured candidates (at or above `threshold`;
    every pair without `verify`: its estimate is not the similarity), as graph edges."""
    if cfg.minhash is None:
        return pl.DataFrame(schema=clusters.EDGES), {}
    measured = measured.collect()
    duplicate = measured
    if cfg.minhash.verify:
        duplicate = measured.filter(pl.col("similarity") >= cfg.minhash.threshold)
    edges = duplicate.select(pl.col("left").alias("node"), pl.col("right").alias("neighbor"))
    stats = {"candidate_pairs": measured.height, "duplicate_pairs": edges.height}
    return edges, stats | {"related_pairs": 0}


def _members(part: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """What the keep rule needs of each record of a part, by its document."""
    if cfg.minhash is None:
        part = part.limit(0)
    node = duplicates.doc_of_record().alias("node")
    return duplicates.member_columns(part.with_columns(node), ctx, extra=("node",)).collect()


def _decide_components(
    members: pl.DataFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Keep one record of each component and drop the others: each dropped record's
    similarity to its kept one is measured by the part that holds it (`_apply`), against the
    kept record's sketch, which the requests ask of the part holding that."""
    return duplicates.decide_components(
        members, records, drops=DROPS, cfg=cfg, ctx=ctx, similarity=None
    )


def _kept_sketches(
    part: pl.LazyFrame, requests: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> pl.DataFrame:
    """The sketch of each kept record of this part that a dropped record of another part (or
    this one) points at, sent to that part once."""
    asked = requests.collect()
    sketches = _part_sketches(part, asked["doc"], cfg.minhash)
    return asked.join(sketches, on="doc").select(
        "doc", "sketch", pl.col("_for_part").alias("_to_part")
    )


def _with_similarity(
    part: pl.LazyFrame, decisions: pl.DataFrame, kept: pl.LazyFrame, settings: MinHashConfig
) -> pl.DataFrame:
    """`decisions` with each dropped record's similarity to its kept record, measured on
    their sketches (the kept one's sent by `_kept_sketches`), PAIR_CHUNK records at a time."""
    dropped = decisions.filter(pl.col("_duplicate_of").is_not_null()).select(
        "record_id",
        duplicates.doc_of_record(),
        pl.col("_duplicate_of")
        .map_batches(duplicates.doc_ids, pl.UInt64, is_elementwise=True)
        .alias("kept_doc"),
    )
    kept = kept.collect().rename({"doc": "kept_doc", "sketch": "kept_sketch"})
    measured = [pl.DataFrame(schema={"record_id": pl.String, "_measured": pl.Float64})]
    for chunk in dropped.iter_slices(PAIR_CHUNK):
        own = _part_sketches(part, chunk["doc"], settings)
        chunk = chunk.join(own, on="doc").join(kept, on="kept_doc")
        similarity = _similarity(chunk["sketch"], chunk["kept_sketch"], settings)
        measured.append(
            chunk.select("record_id", similarity.cast(pl.Float64).round(4).alias("_measured"))
        )
    return (
        decisions.join(pl.concat(measured), on="record_id", how="left")
        .with_columns(pl.coalesce("_similarity", "_measured").alias("_similarity"))
        .drop("_measured")
    )


def _apply(
    frame: pl.LazyFrame,
    decisions: pl.LazyFrame,
    cfg: DedupConfig,
    ctx: RunContext,
    kept_sketches: pl.LazyFrame | None = None,
) -> StageResult:
    """Drop a part's near duplicates (measuring each against its kept record's sketch, when
    decided by component) and give its records their new cluster ids."""
    if kept_sketches is not None:
        mine = decisions.join(frame.select("record_id"), on="record_id", how="semi").collect()
        decisions = _with_similarity(frame, mine, kept_sketches, cfg.minhash).lazy()
    kept, events = duplicates.apply_decisions(frame, decisions, DROPS, ctx)
    stats = {}
    if cfg.minhash is not None and kept_sketches is not None:
        stats["records"] = frame.select(pl.len()).collect().item()
    if cfg.minhash is not None and cfg.label_conflicts is not None:
        stats["labelled_by_source"] = label_conflicts.labelled_by_source(frame)
    return StageResult(frame=kept, events=events, stats=stats)


def _stats(cfg: DedupConfig) -> dict:
    if cfg.minhash is None:
        return {}
    bands, rows = _bands(cfg.minhash)
    return {"bands": bands, "rows": rows}


near_dedup = ByKey(
    keys=_keys,
    reduce=_candidates,
    exchanges=(_gather, _measure),
    decide=_decide,
    apply=_apply,
    components=Components(
        edges=_edges,
        members=_members,
        decide=_decide_components,
        evidence=_kept_sketches,
        stats=_stats,
        # related records are linked once (`_decide`): not yet resolved across partitions
        applies=lambda cfg: cfg.minhash is None or cfg.minhash.related_threshold is None,
    ),
)
