"""The reviewer quarantine queue: flagged records wait here for a human decision.

Items are keyed by (record id, source content hash, reason) and a hash of everything else
the reviewer sees (metadata, group, label, terms): a nightly run that flags the same record
again queues nothing new, and a record that changed anywhere is reviewed again. An item is decided once; the decision is appended to
`review_decisions` (the audit log) and the item's status changes in the same transaction,
so of two reviewers deciding one item at once exactly one wins and the other is told who
did. Approved items let their record through the governance stage of the next run;
rejected content is dropped by every later run and never queued again.

Items of LABEL_REASONS (a duplicate cluster whose members carry different labels) are
approved with the label the kept record is published with; that label is stored on the item,
on the decision and as the reviewer's label of the item. Other reviewers may label an item
without deciding it (`record_label`); `agreement` compares every two reviewers' labels.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from itertools import combinations
from typing import Any

import polars as pl
from sqlalchemy import insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from data_catalog import tables
from data_catalog.catalog import Catalog, now, transaction_lock
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.core.schema import REVIEW_DECISION_SCHEMA
from pipeline.core.terminal import unsafe_char

STATUSES = ("pending", "approved", "rejected")
DECISIONS = ("approved", "rejected")
LABEL_REASONS = (reasons.LABEL_CONFLICT,)  # items approved with a label, and labelled


@dataclass(frozen=True)
class Decided:
    item_id: int
    decision: str


@dataclass(frozen=True)
class Conflict:
    item_id: int
    message: str


def enqueue(catalog: Catalog, items: pl.DataFrame, dataset: str, run_id: str) -> int:
    """Add review items (REVIEW_ITEM_SCHEMA rows) not queued before; return how many were new."""
    if items.height == 0:
        return 0
    created = now()
    rows = [
        {**item, "dataset": dataset, "run_id": run_id, "status": "pending", "created_at": created}
        for item in items.iter_rows(named=True)
    ]
    table = tables.review_items
    dialect = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}[
        catalog.engine.dialect.name
    ]
    with catalog.engine.begin() as connection:
        # PostgreSQL: two runs queueing the same items in another order would deadlock
        transaction_lock(connection, "review_queue")
        statement = dialect(table).on_conflict_do_nothing().returning(table.c.id)
        return len(connection.execute(statement, rows).all())


def items(
    catalog: Catalog,
    *,
    status: str | None = None,
    reason: str | None = None,
    source: str | None = None,
) -> list[dict[str, Any]]:
    table = tables.review_items
    query = select(table).order_by(table.c.id)
    for column, value in (("status", status), ("reason", reason), ("source", source)):
        if value is not None:
            query = query.where(table.c[column] == value)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


MAX_ITEM_ID = 2**63 - 1  # the largest integer SQLite and PostgreSQL store


def item(catalog: Catalog, item_id: int) -> dict[str, Any]:
    if not 0 < item_id <= MAX_ITEM_ID:
        raise DataError(f"no review item {item_id}; see `thresher review list`")
    with catalog.engine.connect() as connection:
        row = (
            connection.execute(
                select(tables.review_items).where(tables.review_items.c.id == item_id)
            )
            .mappings()
            .first()
        )
    if row is None:
        raise DataError(f"no review item {item_id}; see `thresher review list`")
    return dict(row)


def record_items(catalog: Catalog, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of the record `entry` is an item of (its other reasons: a license question
    and a secret finding on one record), in queue order, `entry` included."""
    table = tables.review_items
    query = (
        select(table)
        .where(
            table.c.dataset == entry["dataset"],
            table.c.record_id == entry["record_id"],
            table.c.source_content_hash == entry["source_content_hash"],
        )
        .order_by(table.c.id)
    )
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def next_pending(catalog: Catalog, after: int) -> int | None:
    """The id of the next pending item after `after` (in queue order, wrapping around to the
    first); None when no other item is pending."""
    table = tables.review_items
    pending = select(table.c.id).where(table.c.status == "pending", table.c.id != after)
    with catalog.engine.connect() as connection:
        later = connection.execute(
            pending.where(table.c.id > after).order_by(table.c.id).limit(1)
        ).scalar()
        if later is not None:
            return later
        return connection.execute(pending.order_by(table.c.id).limit(1)).scalar()


