"""The `curate` flow: ingest → govern → quality → exact and near (MinHash) dedup (with label
conflicts) → boilerplate segments → semantic dedup → split (with its leakage check) →
synthetic records → augmentation → contamination → publish (with the field-leakage check)
→ commit → report, one task per stage. Great Expectations gates check the ingested records, the governed records and the
published splits; a failed gate stops the run before the commit.

Tasks pass paths and small summaries, never frames: each stage reads the previous stage's
Parquet output under the run folder and writes its own. The run folder keeps the ledger,
the resolved config and a summary; intermediate record files are removed when the run
publishes, and kept (but the unscreened ingested records) for the next run to resume from
when it does not (flows/resume.py).
"""

from __future__ import annotations

import importlib
import json
import socket
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from data_catalog import deletions, review_queue, splits
from data_catalog.catalog import CATALOG_FILE, Catalog, now
from expectations.checks import approved_records, check_governed, check_ingested, check_published
from expectations.gates import GateFailed, GateProject, GateResult
from flows import artifacts, unchanged, work_folder
from flows import resume as resume_steps
from flows.alerts import on_failure
from flows.config_secrets import refuse_stored_credentials
from flows.lost_runs import sweep_interrupted_runs
from flows.report import (
    GATES_FILE,
    RUN_STEPS,
    repair_missing_reports,
    write_failed_run_report,
    write_version_report,
)
from flows.run_plan import OWNER_FILE, RunPlan, plan_run
from flows.runner import workers
from flows.runner.parts import offsets, rows_per_part
from pipeline.config import SPLITS, load_run_config
from pipeline.core import ledger, progress, storage
from pipeline.core.code_version import code_version
from pipeline.core.errors import ConfigError, ThresherError
from pipeline.core.resources import measured, peak_rss_mb, release_free_memory, reset_peak_rss
from pipeline.ingest.source_files import source_files
from pipeline.ingest.stage import (
    INTERMEDIATE_PARQUET,
    IngestPart,
    finish,
    ingest_stats,
    plan_parts,
    read_part,
)
from pipeline.leakage import check_disjoint, leakage_columns
from pipeline.publish.reader import read_version
from pipeline.publish.stage import ShardPlan, plan_shards, routed, staged_version, write_shard
from pipeline.publish.version import MANIFEST, NOT_PUBLISHED, StagedVersion
from pipeline.split.field_leakage import field_lists, single_feature_check
from pipeline.stage import CURATE_STAGES, STAGES, Indexed, Stage, key_partition
from pipeline.text.secrets import masked_text

