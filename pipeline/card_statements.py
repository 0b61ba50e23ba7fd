"""Responsible-AI statements of a published version's dataset cards: how the data was
collected, what personal and sensitive information it holds and what was done about it, its
limitations and biases, its intended uses, its preprocessing and its maintenance plan.

pipeline/dataset_card.py renders them into both the Croissant RAI fields and the datasheet,
so the two files state the same figures. Each statement is derived from the facts only
(counts, names and hashes; no record text, no secret or any part of one).
"""

from __future__ import annotations

from typing import Any

from pipeline import reasons
from pipeline.content_findings import SCANNED_FIELDS
from pipeline.personal_data import LABELS

SMALL_SPLIT = 1_000  # fewer records than this: metrics on the split are noisy
SPLIT_ROLES = {
    "train": "model fitting",
    "validation": "model selection, tuning and early stopping",
    "test": "final evaluation only",
}
LICENSE_TERMS = {
    "permissive": "keep the license notice",
    "attribution": "credit the owner wherever the data is used",
    "share-alike": "derived data must carry the same license",
    "non-commercial": "no commercial use",
    "research-only": "research use only",
    "proprietary": "no rights granted beyond the owner's agreement",
    "unknown": "terms unknown: ask the owner",
}


def description(facts: dict[str, Any]) -> str:
    counts, sources = facts["split_counts"], published_sources(facts)
    listed = ", ".join(f"{s['name']} ({s['records']})" for s in sources)
    described = [f"{s['name']}: {s['description']}" for s in facts["sources"] if s["description"]]
    return (
        f"{sum(counts.values())} text records from {len(sources)} source(s)"
        + (f" ({listed})" if listed else "")
        + ", split into "
        + ", ".join(f"{split} ({rows})" for split, rows in counts.items())
        + f" by the {facts['split']['strategy']} strategy. Curated by Thresher: license, "
        "consent, secret and personal-data governance, quality filters, deduplication and "
        "contamination checks, with every record's fate in the version's ledger."
        + "".join(f" {text}" for text in described)
    )


def collection(facts: dict[str, Any]) -> str:
    policy = facts["policy"]["consent"]
    sources = "; ".join(
        f"{s['name']}: {s['format']} data owned by {s['owner']}, license {s['license']}, "
        f"consent {s['consent']}"
        + (f", rights basis {s['rights_basis']}" if s["rights_basis"] else "")
        + (f", collected {s['collected']}" if s["collected"] else "")
        + f", {s['records']} record(s) published"
        for s in facts["sources"]
    )
    return (
        f"Records were read from {len(facts['sources'])} declared source(s), each declared "
        "in the catalog with its location, format, license, consent basis and owner; every "
        f"record carries its source's license and consent. {sources}. Accepted consent bases: "
        f"{', '.join(policy['require'])}; records with another basis were "
        f"{_past(policy['action'])}."
    )


def collection_types(facts: dict[str, Any]) -> list[str]:
    return [
        f"Secondary data: existing {s['format']} records of {s['name']}, owned by {s['owner']}"
        for s in facts["sources"]
    ]


def sensitive(facts: dict[str, Any]) -> list[str]:
    policy, found = facts["policy"], _findings(facts)
    secrets = "; ".join(
        f"{_records(facts, reason, action)} record(s) {action} ({_counts(types)})"
        for (reason, action), types in found.items()
        if reason == reasons.SECRET_DETECTED
    )
    statements = [
        f"Secrets (credentials, keys, tokens) were searched for in the fields "
        f"{', '.join(SCANNED_FIELDS)}; records with one are {_past(policy['secrets']['action'])}: "
        f"{secrets or 'none found'}. No secret is published, and no secret value or part of "
        "one is in this card."
    ]
    # the run-wide policy names the types; the counts are what the ledger says was done
    for action, event in (
        ("redact", (reasons.PERSONAL_DATA_REDACTED, reasons.EDITED)),
        ("quarantine", (reasons.PERSONAL_DATA, reasons.QUARANTINED)),
        ("drop", (reasons.PERSONAL_DATA, reasons.DROPPED)),
    ):
        types = [kind for kind, chosen in policy["personal_data"].items() if chosen == action]
        counted = found.get(event, {})
        if not types and not counted:
            continue
        if action == "redact":
            shown = ", ".join(f"{kind} by `{LABELS.get(kind, kind)}`" for kind in types)
            what = f"Personal data replaced in place ({shown})"
        else:
            what = f"Records with personal data {_past(action)} ({', '.join(types)})"
        statements.append(
            f"{what}: "
            + (f"{_records(facts, *event)} record(s) ({_counts(counted)})." if counted else "none.")
        )
    kept = [kind for kind, chosen in policy["personal_data"].items() if chosen == "keep"]
    if kept:
        statements.append(
            f"Personal data kept as published (policy keep): {', '.join(kept)}; such values may "
            "appear in the text."
        )
    if policy["sources"]:
        statements.append(
            "Per-source policy overrides: "
            + "; ".join(
                f"{name} ({', '.join(key for key, value in override.items() if value)})"
                for name, override in policy["sources"].items()
            )
            + "."
        )
    return statements


