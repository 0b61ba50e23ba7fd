"""Terms checks of the governance stage: license class, consent basis and allowed uses.

A record's own license and consent (when its source maps them) and its source's declaration
must both pass: a record cannot loosen its source's terms, nor a source a record's. The
published license is the stricter of the two (on a tie, the record's, as the more specific).
Decisions are made once per distinct (source, license, consent) combination, not per record.
"""

from __future__ import annotations

import json

import polars as pl

from pipeline.config import CONSENT_BASES, PolicyConfig, SourceDeclaration
from pipeline.core import reasons
from pipeline.core.licenses import RANK, license_class

# Strongest consent basis first: of a source's and a record's, the later in this list counts.
CONSENT_STRENGTH = (
    "explicit",
    "contract",
    "public-release",
    "legitimate-interest",
    "unknown",
    "none",
)
DROP, QUARANTINE = "drop", "quarantine"
TERMS_SCHEMA = {
    "source": pl.String,
    "license": pl.String,  # as the record carries it
    "consent": pl.String,
    "published_license": pl.String,
    "published_consent": pl.String,
    "reason": pl.String,  # null when every check passes
    "action": pl.String,
    "evidence": pl.String,
}


def terms_table(
    records: pl.DataFrame, sources: dict[str, SourceDeclaration], cfg: PolicyConfig
) -> pl.DataFrame:
    """One row per failing check of each (source, license, consent) combination, or one row
    with a null reason when all its checks pass."""
    combinations = records.select("source", "license", "consent").unique()
    rows = []
    for source, record_license, record_consent in combinations.sort(pl.all()).iter_rows():
        rows.extend(
            _decide(sources[source], record_license, record_consent, cfg.for_source(source))
        )
    return pl.DataFrame(rows, schema=TERMS_SCHEMA, orient="row")


# When a record fails several checks with the same action, the first in this order decides.
CHECK_ORDER = (reasons.LICENSE_NOT_ALLOWED, reasons.LICENSE_UNKNOWN, reasons.CONSENT_MISSING,
               reasons.USE_NOT_ALLOWED)  # fmt: skip


def terms_flags(records: pl.DataFrame, terms: pl.DataFrame) -> pl.DataFrame:
    """(record_id, reason, action, evidence, order) for every failing check of every record."""
    failing = terms.filter(pl.col("reason").is_not_null())
    order = pl.col("reason").replace_strict(CHECK_ORDER, list(range(len(CHECK_ORDER))))
    return records.join(failing, on=["source", "license", "consent"]).select(
        "record_id", "reason", "action", "evidence", order.alias("order")
    )


def _decide(
    declared: SourceDeclaration, record_license: str, record_consent: str, policy: PolicyConfig
) -> list[tuple]:
    classes = {
        declared.license: license_class(declared.license, policy.licenses.classes),
        record_license: license_class(record_license, policy.licenses.classes),
    }
    published_license = max(
        [record_license, declared.license], key=lambda name: RANK[classes[name]]
    )  # max keeps the first on a tie: the record's
    consent = max(
        declared.consent,
        record_consent if record_consent in CONSENT_BASES else "unknown",
        key=CONSENT_STRENGTH.index,
    )
    failures = []
    refused = {name: cls for name, cls in classes.items() if cls not in policy.licenses.allow}
    if refused:
        known = [cls for cls in refused.values() if cls != "unknown"]
        quarantined = all(cls in policy.licenses.quarantine for cls in refused.values())
        failures.append(
            (
                reasons.LICENSE_NOT_ALLOWED if known else reasons.LICENSE_UNKNOWN,
                QUARANTINE if quarantined else DROP,
                {"licenses": refused, "allowed_classes": policy.licenses.allow},
            )
        )
    if consent not in policy.consent.require:
        failures.append((reasons.CONSENT_MISSING, policy.consent.action, {"consent": consent}))
    allowed = declared.allowed_uses  # an empty list declares no restriction
    missing_uses = [use for use in policy.uses.require if allowed and use not in allowed]
    if missing_uses:
        evidence = {"not_allowed": missing_uses, "allowed_uses": allowed}
        failures.append((reasons.USE_NOT_ALLOWED, policy.uses.action, evidence))
    key = (declared.name, record_license, record_consent, published_license, consent)
    if not failures:
        return [(*key, None, None, None)]
    return [(*key, reason, action, json.dumps(evidence)) for reason, action, evidence in failures]
