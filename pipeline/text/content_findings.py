"""Secrets and personal data in the governance stage: what the detectors find in each record's
published fields, what the policy does with each finding, and the redactions it asks for.

Every string field a person wrote is scanned: text, each metadata value (decoded from the
record's JSON, so escapes such as `\n` do not hide a secret; a finding's field is then
`metadata.<name>`), group and label. Personal data
the policy redacts is replaced in place (`<EMAIL>`, `<PHONE>`, …); in the group key it becomes
a stable pseudonym (`<EMAIL:3f9a…>`), so the records of one group stay one group for the split.
Pseudonyms are unkeyed hashes: they keep addresses out of sight, they do not stop someone who
already has a list of candidate addresses from testing them.
"""

from __future__ import annotations

import functools
import json

import polars as pl
import xxhash

from pipeline.config import PolicyConfig
from pipeline.core.identity import xxh3_128_hex
from pipeline.text.personal_data import (
    PERSONAL_DATA_TYPES,
    find_personal_data,
    redact_personal_data,
)
from pipeline.text.secrets import SECRET_TYPES, find_secrets
from pipeline.text.text_scan import replace_spans

SCANNED_FIELDS = ("text", "metadata", "group", "label")
MAX_EVIDENCE_FINDINGS = 20
FINDING_SCHEMA = {
    "record_id": pl.String,
    "source": pl.String,
    "field": pl.String,
    "type": pl.String,
    "start": pl.Int64,
    "end": pl.Int64,
    "lead": pl.String,  # secrets only: at most 4 leading characters
    "action": pl.String,  # what the record's source policy does with this type
}
EDIT_SCHEMA = {
    "record_id": pl.String,
    **{f"_{field}": pl.String for field in SCANNED_FIELDS},
    "_hash": pl.String,  # of the edited text
    "evidence": pl.String,
}

EDITED_COLUMNS = [name for name in EDIT_SCHEMA if name.startswith("_")]


def secret_findings(
    records: pl.DataFrame, cfg: PolicyConfig, metadata_names: list[str]
) -> pl.DataFrame:
    return _findings(records, find_secrets, cfg, metadata_names)


def personal_findings(
    records: pl.DataFrame, cfg: PolicyConfig, metadata_names: list[str]
) -> pl.DataFrame:
    """Only the types some source's policy acts on are looked for: `keep` costs nothing."""
    acted = _actions(records, cfg).filter(
        pl.col("action") != "keep", pl.col("type").is_in(PERSONAL_DATA_TYPES)
    )
    types = sorted(set(acted["type"]))
    if not types:
        return pl.DataFrame(schema=FINDING_SCHEMA)
    return _findings(
        records, functools.partial(find_personal_data, types=types), cfg, metadata_names
    )


def scanned_values(records: pl.DataFrame, metadata_names: list[str]) -> dict[str, pl.Series]:
    """Each scanned field's values: text, group, label, and `metadata.<name>` per declared
    metadata field (all metadata values are strings)."""
    values = {field: records[field] for field in ("text", "group", "label")}
    if metadata_names:
        decoded = records["metadata"].str.json_decode(
            pl.Struct({name: pl.String for name in metadata_names})
        )
        values |= {f"metadata.{name}": decoded.struct.field(name) for name in metadata_names}
    return values


def _findings(records: pl.DataFrame, detect, cfg: PolicyConfig, metadata_names) -> pl.DataFrame:
    ids = records.select("record_id", "source").with_row_index("index")
    parts = []
    for field, values in scanned_values(records, metadata_names).items():
        found = detect(values)
        if found.height:
            parts.append(
                found.join(ids, on="index").select(
                    "record_id",
                    "source",
                    pl.lit(field).alias("field"),
                    "type",
                    "start",
                    "end",
                    pl.col("lead") if "lead" in found.columns else pl.lit(None).alias("lead"),
                )
            )
    if not parts:
        return pl.DataFrame(schema=FINDING_SCHEMA)
    found = pl.concat([part.cast({k: FINDING_SCHEMA[k] for k in part.columns}) for part in parts])
    return found.join(_actions(records, cfg), on=["source", "type"]).select(list(FINDING_SCHEMA))


def _actions(records: pl.DataFrame, cfg: PolicyConfig) -> pl.DataFrame:
    """(source, type, action): what each source's policy does with each finding type."""
    rows = []
    for source in records["source"].unique().sort():
        policy = cfg.for_source(source)
        rows += [(source, kind, policy.secrets.action) for kind in SECRET_TYPES]
        rows += list((source, *item) for item in policy.personal_data.model_dump().items())
    return pl.DataFrame(rows, schema=["source", "type", "action"], orient="row")


