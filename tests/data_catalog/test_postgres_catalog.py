"""The catalog on both backends: versions, review queue and deletion requests by value, the
same schema on PostgreSQL as on SQLite, clear errors for a bad catalog URL, and two writers
at once in separate processes. tests/data_catalog/conftest.py runs each test on `sqlite` and
on `postgresql` (a fresh database of a real server per test)."""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
import xxhash
from alembic.config import Config
from alembic.script import ScriptDirectory
from helpers import stage_version
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from data_catalog import deletions, review_queue, tables
from data_catalog.catalog import (
    CATALOG_URL_ENV,
    MIGRATIONS,
    Catalog,
    advisory_key,
    open_version,
)
from pipeline.core.errors import ConfigError, DataError
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.publish.reader import read_version
from pipeline.publish.version import StagedVersion


def review_rows(start: int, stop: int) -> list[dict]:
    """Review items r<start>..r<stop-1> (REVIEW_ITEM_SCHEMA rows), in two groups."""
    return [
        {
            "record_id": f"r{i}",
            "source": "sms",
            "source_content_hash": f"h{i}",
            "review_hash": f"v{i}",
            "group_hash": xxhash.xxh3_128_hexdigest(f"user-{i % 2}".encode()),
            "reason": "secret_detected",
            "evidence": '{"types":["github_token"]}',
            "text": f"token <SECRET:github_token> number {i}",
            "metadata": None,
        }
        for i in range(start, stop)
    ]


def review_frame(start: int, stop: int) -> pl.DataFrame:
    return pl.DataFrame(review_rows(start, stop), schema=REVIEW_ITEM_SCHEMA)


def head_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config).get_current_head()


