"""The catalog: migrated schema, atomic commit, latest per name, hash prefixes, open_version."""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import stage_version as stage
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

from data_catalog import tables
from data_catalog.catalog import CATALOG_URL_ENV, Catalog, open_version
from pipeline.core.errors import DataError
from pipeline.publish.version import StagedVersion


def test_migrations_create_the_tables_the_queries_use(tmp_path):
    catalog = Catalog.open(tmp_path)
    inspector = inspect(catalog.engine)
    for table in tables.metadata.sorted_tables:
        assert {c["name"] for c in inspector.get_columns(table.name)} == {
            c.name for c in table.columns
        }
    with sqlite3.connect(tmp_path / "catalog.db") as db:
        assert db.execute("select version_num from alembic_version").fetchone() == ("0008_exports",)
    Catalog.open(tmp_path)  # migrating again is a no-op


def test_a_migration_stopped_half_way_leaves_nothing_and_the_next_open_completes(tmp_path):
    """A run killed while it creates a new catalog must not leave tables without alembic's
    version (every later run then failed on "table datasets already exists")."""

    class Killed(Exception):
        pass

    def killed_at_the_third_migration(connection, cursor, statement, *args):
        if "CREATE TABLE test_locks" in statement:
            raise Killed

    event.listen(Engine, "before_cursor_execute", killed_at_the_third_migration)
    try:
        with pytest.raises(Killed):
            Catalog.open(tmp_path)
    finally:
        event.remove(Engine, "before_cursor_execute", killed_at_the_third_migration)
    url = os.environ.get(CATALOG_URL_ENV) or f"sqlite:///{tmp_path / 'catalog.db'}"
    assert inspect(create_engine(url, poolclass=NullPool)).get_table_names() == []
    catalog = Catalog.open(tmp_path)
    assert set(inspect(catalog.engine).get_table_names()) == {
        *tables.metadata.tables,
        "alembic_version",
    }


def test_commit_moves_the_folder_then_writes_rows(tmp_path, sms_spam, monkeypatch):
    staged, cfg = stage(tmp_path, sms_spam)
    catalog = Catalog.open(tmp_path / "work")
    final = catalog.workdir / "datasets" / "sms" / staged.dataset_hash
    seen = {}
    insert = catalog._insert_version

    def held_before_the_row(*args, **kwargs):  # the moment between the folder and the row
        seen["folder"] = sorted(p.relative_to(final).as_posix() for p in final.rglob("*.json"))
        seen["rows"] = catalog.versions()
        return insert(*args, **kwargs)

    monkeypatch.setattr(catalog, "_insert_version", held_before_the_row)
    version, created = catalog.commit(staged, cfg.source_list)
    assert seen == {"folder": ["manifest.json"], "rows": []}  # folder complete, no row yet
    assert created and not staged.path.exists()
    assert version.path == f"datasets/sms/{staged.dataset_hash}" and version.records == 300
    assert catalog.latest("sms") == version
    assert [s["path"] for s in catalog.shards(version.dataset_hash)] == sorted(
        s["path"] for s in staged.manifest["shards"]
    )
    (source,) = catalog.sources(version.dataset_hash)
    assert (source["source"], source["license"], source["consent"]) == (
        "sms",
        "CC-BY-4.0",
        "public-release",
    )
    assert catalog.version(staged.dataset_hash[:8]) == version
    opened = open_version(tmp_path / "work", "sms")
    assert opened.dataset_hash == staged.dataset_hash


def test_committing_an_identical_version_changes_nothing(tmp_path, sms_spam):
    staged, cfg = stage(tmp_path, sms_spam)
    catalog = Catalog.open(tmp_path / "work")
    first, _ = catalog.commit(staged, cfg.source_list)
    manifest_before = (catalog.version_path(first) / "manifest.json").read_bytes()
    again, cfg = stage(tmp_path, sms_spam, run_id="run-2")
    second, created = catalog.commit(again, cfg.source_list)
    assert not created and second == first and not again.path.exists()
    assert (catalog.version_path(first) / "manifest.json").read_bytes() == manifest_before
    assert len(catalog.versions("sms")) == 1


