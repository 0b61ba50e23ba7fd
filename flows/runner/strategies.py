"""How a stage's steps (flows/runner/steps.py) are laid over its parts on the run's workers:
`per_part` (an indexed stage after building its index once), `by_key` (keys per part, a
reduce per key partition, exchanges per part, one decision, an apply per part), `ingest`
(parts of the sources, then one step that drops repeated ids) and `publish_shards` (each
part routed to its shards, each shard written). Each returns a typed result with how its
parts ran; the flow (flows/curate.py) runs the stages in registry order and reads only that.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import polars as pl
from prefect import get_run_logger

from data_catalog import deletions, review_queue
from data_catalog.catalog import Catalog
from flows.run_plan import RunPlan
from flows.runner import workers
from flows.runner.parts import ingest_part_bytes, offsets, rows_per_part
from flows.runner.steps import STEPS, Decisions, PartDone, Ran
from pipeline.core import progress, storage
from pipeline.ingest.source_files import source_files
from pipeline.ingest.stage import ingest_stats, plan_parts
from pipeline.publish.stage import ShardPlan, plan_shards
from pipeline.registry import STAGES
from pipeline.stage import Indexed, add_counts


@dataclass
class StageDone:
    """What a stage left for the next: its output folder and how many records it holds, its
    stats and how its parts ran (saved for a resumed run as JSON)."""

    path: str
    stats: dict[str, Any]
    records_out: int
    parts: dict[str, Any] = field(default_factory=dict)
    ids_digest: int | None = None  # ingest's: of every record read in

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ran(self) -> bool:
        return self.parts != {"parts": 0}


class StageSteps:
    """One stage's steps mapped on the run's workers, with the wall seconds of each."""

    def __init__(self, plan: RunPlan, name: str):
        self.plan, self.name = plan, name
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def map(
        self,
        step: str,
        mapped: dict[str, list],
        fixed: dict[str, Any],
        records: list[int] | None = None,
        plan: RunPlan | None = None,
    ) -> list[Any]:
        """Map `step` over its parts (or key partitions), called with `plan` (the stage's
        part plan, or the whole) and each item's `mapped` values. As each item finishes, the
        stage's progress advances by its `records` (the step's input records of each item),
        when given."""
        plan = plan or self.plan
        items = len(next(iter(mapped.values())))
        phase = f"{step} {{}}/{items}" if items > 1 else step
        progress.advance(self.name, 0, phase.format(0))
        started = time.perf_counter()
        calls = [
            {"plan": plan, "name": self.name, **fixed, **{k: v[i] for k, v in mapped.items()}}
            for i in range(items)
        ]
        results: list[Any] = [None] * items
        # a global step too runs on a worker (a pool process of the local runner): what it
        # holds of the whole dataset never stays in the run's process
        ran = workers.current().map(STEPS[step], calls)
        for done, (index, result) in enumerate(ran, start=1):
            results[index] = result  # a failure ends it
            progress.advance(self.name, records[index] if records else 0, phase.format(done))
        self.seconds[step] += time.perf_counter() - started
        return results

    def step_seconds(self) -> dict[str, float]:
        return {step: round(seconds, 3) for step, seconds in self.seconds.items()}


def slim(plan: RunPlan) -> RunPlan:
    """The plan the parts get: only what per-record steps read (no eval sets or test lock)."""
    return replace(plan, eval_sets=(), locked_test=None, frozen_cutoffs=None)


def part_plan(plan: RunPlan, records: int) -> tuple[RunPlan, list[int]]:
    """For a stage of `records` input records: the plan its parts get (with how many records
    each part holds) and where each part starts."""
    rows = rows_per_part(records, workers.current().count, plan.config.runner.part_rows)
    return replace(slim(plan), part_rows=rows), offsets(records, rows)


def rows(folder: str) -> int:
    return pl.scan_parquet(storage.files(folder)).select(pl.len()).collect().item()


def ingest(plan: RunPlan) -> StageDone:
    """Read the sources part by part on the workers (parts of consecutive files or pieces
    of a large one, sized as other stages' parts are, a record taken as 1 KiB), then drop
    repeated ids in one task."""
    name = "ingest"
    out, sources = plan.stage_dir(name), plan.config.source_list
    storage.remove_tree(out)
    for stale in plan.ledger_dir.glob(f"{STAGES[name].ledger_part}*.parquet"):
        stale.unlink()
    listed = {source.name: source_files(source) for source in sources}
    size = sum(path.stat().st_size for files in listed.values() for path, _ in files)
    part_bytes = ingest_part_bytes(size, workers.current().count, plan.config.runner.part_rows)
    parts = plan_parts(sources, part_bytes, listed)
    progress.start(name, len(parts), "parts")
    steps = StageSteps(plan, name)
    read = steps.map("read", {"part": parts}, {}, [1] * len(parts), slim(plan)) if parts else []
    (finished,) = steps.map("finish", {"folder": [str(out)]}, {}, plan=slim(plan))
    per_source = {source.name: {"records_in": 0} for source in sources}
    for part, task_result in zip(parts, read, strict=True):
        per_source[part.source]["records_in"] += task_result.records_in
    events = pl.scan_parquet(storage.files(plan.ledger_dir, f"{STAGES[name].ledger_part}*"))
    stats = ingest_stats(per_source, events.select("source", "action").collect(), parts)
    for warning in stats["warnings"]:
        get_run_logger().warning("ingest: %s", warning)
    get_run_logger().info(
        "ingest: %s records in, %s dropped (bad rows and repeated ids), %s encoding repaired, "
        "%s parts",
        stats["records_in"], stats["bad_rows"], stats["encoding_repaired"], len(parts),
    )  # fmt: skip
    accounting = {
        "parts": len(parts),
        "ledger_parts": len(parts) + 1,  # and the repeated ids'
        "part_peak_rss_mb": max((task.peak_rss_mb for task in read), default=None),
        "finish_peak_rss_mb": finished.peak_rss_mb,
        "step_seconds": steps.step_seconds(),
    }
    return StageDone(
        path=str(out),
        stats=stats,
        parts=accounting,
        records_out=rows(str(out)),
        ids_digest=finished.ids_digest,
    )


def per_part(plan: RunPlan, name: str, input_dir: str) -> StageDone:
    """Run a per-part stage part by part (an indexed one after building its index once, in
    the run's scratch, where every part reads it), merge the parts' stats and queue their
    review items."""
    steps, index, built = StageSteps(plan, name), None, None
    if isinstance(STAGES[name].function, Indexed):
        index = plan.stage_dir(f"{name}-index")
        (built,) = steps.map("build", {"folder": [str(index)]}, {"input_dir": input_dir})
    records = rows(input_dir)
    parts, accounting = _run_parts(steps, input_dir, records, index and str(index))
    if index is not None:
        storage.remove_tree(index)
        accounting |= {"build_seconds": built.seconds, "build_peak_rss_mb": built.peak_rss_mb}
    stats = STAGES[name].merge_stats([part.stats for part in parts])
    records_out = _finish_parts(plan, name, records, parts, stats)
    accounting["step_seconds"] = steps.step_seconds()
    return StageDone(str(plan.stage_dir(name)), stats, records_out, parts=accounting)


def by_key(plan: RunPlan, name: str, input_dir: str) -> StageDone:
    """Run a by-key stage: its keys part by part, sent to P key partitions (P = the number of
    parts); each partition reduced; its exchanges part by part; the decisions made by one task
    from what the last step found (ids and hashes, never records); then each part edited by
    them. A stage its config turns off runs no task: its input goes on as its output."""
    stage = STAGES[name]
    function = stage.function
    if (stats := function.off(stage.settings(plan.config))) is not None:
        get_run_logger().info("%s: off in the run config; its input goes on unchanged", name)
        return StageDone(input_dir, stats, rows(input_dir), parts={"parts": 0})
    steps = StageSteps(plan, name)
    records = rows(input_dir)
    slim, starts = part_plan(plan, records)
    partitions = len(starts)  # each about one part's keys
    each_part = {"part": list(range(partitions)), "offset": starts}
    fitting, model = [], {}
    if function.fit is not None:  # keys need a model of the whole dataset: fit it first
        sampled = steps.map("sample", each_part, {"input_dir": input_dir}, plan=slim)
        samples = [task.path for task in sampled]
        fitting = sampled + steps.map(
            "fit", {"samples": [samples]}, {"input_dir": input_dir}, plan=slim
        )
        model = {"fitted": fitting[-1].path}
    keyed = steps.map(
        "keys", each_part, {"input_dir": input_dir, "partitions": partitions} | model, plan=slim
    )
    reduced = steps.map(
        "reduce", {"partition": list(range(partitions))}, {"parts": partitions}, plan=slim
    )
    found, exchanged = [task.path for task in reduced], []
    for step in range(len(function.exchanges)):  # each reads what the step before sent its part
        sent = steps.map(
            "exchange", each_part, {"input_dir": input_dir, "step": step, "parts": partitions},
            plan=slim,
        )  # fmt: skip
        found, exchanged = [task.path for task in sent], exchanged + sent
    components = {}
    if function.by_components(stage.settings(plan.config)):
        decided, components = _by_components(steps, slim, input_dir, found, each_part)
    else:
        (decided,) = steps.map("decide", {"found": [found]}, {"input_dir": input_dir} | model)
    parts, accounting = _run_parts(steps, input_dir, records, decided.decisions)
    stats = function.merge_stats(decided.stats, [part.stats for part in parts])
    review = decided.review_items and pl.read_parquet(decided.review_items)
    records_out = _finish_parts(plan, name, records, parts, stats, review)
    if "no_leakage" in stage.checks:  # no group, cluster or text in two splits, or it fails
        steps.map("check", {"folder": [str(plan.stage_dir(name))]}, {})
    accounting |= {
        "key_partitions": partitions,
        "keys": sum(part.keys for part in keyed),
        "keys_peak_rss_mb": _peak(keyed),
        "reduce_peak_rss_mb": _peak(reduced),
        **({"exchange_peak_rss_mb": _peak(exchanged)} if exchanged else {}),
        **({"fit_peak_rss_mb": _peak(fitting)} if fitting else {}),
        "decide_seconds": decided.seconds,
        "decide_peak_rss_mb": decided.peak_rss_mb,
        **components,
        "step_seconds": steps.step_seconds(),
    }
    return StageDone(str(plan.stage_dir(name)), stats, records_out, parts=accounting)


MAX_ROUNDS = 64  # large-star / small-star converge in O(log n) rounds: 64 is a bug


def _by_components(
    steps: StageSteps, slim: RunPlan, input_dir: str, found: list[str], each_part: dict
) -> tuple[Decisions, dict[str, Any]]:
    """A by-component stage's decisions (pipeline/stage.py's Components): the edges of what
    its last step found sent to node partitions, each part's members too; large-star and
    small-star rounds until no partition changes; each member labelled with its component and
    sent to its component's partition, where the components are decided; then what the
    decisions ask of the parts answered. No task holds every edge or every member."""
    function = STAGES[steps.name].function
    partitions = len(each_part["part"])
    each_partition = {"partition": list(range(partitions))}
    on_partitions = {"partitions": partitions}
    edged = steps.map(
        "edges", {"found": found, "index": list(range(len(found)))}, on_partitions, plan=slim
    )
    members = steps.map("members", each_part, {"input_dir": input_dir} | on_partitions, plan=slim)
    step, starred = 0, []
    while True:
        if step >= 2 * MAX_ROUNDS:
            raise RuntimeError(f"{steps.name}: components did not converge in {MAX_ROUNDS} rounds")
        round_ = []
        for half in (step, step + 1):  # each step's edges are read by the next one only
            fixed = {"step": half} | on_partitions
            round_ += steps.map("star", each_partition, fixed, plan=slim)
            storage.remove_tree(slim.stage_dir(f"{steps.name}-cc") / f"{half:03d}")
        starred, step = starred + round_, step + 2
        if not any(task.changed for task in round_):
            break
    labelled = steps.map("label", each_partition, {"step": step} | on_partitions, plan=slim)
    resolved = steps.map("resolve", each_partition, {"input_dir": input_dir, "parts": partitions})
    answered = []
    if function.components.evidence is not None:
        fixed = {"input_dir": input_dir, "parts": partitions}
        answered = steps.map("evidence", each_part, fixed, plan=slim)
    settings = STAGES[steps.name].settings(slim.config)
    stats = add_counts([t.stats for t in edged + resolved])
    whole = function.components.whole(stats, settings, steps.plan.context(False))
    stats |= whole | function.components.stats(settings)
    items = [pl.read_parquet(t.review_items) for t in resolved if t.review_items]
    review = None
    if items:
        review = slim.stage_dir(f"{steps.name}-review-items") / "all.parquet"
        pl.concat(items).sort("record_id").write_parquet(str(review))  # not by partition
    peak = _peak(edged + members + starred + labelled + resolved + answered)
    decided = Decisions(
        decisions=resolved[0].decisions,
        stats=stats,
        review_items=review and str(review),
        seconds=sum(t.seconds for t in resolved),
        peak_rss_mb=peak,
    )
    return decided, {"component_rounds": step // 2, "resolve_peak_rss_mb": _peak(resolved)}


RUNS = {"per_part": per_part, "by_key": by_key}


def run_stage(plan: RunPlan, name: str, input_dir: str) -> StageDone:
    """Run a records stage by the strategy its registry entry names."""
    return RUNS[STAGES[name].runs](plan, name, input_dir)


def publish_shards(
    plan: RunPlan, input_dir: str, ids: pl.LazyFrame, staging: storage.Location
) -> tuple[ShardPlan, list[dict[str, Any]], dict[str, Any]]:
    """Publish's steps: the shards planned here from the records' `ids` (record_id, split),
    each part's records routed to their shards (with their `published` events), each shard
    sorted and written into `staging`. Returns the plan, the shards' manifest entries and how
    they ran."""
    name = "publish"
    for stale in plan.ledger_dir.glob(f"{STAGES[name].ledger_part}*.parquet"):
        stale.unlink()  # an earlier try's, cut in other parts
    shard_plan = plan_shards(ids, plan.config.publish, plan.run_dir / "publish-plan")
    steps = StageSteps(plan, name)
    slim, starts = part_plan(plan, sum(shard_plan.counts.values()))
    routed = steps.map(
        "route", {"part": list(range(len(starts))), "offset": starts},
        {"input_dir": input_dir, "shard_plan": shard_plan}, plan=slim,
    )  # fmt: skip
    shards = []
    if shard_plan.shards:
        shards = steps.map(
            "shard", {"shard": list(range(len(shard_plan.shards)))},
            {"shard_plan": shard_plan, "staging": str(staging)}, plan=slim,
        )  # fmt: skip
    storage.remove_tree(plan.stage_dir(f"{name}-routed"))
    accounting = {
        "parts": len(starts),
        "shards": len(shards),
        "part_peak_rss_mb": _peak(routed + shards),
        "step_seconds": steps.step_seconds(),
    }
    return shard_plan, [shard.entry for shard in shards], accounting


def _peak(ran: list[Ran]) -> float:
    return max(task.peak_rss_mb for task in ran)


def _run_parts(
    steps: StageSteps, input_dir: str, records: int, shared: str | None = None
) -> tuple[list[PartDone], dict[str, Any]]:
    """Run a stage (or a by-key stage's apply step) part by part on its `records` input
    records, with what its global step made for every part (`shared`); its parts' results,
    and how they ran."""
    slim, starts = part_plan(steps.plan, records)
    fixed = {"input_dir": input_dir} | ({"shared": shared} if shared else {})
    sizes = [min(slim.part_rows, records - start) for start in starts]
    each_part = {"part": list(range(len(starts))), "offset": starts}
    parts = steps.map("part", each_part, fixed, sizes, plan=slim)
    accounting = {
        "parts": len(parts),
        "largest_part_records": max(sizes),
        "slowest_part_seconds": max(part.seconds for part in parts),
        "part_peak_rss_mb": _peak(parts),
    }
    return parts, accounting


def _finish_parts(
    plan: RunPlan,
    name: str,
    records_in: int,
    parts: list[PartDone],
    stats: dict[str, Any],
    decided_items: pl.DataFrame | None = None,
) -> int:
    """Queue the review items of the parts (and of a by-key stage's decide step), and say in
    a sentence what the stage did (its stats go to the run's summary artifact); the records
    its parts wrote."""
    reviewed = [pl.read_parquet(part.review_items) for part in parts if part.review_items]
    if decided_items is not None and decided_items.height:
        reviewed.insert(0, decided_items)
    if reviewed:
        catalog = Catalog.open(plan.workdir)
        queued = review_queue.enqueue(catalog, pl.concat(reviewed), plan.config.name, plan.run_id)
        deletions.erase_queued_again(catalog)
        stats["queued_new"] = queued
    records_out = sum(part.records_out for part in parts)
    queued = f", {stats['queued_new']:,} new item(s) for review" if stats.get("queued_new") else ""
    get_run_logger().info(
        "%s: %s records in, %s out (%s dropped or quarantined%s) in %s part(s)",
        name, f"{records_in:,}", f"{records_out:,}", f"{records_in - records_out:,}", queued,
        len(parts),
    )  # fmt: skip
    return records_out
