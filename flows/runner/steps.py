"""The steps a stage is made of, each run as one task on the run's workers (flows/runner/
workers.py) over one part of its input, one key partition, or the whole (a global step).

A step is a plain function of the plan and its part: it reads its input from the run's
scratch (the run folder, or object storage: `runner.scratch`), writes its output there under
names fixed by its stage, step and number (a retry overwrites them: nothing reads a step's
files before every task of the step returned), and returns a small typed result. `@step`
owns what every step shares: its peak memory window, its wall time and the peak RSS of the
process that ran it.
"""

from __future__ import annotations

import functools
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from flows.run_plan import RunPlan
from flows.runner import workers
from pipeline.core import clusters, ledger, storage
from pipeline.core.errors import ConfigError
from pipeline.core.resources import (
    limit_malloc_arenas,
    peak_rss_mb,
    release_free_memory,
    reset_peak_rss,
)
from pipeline.ingest.stage import INTERMEDIATE_PARQUET, IngestPart, finish, read_part
from pipeline.leakage import check_disjoint, leakage_columns
from pipeline.publish.stage import ShardPlan, published_events, routed, write_shard
from pipeline.registry import STAGES
from pipeline.stage import Indexed, key_partition


@dataclass(kw_only=True)
class Ran:
    """How a step ran: its wall seconds, and the peak RSS of the process that ran it (a
    worker's, for this step alone; the run's own process's when it ran there)."""

    seconds: float = 0.0
    peak_rss_mb: float = 0.0


@dataclass(kw_only=True)
class Read(Ran):
    records_in: int  # rows of the part's files, bad ones included


@dataclass(kw_only=True)
class Finished(Ran):
    ids_digest: int  # of every record ingest read in (ledger.ids_digest)


@dataclass(kw_only=True)
class PartDone(Ran):
    stats: dict[str, Any]
    review_items: str | None  # the part's review items file, when it queued any
    records_out: int


@dataclass(kw_only=True)
class Wrote(Ran):
    path: str  # a sample, a fitted model


@dataclass(kw_only=True)
class Keyed(Ran):
    keys: int


@dataclass(kw_only=True)
class Found(Ran):
    path: str  # what the next step reads: one file, or a folder of files sent to each part
    found: int


@dataclass(kw_only=True)
class Decisions(Ran):
    decisions: str
    stats: dict[str, Any]
    review_items: str | None


@dataclass(kw_only=True)
class Edged(Ran):
    stats: dict[str, Any]


@dataclass(kw_only=True)
class Starred(Ran):
    changed: bool  # whether the round's step changed any edge of its partition


@dataclass(kw_only=True)
class Sharded(Ran):
    entry: dict[str, Any]  # the shard's manifest entry


R = TypeVar("R", bound=Ran)


def timed_step(global_step: bool = False) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A step function timed and measured. In a worker process (one step at a time), the
    step's peak RSS window starts with it, after the memory earlier steps freed went back to
    the system; the workers of a run serve every step. In the run's own process the steps
    keep their own windows: a global step, which runs alone after its parts, hands back what
    they freed."""

    def measured(function: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(function)
        def run(plan: RunPlan, *args: Any, **kwargs: Any) -> R:
            _check_scratch(plan)
            limit_malloc_arenas()  # a Dask worker's first step: before its threads need arenas
            on_worker = workers.in_worker()
            if on_worker or global_step:
                release_free_memory()
            if on_worker:
                reset_peak_rss()
            started = time.perf_counter()
            result = function(plan, *args, **kwargs)
            seconds = round(time.perf_counter() - started, 3)
            return replace(result, seconds=seconds, peak_rss_mb=peak_rss_mb())

        return run

    return measured


@timed_step()
def read_task(plan: RunPlan, name: str, part: IngestPart) -> Read:
    """Read one part of the sources into the ingest folder, its bad rows' events into the
    ledger; a retry rewrites both."""
    source = next(s for s in plan.config.source_list if s.name == part.source)
    bounds = plan.config.gates.timestamp_bounds(plan.started_at)
    rows_in, bad = read_part(part, source, plan.stage_dir(name), plan.config.ingest, bounds)
    ledger.write_part(bad, plan.ledger_dir, f"{STAGES[name].ledger_part}-{part.number:05d}")
    return Read(records_in=rows_in)


@timed_step(global_step=True)
def finish_task(plan: RunPlan, name: str, folder: str) -> Finished:
    """Drop repeated ids from every part read (ids only, in one task); their events go to
    the ledger after every part's."""
    events = finish(storage.location(folder))
    ledger.write_part(events, plan.ledger_dir, f"{STAGES[name].ledger_part}-repeats")
    # every record read in: those kept, and those ingest gave a fate (bad rows, repeats)
    ended = pl.scan_parquet(storage.files(plan.ledger_dir, f"{STAGES[name].ledger_part}*"))
    ids_in = ledger.ids_digest(pl.scan_parquet(storage.files(folder, "part-*.parquet"))) ^ (
        ledger.ids_digest(ended.filter(pl.col("terminal")))
    )
    return Finished(ids_digest=ids_in)


