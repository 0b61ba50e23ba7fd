"""The catalog database: which versions exist, where, from which run, with which shards.

A version is in the catalog complete or not at all: its folder is moved into place first
and its rows are written last, in one transaction. Versions are immutable; `latest` is the
newest published version of a dataset name.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, func, insert, select, update
from sqlalchemy.engine import Engine

from data_catalog import tables
from pipeline.config import SourceDeclaration
from pipeline.errors import DataError
from pipeline.publish import StagedVersion
from pipeline.reader import WITHDRAWN_MARKER, PublishedVersion, read_version

CATALOG_FILE = "catalog.db"
MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = threading.Lock()


@dataclass(frozen=True)
class VersionRecord:
    dataset_hash: str
    name: str
    parent_hash: str | None
    config_hash: str
    code_version: str
    run_id: str
    path: str
    records: int
    split_counts: dict[str, int]
    status: str
    status_reason: str | None
    created_at: datetime
    withdrawn_at: datetime | None = None
    purged_at: datetime | None = None


def now() -> datetime:
    return datetime.now(UTC)


class Catalog:
    def __init__(self, url: str, workdir: Path):
        self.workdir = workdir
        self.engine: Engine = create_engine(url)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self.migrate()

    @classmethod
    def open(cls, workdir: str | Path) -> Catalog:
        """The catalog of a work folder (SQLite `catalog.db`), created and migrated on first use."""
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite:///{workdir / CATALOG_FILE}", workdir)

    def migrate(self) -> None:
        # alembic keeps its migration context in module globals (threads), and two processes
        # opening a new catalog at once would both create its tables (processes)
        with _MIGRATION_LOCK, _file_lock(self.workdir / ".catalog.lock"):
            self._migrate()

    def _migrate(self) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    # versions -----------------------------------------------------------------------------

    def latest(self, name: str) -> VersionRecord | None:
        query = (
            select(tables.versions)
            .where(tables.versions.c.name == name, tables.versions.c.status == "published")
            .order_by(tables.versions.c.created_at.desc(), tables.versions.c.dataset_hash)
            .limit(1)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return VersionRecord(**row) if row else None

    def versions(self, name: str | None = None) -> list[VersionRecord]:
        query = select(tables.versions).order_by(
            tables.versions.c.name, tables.versions.c.created_at
        )
        if name:
            query = query.where(tables.versions.c.name == name)
        with self.engine.connect() as connection:
            return [VersionRecord(**row) for row in connection.execute(query).mappings()]

    def version(self, ref: str, name: str | None = None) -> VersionRecord:
        """A version by full hash, unique hash prefix, or `latest` (with a name)."""
        if ref == "latest":
            if not name:
                raise DataError("`latest` needs a dataset name")
            found = self.latest(name)
            if found is None:
                raise DataError(self._no_latest(name))
            return found
        query = select(tables.versions).where(
            tables.versions.c.dataset_hash.startswith(ref.lower())
        )
        if name:
            query = query.where(tables.versions.c.name == name)
        with self.engine.connect() as connection:
            rows = connection.execute(query.limit(2)).mappings().all()
        if not rows:
            raise DataError(
                f"no version {ref!r} in the catalog at {self.workdir}; see `thresher catalog list`"
            )
        if len(rows) > 1:
            raise DataError(f"{ref!r} matches more than one version; give more of the hash")
        return VersionRecord(**rows[0])

    def _no_latest(self, name: str) -> str:
        versions = self.versions(name)
        if versions:  # all of them withdrawn
            return (
                f"dataset {name!r} has no published version: all {len(versions)} of its "
                "versions were withdrawn (`thresher catalog list`); run it again to publish one"
            )
        if any(v.dataset_hash.startswith(name.lower()) for v in self.versions()):
            return (
                f"{name!r} is a version hash, not a dataset name: "
                "open_version(workdir, NAME, HASH) opens a version by hash"
            )
        return f"dataset {name!r} has no published version yet; run `thresher run` first"

    def shards(self, dataset_hash: str) -> list[dict[str, Any]]:
        query = (
            select(tables.shards)
            .where(tables.shards.c.dataset_hash == dataset_hash)
            .order_by(tables.shards.c.path)
        )
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    def sources(self, dataset_hash: str) -> list[dict[str, Any]]:
        query = select(tables.version_sources).where(
            tables.version_sources.c.dataset_hash == dataset_hash
        )
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    def version_path(self, version: VersionRecord) -> Path:
        return self.workdir / version.path

    def commit(
        self, staged: StagedVersion, sources: list[SourceDeclaration]
    ) -> tuple[VersionRecord, bool]:
        """Make a staged version permanent; return (version, created).

        Publishing a version whose hash is already in the catalog changes nothing: the
        staging folder is discarded and the existing version is returned.
        """
        # one commit at a time per dataset name: two runs publishing the same version at
        # once must not both move folders (the second finds the version, drops its copy)
        with _file_lock(self.workdir / "datasets" / staged.manifest["name"] / ".commit.lock"):
            existing = self._find(staged.dataset_hash)
            if existing is not None and existing.status == "withdrawn":
                shutil.rmtree(staged.path)
                raise DataError(
                    f"this run rebuilt version {existing.dataset_hash[:16]}, which was withdrawn "
                    f"({existing.status_reason}); it is not published again. Change what goes "
                    "into it (a deletion request with `thresher forget`, the sources or the config)"
                )
            if existing is not None:
                shutil.rmtree(staged.path)
                return existing, False
            self._make_permanent(staged, sources)
        return self.version(staged.dataset_hash), True

    def _make_permanent(self, staged: StagedVersion, sources: list[SourceDeclaration]) -> None:
        manifest = staged.manifest
        relative = Path("datasets") / manifest["name"] / staged.dataset_hash
        final = self.workdir / relative
        if final.exists():  # left by a run that stopped before its catalog row: not a version
            shutil.rmtree(final)
        staged.path.rename(final)
        created = now()
        with self.engine.begin() as connection:
            has_dataset = connection.execute(
                select(func.count()).where(tables.datasets.c.name == manifest["name"])
            ).scalar()
            if not has_dataset:
                connection.execute(
                    insert(tables.datasets).values(name=manifest["name"], created_at=created)
                )
            connection.execute(
                insert(tables.versions).values(
                    dataset_hash=staged.dataset_hash,
                    name=manifest["name"],
                    parent_hash=manifest["parent_version"],
                    config_hash=manifest["config_hash"],
                    code_version=manifest["code_version"],
                    run_id=manifest["run_id"],
                    path=relative.as_posix(),
                    records=sum(manifest["split_counts"].values()),
                    split_counts=manifest["split_counts"],
                    status="published",
                    status_reason=None,
                    created_at=created,
                )
            )
            if manifest["shards"]:
                connection.execute(
                    insert(tables.shards),
                    [
                        {"dataset_hash": staged.dataset_hash, **shard}
                        for shard in manifest["shards"]
                    ],
                )
            published = {s["name"]: s.get("records") for s in manifest.get("sources", [])}
            connection.execute(
                insert(tables.version_sources),
                [
                    {
                        "dataset_hash": staged.dataset_hash,
                        "source": source.name,
                        "records": published.get(source.name),
                        "license": source.license,
                        "consent": source.consent,
                        "owner": source.owner,
                        "declaration": source.model_dump(mode="json", exclude={"base_dir"}),
                    }
                    for source in sources
                ],
            )

    def withdraw(self, dataset_hash: str, reason: str) -> VersionRecord:
        """Mark a version withdrawn: it stays listed with the reason, nothing opens it, and
        `latest` moves to the newest version still published. Withdrawing twice is a no-op."""
        if not reason.strip():
            raise DataError("say why the version is withdrawn (--reason TEXT)")
        version = self.version(dataset_hash)
        if version.status == "withdrawn":
            return version
        withdrawn_at = now()
        path = self.version_path(version)
        # beside the manifest, so readers that bypass the catalog refuse it too
        (path / WITHDRAWN_MARKER).write_text(
            json.dumps({"withdrawn_at": withdrawn_at.isoformat(), "reason": reason}) + "\n"
        )
        with self.engine.begin() as connection:
            connection.execute(
                update(tables.versions)
                .where(tables.versions.c.dataset_hash == version.dataset_hash)
                .values(status="withdrawn", status_reason=reason, withdrawn_at=withdrawn_at)
            )
        return self.version(version.dataset_hash)

    def purge(self, dataset_hash: str) -> VersionRecord:
        """Delete the shards of a withdrawn version; its manifest and ledger stay as the record."""
        version = self.version(dataset_hash)
        if version.status != "withdrawn":
            raise DataError(
                f"version {version.dataset_hash[:16]} is {version.status}; withdraw it first "
                "(`thresher catalog withdraw HASH --reason TEXT`)"
            )
        shutil.rmtree(self.version_path(version) / "data", ignore_errors=True)
        if version.purged_at is None:
            with self.engine.begin() as connection:
                connection.execute(
                    update(tables.versions)
                    .where(tables.versions.c.dataset_hash == version.dataset_hash)
                    .values(purged_at=now())
                )
        return self.version(version.dataset_hash)

    def _find(self, dataset_hash: str) -> VersionRecord | None:
        query = select(tables.versions).where(tables.versions.c.dataset_hash == dataset_hash)
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return VersionRecord(**row) if row else None

    # runs ---------------------------------------------------------------------------------

    def start_run(self, run_id: str, name: str, config_hash: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                insert(tables.runs).values(
                    run_id=run_id,
                    name=name,
                    status="running",
                    config_hash=config_hash,
                    started_at=now(),
                )
            )

    def finish_run(
        self,
        run_id: str,
        status: str,
        *,
        dataset_hash: str | None = None,
        created_version: bool | None = None,
        counts: dict | None = None,
        error: str | None = None,
    ) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                update(tables.runs)
                .where(tables.runs.c.run_id == run_id)
                .values(
                    status=status,
                    dataset_hash=dataset_hash,
                    created_version=None if created_version is None else int(created_version),
                    counts=counts,
                    error=error,
                    finished_at=now(),
                )
            )

    def runs(self, name: str | None = None) -> list[dict[str, Any]]:
        query = select(tables.runs).order_by(tables.runs.c.started_at)
        if name:
            query = query.where(tables.runs.c.name == name)
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (and threads) on this machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sqlite_pragmas(connection, _record) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_version(
    workdir: str | Path, name: str, ref: str = "latest", verify: bool = True
) -> PublishedVersion:
    """Open a published version of dataset `name` by hash (or prefix) or `latest`.

    Shards are re-hashed against the manifest first (`verify=False` skips that). A withdrawn
    version is refused.
    """
    catalog = Catalog.open(workdir)
    version = catalog.version(ref, name)
    if version.status == "withdrawn":
        raise DataError(
            f"version {version.dataset_hash[:16]} of {name!r} was withdrawn on "
            f"{version.withdrawn_at:%Y-%m-%d} ({version.status_reason}); use a published version "
            "(`thresher catalog list`)"
        )
    return read_version(catalog.version_path(version), verify=verify)