def blocking(findings: pl.DataFrame) -> pl.DataFrame:
    """Per record whose findings the policy drops or quarantines: (record_id, action,
    evidence), the action `drop` when any of its findings is dropped."""
    chosen = findings.filter(pl.col("action").is_in(["drop", "quarantine"]))
    strictest = chosen.group_by("record_id").agg(
        pl.when((pl.col("action") == "drop").any())
        .then(pl.lit("drop"))
        .otherwise(pl.lit("quarantine"))
        .alias("action")
    )
    return evidence_per_record(chosen).join(strictest, on="record_id")


def evidence_per_record(findings: pl.DataFrame) -> pl.DataFrame:
    """(record_id, evidence): the types found and up to MAX_EVIDENCE_FINDINGS findings as
    type, field, offset, length (and lead for secrets) — never the value."""
    columns = [
        pl.col("type"),
        pl.col("field"),
        pl.col("start").alias("offset"),
        (pl.col("end") - pl.col("start")).alias("length"),
    ]
    if findings["lead"].is_not_null().any():
        columns.append(pl.col("lead"))
    return (
        findings.sort("record_id", "field", "start")
        .group_by("record_id", maintain_order=True)
        .agg(
            pl.col("type").unique().sort().alias("types"),
            pl.len().alias("total"),
            pl.struct(columns).head(MAX_EVIDENCE_FINDINGS).alias("findings"),
        )
        .select(
            "record_id",
            pl.struct("types", "total", "findings").struct.json_encode().alias("evidence"),
        )
    )


def redactions(findings: pl.DataFrame, kept_ids: pl.DataFrame, records: pl.DataFrame):
    """New field values (null: unchanged) for kept records with personal data to redact."""
    to_redact = findings.filter(pl.col("action") == "redact").join(
        kept_ids, on="record_id", how="semi"
    )
    if to_redact.height == 0:
        return pl.DataFrame(schema=EDIT_SCHEMA)
    edits = evidence_per_record(to_redact)
    in_metadata = pl.col("field").str.starts_with("metadata.")
    for field in SCANNED_FIELDS:
        spans = (
            to_redact.filter(in_metadata if field == "metadata" else pl.col("field") == field)
            .group_by("record_id")
            .agg(pl.struct("field", "type", "start", "end").alias("spans"))
        )
        rows = records.select("record_id", field).join(spans, on="record_id")
        rewrite = {"group": pseudonymize, "metadata": redact_metadata}.get(
            field, redact_personal_data
        )
        edited = [  # only the records that hold data to redact
            rewrite(value, found)
            for value, found in zip(rows[field], rows["spans"].to_list(), strict=True)
        ]
        edits = edits.join(
            rows.select("record_id", pl.Series(f"_{field}", edited, dtype=pl.String)),
            on="record_id",
            how="left",
        )
    edits = edits.with_columns(xxh3_128_hex(edits["_text"]).alias("_hash"))
    return edits.select(list(EDIT_SCHEMA))


def rewrite_metadata(metadata: str, findings: list[dict], rewrite) -> str:
    """Apply `rewrite(value, findings)` to the metadata values that have findings (fields
    `metadata.<name>`, offsets into the decoded value) and encode the JSON again."""
    values = json.loads(metadata)
    by_name: dict[str, list[dict]] = {}
    for finding in findings:
        by_name.setdefault(finding["field"].removeprefix("metadata."), []).append(finding)
    for name, found in by_name.items():
        values[name] = rewrite(values[name], found)
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def redact_metadata(metadata: str, findings: list[dict]) -> str:
    return rewrite_metadata(metadata, findings, redact_personal_data)


# Personal data the review queue never shows whole: only the last 4 characters stay.
FINANCIAL_TYPES = ("credit_card", "iban")


def mask_for_review(value: str, findings: list[dict]) -> str:
    """What a reviewer sees: each secret as `<SECRET:type>`, each card number or IBAN as
    `<CREDIT_CARD …1111>` (the last 4 characters, as on a receipt)."""

    def label(finding: dict, found: str) -> str:
        if finding["type"] in FINANCIAL_TYPES:
            tail = "".join(char for char in found if char.isalnum())[-4:]
            return f"<{finding['type'].upper()} …{tail}>"
        return f"<SECRET:{finding['type']}>"

    return replace_spans(value, findings, label)


def mask_metadata_for_review(metadata: str, findings: list[dict]) -> str:
    return rewrite_metadata(metadata, findings, mask_for_review)


def pseudonymize(value: str, findings: list[dict]) -> str:
    """Replace each span with `<TYPE:hash>`: the same address always gives the same pseudonym."""

    def label(finding: dict, found: str) -> str:
        return f"<{finding['type'].upper()}:{xxhash.xxh3_64_hexdigest(found.encode())[:12]}>"

    return replace_spans(value, findings, label)


def pseudonymized_group(group: str) -> str:
    """A group key as the governance stage publishes it when its personal data is redacted."""
    found = find_personal_data(pl.Series([group], dtype=pl.String))
    return pseudonymize(group, found.to_dicts()) if found.height else group
