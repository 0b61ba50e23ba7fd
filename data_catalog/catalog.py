"""The catalog database: which versions exist, where, from which run, with which shards.

A version is in the catalog complete or not at all: its folder is moved into place first
and its rows are written last, in one transaction. Versions are immutable; `latest` is the
newest published version of a dataset name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, func, insert, select, text, update
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import NullPool

from data_catalog import tables
from pipeline.config import SourceDeclaration
from pipeline.core import storage
from pipeline.core.errors import ConfigError, DataError
from pipeline.core.locks import file_lock
from pipeline.core.storage import Location
from pipeline.publish.reader import WITHDRAWN_MARKER, PublishedVersion, read_version
from pipeline.publish.version import StagedVersion

CATALOG_FILE = "catalog.db"
LATEST_POINTER = "latest"  # beside a dataset's versions: names its newest published one
CATALOG_URL_ENV = "THRESHER_CATALOG_URL"
MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = threading.Lock()


def advisory_key(name: str) -> int:
    """A stable signed 64-bit PostgreSQL advisory lock key for a lock name."""
    digest = hashlib.sha256(f"thresher:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


MIGRATION_LOCK_NAME = "migrations"


def transaction_lock(connection: Connection, name: str) -> None:
    """On PostgreSQL, wait for the advisory lock `name` and hold it until the transaction
    ends (between every process sharing the database). SQLite needs none: it lets one
    writer at a time in, and its migrations run under a file lock."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_key(name)})


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
        self.engine: Engine = _create_engine(url)
        self.migrate()

    @classmethod
    def open(cls, workdir: str | Path, url: str | None = None) -> Catalog:
        """The catalog of a work folder, created and migrated on first use.

        The database is `url`, else $THRESHER_CATALOG_URL (e.g.
        `postgresql+psycopg://thresher@127.0.0.1:5432/catalog`), else SQLite `catalog.db` in
        the work folder. Version folders, runs and evaluation sets stay in the work folder.
        """
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        url = url or os.environ.get(CATALOG_URL_ENV) or f"sqlite:///{workdir / CATALOG_FILE}"
        return cls(url, workdir)

    @property
    def _postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def migrate(self) -> None:
        # alembic keeps its migration context in module globals (threads), and two processes
        # opening a new catalog at once would both create its tables (processes): on SQLite a
        # file lock, on PostgreSQL an advisory lock inside the migration transaction
        with _MIGRATION_LOCK:
            if self._postgresql:
                self._migrate()
            else:
                with file_lock(self.workdir / ".catalog.lock"):
                    self._migrate()

    def _migrate(self) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        if self._postgresql:
            connection = self._connect()
        else:
            connection = _transactional_ddl(self.engine).connect()
        with connection, connection.begin():
            transaction_lock(connection, MIGRATION_LOCK_NAME)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def _connect(self) -> Connection:
        """A connection; a PostgreSQL server that cannot be reached is a ConfigError."""
        if not self._postgresql:
            return self.engine.connect()
        try:
            return self.engine.connect()
        except DBAPIError as error:
            raise ConfigError(
                f"cannot connect to the catalog database {_shown(self.engine.url)}: "
                f"{_first_line(error.orig)}. Start the PostgreSQL server, or fix "
                f"{CATALOG_URL_ENV} (unset it to use SQLite catalog.db in the work folder)"
            ) from error

    @contextmanager
    def _exclusive(self, key: str) -> Iterator[None]:
        """Hold an exclusive lock named `key` (a path below the work folder) for the block.

        SQLite: a file lock on `workdir/<key>.lock`, between processes of this machine.
        PostgreSQL: a session advisory lock on a dedicated connection, between every process
        that shares the database, on any machine.
        """
        if not self._postgresql:
            with file_lock(self.workdir / f"{key}.lock"):
                yield
            return
        lock = {"key": advisory_key(key)}
        with self._connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), lock)
            connection.commit()  # not idle in a transaction while the block runs
            try:
                yield
            finally:
                try:
                    connection.execute(text("SELECT pg_advisory_unlock(:key)"), lock)
                    connection.commit()
                except DBAPIError:  # closing the session releases its locks
                    connection.invalidate()

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

    def version_path(self, version: VersionRecord | str) -> Location:
        """The version's folder (of a record, or of its stored path): under the work folder,
        or where `publish.location` put it."""
        stored = version if isinstance(version, str) else version.path
        if "://" in stored or Path(stored).is_absolute():
            return storage.location(stored)
        return self.workdir / stored

    def commit(
        self,
        staged: StagedVersion,
        sources: list[SourceDeclaration],
        location: str | None = None,
    ) -> tuple[VersionRecord, bool]:
        """Make a staged version permanent under `location` (a folder or fsspec URL; default
        the work folder's datasets/); return (version, created).

        Publishing a version whose hash is already in the catalog changes nothing: the
        staging folder is discarded and the existing version is returned.
        """
        # one commit at a time per dataset name: two runs publishing the same version at
        # once must not both move folders (the second finds the version, drops its copy)
        with self._exclusive(f"datasets/{staged.manifest['name']}/.commit"):
            existing = self.find(staged.dataset_hash)
            if existing is not None and existing.status == "withdrawn":
                storage.remove_tree(staged.path)
                raise DataError(
                    f"this run rebuilt version {existing.dataset_hash[:16]}, which was withdrawn "
                    f"({existing.status_reason}); it is not published again. Change what goes "
                    "into it (a deletion request with `thresher forget`, the sources or the config)"
                )
            if existing is not None:
                storage.remove_tree(staged.path)
                return existing, False
            self._make_permanent(staged, sources, location)
            self.refresh_latest(staged.manifest["name"])
        return self.version(staged.dataset_hash), True

    def _make_permanent(
        self, staged: StagedVersion, sources: list[SourceDeclaration], location: str | None
    ) -> None:
        manifest = staged.manifest
        stored = self.stored_path(manifest["name"], staged.dataset_hash, location)
        final = self.version_path(stored)
        # left by a run that stopped before its catalog row: not a version
        storage.remove_tree(final)
        renamed = storage.place_tree(staged.path, final)
        try:
            self._insert_version(staged, sources, stored)
        except BaseException:
            if not renamed:  # a copy elsewhere: the staging folder is still the original
                storage.remove_tree(final)
            raise
        if not renamed:
            storage.remove_tree(staged.path)

    def point_latest(self, name: str) -> None:
        """`latest` beside a dataset's newest published version names it, so that
        `datasets/<name>/latest/data/train/*.parquet` opens it without its hash: on a local
        folder a relative symlink, replaced atomically; on object storage a file holding the
        hash, written after the version. Pointers left elsewhere (an older `publish.location`)
        and the pointer of a dataset with no version published any more are removed."""
        latest = self.latest(name)
        target = self.version_path(latest) if latest else None
        folders = {self.version_path(v).parent for v in self.versions(name)}
        folders.add(self.workdir / "datasets" / name)
        for folder in folders:
            pointer = folder / LATEST_POINTER
            if target is not None and folder == target.parent:
                _write_pointer(pointer, latest.dataset_hash)
            else:
                _remove_pointer(pointer)

    def refresh_latest(self, name: str) -> None:
        """`point_latest`, where a failure (a folder of that name that is not the link, an
        old `publish.location` out of reach) is a warning: the pointer is a convenience, the
        version and the catalog are what count, and the next run tries again."""
        try:
            self.point_latest(name)
        except Exception as error:  # noqa: BLE001
            logging.getLogger("thresher").warning(
                "the `latest` pointer of %s was not updated: %s", name, error
            )

    def point_every_latest(self) -> None:
        """The `latest` pointer of every dataset (work folders made before pointers existed
        get theirs on their next run)."""
        for name in sorted({version.name for version in self.versions()}):
            with self._exclusive(f"datasets/{name}/.commit"):
                self.refresh_latest(name)

    @staticmethod
    def stored_path(name: str, dataset_hash: str, location: str | None) -> str:
        """Where a version goes, as the catalog records it: relative to the work folder by
        default, else the full path or URL under `publish.location`."""
        if location is None:
            return f"datasets/{name}/{dataset_hash}"
        return str(storage.location(location) / name / dataset_hash)

    def _insert_version(
        self, staged: StagedVersion, sources: list[SourceDeclaration], stored: str
    ) -> None:
        manifest = staged.manifest
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
                    path=stored,
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
        with self._exclusive(f"datasets/{version.name}/.commit"):
            self.refresh_latest(version.name)
        return self.version(version.dataset_hash)

    def purge(self, dataset_hash: str) -> VersionRecord:
        """Delete the shards of a withdrawn version; its manifest and ledger stay as the record."""
        version = self.version(dataset_hash)
        if version.status != "withdrawn":
            raise DataError(
                f"version {version.dataset_hash[:16]} is {version.status}; withdraw it first "
                "(`thresher catalog withdraw HASH --reason TEXT`)"
            )
        storage.remove_tree(self.version_path(version) / "data")
        if version.purged_at is None:
            with self.engine.begin() as connection:
                connection.execute(
                    update(tables.versions)
                    .where(tables.versions.c.dataset_hash == version.dataset_hash)
                    .values(purged_at=now())
                )
        return self.version(version.dataset_hash)

    def find(self, dataset_hash: str) -> VersionRecord | None:
        query = select(tables.versions).where(tables.versions.c.dataset_hash == dataset_hash)
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return VersionRecord(**row) if row else None

    # runs ---------------------------------------------------------------------------------

    def start_run(
        self, run_id: str, name: str, config_hash: str, started_at: datetime | None = None
    ) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                insert(tables.runs).values(
                    run_id=run_id,
                    name=name,
                    status="running",
                    config_hash=config_hash,
                    started_at=started_at or now(),
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


def _create_engine(url: str) -> Engine:
    """An engine for a catalog URL; a URL that names no usable database is a ConfigError."""
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise ConfigError(
            f"{CATALOG_URL_ENV} or the catalog URL {_mask(url)!r} is not a database URL "
            "(e.g. postgresql+psycopg://USER:PASSWORD@HOST:5432/DATABASE); fix it, or unset "
            f"{CATALOG_URL_ENV} to use SQLite catalog.db in the work folder"
        ) from error
    if parsed.get_backend_name() == "sqlite":
        # record text in a failed statement's parameters must not reach errors and alerts
        engine = create_engine(parsed, hide_parameters=True)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    try:
        options: dict[str, Any] = {"poolclass": NullPool, "hide_parameters": True}
        if (
            parsed.get_driver_name() in ("psycopg", "psycopg2")  # loads the dialect
            and "connect_timeout" not in parsed.query
        ):
            options["connect_args"] = {"connect_timeout": 10}
        return create_engine(parsed, **options)
    except (ArgumentError, ImportError) as error:  # no such dialect, or its driver is missing
        raise ConfigError(
            f"the catalog URL {_shown(parsed)} cannot be used: {_first_line(error)}. Use "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/DATABASE (psycopg is installed), or "
            f"unset {CATALOG_URL_ENV} to use SQLite catalog.db in the work folder"
        ) from error


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _mask(url: str) -> str:
    """A URL that did not parse, with anything like a password hidden."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _first_line(error: BaseException | None) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _transactional_ddl(engine: Engine) -> Engine:
    """A copy of a SQLite engine whose transactions hold DDL too: pysqlite commits before
    each CREATE, so a run killed while creating a new catalog would leave tables without
    alembic's version, and every later run would fail on "table already exists"."""
    copy = create_engine(engine.url, hide_parameters=True, poolclass=NullPool)
    event.listen(copy, "connect", _sqlite_pragmas)
    event.listen(copy, "connect", _no_implicit_transactions)
    event.listen(copy, "begin", lambda connection: connection.exec_driver_sql("BEGIN IMMEDIATE"))
    return copy


def _no_implicit_transactions(connection, _record) -> None:
    connection.isolation_level = None


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

    The manifest must hash to the catalog's dataset hash, and shards are re-hashed against
    the manifest (`verify=False` skips only the shards). A withdrawn version is refused.
    """
    catalog = Catalog.open(workdir)
    version = catalog.version(ref, name)
    if version.status == "withdrawn":
        raise DataError(
            f"version {version.dataset_hash[:16]} of {name!r} was withdrawn on "
            f"{version.withdrawn_at:%Y-%m-%d} ({version.status_reason}); use a published version "
            "(`thresher catalog list`)"
        )
    return read_version(
        catalog.version_path(version), verify=verify, expected_hash=version.dataset_hash
    )


def _write_pointer(pointer: Location, dataset_hash: str) -> None:
    if not storage.is_local(pointer):
        if not pointer.exists() or pointer.read_text() != dataset_hash + "\n":
            pointer.write_text(dataset_hash + "\n")
        return
    if pointer.is_symlink() and os.readlink(pointer) == dataset_hash:
        return
    if pointer.exists() and not pointer.is_symlink():
        raise DataError(
            f"{pointer} is not the `latest` link Thresher keeps; move it away so that the link "
            "to the newest version can be made"
        )
    temporary = pointer.with_name(f".{LATEST_POINTER}-{os.getpid()}-{threading.get_ident()}")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(dataset_hash, target_is_directory=True)
    os.replace(temporary, pointer)


def _remove_pointer(pointer: Location) -> None:
    if storage.is_local(pointer):
        if pointer.is_symlink():
            pointer.unlink(missing_ok=True)
    elif pointer.exists():
        pointer.fs.rm(pointer.path)
