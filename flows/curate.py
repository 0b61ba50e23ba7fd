"""The `curate` flow: the stages of pipeline/registry.py in order (ingest → govern → quality
→ exact and near (MinHash) dedup → boilerplate → semantic dedup → split → synthetic →
augmentation → contamination → publish), each a Prefect task whose steps run on the run's
workers (flows/runner), then the commit and the report. A Great Expectations gate runs on the
output of each stage that declares one (ingested, governed: beside the next stage; published:
before the commit); a failed gate stops the run before the commit.

Tasks pass paths and small summaries, never frames: each stage reads the previous stage's
Parquet output in the run's scratch and writes its own. The run folder keeps the ledger, the
resolved config and a summary; intermediate record files are removed when the run
publishes, and kept (but the unscreened ingested records) for the next run to resume from
when it does not (flows/resume.py).
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from data_catalog.catalog import Catalog, now
from expectations.checks import approved_records, check_governed, check_ingested, check_published
from expectations.gates import GateFailed, GateProject, GateResult
from flows import artifacts, publishing, unchanged, work_folder
from flows import resume as resume_steps
from flows.alerts import on_failure
from flows.config_secrets import refuse_stored_credentials
from flows.lost_runs import sweep_interrupted_runs
from flows.report import (
    RUN_STEPS,
    repair_missing_reports,
    write_failed_run_report,
    write_version_report,
)
from flows.run_plan import OWNER_FILE, RunPlan, plan_run
from flows.runner import strategies, workers
from flows.runner.strategies import StageDone
from pipeline.config import RunConfig, load_run_config
from pipeline.core import ledger, progress, storage
from pipeline.core.errors import ConfigError, ThresherError
from pipeline.core.resources import limit_malloc_arenas, measured
from pipeline.ingest.source_files import source_files
from pipeline.publish.version import MANIFEST, NOT_PUBLISHED
from pipeline.registry import RECORD_STAGES, STAGES
from pipeline.text.secrets import masked_text

TASK_OPTIONS = {"cache_policy": NO_CACHE, "persist_result": False}
ingest_task = task(strategies.ingest, name="ingest", task_run_name="ingest", **TASK_OPTIONS)
stage_task = task(strategies.run_stage, **TASK_OPTIONS)
publish_task = task(
    publishing.publish_task, name="publish", task_run_name="publish", **TASK_OPTIONS
)
commit_task = task(publishing.commit_task, name="commit", task_run_name="commit", **TASK_OPTIONS)


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
            approved = approved_records(plan.ledger_dir, STAGES["govern"].ledger_part)
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


@flow(name="curate", log_prints=True, on_failure=[on_failure], on_crashed=[on_failure])
def curate(config_path: str, resume: bool = False, force: bool = False) -> dict[str, Any]:
    """Curate the sources of a run config into a new published, cataloged dataset version.
    When the latest version was built from exactly what this run would read, nothing is done
    and its run's summary is returned (flows/unchanged.py), unless `force`. The steps an
    earlier failed run of the same inputs finished are reused (flows/resume.py); with
    `resume`, finding none is an error."""
    limit_malloc_arenas()  # before the run's steps start threads here
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
    _check_space(cfg)  # after the sweep removed what interrupted runs left
    plan = plan_run(cfg, catalog, started)
    catalog.start_run(plan.run_id, cfg.name, plan.config_hash, started_at=started)
    records_in, committed = None, None
    steps: dict[str, dict] = {}  # seconds, peak RSS and records of every step, in run order
    run_workers = ExitStack()
    try:
        run_workers.enter_context(workers.opened(cfg.runner))
        resumed_from, reusable = _resume(plan, resume, inputs)

        def step(name: str, run: Callable[[], Any], records: int | None = None) -> Any:
            """Reuse the step if the run resumed and every step before it was reused; else
            run it, its progress counted in its `records` input records."""
            if name in reusable:
                steps[name] = {"seconds": 0.0, "peak_rss_mb": 0.0, "resumed_from": resumed_from}
                progress.start(name)
                progress.finish(name, f"reused from run {resumed_from}")
                reused = reusable[name]
                return StageDone(**reused) if "path" in reused else reused
            reusable.clear()
            total = records if progress.shown_anywhere() else None
            with shown_step(name, total) as note, measured() as steps[name]:
                result = run()
                if progress.shown_anywhere():
                    note.append(_step_note(result))
            saved = result.to_json() if isinstance(result, StageDone) else result
            resume_steps.save(plan, name, saved)
            if isinstance(result, StageDone):  # before its spent files go: its peak
                steps[name]["disk_mb"] = _disk_mb(plan)
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

        ingested: StageDone = step("ingest", lambda: ingest_task(plan))
        records_in = ingested.stats["records_in"]
        gates: list[dict] = []
        waiting = [gate_beside(STAGES["ingest"].gate_after, ingested.path)]
        stages: dict[str, StageDone] = {}
        last = ingested
        for name in RECORD_STAGES:
            run_stage = stage_task.with_options(name=name, task_run_name=name)
            run = functools.partial(run_stage, plan, name, last.path)
            read, last = last, step(name, run, last.records_out)
            stages[name] = last
            gates += [wait() for wait in waiting]  # the gate that ran beside this stage
            _remove_spent(plan, name, read, last)
            gate = STAGES[name].gate_after
            waiting = [gate_beside(gate, last.path)] if gate else []
        reusable.clear()
        stats = {name: stage.stats for name, stage in stages.items()}
        total = last.records_out if progress.shown_anywhere() else None
        with shown_step("publish", total) as note, measured() as steps["publish"]:
            staged = publish_task(plan, last.path, stats)
            note.append(f"{sum(staged['split_counts'].values()):,} records in the version")
        steps["publish"]["disk_mb"] = _disk_mb(plan)
        gate = STAGES["publish"].gate_after
        with shown_step(f"{gate} gate") as note, measured() as steps[f"{gate} gate"]:
            gates.append(gate_task(plan, gate, staged["path"]))
            note.append(_step_note(gates[-1]))  # a few keys: no file read
        generated = sum(stage.get("generated", 0) for stage in stats.values())
        with shown_step("commit"), measured() as steps["commit"]:
            committed = commit_task(
                plan, staged["path"], records_in, generated, ingested.ids_digest
            )
        summary = publishing.summarize(plan, records_in, committed, stats, staged)
        summary["steps"] = _with_records(steps, records_in, ingested, stages, staged)
        summary["resumed_from"] = resumed_from
        summary["warnings"] = ingested.stats.get("warnings", [])
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


def _step_note(result: StageDone | dict[str, Any]) -> str:
    """What a finished step says: a gate its checks, a stage the records it passed on."""
    if isinstance(result, StageDone):
        return f"{result.records_out:,} records out" if result.ran else "off"
    failed = sum(not check["success"] for check in result["checks"])
    skipped = result.get("skipped")
    return "skipped" if skipped else f"{len(result['checks'])} checks, {failed} failed"


def _with_records(
    steps: dict[str, dict],
    records_in: int,
    ingested: StageDone,
    stages: dict[str, StageDone],
    staged: dict[str, Any],
) -> dict[str, dict]:
    """`steps` with the records each stage read and wrote, and how the stages' parts ran:
    parts, the largest, the slowest and the peak RSS of the processes that ran them."""
    written = {name: stage.records_out for name, stage in {"ingest": ingested, **stages}.items()}
    written["publish"] = sum(staged["split_counts"].values())
    read = records_in
    for name, step in steps.items():
        if name in written:
            step |= {"records_in": read, "records_out": written[name]}
            read = written[name]
    for name, stage in {"ingest": ingested, **stages}.items():
        steps[name] |= stage.parts
    steps["publish"] |= staged.get("parts", {})
    return steps


def _check_space(cfg: RunConfig) -> None:
    """Stop before anything runs when the disk a run's intermediate files go to (its work
    folder, or a local runner.scratch) has too little free space for its sources' size."""
    scratch = storage.location(cfg.runner.scratch or cfg.workdir)
    if not storage.is_local(scratch):
        return  # object storage: no free space to read
    try:
        listed = [path for source in cfg.source_list for path, _ in source_files(source)]
        size = sum(path.stat().st_size for path in listed)
    except (OSError, ThresherError):  # ingest says what is wrong with a source, in a run
        return
    work_folder.check_space(Path(scratch), size)


