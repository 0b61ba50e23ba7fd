"""Protected evaluation sets: registered once, checked against by every later run.

An evaluation set's items and prepared index files (n-gram hashes, MinHash signatures,
embeddings) live under `evals/<name>/<digest>/` in the work folder, where `digest` is a
sha256 of the items' ids and texts; the catalog keeps each file's sha256, and a run refuses a
set whose files changed. Registering the same items again changes nothing; other items
under a registered name need `replace`.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy import delete, insert, select

from data_catalog import tables
from data_catalog.catalog import Catalog, now
from pipeline.config import ContaminationMethods
from pipeline.core.errors import DataError
from pipeline.core.schema import EvalSet
from pipeline.text.embeddings import model_digest
from pipeline.text.eval_sets import eval_items, load_eval_set, write_eval_set

EVALS_DIR = "evals"
EMBEDDING_CACHE = Path("cache") / "embeddings"


def items_digest(items: pl.DataFrame) -> str:
    digest = hashlib.sha256()
    for item_id, text in items.select("item_id", "text").iter_rows():
        digest.update(item_id.encode() + b"\x1f" + text.encode() + b"\x1e")
    return digest.hexdigest()


def register(
    catalog: Catalog,
    name: str,
    texts: pl.Series,
    item_ids: pl.Series | None,
    source: str,
    text_field: str,
    methods: ContaminationMethods,
    replace: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Store an evaluation set; return (its catalog row, whether anything changed)."""
    if texts.len() == 0:
        raise DataError(f"{source}: no items; an evaluation set needs at least one text")
    items = eval_items(texts, item_ids)
    repeated = items.filter(pl.col("item_id").is_duplicated())["item_id"].unique().sort()
    if repeated.len():
        raise DataError(
            f"{source}: item ids repeat ({', '.join(repeated.head(3))}); pick a unique id field"
        )
    digest = items_digest(items)
    settings = {**methods.model_dump(mode="json"), "embedding_model": model_digest()}
    existing = find(catalog, name)
    if (
        existing is not None
        and existing["digest"] == digest
        and existing["settings"] == settings
        and _intact(catalog, existing)
    ):
        return existing, False
    if existing is not None and existing["digest"] != digest and not replace:
        raise DataError(
            f"evaluation set {name!r} is registered with other items ({existing['items']} from "
            f"{existing['source']}); pass --replace to replace it, or register under a new name"
        )
    relative = Path(EVALS_DIR) / name / digest[:16]
    folder = catalog.workdir / relative
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    files = write_eval_set(items, folder, methods, catalog.workdir / EMBEDDING_CACHE)
    row = {
        "name": name,
        "digest": digest,
        "path": relative.as_posix(),
        "source": source,
        "text_field": text_field,
        "items": items.height,
        "files": files,
        "settings": settings,
        "registered_at": now(),
    }
    with catalog.engine.begin() as connection:
        connection.execute(delete(tables.eval_sets).where(tables.eval_sets.c.name == name))
        connection.execute(insert(tables.eval_sets).values(**row))
    if existing is not None and existing["path"] != row["path"]:
        shutil.rmtree(catalog.workdir / existing["path"], ignore_errors=True)
    return find(catalog, name), True


def _intact(catalog: Catalog, row: dict[str, Any]) -> bool:
    """Whether the set's files are still what was registered (else registering rebuilds them)."""
    try:
        load_eval_set(row["name"], catalog.workdir / row["path"], row["files"])
    except DataError:
        return False
    return True


def find(catalog: Catalog, name: str) -> dict[str, Any] | None:
    query = select(tables.eval_sets).where(tables.eval_sets.c.name == name)
    with catalog.engine.connect() as connection:
        row = connection.execute(query).mappings().first()
    return dict(row) if row else None


def registered(catalog: Catalog) -> list[dict[str, Any]]:
    query = select(tables.eval_sets).order_by(tables.eval_sets.c.name)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def load(catalog: Catalog, protected: str | list[str]) -> tuple[EvalSet, ...]:
    """The evaluation sets a run protects (`all`: every registered one), files verified."""
    rows = {row["name"]: row for row in registered(catalog)}
    names = sorted(rows) if protected == "all" else protected
    missing = [name for name in names if name not in rows]
    if missing:
        known = ", ".join(sorted(rows)) or "none"
        raise DataError(
            f"contamination.protected names evaluation sets that are not registered: "
            f"{', '.join(missing)} (registered: {known}); register one with "
            f"`thresher eval register NAME PATH --workdir {catalog.workdir}`"
        )
    return tuple(
        load_eval_set(name, catalog.workdir / rows[name]["path"], rows[name]["files"])
        for name in names
    )
