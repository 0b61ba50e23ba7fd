"""The figures of a dataset audit report, computed from a run's ledger and a version's records.

Everything here is counts, ids, hashes and times; the only text is a few short examples of
published records, with any secret masked. The ledger is the source of truth: the report's
outcome counts are the ledger's terminal events, so they always balance.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import SPLITS
from pipeline.core import ledger as ledger_events
from pipeline.core import reasons, spill
from pipeline.text.secrets import find_secrets, mask_secrets

# the stages in the order a record meets them (publish last)
DEDUP_STAGES = ("exact_dedup", "near_dedup", "semantic_dedup")
DUPLICATE_REASONS = (reasons.EXACT_DUPLICATE, reasons.NEAR_DUPLICATE, reasons.SEMANTIC_DUPLICATE)
EXAMPLE_CHARS = 160


def outcomes(ledger: pl.LazyFrame, records_in: int | None = None) -> dict[str, int]:
    """Records in, those the run generated (augmentation), and how many ended published,
    dropped and quarantined. A run that stopped early gives its `records_in`: the records it
    had not decided yet are `unfinished`."""
    counted = dict(ledger.group_by("action").len().collect().iter_rows())
    found = {action: counted.get(action, 0) for action in reasons.TERMINAL_ACTIONS}
    generated = counted.get(reasons.GENERATED, 0)
    decided = sum(found.values())
    if records_in is None:
        return {"records_in": decided - generated, "generated": generated, **found}
    unfinished = records_in + generated - decided
    return {"records_in": records_in, "generated": generated, **found, "unfinished": unfinished}


def funnel(ledger: pl.LazyFrame, records_in: int | None = None) -> list[dict[str, Any]]:
    """Records still in the run after each stage (a stage's drops and quarantines leave),
    up to the last stage that wrote events."""
    left = ledger.filter(pl.col("terminal"), pl.col("action") != reasons.PUBLISHED)
    by_stage = dict(left.group_by("stage").len().collect().iter_rows())
    made = ledger.filter(pl.col("action") == reasons.GENERATED)
    added_by_stage = dict(made.group_by("stage").len().collect().iter_rows())
    reached = set(ledger.select(pl.col("stage").unique()).collect()["stage"])
    from pipeline.registry import CURATE_STAGES  # its stages' modules: only when a report is made

    order = [stage.name for stage in CURATE_STAGES]
    last = max((order.index(s) for s in reached if s in order), default=-1)
    stages = order[:-1] if records_in is None else order[: last + 1]
    remaining = outcomes(ledger)["records_in"] if records_in is None else records_in
    rows = [{"stage": "records in", "records": remaining, "removed": 0, "added": 0}]
    for stage in stages:
        if stage == "publish":
            break
        removed, added = by_stage.get(stage, 0), added_by_stage.get(stage, 0)
        remaining += added - removed
        rows.append({"stage": stage, "records": remaining, "removed": removed, "added": added})
    return rows


def by_reason(ledger: pl.LazyFrame) -> dict[str, dict[str, int]]:
    """{dropped|quarantined: {reason: records}} and the edits {action: {reason: events}}."""
    terminal = ledger_events.counts_by_reason(ledger, terminal=True)
    terminal.pop(reasons.PUBLISHED, None)
    return {**terminal, "edits": ledger_events.counts_by_reason(ledger, terminal=False)}


def blocked_types(ledger: pl.LazyFrame) -> dict[str, dict[str, int]]:
    """Records per secret type found (whatever decided the record: its secret, or its license
    first), and per personal-data type redacted or held: counts only, from the evidence's
    types (never a value)."""
    governed = ledger.filter(pl.col("stage") == "govern")
    secrets = governed.filter(pl.col("terminal")).select(secret_types().alias("type"))
    personal = governed.filter(
        pl.col("reason").is_in([reasons.PERSONAL_DATA, reasons.PERSONAL_DATA_REDACTED])
    ).select(finding_types().alias("type"))
    found = {}
    for kind, events in (("secrets", secrets), ("personal_data", personal)):
        types = (
            events.explode("type")
            .drop_nulls()
            .group_by("type")
            .len()
            .sort("len", "type", descending=[True, False])
            .collect()
        )
        found[kind] = dict(types.iter_rows())
    return found


def secret_types() -> pl.Expr:
    """The secret types found in the record of a terminal governance event: its evidence's
    `secrets` (ledgers written before it held them: the types of a `secret_detected` event)."""
    found = pl.col("evidence").str.json_path_match("$.secrets").str.json_decode(pl.List(pl.String))
    decided_by_secret = pl.when(pl.col("reason") == reasons.SECRET_DETECTED).then(finding_types())
    return pl.coalesce(found, decided_by_secret)


def finding_types() -> pl.Expr:
    """The finding types of a governance event's evidence: an edit holds them at `types`, a
    terminal event under `detail` (beside the flags that decided it)."""
    evidence = pl.col("evidence")
    return pl.coalesce(
        evidence.str.json_path_match("$.detail.types"), evidence.str.json_path_match("$.types")
    ).str.json_decode(pl.List(pl.String))


_DEDUP_EVIDENCE = pl.Struct(
    {"duplicate_of": pl.String, "method": pl.String, "similarity": pl.Float64,
     "cluster_id": pl.String}
)  # fmt: skip


WITHHELD = "(withheld: a deletion request names this record)"


CLUSTER_PART_ROWS = 1_000_000  # records the duplicate clusters' figures hold at once


def dedup_clusters(
    ledger: pl.LazyFrame,
    published: pl.LazyFrame,
    examples: int = 3,
    withheld: pl.Expr | None = None,
) -> dict[str, Any]:
    """Duplicate clusters: every record (published or dropped as a duplicate) with a cluster
    id shared by another; their sizes, drops per method and a few examples (secrets masked;
    the text of a record that `withheld` matches, one under a deletion request, not shown).
    The drops and published records go through hash partitions in a scratch folder of at
    most CLUSTER_PART_ROWS records each (10M records held 2.3 GB in one piece)."""
    dropped = ledger.filter(
        pl.col("stage").is_in(DEDUP_STAGES),
        pl.col("terminal"),
        pl.col("reason").is_in(DUPLICATE_REASONS),
    ).select("record_id", "evidence")
    counted = pl.concat([dropped.select(pl.len()), published.select(pl.len())])
    records = int(counted.collect(engine="streaming")["len"].sum())
    parts = spill.partitions_for(records, CLUSTER_PART_ROWS)
    with tempfile.TemporaryDirectory(prefix="thresher-clusters-") as scratch:
        folder = Path(scratch)
        drops = _published_cluster(dropped, published, folder, parts)
        kept = spill.by_hash(
            published.select("cluster_id", "record_id"), "cluster_id", parts, folder / "published"
        )
        sizes, histogram, largest = [], Counter(), []
        for part in range(parts):
            members = pl.concat([kept(part), drops(part).select("cluster_id", "record_id")])
            found = members.group_by("cluster_id").len("size").filter(pl.col("size") > 1)
            found = found.collect(engine="streaming")
            sizes.append((found.height, int(found["size"].sum() or 0)))
            histogram.update(dict(found.group_by("size").len().iter_rows()))
            largest.append(
                found.sort("size", "cluster_id", descending=[True, False]).head(examples)
            )
        top = pl.concat(largest).sort("size", "cluster_id", descending=[True, False]).head(examples)
        chosen = top["cluster_id"].to_list()
        duplicates = pl.concat(
            [
                drops(part).filter(pl.col("cluster_id").is_in(chosen)).collect()
                for part in range(parts)
            ]
        )
        by_method = pl.concat([drops(part).select("method") for part in range(parts)])
        dropped_by_method = dict(
            by_method.group_by("method").len().sort("method").collect().iter_rows()
        )
    texts = (
        published.filter(pl.col("cluster_id").is_in(chosen))
        .select(
            "record_id",
            "cluster_id",
            pl.when(withheld if withheld is not None else pl.lit(False))
            .then(pl.lit(WITHHELD))
            .otherwise(pl.col("text"))
            .alias("text"),
        )
        .collect()
    )
    excerpts = dict(
        zip(texts["record_id"], redacted_excerpts(texts["text"].to_list()), strict=True)
    )  # a withheld record's text is the WITHHELD line, which no secret rule matches
    shown = []
    for cluster_id, size in top.iter_rows():
        kept_ids = texts.filter(pl.col("cluster_id") == cluster_id)["record_id"].sort()
        shown.append(
            {
                "cluster_id": cluster_id,
                "size": size,
                "published": [
                    {"record_id": rid, "text": excerpts[rid]} for rid in kept_ids.head(2).to_list()
                ],
                "dropped": duplicates.filter(pl.col("cluster_id") == cluster_id)
                .sort("record_id")
                .select("record_id", "duplicate_of", "method", "similarity")
                .head(5)
                .to_dicts(),
            }
        )
    return {
        "clusters": sum(count for count, _ in sizes),
        "records_in_clusters": sum(members for _, members in sizes),
        "dropped_by_method": dropped_by_method,
        "size_histogram": dict(sorted(histogram.items())),
        "examples": shown,
    }


def _published_cluster(
    dropped: pl.LazyFrame, published: pl.LazyFrame, folder: Path, parts: int
) -> Callable[[int], pl.LazyFrame]:
    """The dropped duplicates by the hash partition of their cluster as published: a later
    stage may have merged the cluster a record was dropped from, so follow `duplicate_of` to
    the record that was kept; each join holds one partition of both sides."""
    # decoded a partition at a time: decoding while partitioning held twice the memory
    raw = spill.by_hash(dropped, "record_id", parts, folder / "evidence")
    (folder / "dropped").mkdir()
    for part in range(parts):
        decoded = (
            raw(part)
            .select("record_id", pl.col("evidence").str.json_decode(_DEDUP_EVIDENCE))
            .unnest("evidence")
        )
        decoded.sink_parquet(folder / "dropped" / f"{part}.parquet")  # the same partition

    def by_id(part: int) -> pl.LazyFrame:
        return pl.scan_parquet(folder / "dropped" / f"{part}.parquet")

    links = spill.by_hash(
        [by_id(part).select("record_id", kept=pl.col("duplicate_of")) for part in range(parts)],
        "kept", parts, folder / "links-0",
    )  # fmt: skip
    for step in range(1, len(DEDUP_STAGES) + 2):  # each stage adds at most one link to a chain
        followed = [
            links(part)
            .join(by_id(part).select(kept="record_id", next="duplicate_of"), on="kept", how="left")
            .select("record_id", pl.coalesce("next", "kept").alias("kept"), moved="next")
            for part in range(parts)
        ]
        links = spill.by_hash(followed, "kept", parts, folder / f"links-{step}")
        moved = pl.concat(
            links(part).select(pl.col("moved").is_not_null().any()) for part in range(parts)
        )
        if not moved.collect()["moved"].any():
            break
    kept = spill.by_hash(
        published.select("record_id", "cluster_id"), "record_id", parts, folder / "kept"
    )
    final = [
        links(part)
        .join(kept(part).rename({"record_id": "kept", "cluster_id": "final"}), on="kept")
        .select("record_id", "final")
        for part in range(parts)
    ]
    finals = spill.by_hash(final, "record_id", parts, folder / "final")
    placed = [
        by_id(part)
        .join(finals(part), on="record_id", how="left")
        # a kept record not published (dropped later for another reason): its cluster as logged
        .with_columns(pl.coalesce("final", "cluster_id").alias("cluster_id"))
        .drop("final")
        for part in range(parts)
    ]
    return spill.by_hash(placed, "cluster_id", parts, folder / "placed")


def redacted_excerpt(text: str | None) -> str:
    """The start of a published text with any secret masked, as a report may show it."""
    return redacted_excerpts([text])[0]


def redacted_excerpts(texts: list[str | None]) -> list[str]:
    """`redacted_excerpt` of each text, in one scan (a scan has a fixed cost of ~20 ms)."""
    texts = [text or "" for text in texts]
    found: dict[int, list[dict]] = {}
    if texts:  # all of each: a long secret may start early
        for finding in find_secrets(pl.Series(texts, dtype=pl.String)).to_dicts():
            found.setdefault(finding["index"], []).append(finding)
    excerpts = []
    for index, text in enumerate(texts):
        masked = mask_secrets(text, found[index]) if index in found else text
        excerpts.append(masked[:EXAMPLE_CHARS] + ("…" if len(masked) > EXAMPLE_CHARS else ""))
    return excerpts


def split_figures(splits: dict[str, pl.LazyFrame]) -> dict[str, dict[str, Any]]:
    """Records, groups, sources, labels and time range per split."""
    figures = {}
    for name in SPLITS:
        frame = splits.get(name)
        if frame is None:
            figures[name] = {
                "records": 0, "groups": 0, "first": None, "last": None, "labels": {},
                "synthetic": 0, "synthetic_share": 0.0, "augmented": 0,
            }  # fmt: skip
            continue
        present = frame.collect_schema().names()
        row = (
            frame.select(
                pl.len().alias("records"),
                pl.col("timestamp").min().alias("first"),
                pl.col("timestamp").max().alias("last"),
                # versions published before these columns existed hold neither
                (
                    pl.col("synthetic").fill_null(False).sum()
                    if "synthetic" in present
                    else pl.lit(0)
                )
                .cast(pl.Int64)
                .alias("synthetic"),
                (
                    pl.col("augmented_from").is_not_null().sum()
                    if "augmented_from" in present
                    else pl.lit(0)
                )
                .cast(pl.Int64)
                .alias("augmented"),
            )
            .collect(engine="streaming")
            .row(0, named=True)
        )
        # a record without a group is its own
        row["groups"] = spill.count_distinct(frame.select(pl.coalesce("group", "record_id")))
        labels = frame.group_by("label").len().sort("label", nulls_last=True).collect()
        figures[name] = {
            "records": row["records"],
            "groups": row["groups"],
            "first": row["first"].isoformat() if row["first"] else None,
            "last": row["last"].isoformat() if row["last"] else None,
            "labels": {str(label): n for label, n in labels.iter_rows()},
            "synthetic": row["synthetic"],
            "synthetic_share": round(row["synthetic"] / row["records"], 4)
            if row["records"]
            else 0.0,
            "augmented": row["augmented"],
        }
    return figures


_CONTAMINATION_EVIDENCE = pl.Struct(
    {"eval_set": pl.String, "item": pl.String, "methods": pl.List(pl.String)}
)


def contamination(ledger: pl.LazyFrame, protected: list[dict[str, Any]]) -> dict[str, Any]:
    """Per protected evaluation set (and held-out split): its items, the training records
    that repeated one (dropped or held, by method) and how many distinct items they repeated."""
    events = (
        ledger.filter(pl.col("stage") == "contamination", pl.col("terminal"))
        .select(
            "record_id",
            "action",
            pl.col("evidence").str.json_decode(_CONTAMINATION_EVIDENCE).alias("e"),
        )
        .unnest("e")
        .collect()
    )
    items = {entry["name"]: entry["items"] for entry in protected}
    # the run's own validation and test splits are checked too, under their split names
    names = [*items, *sorted(set(events["eval_set"].drop_nulls()) - set(items))]
    found = {}
    for name in names:
        hits = events.filter(pl.col("eval_set") == name)
        found[name] = {
            "items": items.get(name),
            "records": hits.height,
            "contaminated_items": hits["item"].n_unique(),
            "by_action": dict(hits.group_by("action").len().sort("action").iter_rows()),
            "by_method": dict(
                hits.explode("methods").group_by("methods").len().sort("methods").iter_rows()
            ),
        }
    return found


def terminal_counts(ledger: pl.LazyFrame) -> pl.DataFrame:
    """Records per source, terminal action and reason (`len`): what `source_table` and
    `drops_by_source` read, in one pass over the ledger."""
    return ledger.filter(pl.col("terminal")).group_by("source", "action", "reason").len().collect()


def source_table(counted: pl.DataFrame, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each declared source with its terms and where its records ended (`counted`:
    `terminal_counts`)."""
    rows = []
    for source in sources:
        ends = dict(
            counted.filter(pl.col("source") == source["name"])
            .group_by("action")
            .agg(pl.col("len").sum())
            .iter_rows()
        )
        ended = {action: ends.get(action, 0) for action in reasons.TERMINAL_ACTIONS}
        rows.append({**source, "records_in": sum(ended.values()), **ended})
    return rows


def version_diff(parent: pl.LazyFrame | None, current: pl.LazyFrame) -> dict[str, Any]:
    """Records added, removed and moved between two versions' memberships (record_id, split);
    moved ones changed split, which a stable dataset never does."""
    if parent is None:
        return {"parent": None}
    joined = (
        parent.rename({"split": "before"})
        .join(current.rename({"split": "after"}), on="record_id", how="full", coalesce=True)
        .collect()
    )
    added = joined.filter(pl.col("before").is_null())
    removed = joined.filter(pl.col("after").is_null())
    moved = joined.filter(pl.col("before").is_not_null(), pl.col("after").is_not_null(),
                          pl.col("before") != pl.col("after"))  # fmt: skip
    kept = joined.height - added.height - removed.height - moved.height
    return {
        "added": added.height,
        "removed": removed.height,
        "moved": moved.height,
        "unchanged": kept,
        "added_by_split": dict(added.group_by("after").len().sort("after").iter_rows()),
        "removed_by_split": dict(removed.group_by("before").len().sort("before").iter_rows()),
        "moves": dict(
            moved.group_by(pl.format("{} -> {}", "before", "after").alias("move"))
            .len()
            .sort("move")
            .iter_rows()
        ),
        "examples": {
            "added": added.sort("record_id")["record_id"].head(5).to_list(),
            "removed": removed.sort("record_id")["record_id"].head(5).to_list(),
            "moved": moved.sort("record_id")["record_id"].head(5).to_list(),
        },
    }


def drops_by_source(counted: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per source, its dropped and quarantined records by `reason (action)` (`counted`:
    `terminal_counts`), the most first."""
    drops = (
        counted.filter(pl.col("action").is_in(["dropped", "quarantined"]))
        .select("source", "reason", "action", "len")
        .sort("source", "len", "reason", descending=[False, True, False])
    )
    found: dict[str, dict[str, int]] = {}
    for source, reason, action, count in drops.iter_rows():
        found.setdefault(source, {})[f"{reason} ({action})"] = count
    return found


_HIT_EVIDENCE = pl.Struct(
    {
        "eval_set": pl.String,
        "item": pl.String,
        "method": pl.String,
        "score": pl.Float64,
        "span": pl.String,
    }
)


def contamination_hits(
    ledger: pl.LazyFrame, limit: int = 50, withheld: pl.Expr | None = None
) -> list[dict[str, Any]]:
    """The training records that repeated an evaluation item: the set, the item's id, the
    record's id, the method, the similarity and the matched span (secrets masked), at most
    `limit`, by set then item; none of the records `withheld` matches (deletion requests)."""
    hits = (
        ledger.filter(pl.col("stage") == "contamination", pl.col("terminal"))
        .filter(~withheld if withheld is not None else pl.lit(True))
        .select("record_id", "action", pl.col("evidence").str.json_decode(_HIT_EVIDENCE).alias("e"))
        .unnest("e")
        .sort("eval_set", "item", "record_id")
        .head(limit)
        .collect()
    )
    rows = hits.to_dicts()
    spans = redacted_excerpts([row["span"] for row in rows])
    return [
        {**row, "span": span if row["span"] else None}
        for row, span in zip(rows, spans, strict=True)
    ]


LENGTH_EDGES = [0, *(2**power for power in range(21))]  # 0, 1, 2, 4, …, 1,048,576


def length_histogram(lengths: pl.Series) -> list[int]:
    """Counts per bin [edge, next edge) of LENGTH_EDGES (the last bin open-ended)."""
    bins = np.searchsorted(LENGTH_EDGES, lengths.to_numpy(), side="right") - 1
    return np.bincount(bins, minlength=len(LENGTH_EDGES)).tolist()


def reason_examples(
    ledger: pl.LazyFrame, per_reason: int = 3, withheld: pl.Expr | None = None
) -> dict[str, list[dict[str, Any]]]:
    """A few dropped and quarantined records of each `reason (action)`: record id, source and
    their evidence (already redacted; secrets masked again), the first by record id. A dropped
    record's text is not kept, so the evidence is what shows why; records a deletion request
    names (`withheld`, over the ledger's record_id and source) are left out."""
    ended = ledger.filter(
        pl.col("terminal"), pl.col("action").is_in(["dropped", "quarantined"])
    ).filter(~withheld if withheld is not None else pl.lit(True))
    # the first ids of each reason, one streaming pass each, then their events: sorting every
    # drop's evidence held 3.3 GB at 10M records, and polars' bottom_k does not stream
    keys = ["reason", "action", "record_id"]
    firsts = pl.DataFrame(schema={key: pl.String for key in keys})
    for _ in range(per_reason):
        firsts = pl.concat(
            [
                firsts,
                ended.join(firsts.lazy(), on=keys, how="anti", nulls_equal=True)
                .group_by("reason", "action")
                .agg(pl.col("record_id").min())
                .collect(engine="streaming"),
            ]
        )
    rows = (
        ended.join(firsts.lazy(), on=keys, nulls_equal=True)
        .sort("reason", "action", "record_id")
        .select("reason", "action", "record_id", "source", "evidence")
        .collect(engine="streaming")
    )
    found: dict[str, list[dict[str, Any]]] = {}
    shown = redacted_excerpts(rows["evidence"].to_list())
    for row, evidence in zip(rows.iter_rows(named=True), shown, strict=True):
        found.setdefault(f"{row['reason']} ({row['action']})", []).append(
            {"record_id": row["record_id"], "source": row["source"], "evidence": evidence}
        )
    return found