def schema(catalog: Catalog) -> dict[str, dict]:
    """Every table's columns, primary key, foreign keys, unique constraints and indexes."""
    inspector = inspect(catalog.engine)
    return {
        table: {
            "columns": sorted(c["name"] for c in inspector.get_columns(table)),
            "primary_key": sorted(inspector.get_pk_constraint(table)["constrained_columns"]),
            "foreign_keys": sorted(
                (tuple(fk["constrained_columns"]), fk["referred_table"])
                for fk in inspector.get_foreign_keys(table)
            ),
            "unique": sorted(
                tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)
            ),
            # PostgreSQL also lists the indexes behind unique constraints (compared above)
            "indexes": sorted(
                (tuple(i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(table)
                if "duplicates_constraint" not in i
            ),
        }
        for table in inspector.get_table_names()
    }


def alembic_head(catalog: Catalog) -> list[str]:
    with catalog.engine.connect() as connection:
        return [
            row[0] for row in connection.execute(text("select version_num from alembic_version"))
        ]


# the schema ----------------------------------------------------------------------------------


def test_the_schema_and_migration_head_match_sqlite(tmp_path, catalog_backend):
    catalog = Catalog.open(tmp_path / "work")
    assert catalog.engine.dialect.name == catalog_backend
    reference = Catalog.open(tmp_path / "reference", url=f"sqlite:///{tmp_path / 'ref.db'}")
    tables_of = schema(catalog)
    assert tables_of == schema(reference)
    assert set(tables_of) == {t.name for t in tables.metadata.sorted_tables} | {"alembic_version"}
    for table in tables.metadata.sorted_tables:
        assert tables_of[table.name]["columns"] == sorted(c.name for c in table.columns)
    assert alembic_head(catalog) == alembic_head(reference) == [head_revision()]
    Catalog.open(tmp_path / "work")  # migrating again is a no-op
    assert alembic_head(catalog) == [head_revision()]


# versions ------------------------------------------------------------------------------------


def test_versions_commit_latest_prefix_withdraw_and_purge(tmp_path, sms_spam):
    catalog = Catalog.open(tmp_path / "work")
    first, cfg = stage_version(tmp_path, sms_spam, stop=100)
    old, created = catalog.commit(first, cfg.source_list)
    assert created and (old.name, old.records, old.status, old.run_id) == (
        "sms",
        100,
        "published",
        "run-1",
    )
    assert old.path == f"datasets/sms/{old.dataset_hash}"
    assert sum(old.split_counts.values()) == 100
    second, cfg = stage_version(tmp_path, sms_spam, stop=150, run_id="run-2")
    new, _ = catalog.commit(second, cfg.source_list)
    assert catalog.latest("sms") == new and catalog.version("latest", "sms") == new
    assert [v.dataset_hash for v in catalog.versions("sms")] == [
        old.dataset_hash,
        new.dataset_hash,
    ]
    assert catalog.version(new.dataset_hash[:7].upper()) == new  # prefixes, any case
    assert catalog.version(old.dataset_hash[:12], "sms") == old
    assert [(s["split"], s["rows"]) for s in catalog.shards(new.dataset_hash)] == sorted(
        (s["split"], s["rows"]) for s in second.manifest["shards"]
    )
    assert [(s["source"], s["license"]) for s in catalog.sources(new.dataset_hash)] == [
        ("sms", "CC-BY-4.0")
    ]
    with pytest.raises(DataError, match="no version 'abcdefx'"):
        catalog.version("abcdefx")

    withdrawn = catalog.withdraw(new.dataset_hash, "a deletion request")
    assert (withdrawn.status, withdrawn.status_reason) == ("withdrawn", "a deletion request")
    assert withdrawn.withdrawn_at is not None and withdrawn.purged_at is None
    assert catalog.latest("sms") == old
    assert catalog.withdraw(new.dataset_hash, "again") == withdrawn  # a no-op
    with pytest.raises(DataError, match="was withdrawn on .*a deletion request"):
        open_version(tmp_path / "work", "sms", new.dataset_hash[:10])
    purged = catalog.purge(new.dataset_hash)
    assert purged.purged_at is not None and purged.withdrawn_at == withdrawn.withdrawn_at
    assert not (catalog.version_path(purged) / "data").exists()
    assert (catalog.version_path(purged) / "manifest.json").exists()
    assert [(v.records, v.status) for v in catalog.versions("sms")] == [
        (100, "published"),
        (150, "withdrawn"),
    ]
    # another catalog object on the same database sees the same rows
    assert Catalog.open(tmp_path / "work").versions() == catalog.versions()


def test_a_failed_catalog_write_rolls_back_on_both_backends(tmp_path, sms_spam):
    staged, cfg = stage_version(tmp_path, sms_spam)
    broken = copy.deepcopy(staged.manifest)
    broken["shards"].append(broken["shards"][0])  # violates unique (dataset_hash, path)
    catalog = Catalog.open(tmp_path / "work")
    with pytest.raises(IntegrityError, match="(?i)unique"):
        catalog.commit(StagedVersion(staged.path, broken, staged.events), cfg.source_list)
    assert catalog.versions() == [] and catalog.latest("sms") is None
    with catalog.engine.connect() as connection:
        for table in (tables.datasets, tables.shards, tables.version_sources):
            assert connection.execute(text(f"select count(*) from {table.name}")).scalar() == 0
    retry, cfg = stage_version(tmp_path, sms_spam, run_id="run-2")
    version, created = catalog.commit(retry, cfg.source_list)
    assert created and version.run_id == "run-2"


# review queue and deletion requests ----------------------------------------------------------


def test_review_queue_enqueue_decide_and_conflict(tmp_path):
    catalog = Catalog.open(tmp_path)
    assert review_queue.enqueue(catalog, review_frame(0, 3), "ds", "run-1") == 3
    assert review_queue.enqueue(catalog, review_frame(0, 3), "ds", "run-2") == 0
    assert review_queue.enqueue(catalog, review_frame(1, 5), "ds", "run-3") == 2
    queued = review_queue.items(catalog, status="pending")
    assert [(i["record_id"], i["run_id"]) for i in queued] == [
        ("r0", "run-1"),
        ("r1", "run-1"),
        ("r2", "run-1"),
        ("r3", "run-3"),
        ("r4", "run-3"),
    ]
    first = queued[0]["id"]
    assert review_queue.decide(catalog, first, "rejected", "ana", "live key") == (
        review_queue.Decided(first, "rejected")
    )
    late = review_queue.decide(catalog, first, "approved", "bo", None)
    assert isinstance(late, review_queue.Conflict)
    assert late.message.startswith(f"item {first} was already rejected by ana at 20")
    decided = review_queue.item(catalog, first)
    assert (decided["status"], decided["reviewer"], decided["note"]) == (
        "rejected",
        "ana",
        "live key",
    )
    assert [(d["decision"], d["reviewer"]) for d in review_queue.history(catalog, first)] == [
        ("rejected", "ana")
    ]
    assert review_queue.decisions_frame(catalog).select("record_id", "status").rows() == [
        ("r0", "rejected")
    ]
    assert len(review_queue.items(catalog, status="pending")) == 4


def test_deletion_requests_are_recorded_and_blank_the_queue(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_frame(0, 4), "ds", "run-1")
    by_record = deletions.record_request(catalog, "record_id", "r0", "erasure", "dpo")
    by_group = deletions.record_request(catalog, "group", "user-1", "erasure")
    assert [
        (r["id"], r["kind"], r["value"], r["requested_by"]) for r in deletions.requests(catalog)
    ] == [(by_record, "record_id", "r0", "dpo"), (by_group, "group", "user-1", None)]
    assert deletions.request(catalog, by_group)["reason"] == "erasure"
    assert deletions.requests_frame(catalog).rows() == [
        (by_record, "record_id", "r0"),
        (by_group, "group", "user-1"),
    ]
    erased = {
        i["record_id"]: (i["text"], i["erased_by_request"]) for i in review_queue.items(catalog)
    }
    assert erased == {
        "r0": (None, by_record),
        "r1": (None, by_group),
        "r2": ("token <SECRET:github_token> number 2", None),
        "r3": (None, by_group),
    }
    with pytest.raises(DataError, match="no deletion request 99"):
        deletions.request(catalog, 99)


# the catalog URL -----------------------------------------------------------------------------


def test_an_unreachable_server_is_a_config_error_without_the_password(tmp_path, monkeypatch):
    port = 9  # discard: nothing listens there
    monkeypatch.setenv(CATALOG_URL_ENV, f"postgresql+psycopg://ana:s3cret@127.0.0.1:{port}/c")
    with pytest.raises(ConfigError) as raised:
        Catalog.open(tmp_path)
    message = str(raised.value)
    assert "s3cret" not in message
    assert f"postgresql+psycopg://ana:***@127.0.0.1:{port}/c" in message
    assert "Start the PostgreSQL server, or fix THRESHER_CATALOG_URL" in message
    with pytest.raises(ConfigError, match=r"'postgres ql://ana:\*\*\*@x' is not a database URL"):
        Catalog.open(tmp_path, url="postgres ql://ana:pw@x")
    with pytest.raises(ConfigError, match=r"nosuchdb://ana:\*\*\*@x/c cannot be used"):
        Catalog.open(tmp_path, url="nosuchdb://ana:pw@x/c")
    assert not (tmp_path / "catalog.db").exists()  # no silent fallback to SQLite


def test_the_url_argument_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CATALOG_URL_ENV, "postgresql+psycopg://ana:pw@127.0.0.1:9/c")
    catalog = Catalog.open(tmp_path / "work", url=f"sqlite:///{tmp_path / 'other.db'}")
    assert catalog.engine.dialect.name == "sqlite" and (tmp_path / "other.db").exists()
    assert catalog.workdir == (tmp_path / "work").resolve()


