"""Augmentation: label-preserving variants of train records, each checked by its embedding.

1. Origins: labelled train records that are neither variants nor synthetic (variants of
   generated text would raise the synthetic share past `synthetic.max_share`), chosen by a
   stable hash of (seed, record_id) below `fraction`; validation and test records never are.
2. Each origin gets `variants` variants; each applies one transform (pipeline/augment/transforms.py)
   drawn, with everything else it does, from a numpy Generator seeded by an xxh3-64 of
   (seed, origin, index). Every variant gets a `generated` event (reason `augmented`).
3. A variant whose text is already a record's (any split) or an earlier variant's (in origin,
   index order) is dropped: `augmentation_duplicate`.
4. The rest are embedded with MiniLM together with their origins and judged (`judge`): kept
   when within `min_cosine` of the origin and strictly nearer its own label's centroid than any
   other label's; dropped when too far from the origin (`augmentation_drifted`); otherwise
   quarantined for a reviewer (`augmentation_uncertain`). A label's centroid is the normalized
   mean of its ORIGINS' vectors: they are embedded anyway, and being a hash sample of the train
   records they stand for the label without embedding the whole train split. Labels with no
   origin in this run have no centroid and are not compared against.
5. A reviewer's decision on an uncertain variant (matched on record_id, source_content_hash and
   review hash) keeps it (`approved`) or drops it (`review_rejected`) on later runs.

Kept variants are appended to the frame in train, with `augmented_from` naming their origin;
the publish stage gives them their terminal events.

It runs by key (pipeline/stage.py's ByKey): each part samples its word counts per label and
its origins' vectors, from which one fit makes the vocabularies and the label centroids; each
part makes its variants and sends their content hashes, with every record's, to key
partitions that find the duplicates (3.); each part then makes its variants again, drops
the duplicates and judges the rest (4.). Only the origins' vectors are held in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.augment.transforms import TRANSFORMS, VOCABULARY_WORD
from pipeline.config import AugmentConfig
from pipeline.core import ledger, reasons
from pipeline.core.identity import KEY_SEPARATOR, record_key, xxh3_128_hex
from pipeline.core.schema import review_decisions
from pipeline.review import review_items_of, with_review_hash
from pipeline.stage import ByKey, Decided, RunContext, StageResult
from pipeline.text.embeddings import DIMENSIONS, embed

STAGE = "augment"
TRAIN = "train"
KEPT, DRIFTED, UNCERTAIN = "kept", "drifted", "uncertain"
VECTOR = pl.Array(pl.Float32, DIMENSIONS)
CENTROID = pl.Array(pl.Float64, DIMENSIONS)
SAMPLE_SCHEMA = pl.Schema(
    {
        "label": pl.String,
        "word": pl.String,
        "_count": pl.UInt32,
        "record_id": pl.String,
        "_vector": VECTOR,
    }
)
FITTED_SCHEMA = pl.Schema({"label": pl.String, "word": pl.String, "_centroid": CENTROID})


def _candidates(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Labelled train records that are neither variants nor synthetic."""
    return frame.filter(
        (pl.col("split") == TRAIN)
        & pl.col("label").is_not_null()
        & pl.col("augmented_from").is_null()
        & ~pl.col("synthetic").fill_null(False)
    )


def _origins(frame: pl.LazyFrame, cfg: AugmentConfig) -> pl.DataFrame:
    """The candidates chosen to be augmented, whole, in record-id order."""
    chosen = _candidates(frame).filter(_position(cfg.seed, pl.col("record_id")) < cfg.fraction)
    return chosen.collect().sort("record_id")


def _sample(frame: pl.LazyFrame, cfg: AugmentConfig, ctx: RunContext) -> pl.DataFrame:
    """A part's share of what every variant is made and judged by: the word counts per label
    of its candidates (the vocabularies) and its origins' vectors (the label centroids)."""
    candidates = _candidates(frame).select("label", "text").collect()
    origins = _origins(frame, cfg)
    vectors = embed(origins["text"], origins["content_hash"], _cache(ctx), cfg.batch_size).vectors
    return pl.concat(
        [
            _word_counts(candidates),
            origins.select("record_id", "label", pl.Series("_vector", vectors, dtype=VECTOR)),
        ],
        how="diagonal_relaxed",
    ).cast(SAMPLE_SCHEMA)


