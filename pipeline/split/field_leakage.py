"""Field-level leakage: which metadata fields a version publishes, which it excludes, and
whether any published field gives the label away on its own.

Fields a source declares `known_after_outcome` (a resolution code, a closing date) are never
read into records (pipeline/ingest/stage.py); the manifest lists them as excluded so a training
config cannot ask for them. The single-feature check predicts each train record's label
from one field's value alone (the majority label of that value in the other half of the
train split, halves by a stable hash of the record id) and reports the field when the
balanced accuracy is above `field_leakage.max_accuracy`. Balanced accuracy, because plain
accuracy of a constant field already equals the majority label's share; two halves,
because an id-like field fits the records it was learned from perfectly and predicts
nothing for new ones.
"""

from __future__ import annotations

import polars as pl

from pipeline.config import FieldLeakageConfig, SourceDeclaration
from pipeline.core.identity import xxh3_128_hex


def field_lists(sources: list[SourceDeclaration]) -> dict[str, dict[str, list[str]]]:
    """{"published": {source: fields}, "excluded": {source: fields}} for the manifest."""
    return {
        "published": {s.name: sorted(s.metadata_fields) for s in sources},
        "excluded": {
            s.name: sorted(s.known_after_outcome) for s in sources if s.known_after_outcome
        },
    }


def single_feature_check(train: pl.DataFrame, cfg: FieldLeakageConfig) -> list[dict]:
    """One entry per metadata field with at least `min_records` labelled train records:
    its records, distinct values, balanced accuracy and whether it leaks."""
    labelled = train.filter(pl.col("label").is_not_null() & pl.col("metadata").is_not_null())
    if labelled.height < cfg.min_records or labelled["label"].n_unique() < 2:
        return []
    half = xxh3_128_hex(labelled["record_id"]).str.slice(0, 8).str.to_integer(base=16) % 2
    fields = labelled.select(
        pl.col("label").alias("_label"),
        half.alias("_half"),
        labelled["metadata"].str.json_decode(infer_schema_length=None).alias("_fields"),
    ).unnest("_fields")
    results = []
    for name in sorted(set(fields.columns) - {"_label", "_half"}):
        values = fields.select(
            pl.col("_label").alias("label"), "_half", pl.col(name).cast(pl.String).alias("value")
        )
        values = values.filter(pl.col("value").is_not_null())
        if values.height < cfg.min_records or values["label"].n_unique() < 2:
            continue
        accuracy = _balanced_accuracy(values)
        results.append(
            {
                "field": name,
                "records": values.height,
                "values": values["value"].n_unique(),
                "balanced_accuracy": round(accuracy, 4),
                "leaks": accuracy > cfg.max_accuracy,
            }
        )
    return results


def _balanced_accuracy(values: pl.DataFrame) -> float:
    """Mean recall over labels of predicting each half's labels from the other half's
    majority label per value (unseen values: the other half's majority label)."""
    predicted = []
    for half in (0, 1):
        learn = values.filter(pl.col("_half") != half)
        test = values.filter(pl.col("_half") == half)
        if learn.height == 0 or test.height == 0:
            continue
        fallback = _majority(learn.group_by("label").len())
        by_value = (
            learn.group_by("value", "label")
            .len()
            .sort("value", "len", "label", descending=[False, True, False])
            .group_by("value", maintain_order=True)
            .first()
            .select("value", pl.col("label").alias("predicted"))
        )
        predicted.append(
            test.join(by_value, on="value", how="left").with_columns(
                pl.col("predicted").fill_null(fallback)
            )
        )
    if not predicted:
        return 0.0
    scored = pl.concat(predicted)
    recall = scored.group_by("label").agg((pl.col("predicted") == pl.col("label")).mean())
    return float(recall["predicted"].mean())


def _majority(counts: pl.DataFrame) -> str:
    return counts.sort("len", "label", descending=[True, False])["label"][0]
