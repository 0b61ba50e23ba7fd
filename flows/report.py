"""Audit reports: `report.json` and a self-contained `report.html` for every published version
(in `<workdir>/reports/<name>/<hash>/`, with the Great Expectations Data Docs and the dataset
cards beside them) and for every failed run (in its run folder).

A version's report is built from the catalog and the version folder alone (manifest, ledger,
gate results, shards), so `thresher report HASH` can regenerate it at any time, e.g. after a
training run on the version.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from data_catalog import deletions, training_runs
from data_catalog.catalog import Catalog, VersionRecord
from pipeline.config import PolicyConfig
from pipeline.core import storage
from pipeline.core.licenses import license_class
from pipeline.core.locks import file_lock
from pipeline.publish.reader import read_version
from pipeline.report import audit
from pipeline.report.html import render

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
GATES_FILE = "gates.json"
FORMAT = "thresher-report/1"


def report_folder(workdir: Path, name: str, dataset_hash: str) -> Path:
    return Path(workdir) / "reports" / name / dataset_hash


RUN_STEPS = "run-steps.json"  # in the run folder: the summary's steps, before the report


def write_version_report(
    catalog: Catalog, version: VersionRecord, only_if_missing: bool = False
) -> Path:
    """Write (or rewrite) a version's report, Data Docs and cards; return the folder.

    Runs that made or found the same version may write its report at once: one at a time
    (a lock per dataset name), each into a folder of its own, which then replaces the report
    folder whole. A writer killed half-way leaves the previous report, or none, never part
    of one."""
    from data_catalog.dataset_cards import write_cards

    folder = report_folder(catalog.workdir, version.name, version.dataset_hash)
    with report_lock(folder):
        if only_if_missing and has_report(catalog.workdir, version):
            return folder  # another process wrote it while this one waited
        writing = folder.parent / f".{version.dataset_hash}.writing"
        shutil.rmtree(writing, ignore_errors=True)  # what a killed writer left
        writing.mkdir(parents=True)
        report = version_report(catalog, version, previous=_previous(folder))
        docs = _copy_data_docs(catalog.workdir / "runs" / version.run_id, writing)
        report["data_docs"] = str(folder / "data_docs" / "index.html") if docs else None
        _write(writing, report)
        write_cards(catalog, version, writing)
        _replace(folder, writing)
    return folder


def report_lock(folder: Path):
    """The lock of the reports of a dataset (`folder`: one version's report folder)."""
    return file_lock(folder.parent / ".lock")


def _replace(folder: Path, new: Path) -> None:
    """Put `new` in the place of `folder` (which may not exist), renaming, never copying."""
    old = folder.parent / f".{folder.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    new.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def has_report(workdir: Path, version: VersionRecord) -> bool:
    folder = report_folder(workdir, version.name, version.dataset_hash)
    return (folder / REPORT_JSON).is_file() and (folder / REPORT_HTML).is_file()


def repair_missing_reports(catalog: Catalog) -> list[str]:
    """Write the report of every committed version of the catalog that has none:
    a run killed after its commit, or a report that failed. Returns their hashes. A purged
    version has no files left to report on."""
    import logging

    repaired = []
    for version in catalog.versions():
        if version.purged_at is not None or has_report(catalog.workdir, version):
            continue
        try:
            write_version_report(catalog, version, only_if_missing=True)
            repaired.append(version.dataset_hash)
        except Exception as error:  # noqa: BLE001 — the next run or `thresher report` tries again
            logging.getLogger("thresher").warning(
                "could not write the missing report of %s: %s", version.dataset_hash[:12], error
            )
    return repaired


def refresh_report(config_path: str | Path, dataset_hash: str) -> str | None:
    """Write a version's report again (after a training run on it, which it lists); a
    report can always be regenerated later, so a failure here only warns."""
    import logging

    from pipeline.config import load_run_config

    try:
        catalog = Catalog.open(load_run_config(config_path).workdir)
        return str(write_version_report(catalog, catalog.version(dataset_hash)) / REPORT_HTML)
    except Exception as error:
        logging.getLogger("thresher").warning("could not refresh the report: %s", error)
        return None


def version_report(
    catalog: Catalog, version: VersionRecord, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    published = read_version(
        catalog.version_path(version),
        verify=False,
        allow_withdrawn=True,
        expected_hash=version.dataset_hash,
    )
    manifest = published.manifest
    ledger = storage.scan_parquet([published.path / "ledger.parquet"])
    records = pl.concat(list(published.splits.values())) if published.splits else None
    splits = audit.split_figures(published.splits)
    tokenizer, tokens, text = _text_profile(published, version.dataset_hash, previous)
    requested = deletions.requests(catalog)  # examples of these records are not shown
    forgotten = _forgotten(requested)
    summary = _run_summary(catalog.workdir / "runs" / version.run_id)
    runs, seed_groups = _training_runs(catalog, version.dataset_hash)
    for name, figures in splits.items():
        figures["tokens"] = tokens.get(name, 0)
    return {
        **_common(ledger, manifest["name"], manifest["config"], manifest["sources"]),
        "kind": "version",
        "status": version.status,
        "dataset_hash": version.dataset_hash,
        "run_id": version.run_id,
        "error": None,
        "dedup": audit.dedup_clusters(
            ledger, records, withheld=deletions.any_request_match(requested)
        )
        if records is not None
        else None,
        "splits": splits,
        "split": manifest["split"],
        "tokenizer": tokenizer,
        "text": text,
        "contamination": _with_ignored(
            audit.contamination(ledger, manifest["protected_eval_sets"]), summary
        ),
        "contamination_hits": audit.contamination_hits(ledger, withheld=forgotten),
        "reason_examples": audit.reason_examples(ledger, withheld=forgotten),
        "quality": _run_quality(summary),
        "data_quality": {  # versions published before these facts existed hold none
            "label_conflicts": manifest.get("label_conflicts", {}),
            "fields": manifest.get("fields", {}),
            "synthetic_sources": {
                s["name"]: s["synthetic"] for s in manifest["sources"] if s.get("synthetic")
            },
        },
        "gates": _gates(published.path / GATES_FILE),
        "run_steps": _run_steps(catalog.workdir / "runs" / version.run_id / RUN_STEPS),
        "lineage": {
            "dataset_hash": version.dataset_hash,
            "parent_version": version.parent_hash,
            "config_hash": version.config_hash,
            "code_version": version.code_version,
            "run_id": version.run_id,
            "created_at": manifest["created_at"],
            "status": version.status,
            "training_runs": runs,
        },
        "seed_groups": seed_groups,
        "diff": diff_versions(catalog, version.parent_hash, version.dataset_hash)
        if version.parent_hash
        else {"parent": None},
    }


def diff_versions(catalog: Catalog, before: str, after: str) -> dict[str, Any]:
    """Records added, removed and moved between two versions (by hash or prefix)."""
    memberships = []
    for ref in (before, after):
        version = catalog.version(ref)
        if version.purged_at is not None:
            return {
                "parent": version.dataset_hash,
                "unavailable": f"version {ref[:12]} was purged: its shards are gone",
            }
        path = catalog.version_path(version)
        published = read_version(
            path, verify=False, allow_withdrawn=True, expected_hash=version.dataset_hash
        )
        memberships.append(published.membership())
    diff = audit.version_diff(*memberships)
    return {"parent": catalog.version(before).dataset_hash, **diff}


def write_failed_run_report(
    run_dir: Path,
    name: str,
    config: dict[str, Any],
    sources: list[dict[str, Any]],
    error: str,
    records_in: int | None,
) -> Path:
    """A failed run's report, in its run folder: how far records got (those not decided
    when it stopped are `unfinished`), and which gate or stage stopped it."""
    ledger_file = run_dir / "ledger.parquet"
    ledger = pl.scan_parquet(ledger_file) if ledger_file.exists() else _empty_ledger()
    # records staged for publishing were not published: no version was registered
    ledger = ledger.filter(pl.col("stage") != "publish")
    gates = [json.loads(path.read_text()) for path in sorted((run_dir / "gates").glob("*.json"))]
    report = {
        **_common(ledger, name, config, sources, records_in or 0),
        "kind": "failed_run",
        "status": "failed",
        "dataset_hash": None,
        "run_id": run_dir.name,
        "error": error,
        "dedup": None,
        "splits": None,
        "split": None,
        "tokenizer": None,
        "contamination": None,
        "data_quality": None,
        "gates": gates,
        "lineage": {"run_id": run_dir.name, "code_version": _code_version(), "training_runs": []},
        "seed_groups": [],
        "diff": None,
        "data_docs": None,
    }
    docs = run_dir / "gx" / "uncommitted" / "data_docs" / "local_site"
    if docs.parent.parent.exists():
        from expectations.gates import GateProject

        docs = GateProject.of(run_dir).build_docs()
        report["data_docs"] = str(docs / "index.html")
    _write(run_dir, report)
    return run_dir / REPORT_HTML


def _common(
    ledger: pl.LazyFrame,
    name: str,
    config: dict[str, Any],
    sources: list[dict[str, Any]],
    records_in: int | None = None,
) -> dict[str, Any]:
    policy = PolicyConfig.model_validate(config["policy"])
    declared = [
        {
            **{key: source[key] for key in ("name", "license", "consent", "owner")},
            "license_class": license_class(
                source["license"], policy.for_source(source["name"]).licenses.classes
            ),
        }
        for source in sources
    ]
    counted = audit.terminal_counts(ledger)
    return {
        "format": FORMAT,
        "name": name,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "outcomes": audit.outcomes(ledger, records_in),
        "funnel": audit.funnel(ledger, records_in),
        "reasons": audit.by_reason(ledger),
        "blocked": audit.blocked_types(ledger),
        "sources": audit.source_table(counted, declared),
        "drops_by_source": audit.drops_by_source(counted),
    }


def _text_profile(
    published, dataset_hash: str, previous: dict[str, Any] | None
) -> tuple[dict[str, str], dict[str, int], dict[str, Any]]:
    """Tokens per split with the training tokenizer (MiniLM's WordPiece; a BPE tokenizer is
    trained per run, so versions are counted in WordPiece tokens), and histograms of the
    records' lengths in characters and tokens per split and per source (bins of
    audit.LENGTH_EDGES). A version's texts never change, so an earlier report's figures
    are reused."""
    if (
        previous
        and previous.get("dataset_hash") == dataset_hash
        and previous.get("tokenizer")
        and previous.get("text")
    ):
        tokens = {n: s["tokens"] for n, s in previous["splits"].items()}
        return previous["tokenizer"], tokens, previous["text"]
    from training.tokenization import minilm_word_pieces

    tokenizer, digest = minilm_word_pieces()
    counts = dict.fromkeys(published.split_names, 0)
    text: dict[str, Any] = {"edges": audit.LENGTH_EDGES, "by_split": {}, "by_source": {}}
    for shard in published.manifest["shards"]:  # one shard's texts in memory at a time
        texts = storage.scan_parquet([published.path / shard["path"]]).select("text", "source")
        for batch in texts.collect().iter_slices(4096):  # histograms added up batch by batch
            encoded = tokenizer.encode_batch(batch["text"].to_list(), add_special_tokens=False)
            lengths = batch.select(
                "source",
                pl.col("text").str.len_chars().cast(pl.Int64).alias("chars"),
                pl.Series("tokens", [len(t.ids) for t in encoded], dtype=pl.Int64),
            )
            counts[shard["split"]] += int(lengths["tokens"].sum())
            _add_lengths(text["by_split"], shard["split"], lengths)
            for (source,), part in lengths.group_by("source", maintain_order=True):
                _add_lengths(text["by_source"], str(source), part)
    name = "minilm (the WordPiece tokenizer of all-MiniLM-L6-v2)"
    return {"name": name, "digest": digest}, counts, text


def _add_lengths(histograms: dict[str, dict], group: str, lengths: pl.DataFrame) -> None:
    """Add `lengths`' characters and tokens to `group`'s histograms."""
    found = histograms.setdefault(group, {"chars": None, "tokens": None})
    for measure in ("chars", "tokens"):
        counts = audit.length_histogram(lengths[measure])
        found[measure] = (
            counts
            if found[measure] is None
            else [a + b for a, b in zip(found[measure], counts, strict=True)]
        )


def _forgotten(requested: list[dict[str, Any]]) -> pl.Expr | None:
    """The ledger rows the deletion requests name by record id or source (a ledger holds no
    groups or content hashes: those requests are matched against the shards instead)."""
    named = [
        pl.col(row["kind"]) == row["value"]
        for row in requested
        if row["kind"] in ("record_id", "source")
    ]
    return pl.any_horizontal(named) if named else None


def _training_runs(catalog: Catalog, dataset_hash: str) -> tuple[list[dict], list[dict]]:
    """The runs on a version (with each one's seed, from its manifest) and the summaries of
    the seed groups they belong to."""
    runs, groups = [], {}
    for run in training_runs.for_version(catalog, dataset_hash):
        row = {key: run[key] for key in ("run_id", "objective", "status", "test_metrics")}
        record = _json_or_none(Path(run["manifest_path"])) or {}
        row["seed"] = record.get("config", {}).get("seed")
        group = record.get("seed_group")
        row["seed_group"] = group and group["id"]
        if group and group["id"] not in groups:
            summary = _json_or_none(Path(group["summary"]))
            if summary:
                groups[group["id"]] = {"summary": group["summary"], **summary}
        runs.append(row)
    return runs, list(groups.values())


def _json_or_none(path: Path) -> dict[str, Any] | None:
    """A run's manifest or a seed summary; None when it was moved or cannot be read (the
    report shows the catalog's row without it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _run_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary.json; None for a run without one."""
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def _with_ignored(found: dict[str, dict], summary: dict[str, Any] | None) -> dict[str, dict]:
    """Each evaluation set's figures with the n-grams its check took as boilerplate, as the
    run's summary counted them (none for runs before issue 27 or without a summary)."""
    sets = ((summary or {}).get("contamination") or {}).get("eval_sets", {})
    for name, figures in found.items():
        ignored = (sets.get(name) or {}).get("ignored_ngrams") or {}
        figures["ignored_ngrams"] = sum(ignored.values()) if ignored else None
    return found


def _run_quality(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """Languages (in all and per source) and quality drops as the run's summary counted
    them; None for a run without a summary."""
    if summary is None:
        return None
    quality = summary.get("quality") or {}
    languages = sorted((quality.get("languages") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    by_source: dict[str, dict[str, int]] = {}
    for key, count in sorted(
        (quality.get("languages_by_source") or {}).items(), key=lambda kv: (-kv[1], kv[0])
    ):
        source, _, language = key.rpartition(":")
        by_source.setdefault(source, {})[language] = count
    return {
        "languages": dict(languages),
        "languages_by_source": by_source,
        "dropped_by_source_and_reason": quality.get("dropped_by_source_and_reason", {}),
        "lines_removed": quality.get("lines_removed", 0),
    }


def _gates(path) -> list[dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else []


def _copy_data_docs(run_dir: Path, folder: Path) -> Path | None:
    """Build the run's Data Docs from its Great Expectations project and copy them here."""
    project = run_dir / "gx"
    if not project.exists():
        return None
    from expectations.gates import GateProject

    site = GateProject.of(run_dir).build_docs()
    target = folder / "data_docs"
    if target != site:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(site, target)
    return target


# the peak of each kind of task a step maps (flows/curate.py)
TASK_PEAKS = tuple(
    f"{task}_peak_rss_mb"
    for task in ("part", "keys", "reduce", "exchange", "decide", "build", "fit", "finish")
)


def _run_steps(path: Path) -> list[dict[str, Any]]:
    """The steps of the run that made the version (flows/curate.py writes them), one row each,
    with the peak of its largest task; none when the run folder is gone."""
    if not path.exists():
        return []
    rows = []
    for name, step in json.loads(path.read_text()).items():
        tasks = [step.get(key) for key in TASK_PEAKS]
        shown = ("resumed_from", "parts", "key_partitions", "records_in", "records_out")
        rows.append(
            {"step": name, **dict.fromkeys(shown), **step}
            | {"largest_task_mb": max(filter(None, tasks), default=None)}
        )
    return rows


def _write(folder: Path, report: dict[str, Any]) -> None:
    (folder / REPORT_JSON).write_text(json.dumps(report, indent=2, default=str) + "\n")
    (folder / REPORT_HTML).write_text(render(report))


def _previous(folder: Path) -> dict[str, Any] | None:
    path = folder / REPORT_JSON
    return json.loads(path.read_text()) if path.exists() else None


def _empty_ledger() -> pl.LazyFrame:
    from pipeline.core.schema import LEDGER_SCHEMA

    return pl.LazyFrame(schema=LEDGER_SCHEMA)


def _code_version() -> str:
    from pipeline.core.code_version import code_version

    return code_version()
