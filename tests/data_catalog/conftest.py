"""Every catalog test runs twice: on SQLite (the default) and on a real PostgreSQL server.

The autouse `catalog_backend` fixture is parametrized here: `[sqlite]` leaves the default
(catalog.db in the work folder), `[postgresql]` points THRESHER_CATALOG_URL at a fresh
database of the session's server, so `Catalog.open(workdir)` (also in spawned processes and
CLI calls) uses it. Tests marked `sqlite_only`, and those named in SQLITE_ONLY below, get only
the `[sqlite]` variant: they are about the SQLite file itself, not about the catalog.
"""

from __future__ import annotations

import pytest

from data_catalog.catalog import CATALOG_URL_ENV

BACKENDS = ("sqlite", "postgresql")

# Existing tests that read the SQLite file or its error text directly (module::name).
SQLITE_ONLY = {
    # reads alembic_version with sqlite3 from catalog.db; test_postgres_catalog.py compares
    # the schema and head of both backends
    "test_catalog.py::test_migrations_create_the_tables_the_queries_use",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "sqlite_only: a catalog test that runs on SQLite only (tests/data_catalog)"
    )


def _sqlite_only(definition) -> bool:
    name = f"{definition.path.name}::{definition.originalname}"
    return definition.get_closest_marker("sqlite_only") is not None or name in SQLITE_ONLY


def pytest_generate_tests(metafunc):
    if "catalog_backend" in metafunc.fixturenames:
        backends = ["sqlite"] if _sqlite_only(metafunc.definition) else list(BACKENDS)
        metafunc.parametrize("catalog_backend", backends, indirect=True)


@pytest.fixture(autouse=True)
def catalog_backend(request, monkeypatch) -> str:
    """`sqlite` or `postgresql` (a fresh database per test, through THRESHER_CATALOG_URL)."""
    monkeypatch.delenv(CATALOG_URL_ENV, raising=False)
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres_server")
        monkeypatch.setenv(CATALOG_URL_ENV, server.create_database())
    return request.param
