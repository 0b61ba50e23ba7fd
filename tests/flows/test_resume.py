"""A run that fails part way is resumed by the next run of the same inputs: the steps it
finished are reused, and the version, ledger and accounting are those of a fresh run; a
changed input starts afresh and deletes what the failed run kept."""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import polars as pl
import pytest
from helpers import (
    SMS_SOURCE,
    replace_stage,
    run_json,
    sms_rows,
    thresher,
    write_jsonl,
    write_project,
)

from flows import resume
from pipeline.registry import RECORD_STAGES
from pipeline.stage import ByKey

BEFORE_SPLIT = list(RECORD_STAGES[: RECORD_STAGES.index("split")])
REUSED = ["ingest", "ingested gate", "govern", "governed gate", *BEFORE_SPLIT[1:]]
SAME = ("records_in", "published", "dropped", "quarantined", "reasons", "changes", "quality",
        "dedup", "splits", "contamination")  # fmt: skip


def timeless(value):
    """A summary section without its timings (they differ from run to run)."""
    if isinstance(value, dict):
        return {key: timeless(item) for key, item in value.items() if key != "seconds"}
    return value


def project(root, rows):
    write_jsonl(root / "data" / "sms-1.jsonl", rows)
    return write_project(root, [SMS_SOURCE], runner={"part_rows": 120})


def fail_at_split(config, monkeypatch):
    def broken(*_args):
        raise RuntimeError("split broke")

    broken_split = ByKey(keys=broken, reduce=broken, decide=broken, apply=broken)
    with monkeypatch.context() as patched:  # the flow looks the stage up when it runs it
        replace_stage(patched, "split", broken_split)
        with pytest.raises(RuntimeError, match="split broke"):
            thresher("run", "--config", config)


def test_the_next_run_resumes_a_failed_run_where_it_stopped(tmp_path, sms_spam, monkeypatch):
    rows = sms_rows(sms_spam, 0, 300)
    fresh = run_json(project(tmp_path / "fresh", rows))
    config = project(tmp_path / "resumed", rows)
    runs = tmp_path / "resumed" / "work" / "runs"

    fail_at_split(config, monkeypatch)
    (first,) = runs.iterdir()
    assert (first / "ledger.parquet").exists()  # for diagnosis, as before
    # only the output of the last stage that wrote one (semantic dedup is off here): what
    # the next run starts from; earlier outputs and every stage's intermediate files (keys,
    # exchanges, decisions) were removed once spent, and unscreened text is never kept
    assert {path.name for path in (first / "stages").iterdir()} == {"boilerplate"}

    data = tmp_path / "resumed" / "data" / "sms-1.jsonl"
    os.utime(data, ns=(1_700_000_000_000_000_000,) * 2)  # touched: the same bytes, hashed again
    fail_at_split(config, monkeypatch)
    second = max(runs.iterdir())
    assert not (first / "stages").exists() and not (first / "steps").exists()
    assert {path.name for path in (second / "stages").iterdir()} == {"boilerplate"}

    # a second run started beside this one looks for the same failed run while this one
    # moves its files: it must find nothing to take or delete
    move, rivals = resume._move, []

    def move_beside_a_rival(old, markers, new, order):
        rival = SimpleNamespace(run_dir=runs / "rival", config=SimpleNamespace(name="test-set"))
        rival.run_dir.mkdir()
        shutil.copy(new / resume.KEY_FILE, rival.run_dir / resume.KEY_FILE)
        rivals.append(resume.adopt(rival, order))
        shutil.rmtree(rival.run_dir)
        return move(old, markers, new, order)

    monkeypatch.setattr(resume, "_move", move_beside_a_rival)
    result = thresher("run", "--config", config, "--json", "--resume")
    monkeypatch.undo()
    assert rivals == [(None, {})]
    assert result.exit_code == 0, result.stderr
    resumed = json.loads(result.stdout)
    assert resumed["resumed_from"] == second.name
    assert f"resumed run {second.name}: reused {', '.join(REUSED)}" in result.stderr
    assert [name for name, step in resumed["steps"].items() if "resumed_from" in step] == REUSED
    assert resumed["dataset_hash"] == fresh["dataset_hash"]
    for key in SAME:
        assert timeless(resumed[key]) == timeless(fresh[key]), key
    for name in ("ingest", *RECORD_STAGES):
        for count in ("records_in", "records_out"):
            assert resumed["steps"][name][count] == fresh["steps"][name][count], (name, count)
    ledgers = [pl.read_parquet(run["paths"]["ledger"]).sort(pl.all()) for run in (resumed, fresh)]
    assert ledgers[0].equals(ledgers[1])
    for kept_folder in ("stages", "ledger-parts", "steps"):
        assert not list(runs.glob(f"*/{kept_folder}")), kept_folder

    again = thresher("run", "--config", config, "--resume")
    assert again.exit_code == 2 and "nothing to resume for 'test-set'" in again.stderr
