"""The audit report's charts, as PNG data URIs so the HTML file needs nothing beside it."""

from __future__ import annotations

import base64
import io
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
    # linear: a log scale drew 4 records almost as long as 40; the printed count says it
    axes.set_xlim(0, max(count for _, count in rows) * 1.15)  # room for the longest's label
    axes.set_xlabel("records")
    axes.set_title("Dropped and quarantined, by reason")
    return _data_uri(figure)


def cluster_size_chart(histogram: dict[str, int]) -> str | None:
    """Clusters per size, linear, the count printed on each bar (one cluster of 89 records is
    a bar of height 1 with `1` on it, not a zero-height bar on a log scale)."""
    if not histogram:
        return None
    counts = sorted((int(size), clusters) for size, clusters in histogram.items())  # JSON: str keys
    figure, axes = _figure(2.8)
    bars = axes.bar(
        [str(size) for size, _ in counts], [clusters for _, clusters in counts], color="tab:gray"
    )
    axes.bar_label(bars, labels=[f"{n:,}" for _, n in counts], padding=2, fontsize=8)
    axes.set_ylim(0, max(n for _, n in counts) * 1.18)
    axes.set_xlabel("records in the cluster")
    axes.set_ylabel("clusters")
    axes.set_title("Duplicate cluster sizes")
    return _data_uri(figure)


def length_chart(text: dict[str, Any], group_by: str) -> str | None:
    """Records per length bin (powers of two) for each split or source (`group_by`), in
    characters and in tokens side by side, as lines with a marker per bin."""
    groups = (text or {}).get(f"by_{group_by}") or {}
    if not groups:
        return None
    edges = text["edges"]
    figure, panels = _pyplot().subplots(1, 2, figsize=(9, 3.0), sharey=True)
    figure.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.84, wspace=0.06)
    for axes, measure in zip(panels, ("chars", "tokens"), strict=True):
        used = [i for i in range(len(edges)) if any(g[measure][i] for g in groups.values())]
        if not used:
            continue
        bins = list(range(used[0], used[-1] + 1))
        labels = [f"{edges[i]:,}" if edges[i] < 1000 else f"{edges[i] // 1024:,}k" for i in bins]
        for name, histograms in groups.items():
            counts = [histograms[measure][i] for i in bins]
            axes.plot(
                labels, counts, marker="o", markersize=3, label=f"{name} ({sum(counts):,})",
                color=SPLIT_COLOURS.get(name),
            )  # fmt: skip
        axes.set_xlabel(f"{measure} per record, at least (bins double)")
        axes.grid(alpha=0.3)
        axes.tick_params(axis="x", labelsize=8)
    panels[0].set_ylim(bottom=0)
    panels[0].set_ylabel("records")
    panels[1].legend(fontsize=8)
    figure.suptitle(f"Text length by {group_by}, in characters and in tokens")
    return _data_uri(figure)


def split_timeline(splits: dict[str, dict[str, Any]]) -> str | None:
    """Each split's time range as a bar from its first to its last record, labelled with its
    records and groups: where the cutoffs fall, and any overlap, at a glance."""
    ranged = [
        (name, figures)
        for name, figures in splits.items()
        if figures.get("first") and figures.get("last")
    ]
    if not ranged:
        return None
    from datetime import datetime

    import matplotlib.dates as mdates

    figure, axes = _figure(0.55 * len(ranged) + 1.0, [name for name, _ in ranged])
    for row, (name, figures) in enumerate(reversed(ranged)):
        first = mdates.date2num(datetime.fromisoformat(figures["first"]))
        last = mdates.date2num(datetime.fromisoformat(figures["last"]))
        axes.barh(row, max(last - first, 1), left=first, height=0.5,
                  color=SPLIT_COLOURS.get(name, "tab:gray"))  # fmt: skip
        axes.annotate(
            f"{figures['records']:,} records, {figures.get('groups', 0):,} groups · "
            f"{figures['first'][:10]} to {figures['last'][:10]}",
            (first, row + 0.3), fontsize=8, va="bottom",
        )  # fmt: skip
    axes.set_yticks(range(len(ranged)), [name for name, _ in reversed(ranged)])
    axes.set_ylim(-0.5, len(ranged) - 0.1)
    axes.xaxis_date()
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%Y"))
    axes.set_title("Time range of each split (first to last record)")
    axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)
