"""The `thresher` command line.

Conventions (flows/cli_common.py): the human summary on stdout, progress and logs on stderr;
with `--json`, one JSON object per line on stdout and the human summary on stderr. Exit 0
clean, 1 findings (e.g. a shard that fails verification), 2 error.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from flows.card_cli import card
from flows.cli_common import (
    ConfigOption,
    JsonOption,
    RefArgument,
    WorkdirOption,
    checked,
    emit,
    fail,
    find_version,
    human,
    open_catalog,
    progress_shown,
    stderr,
    stdout,
)
from flows.contamination_cli import contamination_app
from flows.dedup_cli import dedup
from flows.deploy_cli import deploy
from flows.eval_cli import eval_app
from flows.export_cli import export
from flows.governance_cli import (
    catalog_affected,
    catalog_purge,
    catalog_withdraw,
    forget,
    review_app,
)
from flows.quality_cli import quality_app
from flows.report_cli import catalog_diff, report
from flows.secrets_cli import secrets_app
from flows.split_cli import split_app
from flows.train_cli import print_summary as print_train_summary
from flows.train_cli import train_app
from pipeline.core.errors import ThresherError

app = typer.Typer(
    help="Thresher: curate text sources into versioned, provenance-tracked datasets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Check run configs.", no_args_is_help=True)
catalog_app = typer.Typer(help="Published versions in the catalog.", no_args_is_help=True)
server_app = typer.Typer(
    help="The local Prefect server runs report to when PREFECT_API_URL is not set.",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")
app.add_typer(catalog_app, name="catalog")
app.add_typer(server_app, name="server")


def _version(shown: bool) -> None:
    if shown:
        from pipeline.core.code_version import code_state

        state = code_state()
        commit = (
            state.commit and f" (commit {state.commit[:12]}{', modified' if state.dirty else ''})"
        )
        stdout.print(f"thresher {state.version}{commit or ''}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Version and commit."),
    ] = False,
) -> None:
    pass


def main() -> None:
    """Console entry point: any error the commands do not explain still exits 2, not 1."""
    # registered first, so it runs after every other exit handler (Prefect's flush its logs):
    # the interpreter's last collection walked every object the imports made (Prefect, Great
    # Expectations, pydantic), 2–3 s after a run had printed its result
    atexit.register(gc.freeze)
    try:
        app()
    except Exception as error:  # noqa: BLE001 — the last line of defence, reported plainly
        from flows.work_folder import explain

        message = explain(error, None)  # a full or read-only disk
        if message is None:
            _unexpected(error)
        stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        sys.exit(2)


def _unexpected(error: Exception) -> None:
    stderr.print(
        f"[bold red]error:[/] unexpected {type(error).__name__}: {escape(str(error))}",
        highlight=False,
    )
    sys.exit(2)


QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also print Prefect's task and flow logs.")
]


@app.command()
def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="Run config (YAML).")],
    as_json: JsonOption = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Require reusing the finished steps of the last failed or killed run of the "
            "same inputs and config (a run reuses them anyway when it can; this fails if not).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Run even when nothing changed since the latest version was built.",
        ),
    ] = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Curate a run config's sources into a new dataset version (nothing to do when nothing
    changed since the latest version was built: --force runs anyway)."""
    from flows import work_folder
    from flows.config_secrets import refuse_stored_credentials
    from flows.runner import workers
    from pipeline.config import load_run_config

    try:
        cfg = load_run_config(config)  # a bad config fails here, before Prefect starts
        refuse_stored_credentials(cfg, config)
    except ThresherError as error:
        fail(str(error))
    say = _sayer(quiet)
    say(
        f"{cfg.name}: {config} is valid; {len(cfg.source_list)} source(s), work folder {cfg.workdir}"
    )
    setting = f"workdir in {config}"
    try:
        work_folder.check(Path(cfg.workdir), setting)
        summary = None if force or resume else _unchanged(cfg)
        if summary is None:
            workers.start_early(cfg.runner)
            with orchestrated(say, quiet, verbose, Path(cfg.workdir)):
                from flows.curate import curate

                summary = curate(str(config), resume=resume, force=force)
    except ThresherError as error:
        fail(str(error))
    except Exception as error:
        _fail_on_work_folder_fault(error, Path(cfg.workdir), setting)
        raise
    if as_json:
        emit(summary)
    _print_summary(summary, human(as_json))


