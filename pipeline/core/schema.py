"""The canonical record schema every reader produces and every stage keeps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

RECORD_SCHEMA = pl.Schema(
    {
        "record_id": pl.String,
        "source": pl.String,
        "location": pl.String,  # `relative/file:N`, N the line (jsonl, changelog) or data row
        "text": pl.String,
        "source_content_hash": pl.String,
        "content_hash": pl.String,
        "group": pl.String,
        "timestamp": pl.Datetime("us", "UTC"),
        "label": pl.String,
        "license": pl.String,
        "consent": pl.String,
        "metadata": pl.String,  # a JSON object of the declared metadata fields
        "synthetic": pl.Boolean,  # from a source declared synthetic
        "generator": pl.String,  # that source's generator
        "augmented_from": pl.String,  # a generated variant's origin record_id
    }
)

# cluster_id: the smallest record_id among a record's duplicates and related records (dedup
# stages); a record in no cluster is its own. language, language_score: the quality stage's
# identification of the text as it arrived there (null where no stage identified it); versions
# published before they were added lack the two columns.
PUBLISHED_SCHEMA = pl.Schema(
    {
        **RECORD_SCHEMA,
        "cluster_id": pl.String,
        "split": pl.String,
        "language": pl.String,
        "language_score": pl.Float64,
    }
)
LANGUAGE_COLUMNS = {"language": pl.String, "language_score": pl.Float64}

LEDGER_SCHEMA = pl.Schema(
    {
        "record_id": pl.String,
        "source": pl.String,
        "stage": pl.String,
        "action": pl.String,
        "reason": pl.String,
        "evidence": pl.String,  # JSON; never a secret in clear
        "terminal": pl.Boolean,
    }
)

# A quarantined record as the reviewer queue stores it: never a secret in clear.
REVIEW_ITEM_SCHEMA = pl.Schema(
    {
        "record_id": pl.String,
        "source": pl.String,
        "source_content_hash": pl.String,
        "review_hash": pl.String,  # xxh3-128 of all the reviewer sees: a decision holds for it
        "group_hash": pl.String,  # xxh3-128 of the group, so a deletion request can find it
        "reason": pl.String,
        "evidence": pl.String,  # JSON, redacted like the ledger's
        "text": pl.String,  # secrets replaced by <SECRET:type>
        "metadata": pl.String,  # likewise
        "group": pl.String,  # likewise
        "label": pl.String,  # likewise
    }
)

# A reviewer's decision as the governance stage reads it (RunContext.review_decisions).
REVIEW_DECISION_SCHEMA = pl.Schema(
    {
        "item_id": pl.Int64,
        "record_id": pl.String,
        "source_content_hash": pl.String,
        "review_hash": pl.String,
        "reason": pl.String,
        "status": pl.String,  # approved | rejected
        "reviewer": pl.String,
        "label": pl.String,  # the label an approval chose (label_conflict items), else null
    }
)


def review_decisions(frame: pl.DataFrame | None) -> pl.DataFrame:
    """Reviewer decisions in REVIEW_DECISION_SCHEMA: none for None, and a null `label` for a
    frame built without one (decisions on items that take no label)."""
    if frame is None:
        return pl.DataFrame(schema=REVIEW_DECISION_SCHEMA)
    if "label" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.String).alias("label"))
    return frame.cast(REVIEW_DECISION_SCHEMA)


def schema_description(schema: pl.Schema) -> list[dict[str, str]]:
    """The schema as plain data, as written into manifests and hashed into dataset hashes."""
    return [{"name": name, "type": str(dtype)} for name, dtype in schema.items()]


# What a deletion request can name, and the record column it matches.
DELETION_KINDS = {
    "source": "source",
    "group": "group",
    "record_id": "record_id",
    "content_hash": "source_content_hash",
}


@dataclass(frozen=True)
class EvalSet:
    """A registered protected evaluation set, loaded from its folder (files verified)."""

    name: str
    folder: Path
    items: pl.DataFrame  # item_id (String), text (String), content_hash (String)
