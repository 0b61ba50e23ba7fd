"""The stage contract, and the ordered registry of the curate stages.

A stage is `stage(frame, cfg, ctx) -> StageResult(frame, events, stats)`: it reads its input
records as a LazyFrame and its own config section, measures and decides, and returns the
records that go on, one ledger event per decision, and small stats. Catalog state it needs
(approvals, deletion requests, the parent version, evaluation sets) arrives in the
RunContext as data, loaded by the flow; a stage never writes outside the run's folder.

Two ends of the registry have another shape, said in their `kind`: ingest is the *source*
(`ingest(sources, ctx, out_dir)`: it reads the declared files, there is no input frame) and
publish the *sink* (`publish(frame, cfg, ctx, staging_dir, extra)`: it writes a version).

A stage whose decisions need every record (which segments repeat across documents, which
copies of a text to keep) but whose state is only keys is a `ByKey`: `keys` reads one part
and returns its keys, `reduce` reads every part's keys of one key partition and finds what it
must, `exchanges` (when a decision needs the parts' records again, such as measuring the pairs
a reduce proposed) pass rows from part to part, `decide` reads the findings (small: ids and
hashes) and makes the decisions, and `apply` edits one part by them. The runner spreads the parts and the
partitions over tasks; called as a stage function, a ByKey runs its steps on every
record at once, with the same answer.

A per-part stage whose parts are all checked against data built once from the whole input
(contamination: the indexes of this run's test split and the protected evaluation sets) is an
`Indexed`: `build` writes that data into a folder once, `check` decides one part by it.

`pipeline/registry.py` holds the one list of the stages in order, `CURATE_STAGES`: the flow
(flows/curate.py) runs them from it, and `thresher dedup` finds its methods in it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from pipeline.config import RunConfig
from pipeline.core import clusters, ledger
from pipeline.core.schema import EvalSet


@dataclass(frozen=True)
class RunContext:
    run_id: str
    run_dir: Path
    config: RunConfig
    config_hash: str
    parent_version: str | None = None
    # record_id -> split of the parent version (columns: record_id, split), when one exists.
    parent_splits: pl.LazyFrame | None = None
    # Open deletion requests (columns: request_id, kind, value), kind one of DELETION_KINDS.
    deletions: pl.DataFrame | None = None
    # Reviewer decisions (REVIEW_DECISION_SCHEMA).
    review_decisions: pl.DataFrame | None = None
    # The locked test set of this dataset name (columns: record_id), when one is locked.
    locked_test: pl.DataFrame | None = None
    # Time cutoffs frozen at the dataset's first publish ({"validation": datetime, ...}).
    frozen_cutoffs: dict[str, datetime] | None = None
    # Protected evaluation sets, verified against the catalog's sha256s by the flow.
    eval_sets: tuple[EvalSet, ...] = ()


@dataclass
class StageResult:
    frame: pl.LazyFrame
    events: pl.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    # Records for the reviewer queue (REVIEW_ITEM_SCHEMA), secrets already masked.
    review_items: pl.DataFrame | None = None


@dataclass(frozen=True)
class ReportSection:
    """A section of the audit report: its anchor names its template,
    pipeline/report/templates/sections/<anchor>.html, which reads the report's figures."""

    anchor: str
    title: str  # as the report's table of contents shows it

    @property
    def link(self) -> tuple[str, str]:
        return self.anchor, self.title


