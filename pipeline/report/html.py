"""Render an audit report (the dict written as report.json) as one self-contained HTML file:
inline CSS, charts as data URIs, no scripts and no external references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from pipeline.report import charts as report_charts

TEMPLATES = Path(__file__).parent / "templates"


def render(report: dict[str, Any]) -> str:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
    )
    charts = {
        "funnel": report_charts.funnel_chart(report["funnel"], report["outcomes"]["published"]),
        "reasons": report_charts.reasons_chart(report["reasons"]),
        "clusters": report_charts.cluster_size_chart(
            (report.get("dedup") or {}).get("size_histogram", {})
        ),
        "timeline": report_charts.split_timeline(report.get("splits") or {}),
    }
    return environment.get_template("report.html").render(r=report, charts=charts)
