"""Test-only fault injection, loaded by any Python started with this folder on PYTHONPATH.
Without these variables this module does nothing.

THRESHER_HOLD_BEFORE_COMMIT=<marker file>: `Catalog.commit` writes the marker file, then sleeps
(THRESHER_HOLD_SECONDS, default 120) before committing, so that a test can kill the process at
a known point: after the run wrote its shards into the staging folder, before the catalog row.

THRESHER_HOLD_AFTER_COMMIT=<marker file>: the same, just after the catalog row is written:
before the run writes the version's report.

THRESHER_FULL_DISK_AT_WRITE=<n>: the n-th Parquet file a run writes into a staging folder (a
shard being published) fails as a full disk does (ENOSPC, naming the file).
"""

from __future__ import annotations

import os

_BEFORE = os.environ.get("THRESHER_HOLD_BEFORE_COMMIT")
_AFTER = os.environ.get("THRESHER_HOLD_AFTER_COMMIT")
_FULL_AT = os.environ.get("THRESHER_FULL_DISK_AT_WRITE")

if _BEFORE or _AFTER:
    import functools
    import json
    import time
    from pathlib import Path

    from data_catalog.catalog import Catalog

    _commit = Catalog.commit

    def _hold(marker: str, staged) -> None:
        Path(marker).write_text(json.dumps({"pid": os.getpid(), "staging": str(staged.path)}))
        time.sleep(float(os.environ.get("THRESHER_HOLD_SECONDS", "120")))

    @functools.wraps(_commit)
    def _held_commit(self, staged, *args, **kwargs):
        if _BEFORE:
            _hold(_BEFORE, staged)
        committed = _commit(self, staged, *args, **kwargs)
        if _AFTER:
            _hold(_AFTER, staged)
        return committed

    Catalog.commit = _held_commit

if _FULL_AT:
    import errno
    import functools

    import polars as pl

    _write_parquet = pl.DataFrame.write_parquet
    _writes = {"staged": 0}

    @functools.wraps(_write_parquet)
    def _write_or_fill_the_disk(self, file, *args, **kwargs):
        if ".staging-" in str(file):
            _writes["staged"] += 1
            if _writes["staged"] == int(_FULL_AT):
                with open(file, "wb") as partial:  # what a full disk leaves: part of the file
                    partial.write(b"PAR1")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return _write_parquet(self, file, *args, **kwargs)

    pl.DataFrame.write_parquet = _write_or_fill_the_disk