def _fit(samples: pl.LazyFrame, records: pl.LazyFrame, cfg: AugmentConfig) -> pl.DataFrame:
    """The vocabularies (label, word) and the label centroids (label, _centroid) of the whole
    train split, from every part's sample."""
    rows = samples.collect()
    words = rows.filter(pl.col("word").is_not_null())
    vocabulary = _vocabulary_rows(words)
    origins = rows.filter(pl.col("record_id").is_not_null()).sort("record_id")
    vectors = origins["_vector"].to_numpy().reshape(-1, DIMENSIONS)
    centroids = label_centroids(vectors, origins["label"].to_list())
    return pl.concat(
        [
            vocabulary,
            pl.DataFrame(
                {"label": list(centroids), "_centroid": list(centroids.values())},
                schema={"label": pl.String, "_centroid": CENTROID},
            ),
        ],
        how="diagonal_relaxed",
    ).cast(FITTED_SCHEMA)


def _keys(
    frame: pl.LazyFrame, cfg: AugmentConfig, ctx: RunContext, fitted: pl.DataFrame
) -> pl.DataFrame:
    """Every record's content hash and the part's variants', keyed by the hash: a variant is
    a duplicate when a record or an earlier variant anywhere has its text."""
    known = frame.select("content_hash", "record_id").drop_nulls("content_hash").collect()
    variants = _variants(_origins(frame, cfg), cfg, _vocabularies(fitted))
    return pl.concat(
        [known, variants.select("content_hash", "record_id", "augmented_from", "index")],
        how="diagonal_relaxed",
    ).with_columns(pl.col("content_hash").alias("_key"))


def _owners(keys: pl.LazyFrame, cfg: AugmentConfig) -> pl.DataFrame:
    """The variants of this key partition's texts that repeat a record (the smallest id
    holding it) or an earlier variant (in origin, index order): (record_id, duplicate_of)."""
    rows = keys.collect()
    variants = rows.filter(pl.col("augmented_from").is_not_null())
    known = rows.filter(pl.col("augmented_from").is_null())
    return (
        _duplicates(variants.sort("augmented_from", "index"), known)
        .filter(pl.col("duplicate_of").is_not_null())
        .select("record_id", "duplicate_of")
    )


def _decide(
    found: pl.LazyFrame,
    records: pl.LazyFrame,
    cfg: AugmentConfig,
    ctx: RunContext,
    fitted: pl.DataFrame,
) -> Decided:
    """One table for every part: the duplicate variants, the vocabularies and centroids."""
    return Decided(pl.concat([fitted, found.collect()], how="diagonal_relaxed"), {})


def _apply(
    frame: pl.LazyFrame, decisions: pl.LazyFrame, cfg: AugmentConfig, ctx: RunContext
) -> StageResult:
    """Make this part's variants, drop the duplicates, judge the rest by their embeddings
    against the label centroids, and append the kept ones in train."""
    table = decisions.collect()
    origins = _origins(frame, cfg)
    variants = _variants(origins, cfg, _vocabularies(table))
    repeated = table.filter(pl.col("duplicate_of").is_not_null()).select(
        "record_id", "duplicate_of"
    )
    variants = variants.join(repeated, on="record_id", how="left", maintain_order="left")
    duplicates = variants.filter(pl.col("duplicate_of").is_not_null())
    fresh = variants.filter(pl.col("duplicate_of").is_null())
    judged = _judged(origins, fresh, _centroids(table), cfg, ctx)
    still, approved, rejected = _reviewed(judged.filter(pl.col("outcome") == UNCERTAIN), ctx)
    drifted = judged.filter(pl.col("outcome") == DRIFTED)
    kept = pl.concat([judged.filter(pl.col("outcome") == KEPT), approved.select(judged.columns)])
    kept = kept.sort("augmented_from", "index")
    columns = frame.collect_schema()
    out = pl.concat([frame, kept.select(columns.names()).cast(dict(columns)).lazy()])
    events = pl.concat(
        [
            ledger.empty(),
            _events(variants, reasons.GENERATED, reasons.AUGMENTED, _generated_evidence(cfg)),
            _events(approved, reasons.APPROVED, reasons.REVIEW_APPROVED, _decision_evidence(True)),
            _events(
                duplicates, reasons.DROPPED, reasons.AUGMENTATION_DUPLICATE, _duplicate_evidence()
            ),
            _events(drifted, reasons.DROPPED, reasons.AUGMENTATION_DRIFTED, _drift_evidence(cfg)),
            _events(rejected, reasons.DROPPED, reasons.REVIEW_REJECTED, _decision_evidence(False)),
            _events(still, reasons.QUARANTINED, reasons.AUGMENTATION_UNCERTAIN, pl.col("evidence")),
        ]
    )
    by_transform = kept.group_by("transform").len()
    counted = dict(zip(by_transform["transform"], by_transform["len"], strict=True))
    stats = {
        "origins": origins.height,
        "generated": variants.height,
        "kept": kept.height,
        "drifted": drifted.height,
        "uncertain": still.height,
        "duplicates": duplicates.height,
        "approved": approved.height,
        "rejected": rejected.height,
        "by_transform": {name: counted.get(name, 0) for name in cfg.transforms},
    }
    return StageResult(out, events, stats, review_items_of(still, reasons.AUGMENTATION_UNCERTAIN))