# Reasons decided for a whole source by its declaration and the policy: one config setting
# settles every item of the source at once (the next run applies it), where deciding item
# by item would answer the same question once per record.
SOURCE_LEVEL_SETTINGS = {
    reasons.LICENSE_UNKNOWN: (
        "map the license to a class with `policy.licenses.classes: "
        '{{"{license}": permissive}}` (or attribution, share-alike, …), or declare the '
        "source's `license` as an SPDX id"
    ),
    reasons.LICENSE_NOT_ALLOWED: (
        "allow its class with `policy.licenses.allow`, or "
        "for this source alone with `policy.sources.{source}.licenses.allow`"
    ),
    reasons.CONSENT_MISSING: (
        "declare the source's `consent`, or accept its basis with "
        "`policy.sources.{source}.consent.require`"
    ),
    reasons.USE_NOT_ALLOWED: (
        "add the use to the source's `allowed_uses`, or "
        "change `policy.sources.{source}.uses.require`"
    ),
}


def source_setting(entry: dict[str, Any]) -> str | None:
    """For an item whose reason is decided per source, the config setting that settles it
    for the whole source (with the source's name and license filled in)."""
    hint = SOURCE_LEVEL_SETTINGS.get(entry["reason"])
    if hint is None:
        return None
    return hint.format(source=entry["source"], license=evidence_license(entry) or "LICENSE")


def evidence_license(entry: dict[str, Any]) -> str | None:
    """The record's license where its evidence names it (license reasons)."""
    evidence = _evidence(entry)
    return evidence.get("license") or next(iter(evidence.get("licenses") or {}), None)


def decide_many(
    catalog: Catalog, item_ids: list[int], decision: str, reviewer: str, note: str
) -> tuple[list[int], list[int]]:
    """Decide each item as `decide` does (one decision-log row per item, with the one note);
    return (decided, already decided by someone else)."""
    decided, conflicts = [], []
    for item_id in item_ids:
        outcome = decide(catalog, item_id, decision, reviewer, note)
        (conflicts if isinstance(outcome, Conflict) else decided).append(item_id)
    return decided, conflicts


def log_reveal(catalog: Catalog, item_id: int, reviewer: str) -> None:
    with catalog.engine.begin() as connection:
        connection.execute(
            insert(tables.review_reveals).values(
                item_id=item_id, reviewer=reviewer, revealed_at=now()
            )
        )


def reveals(catalog: Catalog, item_id: int) -> list[dict[str, Any]]:
    table = tables.review_reveals
    query = select(table).where(table.c.item_id == item_id).order_by(table.c.id)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def history(catalog: Catalog, item_id: int) -> list[dict[str, Any]]:
    table = tables.review_decisions
    query = select(table).where(table.c.item_id == item_id).order_by(table.c.id)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def decide(
    catalog: Catalog,
    item_id: int,
    decision: str,
    reviewer: str,
    note: str | None,
    label: str | None = None,
) -> Decided | Conflict:
    """Approve or reject one pending item. Only a pending item can be decided; a second
    decision (also one racing this one) gets a Conflict naming the first. Approving an item of
    LABEL_REASONS takes the label its record is published with; no other decision takes one."""
    if decision not in DECISIONS:
        raise DataError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    if not reviewer or not reviewer.strip():
        raise DataError("a decision needs the reviewer's name (--reviewer NAME)")
    entry = item(catalog, item_id)  # a clear error for an unknown id
    checked_note(note)
    label = checked_label(entry, decision, label)
    decided_at = now()
    table = tables.review_items
    with catalog.engine.begin() as connection:
        changed = connection.execute(
            update(table)
            .where(table.c.id == item_id, table.c.status == "pending")
            .values(
                status=decision,
                reviewer=reviewer,
                note=note,
                decided_at=decided_at,
                adjudicated_label=label,
            )
        ).rowcount
        if changed == 1:
            connection.execute(
                insert(tables.review_decisions).values(
                    item_id=item_id,
                    decision=decision,
                    reviewer=reviewer,
                    note=note,
                    decided_at=decided_at,
                    label=label,
                )
            )
            if label is not None:
                _store_label(connection, item_id, reviewer, label, decided_at)
            return Decided(item_id, decision)
    current = item(catalog, item_id)
    return Conflict(
        item_id,
        f"item {item_id} was already {current['status']} by {current['reviewer']} at "
        f"{_when(current['decided_at'])}; nothing changed",
    )


