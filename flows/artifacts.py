"""What a curate run shows in the Prefect UI beside its logs: a Markdown summary (dataset
hash, counts by terminal state and reason, splits, steps, each stage's details, the audit
report) and a table of the records dropped or quarantined, by reason."""

from __future__ import annotations

import json
import re
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact


def _key(name: str, what: str) -> str:
    """Artifact keys hold lowercase letters, digits and dashes only."""
    return f"{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}-{what}"


def drops_table(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"outcome": outcome, "reason": reason, "records": count}
        for outcome, reasons in summary["reasons"].items()
        if outcome != "published"
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1])
    ]


def summary_markdown(summary: dict[str, Any], stats: dict[str, dict]) -> str:
    state = "a new version" if summary["created"] else "identical to an existing version"
    lines = [
        f"# {summary['name']}: `{summary['dataset_hash'][:16]}` ({state})",
        "",
        f"Dataset hash `{summary['dataset_hash']}`"
        + (f", built on `{summary['parent_version'][:16]}`" if summary["parent_version"] else ""),
        "",
        "| records in | published | dropped | quarantined |",
        "|---:|---:|---:|---:|",
        f"| {summary['records_in']:,} | {summary['published']:,} | {summary['dropped']:,} "
        f"| {summary['quarantined']:,} |",
        "",
        "## Dropped and quarantined, by reason",
        "",
    ]
    drops = drops_table(summary)
    if drops:
        lines += ["| outcome | reason | records |", "|---|---|---:|"]
        lines += [f"| {d['outcome']} | {d['reason']} | {d['records']:,} |" for d in drops]
    else:
        lines.append("None.")
    lines += ["", "## Splits", "", "| split | records | groups |", "|---|---:|---:|"]
    lines += [
        f"| {name} | {counts['records']:,} | {counts['groups']:,} |"
        for name, counts in summary["splits"].items()
    ]
    lines += [
        "",
        "## Steps",
        "",
        "| step | seconds | records in | records out |",
        "|---|---:|---:|---:|",
    ]
    for name, step in summary.get("steps", {}).items():
        lines.append(
            f"| {name} | {step['seconds']:.1f} | {step.get('records_in', '')} "
            f"| {step.get('records_out', '')} |"
        )
    report = summary["paths"].get("report")
    lines += [
        "",
        "## Audit report",
        "",
        f"[{report}](file://{report})" if report else "not written",
    ]
    lines += ["", "## Each stage's details", ""]
    for name, figures in stats.items():
        lines += [
            f"**{name}**",
            "",
            "```json",
            json.dumps(figures, indent=1, default=str),
            "```",
            "",
        ]
    return "\n".join(lines)


def publish_run(summary: dict[str, Any], stats: dict[str, dict]) -> None:
    name = summary["name"]
    create_markdown_artifact(
        key=_key(name, "summary"),
        markdown=summary_markdown(summary, stats),
        description=f"curate run {summary['run_id']}: {summary['dataset_hash'][:12]}",
    )
    create_table_artifact(
        key=_key(name, "drops"),
        table=drops_table(summary) or [{"outcome": "none", "reason": "", "records": 0}],
        description=f"records of run {summary['run_id']} dropped or quarantined, by reason",
    )


def publish_unchanged(previous: dict[str, Any]) -> None:
    create_markdown_artifact(
        key=_key(previous["name"], "summary"),
        markdown=(
            f"# {previous['name']}: unchanged\n\nThe latest version "
            f"`{previous['dataset_hash']}` was built by run {previous['run_id']} from these "
            "same inputs, config, code and catalog state: nothing to do."
        ),
        description=f"unchanged since run {previous['run_id']}",
    )