@timed_step(global_step=True)
def check_task(plan: RunPlan, name: str, folder: str) -> Ran:
    """No group, cluster or text of the stage's output in two splits (it reads those columns
    of every record)."""
    output = pl.scan_parquet(storage.files(folder))
    check_disjoint(output, leakage_columns(plan.config.split))
    return Ran()


def _check_scratch(plan: RunPlan) -> None:
    """A worker that cannot see a local scratch (the run folder, by default) says so before
    its step writes anything there."""
    if plan.scratch_is_local and not plan.scratch_root.is_dir():
        raise ConfigError(
            f"{socket.gethostname()} cannot see the run's folder {plan.scratch_root}: a worker "
            "that shares no file system with the run needs runner.scratch on object storage "
            "that every worker reaches (s3://bucket/prefix; README: Scale out)"
        )


def _part(plan: RunPlan, input_dir: str, offset: int) -> pl.LazyFrame:
    """Records [offset, offset + plan.part_rows) of a stage's input."""
    rows = plan.part_rows or plan.config.runner.part_rows
    return pl.scan_parquet(storage.files(input_dir)).slice(offset, rows)


@timed_step()
def part_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, shared: str | None = None
) -> PartDone:
    """Run a per-part stage on one part of its input (an indexed stage against the index in
    the `shared` folder; a by-key stage's apply step by the decisions in the `shared` file)
    and write that part's records, events and review items; a retry rewrites the same files."""
    stage = STAGES[name]
    frame = _part(plan, input_dir, offset)
    ctx = plan.context(with_parent=False)
    function, settings = stage.function, stage.settings(plan.config)
    if shared is None:
        result = stage(frame, plan.config, ctx)
    elif isinstance(function, Indexed):
        with _local_copy(shared) as index:
            result = function.check(frame, settings, ctx, index)
    elif function.by_components(settings):  # the decisions sent to this part, and evidence
        mine = f"to-{part:05d}"
        decisions = pl.scan_parquet(storage.files(storage.location(shared) / mine))
        evidence = ()
        if function.components.evidence is not None:
            sent = plan.stage_dir(f"{name}-evidence") / mine
            evidence = (pl.scan_parquet(storage.files(sent)),)
        result = function.apply(frame, decisions, settings, ctx, *evidence)
    else:
        result = function.apply(frame, pl.scan_parquet(shared), settings, ctx)
    out = plan.stage_dir(name) / f"part-{part:05d}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    result.frame.sink_parquet(str(out), **INTERMEDIATE_PARQUET)
    ledger.write_part(result.events, plan.ledger_dir, f"{stage.ledger_part}-{part:05d}")
    review = None
    if result.review_items is not None:
        review = plan.stage_dir(f"{name}-review") / f"part-{part:05d}.parquet"
        review.parent.mkdir(parents=True, exist_ok=True)
        result.review_items.write_parquet(str(review))
    return PartDone(
        stats=result.stats,
        review_items=review and str(review),
        records_out=pl.scan_parquet(str(out)).select(pl.len()).collect().item(),
    )


@contextmanager
def _local_copy(folder: str) -> Iterator[Path]:
    """A folder as a local path: itself when local, else a copy (an index on the remote
    scratch) removed after the block."""
    location = storage.location(folder)
    if storage.is_local(location):
        yield location
        return
    with tempfile.TemporaryDirectory(prefix="thresher-") as copy:
        storage.place_tree(location, Path(copy))  # remote: copied file by file
        yield Path(copy)


@contextmanager
def _written_here(folder: storage.Location) -> Iterator[Path]:
    """A local folder to write `folder` in: itself when local, else one copied up to it
    after the block."""
    if storage.is_local(folder):
        folder.mkdir(parents=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="thresher-") as written:
        yield Path(written)
        storage.place_tree(Path(written), folder)