def checked_note(note: str | None) -> None:
    """A DataError when a note holds a control or bidi character (new lines and tabs are
    fine): one would rewrite the terminal of whoever reads the decision log, or reorder what
    the note seems to say. The page and the commands decide through this check."""
    found = unsafe_char(note or "")
    if found is not None:
        at, code = found
        raise DataError(
            f"the note holds {code} at character {at + 1}, a control or text-direction "
            "character, which a note may not hold (pasted text can carry one unseen): type "
            "the note again as plain text"
        )


def checked_label(entry: dict[str, Any], decision: str, label: str | None) -> str | None:
    """The label a decision on `entry` stores (stripped); a DataError when an approval of a
    label conflict has none, or another decision has one."""
    label = label.strip() if label is not None else None
    if label == "":
        raise DataError(f"item {entry['id']}: a label cannot be empty")
    labelled = entry["reason"] in LABEL_REASONS
    if labelled and decision == "approved" and label is None:
        raise DataError(
            f"item {entry['id']} is a label conflict: approving it publishes its kept record "
            f"with the label you choose; pass --label LABEL (its members are labelled "
            f"{member_labels(entry)}; see `thresher review show {entry['id']}`)"
        )
    if label is not None and not (labelled and decision == "approved"):
        what = "a rejection" if labelled else f"a {entry['reason']} item"
        raise DataError(
            f"item {entry['id']}: {what} takes no label; only approving a label conflict does"
        )
    return label


def _evidence(entry: dict[str, Any]) -> dict[str, Any]:
    try:
        evidence = json.loads(entry["evidence"] or "null")
    except ValueError:
        return {}
    return evidence if isinstance(evidence, dict) else {}


def members(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The cluster members an item's evidence lists (record_id, source, label; at most
    pipeline/dedup/label_conflicts.py's LISTED); none for items of other reasons."""
    listed = _evidence(entry).get("members")
    return listed if isinstance(listed, list) else []


def members_total(entry: dict[str, Any]) -> int:
    """How many members the item's cluster has (more than `members` lists in a large one)."""
    total = _evidence(entry).get("members_total")
    return total if isinstance(total, int) else len(members(entry))


def member_label_counts(entry: dict[str, Any]) -> Counter:
    """Members per label (None: no label) of the whole cluster, also when the evidence lists
    only some of its members."""
    evidence = _evidence(entry)
    counted = evidence.get("labels")
    if not isinstance(counted, dict):
        return Counter(member.get("label") for member in members(entry))
    counts = Counter({label: n for label, n in counted.items() if isinstance(n, int)})
    unlabelled = members_total(entry) - sum(counts.values())
    if unlabelled > 0:
        counts[None] = unlabelled
    return counts


def member_labels(entry: dict[str, Any]) -> str:
    """`spam ×2 (sms), ham ×1 (sms, forum)`: each label with its members' count and the
    sources of its listed members."""
    counts = member_label_counts(entry)
    sources: dict[Any, set[str]] = {}
    for member in members(entry):
        sources.setdefault(member.get("label"), set()).add(str(member.get("source")))
    if not counts:
        return "(no members listed)"
    return ", ".join(
        f"{'null' if label is None else label} ×{n}"
        + (f" ({', '.join(sorted(sources[label]))})" if label in sources else "")
        for label, n in sorted(counts.items(), key=lambda pair: (-pair[1], str(pair[0])))
    )


def record_label(catalog: Catalog, item_id: int, reviewer: str, label: str) -> None:
    """Record `reviewer`'s label of an item of LABEL_REASONS without deciding it (an item of
    any status); it replaces their earlier label of the item."""
    if not reviewer or not reviewer.strip():
        raise DataError("a label needs the reviewer's name (--reviewer NAME)")
    entry = item(catalog, item_id)
    if entry["reason"] not in LABEL_REASONS:
        raise DataError(
            f"item {item_id} is a {entry['reason']} item: only label conflicts are labelled"
        )
    label = (label or "").strip()
    if not label:
        raise DataError(f"item {item_id}: a label cannot be empty (--label LABEL)")
    with catalog.engine.begin() as connection:
        _store_label(connection, item_id, reviewer, label, now())


def _store_label(connection, item_id: int, reviewer: str, label: str, at: datetime) -> None:
    dialect = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}[connection.dialect.name]
    statement = dialect(tables.review_labels).values(
        item_id=item_id, reviewer=reviewer, label=label, labelled_at=at
    )
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["item_id", "reviewer"],
            set_={"label": statement.excluded.label, "labelled_at": statement.excluded.labelled_at},
        )
    )


