"""Bounded globs: the files a source location names, found without following a link loop.

Python's `glob` follows symbolic links to folders in `**`, so a link to a folder above it
(`ln -s . data/sub/self`) makes the walk endless. Here each real folder is entered once per
`**` (by device and inode), and every listing counts against the source's
`max_glob_paths` and `max_glob_seconds`: past either, the walk stops with an error naming
the source, its location and the setting. The wildcards mean what they mean to `glob`:
`*`, `?` and `[...]` stay within a folder, `**` spans folders, and a name starting with a
dot matches only a pattern part that starts with one.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
import re
import time
from collections.abc import Iterator

from fsspec.utils import glob_translate

from pipeline.config import SourceDeclaration
from pipeline.core.errors import DataError


class WalkBound:
    """The paths a source's listing has examined and the time it has taken, against its
    bounds."""

    def __init__(self, source: SourceDeclaration, location: str):
        self.source, self.location = source, location
        self.paths = 0
        self.deadline = time.monotonic() + source.max_glob_seconds

    def examined(self, count: int = 1) -> None:
        self.paths += count
        if self.paths > self.source.max_glob_paths:
            self._stop(f"examined more than {self.source.max_glob_paths:,} paths", "max_glob_paths")
        if time.monotonic() > self.deadline:
            self._stop(
                f"took more than {self.source.max_glob_seconds:g} s to list", "max_glob_seconds"
            )

    def _stop(self, what: str, setting: str) -> None:
        raise DataError(
            f"source {self.source.name!r}: location {self.location!r} {what} and is not done "
            "(a very large folder tree, or links that lead back into it); narrow the location, "
            f"or raise the source's `{setting}` (sources[{self.source.name}].{setting})"
        )


def local_glob(pattern: str, bound: WalkBound) -> list[str]:
    """The paths matching `pattern` on this machine, sorted."""
    if not glob.has_magic(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    parts = pattern.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    top = os.sep.join(parts[:fixed]) or (os.sep if pattern.startswith(os.sep) else "")
    rest = parts[fixed:]
    if rest[-1] == "**":  # files at any depth: `glob` gives the folders too, never read
        rest = [*rest, "*"]
    return sorted(set(_matches(top, rest, bound)))


def _matches(folder: str, parts: list[str], bound: WalkBound) -> Iterator[str]:
    if not parts:
        yield folder
        return
    part, rest = parts[0], parts[1:]
    if part == "**":
        for below in _folders(folder, bound):
            yield from _matches(below, rest, bound)
    elif not glob.has_magic(part):
        bound.examined()
        path = os.path.join(folder, part)
        if os.path.lexists(path):
            yield from _matches(path, rest, bound)
    else:
        for name, _ in _entries(folder, bound, hidden=part.startswith(".")):
            if fnmatch.fnmatch(name, part):
                yield from _matches(os.path.join(folder, name), rest, bound)


def _folders(top: str, bound: WalkBound) -> Iterator[str]:
    """`top` and the folders below it, links to folders followed, each real folder once."""
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            stat = os.stat(folder or os.curdir)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        yield folder
        below = [os.path.join(folder, name) for name, is_dir in _entries(folder, bound) if is_dir]
        stack.extend(reversed(below))


def _entries(folder: str, bound: WalkBound, hidden: bool = False) -> list[tuple[str, bool]]:
    """(name, whether it is a folder or a link to one) of each entry of `folder`, by name;
    names starting with a dot only when `hidden`."""
    found = []
    try:
        with os.scandir(folder or os.curdir) as entries:
            for entry in entries:
                bound.examined()
                if hidden or not entry.name.startswith("."):
                    found.append((entry.name, _is_dir(entry)))
    except OSError:  # not a folder, gone, or not ours to read: it holds no match, as in glob
        return []
    return sorted(found)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def remote_glob(fs, pattern: str, bound: WalkBound) -> list[str]:
    """The files matching `pattern` (without its protocol) on an fsspec filesystem, sorted:
    `fs.glob` lists the whole tree before it matches, so the bound could not stop it."""
    if not glob.has_magic(pattern):
        return [pattern] if fs.isfile(pattern) else []
    parts = pattern.split("/")
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    top = "/".join(parts[:fixed])
    depth = None if "**" in parts else len(parts) - fixed
    matching = re.compile(glob_translate(pattern))
    found = []
    for folder, folders, files in fs.walk(top, maxdepth=depth):
        bound.examined(len(folders) + len(files))
        paths = (posixpath.join(folder, name) for name in files)
        found += [path for path in paths if matching.match(path)]
    return sorted(found)
