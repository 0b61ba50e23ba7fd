"""The work folder a run writes in (catalog.db, runs/, datasets/): checked before a run starts,
and the faults that stop a run half-way there (a full disk, a read-only or forbidden folder, a
file in the folder's place) said in one sentence that names the folder and what to do."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from data_catalog.catalog import CATALOG_FILE
from pipeline.core.errors import ConfigError

FULL = {errno.ENOSPC, errno.EDQUOT}
READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
IN_THE_WAY = {errno.EEXIST, errno.ENOTDIR}
SETTING = "workdir in the run config"
# A run's files in its run folder and scratch at their peak, over its sources' bytes on disk
# (bench/README.md, "Disk"): what the free-space check asks for before a run starts.
PEAK_DISK_PER_SOURCE_BYTE = 6


def check(workdir: Path, setting: str = SETTING) -> None:
    """Raise a ConfigError unless the work folder is a folder (or can be made) that takes a
    new file: a probe file is written and removed."""
    workdir = Path(workdir)
    probe = workdir / f".write-probe-{os.getpid()}"
    written = False
    try:
        if (blocking := _file_in_the_way(workdir)) is not None:
            raise ConfigError(is_a_file(blocking, workdir, setting))
        workdir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        written = True
        try:
            os.write(descriptor, b"thresher")
        finally:
            os.close(descriptor)
    except OSError as error:  # whatever file it names, the work folder is what to change
        if error.errno in FULL:
            message = no_space(workdir)
        elif error.errno in READ_ONLY:
            message = read_only(workdir, error.errno, setting)
        else:
            message = explain(error, workdir, setting) or (
                f"cannot use the work folder {workdir} ({error}): point {setting} at a folder "
                "you can write in, and run again"
            )
        raise ConfigError(message) from error
    finally:
        if written:
            probe.unlink(missing_ok=True)


def explain(error: BaseException, workdir: Path | str | None, setting: str = SETTING) -> str | None:
    """What to do about a work-folder fault anywhere in the error's chain, or None when it is
    not one. A permission error counts only inside the work folder (a source file may be
    unreadable for reasons of its own); without a work folder, only a full or read-only disk."""
    workdir = Path(workdir) if workdir is not None else None
    for cause in _chain(error):
        if isinstance(cause, sqlite3.OperationalError):
            if "database or disk is full" in str(cause):
                return no_space(workdir / CATALOG_FILE if workdir else None)
            if "readonly database" in str(cause) and workdir is not None:
                return read_only(workdir, errno.EACCES, setting)
        if not isinstance(cause, OSError):
            if any(os.strerror(code) in str(cause) for code in FULL):  # Polars gives only text
                return no_space(workdir)
            continue
        filename = cause.filename if isinstance(cause.filename, str) else None
        if cause.errno in FULL:
            return no_space(Path(filename) if filename else workdir)
        if cause.errno == errno.EROFS and workdir is None and filename:
            return read_only(Path(filename).parent, cause.errno, setting)
        if workdir is None or not _inside(filename, workdir):
            continue
        if cause.errno in READ_ONLY:
            return read_only(workdir, cause.errno, setting)
        if cause.errno in IN_THE_WAY and (blocking := _file_in_the_way(workdir)) is not None:
            return is_a_file(blocking, workdir, setting)
    return None


def is_a_file(path: Path, workdir: Path, setting: str = SETTING) -> str:
    what = f"the work folder {workdir}" if path == workdir else f"{path} (on the way to {workdir})"
    return (
        f"{what} is a file, not a folder; point {setting} at a folder (or move the file away), "
        "and run again"
    )


def read_only(workdir: Path, code: int, setting: str = SETTING) -> str:
    return (
        f"cannot write in the work folder {workdir} ({os.strerror(code).lower()}): make it "
        f"writable for this user, or point {setting} at a folder you can write in, and run again"
    )


def no_space(path: Path | None) -> str:
    """The no-space message; the path first, then what is free on its device when known."""
    where = f" holding {path}" if path is not None else ""
    free = _free(path)
    return (
        f"no space left on the device{where}: {free + ' free there; ' if free else ''}free "
        "some, or move the work folder (or publish.location) to a larger disk, and run again; "
        "a failed run publishes nothing and the next run resumes it"
    )


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error, what caused it and what it interrupted, and a database driver's error
    inside SQLAlchemy's (`orig`)."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [getattr(current, "orig", None), current.__cause__, current.__context__]


def _file_in_the_way(workdir: Path) -> Path | None:
    """The work folder, or the folder above it, that exists as something other than a folder."""
    for path in (workdir, *workdir.parents):
        try:
            if path.exists():
                return None if path.is_dir() else path
            if path.is_symlink():
                return path  # a dangling link: no folder can be made there
        except OSError:  # a folder above it that may not be looked into
            return None
    return None


def _inside(filename: str | None, workdir: Path) -> bool:
    if filename is None:
        return False
    path, folder = Path(filename).resolve(), workdir.resolve()
    return path == folder or folder in path.parents


def _free(path: Path | None) -> str | None:
    free = _free_bytes(path)
    return None if free is None else size_text(free)


def _free_bytes(path: Path | None) -> int | None:
    """The free bytes of the device holding `path` (or the nearest folder above it)."""
    for folder in (path, *path.parents) if path is not None else ():
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def size_text(size: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:.0f} bytes"


def check_space(folder: Path, sources_bytes: int) -> None:
    """Raise a ConfigError when the device holding `folder` (where a run writes its
    intermediate files) has less free space than a run of `sources_bytes` of sources needs at
    its peak, as measured (PEAK_DISK_PER_SOURCE_BYTE)."""
    needed = PEAK_DISK_PER_SOURCE_BYTE * sources_bytes
    free = _free_bytes(folder)
    if free is not None and free < needed:
        raise ConfigError(
            f"not enough free disk for this run in {folder}: its intermediate files take about "
            f"{size_text(needed)} at their peak ({PEAK_DISK_PER_SOURCE_BYTE}× its sources' "
            f"{size_text(sources_bytes)}) and {size_text(free)} is free there; free some space, "
            "or point runner.scratch at a larger disk or at object storage (README: Scale out), "
            "and run again"
        )


def used_bytes(folder: Path) -> int:
    """The bytes of every file under a local folder (0 when it is missing)."""
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += used_bytes(Path(entry.path))
            else:
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:  # removed while counted
            continue
    return total