TASK_OPTIONS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="ingest", task_run_name="ingest", **TASK_OPTIONS)
def ingest_task(plan: RunPlan) -> dict[str, Any]:
    """Read the sources part by part on the workers (parts of consecutive files or pieces
    of a large one, sized as other stages' parts are, a record taken as 1 KiB), then drop
    repeated ids in one task."""
    out, sources = plan.stage_dir("ingest"), plan.config.source_list
    storage.remove_tree(out)
    for stale in plan.ledger_dir.glob(f"{STAGES['ingest'].ledger_part}*.parquet"):
        stale.unlink()
    size = sum(path.stat().st_size for source in sources for path, _ in source_files(source))
    rows = rows_per_part(size // 1024, workers.current().count, plan.config.runner.part_rows)
    parts = plan_parts(sources, rows * 1024)
    progress.start("ingest", len(parts), "parts")
    read = []
    if parts:
        read = _map_step(_slim(plan), "ingest", "read", {"part": parts}, {}, [1] * len(parts))
    (finished,) = _map_step(_slim(plan), "ingest", "finish", {"folder": [str(out)]}, {})
    per_source = {source.name: {"records_in": 0} for source in sources}
    for part, task_result in zip(parts, read, strict=True):
        per_source[part.source]["records_in"] += task_result["records_in"]
    events = pl.scan_parquet(storage.files(plan.ledger_dir, f"{STAGES['ingest'].ledger_part}*"))
    stats = ingest_stats(per_source, events.select("source", "action").collect(), parts)
    for warning in stats["warnings"]:
        get_run_logger().warning("ingest: %s", warning)
    get_run_logger().info(
        "ingest: %s records in, %s dropped (bad rows and repeated ids), %s encoding repaired, "
        "%s parts",
        stats["records_in"],
        stats["bad_rows"],
        stats["encoding_repaired"],
        len(parts),
    )
    accounting = {
        "parts": len(parts),
        "ledger_parts": len(parts) + 1,  # and the repeated ids'
        "part_peak_rss_mb": max((task["peak_rss_mb"] for task in read), default=None),
        "finish_peak_rss_mb": finished["peak_rss_mb"],
    }
    return {
        "path": str(out),
        "stats": stats,
        "records_out": _rows(str(out)),
        "parts": accounting,
        "ids_digest": finished["ids_digest"],
    }


def read_task(plan: RunPlan, name: str, part: IngestPart) -> dict[str, Any]:
    """Read one part of the sources into the ingest folder, its bad rows' events into the
    ledger; a retry rewrites both."""
    started = _task_start()
    source = next(s for s in plan.config.source_list if s.name == part.source)
    bounds = plan.config.gates.timestamp_bounds(plan.started_at)
    rows_in, bad = read_part(part, source, plan.stage_dir(name), plan.config.ingest, bounds)
    ledger.write_part(bad, plan.ledger_dir, f"{STAGES[name].ledger_part}-{part.number:05d}")
    return {"records_in": rows_in, **_task_facts(started)}


def finish_task(plan: RunPlan, name: str, folder: str) -> dict[str, Any]:
    """Drop repeated ids from every part read (ids only, in one task); their events go to
    the ledger after every part's."""
    started = _task_start(global_step=True)
    events = finish(storage.location(folder))
    ledger.write_part(events, plan.ledger_dir, f"{STAGES[name].ledger_part}-repeats")
    # every record read in: those kept, and those ingest gave a fate (bad rows, repeats)
    ended = pl.scan_parquet(storage.files(plan.ledger_dir, f"{STAGES[name].ledger_part}*"))
    ids_in = ledger.ids_digest(pl.scan_parquet(storage.files(folder, "part-*.parquet"))) ^ (
        ledger.ids_digest(ended.filter(pl.col("terminal")))
    )
    return {"ids_digest": ids_in, **_task_facts(started)}


def _check_output(plan: RunPlan, stage: Stage) -> None:
    """A stage's post-conditions on its output: with no_leakage, no group, cluster or text
    may span two splits (split; synthetic, which moves records between splits; augment after
    variants joined their origins' split), or the run fails. Checked by one task on the
    runner (it reads those columns of every record)."""
    if "no_leakage" in stage.checks:
        _map_step(plan, stage.name, "check", {"folder": [str(plan.stage_dir(stage.name))]}, {})


def check_task(plan: RunPlan, name: str, folder: str) -> dict[str, Any]:
    started = _task_start(global_step=True)
    output = pl.scan_parquet(storage.files(folder))
    check_disjoint(output, leakage_columns(plan.config.split))
    return _task_facts(started)


def _enqueue_for_review(plan: RunPlan, items: pl.DataFrame) -> int:
    catalog = Catalog.open(plan.workdir)
    queued_new = review_queue.enqueue(catalog, items, plan.config.name, plan.run_id)
    deletions.erase_queued_again(catalog)
    return queued_new


@task(name="gate", task_run_name="gate-{gate}", **TASK_OPTIONS)
def gate_task(plan: RunPlan, gate: str, input_dir: str) -> dict[str, Any]:
    """Validate a stage's output against the gate's suites; a failure stops the run."""
    started = time.perf_counter()
    if not plan.config.gates.enabled:
        result = GateResult(gate, skipped=True)
    else:
        project = GateProject.of(plan.run_dir)
        if gate == "ingested":
            records = pl.scan_parquet(storage.files(input_dir))
            result = check_ingested(project, records, plan.config.gates, plan.started_at)
        elif gate == "governed":
            records = pl.scan_parquet(storage.files(input_dir))
            approved = approved_records(plan.ledger_dir)
            result = check_governed(project, records, plan.config, approved)
        else:
            staged = storage.location(input_dir)
            manifest = json.loads((staged / MANIFEST).read_text())
            result = check_published(project, staged, manifest, plan.config)
    order = {"ingested": 1, "governed": 2, "published": 3}[gate]
    saved = plan.run_dir / "gates" / f"{order}-{gate}.json"
    saved.parent.mkdir(exist_ok=True)
    saved.write_text(json.dumps(result.to_json(), indent=2, default=str) + "\n")
    failed = sum(not check["success"] for check in result.checks)
    get_run_logger().info(
        "%s gate: %s",
        gate,
        "skipped" if result.skipped else f"{len(result.checks)} checks, {failed} failed",
    )
    if not result.success:
        raise GateFailed(result, report=plan.run_dir / "report.html")
    return result.to_json() | {"seconds": round(time.perf_counter() - started, 3)}


def _part(plan: RunPlan, input_dir: str, offset: int) -> pl.LazyFrame:
    """Records [offset, offset + plan.part_rows) of a stage's input."""
    if plan.scratch_is_local and not Path(input_dir).is_dir():
        raise ConfigError(
            f"{socket.gethostname()} cannot see the run folder {input_dir}: a worker that "
            "shares no file system with the run needs runner.scratch on object storage that "
            "every worker reaches (s3://bucket/prefix; README: Scale out)"
        )
    rows = plan.part_rows or plan.config.runner.part_rows
    return pl.scan_parquet(storage.files(input_dir)).slice(offset, rows)


def _task_start(global_step: bool = False) -> float:
    """In a worker process (one step at a time), the step's peak RSS window starts here,
    after the memory earlier steps freed went back to the system; the workers of a run serve
    every step. In the run's own process the steps keep their own windows: a global step,
    which runs alone after its parts, hands back what they freed."""
    on_worker = workers.in_worker()
    if on_worker or global_step:
        release_free_memory()
    if on_worker:
        reset_peak_rss()
    return time.perf_counter()


def _task_facts(started: float) -> dict[str, Any]:
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "peak_rss_mb": peak_rss_mb(),  # of the process that ran it: a Dask worker's, this task's
    }


def part_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, shared: str | None = None
) -> dict[str, Any]:
    """Run a per-part stage on one part of its input (an indexed stage against the index in
    the `shared` folder; a by-key stage's apply step by the decisions in the `shared` file)
    and write that part's records, events and review items; a retry rewrites the same files."""
    started = _task_start()
    stage = STAGES[name]
    frame = _part(plan, input_dir, offset)
    ctx = plan.context(with_parent=False)
    function, settings = stage.load(), stage.settings(plan.config)
    if shared is None:
        result = stage(frame, plan.config, ctx)
    elif isinstance(function, Indexed):
        with _local_copy(shared) as index:
            result = function.check(frame, settings, ctx, index)
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
    return {
        "stats": result.stats,
        "review_items": review and str(review),
        "records_out": pl.scan_parquet(str(out)).select(pl.len()).collect().item(),
        **_task_facts(started),
    }


@contextmanager
def _local_copy(folder: str) -> Iterator[Path]:
    """A folder as a local path: itself when local, else a copy (an index on the remote
    scratch) removed after the block."""
    location = storage.location(folder)
    if storage.is_local(location):
        yield location
        return
    with tempfile.TemporaryDirectory(prefix="thresher-") as copy:
        storage.fetch_tree(location, Path(copy))
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


def sample_task(plan: RunPlan, name: str, input_dir: str, part: int, offset: int) -> dict:
    """Write what one part contributes to a by-key stage's fit; a retry rewrites it."""
    started = _task_start()
    stage = STAGES[name]
    sample = stage.load().sample(
        _part(plan, input_dir, offset), stage.settings(plan.config), plan.context(with_parent=False)
    )
    out = plan.stage_dir(f"{name}-sample") / f"part-{part:05d}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    sample.write_parquet(str(out))
    return {"path": str(out), **_task_facts(started)}


def fit_task(plan: RunPlan, name: str, input_dir: str, samples: list[str]) -> dict[str, Any]:
    """Fit a by-key stage's model of the whole dataset from every part's sample, once, and
    write it where every keys task reads it; a retry rewrites it."""
    started = _task_start(global_step=True)
    stage = STAGES[name]
    fitted = stage.load().fit(
        pl.scan_parquet(samples),
        pl.scan_parquet(storage.files(input_dir)),
        stage.settings(plan.config),
    )
    out = plan.stage_dir(f"{name}-fitted") / "fitted.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    fitted.write_parquet(str(out))
    return {"path": str(out), **_task_facts(started)}


