"""Governance: decide, per record, whether we may train on it.

Detectors measure, then the policy decides in one place. Each record collects flags:

1. a deletion request that names it (dropped, `deletion_request`);
2. content a reviewer rejected before (dropped, `review_rejected`, never queued again);
3. its terms: license class, consent basis and allowed uses, the stricter of the source's
   declaration and the record's own values (`license_not_allowed`, `license_unknown`,
   `consent_missing`, `use_not_allowed`);
4. secrets and credentials in its text or metadata (`secret_detected`);
5. personal data the policy quarantines or drops (`personal_data`); types the policy
   redacts are replaced in place (a non-terminal `edited` event).

A quarantine flag that a reviewer approved for this record and this exact content is
lifted (an `approved` event; `secret_false_positive` for a secret finding). Of the flags
left, the first decides: deletion, rejection, drops, then quarantines. Every quarantine
flag of a quarantined record becomes a review item, with its secrets masked. Evidence names
types, offsets, lengths and at most 4 leading characters, never a secret.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from pipeline import ledger, reasons
from pipeline.config import CONSENT_BASES, PolicyConfig, SourceDeclaration
from pipeline.identity import xxh3_128_hex
from pipeline.licenses import RANK, license_class
from pipeline.personal_data import find_personal_data, redact_personal_data
from pipeline.schema import REVIEW_ITEM_SCHEMA
from pipeline.secrets import find_secrets, mask_secrets
from pipeline.stage import DELETION_KINDS, RunContext, StageResult

STAGE = "govern"
# Strongest consent basis first: of a source's and a record's, the later in this list counts.
CONSENT_STRENGTH = (
    "explicit",
    "contract",
    "public-release",
    "legitimate-interest",
    "unknown",
    "none",
)
MAX_EVIDENCE_FINDINGS = 20
_FLAG_SCHEMA = {
    "record_id": pl.String,
    "reason": pl.String,
    "action": pl.String,
    "evidence": pl.String,
    "rank": pl.Int32,  # lower decides first
}
_DROP, _QUARANTINE = "drop", "quarantine"


def govern(frame: pl.LazyFrame, cfg: PolicyConfig, ctx: RunContext) -> StageResult:
    sources = {source.name: source for source in ctx.config.source_list}
    records = frame.select(
        "record_id",
        "source",
        "source_content_hash",
        "group",
        "license",
        "consent",
        "text",
        "metadata",
    ).collect()
    terms = _terms_table(records, sources, cfg)
    secrets = _findings(records, find_secrets, with_lead=True)
    personal = _findings(records.select("record_id", "source", "text"), find_personal_data)
    flags = pl.concat(
        [
            _deletion_flags(records, ctx.deletions),
            _rejection_flags(records, ctx.review_decisions),
            _terms_flags(records, terms),
            _secret_flags(secrets, records, cfg),
            _personal_flags(personal, records, cfg),
        ]
    )
    flags, approvals = _lift_approved(flags, records, ctx.review_decisions)
    decided = flags.sort("rank", "record_id").unique("record_id", keep="first", maintain_order=True)
    kept_ids = records.select("record_id").join(decided, on="record_id", how="anti")
    redactions = _redactions(personal, kept_ids, records, cfg)
    # a request may name the content hash a record was published with, after redaction
    published_hashes = redactions.select("record_id", pl.col("_hash").alias("source_content_hash"))
    late = _deletion_flags(published_hashes, ctx.deletions)
    if late.height:
        flags, decided = pl.concat([flags, late]), pl.concat([decided, late])
        redactions = redactions.join(late, on="record_id", how="anti")
    events = [
        _approval_events(approvals, records),
        _redaction_events(redactions, records),
        *_terminal_events(decided, flags, records),
    ]
    kept = (
        frame.join(decided.lazy().select("record_id"), on="record_id", how="anti")
        .join(terms.lazy().select("source", "license", "consent", "_license", "_consent").unique(),
              on=["source", "license", "consent"], how="left")
        .with_columns(pl.col("_license").alias("license"), pl.col("_consent").alias("consent"))
        .drop("_license", "_consent")
        .join(redactions.lazy().select("record_id", "_text", "_hash"), on="record_id", how="left")
        .with_columns(
            pl.coalesce("_text", "text").alias("text"),
            pl.coalesce("_hash", "content_hash").alias("content_hash"),
        )
        .drop("_text", "_hash")
    )  # fmt: skip
    review_items = _review_items(flags, decided, records, secrets)
    stats = {
        "decisions": {
            f"{action}:{reason}": count
            for action, reason, count in decided.group_by("action", "reason")
            .len()
            .sort("action", "reason")
            .iter_rows()
        },
        "secrets_by_type": _count(secrets, "type"),
        "personal_data_by_type": _count(personal, "type"),
        "redacted_records": redactions.height,
        "approvals_applied": approvals.height,
        "review_items": review_items.height,
    }
    return StageResult(
        frame=kept,
        events=pl.concat([ledger.empty(), *events]),
        stats=stats,
        review_items=review_items,
    )


# terms ------------------------------------------------------------------------------------


def _terms_table(
    records: pl.DataFrame, sources: dict[str, SourceDeclaration], cfg: PolicyConfig
) -> pl.DataFrame:
    """One row per (source, record license, record consent) combination: the effective
    license and consent, and the failing check with its action (null when all pass)."""
    rows = []
    for source, record_license, record_consent in (
        records.select("source", "license", "consent")
        .unique()
        .sort("source", "license", "consent")
        .iter_rows()
    ):
        declared = sources[source]
        policy = cfg.for_source(source)
        rows.extend(_terms_rows(declared, record_license, record_consent, policy))
    schema = {
        "source": pl.String, "license": pl.String, "consent": pl.String, "_license": pl.String,
        "_consent": pl.String, "reason": pl.String, "action": pl.String, "evidence": pl.String,
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


def _terms_rows(
    declared: SourceDeclaration, record_license: str, record_consent: str, policy: PolicyConfig
) -> list[tuple]:
    extra = policy.licenses.classes
    source_class = license_class(declared.license, extra)
    record_class = license_class(record_license, extra)
    stricter = RANK[record_class] > RANK[source_class]
    effective, effective_class = (
        (record_license, record_class) if stricter else (declared.license, source_class)
    )
    consent = max(
        declared.consent,
        record_consent if record_consent in CONSENT_BASES else "unknown",
        key=CONSENT_STRENGTH.index,
    )
    key = (declared.name, record_license, record_consent, effective, consent)
    failures = []
    if effective_class not in policy.licenses.allow:
        reason = (
            reasons.LICENSE_UNKNOWN if effective_class == "unknown" else reasons.LICENSE_NOT_ALLOWED
        )
        action = _QUARANTINE if effective_class in policy.licenses.quarantine else _DROP
        failures.append((reason, action, {"license": effective, "class": effective_class}))
    if consent not in policy.consent.require:
        failures.append((reasons.CONSENT_MISSING, policy.consent.action, {"consent": consent}))
    missing_uses = [
        use
        for use in policy.uses.require
        if declared.allowed_uses and use not in declared.allowed_uses
    ]
    if missing_uses:
        failures.append(
            (
                reasons.USE_NOT_ALLOWED,
                policy.uses.action,
                {"not_allowed": missing_uses, "allowed_uses": declared.allowed_uses},
            )
        )
    if not failures:
        return [(*key, None, None, None)]
    return [(*key, reason, action, json.dumps(evidence)) for reason, action, evidence in failures]


def _terms_flags(records: pl.DataFrame, terms: pl.DataFrame) -> pl.DataFrame:
    failing = terms.filter(pl.col("reason").is_not_null())
    if failing.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    return records.join(failing, on=["source", "license", "consent"]).select(
        "record_id", "reason", "action", "evidence", _rank(pl.col("action"), 0)
    )


# detectors --------------------------------------------------------------------------------


def _findings(records: pl.DataFrame, detect, with_lead: bool = False) -> pl.DataFrame:
    """Findings of `detect` over text (and metadata, when present) keyed by record_id."""
    parts = []
    for field in ("text", "metadata"):
        if field not in records.columns:
            continue
        found = detect(records[field])
        if found.height == 0:
            continue
        ids = records.select("record_id").with_row_index("index")
        parts.append(
            found.with_columns(pl.col("index").cast(pl.UInt32))
            .join(ids, on="index")
            .select(
                "record_id",
                pl.lit(field).alias("field"),
                "type",
                "start",
                "end",
                pl.col("lead") if with_lead else pl.lit(None, dtype=pl.String).alias("lead"),
            )
        )
    schema = {"record_id": pl.String, "field": pl.String, "type": pl.String, "start": pl.Int64,
              "end": pl.Int64, "lead": pl.String}  # fmt: skip
    return pl.concat([p.cast(schema) for p in parts]) if parts else pl.DataFrame(schema=schema)


def _evidence_list(findings: pl.DataFrame, with_lead: bool) -> pl.DataFrame:
    """Per record, a JSON evidence object listing its findings (type, field, offset, length)."""
    columns = [pl.col("type"), pl.col("field"), pl.col("start").alias("offset"),
               (pl.col("end") - pl.col("start")).alias("length")]  # fmt: skip
    if with_lead:
        columns.append(pl.col("lead"))
    return (
        findings.sort("record_id", "field", "start")
        .group_by("record_id", maintain_order=True)
        .agg(
            pl.struct(columns).head(MAX_EVIDENCE_FINDINGS).alias("findings"),
            pl.len().alias("total"),
            pl.col("type").unique().sort().alias("types"),
        )
        .with_columns(
            pl.struct("types", "total", "findings").struct.json_encode().alias("evidence")
        )
    )


def _secret_flags(secrets: pl.DataFrame, records: pl.DataFrame, cfg: PolicyConfig) -> pl.DataFrame:
    if secrets.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    actions = _per_source(records, lambda policy: policy.secrets.action, cfg)
    return (
        _evidence_list(secrets, with_lead=True)
        .join(records.select("record_id", "source"), on="record_id")
        .join(actions, on="source")
        .select(
            "record_id", pl.lit(reasons.SECRET_DETECTED).alias("reason"), "action", "evidence",
            _rank(pl.col("action"), 3),
        )
    )  # fmt: skip


def _personal_actions(records: pl.DataFrame, cfg: PolicyConfig) -> pl.DataFrame:
    """(source, type, action) for every source and personal-data type."""
    rows = [
        (source, kind, action)
        for source in records["source"].unique().sort()
        for kind, action in cfg.for_source(source).personal_data.model_dump().items()
    ]
    return pl.DataFrame(rows, schema=["source", "type", "action"], orient="row")


def _personal_flags(
    personal: pl.DataFrame, records: pl.DataFrame, cfg: PolicyConfig
) -> pl.DataFrame:
    if personal.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    blocking = (
        personal.join(records.select("record_id", "source"), on="record_id")
        .join(_personal_actions(records, cfg), on=["source", "type"])
        .filter(pl.col("action").is_in([_DROP, _QUARANTINE]))
    )
    if blocking.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    strictest = blocking.group_by("record_id").agg(
        pl.when((pl.col("action") == _DROP).any()).then(pl.lit(_DROP)).otherwise(pl.lit(_QUARANTINE)).alias("action")
    )  # fmt: skip
    return (
        _evidence_list(blocking, with_lead=False)
        .join(strictest, on="record_id")
        .select(
            "record_id", pl.lit(reasons.PERSONAL_DATA).alias("reason"), "action", "evidence",
            _rank(pl.col("action"), 4),
        )
    )  # fmt: skip


def _redactions(
    personal: pl.DataFrame, kept_ids: pl.DataFrame, records: pl.DataFrame, cfg: PolicyConfig
) -> pl.DataFrame:
    """Records kept whose text holds personal data the policy redacts: their new text and hash."""
    schema = {"record_id": pl.String, "_text": pl.String, "_hash": pl.String, "evidence": pl.String}
    if personal.height == 0:
        return pl.DataFrame(schema=schema)
    to_redact = (
        personal.filter(pl.col("field") == "text")
        .join(kept_ids, on="record_id", how="semi")
        .join(records.select("record_id", "source"), on="record_id")
        .join(_personal_actions(records, cfg), on=["source", "type"])
        .filter(pl.col("action") == "redact")
    )
    if to_redact.height == 0:
        return pl.DataFrame(schema=schema)
    evidence = _evidence_list(to_redact, with_lead=False).select("record_id", "evidence")
    texts = records.select("record_id", "text").join(evidence, on="record_id")
    spans = to_redact.group_by("record_id").agg(pl.struct("type", "start", "end").alias("spans"))
    texts = texts.join(spans, on="record_id")
    new_texts = [
        redact_personal_data(text, found)
        for text, found in zip(texts["text"], texts["spans"].to_list(), strict=True)
    ]  # only the few records that hold redactable data
    new = pl.Series("_text", new_texts, dtype=pl.String)
    return (
        texts.select("record_id", "evidence")
        .with_columns(new, xxh3_128_hex(new).alias("_hash"))
        .select(list(schema))
    )


# catalog state ----------------------------------------------------------------------------


def _deletion_flags(records: pl.DataFrame, deletions: pl.DataFrame | None) -> pl.DataFrame:
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
        "record_id", pl.lit(reasons.DELETION_REQUEST).alias("reason"), pl.lit(_DROP).alias("action"),
        pl.struct(pl.col("request_id").alias("request")).struct.json_encode().alias("evidence"),
        pl.lit(0, dtype=pl.Int32).alias("rank"),
    )  # fmt: skip


def _decided(decisions: pl.DataFrame | None, status: str) -> pl.DataFrame:
    schema = {"item_id": pl.Int64, "record_id": pl.String, "source_content_hash": pl.String,
              "reason": pl.String, "status": pl.String, "reviewer": pl.String}  # fmt: skip
    if decisions is None:
        return pl.DataFrame(schema=schema)
    return decisions.cast(schema).filter(pl.col("status") == status)


def _rejection_flags(records: pl.DataFrame, decisions: pl.DataFrame | None) -> pl.DataFrame:
    rejected = (
        _decided(decisions, "rejected")
        .group_by("source_content_hash")
        .agg(pl.col("item_id").min(), pl.col("reviewer").sort_by("item_id").first())
    )
    if rejected.height == 0:
        return pl.DataFrame(schema=_FLAG_SCHEMA)
    return records.join(rejected, on="source_content_hash").select(
        "record_id", pl.lit(reasons.REVIEW_REJECTED).alias("reason"), pl.lit(_DROP).alias("action"),
        pl.struct(pl.col("item_id").alias("item"), "reviewer").struct.json_encode().alias("evidence"),
        pl.lit(1, dtype=pl.Int32).alias("rank"),
    )  # fmt: skip


def _lift_approved(
    flags: pl.DataFrame, records: pl.DataFrame, decisions: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Remove quarantine flags a reviewer approved for this record and content."""
    approved = _decided(decisions, "approved").select(
        "item_id", "record_id", "source_content_hash", "reason", "reviewer"
    )
    keyed = flags.join(records.select("record_id", "source_content_hash"), on="record_id")
    lifted = keyed.filter(pl.col("action") == _QUARANTINE).join(
        approved, on=["record_id", "source_content_hash", "reason"]
    )
    remaining = flags.join(
        lifted.select("record_id", "reason"), on=["record_id", "reason"], how="anti"
    )
    return remaining, lifted.select("record_id", "reason", "item_id", "reviewer")


