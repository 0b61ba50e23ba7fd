"""Debian changelogs (`changelog.Debian.gz`): one record per entry.

An entry is a header `package (version) distribution; urgency=…`, indented change lines,
and a trailer ` -- Name <email>  RFC 2822 date`. The reader gives the columns package,
version, distribution, urgency, maintainer, maintainer_email, date (ISO 8601), changes
and entry_id (`package/version`); `_location` is the header's line.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import polars as pl

from pipeline.config import IngestConfig, SourceDeclaration
from pipeline.core import reasons
from pipeline.ingest import files

_CHANGELOG_HEADER = re.compile(
    r"^(?P<package>[a-z0-9][a-z0-9+.-]*) \((?P<version>[^()\s]+)\) (?P<distribution>[^;]*);(?P<options>.*)$"
)
_CHANGELOG_TRAILER = re.compile(r"^ -- (?P<maintainer>.*?) <(?P<email>[^>]*)>  (?P<date>.+?)\s*$")


def read_debian_changelog(
    path: Path, name: str, source: SourceDeclaration, limits: IngestConfig
) -> Iterator[pl.DataFrame]:
    """Debian changelog entries: header, change lines, ` -- Name <email>  date` trailer.
    The file (`changelog.Debian.gz`, or any compression by its suffix) is streamed line by
    line, within the expansion cap; a line over `max_record_bytes` characters is skipped
    unread and its entry dropped as record_too_large."""
    with files.open_binary(path, limits.max_expansion_ratio) as handle:
        text = io.TextIOWrapper(handle, encoding=source.encoding, errors="replace", newline="\n")
        entries = _entries(_bounded_lines(text, limits.max_record_bytes))
    yield _frame(entries)


def _bounded_lines(text: io.TextIOWrapper, limit: int) -> Iterator[str | None]:
    """The lines without their newline; None for a line longer than `limit`."""
    while line := text.readline(limit + 1):
        if line.endswith("\n") or len(line) <= limit:  # the latter: the last line
            yield line.removesuffix("\n")
            continue
        while (rest := text.readline(limit)) and not rest.endswith("\n"):
            pass
        yield None


def _entries(lines: Iterator[str | None]) -> list[dict]:
    entries, current = [], None
    for number, line in enumerate(lines, start=1):
        if line is None:  # too long to read: its entry (perhaps its header) is dropped
            if current is None:
                current = {"_location": number, "_error": None, "lines": []}
            current["_error"] = reasons.RECORD_TOO_LARGE
            continue
        header = _CHANGELOG_HEADER.match(line)
        if header:
            if current is not None:  # a header before the previous entry's trailer
                entries.append(
                    {**current, "_error": current["_error"] or reasons.UNPARSEABLE_ENTRY}
                )
            urgency = re.search(r"urgency=(\w+)", header["options"])
            current = {
                "_location": number,
                "_error": None,
                "package": header["package"],
                "version": header["version"],
                "distribution": header["distribution"].strip(),
                "urgency": urgency[1] if urgency else None,
                "lines": [],
            }
            continue
        if current is None:
            continue  # text between entries (old-format notes, local variables)
        trailer = _CHANGELOG_TRAILER.match(line)
        if trailer:
            current |= {
                "maintainer": trailer["maintainer"],
                "maintainer_email": trailer["email"],
                "date": _rfc2822_to_iso(trailer["date"]),
            }
            entries.append(current)
            current = None
        else:
            current["lines"].append(line)
    if current is not None:
        entries.append({**current, "_error": current["_error"] or reasons.UNPARSEABLE_ENTRY})
    return entries


def _frame(entries: list[dict]) -> pl.DataFrame:
    for entry in entries:
        body = "\n".join(entry.pop("lines"))
        entry["changes"] = body if "\ufffd" not in body else None
        if entry["changes"] is None and entry["_error"] is None:
            entry["_error"] = reasons.INVALID_UTF8
        known = "package" in entry  # not when its header was too long to read
        entry["entry_id"] = f"{entry['package']}/{entry['version']}" if known else None
    columns = [
        "_location",
        "_error",
        "package",
        "version",
        "distribution",
        "urgency",
        "maintainer",
        "maintainer_email",
        "date",
        "changes",
        "entry_id",
    ]
    schema = {name: pl.Int64 if name == "_location" else pl.String for name in columns}
    return pl.DataFrame(
        [{name: entry.get(name) for name in columns} for entry in entries], schema=schema
    )


def _rfc2822_to_iso(value: str) -> str:
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError):
        return value  # left for the timestamp parser to report