def keys_task(
    plan: RunPlan,
    name: str,
    input_dir: str,
    part: int,
    offset: int,
    partitions: int,
    fitted: str | None = None,
) -> dict[str, Any]:
    """Write a by-key stage's keys of one part, one file per key partition (empty ones too,
    so that every partition's reduce reads the keys' schema); a retry rewrites them."""
    started = _task_start()
    stage = STAGES[name]
    by_key = stage.load()
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
    return {"keys": keys.height, **_task_facts(started)}


def _write_sent(rows: pl.DataFrame, to: pl.Series, count: int, folder: Path, source: str) -> None:
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


def _write_found(found: pl.DataFrame, folder: Path, source: str, parts: int) -> str:
    """Write what a by-key step found: rows with `_to_part` to the part each is sent to,
    others into one file. Returns where the next step reads them."""
    if "_to_part" in found.columns:
        _write_sent(found.drop("_to_part"), found["_to_part"], parts, folder, source)
        return str(folder)
    out = folder / f"{source}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    found.write_parquet(str(out))
    return str(out)


def reduce_task(plan: RunPlan, name: str, partition: int, parts: int) -> dict[str, Any]:
    """Reduce one key partition of a by-key stage over every part's keys; a retry rewrites
    its files."""
    started = _task_start()
    stage = STAGES[name]
    keys = storage.files(plan.stage_dir(f"{name}-keys") / f"to-{partition:05d}")
    found = stage.load().reduce(pl.scan_parquet(keys), stage.settings(plan.config))
    out = _write_found(found, plan.stage_dir(f"{name}-found"), f"partition-{partition:05d}", parts)
    return {"path": out, "found": found.height, **_task_facts(started)}


def exchange_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, step: int, parts: int
) -> dict[str, Any]:
    """Run exchange `step` of a by-key stage on one part: the rows sent to it by the step
    before, and its records; a retry rewrites its files."""
    started = _task_start()
    stage = STAGES[name]
    exchange = stage.load().exchanges[step]
    before = plan.stage_dir(f"{name}-found" if step == 0 else f"{name}-x{step - 1}")
    incoming = pl.scan_parquet(storage.files(before / f"to-{part:05d}"))
    found = exchange(
        _part(plan, input_dir, offset),
        incoming,
        stage.settings(plan.config),
        plan.context(with_parent=False),
    )
    out = _write_found(found, plan.stage_dir(f"{name}-x{step}"), f"part-{part:05d}", parts)
    return {"path": out, "found": found.height, **_task_facts(started)}


def route_task(
    plan: RunPlan, name: str, input_dir: str, part: int, offset: int, shard_plan: ShardPlan
) -> dict[str, Any]:
    """Send one part's published records to the shards they go in; a retry rewrites them."""
    started = _task_start()
    rows = routed(_part(plan, input_dir, offset), shard_plan)
    folder = plan.stage_dir(f"{name}-routed")
    _write_sent(
        rows.drop("_shard"), rows["_shard"], len(shard_plan.shards), folder, f"part-{part:05d}"
    )
    return _task_facts(started)


def shard_task(
    plan: RunPlan, name: str, shard: int, shard_plan: ShardPlan, staging: str
) -> dict[str, Any]:
    """Write one shard of the version from the records every part routed to it."""
    started = _task_start()
    rows = pl.scan_parquet(storage.files(plan.stage_dir(f"{name}-routed") / f"to-{shard:05d}"))
    entry = write_shard(rows, shard, shard_plan, plan.config.publish, storage.location(staging))
    return {"entry": entry, **_task_facts(started)}


def build_task(plan: RunPlan, name: str, input_dir: str, folder: str) -> dict[str, Any]:
    """Build an indexed stage's index from its whole input into `folder`, once, on the
    runner (a Dask worker on a cluster: the run's process holds none of it); a retry
    rebuilds it."""
    started = _task_start(global_step=True)
    stage = STAGES[name]
    index = storage.location(folder)
    storage.remove_tree(index)
    records = pl.scan_parquet(storage.files(input_dir))
    with _written_here(index) as built:
        stage.load().build(records, stage.settings(plan.config), plan.context(), built)
    return _task_facts(started)


def decide_task(
    plan: RunPlan, name: str, input_dir: str, found: list[str], fitted: str | None = None
) -> dict[str, Any]:
    """Make a by-key stage's decisions from what its last step `found`, on the runner (a Dask
    worker on a cluster: the run's process holds no key of the whole dataset), and write them
    and their review items under the run folder; a retry rewrites them."""
    started = _task_start(global_step=True)
    stage = STAGES[name]
    decided = stage.load().decide(
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
    return {
        "decisions": str(folder / "decisions.parquet"),
        "stats": decided.stats,
        "review_items": review and str(review),
        **_task_facts(started),
    }


STEP_TASKS = {
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
    "route": route_task,
    "shard": shard_task,
}


def _map_step(
    plan: RunPlan,
    name: str,
    step: str,
    mapped: dict[str, list],
    fixed: dict[str, Any],
    records: list[int] | None = None,
) -> list[dict]:
    """Map one step of a stage over its parts (or key partitions) on the run's workers; one
    item on workers that are the run's own process runs here. As each item finishes, the
    stage's progress advances by its `records` (the step's input records of each item), when
    given."""
    items = len(next(iter(mapped.values())))
    phase = f"{step} {{}}/{items}" if items > 1 else step
    progress.advance(name, 0, phase.format(0))
    run_on = workers.current()
    started = time.perf_counter()
    if items == 1 and plan.config.runner.kind == "local":
        result = STEP_TASKS[step](plan, name, **fixed, **{k: v[0] for k, v in mapped.items()})
        progress.advance(name, records[0] if records else 0, phase.format(1))
        _STEP_SECONDS[name][step] += time.perf_counter() - started
        return [result]
    calls = [
        {
            "plan": plan,
            "name": name,
            **fixed,
            **{key: value[index] for key, value in mapped.items()},
        }
        for index in range(items)
    ]
    results: list[dict] = [{}] * items
    for done, (index, result) in enumerate(run_on.map(STEP_TASKS[step], calls), start=1):
        results[index] = result  # a failure ends it
        progress.advance(name, records[index] if records else 0, phase.format(done))
    _STEP_SECONDS[name][step] += time.perf_counter() - started
    return results


# wall seconds of each stage's steps in this process (a stage's accounting takes them)
_STEP_SECONDS: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))