def held_by_someone(catalog: Catalog, key: str) -> bool:
    """Whether the lock `key` is held: a non-blocking try from a session (or file handle) of
    our own, which cannot wait and so cannot race."""
    if catalog.engine.dialect.name == "postgresql":
        with catalog.engine.connect() as connection:
            got = connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": advisory_key(key)}).scalar()  # fmt: skip
            if got:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": advisory_key(key)})
            return not got
    path = catalog.workdir / f"{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_exclusive_blocks_the_same_key_only(tmp_path):
    # a stable 64-bit key, the same in every process (not Python's salted hash()): the first
    # eight bytes of sha256("thresher:migrations"), signed
    digest = hashlib.sha256(b"thresher:migrations").digest()
    assert advisory_key("migrations") == int.from_bytes(digest[:8], "big", signed=True)
    one, two = Catalog.open(tmp_path), Catalog.open(tmp_path)
    key = "datasets/sms/.commit"
    events: list[str] = []
    asking, inside = threading.Event(), threading.Event()

    def second_holder():
        asking.set()
        with two._exclusive(key):
            events.append("second in")
            inside.set()

    with one._exclusive(key):
        assert held_by_someone(one, key) and not held_by_someone(one, "datasets/other/.commit")
        with two._exclusive("datasets/other/.commit"):  # another key: not blocked
            events.append("other key")
        waiting = threading.Thread(target=second_holder)
        waiting.start()
        assert asking.wait(30)
        assert not inside.wait(0.2)  # a sign only; the lock's holding is checked above
        events.append("first out")
    assert inside.wait(30)
    waiting.join(timeout=30)
    assert events == ["other key", "first out", "second in"]
    assert not held_by_someone(one, key)


