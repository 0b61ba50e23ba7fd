"""Governance: decide, per record, whether we may train on it.

Detectors measure, then the policy decides in one place. Each record collects flags:

1. a deletion request that names it (dropped, `deletion_request`);
2. content a reviewer rejected before (dropped, `review_rejected`, never queued again);
3. its terms: license class, consent basis and allowed uses (`license_not_allowed`,
   `license_unknown`, `consent_missing`, `use_not_allowed`; see pipeline/govern/terms.py);
4. secrets and credentials in any field (`secret_detected`);
5. personal data the policy quarantines or drops (`personal_data`). Types the policy
   redacts are replaced in place instead (a non-terminal `edited` event).

A quarantine flag that a reviewer approved for this record and this exact content is
lifted (an `approved` event; `secret_false_positive` for a secret finding). Of the flags
left, the first decides: deletion, rejection, then drops, then quarantines. Every quarantine
flag of a quarantined record becomes a review item, with its secrets masked. Evidence names
types, offsets, lengths and at most 4 leading characters, never a secret.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import PolicyConfig
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.schema import DELETION_KINDS, REVIEW_ITEM_SCHEMA, review_decisions
from pipeline.govern.terms import DROP, QUARANTINE, terms_flags, terms_table
from pipeline.review import masked_with_findings, with_review_hash
from pipeline.stage import RunContext, StageResult
from pipeline.text import content_findings

STAGE = "govern"
_FLAG_SCHEMA = {
    "record_id": pl.String,
    "reason": pl.String,
    "action": pl.String,  # drop | quarantine
    "evidence": pl.String,
    "rank": pl.Int32,  # lower decides first
}


def govern(frame: pl.LazyFrame, cfg: PolicyConfig, ctx: RunContext) -> StageResult:
    sources = {source.name: source for source in ctx.config.source_list}
    records = frame.select(
        "record_id", "source", "source_content_hash", "license", "consent",
        *content_findings.SCANNED_FIELDS,
    ).collect()  # fmt: skip
    metadata_names = sorted(
        {name for source in sources.values() for name in source.metadata_fields}
    )
    terms = terms_table(records, sources, cfg)
    secrets = content_findings.secret_findings(records, cfg, metadata_names)
    personal = content_findings.personal_findings(records, cfg, metadata_names)
    flags = pl.concat(
        [
            _deletion_flags(records, ctx.deletions, rank=0),
            _rejection_flags(records, ctx.review_decisions, rank=1),
            _ranked(terms_flags(records, terms), order=pl.col("order")),
            _ranked(_with_reason(content_findings.blocking(secrets), reasons.SECRET_DETECTED), 4),
            _ranked(_with_reason(content_findings.blocking(personal), reasons.PERSONAL_DATA), 5),
        ]
    )
    flags, approvals = _lift_approved(flags, records, ctx.review_decisions)
    decided = _first_flag_per_record(flags)
    kept_ids = records.select("record_id").join(decided, on="record_id", how="anti")
    edits = content_findings.redactions(personal, kept_ids, records)
    # a request may name the content hash or group a record is published with, after redaction
    published = edits.select(
        "record_id", pl.col("_hash").alias("source_content_hash"), pl.col("_group").alias("group")
    )
    late = _deletion_flags(published, ctx.deletions, rank=0)
    if late.height:
        flags, decided = pl.concat([flags, late]), pl.concat([decided, late])
        edits = edits.join(late, on="record_id", how="anti")
    # an approval counts only for a record that goes on (a deletion request may still drop it)
    approvals = approvals.join(decided, on="record_id", how="anti")
    published_terms = terms.select(
        "source", "license", "consent", "published_license", "published_consent"
    ).unique()
    kept = (
        frame.join(
            decided.lazy().select("record_id"), on="record_id", how="anti", maintain_order="left"
        )
        .join(
            published_terms.lazy(),
            on=["source", "license", "consent"],
            how="left",
            maintain_order="left",
        )
        .with_columns(
            pl.col("published_license").alias("license"),
            pl.col("published_consent").alias("consent"),
        )
        .join(edits.lazy().drop("evidence"), on="record_id", how="left", maintain_order="left")
        .with_columns(
            *(pl.coalesce(f"_{f}", f).alias(f) for f in content_findings.SCANNED_FIELDS),
            pl.coalesce("_hash", "content_hash").alias("content_hash"),
        )
        .drop("published_license", "published_consent", *content_findings.EDITED_COLUMNS)
    )
    events = pl.concat(
        [
            ledger.empty(),
            _approval_events(approvals, records),
            _edit_events(edits, records),
            *_terminal_events(decided, flags, records, secrets),
        ]
    )
    hidden = pl.concat(
        [secrets, personal.filter(pl.col("type").is_in(content_findings.FINANCIAL_TYPES))]
    )
    review_items = _review_items(flags, decided, records, hidden)
    return StageResult(
        frame=kept,
        events=events,
        stats=_stats(decided, secrets, personal, edits, approvals, review_items),
        review_items=review_items,
    )


# flags --------------------------------------------------------------------------------------


def _ranked(flags: pl.DataFrame, order: int | pl.Expr) -> pl.DataFrame:
    """Drops decide before quarantines; within each, checks keep their order (terms 0-3,
    secrets 4, personal data 5)."""
    rank = pl.when(pl.col("action") == DROP).then(10 + order).otherwise(20 + order)
    return flags.select(
        "record_id", "reason", "action", "evidence", rank.cast(pl.Int32).alias("rank")
    )


def _with_reason(flags: pl.DataFrame, reason: str) -> pl.DataFrame:
    return flags.with_columns(pl.lit(reason).alias("reason"))


def _first_flag_per_record(flags: pl.DataFrame) -> pl.DataFrame:
    ordered = flags.sort("rank", "record_id", "reason")
    return ordered.unique("record_id", keep="first", maintain_order=True)


def _deletion_flags(
    records: pl.DataFrame, deletions: pl.DataFrame | None, rank: int
) -> pl.DataFrame:
    if deletions is None or deletions.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    parts = []
    for kind, column in DELETION_KINDS.items():
        requested = deletions.filter(pl.col("kind") == kind)
        if column in records.columns and requested.height:
            values = records.select("record_id", pl.col(column).alias("value"))
            parts.append(values.join(requested, on="value").select("record_id", "request_id"))
    if not parts:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    matched = pl.concat(parts).group_by("record_id").agg(pl.col("request_id").min())
    return matched.select(
        "record_id",
        pl.lit(reasons.DELETION_REQUEST).alias("reason"),
        pl.lit(DROP).alias("action"),
        pl.struct(pl.col("request_id").alias("request")).struct.json_encode().alias("evidence"),
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
    )


def _reviewer_decisions(decisions: pl.DataFrame | None, status: str) -> pl.DataFrame:
    return review_decisions(decisions).filter(pl.col("status") == status)


def _rejection_flags(
    records: pl.DataFrame, decisions: pl.DataFrame | None, rank: int
) -> pl.DataFrame:
    """Rejections key on what the reviewer saw: a record with the same text, metadata, group,
    label and terms is dropped under any record id."""
    rejected = (
        _reviewer_decisions(decisions, "rejected")
        .group_by("source_content_hash", "review_hash")
        .agg(pl.col("item_id").min(), pl.col("reviewer").sort_by("item_id").first())
    )
    same_text = records.join(rejected, on="source_content_hash", how="semi")
    candidates = with_review_hash(same_text)
    return candidates.join(rejected, on=["source_content_hash", "review_hash"]).select(
        "record_id",
        pl.lit(reasons.REVIEW_REJECTED).alias("reason"),
        pl.lit(DROP).alias("action"),
        pl.struct(pl.col("item_id").alias("item"), "reviewer")
        .struct.json_encode()
        .alias("evidence"),
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
    )


def _lift_approved(
    flags: pl.DataFrame, records: pl.DataFrame, decisions: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Remove the quarantine flags a reviewer approved for this record and this content."""
    approved = _reviewer_decisions(decisions, "approved").drop("status")
    quarantined = flags.filter(pl.col("action") == QUARANTINE)
    flagged = records.join(quarantined, on="record_id", how="semi")
    keyed = quarantined.join(
        with_review_hash(flagged).select("record_id", "source_content_hash", "review_hash"),
        on="record_id",
    )
    lifted = keyed.join(approved, on=["record_id", "source_content_hash", "reason", "review_hash"])
    remaining = flags.join(
        lifted.select("record_id", "reason"), on=["record_id", "reason"], how="anti"
    )
    return remaining, lifted.select("record_id", "reason", "item_id", "reviewer")