def _step_seconds(name: str) -> dict[str, float]:
    return {step: round(seconds, 3) for step, seconds in _STEP_SECONDS.pop(name, {}).items()}


def _slim(plan: RunPlan) -> RunPlan:
    """The plan the parts get: only what per-record steps read (no eval sets or test lock)."""
    return replace(plan, eval_sets=(), locked_test=None, frozen_cutoffs=None)


def _parts_of(plan: RunPlan, records: int) -> tuple[RunPlan, list[int]]:
    """For a stage of `records` input records: the plan its parts get (with how many
    records each holds) and where each part starts."""
    rows = rows_per_part(records, workers.current().count, plan.config.runner.part_rows)
    return replace(_slim(plan), part_rows=rows), offsets(records, rows)


def _run_parts(
    plan: RunPlan, name: str, input_dir: str, records: int, shared: str | None = None
) -> tuple[list[dict], dict[str, Any]]:
    """Run a stage (or a by-key stage's apply step) part by part on its `records` input
    records, with what its global step made for every part (`shared`); its parts' results,
    and how they ran."""
    slim, starts = _parts_of(plan, records)
    fixed = {"input_dir": input_dir} | ({"shared": shared} if shared else {})
    sizes = [min(slim.part_rows, records - start) for start in starts]
    parts = _map_step(
        slim, name, "part", {"part": list(range(len(starts))), "offset": starts}, fixed, sizes
    )
    accounting = {
        "parts": len(parts),
        "largest_part_records": max(sizes),
        "slowest_part_seconds": max(part["seconds"] for part in parts),
        "part_peak_rss_mb": max(part["peak_rss_mb"] for part in parts),
    }
    return parts, accounting


def _finish_parts(
    plan: RunPlan,
    name: str,
    records_in: int,
    parts: list[dict],
    stats: dict[str, Any],
    decided_items: pl.DataFrame | None = None,
) -> None:
    """Queue the review items of the parts (and of a by-key stage's decide step), and say in
    a sentence what the stage did (its stats go to the run's summary artifact)."""
    reviewed = [pl.read_parquet(part["review_items"]) for part in parts if part["review_items"]]
    if decided_items is not None and decided_items.height:
        reviewed.insert(0, decided_items)
    if reviewed:
        stats["queued_new"] = _enqueue_for_review(plan, pl.concat(reviewed))
    records_out = sum(part["records_out"] for part in parts)
    queued = f", {stats['queued_new']:,} new item(s) for review" if stats.get("queued_new") else ""
    get_run_logger().info(
        "%s: %s records in, %s out (%s dropped or quarantined%s) in %s part(s)",
        name, f"{records_in:,}", f"{records_out:,}", f"{records_in - records_out:,}", queued,
        len(parts),
    )  # fmt: skip


@task(**TASK_OPTIONS)
def parts_stage_task(plan: RunPlan, name: str, input_dir: str) -> dict[str, Any]:
    """Run a per-part stage part by part (an indexed one after building its index here, once,
    under the run folder, where every part reads it), merge the parts' stats and queue their
    review items."""
    index, built = None, None
    if isinstance(STAGES[name].load(), Indexed):
        index = plan.stage_dir(f"{name}-index")
        (built,) = _map_step(
            plan, name, "build", {"folder": [str(index)]}, {"input_dir": input_dir}
        )
    records = _rows(input_dir)
    parts, accounting = _run_parts(plan, name, input_dir, records, index and str(index))
    if index is not None:
        storage.remove_tree(index)
        accounting |= {"build_seconds": built["seconds"], "build_peak_rss_mb": built["peak_rss_mb"]}
    stats = STAGES[name].merge_stats([part["stats"] for part in parts])
    _finish_parts(plan, name, records, parts, stats)
    accounting["step_seconds"] = _step_seconds(name)
    return {"path": str(plan.stage_dir(name)), "stats": stats, "parts": accounting}


@task(**TASK_OPTIONS)
def keyed_stage_task(plan: RunPlan, name: str, input_dir: str) -> dict[str, Any]:
    """Run a by-key stage: its keys part by part, sent to P key partitions (P = the number of
    parts); each partition reduced; its exchanges part by part; the decisions made by one task
    from what the last step found (ids and hashes, never records); then each part edited by
    them. A stage its config turns off runs no task: its input goes on as its output."""
    stage = STAGES[name]
    by_key = stage.load()
    if (stats := by_key.off(stage.settings(plan.config))) is not None:
        get_run_logger().info("%s: off in the run config; its input goes on unchanged", name)
        return {"path": input_dir, "stats": stats, "parts": {"parts": 0}}
    records = _rows(input_dir)
    slim, starts = _parts_of(plan, records)
    partitions = len(starts)  # each about one part's keys
    fitting, model = [], {}
    if by_key.fit is not None:  # keys need a model of the whole dataset: fit it first
        sampled = _map_step(
            slim, name, "sample", {"part": list(range(partitions)), "offset": starts},
            {"input_dir": input_dir},
        )  # fmt: skip
        samples = [task["path"] for task in sampled]
        fitting = sampled + _map_step(
            slim, name, "fit", {"samples": [samples]}, {"input_dir": input_dir}
        )
        model = {"fitted": fitting[-1]["path"]}
    keyed = _map_step(
        slim, name, "keys", {"part": list(range(partitions)), "offset": starts},
        {"input_dir": input_dir, "partitions": partitions} | model,
    )  # fmt: skip
    reduced = _map_step(
        slim, name, "reduce", {"partition": list(range(partitions))}, {"parts": partitions}
    )
    found, exchanged = [task["path"] for task in reduced], []
    for step in range(len(by_key.exchanges)):  # each reads what the step before sent its part
        sent = _map_step(
            slim, name, "exchange", {"part": list(range(partitions)), "offset": starts},
            {"input_dir": input_dir, "step": step, "parts": partitions},
        )  # fmt: skip
        found, exchanged = [task["path"] for task in sent], exchanged + sent
    (decided,) = _map_step(
        plan, name, "decide", {"found": [found]}, {"input_dir": input_dir} | model
    )
    parts, accounting = _run_parts(plan, name, input_dir, records, decided["decisions"])
    stats = by_key.merge_stats(decided["stats"], [part["stats"] for part in parts])
    review = decided["review_items"] and pl.read_parquet(decided["review_items"])
    _finish_parts(plan, name, records, parts, stats, review)
    _check_output(plan, stage)
    accounting |= {
        "key_partitions": partitions,
        "keys": sum(part["keys"] for part in keyed),
        "keys_peak_rss_mb": max(task["peak_rss_mb"] for task in keyed),
        "reduce_peak_rss_mb": max(task["peak_rss_mb"] for task in reduced),
        **({"exchange_peak_rss_mb": max(t["peak_rss_mb"] for t in exchanged)} if exchanged else {}),
        **({"fit_peak_rss_mb": max(t["peak_rss_mb"] for t in fitting)} if fitting else {}),
        "decide_seconds": decided["seconds"],
        "decide_peak_rss_mb": decided["peak_rss_mb"],
        "step_seconds": _step_seconds(name),
    }
    return {"path": str(plan.stage_dir(name)), "stats": stats, "parts": accounting}


