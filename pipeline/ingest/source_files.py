"""Finding the files of a declared source, and naming them stably."""

from __future__ import annotations

import glob
import os
import posixpath
from pathlib import Path

from upath import UPath

from pipeline.config import SourceDeclaration
from pipeline.core import storage
from pipeline.core.errors import DataError
from pipeline.core.storage import Location


def source_files(source: SourceDeclaration) -> list[tuple[Location, str]]:
    """(path, stable name) for each file of a source, in a fixed order.

    The name is part of record identities and locations, so it must not depend on where a
    machine keeps the data or on which other files exist: a relative location is named
    relative to the source's `root` (default: the folder of the file that declared it), an
    absolute one relative to its fixed part, the folders before the first wildcard.
    Symbolic links to an already listed file are read once (Debian links the doc folders
    of binary packages to their source package's). A location may be an fsspec URL
    (`file://`, `memory://`, `s3://…` with s3fs installed).
    """
    root = source.root_dir
    by_target: dict[str, tuple[Location, str]] = {}
    for pattern in source.patterns:
        found = storage.location(pattern)
        if not storage.is_local(found):
            for match, name in _remote_files(source, found):
                by_target.setdefault(str(match), (match, name))
            continue
        pattern = str(found)  # a file:// URL as a path
        absolute = os.path.isabs(pattern)
        matches = sorted(
            glob.glob(pattern if absolute else os.path.join(root, pattern), recursive=True)
        )
        matches = [match for match in matches if os.path.isfile(match)]
        if not matches:
            raise DataError(
                f"source {source.name!r}: location {pattern!r} matches no file"
                f"{'' if absolute else f' (relative to {root})'}; "
                "fix the location or remove the source"
            )
        named_from = _fixed_part(pattern) if absolute else root
        for match in matches:
            by_target.setdefault(
                os.path.realpath(match), (Path(match), os.path.relpath(match, named_from))
            )
    named = sorted(by_target.values(), key=lambda item: item[1])
    for (first, name), (second, other) in zip(named, named[1:], strict=False):
        if name == other:
            raise DataError(
                f"source {source.name!r}: {first} and {second} would both be named {name!r}, "
                "and names are part of record identities; set the source's `root` to a folder "
                "above both and give their locations relative to it"
            )
    return named


def _remote_files(source: SourceDeclaration, pattern: UPath) -> list[tuple[UPath, str]]:
    fs = pattern.fs
    matches = [match for match in sorted(fs.glob(pattern.path)) if fs.isfile(match)]
    if not matches:
        raise DataError(
            f"source {source.name!r}: location {str(pattern)!r} matches no file; "
            "fix the location or remove the source"
        )
    fixed = _fixed_part(pattern.path)
    return [
        (UPath(fs.unstrip_protocol(match)), posixpath.relpath(match, fixed)) for match in matches
    ]


def _fixed_part(pattern: str) -> str:
    """The folder of an absolute pattern before its first wildcard (a file's own folder)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    return str(Path(*parts[:fixed]))