@dataclass(frozen=True)
class Stage:
    """One curate stage: its name (in the ledger, the flow's task and the run's stage
    folder), the config section it reads, its function, the columns it adds, how it runs,
    what the flow proves about its output, and what the flow and the run's summary need of
    it (the gate after it, where its stats go)."""

    name: str
    section: str  # the RunConfig attribute handed to the function as `cfg`
    function: Callable[..., Any]  # a stage function, a ByKey or an Indexed
    # the columns it may set or rewrite (it reads canonical records: RECORD_SCHEMA, with
    # language, cluster_id and split once a stage has added them); tests/pipeline/test_stage.py checks
    adds: tuple[str, ...] = ()
    kind: Literal["source", "records", "sink"] = "records"
    # per_part: records are decided one by one (an Indexed stage: against an index built once),
    # so parts run as separate tasks (on the run's workers) and give the answer of one call on
    # every record; by_key: its function is a ByKey, run as tasks per part and per key
    # partition (the source and the sink have strategies of their own: flows/runner)
    runs: Literal["per_part", "by_key"] = "per_part"
    # per_part: combines the parts' stats (default: an Indexed stage's merge, else add_counts)
    merge: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None
    # post-conditions the flow checks on the output: "no_leakage" = no group, duplicate
    # cluster or text in two splits (pipeline/leakage.py)
    checks: tuple[str, ...] = ()
    # the Great Expectations gate (expectations/) run on its output, beside the next stage
    gate_after: str | None = None
    # where its stats go in the run's summary (`thresher run --json`): ("dedup", "exact") is
    # summary["dedup"]["exact"]; none: only in the run's artifact. `summary_keys` picks some.
    summary_at: tuple[str, ...] = ()
    summary_keys: tuple[str, ...] | None = None
    # how its stats (at summary_at) read in `thresher run`: a few lines, none when idle
    lines: Callable[[dict[str, Any]], list[str]] | None = None
    # the stats key counting the records it quarantined for review (review.quarantined_items)
    quarantined: str | None = None
    # the audit report's section that shows what it did; stages that share one (the dedup
    # methods) show it once, where the first of them is in the registry
    report_section: ReportSection | None = None
    number: int = 0  # its place in the registry, from 1 (pipeline/registry.py sets it)

    def merge_stats(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        """The stats of one call on every record, from the stats of each part's call."""
        if self.merge is not None:
            return self.merge(parts)
        if isinstance(self.function, Indexed):
            return self.function.merge(parts)
        return add_counts(parts)

    def settings(self, cfg: RunConfig) -> Any:
        return getattr(cfg, self.section)

    def __call__(self, frame: pl.LazyFrame, cfg: RunConfig, ctx: RunContext) -> StageResult:
        """Run a records stage on `frame` with its section of `cfg`."""
        if self.kind != "records":
            raise TypeError(f"the {self.name} stage is the {self.kind}: call its function")
        return self.function(frame, self.settings(cfg), ctx)

    @property
    def ledger_part(self) -> str:
        """The name of its ledger part: parts sort in stage order, however many stages."""
        return f"{self.number:02d}-{self.name}"


@dataclass
class Decided:
    """What a ByKey's decide step decided: the table its apply step reads, the stats only the
    whole can tell, and review items (REVIEW_ITEM_SCHEMA) when the decisions queue some."""

    decisions: pl.DataFrame
    stats: dict[str, Any]
    review_items: pl.DataFrame | None = None
    # what a by-component decision asks of other parts (rows with `_to_part`), for `evidence`
    requests: pl.DataFrame | None = None


@dataclass(frozen=True)
class Components:
    """How a ByKey decides by connected component instead of once: no task holds every edge
    or every member (pipeline/core/clusters.py: large-star / small-star rounds over edge
    partitions).

    edges(found, cfg) -> (DataFrame of `node`, `neighbor`: the uint64 node ids of the pairs
    that join records, from one file of what the last step found; its stats, which add up).
    members(part, cfg, ctx) -> DataFrame with `node` and what `decide` needs of each record
    of a part (the runner adds `_part`); only the members of some edge reach `decide`.
    decide(members, records, cfg, ctx) -> Decided for whole components: `members` holds every
    member of each (its `_component`: the smallest node, and `_part`), its decisions carry
    `_to_part` (the part of the record each is about), and its `requests` (`_to_part` too)
    go to `evidence(part, requests, cfg, ctx)`, whose rows (with `_to_part`) reach the
    apply step of the part they name as its fifth argument.
    stats(cfg) -> the stats the settings alone tell (not added up).
    whole(stats, cfg, ctx) -> what only the sum of every partition's stats tells (split's
    warnings), added to it.
    applies(cfg) -> False where the stage decides once (`ByKey.decide`) instead.
    singletons: every member reaches `decide`, one of no edge as a component of its own (its
    node), where each record needs a decision (split) and not only those of some edge."""

    edges: Callable[..., tuple[pl.DataFrame, dict[str, Any]]]
    members: Callable[..., pl.DataFrame]
    decide: Callable[..., Decided]
    evidence: Callable[..., pl.DataFrame] | None = None
    stats: Callable[[Any], dict[str, Any]] = lambda cfg: {}
    whole: Callable[[dict[str, Any], Any, RunContext], dict[str, Any]] = lambda stats, cfg, ctx: {}
    applies: Callable[[Any], bool] = lambda cfg: True
    singletons: bool = False

    def labelled(self, members: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
        """`members` with their `_component` (only those of some edge, unless singletons)."""
        if not self.singletons:
            return members.join(labels, on="node")
        return members.join(labels, on="node", how="left", maintain_order="left").with_columns(
            pl.coalesce("_component", "node").alias("_component")
        )

    def in_process(
        self, parts: list[pl.LazyFrame], found: list[pl.DataFrame], cfg: Any, ctx: RunContext
    ) -> tuple[Decided, list[tuple[pl.LazyFrame, ...]]]:
        """The decisions as the runner makes them, in this process: `parts` (the stage's
        input cut into parts, a key partition and a node partition each) and what the last
        step found in each. The decisions (with `_to_part`) and what each part's apply step
        gets of the evidence."""
        partitions = len(parts)
        edges, stats = zip(*(self.edges(rows.lazy(), cfg) for rows in found), strict=True)
        partition = lambda node: key_partition(node, partitions, pl.UInt64)  # noqa: E731
        labels, _ = clusters.star_rounds(pl.concat(edges), partition, partitions)
        members = pl.concat(
            self.members(part, cfg, ctx).with_columns(pl.lit(number, pl.UInt32).alias("_part"))
            for number, part in enumerate(parts)
        )
        members = self.labelled(members.lazy(), labels.lazy()).collect()
        records = pl.concat(parts)
        decided = [
            self.decide(members.filter(partition(pl.col("_component")) == k), records, cfg, ctx)
            for k in range(partitions)
        ]
        items = [d.review_items for d in decided if d.review_items is not None]
        summed = add_counts([*stats, *(d.stats for d in decided)])
        merged = Decided(
            pl.concat(d.decisions for d in decided),
            summed | self.whole(summed, cfg, ctx) | self.stats(cfg),
            review_items=pl.concat(items).sort("record_id") if items else None,
            requests=None if self.evidence is None else pl.concat(d.requests for d in decided),
        )
        if self.evidence is None:
            return merged, [()] * partitions
        answers = pl.concat(
            self.evidence(part, sent_to(merged.requests.lazy(), number), cfg, ctx)
            for number, part in enumerate(parts)
        )
        return merged, [(sent_to(answers.lazy(), number),) for number in range(partitions)]


@dataclass(frozen=True)
class ByKey:
    """A stage run as [sample per part → one fit →] keys per part → reduce per key partition →
    [exchanges per part] → one decide → apply per part.

    keys(part, cfg, ctx) -> DataFrame with `_key` (a hex digest, whose first 15 digits choose
    the key partition, or an integer hash, whose high bits do) and what reduce needs; with
    exchanges, the runner adds `_part`, the number of the part a row comes from.
    sample and fit, when keys need a model of the whole dataset first (semantic dedup's k-means
    partitions): `sample(part, cfg, ctx) -> DataFrame` is what one part contributes (chosen by
    record id, so that the sample is the same however the records are cut into parts),
    `fit(samples, records, cfg) -> DataFrame` makes the model from every part's sample (and
    the input's size), and keys and decide get it last: keys(part, cfg, ctx, fitted), decide(found,
    records, cfg, ctx, fitted).
    reduce(keys, cfg) -> what one partition found.
    exchanges: steps that need the parts' records again (such as measuring the pairs a reduce
    proposed): each `exchange(part, incoming, cfg, ctx) -> DataFrame` reads the rows sent to its
    part by the step before (reduce's, or the exchange's before it: rows carry `_to_part`, the
    number of the part they are for, which the runner removes) and sends its own on the same
    way; the last one's rows, not sent anywhere, are what decide reads.
    decide(found, records, cfg, ctx) -> Decided (`records`, the stage's whole input as a lazy
    scan, is for the few records a decision must show in full, such as a review item's), or,
    with `components`, decisions made per connected component (see Components).
    apply(part, decisions, cfg, ctx) -> the part's StageResult, whose stats add up over the
    parts (`decisions` is a LazyFrame: a part reads only what concerns it).
    off(cfg) -> the stats of a stage its config turns off (semantic dedup, augmentation), or
    None: an off stage runs none of its steps and its records go on as they came."""

    keys: Callable[..., pl.DataFrame]
    reduce: Callable[..., pl.DataFrame]
    decide: Callable[..., Decided] | None  # None: by `components` always
    apply: Callable[..., StageResult]
    exchanges: tuple[Callable[..., pl.DataFrame], ...] = ()
    sample: Callable[..., pl.DataFrame] | None = None
    fit: Callable[..., pl.DataFrame] | None = None
    off: Callable[[Any], dict[str, Any] | None] = lambda cfg: None
    components: Components | None = None

    def by_components(self, cfg: Any) -> bool:
        return self.components is not None and self.components.applies(cfg)

    def __call__(self, frame: pl.LazyFrame, cfg: Any, ctx: RunContext) -> StageResult:
        """The stage on every record at once: one part, one key partition."""
        if (stats := self.off(cfg)) is not None:
            return StageResult(frame=frame, events=ledger.empty(), stats=stats)
        model = ()
        if self.fit is not None:
            model = (self.fit(self.sample(frame, cfg, ctx).lazy(), frame, cfg),)
        keys = self.keys(frame, cfg, ctx, *model)
        if self.exchanges:
            keys = keys.with_columns(pl.lit(0, pl.UInt32).alias("_part"))
        found = self.reduce(keys.lazy(), cfg)
        for exchange in self.exchanges:
            found = exchange(frame, sent_to(found.lazy(), 0), cfg, ctx)
        if self.by_components(cfg):
            decided, (evidence,) = self.components.in_process([frame], [found], cfg, ctx)
            decisions = sent_to(decided.decisions.lazy(), 0)
            result = self.apply(frame, decisions, cfg, ctx, *evidence)
        else:
            decided = self.decide(found.lazy(), frame, cfg, ctx, *model)
            result = self.apply(frame, decided.decisions.lazy(), cfg, ctx)
        result.stats = self.merge_stats(decided.stats, [result.stats])
        items = [i for i in (decided.review_items, result.review_items) if i is not None]
        if items:
            result.review_items = pl.concat(items)
        return result

    @staticmethod
    def merge_stats(decided: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(sorted((add_counts(parts) | decided).items()))


@dataclass(frozen=True)
class Indexed:
    """A per-part stage whose parts are checked against an index built once from the whole
    input: build(frame, cfg, ctx, folder) writes it into `folder`; check(part, cfg, ctx,
    folder) -> the part's StageResult, whose stats `merge` combines over the parts."""

    build: Callable[..., None]
    check: Callable[..., StageResult]
    merge: Callable[[list[dict[str, Any]]], dict[str, Any]]

    def __call__(self, frame: pl.LazyFrame, cfg: Any, ctx: RunContext) -> StageResult:
        """The stage on every record at once: the index built, one part checked."""
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="index-", dir=ctx.run_dir))
        try:
            self.build(frame, cfg, ctx, folder)
            result = self.check(frame, cfg, ctx, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        result.stats = self.merge([result.stats])
        return result


def key_partition(key: pl.Expr, partitions: int, dtype: pl.DataType) -> pl.Expr:
    """The key partition of a key of `dtype` (a hex digest, or an integer hash): the same for
    a key on every part and worker."""
    if dtype == pl.String:
        number = key.str.slice(0, 15).str.to_integer(base=16)
    else:  # a hash's high bits are its best mixed
        number = key // (1 << 40)
    return (number % partitions).cast(pl.UInt32)


def sent_to(rows: pl.LazyFrame, part: int) -> pl.LazyFrame:
    """The rows of a ByKey step that are sent to `part`, without their address."""
    return rows.filter(pl.col("_to_part") == part).drop("_to_part")


def read_by_parts(
    records: pl.LazyFrame, part_rows: int, query: Callable[[pl.LazyFrame], pl.LazyFrame]
) -> pl.DataFrame:
    """`query` run on `records` `part_rows` rows at a time, the results concatenated: how a
    decide step reads the few rows it needs of every record (one scan of all of them at once,
    streaming or not, buffers far more than a part)."""
    total = records.select(pl.len()).collect().item()
    return pl.concat(
        query(records.slice(start, part_rows)).collect()
        for start in range(0, max(total, 1), part_rows)
    )


def add_counts(counts: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum nested {key: number | {key: number}} dictionaries key by key."""
    total: dict[str, Any] = {}
    for entry in counts:
        for key, value in entry.items():
            if isinstance(value, dict):
                total[key] = add_counts([total.get(key, {}), value])
            else:
                total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))
