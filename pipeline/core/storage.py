"""Where files live: a local folder, or any fsspec filesystem named by URL.

Plain paths and `file://` URLs give a `pathlib.Path` and take the fast local paths (polars
reads, renames). Other URLs (`memory://`, `s3://` with s3fs installed, `gs://` with gcsfs)
give a `UPath`, which offers the same methods (`/`, `open`, `read_text`, `exists`, `glob`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import fsspec
import polars as pl
from upath import UPath

from pipeline.core.errors import ConfigError

Location = Path | UPath


def location(path_or_url: str | Path | UPath) -> Location:
    """A Path for a local path or `file://` URL, a UPath for any other fsspec URL."""
    if isinstance(path_or_url, Path) and not isinstance(path_or_url, UPath):
        return path_or_url
    text = str(path_or_url)
    if "://" not in text:
        return Path(text)
    if text.startswith("file://"):
        return Path(UPath(text).path)
    check_url(text)
    return UPath(text)


def check_url(url: str, where: str = "") -> None:
    """Fail early, naming the URL, when no installed fsspec filesystem serves its scheme."""
    protocol = url.split("://", 1)[0]
    try:
        fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as error:  # unknown scheme, or e.g. s3:// without s3fs
        raise ConfigError(
            f"{where}{url}: {error}".rstrip(".") + "; install the package that serves it "
            "(s3fs for s3://, gcsfs for gs://, adlfs for az://) or fix the URL"
        ) from None


def is_local(path: Location) -> bool:
    return isinstance(path, Path) and not isinstance(path, UPath)


# the schemes polars reads and writes itself (object_store), as a run's scratch must be
POLARS_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "file")


def files(folder: str | Location, pattern: str = "*.parquet") -> str:
    """The files of a local or remote folder matching `pattern`, as polars scans them."""
    return f"{str(folder).rstrip('/')}/{pattern}"


def copy_file(source: Path, target: Location) -> None:
    """Copy a local file to a local or remote place."""
    if is_local(target):
        shutil.copyfile(source, target)
    else:
        target.fs.put_file(str(source), target.path)


def scan_parquet(files: list[Location]) -> pl.LazyFrame:
    """One LazyFrame over Parquet files, local or remote (through pyarrow and fsspec)."""
    if all(is_local(file) for file in files):
        return pl.scan_parquet(files)
    import pyarrow.dataset as ds
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    filesystem = PyFileSystem(FSSpecHandler(files[0].fs))
    return pl.scan_pyarrow_dataset(
        ds.dataset([file.path for file in files], filesystem=filesystem, format="parquet")
    )


def parquet_file(path: Location):
    """A `pyarrow.parquet.ParquetFile` over a local or remote file."""
    import pyarrow.parquet as pq

    if is_local(path):
        return pq.ParquetFile(path)
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    return pq.ParquetFile(path.path, filesystem=PyFileSystem(FSSpecHandler(path.fs)))


def remove_tree(path: Location) -> None:
    """Delete a folder and everything in it; a missing one is fine."""
    if is_local(path):
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.fs.rm(path.path, recursive=True)


def place_tree(source: Location, target: Location) -> bool:
    """Put a folder (local, or on object storage: a run's remote scratch) at `target` (which
    must not exist). On the same disk it is renamed (returns True: `source` is gone);
    elsewhere it is copied file by file with the manifest last, so that a folder with a
    manifest is complete (returns False: `source` stays until the caller no longer needs it
    to clean up). Between two places of one object store the copies are the store's own."""
    if is_local(target) and is_local(source):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            source.rename(target)
            return True
        except OSError:  # another file system
            pass
    if is_local(source):
        relative = [p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()]
    else:
        relative = [
            Path(f).relative_to(source.path).as_posix() for f in source.fs.find(source.path)
        ]
    for name in sorted(relative, key=lambda name: name.rsplit("/", 1)[-1] == "manifest.json"):
        origin, destination = source / name, target / name
        if is_local(destination):
            destination.parent.mkdir(parents=True, exist_ok=True)
            if is_local(origin):
                shutil.copyfile(origin, destination)
            else:
                origin.fs.get_file(origin.path, str(destination))
        elif is_local(origin):
            copy_file(origin, destination)
        elif origin.protocol == destination.protocol:
            destination.fs.copy(origin.path, destination.path)
        else:
            with origin.open("rb") as read, destination.open("wb") as write:
                shutil.copyfileobj(read, write)
    return False


def file_sha256(path: Path | UPath) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