def _fail_on_work_folder_fault(error: Exception, workdir: Path, setting: str) -> None:
    """Exit 2 saying what to do when the error is a full, read-only or forbidden work folder
    (or a file in its place); return otherwise."""
    from flows.work_folder import explain

    if (message := explain(error, workdir, setting)) is not None:
        fail(message)


def _sayer(quiet: bool):
    if quiet:
        return lambda text: None
    return lambda text: stderr.print(text, highlight=False, markup=False)


def _unchanged(cfg) -> dict[str, Any] | None:
    """The latest version's run summary when nothing changed since it was built (checked
    without Prefect: seconds, not a flow run)."""
    from data_catalog.catalog import CATALOG_FILE, CATALOG_URL_ENV, Catalog
    from flows import unchanged

    if not os.environ.get(CATALOG_URL_ENV) and not (Path(cfg.workdir) / CATALOG_FILE).exists():
        return None
    try:
        catalog = Catalog.open(cfg.workdir)
    except ThresherError:
        return None  # the run reports it
    previous, _ = unchanged.check(cfg, catalog)
    if previous is None:
        return None
    from flows.report import repair_missing_reports

    repair_missing_reports(catalog)
    return previous | {"unchanged_since": previous["run_id"]}


class _ExplainedErrors(logging.Filter):
    """Keeps Prefect's report of an error the command explains itself (a ThresherError, a
    work-folder fault) off the console: its traceback would bury the message that says what
    to do. The Prefect UI keeps it, and --verbose shows it."""

    def __init__(self, workdir: Path | None):
        super().__init__()
        self.workdir = workdir

    def filter(self, record: logging.LogRecord) -> bool:
        from flows.work_folder import explain

        if record.getMessage().startswith("Finished in state Failed"):
            return False  # a task's or flow's end: the command's error says why
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return True
        return not (isinstance(error, ThresherError) or explain(error, self.workdir))


@contextmanager
def orchestrated(say, quiet: bool, verbose: bool, workdir: Path | None = None) -> Iterator[None]:
    """Flows of this process report to a Prefect server that is up (flows/server.py), with
    progress on stderr: a live display on a terminal, plain lines elsewhere; Prefect's own
    console logs only with --verbose (they are in the Prefect UI either way), and without it
    no traceback of an error the command explains (in `workdir`, for work-folder faults)."""
    from flows.server import ensure_server, sweep_orphaned_temporary_servers

    if stopped := sweep_orphaned_temporary_servers():
        say(f"stopped {len(stopped)} Prefect temporary server(s) left by killed runs")
    ensure_server(say)
    import prefect.main  # noqa: F401  (configures Prefect's logging)
    from prefect.logging.handlers import PrefectConsoleHandler

    # only the console's copy: the Prefect UI still gets every log line
    consoles = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    levels = [handler.level for handler in consoles]
    explained = _ExplainedErrors(workdir)
    if not verbose:
        for handler in consoles:
            handler.setLevel(logging.WARNING)
            handler.addFilter(explained)
    with ExitStack() as stack:
        for handler, level in zip(consoles, levels, strict=True):
            stack.callback(handler.setLevel, level)
            stack.callback(handler.removeFilter, explained)
        stack.enter_context(progress_shown(quiet))
        yield