STAGE_TASKS = {"per_part": parts_stage_task, "by_key": keyed_stage_task}


def _staging_dir(plan: RunPlan) -> storage.Location:
    """Where the shards are written: beside the versions (a rename makes one permanent), or
    in the run's remote scratch, where every worker writes."""
    if not plan.scratch_is_local:
        return plan.scratch_root / "staging"
    return plan.workdir / "datasets" / plan.config.name / f".staging-{plan.run_id}"


@task(name="publish", task_run_name="publish", **TASK_OPTIONS)
def publish_task(plan: RunPlan, input_dir: str, stats: dict[str, dict]) -> dict[str, Any]:
    """Write the shards and the manifest; beside the hash, the manifest records how the
    splits were made, every source's terms (synthetic ones with their generator), the
    label-conflict rate per source and the published, excluded and leaking fields."""
    split_stats = stats["split"]
    staging = _staging_dir(plan)
    staging.mkdir(parents=True)
    ids = pl.scan_parquet(storage.files(input_dir)).select("record_id", "source", "split")
    ids = ids.collect()  # of every published record: the shards are planned from them
    published = dict(ids.group_by("source").len().iter_rows())
    split_facts = {  # beside the hash, for audits: how the splits were made and protected
        "split": {
            "strategy": plan.config.split.strategy,
            "cutoffs": split_stats.get("cutoffs"),
            "locked_test": plan.test_lock,
        },
        "protected_eval_sets": [
            {"name": s.name, "items": s.items.height, "path": str(s.folder)} for s in plan.eval_sets
        ],
    }
    fields = _field_facts(plan, input_dir)
    sources = [  # every declared source, with how many of its records this version holds
        {
            "name": s.name,
            "license": s.license,
            "consent": s.consent,
            "owner": s.owner,
            "records": published.get(s.name, 0),
            "synthetic": s.synthetic.model_dump(mode="json") if s.synthetic else None,
        }
        for s in plan.config.source_list
    ]
    staged, accounting = _write_version(
        plan,
        input_dir,
        ids,
        staging,
        extra={
            "code_version": code_version(),
            "sources": sources,
            **split_facts,
            "label_conflicts": label_conflict_rates([stats["exact_dedup"], stats["near_dedup"]]),
            "fields": fields,
        },
    )
    ledger.write_part(staged.events, plan.ledger_dir, STAGES["publish"].ledger_part)
    return {
        "path": str(staging),
        "dataset_hash": staged.dataset_hash,
        "split_counts": staged.manifest["split_counts"],
        "fields": fields,
        "label_conflicts": staged.manifest["label_conflicts"],
        "parts": accounting,
    }


def _write_version(
    plan: RunPlan,
    input_dir: str,
    ids: pl.DataFrame,
    staging: storage.Location,
    extra: dict[str, Any],
) -> tuple[StagedVersion, dict[str, Any]]:
    """Publish part by part: the shards planned here from the records' `ids` (record_id,
    source, split), each part's records routed to their shards, each shard sorted and
    written, the manifest last."""
    name = "publish"
    shard_plan = plan_shards(ids, plan.config.publish)
    slim, starts = _parts_of(plan, ids.height)
    routed_parts = _map_step(
        slim, name, "route", {"part": list(range(len(starts))), "offset": starts},
        {"input_dir": input_dir, "shard_plan": shard_plan},
    )  # fmt: skip
    shards = []
    if shard_plan.shards:
        shards = _map_step(
            slim, name, "shard", {"shard": list(range(len(shard_plan.shards)))},
            {"shard_plan": shard_plan, "staging": str(staging)},
        )  # fmt: skip
    storage.remove_tree(plan.stage_dir(f"{name}-routed"))
    staged = staged_version(
        ids, shard_plan, [shard["entry"] for shard in shards], plan.context(), staging, extra
    )
    accounting = {
        "parts": len(starts),
        "shards": len(shards),
        "part_peak_rss_mb": max(task["peak_rss_mb"] for task in routed_parts + shards),
    }
    return staged, accounting


def _field_facts(plan: RunPlan, input_dir: str) -> dict[str, Any]:
    """Published and excluded metadata fields, and the single-feature leakage check on the
    train split: a field that alone predicts the label is a warning in the run's report."""
    train = (
        pl.scan_parquet(storage.files(input_dir))
        .filter(pl.col("split") == "train")
        .select("record_id", "label", "metadata")
        .collect()
    )
    checked = single_feature_check(train, plan.config.field_leakage)
    warnings = [
        f"metadata field {entry['field']!r} alone predicts the train label with balanced "
        f"accuracy {entry['balanced_accuracy']:.3f} (bound "
        f"{plan.config.field_leakage.max_accuracy}): if it is known only after the outcome, "
        "declare it known_after_outcome; never give it to train.features unless that is intended"
        for entry in checked
        if entry["leaks"]
    ]
    for warning in warnings:
        get_run_logger().warning("field leakage: %s", warning)
    return {
        **field_lists(plan.config.source_list),
        "single_feature_check": checked,
        "leakage_warnings": warnings,
    }