@timed_step()
def sample_task(plan: RunPlan, name: str, input_dir: str, part: int, offset: int) -> Wrote:
    """Write what one part contributes to a by-key stage's fit; a retry rewrites it."""
    stage = STAGES[name]
    sample = stage.function.sample(
        _part(plan, input_dir, offset), stage.settings(plan.config), plan.context(with_parent=False)
    )
    out = plan.stage_dir(f"{name}-sample") / f"part-{part:05d}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    sample.write_parquet(str(out))
    return Wrote(path=str(out))


@timed_step(global_step=True)
def fit_task(plan: RunPlan, name: str, input_dir: str, samples: list[str]) -> Wrote:
    """Fit a by-key stage's model of the whole dataset from every part's sample, once, and
    write it where every keys task reads it; a retry rewrites it."""
    stage = STAGES[name]
    fitted = stage.function.fit(
        pl.scan_parquet(samples),
        pl.scan_parquet(storage.files(input_dir)),
        stage.settings(plan.config),
    )
    out = plan.stage_dir(f"{name}-fitted") / "fitted.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    fitted.write_parquet(str(out))
    return Wrote(path=str(out))


@timed_step()
def keys_task(
    plan: RunPlan,
    name: str,
    input_dir: str,
    part: int,
    offset: int,
    partitions: int,
    fitted: str | None = None,
) -> Keyed:
    """Write a by-key stage's keys of one part, one file per key partition (empty ones too,
    so that every partition's reduce reads the keys' schema); a retry rewrites them."""
    stage = STAGES[name]
    by_key = stage.function
    model = () if fitted is None else (pl.read_parquet(fitted),)
    keys = by_key.keys(
        _part(plan, input_dir, offset),
        stage.settings(plan.config),
        plan.context(with_parent=False),
        *model,
    )
    if by_key.exchanges:
        keys = keys.with_columns(pl.lit(part, pl.UInt32).alias("_part"))
    partition = keys.select(key_partition(pl.col("_key"), partitions, keys.schema["_key"]))
    _write_sent(
        keys, partition.to_series(), partitions, plan.stage_dir(f"{name}-keys"), f"part-{part:05d}"
    )
    return Keyed(keys=keys.height)


def _write_sent(
    rows: pl.DataFrame, to: pl.Series, count: int, folder: storage.Location, source: str
) -> None:
    """Write each row to `folder/to-NNNNN/<source>.parquet`, NNNNN its number in `to` (below
    `count`): every file, empty too, so that each reader finds the schema; a retry rewrites
    the same files."""
    by_target = rows.with_columns(to.alias("_target")).partition_by(
        "_target", as_dict=True, include_key=False
    )
    for target in range(count):
        path = folder / f"to-{target:05d}" / f"{source}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        by_target.get((target,), rows.clear()).write_parquet(str(path))


def _write_found(found: pl.DataFrame, folder: storage.Location, source: str, parts: int) -> str:
    """Write what a by-key step found: rows with `_to_part` to the part each is sent to,
    others into one file. Returns where the next step reads them."""
    if "_to_part" in found.columns:
        _write_sent(found.drop("_to_part"), found["_to_part"], parts, folder, source)
        return str(folder)
    out = folder / f"{source}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    found.write_parquet(str(out))
    return str(out)


@timed_step()
def reduce_task(plan: RunPlan, name: str, partition: int, parts: int) -> Found:
    """Reduce one key partition of a by-key stage over every part's keys; a retry rewrites
    its files."""
    stage = STAGES[name]
    keys = storage.files(plan.stage_dir(f"{name}-keys") / f"to-{partition:05d}")
    found = stage.function.reduce(pl.scan_parquet(keys), stage.settings(plan.config))
    out = _write_found(found, plan.stage_dir(f"{name}-found"), f"partition-{partition:05d}", parts)
    return Found(path=out, found=found.height)


@timed_step()
def exchange_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, step: int, parts: int
) -> Found:
    """Run exchange `step` of a by-key stage on one part: the rows sent to it by the step
    before, and its records; a retry rewrites its files."""
    stage = STAGES[name]
    exchange = stage.function.exchanges[step]
    before = plan.stage_dir(f"{name}-found" if step == 0 else f"{name}-x{step - 1}")
    incoming = pl.scan_parquet(storage.files(before / f"to-{part:05d}"))
    found = exchange(
        _part(plan, input_dir, offset),
        incoming,
        stage.settings(plan.config),
        plan.context(with_parent=False),
    )
    out = _write_found(found, plan.stage_dir(f"{name}-x{step}"), f"part-{part:05d}", parts)
    return Found(path=out, found=found.height)


