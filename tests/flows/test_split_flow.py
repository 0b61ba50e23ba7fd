"""Splits inside the `curate` flow: a locked test set holds across later runs, quantile
cutoffs are frozen at the first publish, and the leakage check runs on every version."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers import (
    CHANGELOG_SOURCE,
    CHANGELOGS,
    DEBIAN_POLICY,
    SMS_SOURCE,
    sms_rows,
    write_jsonl,
    write_project,
)
from typer.testing import CliRunner

from data_catalog.catalog import Catalog, open_version
from flows.cli import app

pytestmark = pytest.mark.usefixtures("prefect_server")


def invoke(*args: str):
    return CliRunner().invoke(app, [*map(str, args)])


def run(config) -> dict:
    result = invoke("run", "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def memberships(workdir, name="test-set") -> pl.DataFrame:
    version = open_version(workdir, name)
    return pl.concat(
        [f.select("record_id", "group", "split").collect() for f in version.splits.values()]
    )


def test_a_locked_test_set_stays_in_test_across_later_runs(tmp_path, sms_spam):
    rows = sms_rows(sms_spam, 0, 700)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    # related texts (Jaccard 0.5 to 0.8) of different senders join their senders' components
    dedup = {"minhash": {"threshold": 0.8, "related_threshold": 0.5}}
    config = write_project(tmp_path, [SMS_SOURCE], dedup=dedup)
    workdir = tmp_path / "work"
    first = run(config)
    split_of = dict(memberships(workdir).select("record_id", "split").iter_rows())
    locked = [r for r in rows if split_of.get(_record_id(r)) == "test"]
    assert len(locked) > 30

    result = invoke(
        "split", "lock", first["dataset_hash"][:12], "--workdir", workdir, "--note", "v1 eval"
    )
    assert result.exit_code == 0, result.stderr
    assert f"{len(locked)} record(s)" in result.stderr

    # More data, and a new message from a locked sender that closely follows a training
    # message of another sender: it would join the two senders, so it is dropped instead.
    trained = next(
        r for r in rows if split_of.get(_record_id(r)) == "train" and len(r["text"].split()) >= 30
    )
    extra = "and then we will see what happens next week when everybody is back home again"
    bridge = {
        **trained,
        "id": "bridge-1",
        "sender": locked[0]["sender"],
        "text": f"{trained['text']} {extra}",
    }
    write_jsonl(tmp_path / "data" / "sms-2.jsonl", sms_rows(sms_spam, 700, 1400) + [bridge])
    second = run(config)
    assert second["parent_version"] == first["dataset_hash"]
    after = dict(memberships(workdir).select("record_id", "split").iter_rows())
    assert all(after[_record_id(r)] == "test" for r in locked)
    assert after[_record_id(trained)] == "train" and _record_id(bridge) not in after
    events = pl.read_parquet(second["paths"]["ledger"])
    (evidence,) = events.filter(pl.col("record_id") == _record_id(bridge))["evidence"]
    assert json.loads(evidence) == {"would_join": ["test", "train"]}
    assert second["reasons"]["dropped"]["split_conflict"] == 1
    assert events.filter(pl.col("action") == "moved").height == 0

    status = invoke("split", "status", "--name", "test-set", "--workdir", workdir, "--json")
    assert status.exit_code == 0, status.stderr
    since = json.loads(status.stdout)["since"]
    assert since["locked_in_test"] == len(locked) and since["locked_elsewhere"] == 0
    assert since["test_added"] > 0


def test_a_locked_record_may_leave_only_by_a_deletion_request(tmp_path, sms_spam):
    rows = sms_rows(sms_spam, 0, 500)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    first = run(config)
    assert invoke("split", "lock", first["dataset_hash"], "--workdir", workdir).exit_code == 0
    test_ids = set(memberships(workdir).filter(pl.col("split") == "test")["record_id"])
    gone = next(r for r in rows if _record_id(r) in test_ids)

    write_jsonl(tmp_path / "data" / "sms-1.jsonl", [r for r in rows if r is not gone])
    broken = invoke("run", "--config", config)
    assert broken.exit_code == 2
    assert "locked test set is broken" in broken.stderr
    assert _record_id(gone) in broken.stderr and "no longer in the sources" in broken.stderr
    assert len(Catalog.open(workdir).versions("test-set")) == 1  # nothing published

    request = invoke(
        "forget", "--record-id", _record_id(gone), "--reason", "sender asked", "--workdir", workdir
    )
    assert request.exit_code == 0, request.stderr
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    second = run(config)
    assert second["reasons"]["dropped"]["deletion_request"] == 1
    assert _record_id(gone) not in set(memberships(workdir)["record_id"])


def _record_id(row: dict) -> str:
    from pipeline.core.identity import record_id_of

    return record_id_of("sms", row["id"])


def test_quantile_cutoffs_are_frozen_at_the_first_publish(tmp_path):
    split = {"strategy": "group_time", "cutoffs": "quantiles", "on_conflict": "drop"}
    three = [f"{package}/changelog.Debian.gz" for package in ("sed", "tar", "grep")]
    source = {**CHANGELOG_SOURCE, "root": str(CHANGELOGS), "location": three}
    config = write_project(tmp_path, [source], split=split, policy=DEBIAN_POLICY)
    workdir = tmp_path / "work"
    first = run(config)
    cutoffs = first["split"]["cutoffs"]
    assert not first["split"]["cutoffs_frozen"]
    assert cutoffs["validation"] < cutoffs["test"]
    # the cutoffs it froze are part of what it was built from: a rerun has nothing to do
    assert run(config)["unchanged_since"] == first["run_id"]

    every = {**source, "location": "*/changelog.Debian.gz"}
    config = write_project(tmp_path, [every], split=split, policy=DEBIAN_POLICY)
    second = run(config)  # three more packages, other dates: the cutoffs stay
    assert second["split"]["cutoffs"] == cutoffs and second["split"]["cutoffs_frozen"]
    published = pl.concat(
        [
            f.select("timestamp", "split").collect()
            for f in open_version(workdir, "test-set").splits.values()
        ]
    )
    validation, test = (
        pl.Series([cutoffs[k]]).str.to_datetime(time_zone="UTC")[0] for k in ("validation", "test")
    )
    assert published.filter(pl.col("split") == "train")["timestamp"].max() < validation
    assert published.filter(pl.col("split") == "test")["timestamp"].min() >= test
    status = json.loads(invoke("split", "status", "-n", "test-set", "-w", workdir, "--json").stdout)
    assert status["frozen_cutoffs"] == cutoffs and status["lock"] is None


def test_every_version_passes_the_leakage_check(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 1500))
    config = write_project(tmp_path, [SMS_SOURCE, CHANGELOG_SOURCE], policy=DEBIAN_POLICY)
    run(config)
    published = pl.concat(
        [
            f.select("group", "cluster_id", "content_hash", "split").collect()
            for f in open_version(tmp_path / "work", "test-set").splits.values()
        ]
    )
    for column in ("group", "cluster_id", "content_hash"):
        spread = published.drop_nulls(column).group_by(column).agg(pl.col("split").n_unique())
        assert spread["split"].max() == 1, column
