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


def place_tree(source: Path, target: Location) -> bool:
    """Put a local folder at `target` (which must not exist). On the same disk it is renamed
    (returns True: `source` is gone); elsewhere it is copied file by file with the manifest
    last, so that a folder with a manifest is complete (returns False: `source` stays until
    the caller no longer needs it to clean up)."""
    if is_local(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            source.rename(target)
            return True
        except OSError:  # another file system
            pass
    files = sorted(p for p in source.rglob("*") if p.is_file())
    for file in sorted(files, key=lambda p: p.name == "manifest.json"):
        destination = target / file.relative_to(source).as_posix()
        if is_local(destination):
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, destination)
        else:
            target.fs.put_file(str(file), destination.path)
    return False


def file_sha256(path: Path | UPath) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
