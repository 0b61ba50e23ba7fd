"""Durations and sizes as the plan and the CLI print them (no torch import: the CLI starts
fast)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def mebibytes(count: float) -> str:
    return f"{count / 2**20:,.0f} MiB"