# events and review items ------------------------------------------------------------------


def _approval_events(approvals: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    frame = approvals.join(records.select("record_id", "source"), on="record_id")
    reason = (
        pl.when(pl.col("reason") == reasons.SECRET_DETECTED)
        .then(pl.lit(reasons.SECRET_FALSE_POSITIVE))
        .otherwise(pl.lit(reasons.REVIEW_APPROVED))
    )
    evidence = pl.struct(
        pl.col("item_id").alias("item"), "reviewer", pl.col("reason").alias("flag")
    )
    return ledger.events(
        frame, stage=STAGE, action=reasons.APPROVED, reason=reason, evidence=evidence
    )


def _edit_events(edits: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    frame = edits.join(records.select("record_id", "source"), on="record_id")
    return ledger.events(
        frame,
        stage=STAGE,
        action=reasons.EDITED,
        reason=reasons.PERSONAL_DATA_REDACTED,
        evidence=pl.col("evidence"),
    )


def _terminal_events(
    decided: pl.DataFrame, flags: pl.DataFrame, records: pl.DataFrame, secrets: pl.DataFrame
) -> list[pl.DataFrame]:
    """One terminal event per decided record; its evidence lists every flag it had and, under
    `secrets`, the types of the secrets found in it whatever decided it (a record dropped for
    its license may hold credentials too: the report counts them)."""
    every = flags.group_by("record_id").agg(pl.col("reason").unique().sort().alias("flags"))
    types = secrets.group_by("record_id").agg(pl.col("type").unique().sort().alias("secrets"))
    frame = (
        decided.join(records.select("record_id", "source"), on="record_id")
        .join(every, on="record_id")
        .join(types, on="record_id", how="left")
    )
    found = pl.concat_str(pl.lit(',"secrets":["'), pl.col("secrets").list.join('","'), pl.lit('"]'))
    evidence = pl.concat_str(  # reason codes and finding types are snake_case: no escapes
        pl.lit('{"flags":["'),
        pl.col("flags").list.join('","'),
        pl.lit('"],"detail":'),
        pl.col("evidence").fill_null("null"),
        found.fill_null(""),
        pl.lit("}"),
    )
    return [
        ledger.events(
            frame.filter(pl.col("action") == action),
            stage=STAGE,
            action=ledger_action,
            reason=pl.col("reason"),
            evidence=evidence,
        )
        for action, ledger_action in ((DROP, reasons.DROPPED), (QUARANTINE, reasons.QUARANTINED))
    ]


def _review_items(
    flags: pl.DataFrame, decided: pl.DataFrame, records: pl.DataFrame, hidden: pl.DataFrame
) -> pl.DataFrame:
    """One item per quarantine flag of each quarantined record, with its secrets, card numbers
    and IBANs masked (`hidden`: those findings)."""
    quarantined = decided.filter(pl.col("action") == QUARANTINE).select("record_id")
    items = flags.filter(pl.col("action") == QUARANTINE).join(
        quarantined, on="record_id", how="semi"
    )
    shown = records.join(items.select("record_id").unique(), on="record_id", how="semi")
    shown = with_review_hash(shown).with_columns(
        *(
            pl.Series(column, masked_with_findings(shown, hidden, column), dtype=pl.String)
            for column in content_findings.SCANNED_FIELDS
        ),
        xxh3_128_hex(shown["group"]).alias("group_hash"),
    )
    return (
        items.join(shown, on="record_id")
        .select(REVIEW_ITEM_SCHEMA.names())
        .cast(REVIEW_ITEM_SCHEMA)
    )


def _stats(decided, secrets, personal, edits, approvals, review_items) -> dict[str, Any]:
    def count(frame: pl.DataFrame, *columns: str) -> dict[str, int]:
        counted = frame.group_by(columns).len().sort(columns).iter_rows()
        return {":".join(row[:-1]): row[-1] for row in counted}

    return {
        "decisions": count(decided, "action", "reason"),
        "secrets_by_type": count(secrets, "type"),
        "personal_data_by_type": count(personal, "type"),
        "redacted_records": edits.height,
        "approvals_applied": approvals.height,
        "review_items": review_items.height,
    }