@task(name="commit", task_run_name="commit", **TASK_OPTIONS)
def commit_task(
    plan: RunPlan, staging_dir: str, records_in: int, generated: int, ids_in: int
) -> dict[str, Any]:
    """Check the accounting (counts and record ids), keep the ledger, then write the catalog
    row last."""
    # the parts stay until the version is in: a run killed here is resumed from them
    ledger_path = ledger.consolidate(plan.ledger_dir, plan.run_dir / "ledger.parquet", True)
    log = pl.scan_parquet(ledger_path)
    counts = ledger.check_accounting(log, records_in, generated, ids_in)
    staging = storage.location(staging_dir)
    if plan.locked_test is not None:
        published = read_version(staging, verify=False).membership().collect()
        splits.check_lock_kept(plan.locked_test, published, pl.scan_parquet(ledger_path))
    storage.copy_file(ledger_path, staging / "ledger.parquet")
    gates = [
        json.loads(path.read_text()) for path in sorted((plan.run_dir / "gates").glob("*.json"))
    ]
    (staging / GATES_FILE).write_text(json.dumps(gates, indent=2) + "\n")
    staged = StagedVersion.load(staging)
    catalog = Catalog.open(plan.workdir)
    version, created = catalog.commit(staged, plan.config.source_list, plan.config.publish.location)
    cutoffs = staged.manifest["split"]["cutoffs"]
    if plan.config.split.cutoffs == "quantiles" and plan.frozen_cutoffs is None and cutoffs:
        splits.freeze_cutoffs(catalog, plan.config.name, cutoffs, version.dataset_hash)
    return {
        "dataset_hash": version.dataset_hash,
        "created": created,
        "path": str(catalog.version_path(version)),
        "counts": counts,
    }


def summarize(
    plan: RunPlan,
    records_in: int,
    committed: dict[str, Any],
    stats: dict[str, dict],
    staged: dict[str, Any],
) -> dict[str, Any]:
    """The run's summary from the stages' stats (by stage name), the manifest's facts and
    the ledger."""
    fields, label_conflicts = staged["fields"], staged["label_conflicts"]
    events = pl.scan_parquet(plan.run_dir / "ledger.parquet")
    version_dir = storage.location(committed["path"])
    split_stats, contamination_stats = stats["split"], stats["contamination"]
    dedup = {"exact": stats["exact_dedup"], "minhash": stats["near_dedup"]}
    return {
        "run_id": plan.run_id,
        "name": plan.config.name,
        "dataset_hash": committed["dataset_hash"],
        "created": committed["created"],
        "parent_version": plan.parent_version,
        "records_in": records_in,
        "generated": stats["augment"].get("generated", 0),
        **committed["counts"],
        "reasons": ledger.counts_by_reason(events, terminal=True),
        "changes": ledger.counts_by_reason(events, terminal=False),  # edits and moves
        "quality": stats["quality"],
        "dedup": {
            **dedup,
            "boilerplate": stats["boilerplate"],
            "semantic": stats["semantic_dedup"],
        },
        "label_conflicts": label_conflicts,
        "splits": _published_splits(version_dir),
        "split": {
            key: split_stats[key]
            for key in ("cutoffs", "cutoffs_frozen", "locked", "moved", "dropped", "warnings")
            if key in split_stats
        },
        "synthetic": stats["synthetic"],
        "augment": stats["augment"],
        "contamination": contamination_stats,
        "fields": {
            "excluded": fields["excluded"],
            "leakage_warnings": fields["leakage_warnings"],
        },
        "review": {
            "queued_new": sum(stage.get("queued_new", 0) for stage in stats.values()),
            "quarantined_items": stats["govern"]["review_items"]
            + contamination_stats["quarantined"],
        },
        "paths": {
            "version": str(version_dir),
            "manifest": str(version_dir / MANIFEST),
            "shards": str(version_dir / "data"),
            "ledger": str(plan.run_dir / "ledger.parquet"),
            "catalog": str(plan.workdir / CATALOG_FILE),
            "run": str(plan.run_dir),
            "prefect": _flow_run_url(),
        },
    }


def _flow_run_url() -> str | None:
    """The run's page in the Prefect UI (None without a UI: a temporary server has none)."""
    from prefect.runtime import flow_run
    from prefect.utilities.urls import url_for

    return url_for("flow-run", obj_id=flow_run.get_id())


def label_conflict_rates(dedup_stats) -> dict[str, dict[str, float | int]]:
    """Per source: labelled records the dedup stages saw, those in label conflicts, the rate."""
    labelled: dict[str, int] = {}
    conflicting: dict[str, int] = {}
    for stats in dedup_stats:
        for source, count in stats.get("labelled_by_source", {}).items():
            labelled[source] = max(labelled.get(source, 0), count)  # exact dedup saw the most
        by_source = stats.get("label_conflicts", {}).get("by_source", {})
        for source, count in by_source.items():
            conflicting[source] = conflicting.get(source, 0) + count
    return {
        source: {
            "labelled": labelled[source],
            "conflicting": conflicting.get(source, 0),
            "rate": round(conflicting.get(source, 0) / labelled[source], 6),
        }
        for source in sorted(labelled)
        if labelled[source]
    }


def _published_splits(version_dir: storage.Location) -> dict[str, dict[str, int]]:
    """Records and groups per split as published (after every stage, contamination too)."""
    version = read_version(version_dir, verify=False)
    found = {
        name: frame.select(
            pl.len().alias("records"),
            pl.coalesce("group", "record_id").n_unique().alias("groups"),  # no group: its own
        )
        .collect()
        .row(0, named=True)
        for name, frame in version.splits.items()
    }
    return {name: found.get(name, {"records": 0, "groups": 0}) for name in SPLITS}


# The stages between ingest and publishing, in registry order: each reads the one before.
RECORD_STAGES = tuple(s.name for s in CURATE_STAGES if s.kind == "records")


