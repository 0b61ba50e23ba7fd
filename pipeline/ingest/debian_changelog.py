"""Debian changelogs (`changelog.Debian.gz`): one record per entry.

An entry is a header `package (version) distribution; urgency=…`, indented change lines,
and a trailer ` -- Name <email>  RFC 2822 date`. The reader gives the columns package,
version, distribution, urgency, maintainer, maintainer_email, date (ISO 8601), changes
and entry_id (`package/version`); `_location` is the header's line.
"""

from __future__ import annotations

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
    The file (`changelog.Debian.gz`, or any compression by its suffix) is read whole, within
    the expansion cap: entries are small and a file holds few."""
    with files.open_binary(path, limits.max_expansion_ratio) as handle:
        text, _ = files.decode_lossy(handle.read(), source.encoding)
    entries, current = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        header = _CHANGELOG_HEADER.match(line)
        if header:
            if current is not None:  # a header before the previous entry's trailer
                entries.append({**current, "_error": reasons.UNPARSEABLE_ENTRY})
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
        entries.append({**current, "_error": reasons.UNPARSEABLE_ENTRY})
    for entry in entries:
        body = "\n".join(entry.pop("lines"))
        entry["changes"] = body if "\ufffd" not in body else None
        if entry["changes"] is None and entry["_error"] is None:
            entry["_error"] = reasons.INVALID_UTF8
        entry["entry_id"] = f"{entry['package']}/{entry['version']}"
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
    yield pl.DataFrame(
        [{name: entry.get(name) for name in columns} for entry in entries], schema=schema
    )


def _rfc2822_to_iso(value: str) -> str:
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError):
        return value  # left for the timestamp parser to report
