"""What every dedup method shares: clusters from duplicate pairs (union-find), the keep rule,
ledger events that point each dropped record at the record it duplicates, and cluster ids.

A method (exact, MinHash, semantic) finds pairs of rows of a `members` frame (one row per
record it looked at, with the columns the keep rule needs) and hands them to `resolve`:

- duplicate pairs are joined into clusters; in each cluster one record is kept, chosen by
  the keep rule: a record published in the parent version first (published records are never
  dropped by dedup, so adding data cannot remove them), then `dedup.keep` in order, with
  `lowest_record_id` always last. Every other member is dropped, pointing at the kept one.
- related pairs (similar, below the drop threshold) between kept records of different groups
  only link records: with the duplicate pairs they make the components whose smallest
  `cluster_id` every member takes, so the split stage can keep related records together.

Exact and MinHash dedup pass `labels` (dedup.label_conflicts): a cluster whose members carry
different labels is settled by pipeline/dedup/label_conflicts.py before the drops.

What a resolution does to the records is one table (`decide`: a row per record dropped,
renamed or relabelled), which `apply_decisions` applies to all records or to one part: exact
and MinHash dedup, run by key, decide once and apply part by part; semantic dedup calls
`apply`, both at once. A dropped record's row is compact (the kept record, the similarity,
the cluster, whether the kept one is published): its ledger event is written by the part
that holds it, so the one process that decides never holds millions of events.

Chains are followed: when A~B and B~C, C may be dropped for A although A and C are less
similar; the evidence records the similarity of the dropped record to the kept one itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
import polars_hash  # noqa: F401  (registers the .nchash namespace)

from pipeline.config import DedupConfig
from pipeline.core import ledger, reasons
from pipeline.core.clusters import components, with_cluster_ids
from pipeline.core.identity import hex_ids
from pipeline.core.licenses import RANK, license_class
from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.dedup import label_conflicts
from pipeline.dedup.resolution import Resolution
from pipeline.stage import Decided, RunContext, StageResult

KEEP_KEYS = {  # rule -> (column, descending)
    "earliest_timestamp": ("timestamp", False),
    "most_permissive_license": ("_license_rank", False),
    "longest_text": ("_text_length", True),
    "lowest_record_id": ("_i", False),  # `numbered` numbers records in record-id order
}
_EMPTY_PAIRS = {"left": pl.UInt32, "right": pl.UInt32, "similarity": pl.Float64}
# one row per record a resolution touches: a dropped duplicate's kept record, similarity and
# whether the kept one is published; another decision's ledger event (a label conflict's,
# null action: none); the new cluster id (a dropped record's: its evidence's) and the new label
# (null: unchanged)
DECISION_SCHEMA = LEDGER_SCHEMA | pl.Schema(
    {
        "_duplicate_of": pl.String,
        "_similarity": pl.Float64,
        "_kept_published": pl.Boolean,
        "_cluster_id": pl.String,
        "_label": pl.String,
    }
)


@dataclass(frozen=True)
class Drops:
    """How a method's duplicates are dropped in the ledger: by which stage, for which reason,
    with which method named in the evidence."""

    stage: str
    reason: str
    method: str


def member_columns(
    frame: pl.LazyFrame, ctx: RunContext, extra: tuple[str | pl.Expr, ...] = ()
) -> pl.LazyFrame:
    """What `numbered` needs of each record of `frame` (and `extra`): a part's share of it
    can be gathered on its own. Numbers where a string is only compared or ranked (a decision
    holds millions of members): the group's hash, the license's rank under its source's
    policy. A record that is its own cluster has a null `cluster_id` (most are: a copy of
    every record id would double what a decision holds)."""
    return with_cluster_ids(frame).select(
        *extra,
        "record_id",
        "source",
        pl.col("group").nchash.xxh3_64().alias("_group"),
        "timestamp",
        pl.struct("source", "license")
        .map_batches(lambda pairs: _license_ranks(pairs, ctx), return_dtype=pl.UInt8)
        .alias("_license_rank"),
        "label",
        pl.when(pl.col("cluster_id") != pl.col("record_id")).then("cluster_id").alias("cluster_id"),
        pl.col("text").str.len_chars().alias("_text_length"),
    )


def doc_ids(record_ids: pl.Series) -> pl.Series:
    """The document number of each record id: the uint64 of its first 16 hex digits, so that
    documents sort as their record ids do (ingest's ids are 32-digit hex digests; `hex_ids`)."""
    return (
        hex_ids(record_ids).str.slice(0, 16).str.to_integer(base=16, dtype=pl.UInt64).alias("doc")
    )


def doc_of_record() -> pl.Expr:
    """`doc_ids` of a lazy frame's record ids."""
    return pl.col("record_id").map_batches(doc_ids, pl.UInt64, is_elementwise=True).alias("doc")


def _license_ranks(pairs: pl.Series, ctx: RunContext) -> pl.Series:
    """The rank of each (source, license)'s license class (0 = permissive), with the license
    table of that source's policy."""
    rows = pairs.struct.unnest()
    distinct = rows.unique()
    ranks = [
        RANK[license_class(license, ctx.config.policy.for_source(source).licenses.classes)]
        for source, license in distinct.iter_rows()
    ]
    table = distinct.with_columns(pl.Series("_rank", ranks, dtype=pl.UInt8))
    on = ["source", "license"]
    return rows.join(table, on=on, how="left", nulls_equal=True, maintain_order="left")["_rank"]


def numbered(members: pl.DataFrame, ctx: RunContext) -> pl.DataFrame:
    """`members` (member_columns) with `_i` and `_published` (whether the parent version holds
    it). Rows are sorted by record_id and `_i` numbers them in that order, so that every
    decision a method makes from `_i` is the same whatever order the records arrive in."""
    if ctx.parent_splits is not None:  # only the members' rows of the parent are read
        mine = pl.col("record_id").is_in(members["record_id"].implode())
        published = ctx.parent_splits.filter(mine).select("record_id").collect(engine="streaming")
        members = members.with_columns(
            pl.col("record_id").is_in(published["record_id"].implode()).alias("_published")
        )
    else:
        members = members.with_columns(pl.lit(False).alias("_published"))
    return members.sort("record_id").with_row_index("_i")


def pairs_frame(left, right, similarity) -> pl.DataFrame:
    return pl.DataFrame(
        {"left": left, "right": right, "similarity": similarity}, schema=_EMPTY_PAIRS
    )


def resolve(
    members: pl.DataFrame, duplicates: pl.DataFrame, related: pl.DataFrame, rules: list[str]
) -> Resolution:
    """Clusters from duplicate pairs, the record each keeps, and new cluster ids (see above).
    `duplicates` and `related` hold pairs of `_i` (columns left and right). Only integer
    columns are sorted and joined until the few string columns the outcome names."""
    if not duplicates.height:
        clustered = pl.DataFrame(schema={"_i": pl.UInt32, "_cluster": pl.UInt32})
    else:
        nodes, roots = components(duplicates["left"].to_numpy(), duplicates["right"].to_numpy())
        clustered = pl.DataFrame(
            {"_i": nodes, "_cluster": roots}, schema={"_i": pl.UInt32, "_cluster": pl.UInt32}
        )
    order = _keep_order(rules)
    clusters = (
        members.select(*order["by"])
        .join(clustered, on="_i")
        .sort(**order, nulls_last=True)
        .select("_i", pl.col("_i").first().over("_cluster").alias("kept_i"))
    )
    published = members.select("_i", "_published")
    dropped = (  # record ids are looked up once, by `decide`: millions of strings held less
        clusters.filter(pl.col("_i") != pl.col("kept_i"))
        .join(published.filter(~pl.col("_published")).drop("_published"), on="_i")
        .join(
            published.select(
                pl.col("_i").alias("kept_i"), pl.col("_published").alias("kept_published")
            ),
            on="kept_i",
        )
        .sort("_i")
    )
    gone = dropped["_i"].implode()
    if related.height:  # kept records of different groups that are related: linked too
        group_of = members.select("_i", "_group")
        linking = related.join(group_of, left_on="left", right_on="_i").join(
            group_of, left_on="right", right_on="_i", suffix="_right"
        )
        linking = linking.filter(
            ~pl.col("left").is_in(gone)
            & ~pl.col("right").is_in(gone)
            & (
                pl.col("_group").is_null()
                | (pl.col("_group") != pl.col("_group_right")).fill_null(True)
            )
        )
        edges = pl.concat([duplicates.select("left", "right"), linking.select("left", "right")])
        nodes, roots = components(edges["left"].to_numpy(), edges["right"].to_numpy())
        clustered = pl.DataFrame(
            {"_i": nodes, "_cluster": roots}, schema={"_i": pl.UInt32, "_cluster": pl.UInt32}
        )
    names = (  # one row per component: its members' smallest cluster id
        members.select("_i", pl.coalesce("cluster_id", "record_id").alias("cluster_id"))
        .join(clustered, on="_i")
        .group_by("_cluster")
        .agg(pl.col("cluster_id").min())
    )
    dropped = dropped.join(clustered, on="_i", how="left", maintain_order="left")
    cluster_ids = (
        clustered.filter(~pl.col("_i").is_in(gone))
        .join(names, on="_cluster")
        .select("_i", "cluster_id")
    )
    return Resolution(dropped, cluster_ids, clusters, names)


def decide_components(
    members: pl.DataFrame,
    records: pl.LazyFrame,
    *,
    drops: Drops,
    cfg: DedupConfig,
    ctx: RunContext,
    similarity: float | None,
) -> Decided:
    """A method's decisions for whole components (pipeline/stage.py's Components):
    `members` (member_columns with `node`, `_component` and `_part`) holds every member of
    each. One record of each is kept and the others dropped, each pointing at it with
    `similarity`; when that is None, the part holding each dropped record measures it, and
    `requests` ask the kept record's part for what it needs (`doc`, `_for_part`)."""
    if members["node"].is_duplicated().any():
        shared = members.filter(pl.col("node").is_duplicated())["record_id"].head(2).to_list()
        raise ValueError(
            f"record ids {shared} share their first 64 bits: {drops.method} dedup cannot tell "
            "them apart"
        )
    members = numbered(members, ctx)
    centre = members.select(pl.col("node").alias("_component"), pl.col("_i").alias("right"))
    pairs = members.join(centre, on="_component").select(pl.col("_i").alias("left"), "right")
    pairs = pairs.filter(pl.col("left") != pl.col("right"))
    resolution = resolve(members, pairs, pairs.clear(), cfg.keep)
    decided = decide(
        members.drop("node", "_component", "_part"),
        resolution,
        records,
        drops=drops,
        similarity=lambda asked: pl.Series([similarity] * asked.height, dtype=pl.Float64),
        ctx=ctx,
        stats={},
        labels=cfg.label_conflicts,
    )
    where = members.select("record_id", "node", pl.col("_part").alias("_to_part"))
    decided.decisions = decided.decisions.join(where.drop("node"), on="record_id", how="left")
    if similarity is None:
        kept = where.rename({"record_id": "_duplicate_of", "node": "doc", "_to_part": "_kept"})
        decided.requests = (
            decided.decisions.filter(pl.col("_duplicate_of").is_not_null())
            .join(kept, on="_duplicate_of")
            .select("doc", pl.col("_to_part").alias("_for_part"), pl.col("_kept").alias("_to_part"))
            .unique()
        )
    return decided


def _keep_order(rules: list[str]) -> dict:
    """Sort arguments that put the record to keep first: published, then the rules."""
    rules = [*dict.fromkeys([*rules, "lowest_record_id"])]
    columns = ["_published", *(KEEP_KEYS[rule][0] for rule in rules)]
    descending = [True, *(KEEP_KEYS[rule][1] for rule in rules)]
    return {"by": columns, "descending": descending}


def apply(
    frame: pl.LazyFrame, resolution: Resolution, members: pl.DataFrame, **settings: Any
) -> StageResult:
    """`decide` (with these keyword `settings`) and `apply_decisions` on every record of
    `frame` at once."""
    decided = decide(members, resolution, frame, **settings)
    kept, events = apply_decisions(frame, decided.decisions, settings["drops"], settings["ctx"])
    if settings.get("labels") is not None:
        decided.stats["labelled_by_source"] = label_conflicts.labelled_by_source(frame)
    return StageResult(
        frame=kept, events=events, stats=decided.stats, review_items=decided.review_items
    )


def decide(
    members: pl.DataFrame,
    resolution: Resolution,
    records: pl.LazyFrame,
    *,
    drops: Drops,
    similarity: Callable[[pl.DataFrame], pl.Series],
    ctx: RunContext,
    stats: dict,
    labels: str | None = None,
) -> Decided:
    """What happens to each record a resolution touches, as one table (DECISION_SCHEMA): the
    duplicates are dropped (`apply_decisions` writes their events), kept records take their new
    cluster ids. `similarity(pairs)` measures each (_i, kept_i). With `labels`
    (dedup.label_conflicts), clusters whose members carry different labels are settled first
    (pipeline/dedup/label_conflicts.py), reading the kept records of those clusters from
    `records`."""
    settled = None
    if labels is not None:
        settled = label_conflicts.settle(
            records,
            resolution,
            members,
            policy=labels,
            stage=drops.stage,
            method=drops.method,
            ctx=ctx,
        )
        resolution = settled.resolution
    dropped = resolution.dropped
    if dropped.height:
        measured = similarity(dropped.select("_i", "kept_i")).round(4)
    else:
        measured = pl.Series([], dtype=pl.Float64)
    ids = members.select("_i", "record_id")
    dropped = dropped.with_columns(measured.cast(pl.Float64).alias("_similarity"))
    dropped = dropped.join(ids, on="_i", how="left", maintain_order="left").join(
        ids.rename({"_i": "kept_i", "record_id": "_duplicate_of"}),
        on="kept_i",
        how="left",
        maintain_order="left",
    )
    dropped = dropped.join(resolution.names, on="_cluster", how="left", maintain_order="left")
    dropped = dropped.select(
        "record_id",
        "_duplicate_of",
        "_similarity",
        pl.col("kept_published").alias("_kept_published"),
        pl.col("cluster_id").alias("_cluster_id"),
    )
    renamed = resolution.cluster_ids.join(members.select("_i", "record_id"), on="_i").select(
        "record_id", pl.col("cluster_id").alias("_cluster_id")
    )
    others = renamed.lazy()
    if settled is not None:  # no dropped record is renamed, relabelled or settled
        others = others.join(settled.events.lazy(), on="record_id", how="full", coalesce=True)
        others = others.join(settled.relabel.lazy(), on="record_id", how="full", coalesce=True)
    decisions = (
        pl.concat(
            [pl.LazyFrame(schema=DECISION_SCHEMA), dropped.lazy(), others], how="diagonal_relaxed"
        )
        .select(DECISION_SCHEMA.names())
        .cast(DECISION_SCHEMA)
        .collect()  # in record-id order within each kind: each part sorts its own rows
    )
    stats = {**stats, "dropped": dropped.height, "clustered": renamed.height}
    if settled is None:
        return Decided(decisions, stats)
    return Decided(decisions, stats | settled.stats, settled.review_items)


def apply_decisions(
    frame: pl.LazyFrame, decisions: pl.DataFrame | pl.LazyFrame, drops: Drops, ctx: RunContext
) -> tuple[pl.LazyFrame, pl.DataFrame]:
    """`frame` (all records, or one part) by `decide`'s table: its records that go on, with
    their new cluster ids and labels, and the events of its records (only their rows of the
    table are read): the ledger event of each dropped duplicate is written here."""
    frame = with_cluster_ids(frame)
    mine = (
        decisions.lazy()
        .join(frame.select("record_id", pl.col("source").alias("_source")), on="record_id")
        .collect(engine="streaming")  # the decisions file is read, never held
        .sort("record_id")
    )
    dropped = mine.filter(pl.col("_duplicate_of").is_not_null())
    evidence = pl.struct(
        pl.col("_duplicate_of").alias("duplicate_of"),
        pl.lit(drops.method).alias("method"),
        pl.col("_similarity").alias("similarity"),
        pl.col("_cluster_id").alias("cluster_id"),
        pl.when(pl.col("_kept_published")).then(pl.lit(ctx.parent_version)).alias("published_in"),
    )
    events = pl.concat(
        [
            ledger.events(
                dropped.with_columns(pl.col("_source").alias("source")),
                stage=drops.stage,
                action=reasons.DROPPED,
                reason=drops.reason,
                evidence=evidence,
            ),
            mine.filter(pl.col("action").is_not_null()).select(LEDGER_SCHEMA.names()),
        ]
    ).sort("record_id", maintain_order=True)
    gone = events.filter(pl.col("terminal"))["record_id"].implode()
    kept = (
        frame.filter(~pl.col("record_id").is_in(gone))
        .join(
            mine.lazy().select("record_id", "_cluster_id", "_label"),
            on="record_id",
            how="left",
            maintain_order="left",
        )
        .with_columns(
            pl.coalesce("_cluster_id", "cluster_id").alias("cluster_id"),
            pl.coalesce("_label", "label").alias("label"),
        )
        .drop("_cluster_id", "_label")
    )
    return kept, events


def summary_lines(method: str, always: bool = False) -> Callable[[dict[str, Any]], list[str]]:
    """How a dedup method's stats read in `thresher run`: what it dropped, and the related
    pairs it linked; nothing (unless `always`) for a method that did not run."""

    def lines(stats: dict[str, Any]) -> list[str]:
        if not always and "records" not in stats:  # turned off: it ran on nothing
            return []
        related = stats.get("related_pairs")
        linked = f" ({related} related pairs linked)" if related else ""
        return [f"{method}: dropped {stats['dropped']}{linked}"]

    return lines