def limitations(facts: dict[str, Any]) -> list[str]:
    ledger, language = facts["ledger"], facts["language"]
    dropped_languages = ledger["languages_dropped"]
    statements = []
    if language["allow"]:
        statements.append(
            f"Only text identified as {', '.join(language['allow'])} was kept (texts under "
            f"{language['min_words']} words are not judged)"
            + (
                f"; {sum(dropped_languages.values())} record(s) in other or uncertain "
                f"languages were dropped ({_counts(dropped_languages)})"
                if dropped_languages
                else ""
            )
            + "."
        )
    else:
        statements.append("Languages were not filtered: text in any language may appear.")
    quality = {
        step["reason"]: step["records"]
        for step in ledger["steps"]
        if step["stage"] == "quality"
        and step["action"] == reasons.DROPPED
        and step["reason"] not in reasons.LANGUAGE_REASONS
    }
    if quality:
        statements.append(
            f"{sum(quality.values())} record(s) dropped by quality rules ({_counts(quality)}); "
            "the rules are heuristics, and low-quality text they do not measure remains."
        )
    for source in facts["sources"]:
        if source["records"] == 0:
            held_back = {
                reason: count
                for action, counted in ledger["by_source"].get(source["name"], {}).items()
                if action != reasons.PUBLISHED
                for reason, count in counted.items()
            }
            statements.append(
                f"Source {source['name']} (license {source['license']}, class "
                f"{source['license_class']}) contributed no records"
                + (f": {_counts(held_back)}." if held_back else ".")
            )
    quarantined = _reasons(ledger, reasons.QUARANTINED)
    if quarantined:
        statements.append(
            f"{sum(quarantined.values())} record(s) wait in the review queue "
            f"({_counts(quarantined)}) and are not in this version."
        )
    for split, rows in facts["split_counts"].items():
        if rows == 0:
            statements.append(f"The {split} split is empty.")
        elif rows < SMALL_SPLIT:
            statements.append(
                f"The {split} split holds only {rows} records: figures measured on it are noisy."
            )
    dedup = facts["dedup"]
    removed = [
        *(["exact duplicates"] if dedup["exact"] else []),
        *([f"near duplicates (MinHash Jaccard >= {dedup['minhash']})"] if dedup["minhash"] else []),
        *([f"paraphrases (embedding cosine >= {dedup['semantic']})"] if dedup["semantic"] else []),
    ]
    statements.append(
        f"Deduplication removed {' and '.join(removed) or 'nothing'}"
        + (
            "; less similar duplicates may remain."
            if dedup["semantic"]
            else "; semantic deduplication was off, so reworded duplicates may remain."
        )
    )
    if not facts["protected_eval_sets"]:
        statements.append(
            "No registered evaluation set was protected: contamination was checked against "
            "this version's test split only."
        )
    if facts["status"] == "withdrawn":
        statements.append(f"This version was withdrawn ({facts['status_reason']}): do not use it.")
    return statements


def biases(facts: dict[str, Any]) -> list[str]:
    statements = []
    total = sum(facts["split_counts"].values())
    if total:
        shares = ", ".join(
            f"{s['name']} {s['records']} ({(s['records'] or 0) / total:.1%})"
            for s in published_sources(facts)
        )
        statements.append(
            f"Source mix: {shares}: the records reflect these sources and their authors, not "
            "a general population."
        )
    held_back = {
        s["name"]: sum(
            count
            for action, counted in facts["ledger"]["by_source"].get(s["name"], {}).items()
            if action != reasons.PUBLISHED
            for count in counted.values()
        )
        for s in facts["sources"]
    }
    statements.append(
        "Records held back by the policy and filters, by source: "
        + ", ".join(
            f"{s['name']} {held_back[s['name']]} of {held_back[s['name']] + (s['records'] or 0)}"
            for s in facts["sources"]
        )
        + "; filters that hit sources unevenly shift the mix."
    )
    published = facts["published"]
    if published:
        for split, labels in published["labels"].items():
            rows = sum(labels.values())
            statements.append(
                f"Labels in {split}: "
                + ", ".join(f"{label} {n} ({n / rows:.1%})" for label, n in labels.items())
                + "."
            )
        if published["first_timestamp"]:
            statements.append(
                f"Records are dated from {published['first_timestamp']} to "
                f"{published['last_timestamp']}; {published['groups']} distinct groups."
            )
    return statements


