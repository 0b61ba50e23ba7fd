"""The Great Expectations gates: each passes on real records and fails on a crafted bad batch,
naming the expectation, how many rows failed and which records, never their text."""

from __future__ import annotations

import json
import random
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from credential_factory import secret_sample
from helpers import SMS_SOURCE, as_records, sms_rows, stage_version, write_jsonl

from expectations.checks import (
    check_governed,
    check_ingested,
    check_published,
    split_overlaps,
    split_shares,
)
from expectations.gates import GateFailed, GateProject, suites_of
from pipeline.config import GatesConfig, RunConfig, SourceDeclaration, SplitConfig, config_hash
from pipeline.govern.stage import govern
from pipeline.ingest.stage import ingest
from pipeline.publish.version import MANIFEST
from pipeline.stage import RunContext

STARTED = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> GateProject:
    return GateProject(tmp_path_factory.mktemp("gx"))


def real_records(root: Path, sms_spam: pl.DataFrame, stop: int = 300):
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, stop))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(root))]
    cfg = RunConfig(name="sms", workdir=str(root / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    return ingest(sources, ctx, root / "ingested").frame, cfg, ctx


def failed(result) -> dict[str, dict]:
    return {
        f"{check['expectation']}:{check['columns']}": check
        for check in result.checks
        if not check["success"]
    }


def test_every_suite_file_names_its_gate_and_index():
    for gate in ("ingested", "governed", "published"):
        assert suites_of(gate), gate
    assert suites_of("published") == [
        "published_overlaps",
        "published_shard_rows",
        "published_split_shares",
    ]


def test_ingested_gate_passes_real_records_and_fails_a_crafted_batch(tmp_path, sms_spam, project):
    records, _, _ = real_records(tmp_path, sms_spam)
    passed = check_ingested(project, records, GatesConfig(), STARTED)
    assert passed.success and passed.batches == 1
    assert {check["checked"] for check in passed.checks} == {300}

    bad = as_records(
        [
            {"record_id": "ok", "text": "fine text"},
            {"record_id": "no-license", "text": "fine text", "license": None},
            {"record_id": "empty-consent", "text": "fine text", "consent": ""},
            {"record_id": "too-long", "text": "x" * 50},
            {"record_id": "future", "text": "fine", "timestamp": datetime(2099, 1, 1, tzinfo=UTC)},
            {"record_id": "ancient", "text": "fine", "timestamp": datetime(1901, 1, 1, tzinfo=UTC)},
        ],
        source="s", location="f:1", source_content_hash="h", content_hash="h",
        license="MIT", consent="explicit",
    )  # fmt: skip
    result = check_ingested(project, bad, GatesConfig(max_text_chars=20, batch_rows=2), STARTED)
    assert not result.success and result.batches == 3
    problems = failed(result)
    assert set(problems) == {
        "expect_column_values_to_not_be_null:license",
        "expect_column_value_lengths_to_be_between:consent",
        "expect_column_values_to_be_between:text_chars",
        "expect_column_values_to_be_between:timestamp",
    }
    assert problems["expect_column_values_to_be_between:text_chars"]["failed"] == 1
    assert problems["expect_column_values_to_be_between:text_chars"]["examples"] == [
        {"record_id": "too-long", "text_chars": 50}
    ]
    timestamps = problems["expect_column_values_to_be_between:timestamp"]
    assert timestamps["failed"] == 2
    assert {e["record_id"] for e in timestamps["examples"]} == {"future", "ancient"}
    message = str(GateFailed(result, report=Path("runs/r/report.html")))
    assert "the ingested gate failed 4 expectation(s)" in message
    assert "on text_chars: 1 of 6 rows (e.g. record_id=too-long, text_chars=50)" in message
    assert "on license: 1 of 6 rows (e.g. record_id=no-license, license=None)" in message
    assert "runs/r/report.html" in message
    assert "x" * 50 not in json.dumps(result.to_json())  # lengths, never text


def test_governed_gate_checks_license_classes_and_secrets_a_reviewer_did_not_clear(
    tmp_path, sms_spam, project
):
    records, cfg, ctx = real_records(tmp_path, sms_spam, stop=200)
    governed = govern(records, cfg.policy, ctx).frame
    no_approvals = pl.DataFrame(schema={"record_id": pl.String})
    assert check_governed(project, governed, cfg, no_approvals).success

    token = secret_sample("github_token", random.Random(3)).text
    rows = governed.collect()
    crafted = pl.concat(
        [
            rows.head(3),
            rows.slice(3, 1).with_columns(pl.lit("CC-BY-NC-4.0").alias("license")),
            rows.slice(4, 1).with_columns(pl.lit(f"my key {token}").alias("text")),
            rows.slice(5, 1).with_columns(pl.lit(f"cleared {token}").alias("text")),
        ]
    ).lazy()
    cleared = pl.DataFrame({"record_id": [rows["record_id"][5]]})
    result = check_governed(project, crafted, cfg, cleared)
    problems = failed(result)
    assert set(problems) == {
        "expect_column_values_to_be_in_set:license_check",
        "expect_column_values_to_be_between:open_secret_findings",
    }
    assert problems["expect_column_values_to_be_in_set:license_check"]["examples"] == [
        {"record_id": rows["record_id"][3], "license_check": "non-commercial"}
    ]
    secrets = problems["expect_column_values_to_be_between:open_secret_findings"]
    assert (secrets["failed"], secrets["checked"]) == (1, 6)
    assert secrets["examples"][0]["record_id"] == rows["record_id"][4]
    assert token not in json.dumps(result.to_json())

    # in batches of two records (each scanned on its own), the same findings
    small = cfg.model_copy(update={"gates": cfg.gates.model_copy(update={"batch_rows": 2})})
    batched = check_governed(project, crafted, small, cleared)
    assert batched.batches == 3 and failed(batched) == problems


def test_published_gate_passes_a_real_version_and_fails_a_tampered_one(tmp_path, sms_spam, project):
    staged, cfg = stage_version(tmp_path, sms_spam, stop=300)
    assert check_published(project, staged.path, staged.manifest, cfg).success

    copy = tmp_path / "tampered"
    shutil.copytree(staged.path, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    train = next(shard for shard in manifest["shards"] if shard["split"] == "train")
    shard_file = copy / train["path"]
    pl.read_parquet(shard_file).head(5).write_parquet(shard_file)  # rows lost, bytes changed
    pl.read_parquet(copy / train["path"]).head(1).write_parquet(copy / "data/train/extra.parquet")
    problems = failed(check_published(project, copy, manifest, cfg))
    assert set(problems) == {
        # the shares are counted in the files: losing most of train skews them too
        "expect_column_pair_values_a_to_be_greater_than_b:allowed_deviation, deviation",
        "expect_column_pair_values_to_be_equal:manifest_rows, file_rows",
        "expect_column_pair_values_to_be_equal:listed_rows, file_rows",
        "expect_column_values_to_be_between:checksum_mismatches",
    }
    rows = problems["expect_column_pair_values_to_be_equal:manifest_rows, file_rows"]
    assert rows["examples"] == [{"split": "train", "manifest_rows": train["rows"], "file_rows": 6}]


def test_published_gate_finds_a_group_and_a_content_hash_in_two_splits():
    version = pl.LazyFrame(
        {
            "record_id": ["a", "b", "c", "d"],
            "content_hash": ["h1", "h2", "h1", "h3"],
            "group": ["g1", "g2", "g3", "g2"],
            "cluster_id": ["a", "b", "c", "d"],
            "split": ["train", "train", "test", "validation"],
        }
    )
    found = split_overlaps(version, SplitConfig())
    overlaps = dict(found.select("key", "values_in_several_splits").iter_rows())
    assert overlaps == {"record_id": 0, "group": 1, "cluster_id": 0, "content_hash": 1}
    # a time split may cut a group (a user's early and late records): groups are not checked
    by_time = SplitConfig(
        strategy="time", cutoffs={"validation": datetime(2020, 1, 1), "test": STARTED}
    )
    keys = split_overlaps(version, by_time)["key"].to_list()
    assert keys == ["record_id", "cluster_id", "content_hash"]


def test_split_shares_allow_the_tolerance_plus_a_binomial_margin():
    version = pl.LazyFrame(
        {
            "record_id": [str(i) for i in range(1000)],
            "group": [str(i) for i in range(1000)],
            "split": ["train"] * 600 + ["validation"] * 100 + ["test"] * 300,
        }
    )
    shares = split_shares(version, SplitConfig(), tolerance=0.1).rows_by_key("split", named=True)
    test = shares["test"][0]
    assert (test["share"], test["fraction"], test["deviation"]) == (0.3, 0.1, 0.2)
    # 0.1 + 4 * sqrt(0.1 * 0.9 / 1000 groups)
    assert test["allowed_deviation"] == pytest.approx(0.137947, abs=1e-6)
    assert shares["validation"][0]["deviation"] == 0.0
    fixed_cutoffs = SplitConfig(
        strategy="time", cutoffs={"validation": datetime(2020, 1, 1), "test": STARTED}
    )
    assert split_shares(version, fixed_cutoffs, 0.1).height == 0  # no target to stray from
