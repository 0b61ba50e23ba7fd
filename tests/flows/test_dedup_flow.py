"""Near-duplicate dedup inside the `curate` flow: traced in the ledger, cluster ids published,
and incremental against the published version."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project
from typer.testing import CliRunner

from data_catalog.catalog import open_version
from flows.cli import app

pytestmark = pytest.mark.usefixtures("prefect_server")


def run(config) -> dict:
    result = CliRunner().invoke(app, ["run", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def edited(row: dict, suffix: str, when: str, word: str) -> dict:
    """A near copy of a real message: a word added, a new id, another sender and time."""
    return {
        **row,
        "id": f"{row['id']}-{suffix}",
        "text": f"{row['text']} {word}",
        "sender": f"copier-{suffix}",
        "sent": when,
    }


def published(workdir) -> pl.DataFrame:
    version = open_version(workdir, "test-set")
    return pl.concat([frame.collect() for frame in version.splits.values()])


def near_events(summary: dict) -> dict[str, dict]:
    events = pl.read_parquet(summary["paths"]["ledger"]).filter(
        pl.col("reason") == "near_duplicate"
    )
    return {r: json.loads(e) for r, e in events.select("record_id", "evidence").iter_rows()}


def test_near_copies_are_dropped_traced_and_dropped_again_against_the_published_version(
    tmp_path, sms_spam
):
    rows = sms_rows(sms_spam, 0, 400)
    long_rows = [row for row in rows if len(row["text"].split()) >= 25][:10]
    copies = [edited(row, "a", "2011-01-01T00:00:00Z", "really") for row in long_rows]
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows + copies)
    config = write_project(tmp_path, [SMS_SOURCE], publish={"shard_rows": 200})
    first = run(config)
    workdir = tmp_path / "work"
    traced = near_events(first)
    assert first["dedup"]["minhash"]["dropped"] == len(traced) >= len(copies)
    ids = {row["id"] for row in long_rows}
    by_text = dict(zip(published(workdir)["record_id"], published(workdir)["text"], strict=True))
    # each copy and its original are one cluster; the earlier copy (2011) is kept
    kept_copies = {evidence["duplicate_of"] for evidence in traced.values()}
    assert all("really" in by_text[record] for record in kept_copies)
    assert all(evidence["published_in"] is None for evidence in traced.values())
    first_version = published(workdir)
    cluster_of = dict(first_version.select("record_id", "cluster_id").iter_rows())
    for dropped, evidence in traced.items():  # a cluster is named by its smallest record id
        assert cluster_of[evidence["duplicate_of"]] == evidence["cluster_id"]
        assert evidence["cluster_id"] == min(dropped, evidence["duplicate_of"])
    assert len(ids) == len(copies)

    # a later run adds new near copies, dated earlier than everything: they still go, pointing
    # at the published records, and no published record moves or disappears
    later = [edited(row, "b", "2001-01-01T00:00:00Z", "truly") for row in long_rows]
    write_jsonl(tmp_path / "data" / "sms-2.jsonl", later)
    second = run(config)
    assert second["parent_version"] == first["dataset_hash"]
    traced_again = near_events(second)
    new_ids = set(traced_again) - set(traced)
    assert len(new_ids) == len(later)
    for record in new_ids:
        assert traced_again[record]["published_in"] == first["dataset_hash"]
        assert traced_again[record]["duplicate_of"] in set(first_version["record_id"])
    second_version = published(workdir)
    assert (
        second_version.select("record_id", "split")
        .sort("record_id")
        .equals(first_version.select("record_id", "split").sort("record_id"))
    )
