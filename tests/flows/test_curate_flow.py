"""End to end through the CLI and the Prefect flow, against one Prefect test server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers import SMS_SOURCE, run_json, sms_rows, thresher, write_jsonl, write_project

from data_catalog.catalog import Catalog, open_version
from pipeline.core import ledger
from pipeline.registry import RECORD_STAGES

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_run_publishes_a_version_and_accounts_for_every_record(sms_project, sms_spam):
    repeated = {**sms_rows(sms_spam, 0, 1)[0], "text": "a later message reusing the id sms-0"}
    write_jsonl(sms_project.parent / "data" / "sms-9.jsonl", [repeated])
    result = thresher("run", "--config", sms_project, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    workdir = sms_project.parent / "work"
    assert summary["created"] and summary["parent_version"] is None
    assert summary["records_in"] == 600 + 1 + 169  # SMS rows + changelog entries
    assert summary["reasons"]["dropped"]["duplicate_source_id"] == 1
    assert (
        summary["published"] + summary["dropped"] + summary["quarantined"] == summary["records_in"]
    )
    assert summary["reasons"]["dropped"]["exact_duplicate"] > 0
    log = pl.scan_parquet(summary["paths"]["ledger"])
    assert ledger.check_accounting(log, summary["records_in"])["published"] == summary["published"]
    version = open_version(workdir, "test-set")
    assert version.dataset_hash == summary["dataset_hash"]
    published = pl.concat([frame.collect() for frame in version.splits.values()])
    assert published.height == summary["published"] and published["content_hash"].is_unique().all()
    assert repeated["text"] not in published["text"].to_list()
    assert (Path(summary["paths"]["version"]) / "ledger.parquet").exists()
    run_dir = Path(summary["paths"]["run"])
    assert not (run_dir / "stages").exists()  # intermediate record files are gone
    assert (
        json.loads((run_dir / "summary.json").read_text())["dataset_hash"]
        == summary["dataset_hash"]
    )
    (run,) = Catalog.open(workdir).runs("test-set")
    assert run["status"] == "succeeded" and run["dataset_hash"] == summary["dataset_hash"]
    assert_steps_account_for_the_run(summary, result.stderr)


def assert_steps_account_for_the_run(summary: dict, stderr: str) -> None:
    """Every step of the run in order, with its time and peak memory; each stage reads what
    the one before it wrote, from the records read in to the records published."""
    steps = summary["steps"]
    stages = [name for name in steps if "records_in" in steps[name]]
    assert stages == ["ingest", *RECORD_STAGES, "publish"]
    assert RECORD_STAGES[0] == "govern"
    assert list(steps) == [
        "ingest", "ingested gate", "govern", "governed gate", *RECORD_STAGES[1:], "publish",
        "published gate", "commit", "report",
    ]  # fmt: skip
    assert all(step["seconds"] > 0 and step["peak_rss_mb"] > 50 for step in steps.values())
    # what a stage did not pass on is what the ledger says it dropped or quarantined
    events = pl.read_parquet(summary["paths"]["ledger"])
    ended = dict(
        events.filter(pl.col("terminal") & (pl.col("action") != "published"))
        .group_by("stage")
        .len()
        .iter_rows()
    )
    for name in stages:
        assert steps[name]["records_in"] - steps[name]["records_out"] == ended.get(name, 0), name
    assert sum(ended.values()) == summary["dropped"] + summary["quarantined"]
    assert steps["ingest"]["records_out"] == summary["records_in"] - 1  # the repeated id
    assert steps["publish"]["records_out"] == summary["published"]
    assert steps["govern"]["parts"] == 1
    slowest = max(steps, key=lambda name: steps[name]["seconds"])
    (line,) = [line for line in stderr.splitlines() if line.startswith("time: ")]
    assert f"in {len(steps)} steps; slowest {slowest} " in line and "peak memory" in line
    # the run's files on disk when each stage ended (its intermediate files not yet removed)
    disk = {name: steps[name]["disk_mb"] for name in stages}
    assert all(size > 0 for size in disk.values())
    fullest = max(disk, key=disk.get)
    assert line.endswith(f"; peak disk {disk[fullest]:,.0f} MB (after {fullest})")


def test_a_run_stops_before_it_starts_when_the_disk_is_too_small(sms_project, monkeypatch):
    from flows import work_folder

    monkeypatch.setattr(work_folder, "_free_bytes", lambda path: 1000)
    result = thresher("run", "--config", sms_project)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    workdir = sms_project.parent / "work"
    assert f"not enough free disk for this run in {workdir}: its intermediate files" in message
    needed, factor, sources = re.search(
        r"take about ([\d.]+) kB at their peak \((\d+)× its sources' ([\d.]+) kB\) and "
        r"1.0 kB is free there; .* point runner.scratch at a larger disk",
        message,
    ).groups()
    assert int(factor) == work_folder.PEAK_DISK_PER_SOURCE_BYTE
    assert float(needed) == pytest.approx(int(factor) * float(sources), abs=int(factor) * 0.05)
    assert float(sources) > 100  # the SMS rows and the changelog entries, on disk
    assert Catalog.open(workdir).runs("test-set") == []  # nothing ran
    monkeypatch.setattr(work_folder, "_free_bytes", lambda path: 10**9)
    assert thresher("run", "--config", sms_project).exit_code == 0


def test_same_inputs_in_two_folders_give_the_same_dataset_hash(tmp_path, sms_spam):
    hashes = []
    for folder in ("first", "second"):
        write_jsonl(tmp_path / folder / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 300))
        hashes.append(run_json(write_project(tmp_path / folder, [SMS_SOURCE]))["dataset_hash"])
    assert hashes[0] == hashes[1]


def test_publishing_again_changes_nothing(sms_project):
    first = run_json(sms_project)
    manifest = Path(first["paths"]["manifest"])
    before = (
        manifest.read_bytes(),
        sorted(p.stat().st_mtime_ns for p in manifest.parent.rglob("*.parquet")),
    )
    unchanged = run_json(sms_project)  # nothing changed: nothing done
    assert unchanged["unchanged_since"] == first["run_id"]
    second = run_json(sms_project, "--force")
    assert second["dataset_hash"] == first["dataset_hash"] and not second["created"]
    assert (
        manifest.read_bytes(),
        sorted(p.stat().st_mtime_ns for p in manifest.parent.rglob("*.parquet")),
    ) == before
    catalog = Catalog.open(sms_project.parent / "work")
    assert len(catalog.versions()) == 1
    assert [run["created_version"] for run in catalog.runs()] == [1, 0]


def test_added_data_keeps_every_existing_split(sms_project, sms_spam):
    first = run_json(sms_project)
    write_jsonl(sms_project.parent / "data" / "sms-2.jsonl", sms_rows(sms_spam, 600, 1500))
    second = run_json(sms_project)
    assert second["created"] and second["parent_version"] == first["dataset_hash"]
    workdir = sms_project.parent / "work"

    def membership(ref: str) -> pl.DataFrame:
        version = open_version(workdir, "test-set", ref)
        return pl.concat(
            [frame.select("record_id", "split").collect() for frame in version.splits.values()]
        )

    old, new = membership(first["dataset_hash"]), membership(second["dataset_hash"])
    joined = old.join(new, on="record_id", suffix="_new")
    assert (joined["split"] == joined["split_new"]).all()
    assert new.height > old.height
    # an old training record leaves only when it shares 13 words with a new test record
    gone = old.join(new, on="record_id", how="anti")
    events = (
        pl.read_parquet(second["paths"]["ledger"]).filter("terminal").join(gone, on="record_id")
    )
    assert set(events["reason"]) <= {"contaminated_eval"} and set(gone["split"]) <= {
        "train",
        "validation",
    }
    assert all(json.loads(e)["eval_set"] == "test" for e in events["evidence"])
    assert "moved" not in second["changes"]  # no record had to move
    moves = pl.scan_parquet(second["paths"]["ledger"]).filter(pl.col("action") == "moved")
    assert moves.select(pl.len()).collect().item() == 0


def test_catalog_verify_names_a_tampered_shard(sms_project):
    summary = run_json(sms_project)
    workdir = sms_project.parent / "work"
    clean = thresher("catalog", "verify", summary["dataset_hash"][:10], "--workdir", workdir)
    assert clean.exit_code == 0 and "all match" in clean.stderr
    shard = next(Path(summary["paths"]["shards"]).glob("train/part-00000.parquet"))
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, table.num_rows - 1), shard, compression="zstd")
    result = thresher("catalog", "verify", summary["dataset_hash"], "--workdir", workdir, "--json")
    assert result.exit_code == 1
    (finding,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert (
        finding["shard"] == "data/train/part-00000.parquet"
        and finding["problem"] == "sha256 mismatch"
    )
    assert "data/train/part-00000.parquet: sha256 mismatch" in result.stderr
    manifest = Path(summary["paths"]["manifest"])
    manifest.write_text(manifest.read_text()[:100])  # truncated
    broken = thresher("catalog", "verify", summary["dataset_hash"], "--workdir", workdir, "--json")
    assert broken.exit_code == 1
    finding = {"shard": "manifest.json", "problem": "missing or unreadable"}
    assert finding in [json.loads(line) for line in broken.stdout.splitlines()]
    manifest.unlink()
    gone = thresher("catalog", "verify", summary["dataset_hash"], "--workdir", workdir, "--json")
    assert gone.exit_code == 1 and finding in [
        json.loads(line) for line in gone.stdout.splitlines()
    ]


def test_catalog_list_and_show(curated_sms):
    sms_project, summary = curated_sms
    workdir = sms_project.parent / "work"
    listed = thresher("catalog", "list", "--workdir", workdir, "--json")
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (
        row["dataset_hash"] == summary["dataset_hash"]
        and row["latest"]
        and row["records"] == summary["published"]
    )
    shown = thresher(
        "catalog", "show", summary["dataset_hash"][:12], "--config", sms_project, "--json"
    )
    details = json.loads(shown.stdout)
    assert {s["source"]: s["license"] for s in details["sources"]} == {
        "sms": "CC-BY-4.0",
        "changelogs": "LicenseRef-Debian-package-terms",
    }
    assert sum(s["records"] for s in details["sources"]) == summary["published"]
    assert sum(shard["rows"] for shard in details["shards"]) == summary["published"]
    human = thresher("catalog", "show", summary["dataset_hash"][:12], "--workdir", workdir)
    assert human.exit_code == 0 and "CC-BY-4.0" in human.stdout


def test_a_failed_run_is_recorded_and_leaves_no_version(tmp_path):
    config = write_project(tmp_path, [{**SMS_SOURCE, "location": "nowhere/*.jsonl"}])
    result = thresher("run", "--config", config)
    assert result.exit_code == 2
    assert "source 'sms': location 'nowhere/*.jsonl' matches no file" in result.stderr
    catalog = Catalog.open(tmp_path / "work")
    (run,) = catalog.runs()
    assert run["status"] == "failed" and "matches no file" in run["error"]
    assert catalog.versions() == []
    assert not list((tmp_path / "work" / "runs").glob("*/stages"))


def test_init_scaffolds_a_project_that_runs(tmp_path):
    result = thresher("init", tmp_path / "project")
    assert result.exit_code == 0
    summary = run_json(tmp_path / "project" / "thresher.yaml")
    assert summary["records_in"] == 40 and summary["published"] + summary["dropped"] == 40
    again = thresher("init", tmp_path / "project")
    assert again.exit_code == 2 and "already exist" in again.stderr


def test_a_source_with_only_bad_rows_publishes_an_empty_version_twice(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sms-1.jsonl").write_text('{"id": "a"}\n{"id": "b", "text": "  "}\n')
    config = write_project(tmp_path, [SMS_SOURCE])
    first = run_json(config)
    assert (first["records_in"], first["published"], first["dropped"]) == (2, 0, 2)
    assert first["reasons"]["dropped"] == {"missing_text": 1, "empty_text": 1}
    report = json.loads(Path(first["paths"]["report"]).with_suffix(".json").read_text())
    assert report["outcomes"] == {
        "records_in": 2, "generated": 0, "published": 0, "dropped": 2, "quarantined": 0,
    }  # fmt: skip
    assert {split["records"] for split in report["splits"].values()} == {0}
    second = run_json(config, "--force")  # the empty parent is read back as the parent
    assert second["dataset_hash"] == first["dataset_hash"] and not second["created"]
