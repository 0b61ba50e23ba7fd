"""Fault suite, hostile inputs: a folder tree made endless by links, timestamps no gate allows,
and more labels than a stratified split can spread. Each ends in a bounded walk, a record
dropped with its reason, or splits that still hold their share, never a hung or empty run."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import polars as pl
import pytest
from helpers import SMS_SOURCE, as_records, run_context, sms_rows, thresher, write_project

from expectations.checks import check_ingested
from expectations.gates import load_suite
from pipeline.config import GatesConfig, RunConfig, SourceDeclaration, SplitConfig, config_hash
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.ingest.source_files import source_files
from pipeline.ingest.stage import ingest, plan_parts, read_part
from pipeline.split.stage import split
from pipeline.stage import RunContext

TREE = {
    "name": "tree", "location": "data/tree/**/*.jsonl", "format": "jsonl",
    "license": "CC0-1.0", "consent": "contract", "owner": "support",
}  # fmt: skip


def looping_tree(root: Path) -> list[str]:
    """data/tree with files three folders deep and links that lead back up from the bottom:
    `glob` would list 2^40 paths. The names of its files, each once."""
    names = ["data/tree/a.jsonl", "data/tree/sub/b.jsonl", "data/tree/sub/deeper/c.jsonl"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(orjson.dumps({"text": f"the text of {name}"}) + b"\n")
    deeper = root / "data/tree/sub/deeper"
    os.symlink(".", root / "data/tree/sub/self")  # the probe
    os.symlink("..", deeper / "up")
    os.symlink("../..", deeper / "top")
    os.symlink("c.jsonl", deeper / "again.jsonl")  # a second name for a listed file
    return names


def listed(source: SourceDeclaration, within: float = 10.0) -> tuple[list[str], float]:
    """The names source_files gives, and the seconds it took; fails past `within` seconds
    (the listing goes on in a daemon thread, which the test run does not wait for)."""
    found: dict = {}
    started = time.monotonic()
    worker = threading.Thread(target=lambda: found.update(files=source_files(source)), daemon=True)
    worker.start()
    worker.join(within)
    assert not worker.is_alive(), f"listing {source.location} ran past {within} s"
    return [name for _, name in found["files"]], time.monotonic() - started


def test_a_link_loop_is_walked_once_and_each_file_listed_once(tmp_path):
    looping_tree(tmp_path)
    source = SourceDeclaration(**TREE, root="data", base_dir=str(tmp_path))
    files, seconds = listed(source.model_copy(update={"location": "tree/**/*.jsonl"}))
    # again.jsonl is c.jsonl: read once, under the first of its names in order
    assert files == ["tree/a.jsonl", "tree/sub/b.jsonl", "tree/sub/deeper/again.jsonl"]
    assert seconds < 2
    # a wildcard per level goes through a link too, never further than its levels
    deep = SourceDeclaration(**{**TREE, "location": str(tmp_path / "data/tree/*/*/*.jsonl")})
    assert listed(deep)[0] == ["sub/deeper/again.jsonl", "sub/self/b.jsonl"]


def test_past_the_path_bound_or_the_time_bound_the_error_names_the_source_and_setting(tmp_path):
    looping_tree(tmp_path)
    for number in range(40):
        (tmp_path / f"data/tree/wide/{number}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"data/tree/wide/{number}.jsonl").write_text('{"text": "x"}\n')
    source = SourceDeclaration(**TREE, base_dir=str(tmp_path))
    assert len(source_files(source)) == 43
    with pytest.raises(DataError) as bounded:
        source_files(source.model_copy(update={"max_glob_paths": 30}))
    assert str(bounded.value).startswith(
        "source 'tree': location 'data/tree/**/*.jsonl' examined more than 30 paths"
    )
    assert "raise the source's `max_glob_paths` (sources[tree].max_glob_paths)" in str(
        bounded.value
    )
    with pytest.raises(DataError, match=r"took more than 1e-06 s to list.*`max_glob_seconds`"):
        source_files(source.model_copy(update={"max_glob_seconds": 1e-6}))


def test_remote_locations_are_bounded_too(tmp_path):
    from upath import UPath

    bucket = UPath(f"memory://hostile-{tmp_path.name}")
    for number in range(12):
        (bucket / f"in/{number:02d}.jsonl").write_text('{"text": "x"}\n')
    source = SourceDeclaration(**{**TREE, "location": f"{bucket}/in/*.jsonl"})
    assert [name for _, name in source_files(source)][:2] == ["00.jsonl", "01.jsonl"]
    with pytest.raises(DataError, match=r"examined more than 5 paths.*`max_glob_paths`"):
        source_files(source.model_copy(update={"max_glob_paths": 5}))


def test_config_validate_counts_the_files_of_each_location_and_fails_on_a_bound(tmp_path):
    looping_tree(tmp_path)
    for number in range(3):
        (tmp_path / f"data/tickets-{number}.jsonl").write_text('{"text": "x"}\n')
    tickets = {**TREE, "name": "tickets", "location": ["data/*.jsonl", "data/none/*.jsonl"]}
    config = write_project(tmp_path, [tickets, TREE])
    result = thresher("config", "validate", config)
    assert result.exit_code == 0, result.stderr
    assert "source tickets: 3 files match data/*.jsonl" in result.stderr
    assert "source tickets: 0 files match data/none/*.jsonl; a run stops there" in result.stderr
    assert "source tree: 3 files match data/tree/**/*.jsonl" in result.stderr
    as_json = json.loads(thresher("config", "validate", config, "--json").stdout)
    assert as_json["files"] == {
        "tickets": {"data/*.jsonl": 3, "data/none/*.jsonl": 0},
        "tree": {"data/tree/**/*.jsonl": 3},
    }

    config = write_project(tmp_path, [{**TREE, "max_glob_paths": 5}])
    result = thresher("config", "validate", config)
    assert result.exit_code == 2 and ": valid" not in result.stderr
    assert "source 'tree': location 'data/tree/**/*.jsonl' examined more than 5 paths" in (
        result.stderr
    )
    assert "sources[tree].max_glob_paths" in result.stderr


# The probe: 7 of 208 rows timed where no gate allows, among real SMS messages.
OUT_OF_RANGE = [
    "9999-12-31T23:59:59.123456789+00:00",  # longer than the evidence keeps
    "9999-01-01",
    "0001-01-01T00:00:00Z",
    "0001-01-01",
    1e15,  # epoch seconds, 31 million years from now
    1_000_000_000_000_000,
    99_999_999_999,  # 11 digits: parses, to the year 5138
]


def ingested_with_bounds(root: Path, rows: list[dict], gates: GatesConfig):
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data/sms-1.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(root))]
    cfg = RunConfig(name="t", sources=sources, gates=gates)
    ctx = RunContext(run_id="r", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    result = ingest(sources, ctx, root / "ingested")
    return result.frame.collect(), result.events


def test_timestamps_outside_the_gate_bounds_are_dropped_with_evidence(tmp_path, sms_spam):
    good = sms_rows(sms_spam, 0, 201)
    bad = [{**good[0], "id": f"bad-{n}", "sent": value} for n, value in enumerate(OUT_OF_RANGE)]
    started = datetime.now(UTC)
    records, events = ingested_with_bounds(tmp_path, [*good, *bad], GatesConfig())

    assert records.height == 201
    assert sorted(records["location"]) == sorted(f"data/sms-1.jsonl:{n}" for n in range(1, 202))
    dropped = events.filter(pl.col("terminal"))  # the rest repair a message's encoding
    assert dropped["reason"].to_list() == [reasons.TIMESTAMP_OUT_OF_RANGE] * 7
    assert set(dropped["action"]) == {reasons.DROPPED}
    evidence = [json.loads(text) for text in dropped["evidence"]]
    assert [e["line"] for e in evidence] == list(range(202, 209))
    assert [e["value"] for e in evidence] == [
        "9999-12-31T23:59:59.123456789+00",
        "9999-01-01",
        "0001-01-01T00:00:00Z",
        "0001-01-01",
        "1000000000000000",
        "1000000000000000",
        "99999999999",
    ]
    assert {e["earliest"] for e in evidence} == {"1970-01-01T00:00:00+00:00"}
    latest = datetime.fromisoformat(evidence[0]["latest"])
    assert timedelta(days=1) <= latest - started < timedelta(days=1, minutes=1)


def test_ingest_and_the_ingested_gate_share_their_bounds(tmp_path, sms_spam):
    """A record at a bound is kept and one a microsecond past it dropped, by the bounds
    GatesConfig.timestamp_bounds gives; the gate's suite checks those same bounds, both
    allowed. Either side drifting fails here."""
    gates = GatesConfig(earliest_timestamp=datetime(2012, 1, 1, tzinfo=UTC), future_days=2)
    started = datetime(2030, 1, 1, tzinfo=UTC)
    earliest, latest = gates.timestamp_bounds(started)
    assert (earliest, latest) == (
        datetime(2012, 1, 1, tzinfo=UTC),
        datetime(2030, 1, 3, tzinfo=UTC),
    )
    micro = timedelta(microseconds=1)
    times = [earliest, latest, earliest - micro, latest + micro]
    rows = [
        {**row, "sent": when.isoformat()}
        for row, when in zip(sms_rows(sms_spam, 0, 4), times, strict=True)
    ]
    (tmp_path / "data").mkdir()
    (tmp_path / "data/sms-1.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    source = SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))
    (part,) = plan_parts([source], 1 << 20)
    _, events = read_part(part, source, tmp_path / "in", timestamp_bounds=(earliest, latest))
    kept = pl.read_parquet(tmp_path / "in" / "part-*.parquet")
    assert kept["timestamp"].to_list() == [earliest, latest]
    assert events["reason"].to_list() == [reasons.TIMESTAMP_OUT_OF_RANGE] * 2

    (check,) = [
        e for e in load_suite("ingested_records")["expectations"]
        if e["kwargs"]["column"] == "timestamp"
    ]  # fmt: skip
    assert check["type"] == "expect_column_values_to_be_between"
    assert check["kwargs"] == {
        "column": "timestamp",
        "min_value": {"$PARAMETER": "earliest_timestamp"},
        "max_value": {"$PARAMETER": "latest_timestamp"},
    }  # no strict_min or strict_max: both bounds allowed, as ingest allows them

    class Recorder:
        def validate(self, suite, batches, parameters):
            self.parameters = parameters
            return [], len(list(batches))

    recorder = Recorder()
    check_ingested(recorder, kept.lazy(), gates, started)
    assert recorder.parameters["earliest_timestamp"] == earliest
    assert recorder.parameters["latest_timestamp"] == latest


def test_the_timestamp_bounds_are_in_the_config_hash_when_set():
    plain = RunConfig(name="t", sources=[])
    widened = RunConfig(name="t", sources=[], gates={"earliest_timestamp": "1900-01-01"})
    retried = RunConfig(name="t", sources=[], gates={"batch_rows": 10})
    assert config_hash(plain) == config_hash(retried) != config_hash(widened)


def shares(assigned: pl.DataFrame) -> dict[str, float]:
    counts = dict(assigned.group_by("split").len().iter_rows())
    return {name: counts.get(name, 0) / assigned.height for name in ("train", "validation", "test")}


def test_ten_thousand_labels_still_fill_validation_and_test(tmp_path):
    rows = [{"record_id": f"r{n:05d}", "label": f"label-{n}"} for n in range(10_000)]
    result = split(
        as_records(rows, source="s"), SplitConfig(stratify="label"), run_context(tmp_path)
    )
    assigned = result.frame.collect()
    assert assigned.height == 10_000 and result.events.height == 0
    got = shares(assigned)
    assert all(math.isclose(got[name], 0.1, abs_tol=0.005) for name in ("validation", "test"))
    assert result.stats["stratify"] == {
        "min_components": 10,
        "pooled_labels": 10_000,
        "pooled_records": 10_000,
    }
    assert any("10,000 labels of fewer than 10 components" in w for w in result.stats["warnings"])


def test_common_labels_keep_their_own_shares_beside_the_pooled_rare_ones(tmp_path):
    common = [{"record_id": f"c{n:04d}", "label": f"common-{n % 2}"} for n in range(2_000)]
    rare = [{"record_id": f"r{n:04d}", "label": f"rare-{n // 3}"} for n in range(3_000)]
    result = split(as_records([*common, *rare], source="s"), SplitConfig(stratify="label"),
                   run_context(tmp_path))  # fmt: skip
    assigned = result.frame.collect()
    for label in ("common-0", "common-1"):
        got = shares(assigned.filter(pl.col("label") == label))
        assert all(math.isclose(got[name], 0.1, abs_tol=0.002) for name in ("validation", "test"))
    got = shares(assigned.filter(pl.col("label").str.starts_with("rare")))
    assert all(math.isclose(got[name], 0.1, abs_tol=0.01) for name in ("validation", "test"))
    assert result.stats["stratify"]["pooled_labels"] == 1_000
    assert result.stats["stratify"]["pooled_records"] == 3_000