@flow(name="curate", log_prints=True, on_failure=[on_failure], on_crashed=[on_failure])
def curate(config_path: str, resume: bool = False, force: bool = False) -> dict[str, Any]:
    """Curate the sources of a run config into a new published, cataloged dataset version.
    When the latest version was built from exactly what this run would read, nothing is done
    and its run's summary is returned (flows/unchanged.py), unless `force`. The steps an
    earlier failed run of the same inputs finished are reused (flows/resume.py); with
    `resume`, finding none is an error."""
    try:
        cfg = load_run_config(config_path)
        refuse_stored_credentials(cfg, config_path)
    except ThresherError as error:  # Prefect stores and logs the message: no credential in it
        raise type(error)(masked_text(str(error))) from None
    work_folder.check(Path(cfg.workdir))  # a file, read-only or full: said before anything runs
    catalog = Catalog.open(cfg.workdir)
    previous, inputs = unchanged.check(cfg, catalog)
    if previous is not None and not (force or resume):
        get_run_logger().info(
            "unchanged: %s %s was built from these inputs, config, code and catalog state by "
            "run %s; nothing to do (force=True runs anyway)",
            cfg.name, previous["dataset_hash"][:12], previous["run_id"],
        )  # fmt: skip
        repair_missing_reports(catalog)
        artifacts.publish_unchanged(previous)
        return previous | {"unchanged_since": previous["run_id"]}
    if cfg.gates.enabled:  # Great Expectations takes ~2 s to import: while the run starts
        threading.Thread(target=importlib.import_module, args=("great_expectations",)).start()
    started = now()  # before plan_run reads the review decisions this run will apply
    sweep_interrupted_runs(cfg, catalog)
    plan = plan_run(cfg, catalog, started)
    catalog.start_run(plan.run_id, cfg.name, plan.config_hash, started_at=started)
    records_in, committed = None, None
    steps: dict[str, dict] = {}  # seconds, peak RSS and records of every step, in run order
    run_workers = ExitStack()
    try:
        run_workers.enter_context(workers.opened(cfg.runner))
        resumed_from, reusable = _resume(plan, resume, inputs)

        def step(name: str, run: Callable[[], dict], records: str | None = None) -> dict:
            """Reuse the step if the run resumed and every step before it was reused; else
            run it, its progress counted in the records of the `records` folder."""
            if name in reusable:
                steps[name] = {"seconds": 0.0, "peak_rss_mb": 0.0, "resumed_from": resumed_from}
                progress.start(name)
                progress.finish(name, f"reused from run {resumed_from}")
                return reusable[name]
            reusable.clear()
            total = _rows(records) if records and progress.shown_anywhere() else None
            with shown_step(name, total) as note, measured() as steps[name]:
                result = run()
                if progress.shown_anywhere():
                    note.append(_step_note(result))
            resume_steps.save(plan, name, result)
            return result

        def gate_beside(gate: str, folder: str) -> Callable[[], dict]:
            """Start a gate on `folder` beside the next stage (on a thread here, while the
            stage's parts run on the workers); the call returned waits for it, and a failed
            gate stops the run there, before anything is published."""
            name = f"{gate} gate"
            if name in reusable:
                reused = step(name, dict)
                return lambda: reused
            reusable.clear()
            steps[name] = {}  # its place in the run's order of steps, before the next stage
            checking = gate_task.submit(plan, gate, folder)

            def wait() -> dict:
                result = step(name, checking.result)
                steps[name] |= {"seconds": result["seconds"], "beside_the_next_stage": True}
                return result

            return wait

        ingested = step("ingest", lambda: ingest_task(plan))
        records_in = ingested["stats"]["records_in"]
        gates: list[dict] = []
        waiting = [gate_beside("ingested", ingested["path"])]
        stages: dict[str, dict] = {}
        path = ingested["path"]
        for name in RECORD_STAGES:
            run_stage = STAGE_TASKS[STAGES[name].runs].with_options(name=name, task_run_name=name)
            stages[name] = step(name, lambda: run_stage(plan, name, path), path)  # noqa: B023
            path = stages[name]["path"]
            gates += [wait() for wait in waiting]  # the gate that ran beside this stage
            waiting = [gate_beside("governed", path)] if name == "govern" else []
        reusable.clear()
        stats = {name: stage["stats"] for name, stage in stages.items()}
        total = _rows(path) if progress.shown_anywhere() else None
        with shown_step("publish", total) as note, measured() as steps["publish"]:
            staged = publish_task(plan, path, stats)
            note.append(f"{sum(staged['split_counts'].values()):,} records in the version")
        with shown_step("published gate") as note, measured() as steps["published gate"]:
            gates.append(gate_task(plan, "published", staged["path"]))
            note.append(_step_note(gates[-1]))  # a few keys: no file read
        generated = stages["augment"]["stats"].get("generated", 0)
        with shown_step("commit"), measured() as steps["commit"]:
            committed = commit_task(
                plan, staged["path"], records_in, generated, ingested["ids_digest"]
            )
        summary = summarize(plan, records_in, committed, stats, staged)
        summary["steps"] = _with_records(steps, records_in, ingested, stages, staged)
        summary["resumed_from"] = resumed_from
        summary["warnings"] = ingested["stats"].get("warnings", [])
        (plan.run_dir / RUN_STEPS).write_text(json.dumps(summary["steps"], indent=2) + "\n")
        run_workers.close()
    except BaseException as error:
        run_workers.close()
        try:
            catalog.finish_run(plan.run_id, "failed", error=f"{type(error).__name__}: {error}")
        finally:
            _cleanup(plan, failed=committed is None)
            if committed is None:
                _report_failure(plan, error, records_in)
            else:  # the version is in the catalog: its report, not a failed run's
                _report_version(plan, committed["dataset_hash"])
        _release(plan)  # not when the row could not be finished: the next run's sweep does
        raise
    _cleanup(plan)
    counts = {
        key: summary[key]
        for key in ("records_in", "generated", "published", "dropped", "quarantined")
    }
    catalog.finish_run(
        plan.run_id,
        "succeeded",
        dataset_hash=summary["dataset_hash"],
        created_version=summary["created"],
        counts=counts | {"reasons": summary["reasons"]},
    )
    _release(plan)
    summary["gates"] = {
        gate["gate"]: "skipped" if gate["skipped"] else f"passed {len(gate['checks'])} checks"
        for gate in gates
    }
    # the report reads the run's stage figures (languages per source) from its summary
    (plan.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with shown_step("report"), measured() as summary["steps"]["report"]:
        summary["paths"]["report"] = _report_version(plan, summary["dataset_hash"])
    (plan.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if inputs is not None:
        unchanged.record(plan.run_dir, inputs, catalog, cfg)
    artifacts.publish_run(summary, stats)
    return summary


@contextmanager
def shown_step(name: str, total: int | None = None) -> Iterator[list[str]]:
    """Show a step's progress; what the block appends is said when it ends."""
    note: list[str] = []
    progress.start(name, total, "records" if total is not None else "")
    try:
        yield note
    except BaseException:
        progress.finish(name, "failed")
        raise
    progress.finish(name, "; ".join(note))


def _step_note(result: dict[str, Any]) -> str:
    """What a finished step says: a gate its checks, a stage the records it passed on."""
    if "checks" in result:
        failed = sum(not check["success"] for check in result["checks"])
        return (
            "skipped"
            if result.get("skipped")
            else f"{len(result['checks'])} checks, {failed} failed"
        )
    if "records_out" in result:
        return f"{result['records_out']:,} records"
    if result.get("parts") == {"parts": 0}:
        return "off"
    if "path" in result:
        return f"{_rows(result['path']):,} records out"
    return ""


def _with_records(
    steps: dict[str, dict],
    records_in: int,
    ingested: dict[str, Any],
    stages: dict[str, dict],
    staged: dict[str, Any],
) -> dict[str, dict]:
    """`steps` with the records each stage read and wrote (its output's Parquet metadata),
    and how the per-part stages ran: parts, the largest, the slowest and the peak RSS of the
    processes that ran them."""
    written = {"ingest": ingested["records_out"]}  # its records are gone once governed
    written |= {name: _rows(stage["path"]) for name, stage in stages.items()}
    written["publish"] = sum(staged["split_counts"].values())
    read = records_in
    for name, step in steps.items():
        if name in written:
            step |= {"records_in": read, "records_out": written[name]}
            read = written[name]
    for name, stage in stages.items():
        steps[name] |= stage.get("parts", {})
    steps["ingest"] |= ingested.get("parts", {})
    steps["publish"] |= staged.get("parts", {})
    return steps


def _rows(folder: str) -> int:
    return pl.scan_parquet(storage.files(folder)).select(pl.len()).collect().item()


def _cleanup(plan: RunPlan, failed: bool = False) -> None:
    """Remove the run's intermediate files; a run that ends without a version keeps what the
    next run may resume from (flows/resume.py), and the events it got to, for diagnosis."""
    storage.remove_tree(_staging_dir(plan))
    if not plan.scratch_is_local:  # nothing on object storage is kept to resume from
        storage.remove_tree(plan.scratch_root)
        resume_steps.discard(plan.run_dir)
        return
    if failed:
        if plan.ledger_dir.exists():
            ledger.consolidate(plan.ledger_dir, plan.run_dir / "ledger.parquet", keep_parts=True)
        resume_steps.keep_for_resume(plan.run_dir)
    else:
        resume_steps.discard(plan.run_dir)


def _release(plan: RunPlan) -> None:
    """The run's row says how it ended: its owner file goes (sweep_interrupted_runs)."""
    (plan.run_dir / OWNER_FILE).unlink(missing_ok=True)


def _step_order() -> list[tuple[str, str | None]]:
    """The steps a run may resume from, in run order, with their ledger parts."""
    order: list[tuple[str, str | None]] = []
    for name in ("ingest", *RECORD_STAGES):
        order.append((name, STAGES[name].ledger_part))
        if name in ("ingest", "govern"):
            order.append((f"{'ingested' if name == 'ingest' else 'governed'} gate", None))
    return order


def _resume(
    plan: RunPlan, required: bool, inputs: dict[str, Any] | None
) -> tuple[str | None, dict[str, dict]]:
    resume_steps.start(plan, inputs)
    resumed_from, reusable = resume_steps.adopt(plan, _step_order())
    if resumed_from is None and required:
        raise ConfigError(
            f"nothing to resume for {plan.config.name!r}: no earlier run of it that ended "
            "without a version kept its files with the same inputs, config, code and catalog "
            "state (a changed file, config, deletion request or review decision starts "
            "afresh; a run whose runner.scratch is on object storage keeps nothing); run "
            "without --resume"
        )
    if resumed_from is not None:
        order = ["ingest", "ingested gate", "govern", "governed gate", *RECORD_STAGES[1:]]
        get_run_logger().info(
            "resuming run %s: reusing %s",
            resumed_from,
            ", ".join(sorted(reusable, key=order.index)),
        )
    return resumed_from, reusable


@task(name="report", task_run_name="report", **TASK_OPTIONS)
def report_task(plan: RunPlan, dataset_hash: str) -> str:
    catalog = Catalog.open(plan.workdir)
    folder = write_version_report(catalog, catalog.version(dataset_hash))
    get_run_logger().info("report: %s", folder / "report.html")
    return str(folder / "report.html")


def _report_version(plan: RunPlan, dataset_hash: str) -> str | None:
    """The version is committed whatever happens here: a report can be regenerated with
    `thresher report HASH`, so failing to write one is logged, not fatal."""
    try:
        return report_task(plan, dataset_hash)
    except Exception as error:
        get_run_logger().error("could not write the report of %s: %s", dataset_hash[:12], error)
        return None


def _report_failure(plan: RunPlan, error: BaseException, records_in: int | None) -> None:
    try:
        sources = [source.model_dump(mode="json") for source in plan.config.source_list]
        config = plan.config.model_dump(mode="json", exclude=NOT_PUBLISHED)
        reason = f"{type(error).__name__}: {error}"
        path = write_failed_run_report(
            plan.run_dir, plan.config.name, config, sources, reason, records_in
        )
        get_run_logger().error("the run failed; its report: %s", path)
    except Exception as failure:  # never hide the run's own error
        get_run_logger().error("could not write the failed run's report: %s", failure)
