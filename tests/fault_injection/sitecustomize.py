"""Test-only fault injection, loaded by any Python started with this folder on PYTHONPATH.

THRESHER_HOLD_BEFORE_COMMIT=<marker file>: `Catalog.commit` writes the marker file, then sleeps
(THRESHER_HOLD_SECONDS, default 120) before committing, so that a test can kill the process at
a known point: after the run wrote its shards into the staging folder, before the catalog row.
Without the variable this module does nothing.
"""

from __future__ import annotations

import os

_MARKER = os.environ.get("THRESHER_HOLD_BEFORE_COMMIT")

if _MARKER:
    import functools
    import json
    import time
    from pathlib import Path

    from data_catalog.catalog import Catalog

    _commit = Catalog.commit

    @functools.wraps(_commit)
    def _held_commit(self, staged, *args, **kwargs):
        marker = Path(_MARKER)
        marker.write_text(json.dumps({"pid": os.getpid(), "staging": str(staged.path)}))
        time.sleep(float(os.environ.get("THRESHER_HOLD_SECONDS", "120")))
        return _commit(self, staged, *args, **kwargs)

    Catalog.commit = _held_commit