def labels(catalog: Catalog, item_id: int) -> list[dict[str, Any]]:
    """Every reviewer's label of an item, by reviewer."""
    table = tables.review_labels
    query = (
        select(table.c.reviewer, table.c.label, table.c.labelled_at)
        .where(table.c.item_id == item_id)
        .order_by(table.c.reviewer)
    )
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def agreement(catalog: Catalog, reason: str | None = None) -> list[dict[str, Any]]:
    """For every two reviewers who labelled at least one common item (of `reason`, when
    given): the items they share, how many they labelled alike, observed agreement p_o,
    expected agreement p_e (chance, from each reviewer's own label frequencies on those
    items) and Cohen's kappa (p_o - p_e) / (1 - p_e); kappa is None when p_e is 1."""
    table, queued = tables.review_labels, tables.review_items
    query = select(table.c.item_id, table.c.reviewer, table.c.label).join(
        queued, queued.c.id == table.c.item_id
    )
    if reason is not None:
        query = query.where(queued.c.reason == reason)
    by_item: dict[int, dict[str, str]] = {}
    with catalog.engine.connect() as connection:
        for item_id, reviewer, label in connection.execute(query):
            by_item.setdefault(item_id, {})[reviewer] = label
    reviewers = sorted({name for labelled in by_item.values() for name in labelled})
    pairs = []
    for first, second in combinations(reviewers, 2):
        shared = [(v[first], v[second]) for v in by_item.values() if first in v and second in v]
        if shared:
            pairs.append(_kappa(first, second, shared))
    return pairs


def _kappa(first: str, second: str, shared: list[tuple[str, str]]) -> dict[str, Any]:
    n = len(shared)
    agreed = sum(a == b for a, b in shared)
    mine, theirs = Counter(a for a, _ in shared), Counter(b for _, b in shared)
    observed = Fraction(agreed, n)
    expected = sum(Fraction(mine[label] * theirs[label], n * n) for label in mine)
    kappa = None if expected == 1 else float((observed - expected) / (1 - expected))
    return {
        "reviewers": [first, second],
        "items": n,
        "agreed": agreed,
        "observed": float(observed),
        "expected": float(expected),
        "kappa": kappa,
    }


def decisions_frame(catalog: Catalog) -> pl.DataFrame:
    """Every decided item, as the governance stage reads it (RunContext.review_decisions)."""
    table = tables.review_items
    query = select(
        table.c.id.label("item_id"),
        table.c.record_id,
        table.c.source_content_hash,
        table.c.review_hash,
        table.c.reason,
        table.c.status,
        table.c.reviewer,
        table.c.adjudicated_label.label("label"),
    ).where(table.c.status.in_(DECISIONS))
    with catalog.engine.connect() as connection:
        rows = [tuple(row) for row in connection.execute(query)]
    return pl.DataFrame(rows, schema=REVIEW_DECISION_SCHEMA, orient="row")


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "an unknown time"