def _print_summary(summary: dict[str, Any], out: Console) -> None:
    state = "new version" if summary["created"] else "identical to an existing version"
    if summary.get("unchanged_since"):
        state = (
            f"unchanged: nothing changed since run {summary['unchanged_since']} built it; "
            "nothing done (--force runs anyway)"
        )
    out.print(
        f"[bold]dataset[/] {summary['name']}  [bold]hash[/] {summary['dataset_hash']}  ({state})"
    )
    generated = f" + {summary['generated']} generated" if summary.get("generated") else ""
    out.print(
        f"records in {summary['records_in']}{generated}: published {summary['published']}, "
        f"dropped {summary['dropped']}, quarantined {summary['quarantined']}"
    )
    for section in ("reasons", "changes"):
        for action, reasons in summary[section].items():
            for reason, count in reasons.items():
                out.print(f"  {action:<12} {reason:<24} {count}")
    splits = ", ".join(
        f"{name} {counts['records']} ({counts['groups']} groups)"
        for name, counts in summary["splits"].items()
    )
    out.print(f"splits: {splits}")
    _print_stage_lines(summary, out)
    _print_data_quality(summary, out)
    review = summary["review"]
    if review["quarantined_items"]:
        out.print(
            f"review queue: {review['queued_new']} new item(s), {review['quarantined_items']} "
            f"flag(s) on quarantined records; `thresher review list --workdir "
            f"{Path(summary['paths']['catalog']).parent}`"
        )
    if "gates" in summary:
        out.print(
            "gates: " + ", ".join(f"{gate} {state}" for gate, state in summary["gates"].items())
        )
    if summary.get("steps"):
        _print_steps(summary["steps"], out)
    if summary.get("resumed_from"):
        reused = [name for name, step in summary["steps"].items() if "resumed_from" in step]
        out.print(f"resumed run {summary['resumed_from']}: reused {', '.join(reused)}")
    for label, path in summary["paths"].items():
        if path:
            out.print(f"  {label:<9} {path}")


def _print_steps(steps: dict[str, dict], out: Console) -> None:
    """One line: the steps' time, the three slowest, the step with the highest peak RSS
    (each step of the summary's `steps` has its seconds, peak RSS and records) and the run's
    peak disk use (each stage's `disk_mb`: the run's files when it ended)."""
    slowest = sorted(steps.items(), key=lambda item: -item[1]["seconds"])[:3]
    heaviest, peak = max(steps.items(), key=lambda item: item[1]["peak_rss_mb"])
    named = ", ".join(f"{name} {step['seconds']:.1f} s" for name, step in slowest)
    disk = ""
    if on_disk := {name: step["disk_mb"] for name, step in steps.items() if "disk_mb" in step}:
        fullest = max(on_disk, key=on_disk.get)
        disk = f"; peak disk {on_disk[fullest]:,.0f} MB (after {fullest})"
    out.print(
        f"time: {sum(step['seconds'] for step in steps.values()):.1f} s in {len(steps)} steps; "
        f"slowest {named}; peak memory {peak['peak_rss_mb']:,.0f} MB ({heaviest}){disk}"
    )


def _print_stage_lines(summary: dict[str, Any], out: Console) -> None:
    """Each stage's lines, in run order, from its stats where its registry entry put them."""
    from pipeline.registry import CURATE_STAGES

    for stage in CURATE_STAGES:
        stats = summary
        for key in stage.summary_at:
            stats = stats.get(key, {})
        for line in stage.lines(stats) if stage.lines and stats else []:
            if line.startswith("warning: "):
                out.print(f"[yellow]warning:[/] {escape(line[9:])}", highlight=False)
            else:
                out.print(escape(line))


def _print_data_quality(summary: dict[str, Any], out: Console) -> None:
    """Label conflicts and field leakage."""
    conflicts = {
        source: rates
        for source, rates in summary["label_conflicts"].items()
        if rates["conflicting"]
    }
    if conflicts:
        out.print(
            "label conflicts: "
            + ", ".join(
                f"{source} {rates['conflicting']} of {rates['labelled']} ({rates['rate']:.2%})"
                for source, rates in conflicts.items()
            )
        )
    excluded = summary["fields"]["excluded"]
    if excluded:
        out.print(
            "excluded fields (known after the outcome): "
            + "; ".join(f"{source}: {', '.join(names)}" for source, names in excluded.items())
        )
    for warning in summary["fields"]["leakage_warnings"]:
        out.print(f"[yellow]leakage warning:[/] {escape(warning)}", highlight=False)
    for warning in summary.get("warnings", []):  # summaries of earlier runs have none
        out.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


