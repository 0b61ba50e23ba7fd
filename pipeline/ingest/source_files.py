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
from pipeline.ingest.globbing import WalkBound, local_glob, remote_glob


def source_files(source: SourceDeclaration) -> list[tuple[Location, str]]:
    """(path, stable name) for each file of a source, in a fixed order.

    The name is part of record identities and locations, so it must not depend on where a
    machine keeps the data or on which other files exist: a relative location is named
    relative to the source's `root` (default: the folder of the file that declared it), an
    absolute one relative to its fixed part, the folders before the first wildcard.
    Symbolic links to an already listed file are read once, under the first name in order
    (Debian links the doc folders of binary packages to their source package's); links to
    folders are followed, each real folder once (pipeline/ingest/globbing.py). A location
    may be an fsspec URL (`file://`, `memory://`, `s3://…` with s3fs installed).
    """
    by_target: dict[str, tuple[Location, str]] = {}
    for pattern in source.patterns:
        matches = location_files(source, pattern)
        if not matches:
            found = storage.location(pattern)
            relative = storage.is_local(found) and not os.path.isabs(found)
            raise DataError(
                f"source {source.name!r}: location {str(found)!r} matches no file"
                f"{f' (relative to {source.root_dir})' if relative else ''}; "
                "fix the location or remove the source"
            )
        for match, name in matches:
            by_target.setdefault(_target(match), (match, name))
    named = sorted(by_target.values(), key=lambda item: item[1])
    for (first, name), (second, other) in zip(named, named[1:], strict=False):
        if name == other:
            raise DataError(
                f"source {source.name!r}: {first} and {second} would both be named {name!r}, "
                "and names are part of record identities; set the source's `root` to a folder "
                "above both and give their locations relative to it"
            )
    return named


def location_files(source: SourceDeclaration, pattern: str) -> list[tuple[Location, str]]:
    """(path, stable name) of each file one location of a source matches, once (under its
    first name), in name order; none when it matches none. A listing past the source's
    bounds raises DataError."""
    found = storage.location(pattern)
    bound = WalkBound(source, str(found))
    if not storage.is_local(found):
        fs = found.fs
        fixed = _fixed_part(found.path)
        return [
            (UPath(fs.unstrip_protocol(match)), posixpath.relpath(match, fixed))
            for match in remote_glob(fs, found.path, bound)
        ]
    pattern = str(found)  # a file:// URL as a path
    absolute = os.path.isabs(pattern)
    root = source.root_dir
    matches = local_glob(pattern if absolute else os.path.join(root, pattern), bound)
    named_from = _fixed_part(pattern) if absolute else root
    files: dict[str, tuple[Location, str]] = {}
    for match in filter(os.path.isfile, matches):
        files.setdefault(_target(Path(match)), (Path(match), os.path.relpath(match, named_from)))
    return list(files.values())


def _target(path: Location) -> str:
    """The file a path names, links followed: a file found under two names is read once."""
    return os.path.realpath(path) if storage.is_local(path) else str(path)


def _fixed_part(pattern: str) -> str:
    """The folder of an absolute pattern before its first wildcard (a file's own folder)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    return str(Path(*parts[:fixed]))