# two writers at once, in separate processes ----------------------------------------------------

# Each writer is a fresh interpreter that opens the catalog the way a worker does (the URL comes
# from THRESHER_CATALOG_URL in the environment), waits at a file barrier so the two really
# overlap, does one operation and prints its outcome as JSON.
WRITER = """
import json, sys, time
from pathlib import Path

task = json.loads(sys.argv[1])
barrier = Path(task["barrier"])

def together(step):
    (barrier / f"{step}.{task['me']}").touch()
    deadline = time.monotonic() + 60
    while len(list(barrier.glob(f"{step}.*"))) < 2:
        if time.monotonic() > deadline:
            sys.exit(f"the other writer never reached step {step}")
        time.sleep(0.001)

from data_catalog import deletions, review_queue
from data_catalog.catalog import Catalog
from pipeline.config import SourceDeclaration
from pipeline.publish.version import StagedVersion

op = task["op"]
if op == "open":
    together(0)
    catalog = Catalog.open(task["workdir"])
    result = {"versions": len(catalog.versions()), "dialect": catalog.engine.dialect.name}
else:
    catalog = Catalog.open(task["workdir"])
    together(0)
    if op == "commit":
        sources = [SourceDeclaration(**s) for s in task["sources"]]
        version, created = catalog.commit(StagedVersion.load(Path(task["staged"])), sources)
        result = {"created": created, "run_id": version.run_id, "hash": version.dataset_hash}
    elif op == "decide":
        result = []
        for step, item_id in enumerate(task["ids"], start=1):
            together(step)
            outcome = review_queue.decide(catalog, item_id, task["decision"], task["me"], None)
            result.append(type(outcome).__name__)
    elif op == "enqueue":
        import polars as pl
        from pipeline.core.schema import REVIEW_ITEM_SCHEMA
        frame = pl.DataFrame(task["rows"], schema=REVIEW_ITEM_SCHEMA)
        result = {"new": review_queue.enqueue(catalog, frame, "ds", task["me"])}
    elif op == "forget":
        result = {"id": deletions.record_request(catalog, task["kind"], task["value"], "erasure")}
print(json.dumps(result))
"""


def two_writers(tmp_path: Path, *tasks: dict) -> list:
    """Run two writer processes at once; return their outcomes in order."""
    barrier = tmp_path / f"barrier-{time.monotonic_ns()}"
    barrier.mkdir()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                json.dumps({**task, "barrier": str(barrier), "me": f"writer-{n}"}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, task in enumerate(tasks)
    ]
    outcomes = []
    try:
        for writer in writers:
            out, err = writer.communicate(timeout=120)
            assert writer.returncode == 0, err
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    return outcomes