@timed_step(global_step=True)
def build_task(plan: RunPlan, name: str, input_dir: str, folder: str) -> Ran:
    """Build an indexed stage's index from its whole input into `folder`, once, on the
    runner (a Dask worker on a cluster: the run's process holds none of it); a retry
    rebuilds it."""
    stage = STAGES[name]
    index = storage.location(folder)
    storage.remove_tree(index)
    records = pl.scan_parquet(storage.files(input_dir))
    with _written_here(index) as built:
        stage.function.build(records, stage.settings(plan.config), plan.context(), built)
    return Ran()


@timed_step(global_step=True)
def decide_task(
    plan: RunPlan, name: str, input_dir: str, found: list[str], fitted: str | None = None
) -> Decisions:
    """Make a by-key stage's decisions from what its last step `found`, on the runner (a Dask
    worker on a cluster: the run's process holds no key of the whole dataset), and write them
    and their review items in the run's scratch; a retry rewrites them."""
    stage = STAGES[name]
    decided = stage.function.decide(
        pl.scan_parquet(found),
        pl.scan_parquet(storage.files(input_dir)),
        stage.settings(plan.config),
        plan.context(),
        *(() if fitted is None else (pl.read_parquet(fitted),)),
    )
    folder = plan.stage_dir(f"{name}-decisions")
    folder.mkdir(parents=True, exist_ok=True)
    decided.decisions.write_parquet(str(folder / "decisions.parquet"))
    review = None
    if decided.review_items is not None and decided.review_items.height:
        review = folder / "review-items.parquet"
        decided.review_items.write_parquet(str(review))
    return Decisions(
        decisions=str(folder / "decisions.parquet"),
        stats=decided.stats,
        review_items=review and str(review),
    )


def _round(plan: RunPlan, name: str, step: int) -> storage.Location:
    """Where step `step` of a by-component stage's rounds reads its edges (step 0: the edges
    of what the last step found; even steps run large-star, odd ones small-star)."""
    return plan.stage_dir(f"{name}-cc") / f"{step:03d}"


def _send_by(rows: pl.DataFrame, column: str, count: int, folder: storage.Location, source: str):
    """Send rows to the partition of their uint64 `column` (a node, or a component)."""
    to = rows.select(key_partition(pl.col(column), count, pl.UInt64)).to_series()
    _write_sent(rows, to, count, folder, source)


@timed_step()
def edges_task(plan: RunPlan, name: str, found: str, index: int, partitions: int) -> Edged:
    """Send the edges in one file of what a by-component stage's last step found to the node
    partitions of the first round, in both orientations; a retry rewrites them."""
    stage = STAGES[name]
    edges, stats = stage.function.components.edges(
        pl.scan_parquet(found), stage.settings(plan.config)
    )
    edges = clusters.both_ways(edges)
    _send_by(edges, "node", partitions, _round(plan, name, 0), f"from-{index:05d}")
    return Edged(stats=stats)


@timed_step()
def members_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, partitions: int
) -> Ran:
    """Send what a by-component stage's decision needs of each record of one part to the
    partition of its node."""
    stage = STAGES[name]
    members = stage.function.components.members(
        _part(plan, input_dir, offset), stage.settings(plan.config), plan.context(False)
    ).with_columns(pl.lit(part, pl.UInt32).alias("_part"))
    folder = plan.stage_dir(f"{name}-members")
    _send_by(members, "node", partitions, folder, f"part-{part:05d}")
    return Ran()


@timed_step()
def star_task(plan: RunPlan, name: str, partition: int, step: int, partitions: int) -> Starred:
    """One node partition's large-star (even `step`) or small-star (odd) step of the
    components rounds (pipeline/core/clusters.py), its edges sent on to the next step."""
    edges = pl.scan_parquet(storage.files(_round(plan, name, step) / f"to-{partition:05d}"))
    if step % 2 == 0:
        hooked, changed = clusters.large_star(edges.collect())
    else:
        hooked, changed = clusters.small_star(edges.collect())
        hooked = clusters.both_ways(hooked)
    _send_by(hooked, "node", partitions, _round(plan, name, step + 1), f"from-{partition:05d}")
    return Starred(changed=changed)


