"""Timestamps to UTC: a declared format, else ISO 8601, RFC 2822, dates or epoch seconds."""

from __future__ import annotations

import polars as pl

_TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%#z",
    "%Y-%m-%d %H:%M:%S%.f%#z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d",
    "%Y%m%d",
    "%a, %d %b %Y %H:%M:%S %z",
)


def parse_timestamps(value: pl.Series, fmt: str | None) -> pl.Series:
    """Parse timestamps to UTC: a given format, else ISO 8601, RFC 2822, a date or epoch
    seconds. Times without a zone are taken as UTC. Each format after the first is tried
    only on the rows still unparsed: real columns mostly hold one format."""
    parsed = pl.Series(value.name, [None] * len(value), dtype=pl.Datetime("us", "UTC"))
    for attempt in [*((fmt,) if fmt else _TIMESTAMP_FORMATS), *([] if fmt else ["epoch"])]:
        todo = (parsed.is_null() & value.is_not_null()).arg_true()
        if todo.len() == 0:
            break
        parsed = parsed.scatter(todo, _parse_as(value.gather(todo), attempt))
    return parsed


def _parse_as(value: pl.Series, attempt: str) -> pl.Series:
    if attempt == "epoch":
        # 9 to 11 digits: 1973 to 5138; fewer are more likely a year or a mistake
        seconds = value.str.extract(r"^(-?[0-9]{9,11}(?:\.[0-9]+)?)$").cast(pl.Float64)
        return (seconds * 1_000_000).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    parsed = value.str.to_datetime(attempt, strict=False, time_unit="us")
    # formats with a zone parse to UTC already; the rest are naive and taken as UTC
    if "%z" not in attempt and "%#z" not in attempt:
        parsed = parsed.dt.replace_time_zone("UTC")
    return parsed.cast(pl.Datetime("us", "UTC"))