def test_two_processes_committing_the_same_version_at_once(tmp_path, sms_spam):
    catalog = Catalog.open(tmp_path / "work")
    staged = [stage_version(tmp_path, sms_spam, stop=120, run_id=f"run-{n}") for n in (1, 2)]
    assert staged[0][0].dataset_hash == staged[1][0].dataset_hash
    sources = [s.model_dump(mode="json") for s in staged[0][1].source_list]
    task = {"op": "commit", "workdir": str(tmp_path / "work"), "sources": sources}
    a, b = two_writers(tmp_path, *({**task, "staged": str(version.path)} for version, _ in staged))
    assert sorted([a["created"], b["created"]]) == [False, True]
    assert a["hash"] == b["hash"] == staged[0][0].dataset_hash
    (version,) = catalog.versions()
    assert a["run_id"] == b["run_id"] == version.run_id
    folder = catalog.version_path(version)
    assert json.loads((folder / "manifest.json").read_text())["run_id"] == version.run_id
    assert read_version(folder, verify=True).dataset_hash == version.dataset_hash  # shards intact
    assert sorted(p.name for p in folder.parent.iterdir() if not p.name.endswith(".lock")) == [
        version.dataset_hash,
        "latest",
    ]  # both staging folders are gone
    assert os.readlink(folder.parent / "latest") == version.dataset_hash


def test_two_processes_deciding_the_same_items_at_once(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_frame(0, 8), "ds", "run-1")
    ids = [i["id"] for i in review_queue.items(catalog)]
    task = {"op": "decide", "workdir": str(tmp_path), "ids": ids}
    a, b = two_writers(tmp_path, {**task, "decision": "approved"}, {**task, "decision": "rejected"})
    assert all(sorted(pair) == ["Conflict", "Decided"] for pair in zip(a, b, strict=True))
    for item_id, outcome_a in zip(ids, a, strict=True):
        (decision,) = review_queue.history(catalog, item_id)  # one decision row per item
        winner = ("writer-0", "approved") if outcome_a == "Decided" else ("writer-1", "rejected")
        assert (decision["reviewer"], decision["decision"]) == winner
        row = review_queue.item(catalog, item_id)
        assert (row["reviewer"], row["status"]) == winner


def test_two_processes_enqueueing_overlapping_items_at_once(tmp_path):
    catalog = Catalog.open(tmp_path)
    task = {"op": "enqueue", "workdir": str(tmp_path)}
    # the second run holds the shared items in the other order (on PostgreSQL, without the
    # queue's lock, that can deadlock)
    a, b = two_writers(
        tmp_path,
        {**task, "rows": review_rows(0, 200)},
        {**task, "rows": review_rows(100, 300)[::-1]},
    )
    assert a["new"] + b["new"] == 300
    assert a["new"] >= 100 and b["new"] >= 100  # each queued at least what only it had
    queued = review_queue.items(catalog)
    assert sorted(i["record_id"] for i in queued) == sorted(f"r{i}" for i in range(300))
    by_writer = {w: sum(i["run_id"] == w for i in queued) for w in ("writer-0", "writer-1")}
    assert by_writer == {"writer-0": a["new"], "writer-1": b["new"]}


def test_two_processes_opening_a_brand_new_catalog_at_once(tmp_path, catalog_backend):
    task = {"op": "open", "workdir": str(tmp_path / "work")}
    assert two_writers(tmp_path, task, task) == [{"versions": 0, "dialect": catalog_backend}] * 2
    catalog = Catalog.open(tmp_path / "work")
    assert alembic_head(catalog) == [head_revision()]
    assert set(schema(catalog)) == {t.name for t in tables.metadata.sorted_tables} | {
        "alembic_version"
    }


def test_two_processes_requesting_deletions_at_once(tmp_path):
    catalog = Catalog.open(tmp_path)
    review_queue.enqueue(catalog, review_frame(0, 6), "ds", "run-1")
    task = {"op": "forget", "workdir": str(tmp_path)}
    a, b = two_writers(
        tmp_path,
        {**task, "kind": "record_id", "value": "r0"},
        {**task, "kind": "group", "value": "user-1"},
    )
    assert a["id"] != b["id"]
    assert sorted((r["id"], r["kind"], r["value"]) for r in deletions.requests(catalog)) == sorted(
        [(a["id"], "record_id", "r0"), (b["id"], "group", "user-1")]
    )
    erased = {i["record_id"]: i["erased_by_request"] for i in review_queue.items(catalog)}
    assert erased == {
        "r0": a["id"],
        "r1": b["id"],
        "r2": None,
        "r3": b["id"],
        "r4": None,
        "r5": b["id"],
    }