def test_a_failed_catalog_write_leaves_no_version(tmp_path, sms_spam):
    staged, cfg = stage(tmp_path, sms_spam)
    broken = copy.deepcopy(staged.manifest)
    broken["shards"].append(broken["shards"][0])  # violates unique (dataset_hash, path)
    catalog = Catalog.open(tmp_path / "work")
    with pytest.raises(IntegrityError, match="(?i)unique"):
        catalog.commit(StagedVersion(staged.path, broken, staged.events), cfg.source_list)
    assert catalog.versions() == [] and catalog.latest("sms") is None
    with pytest.raises(DataError, match="has no published version yet"):
        open_version(tmp_path / "work", "sms")
    # the next attempt replaces the orphaned folder and succeeds
    retry, cfg = stage(tmp_path, sms_spam, run_id="run-2")
    version, created = catalog.commit(retry, cfg.source_list)
    assert (
        created
        and json.loads((catalog.version_path(version) / "manifest.json").read_text())["run_id"]
        == "run-2"
    )


def test_latest_is_per_dataset_name_and_prefixes_must_be_unique(tmp_path, sms_spam):
    catalog = Catalog.open(tmp_path / "work")
    a, cfg = stage(tmp_path / "a", sms_spam, name="alpha", stop=100)
    a_version, _ = Catalog.open(tmp_path / "a" / "work").commit(a, cfg.source_list)
    catalog = Catalog.open(tmp_path / "a" / "work")
    b, cfg = stage(tmp_path / "a", sms_spam, name="beta", stop=120, run_id="run-b")
    b_version, _ = catalog.commit(b, cfg.source_list)
    c, cfg = stage(
        tmp_path / "a",
        sms_spam,
        name="alpha",
        stop=140,
        run_id="run-c",
        parent=a_version.dataset_hash,
    )
    c_version, _ = catalog.commit(c, cfg.source_list)
    assert catalog.latest("alpha").dataset_hash == c_version.dataset_hash
    assert catalog.latest("beta").dataset_hash == b_version.dataset_hash
    assert c_version.parent_hash == a_version.dataset_hash
    assert catalog.version("latest", "alpha") == c_version
    with pytest.raises(DataError, match="matches more than one version"):
        catalog.version("")
    with pytest.raises(DataError, match="no version 'ffffzz'"):
        catalog.version("ffffzz")


def test_two_runs_committing_the_same_version_at_once(tmp_path, sms_spam):
    catalog = Catalog.open(tmp_path / "work")
    staged_and_configs = [stage(tmp_path, sms_spam, run_id=f"run-{n}") for n in range(4)]
    staged, cfg = [s for s, _ in staged_and_configs], staged_and_configs[0][1]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda s: Catalog.open(tmp_path / "work").commit(s, cfg.source_list), staged)
        )
    assert sorted(created for _, created in results) == [False, False, False, True]
    (version,) = catalog.versions()
    folder = catalog.version_path(version)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["run_id"] == version.run_id  # the folder is the committed run's own
    assert not any(path.name.startswith(".staging") for path in folder.parent.iterdir())


def _open_catalog(workdir: str) -> int:
    return len(Catalog.open(workdir).versions())


