"""What a reviewer sees of a record, shared by every stage that queues review items: the
review hash a decision holds for, and values with their secrets masked."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core.identity import xxh3_128_hex
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.text import content_findings
from pipeline.text.secrets import masked_secrets


def with_review_hash(records: pl.DataFrame) -> pl.DataFrame:
    """Add the xxh3-128 of everything a reviewer sees of a record: a decision holds for
    exactly that. Computed only for the few records a decision may concern."""
    parts = ["text", "metadata", "group", "label", "license", "consent"]
    joined = pl.concat_str([pl.col(p).fill_null("") for p in parts], separator="\x1f")
    return records.with_columns(
        xxh3_128_hex(records.select(joined).to_series()).alias("review_hash")
    )


def review_items_of(shown: pl.DataFrame, reason: str) -> pl.DataFrame:
    """Review items (REVIEW_ITEM_SCHEMA) of a later stage: `shown` holds the records with
    their review_hash and evidence; the group is hashed for deletion requests and what the
    reviewer sees has its secrets masked."""
    items = shown.with_columns(
        xxh3_128_hex(shown["group"]).alias("group_hash"),
        pl.lit(reason).alias("reason"),
        # a record a reviewer let through as a false positive still holds what was flagged
        *(masked_secrets(shown[column]) for column in ("text", "metadata", "group", "label")),
    )
    return items.select(REVIEW_ITEM_SCHEMA.names()).cast(REVIEW_ITEM_SCHEMA)


def masked_with_findings(
    shown: pl.DataFrame, hidden: pl.DataFrame, column: str
) -> list[str | None]:
    """The column's values with the hidden findings masked (metadata: each value, then
    re-encoded)."""
    in_column = pl.col("field").str.starts_with(f"{column}.") | (pl.col("field") == column)
    spans: dict[str, list[dict[str, Any]]] = {}
    for finding in hidden.filter(in_column).iter_rows(named=True):
        spans.setdefault(finding["record_id"], []).append(finding)
    mask = (
        content_findings.mask_metadata_for_review
        if column == "metadata"
        else content_findings.mask_for_review
    )
    return [
        mask(value, spans[record_id]) if record_id in spans and value else value
        for record_id, value in zip(shown["record_id"], shown[column], strict=True)
    ]