@timed_step()
def label_task(plan: RunPlan, name: str, partition: int, step: int, partitions: int) -> Ran:
    """Label the members of one node partition with their components (the star forest the
    last round left) and send each to its component's partition; a member of no edge stays,
    unless the stage decides singletons too."""
    stage = STAGES[name]
    edges = pl.scan_parquet(storage.files(_round(plan, name, step) / f"to-{partition:05d}"))
    labels = clusters.star_labels(edges.collect())
    members = pl.scan_parquet(
        storage.files(plan.stage_dir(f"{name}-members") / f"to-{partition:05d}")
    )
    labelled = stage.function.components.labelled(members, labels.lazy()).collect()
    folder = plan.stage_dir(f"{name}-components")
    _send_by(labelled, "_component", partitions, folder, f"from-{partition:05d}")
    return Ran()


@timed_step()
def resolve_task(plan: RunPlan, name: str, input_dir: str, partition: int, parts: int) -> Decisions:
    """Decide one component partition of a by-component stage: its decisions sent to the
    parts of the records they are about, its requests to the parts they ask."""
    stage = STAGES[name]
    members = pl.scan_parquet(
        storage.files(plan.stage_dir(f"{name}-components") / f"to-{partition:05d}")
    )
    decided = stage.function.components.decide(
        members.collect(),
        pl.scan_parquet(storage.files(input_dir)),
        stage.settings(plan.config),
        plan.context(),
    )
    source = f"from-{partition:05d}"
    folder = plan.stage_dir(f"{name}-decisions")
    _write_found(decided.decisions, folder, source, parts)
    if decided.requests is not None:
        _write_found(decided.requests, plan.stage_dir(f"{name}-requests"), source, parts)
    review = None
    if decided.review_items is not None and decided.review_items.height:
        review = plan.stage_dir(f"{name}-review-items") / f"{source}.parquet"
        review.parent.mkdir(parents=True, exist_ok=True)
        decided.review_items.write_parquet(str(review))
    return Decisions(
        decisions=str(folder),
        stats=decided.stats,
        review_items=review and str(review),
    )


@timed_step()
def evidence_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, parts: int
) -> Ran:
    """Answer what a by-component stage's decisions asked of one part (near dedup: the
    sketches of its kept records), sent to the parts that asked."""
    stage = STAGES[name]
    requests = storage.files(plan.stage_dir(f"{name}-requests") / f"to-{part:05d}")
    rows = stage.function.components.evidence(
        _part(plan, input_dir, offset),
        pl.scan_parquet(requests),
        stage.settings(plan.config),
        plan.context(False),
    )
    _write_found(rows, plan.stage_dir(f"{name}-evidence"), f"part-{part:05d}", parts)
    return Ran()


@timed_step()
def route_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, shard_plan: ShardPlan
) -> Ran:
    """Send one part's published records to the shards they go in, and write their
    `published` events as a ledger part; a retry rewrites them."""
    rows = routed(_part(plan, input_dir, offset), shard_plan)
    events = published_events(rows.select("record_id", "source", "split"))
    ledger.write_part(events, plan.ledger_dir, f"{STAGES[name].ledger_part}-{part:05d}")
    folder = plan.stage_dir(f"{name}-routed")
    _write_sent(
        rows.drop("_shard"), rows["_shard"], len(shard_plan.shards), folder, f"part-{part:05d}"
    )
    return Ran()


@timed_step()
def shard_task(
    plan: RunPlan, name: str, shard: int, shard_plan: ShardPlan, staging: str
) -> Sharded:
    """Write one shard of the version from the records every part routed to it."""
    rows = pl.scan_parquet(storage.files(plan.stage_dir(f"{name}-routed") / f"to-{shard:05d}"))
    entry = write_shard(rows, shard, shard_plan, plan.config.publish, storage.location(staging))
    return Sharded(entry=entry)


STEPS = {
    "check": check_task,
    "read": read_task,
    "finish": finish_task,
    "sample": sample_task,
    "fit": fit_task,
    "build": build_task,
    "decide": decide_task,
    "part": part_task,
    "keys": keys_task,
    "reduce": reduce_task,
    "exchange": exchange_task,
    "edges": edges_task,
    "members": members_task,
    "star": star_task,
    "label": label_task,
    "resolve": resolve_task,
    "evidence": evidence_task,
    "route": route_task,
    "shard": shard_task,
}