def test_processes_opening_a_new_catalog_at_once(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map(_open_catalog, [str(tmp_path / "work")] * 8) == [0] * 8


def test_latest_points_at_the_newest_published_version_and_follows_withdrawals(tmp_path, sms_spam):
    import os

    import polars as pl

    catalog = Catalog.open(tmp_path / "work")
    pointer = tmp_path / "work" / "datasets" / "sms" / "latest"
    first_staged, cfg = stage(tmp_path, sms_spam, stop=100)
    first, _ = catalog.commit(first_staged, cfg.source_list)
    assert pointer.is_symlink() and os.readlink(pointer) == first.dataset_hash
    second_staged, cfg = stage(tmp_path, sms_spam, stop=150, run_id="run-2")
    second, _ = catalog.commit(second_staged, cfg.source_list)
    assert os.readlink(pointer) == second.dataset_hash
    # what a polars, DuckDB or `datasets` user opens: the newest version's shards
    through_pointer = pl.read_parquet(pointer / "data" / "*" / "*.parquet")
    assert through_pointer.height == 150
    assert sorted(through_pointer["record_id"]) == sorted(
        open_version(tmp_path / "work", "sms").membership().collect()["record_id"]
    )

    catalog.withdraw(second.dataset_hash, "a deletion request")
    assert os.readlink(pointer) == first.dataset_hash
    catalog.withdraw(first.dataset_hash, "a deletion request")
    assert not pointer.exists() and not pointer.is_symlink()


def test_a_work_folder_without_its_pointer_gets_one_and_a_stranger_file_is_not_replaced(
    tmp_path, sms_spam
):
    import os

    catalog = Catalog.open(tmp_path / "work")
    staged, cfg = stage(tmp_path, sms_spam, stop=100)
    version, _ = catalog.commit(staged, cfg.source_list)
    pointer = tmp_path / "work" / "datasets" / "sms" / "latest"
    pointer.unlink()  # a work folder made before pointers existed
    catalog.point_every_latest()
    assert os.readlink(pointer) == version.dataset_hash
    pointer.unlink()
    pointer.mkdir()  # someone's own folder of that name
    with pytest.raises(DataError, match="move it away"):
        catalog.point_latest("sms")
    catalog.refresh_latest("sms")  # what commits and runs call: a warning, not a failure
    assert pointer.is_dir() and not pointer.is_symlink()


def test_on_object_storage_latest_is_a_file_holding_the_hash(tmp_path, sms_spam):
    from upath import UPath

    catalog = Catalog.open(tmp_path / "work")
    staged, cfg = stage(tmp_path, sms_spam, stop=100)
    location = f"memory://latest-test-{tmp_path.name}"
    version, _ = catalog.commit(staged, cfg.source_list, location)
    assert (UPath(location) / "sms" / "latest").read_text() == version.dataset_hash + "\n"
    catalog.withdraw(version.dataset_hash, "wrong data")
    assert not (UPath(location) / "sms" / "latest").exists()


def test_a_card_written_into_another_versions_folder_leaves_its_shards_alone(tmp_path, sms_spam):
    from data_catalog.dataset_cards import _link_shards

    catalog = Catalog.open(tmp_path / "work")
    first_staged, cfg = stage(tmp_path, sms_spam, stop=100)
    first, _ = catalog.commit(first_staged, cfg.source_list)
    second_staged, cfg = stage(tmp_path, sms_spam, stop=150, run_id="run-2")
    second, _ = catalog.commit(second_staged, cfg.source_list)
    own = [shard["path"] for shard in catalog.shards(first.dataset_hash)]
    folder = catalog.version_path(second)
    shards = sorted((folder / "data").rglob("*.parquet"))
    before = {path: path.read_bytes() for path in shards}
    # `thresher catalog card FIRST --out <second's folder>`: same shard names, kept as they are
    _link_shards(catalog.version_path(first), own, folder)
    assert all(not path.is_symlink() and path.read_bytes() == before[path] for path in shards)
    # elsewhere, the card gets links to its own version's shards
    elsewhere = tmp_path / "cards"
    _link_shards(catalog.version_path(first), own, elsewhere)
    links = sorted((elsewhere / "data").rglob("*.parquet"))
    assert len(links) == len(own) and all(path.is_symlink() for path in links)
    target = catalog.version_path(first).resolve()
    assert all(path.resolve().is_relative_to(target) for path in links)