@config_app.command("validate")
def config_validate(file: Path, as_json: JsonOption = False) -> None:
    """Validate a run config and its sources; explain every problem with file and line.
    Count the files each source location matches (a listing past its bounds is an error)."""
    from flows.config_secrets import refuse_stored_credentials
    from pipeline.config import config_hash, load_run_config
    from pipeline.ingest.source_files import location_files

    try:
        cfg = load_run_config(file)
        refuse_stored_credentials(cfg, file)
        files = {
            source.name: {where: len(location_files(source, where)) for where in source.patterns}
            for source in cfg.source_list
        }
    except ThresherError as error:
        fail(str(error))
    if as_json:
        emit(
            {
                "valid": True,
                "name": cfg.name,
                "config_hash": config_hash(cfg),
                "sources": [s.name for s in cfg.source_list],
                "files": files,
            }
        )
    stderr.print(
        f"{file}: valid — dataset {cfg.name!r}, {len(cfg.source_list)} source(s), config hash {config_hash(cfg)[:12]}"
    )
    for name, counts in files.items():
        for where, count in counts.items():
            line = f"source {name}: {count:,} {'file matches' if count == 1 else 'files match'} {where}"
            if count:
                stderr.print(escape(line), highlight=False)
            else:
                stderr.print(
                    f"[yellow]warning:[/] {escape(line)}; a run stops there", highlight=False
                )


@app.command()
def init(directory: Path) -> None:
    """Scaffold a working project: a run config, a sources file and a tiny real sample."""
    from flows.scaffold import scaffold

    try:
        written = scaffold(directory)
    except ThresherError as error:
        fail(str(error))
    for path in written:
        stderr.print(f"wrote {path}")
    stderr.print(f"next: thresher run --config {directory / 'thresher.yaml'}")