def _disk_mb(plan: RunPlan) -> float:
    """What the run has on the local disk now: its run folder, its scratch when that is
    another local folder, and its staged shards (MB)."""
    folders = [plan.run_dir, publishing.staging_dir(plan)]
    if plan.scratch_is_local and not plan.scratch_in_run_dir:
        folders.append(plan.scratch_root)
    local = [Path(folder) for folder in folders if storage.is_local(folder)]
    return round(sum(work_folder.used_bytes(folder) for folder in local) / 1e6, 1)


def _remove_spent(plan: RunPlan, name: str, read: StageDone, wrote: StageDone) -> None:
    """Remove what no later step reads once stage `name` and the gate beside it are done:
    its own intermediate files (keys, exchanges, decisions: a retried task of it is the only
    reader) and the records it read (the stage before's output; a stage its config turns off
    passes its input on, which stays). A resumed run needs only the output of the last stage
    that finished, which stays until the next one has."""
    for folder in plan.stage_dir(name).parent.glob(f"{name}-*"):
        storage.remove_tree(folder)
    if read.path != wrote.path:
        storage.remove_tree(storage.location(read.path))


def _cleanup(plan: RunPlan, failed: bool = False) -> None:
    """Remove the run's intermediate files; a run that ends without a version keeps what the
    next run may resume from (flows/resume.py), and the events it got to, for diagnosis. A
    scratch of its own (runner.scratch) is removed whatever happened: it keeps nothing to
    resume from, only its events, consolidated into the run folder."""
    storage.remove_tree(publishing.staging_dir(plan))
    if failed and plan.ledger_dir.exists():
        ledger.consolidate(plan.ledger_dir, plan.run_dir / "ledger.parquet", keep_parts=True)
    if not plan.scratch_in_run_dir:
        storage.remove_tree(plan.scratch_root)
        resume_steps.discard(plan.run_dir)
    elif failed:
        resume_steps.keep_for_resume(plan.run_dir)
    else:
        resume_steps.discard(plan.run_dir)


def _release(plan: RunPlan) -> None:
    """The run's row says how it ended: its owner file goes (sweep_interrupted_runs)."""
    (plan.run_dir / OWNER_FILE).unlink(missing_ok=True)


def _step_order() -> list[tuple[str, str | None]]:
    """The steps a run may resume from, in run order, with their ledger parts (a gate has
    none)."""
    order: list[tuple[str, str | None]] = []
    for name in ("ingest", *RECORD_STAGES):
        order.append((name, STAGES[name].ledger_part))
        if STAGES[name].gate_after:
            order.append((f"{STAGES[name].gate_after} gate", None))
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
        order = [step for step, _ in _step_order()]
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
