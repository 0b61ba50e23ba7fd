"""`thresher report REF [--open]` and `thresher catalog diff A B`."""

from __future__ import annotations

import json
import webbrowser
from typing import Annotated

import typer

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    RefArgument,
    WorkdirOption,
    checked,
    emit,
    fail,
    find_version,
    open_catalog,
    stderr,
)

OpenOption = Annotated[bool, typer.Option("--open", help="Open report.html in a browser.")]


def report(
    ref: Annotated[
        str, typer.Argument(help="Dataset hash or a unique prefix, or the run id of a failed run.")
    ],
    open_it: OpenOption = False,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a version's audit report (report.html, report.json, Data Docs, dataset cards),
    or show a failed run's report."""
    from flows.report import REPORT_HTML, REPORT_JSON, write_version_report

    catalog = open_catalog(workdir, config)
    failed_run = catalog.workdir / "runs" / ref / REPORT_HTML
    if failed_run.exists():
        folder = failed_run.parent
    else:
        _, version = find_version(ref, workdir, config)
        stderr.print(f"writing the report of {version.name} {version.dataset_hash[:12]} …")
        folder = checked(write_version_report, catalog, version)
    html = folder / REPORT_HTML
    if as_json:
        emit({"report": str(html), **json.loads((folder / REPORT_JSON).read_text())})
    else:
        for path in sorted(folder.iterdir()):
            stderr.print(f"  {path.name:<15} {path}", highlight=False)
    if open_it:
        webbrowser.open(html.resolve().as_uri())


def catalog_diff(
    before: RefArgument,
    after: RefArgument,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Records added, removed and moved between two versions (moved: changed split)."""
    from flows.report import diff_versions

    catalog, older = find_version(before, workdir, config)
    _, newer = find_version(after, workdir, config)
    diff = checked(diff_versions, catalog, older.dataset_hash, newer.dataset_hash)
    if diff.get("unavailable"):
        fail(diff["unavailable"])
    if as_json:
        emit({"before": older.dataset_hash, "after": newer.dataset_hash, **diff})
        return
    stderr.print(f"{older.dataset_hash[:12]} → {newer.dataset_hash[:12]}")
    stderr.print(
        f"  added {diff['added']}, removed {diff['removed']}, moved {diff['moved']}, "
        f"unchanged {diff['unchanged']}"
    )
    for label, key in (("added", "added_by_split"), ("removed", "removed_by_split")):
        if diff[key]:
            per_split = ", ".join(f"{split} {n}" for split, n in diff[key].items())
            stderr.print(f"  {label} by split: {per_split}")
    for move, n in diff["moves"].items():
        stderr.print(f"  moved {move}: {n}")
    for kind, ids in diff["examples"].items():
        if ids:
            stderr.print(f"  e.g. {kind}: {', '.join(ids)}", highlight=False)