@app.command()
def demo(
    directory: Annotated[Path, typer.Argument()] = Path("demo"),
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Curate real public data (SMS Spam Collection, Debian changelogs) end to end."""
    from flows import work_folder
    from flows.demo import run_demo

    workdir, setting = directory / "work", "the demo's DIRECTORY argument"
    try:
        work_folder.check(workdir, setting)
        with orchestrated(_sayer(quiet), quiet, verbose, workdir):
            summary, trained = run_demo(directory)
    except ThresherError as error:
        fail(str(error))
    except Exception as error:
        _fail_on_work_folder_fault(error, workdir, setting)
        raise
    _print_summary(summary, stdout)
    print_train_summary(trained, stdout)


@server_app.command("start")
def server_start(as_json: JsonOption = False) -> None:
    """Start this Prefect home's server in the background (runs start it when needed)."""
    from flows.server import ServerError, configured_api_url, ensure_server, running_server

    if url := configured_api_url():
        fail(f"PREFECT_API_URL is set ({url}): runs use that server, not a local one", code=1)
    try:
        ensure_server(_sayer(as_json), use=False)
    except ServerError as error:
        fail(str(error))
    state = running_server()
    if state is None:
        fail("the Prefect server stopped as soon as it answered; see `thresher server status`")
    _print_server(state, as_json)


@server_app.command("status")
def server_status(as_json: JsonOption = False) -> None:
    """Whether this Prefect home's server runs: its address, UI, users and idle timeout."""
    from flows.server import configured_api_url, recorded_server, running_server

    state = running_server()
    if state is None:
        url, recorded = configured_api_url(), recorded_server()
        if as_json:
            emit({"running": False, "configured_api_url": url, "not_answering": recorded})
        if url:
            said = f"runs use the Prefect server at {url} (PREFECT_API_URL)"
        elif recorded:
            said = f"the Prefect server (pid {recorded['pid']}) runs but does not answer yet"
        else:
            said = "no Prefect server running; `thresher run` starts one when it needs it"
        human(as_json).print(said, highlight=False)
        raise typer.Exit(0 if url else 1)
    _print_server(state, as_json)


@server_app.command("stop")
def server_stop(
    force: Annotated[
        bool, typer.Option("--force", help="Stop it even while thresher runs use it.")
    ] = False,
) -> None:
    """Stop this Prefect home's background server."""
    from flows.server import ServerError, stop_server

    try:
        stopped = stop_server(force)
    except ServerError as error:
        fail(str(error), code=1)
    stdout.print(
        f"stopped the Prefect server at {stopped['ui_url']} (pid {stopped['pid']})"
        if stopped
        else "no Prefect server was running",
        highlight=False,
    )


def _print_server(state: dict[str, Any], as_json: bool) -> None:
    import time

    from flows.server import clients, prefect_home

    facts = state | {
        "running": True,
        "prefect_home": str(prefect_home()),
        "uptime_seconds": round(time.time() - state["started_at"]),
        "clients": clients(),
    }
    if as_json:
        emit(facts)
    out = human(as_json)
    out.print(
        f"Prefect server for {facts['prefect_home']}: {state['ui_url']} (UI)", highlight=False
    )
    out.print(f"  PREFECT_API_URL={state['api_url']}", highlight=False)
    out.print(
        f"  pid {state['pid']}, up {facts['uptime_seconds']} s, stops after "
        f"{state['idle_timeout'] / 60:.0f} min idle; in use by {len(facts['clients'])} run(s)",
        highlight=False,
    )
    out.print(f"  log {state['log']}", highlight=False)


@catalog_app.command("list")
def catalog_list(
    name: Annotated[str | None, typer.Option("--name", "-n", help="Only this dataset.")] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List versions (published and withdrawn, with the reason), newest last."""
    catalog = open_catalog(workdir, config)
    versions = catalog.versions(name)
    latest = {v.name: catalog.latest(v.name) for v in versions}
    table = Table("name", "dataset hash", "records", "splits", "parent", "created", "status")
    for version in versions:
        is_latest = (
            latest[version.name] and latest[version.name].dataset_hash == version.dataset_hash
        )
        if as_json:
            emit({**version.__dict__, "latest": bool(is_latest)})
        table.add_row(
            version.name,
            version.dataset_hash[:16] + (" (latest)" if is_latest else ""),
            str(version.records),
            " ".join(f"{k}={v}" for k, v in version.split_counts.items()),
            (version.parent_hash or "-")[:12],
            f"{version.created_at:%Y-%m-%d %H:%M:%S}",
            _status(version),
        )
    if not as_json:
        stdout.print(table)


@catalog_app.command("failures")
def catalog_failures(
    name: Annotated[str | None, typer.Option("--name", "-n", help="Only this dataset.")] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List failed and crashed flow runs with their reason and what the alerts answered."""
    from data_catalog import failures

    table = Table("when", "flow", "deployment", "state", "dataset", "reason", "alerts")
    for failure in failures.failures(open_catalog(workdir, config), name):
        if as_json:
            emit(failure)
        table.add_row(
            f"{failure['occurred_at']:%Y-%m-%d %H:%M:%S}",
            escape(f"{failure['flow']} ({failure['flow_run_name'] or '-'})"),
            escape(failure["deployment"] or "-"),
            failure["state"],
            escape(failure["dataset"] or "-"),
            escape(failure["reason"]),
            escape(", ".join(f"{k}: {v}" for k, v in failure["alerts"].items()) or "none"),
        )
    if not as_json:
        stdout.print(table)


def _status(version) -> str:
    if version.status != "withdrawn":
        return version.status
    purged = ", shards purged" if version.purged_at else ""
    return f"withdrawn: {version.status_reason}{purged}"


@catalog_app.command("show")
def catalog_show(
    ref: RefArgument,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one version: lineage, sources and licenses, shards, the training runs on it."""
    from data_catalog import training_runs

    catalog, version = find_version(ref, workdir, config)
    shards, sources = catalog.shards(version.dataset_hash), catalog.sources(version.dataset_hash)
    trained = training_runs.for_version(catalog, version.dataset_hash)
    if as_json:
        emit(
            {
                **version.__dict__,
                "path": str(catalog.version_path(version)),
                "shards": shards,
                "sources": [{k: v for k, v in s.items() if k != "declaration"} for s in sources],
                "training_runs": trained,
            }
        )
        return
    console = stdout
    console.print(f"[bold]{version.name}[/] {version.dataset_hash}  [{version.status}]")
    for label, value in [
        ("parent", version.parent_hash),
        ("config hash", version.config_hash),
        ("code", version.code_version),
        ("run", version.run_id),
        ("created", version.created_at),
        ("path", catalog.version_path(version)),
        ("records", version.records),
        ("splits", version.split_counts),
        *(
            [("withdrawn", f"{version.withdrawn_at} — {version.status_reason}")]
            if version.withdrawn_at
            else []
        ),
        *([("purged", f"{version.purged_at} (shards deleted)")] if version.purged_at else []),
    ]:
        console.print(f"  {label:<12} {value}")
    sources_table = Table("source", "license", "consent", "owner", "records", title="sources")
    for source in sources:
        held = source["records"]
        sources_table.add_row(
            source["source"],
            source["license"],
            source["consent"],
            source["owner"],
            "-" if held is None else f"{held}" + (" (none published)" if held == 0 else ""),
        )
    console.print(sources_table)
    shards_table = Table("shard", "split", "rows", "bytes", "sha256", title="shards")
    for shard in shards:
        shards_table.add_row(
            shard["path"],
            shard["split"],
            str(shard["rows"]),
            str(shard["bytes"]),
            shard["sha256"][:16],
        )
    console.print(shards_table)
    _print_training_runs(console, trained)


def _print_training_runs(console: Console, trained: list[dict[str, Any]]) -> None:
    if not trained:
        console.print("training runs: none")
        return
    fold = {"overflow": "fold"}  # wrap long ids, metrics and paths; never cut them off
    table = Table(
        Column("run", **fold),
        Column("objective", **fold),
        "status",
        "best step",
        Column("test metrics", **fold),
        Column("manifest", **fold),
        title="training runs",
    )
    for run in trained:
        metrics = run["test_metrics"] or {}
        table.add_row(
            escape(run["run_id"]),
            escape(run["objective"]),
            run["status"],
            "-" if run["best_step"] is None else str(run["best_step"]),
            escape(" ".join(f"{k}={_compact(v)}" for k, v in metrics.items())) or "-",
            escape(run["manifest_path"]),
        )
    console.print(table)


def _compact(value: Any) -> str:
    """A float with 4 significant digits; anything else (a count, a string) as it is."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@catalog_app.command("verify")
def catalog_verify(
    ref: RefArgument,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-hash every shard of a version against the catalog and its manifest, and its dataset
    hash from its manifest against the catalog's; exit 1 naming each shard (or manifest) that
    does not match."""
    from pipeline.publish.reader import read_manifest, recomputed_hash, verify_shards

    catalog, version = find_version(ref, workdir, config)
    if version.purged_at is not None:
        fail(f"version {version.dataset_hash[:16]} was withdrawn and its shards purged", code=1)
    path = catalog.version_path(version)
    cataloged = catalog.shards(version.dataset_hash)  # written last and never changed
    findings = [(p.path, p.problem) for p in verify_shards(path, {"shards": cataloged})]
    try:
        manifest = read_manifest(path)
        listed = {shard["path"]: shard["sha256"] for shard in manifest["shards"]}
        expected = {shard["path"]: shard["sha256"] for shard in cataloged}
        findings += [
            (shard, "manifest and catalog disagree")
            for shard in sorted(expected.keys() | listed.keys())
            if expected.get(shard) != listed.get(shard)
        ]
        computed = recomputed_hash(manifest)
        if computed != version.dataset_hash:
            findings.append(
                (
                    "manifest.json",
                    f"hashes to {computed[:16]}, the catalog's dataset hash is "
                    f"{version.dataset_hash[:16]} (changed after publishing)",
                )
            )
    except ThresherError:
        findings.append(("manifest.json", "missing or unreadable"))
    for shard, problem in findings:
        if as_json:
            emit({"shard": shard, "problem": problem})
        stderr.print(f"[red]FAIL[/] {path / shard}: {problem}")
    summary = f"version {version.dataset_hash[:16]}: {len(cataloged)} shard(s)"
    if findings:
        stderr.print(f"{summary}, {len(findings)} problem(s)")
        raise typer.Exit(1)
    stderr.print(f"{summary}, all match")
    from flows.report import REPORT_HTML, has_report, write_version_report

    if not has_report(catalog.workdir, version):  # its run was killed after the commit
        folder = checked(write_version_report, catalog, version)
        stderr.print(f"wrote its missing report: {folder / REPORT_HTML}")


# Each capability brings its own sub-app and commands.
app.add_typer(review_app, name="review")
app.add_typer(secrets_app, name="secrets")
app.add_typer(split_app, name="split")
app.add_typer(eval_app, name="eval")
app.add_typer(contamination_app, name="contamination")
app.add_typer(quality_app, name="quality")
app.command()(dedup)
app.add_typer(train_app, name="train")
app.command()(export)
app.command()(report)
app.command()(deploy)
app.command()(forget)
catalog_app.command("affected")(catalog_affected)
catalog_app.command("withdraw")(catalog_withdraw)
catalog_app.command("purge")(catalog_purge)
catalog_app.command("diff")(catalog_diff)
catalog_app.command("card")(card)
