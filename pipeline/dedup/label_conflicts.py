"""Label conflicts: a duplicate cluster (exact or MinHash dedup) whose members carry two or
more distinct labels. Null labels never conflict: a cluster of `spam` and null is no conflict.

pipeline/dedup/duplicates.py hands each cluster here after `resolve`, before the drops. The policy
`dedup.label_conflicts` decides:

- `review` (the default): every member, the kept record included, is quarantined (reason
  `label_conflict`; evidence the members' record_id, source and label, the kept record as
  `representative`, and the method), and one review item is queued for the kept record. Its
  review hash covers what governance's covers (text, metadata, group, label, terms) and every
  member's (record_id, label): a cluster that gains a member or changes a label is reviewed
  again.
- `majority`: the most common label wins and the cluster is resolved as any duplicate
  cluster; the kept record takes that label (an `edited` event, `label_majority`, with the
  labels counted, the minority's record ids, from and to). A tie is reviewed as above.

The evidence lists at most LISTED members (and a majority's minority at most LISTED ids), in
record-id order, the kept record always among them: a larger cluster's evidence adds `members_total` and `labels` (every member's
label counted), so that each of its k events stays small instead of naming all k members (k²
names in all: 18 clusters of 2,000 spine records held 5 GB). Every member's own event names
the representative, so the ledger still tells each cluster's members.

A reviewer's decision on the item (matched on record_id, source content hash and review hash)
settles the cluster under either policy: approved with label L, the cluster is resolved as
any duplicate cluster and the kept record takes L (`edited`, `label_adjudicated`; an approval
without a label keeps the kept record's own); rejected, every member is dropped
(`review_rejected`). Governance's rejection check does not catch these records: the review
hash it computes does not cover the members.

Records published in the parent version: dedup never drops them, so a published member that is
not the kept one stays when its cluster is resolved, and takes the cluster's label too (with
its own `edited` event). Under review they are quarantined with the other members: publishing
them again with a label no one settled would carry the conflict into the next version. A
reviewer's rejection drops them: that is the reviewer's decision, not dedup's.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.schema import REVIEW_ITEM_SCHEMA, review_decisions
from pipeline.dedup.resolution import Resolution
from pipeline.review import review_items_of, with_review_hash
from pipeline.stage import RunContext, read_by_parts

REVIEW, MAJORITY = "review", "majority"
LISTED = 50  # members (or minority ids) an event's evidence names
_SHOWN = ["source_content_hash", "text", "metadata", "group", "label", "license", "consent"]
_ROWS = {"record_id": pl.String, "source": pl.String, "reason": pl.String, "evidence": pl.String}


@dataclass
class Settled:
    """`resolution` with the conflicts settled (quarantined and rejected members gone from
    it), the labels the resolved clusters' survivors take (`relabel`: record_id, _label), and
    what settling produced (the events: terminal for the members that leave the records)."""

    resolution: Resolution
    relabel: pl.DataFrame
    events: pl.DataFrame
    review_items: pl.DataFrame
    stats: dict[str, Any]


def settle(
    records: pl.LazyFrame,
    resolution: Resolution,
    members: pl.DataFrame,
    *,
    policy: str,
    stage: str,
    method: str,
    ctx: RunContext,
) -> Settled:
    """Find the clusters of `resolution` whose members carry different labels and settle
    each by a reviewer's decision, else by `policy` (see above). `records` is the stage's input,
    of which only the kept records of conflicting clusters are read."""
    rows = _conflicts(resolution.clusters, members, resolution.dropped)
    relabel = pl.DataFrame(schema={"record_id": pl.String, "_label": pl.String})
    if rows.height == 0:
        return Settled(resolution, relabel, ledger.empty(), _no_items(), _stats([]))
    representatives = rows["representative"].unique().implode()
    kept = read_by_parts(  # `records` may be every record: read, never held
        records,
        ctx.config.runner.part_rows,
        lambda part: part.filter(pl.col("record_id").is_in(representatives)).select(
            "record_id", "source", *_SHOWN
        ),
    )
    kept = kept.join(review_hashes(kept, rows), on="record_id")
    decided = _decisions(kept, ctx)
    clusters = [
        _outcome(cluster, decided.get(cluster["representative"]), policy, method)
        for cluster in _per_cluster(rows)
    ]
    removed = [m for c in clusters if c["outcome"] in ("queued", "rejected") for m in c["members"]]
    gone = pl.Series([m["record_id"] for m in removed], dtype=pl.String)
    relabel = pl.DataFrame(
        [
            (e["record_id"], c["label"])
            for c in clusters
            for e in c["edits"]
            if c["label"] is not None
        ],
        schema=relabel.schema,
        orient="row",
    )
    gone_i = members.filter(pl.col("record_id").is_in(gone.implode()))["_i"].implode()
    settled_resolution = replace(
        resolution,
        dropped=resolution.dropped.filter(~pl.col("_i").is_in(gone_i)),
        cluster_ids=resolution.cluster_ids.filter(~pl.col("_i").is_in(gone_i)),
    )
    return Settled(
        settled_resolution,
        relabel,
        _events(clusters, stage),
        _review_items(kept, clusters),
        _stats(clusters),
    )


def review_hashes(kept: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """(record_id, review_hash) of each kept record: the xxh3-128 of governance's review hash
    of the record (`kept`: text, metadata, group, label, license, consent) and the
    (record_id, label) of every member of its cluster (`members`: representative, record_id,
    label), so that a decision holds for exactly this cluster."""
    pairs = members.group_by("representative").agg(
        pl.concat_str(pl.col("record_id"), pl.col("label").fill_null(""), separator=":")
        .sort()
        .str.join("\x1e")
        .alias("_pairs")
    )
    hashed = with_review_hash(kept).join(pairs, left_on="record_id", right_on="representative")
    joined = hashed.select(pl.concat_str("review_hash", "_pairs", separator="\x1f")).to_series()
    return hashed.select("record_id").with_columns(xxh3_128_hex(joined).alias("review_hash"))


def _conflicts(
    clusters: pl.DataFrame, members: pl.DataFrame, dropped: pl.DataFrame
) -> pl.DataFrame:
    """Every member of every conflicting cluster: record_id, source, label, representative
    (the kept record's id) and `survives` (dedup keeps it), sorted by cluster and record."""
    labels = (
        clusters.join(members.select("_i", "label"), on="_i")
        .group_by("kept_i")
        .agg(pl.col("label").drop_nulls().n_unique())
    )
    conflicting = labels.filter(pl.col("label") >= 2).select("kept_i")
    return (
        clusters.join(conflicting, on="kept_i")
        .join(members.select("_i", "record_id", "source", "label"), on="_i")
        .join(
            members.select(
                pl.col("_i").alias("kept_i"), pl.col("record_id").alias("representative")
            ),
            on="kept_i",
        )
        .with_columns((~pl.col("_i").is_in(dropped["_i"].implode())).alias("survives"))
        .select("representative", "record_id", "source", "label", "survives")
        .sort("representative", "record_id")
    )


def _per_cluster(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """One dict per conflicting cluster: its representative and its members (dicts)."""
    grouped = rows.group_by("representative", maintain_order=True).agg(
        pl.struct("record_id", "source", "label", "survives").alias("members")
    )
    return list(grouped.iter_rows(named=True))


def _decisions(kept: pl.DataFrame, ctx: RunContext) -> dict[str, dict[str, Any]]:
    """The newest decision on each kept record's item for this exact cluster, by record_id."""
    decisions = review_decisions(ctx.review_decisions).filter(
        pl.col("reason") == reasons.LABEL_CONFLICT
    )
    key = ["record_id", "source_content_hash", "review_hash"]
    matched = (
        kept.select(*key)
        .join(decisions, on=key)
        .sort("item_id")
        .unique("record_id", keep="last", maintain_order=True)
    )
    return {row["record_id"]: row for row in matched.iter_rows(named=True)}


def _outcome(
    cluster: dict[str, Any], decision: dict[str, Any] | None, policy: str, method: str
) -> dict[str, Any]:
    """What happens to one cluster: outcome (adjudicated, rejected, majority or queued), the
    label its surviving members take, and the evidence of its events."""
    members = cluster["members"]
    representative = cluster["representative"]
    own = next(m["label"] for m in members if m["record_id"] == representative)
    counts = Counter(m["label"] for m in members if m["label"] is not None)
    ranked = counts.most_common()
    chosen = members[:LISTED]
    if LISTED and representative not in {m["record_id"] for m in chosen}:
        chosen = chosen[: LISTED - 1] + [m for m in members if m["record_id"] == representative]
    shown = [{k: m[k] for k in ("record_id", "source", "label")} for m in chosen]
    listed = {"members": shown, "representative": representative, "method": method}
    if len(members) > LISTED:
        listed |= {"members_total": len(members), "labels": _counted(members)}
    quarantine = _json(listed)
    outcome: dict[str, Any] = {
        "representative": representative,
        "members": members,
        "quarantine": quarantine,
        "label": None,
        "edits": [],
    }
    if decision is not None and decision["status"] == "rejected":
        verdict = {"item": decision["item_id"], "reviewer": decision["reviewer"]}
        return {**outcome, "outcome": "rejected", "verdict": _json(verdict)}
    if decision is not None:  # approved
        label = decision["label"] if decision["label"] is not None else own
        detail = {"item": decision["item_id"], "reviewer": decision["reviewer"]}
        reason = reasons.LABEL_ADJUDICATED
        kind = "adjudicated"
    elif policy == MAJORITY and ranked[0][1] > ranked[1][1]:
        label = ranked[0][0]
        minority = [m["record_id"] for m in members if m["label"] not in (None, label)]
        detail = {"labels": _counted(members), "minority": minority[:LISTED]}
        if len(minority) > LISTED:
            detail["minority_total"] = len(minority)
        reason = reasons.LABEL_MAJORITY
        kind = "majority"
    else:
        return {**outcome, "outcome": "queued"}
    edits = [
        {
            "record_id": m["record_id"],
            "source": m["source"],
            "reason": reason,
            "evidence": _json({**detail, "from": m["label"], "to": label}),
        }
        for m in members
        if m["survives"]
    ]
    return {**outcome, "outcome": kind, "label": label, "edits": edits}


def _counted(members: list[dict[str, Any]]) -> dict[str, int]:
    """Members per label (null labels left out), by label."""
    return dict(sorted(Counter(m["label"] for m in members if m["label"] is not None).items()))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _events(clusters: list[dict[str, Any]], stage: str) -> pl.DataFrame:
    def frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
        return pl.DataFrame(rows, schema=_ROWS)

    def member_rows(outcome: str, evidence: str) -> pl.DataFrame:
        return frame(
            [
                {
                    **{k: m[k] for k in ("record_id", "source")},
                    "reason": None,
                    "evidence": c[evidence],
                }
                for c in clusters
                if c["outcome"] == outcome
                for m in c["members"]
            ]
        )

    evidence = pl.col("evidence")
    return pl.concat(
        [
            ledger.empty(),
            ledger.events(
                frame([e for c in clusters for e in c["edits"]]),
                stage=stage, action=reasons.EDITED, reason=pl.col("reason"), evidence=evidence,
            ),
            ledger.events(
                member_rows("queued", "quarantine"),
                stage=stage, action=reasons.QUARANTINED, reason=reasons.LABEL_CONFLICT,
                evidence=evidence,
            ),
            ledger.events(
                member_rows("rejected", "verdict"),
                stage=stage, action=reasons.DROPPED, reason=reasons.REVIEW_REJECTED,
                evidence=evidence,
            ),
        ]
    )  # fmt: skip


def _review_items(kept: pl.DataFrame, clusters: list[dict[str, Any]]) -> pl.DataFrame:
    """One item per queued cluster, for its kept record, secrets masked; the evidence lists
    members' labels and sources (at most LISTED of them, see above)."""
    queued = pl.DataFrame(
        [(c["representative"], c["quarantine"]) for c in clusters if c["outcome"] == "queued"],
        schema={"record_id": pl.String, "evidence": pl.String},
        orient="row",
    )
    shown = kept.join(queued, on="record_id").sort("record_id")
    return review_items_of(shown, reasons.LABEL_CONFLICT)


def _no_items() -> pl.DataFrame:
    return pl.DataFrame(schema=REVIEW_ITEM_SCHEMA)


def labelled_by_source(frame: pl.LazyFrame) -> dict[str, int]:
    """Records with a label, per source: the denominator of the conflict rates (it adds up
    over parts)."""
    counted = (
        frame.filter(pl.col("label").is_not_null()).group_by("source").len().sort("source")
    ).collect()
    return dict(counted.iter_rows())


def _stats(clusters: list[dict[str, Any]]) -> dict[str, Any]:
    """Clusters by outcome; records (every member of a conflicting cluster); per source the
    labelled members (over labelled_by_source: a conflict rate)."""
    outcomes = Counter(c["outcome"] for c in clusters)
    members = [m for c in clusters for m in c["members"]]
    by_source = Counter(m["source"] for m in members if m["label"] is not None)
    return {
        "label_conflicts": {
            "clusters": len(clusters),
            "records": len(members),
            "queued": outcomes["queued"],
            "majority": outcomes["majority"],
            "adjudicated": outcomes["adjudicated"],
            "rejected": outcomes["rejected"],
            "by_source": dict(sorted(by_source.items())),
        },
    }
