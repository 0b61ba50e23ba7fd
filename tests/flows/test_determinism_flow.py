"""The same records and config give the same dataset, however the records are laid out.

Thousands of edited near-copies of real SMS and changelog text (tests/near_copies.py) run
through `thresher run` with the default config: twice in one layout (same dataset hash, same
ledger), and once shuffled, spread over another number of files listed in reverse (the same
records in the same splits, the same kept record for every duplicate: only `location`, which
names file and line, differs, and with it the hash). Each run goes through the real runner
with another part size and number of workers.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from helpers import run_json, write_jsonl, write_project
from near_copies import near_copy_rows

from data_catalog.catalog import open_version

pytestmark = pytest.mark.usefixtures("prefect_server")

LICENSES = {"sms": "CC-BY-4.0", "changes": "GPL-2.0-or-later"}


def project(
    root: Path, rows: dict[str, list[dict]], files: int, shuffle: bool, runner: dict
) -> Path:
    """A project over `rows`, each source's rows in `files` jsonl files; with `shuffle` the
    rows are shuffled and the files listed in reverse order; run by `runner`."""
    sources = []
    for name, source_rows in rows.items():
        if shuffle:
            source_rows = random.Random(7).sample(source_rows, len(source_rows))
        paths = []
        for part in range(files):
            path = root / "data" / f"{name}-{part}.jsonl"
            paths.append(write_jsonl(path, source_rows[part::files]).relative_to(root).as_posix())
        sources.append(
            {
                "name": name,
                "location": paths[::-1] if shuffle else paths,
                "format": "jsonl",
                "fields": {"text": "text", "id": "id", "label": "label", "group": "user",
                           "timestamp": "sent"},
                "license": LICENSES[name],
                "consent": "public-release",
                "owner": "tests",
            }
        )  # fmt: skip
    return write_project(root, sources, name="copies", publish={"shard_rows": 400}, runner=runner)


def published(root: Path) -> pl.DataFrame:
    version = open_version(root / "work", "copies")
    splits = [
        frame.with_columns(pl.lit(name).alias("split")) for name, frame in version.splits.items()
    ]
    return pl.concat([frame.collect() for frame in splits]).sort("record_id")


def decisions(ledger_path: str) -> pl.DataFrame:
    """Every event but the evidence of ingest's (it names the file and line)."""
    ledger = pl.read_parquet(ledger_path)
    return ledger.with_columns(
        pl.when(pl.col("stage") != "ingest").then(pl.col("evidence")).alias("evidence")
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sms_spam) -> dict[str, tuple[Path, dict]]:
    rows = near_copy_rows(sms_spam)
    done = {}
    # each run on the real runner with another part size and worker count: one part on two
    # workers, parts of 700 records on one, parts of 1,100 on three
    for name, files, shuffle, runner in [
        ("first", 3, False, {}),
        ("again", 3, False, {"part_rows": 700, "workers": 1}),
        ("other", 7, True, {"part_rows": 1100, "workers": 3}),
    ]:
        root = tmp_path_factory.mktemp(name)
        done[name] = root, run_json(project(root, rows, files, shuffle, runner))
    return done


def test_the_same_layout_gives_the_same_hash_and_ledger(runs):
    (_, first), (_, again) = runs["first"], runs["again"]
    assert first["steps"]["quality"]["parts"] == 1 < 4 <= again["steps"]["quality"]["parts"]
    assert first["dedup"]["minhash"]["dropped"] > 300  # many near duplicates to decide
    assert first["dataset_hash"] == again["dataset_hash"]
    assert pl.read_parquet(first["paths"]["ledger"]).equals(
        pl.read_parquet(again["paths"]["ledger"])
    )


def test_another_layout_publishes_the_same_records_in_the_same_splits(runs):
    (first_root, first), (other_root, other) = runs["first"], runs["other"]
    expected, found = published(first_root), published(other_root)
    assert expected.height > 1000
    assert found.select("record_id", "split").equals(expected.select("record_id", "split"))
    # the same kept record and cluster for every duplicate; every column but location equal
    assert found.drop("location").equals(expected.drop("location"))
    assert not found["location"].equals(expected["location"])
    assert other["dataset_hash"] != first["dataset_hash"]  # location is published: so hashed
    assert decisions(other["paths"]["ledger"]).equals(decisions(first["paths"]["ledger"]))