def use_cases(facts: dict[str, Any]) -> list[str]:
    uses = facts["policy"]["uses"]
    statements = [
        f"Built for {', '.join(uses['require'])}: records of sources that do not allow "
        f"these uses were {_past(uses['action'])}.",
        "Splits: "
        + (
            "; ".join(
                f"{split}: {SPLIT_ROLES.get(split, split)}"
                for split, rows in facts["split_counts"].items()
                if rows
            )
            or "none"
        )
        + f". The splits are made by {facts['split']['strategy']}, so no group"
        + (" or time period" if "time" in facts["split"]["strategy"] else "")
        + " spans two of them.",
    ]
    if facts["split"].get("locked_test"):
        statements.append(
            f"The test split keeps the locked test set of version {facts['split']['locked_test']}."
        )
    if facts["protected_eval_sets"]:
        statements.append(
            "Protected evaluation sets (records overlapping them were removed): "
            + ", ".join(f"{e['name']} ({e['items']} items)" for e in facts["protected_eval_sets"])
            + "."
        )
    for source in published_sources(facts):
        statements.append(
            f"{source['name']} ({source['license']}, {source['license_class']}): "
            f"{LICENSE_TERMS[source['license_class']]}"
            + (
                f"; allowed uses: {', '.join(source['allowed_uses'])}"
                if source["allowed_uses"]
                else ""
            )
            + "."
        )
    return statements


def preprocessing(facts: dict[str, Any]) -> list[str]:
    ledger = facts["ledger"]
    outcomes = ledger["outcomes"]
    statements = [
        f"Every record ends with exactly one terminal ledger event: {ledger['records_in']} in = "
        f"{outcomes['published']} published + {outcomes['dropped']} dropped + "
        f"{outcomes['quarantined']} quarantined. The stages, in order:"
    ]
    statements += [
        f"{step['stage']}: {step['records']} record(s) {step['action']}"
        + (f" ({step['reason']})" if step["reason"] else "")
        for step in ledger["steps"]
    ]
    return statements


def maintenance(facts: dict[str, Any]) -> str:
    contacts = [
        f"{s['name']}: {s['removal_contact']}" for s in facts["sources"] if s["removal_contact"]
    ]
    status = (
        f" This version was withdrawn: {facts['status_reason']}."
        if facts["status"] == "withdrawn"
        else ""
    )
    return (
        f"Versions are immutable and content-addressed: the dataset hash {facts['dataset_hash']} "
        "covers the shards' sha256s, the schema, the split membership and the config hash, so "
        "any change publishes a new version that names its parent. A version that must no "
        "longer be used is withdrawn (`thresher catalog withdraw`): it stays listed with the "
        "reason, readers and training refuse it, and its shards can be purged. Deletion "
        "requests (`thresher forget`) drop the matching records from every later version; "
        "`thresher catalog affected` lists the versions that held them."
        + (f" Removal requests: {'; '.join(contacts)}." if contacts else "")
        + status
    )


# helpers --------------------------------------------------------------------------------------


def published_sources(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The sources with records in this version (records unknown: counted in)."""
    return [s for s in facts["sources"] if s["records"] != 0]


def _findings(facts: dict[str, Any]) -> dict[tuple[str, str], dict[str, int]]:
    """{(reason, ledger action): {finding type: records}}."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    for row in facts["ledger"]["findings"]:
        found.setdefault((row["reason"], row["action"]), {})[row["type"]] = row["records"]
    return found


def _records(facts: dict[str, Any], reason: str, action: str) -> int:
    """Records with an event of this reason and action (one event per record and stage)."""
    return sum(
        step["records"]
        for step in facts["ledger"]["steps"]
        if (step["reason"], step["action"]) == (reason, action)
    )


def _reasons(ledger: dict[str, Any], action: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for actions in ledger["by_source"].values():
        for reason, count in actions.get(action, {}).items():
            totals[reason] = totals.get(reason, 0) + count
    return totals


def _past(policy_action: str) -> str:
    return {"drop": "dropped", "quarantine": "quarantined", "redact": "redacted"}[policy_action]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in counts.items())
