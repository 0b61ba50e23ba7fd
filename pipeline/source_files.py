"""Finding the files of a declared source, and naming them stably."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from pipeline.config import SourceDeclaration
from pipeline.errors import DataError


def source_files(source: SourceDeclaration) -> list[tuple[Path, str]]:
    """(path, stable name) for each file of a source, in a fixed order.

    The name is part of record identities and locations, so it must not depend on where a
    machine keeps the data or on which other files exist: a relative location is named
    relative to the source's `root` (default: the folder of the file that declared it), an
    absolute one relative to its fixed part, the folders before the first wildcard.
    Symbolic links to an already listed file are read once (Debian links the doc folders
    of binary packages to their source package's).
    """
    root = source.root_dir
    by_target: dict[str, tuple[Path, str]] = {}
    for pattern in source.patterns:
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


def _fixed_part(pattern: str) -> str:
    """The folder of an absolute pattern before its first wildcard (a file's own folder)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    return str(Path(*parts[:fixed]))