# events and review items ------------------------------------------------------------------


def _approval_events(approvals: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    if approvals.height == 0:
        return ledger.empty()
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


def _terminal_events(
    decided: pl.DataFrame, flags: pl.DataFrame, records: pl.DataFrame
) -> list[pl.DataFrame]:
    others = flags.group_by("record_id").agg(pl.col("reason").unique().sort().alias("reasons"))
    frame = decided.join(records.select("record_id", "source"), on="record_id").join(
        others, on="record_id"
    )
    evidence = pl.concat_str(  # reason codes are snake_case: nothing to escape
        pl.lit('{"flags":["'),
        pl.col("reasons").list.join('","'),
        pl.lit('"],"detail":'),
        pl.col("evidence").fill_null("null"),
        pl.lit("}"),
    )
    out = []
    for action, ledger_action in ((_DROP, reasons.DROPPED), (_QUARANTINE, reasons.QUARANTINED)):
        chosen = frame.filter(pl.col("action") == action)
        if chosen.height:
            out.append(
                ledger.events(
                    chosen,
                    stage=STAGE,
                    action=ledger_action,
                    reason=pl.col("reason"),
                    evidence=evidence,
                )
            )
    return out


def _redaction_events(redactions: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    if redactions.height == 0:
        return ledger.empty()
    frame = redactions.join(records.select("record_id", "source"), on="record_id")
    return ledger.events(
        frame, stage=STAGE, action=reasons.EDITED, reason=reasons.PERSONAL_DATA_REDACTED,
        evidence=pl.col("evidence"),
    )  # fmt: skip


def _review_items(
    flags: pl.DataFrame, decided: pl.DataFrame, records: pl.DataFrame, secrets: pl.DataFrame
) -> pl.DataFrame:
    quarantined = decided.filter(pl.col("action") == _QUARANTINE).select("record_id")
    items = flags.filter(pl.col("action") == _QUARANTINE).join(
        quarantined, on="record_id", how="semi"
    )
    if items.height == 0:
        return pl.DataFrame(schema=REVIEW_ITEM_SCHEMA)
    shown = records.join(items.select("record_id").unique(), on="record_id", how="semi")
    masked = {field: _masked(shown, secrets, field) for field in ("text", "metadata")}
    shown = shown.with_columns(
        pl.Series("text", masked["text"]), pl.Series("metadata", masked["metadata"])
    )
    return (
        items.join(shown, on="record_id")
        .select(REVIEW_ITEM_SCHEMA.names())
        .cast(REVIEW_ITEM_SCHEMA)
    )


def _masked(shown: pl.DataFrame, secrets: pl.DataFrame, field: str) -> list[str | None]:
    spans: dict[str, list[dict[str, Any]]] = {}
    for row in secrets.filter(pl.col("field") == field).iter_rows(named=True):
        spans.setdefault(row["record_id"], []).append(row)
    return [
        mask_secrets(value, spans[record_id]) if record_id in spans and value is not None else value
        for record_id, value in zip(shown["record_id"], shown[field], strict=True)
    ]


# small helpers ----------------------------------------------------------------------------


def _rank(action: pl.Expr, order: int) -> pl.Expr:
    """Drops decide before quarantines; within each, checks keep their order."""
    return (
        (pl.when(action == _DROP).then(10 + order).otherwise(20 + order))
        .cast(pl.Int32)
        .alias("rank")
    )


def _per_source(records: pl.DataFrame, pick, cfg: PolicyConfig) -> pl.DataFrame:
    return pl.DataFrame(
        [(source, pick(cfg.for_source(source))) for source in records["source"].unique().sort()],
        schema=["source", "action"],
        orient="row",
    )


def _count(findings: pl.DataFrame, column: str) -> dict[str, int]:
    return dict(findings.group_by(column).len().sort(column).iter_rows())