# a sample of each part (word counts, origin vectors) gives the vocabularies and label
# centroids once; the variants' texts meet every record's by content hash; each part makes,
# checks and appends its own variants
augment = ByKey(
    keys=_keys,
    reduce=_owners,
    decide=_decide,
    apply=_apply,
    sample=_sample,
    fit=_fit,
    off=lambda cfg: {"generated": 0} if cfg is None else None,
)


def _cache(ctx: RunContext) -> Path:
    return Path(ctx.config.workdir) / "cache" / "embeddings"  # shared with dedup


def _vocabularies(table: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    words = table.filter(pl.col("word").is_not_null()).sort("label", "word")
    return {label: tuple(group["word"]) for (label,), group in words.group_by("label")}


def _centroids(table: pl.DataFrame) -> dict[str, np.ndarray]:
    rows = table.filter(pl.col("_centroid").is_not_null())
    return dict(
        zip(rows["label"], rows["_centroid"].to_numpy().reshape(-1, DIMENSIONS), strict=True)
    )


def _position(seed: int, key: pl.Expr) -> pl.Expr:
    """xxh3-64 of (augment, seed, key), scaled to [0, 1): stable, independent of row order."""
    salted = pl.concat_str([pl.lit(f"augment{KEY_SEPARATOR}{seed}{KEY_SEPARATOR}"), key])
    return salted.nchash.xxh3_64().cast(pl.Float64) / 2.0**64


def vocabularies(train: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    """Per label, the words (lower-cased letter runs) occurring at least twice in its texts,
    sorted: what word_insert may insert into a variant of that label."""
    return _vocabularies(_vocabulary_rows(_word_counts(train)))


def _word_counts(train: pl.DataFrame) -> pl.DataFrame:
    words = train.select(
        "label", pl.col("text").str.to_lowercase().str.extract_all(VOCABULARY_WORD).alias("word")
    ).explode("word")
    return words.drop_nulls().group_by("label", "word").agg(pl.len().alias("_count"))


def _vocabulary_rows(counts: pl.DataFrame) -> pl.DataFrame:
    """(label, word) of the words counted at least twice per label, over every part."""
    summed = counts.group_by("label", "word").agg(pl.col("_count").sum())
    return summed.filter(pl.col("_count") >= 2).select("label", "word").sort("label", "word")


def _variants(
    origins: pl.DataFrame, cfg: AugmentConfig, vocabulary: Mapping[str, Sequence[str]]
) -> pl.DataFrame:
    """Every origin's variants, in (origin, index) order: the origin's columns with the new
    record_id, location, text and hashes, plus `transform` and `index`."""
    indexes = pl.DataFrame({"index": list(range(cfg.variants))}, schema={"index": pl.Int64})
    pairs = origins.join(indexes, how="cross").sort("record_id", "index")
    seed, origin, index = pl.lit(str(cfg.seed)), pl.col("record_id"), pl.col("index").cast(str)
    seeds = pairs.select(record_key("augment-rng", seed, origin, index).nchash.xxh3_64())
    texts, names = [], []
    for text, label, state in zip(pairs["text"], pairs["label"], seeds.to_series(), strict=True):
        rng = np.random.default_rng(state)
        name = cfg.transforms[int(rng.integers(len(cfg.transforms)))]
        names.append(name)
        strength = cfg.char_strength if name == "char_noise" else cfg.strength
        texts.append(TRANSFORMS[name](text, rng, strength, vocabulary.get(label, ())))
    made = pl.Series("text", texts, dtype=pl.String)
    digest = xxh3_128_hex(made)
    ids = xxh3_128_hex(pairs.select(record_key("augment", origin, seed, index)).to_series())
    return pairs.with_columns(
        ids.alias("record_id"),
        origin.alias("augmented_from"),
        pl.concat_str("location", pl.lit("#augment-"), index).alias("location"),
        made,
        digest.alias("source_content_hash"),
        digest.alias("content_hash"),
        pl.Series("transform", names, dtype=pl.String),
    )


def _duplicates(variants: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """Add `duplicate_of`: the record (smallest id) or earlier variant whose text this
    variant's is; null for the first of its text."""
    known = records.select("content_hash", "record_id").drop_nulls().sort("record_id")
    owners = pl.concat([known, variants.select("content_hash", "record_id")])
    first = owners.unique("content_hash", keep="first", maintain_order=True)
    joined = variants.join(
        first.rename({"record_id": "_owner"}), on="content_hash", how="left", maintain_order="left"
    )
    owner = pl.when(pl.col("_owner") != pl.col("record_id")).then(pl.col("_owner"))
    return joined.with_columns(owner.alias("duplicate_of")).drop("_owner")


def _judged(
    origins: pl.DataFrame,
    fresh: pl.DataFrame,
    centroids: Mapping[str, np.ndarray],
    cfg: AugmentConfig,
    ctx: RunContext,
) -> pl.DataFrame:
    """`fresh` with the columns of `judge`."""
    if fresh.height == 0:
        return pl.concat(
            [fresh, judge(np.zeros((0, 1)), np.zeros((0, 1)), [], {}, 1.0)], how="horizontal"
        )
    texts = pl.concat([origins["text"], fresh["text"]])
    hashes = pl.concat([origins["content_hash"], fresh["content_hash"]])
    vectors = embed(texts, hashes, _cache(ctx), cfg.batch_size).vectors
    origin_vectors, variant_vectors = vectors[: origins.height], vectors[origins.height :]
    row = origins.select(pl.col("record_id").alias("augmented_from")).with_row_index("_row")
    at = fresh.join(row, on="augmented_from", how="left", maintain_order="left")["_row"]
    verdict = judge(
        variant_vectors,
        origin_vectors[at.to_numpy()],
        fresh["label"].to_list(),
        centroids,
        cfg.min_cosine,
    )
    return pl.concat([fresh, verdict], how="horizontal")


def label_centroids(vectors: np.ndarray, labels: Sequence[str]) -> dict[str, np.ndarray]:
    """Per label, the normalized mean of its rows of `vectors`."""
    keys = np.asarray(labels, dtype=object)
    centroids = {}
    for label in sorted(set(labels)):
        mean = vectors[keys == label].astype(np.float64).mean(axis=0)
        centroids[label] = mean / (np.linalg.norm(mean) or 1.0)
    return centroids


def judge(
    variants: np.ndarray,
    origins: np.ndarray,
    labels: Sequence[str],
    centroids: Mapping[str, np.ndarray],
    min_cosine: float,
) -> pl.DataFrame:
    """The outcome per variant, from unit rows `variants` and their `origins`, each variant's
    label and the unit `centroids` per label: drifted when its cosine to its origin is below
    `min_cosine`; else kept when its cosine to its own label's centroid is strictly greater
    than to every other label's (a tie is uncertain); else uncertain. Also the measures:
    cosine_origin, own_label, nearest_label (the closest other label; null with one label)
    and margin (own minus nearest other cosine; null with one label)."""
    names = sorted(centroids)
    variants = np.asarray(variants, dtype=np.float64)
    cosine_origin = np.einsum("ij,ij->i", variants, np.asarray(origins, dtype=np.float64))
    rows = np.arange(len(labels))
    own_column = np.array([names.index(label) for label in labels], dtype=np.int64)
    if names:
        similarity = variants @ np.stack([centroids[n] for n in names]).astype(np.float64).T
    else:
        similarity = np.zeros((len(labels), 0))
    own = similarity[rows, own_column] if len(labels) else np.zeros(0)
    others = similarity.copy()
    others[rows, own_column] = -np.inf
    nearest = others.argmax(axis=1) if len(names) > 1 else np.zeros(len(labels), np.int64)
    margin = own - others[rows, nearest] if len(names) > 1 else np.full(len(labels), np.inf)
    outcome = np.where(
        cosine_origin < min_cosine, DRIFTED, np.where(margin > 0, KEPT, UNCERTAIN)
    ).astype(object)
    single = len(names) < 2
    return pl.DataFrame(
        {
            "outcome": pl.Series(outcome.tolist(), dtype=pl.String),
            "cosine_origin": pl.Series(cosine_origin, dtype=pl.Float64),
            "own_label": pl.Series(list(labels), dtype=pl.String),
            "nearest_label": pl.Series(
                [None if single else names[k] for k in nearest], dtype=pl.String
            ),
            "margin": pl.Series([None if single else float(m) for m in margin], dtype=pl.Float64),
        }
    )


def _reviewed(
    uncertain: pl.DataFrame, ctx: RunContext
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Uncertain variants still waiting, approved and rejected (a rejection wins)."""
    uncertain = with_review_hash(uncertain).with_columns(_review_evidence().alias("evidence"))
    decisions = review_decisions(ctx.review_decisions).filter(
        pl.col("reason") == reasons.AUGMENTATION_UNCERTAIN
    )
    key = ["record_id", "source_content_hash", "review_hash"]
    decided = decisions.sort("item_id").unique([*key, "status"], keep="first", maintain_order=True)
    decided = decided.select(*key, "status", pl.col("item_id").alias("review_item"), "reviewer")
    rejected = uncertain.join(decided.filter(pl.col("status") == "rejected"), on=key)
    approved = uncertain.join(decided.filter(pl.col("status") == "approved"), on=key)
    approved = approved.join(rejected.select("record_id"), on="record_id", how="anti")
    done = pl.concat([approved.select("record_id"), rejected.select("record_id")])
    return uncertain.join(done, on="record_id", how="anti"), approved, rejected


def _events(frame: pl.DataFrame, action: str, reason: str, evidence: pl.Expr) -> pl.DataFrame:
    return ledger.events(frame, stage=STAGE, action=action, reason=reason, evidence=evidence)


def _generated_evidence(cfg: AugmentConfig) -> pl.Expr:
    return pl.struct("augmented_from", "transform", pl.lit(cfg.seed).alias("seed"), "index")


def _duplicate_evidence() -> pl.Expr:
    return pl.struct("augmented_from", "transform", "duplicate_of")


def _drift_evidence(cfg: AugmentConfig) -> pl.Expr:
    return pl.struct(
        "augmented_from",
        "transform",
        pl.col("cosine_origin").round(4),
        pl.lit(cfg.min_cosine).alias("min_cosine"),
    )


def _review_evidence() -> pl.Expr:
    return pl.struct(
        "augmented_from",
        "transform",
        pl.col("cosine_origin").round(4),
        "own_label",
        "nearest_label",
        pl.col("margin").round(4),
    ).struct.json_encode()


def _decision_evidence(approved: bool) -> pl.Expr:
    fields = [pl.col("review_item").alias("item"), "reviewer"]
    if approved:  # as govern and contamination write their approvals
        fields.append(pl.lit(reasons.AUGMENTATION_UNCERTAIN).alias("flag"))
    return pl.struct(*fields)


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """What augmentation made and kept, as `thresher run` says it (nothing when off)."""
    if not stats.get("generated"):
        return []
    return [
        f"augmentation: {stats['generated']} variant(s) of {stats['origins']} train record(s): "
        f"kept {stats['kept']}, drifted {stats['drifted']}, uncertain {stats['uncertain']} "
        f"(queued), duplicates {stats['duplicates']}"
    ]
