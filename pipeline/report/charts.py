"""The audit report's charts, as PNG data URIs so the HTML file needs nothing beside it."""

from __future__ import annotations

import base64
import io
from datetime import date
from typing import Any

SPLIT_COLOURS = {"train": "tab:blue", "validation": "tab:orange", "test": "tab:green"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def _figure(height: float, labels: list[str] | None = None):
    """A 7-inch-wide figure with fixed margins: room on the left for the longest of `labels`
    (a horizontal bar chart's), else for numbers. Matplotlib's constrained layout measures
    every tick label to find them, which took half of a small run's report."""
    figure, axes = _pyplot().subplots(figsize=(7, height))
    left = 0.25 + 0.09 * max(map(len, labels)) if labels else 0.8  # inches
    figure.subplots_adjust(
        left=min(left, 3.5) / 7, right=1 - 0.25 / 7, bottom=0.55 / height, top=1 - 0.35 / height
    )
    return figure, axes


def _data_uri(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    _pyplot().close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def funnel_chart(funnel: list[dict[str, Any]], published: int) -> str:
    stages = [row["stage"] for row in funnel] + ["published"]
    records = [row["records"] for row in funnel] + [published]
    figure, axes = _figure(0.35 * len(stages) + 0.9, stages)
    bars = axes.barh(stages[::-1], records[::-1], color="tab:blue")
    axes.bar_label(bars, labels=[f"{n:,}" for n in records[::-1]], padding=3, fontsize=8)
    axes.set_xlabel("records remaining after the stage")
    axes.set_xlim(0, max(records + [1]) * 1.15)
    axes.set_title("From records in to published")
    return _data_uri(figure)


def reasons_chart(reasons: dict[str, dict[str, int]]) -> str | None:
    rows = [
        (f"{reason} ({action})", count)
        for action in ("dropped", "quarantined")
        for reason, count in reasons.get(action, {}).items()
    ]
    if not rows:
        return None
    rows.sort(key=lambda row: row[1])
    figure, axes = _figure(0.3 * len(rows) + 0.9, [label for label, _ in rows])
    colours = ["tab:red" if "(dropped)" in label else "tab:purple" for label, _ in rows]
    bars = axes.barh([label for label, _ in rows], [count for _, count in rows], color=colours)
    axes.bar_label(bars, labels=[f"{count:,}" for _, count in rows], padding=3, fontsize=8)
    axes.set_xscale("log")
    axes.set_xlim(right=max(count for _, count in rows) * 1.6)  # room for the longest's label
    axes.set_xlabel("records (log scale)")
    axes.set_title("Dropped and quarantined, by reason")
    return _data_uri(figure)


def cluster_size_chart(histogram: dict[str, int]) -> str | None:
    if not histogram:
        return None
    counts = sorted((int(size), clusters) for size, clusters in histogram.items())  # JSON: str keys
    figure, axes = _figure(2.6)
    axes.bar(
        [str(size) for size, _ in counts], [clusters for _, clusters in counts], color="tab:gray"
    )
    axes.set_yscale("log")
    axes.set_xlabel("records in the cluster")
    axes.set_ylabel("clusters (log scale)")
    axes.set_title("Duplicate cluster sizes")
    return _data_uri(figure)


def split_timeline(splits: dict[str, dict[str, Any]]) -> str | None:
    """Records per month in each split: where the time cutoffs fall, and any overlap."""
    months = sorted({month for figures in splits.values() for month in figures.get("months", {})})
    if not months:
        return None

    def as_date(month: str) -> date:
        year, number = month.split("-")
        return date(int(year), int(number), 15)

    figure, axes = _figure(2.8)
    for name, figures in splits.items():
        counted = figures.get("months", {})
        if counted:
            points = sorted(counted.items())
            axes.scatter(
                [as_date(month) for month, _ in points],
                [count for _, count in points],
                s=10,
                label=f"{name} ({figures['records']:,})",
                color=SPLIT_COLOURS.get(name),
            )
    axes.set_yscale("log")
    axes.set_ylabel("records per month")
    axes.set_title("Split time ranges")
    axes.legend(fontsize=8)
    return _data_uri(figure)
