"""Publish and read: bounded zstd shards, a complete manifest, a reproducible dataset hash."""

from __future__ import annotations

import hashlib
import json

import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl

from pipeline.config import PublishConfig, RunConfig, SourceDeclaration, config_hash
from pipeline.core.errors import DataError
from pipeline.core.schema import PUBLISHED_SCHEMA
from pipeline.ingest.stage import ingest
from pipeline.publish.reader import read_version, verify_shards
from pipeline.publish.stage import publish
from pipeline.split.stage import split
from pipeline.stage import RunContext


def publish_sms(root, sms_spam, shard_rows=150, stop=700):
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, stop))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(root))]
    cfg = RunConfig(name="sms", workdir=str(root / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    frame = split(ingest(sources, ctx, root / "in").frame, cfg.split, ctx).frame
    staging = root / "staging"
    staging.mkdir()
    return publish(
        frame, PublishConfig(shard_rows=shard_rows), ctx, staging, extra={"code_version": "test"}
    )


def test_shards_are_bounded_sorted_zstd_and_listed_with_their_hashes(tmp_path, sms_spam):
    staged = publish_sms(tmp_path, sms_spam)
    manifest = staged.manifest
    assert sum(manifest["split_counts"].values()) == 700
    assert {shard["split"] for shard in manifest["shards"]} == {"train", "validation", "test"}
    for shard in manifest["shards"]:
        path = tmp_path / "staging" / shard["path"]
        assert shard["rows"] <= 150 and shard["bytes"] == path.stat().st_size
        assert shard["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        meta = pq.ParquetFile(path).metadata
        assert meta.num_rows == shard["rows"]
        assert meta.row_group(0).column(0).compression == "ZSTD"
        ids = pl.read_parquet(path)["record_id"]
        assert ids.is_sorted() and (pl.read_parquet(path)["split"] == shard["split"]).all()
    train_shards = [s for s in manifest["shards"] if s["split"] == "train"]
    assert [s["path"] for s in train_shards][:2] == [
        "data/train/part-00000.parquet",
        "data/train/part-00001.parquet",
    ]
    assert manifest["schema"] == [{"name": n, "type": str(t)} for n, t in PUBLISHED_SCHEMA.items()]
    assert manifest["config"]["name"] == "sms" and manifest["code_version"] == "test"
    on_disk = json.loads((tmp_path / "staging" / "manifest.json").read_text())
    assert on_disk["dataset_hash"] == staged.dataset_hash
    assert staged.events.height == 700 and staged.events["terminal"].all()


def test_same_inputs_give_the_same_hash_in_another_folder(tmp_path, sms_spam):
    first = publish_sms(tmp_path / "one", sms_spam)
    second = publish_sms(tmp_path / "two", sms_spam)
    assert first.dataset_hash == second.dataset_hash
    assert [s["sha256"] for s in first.manifest["shards"]] == [
        s["sha256"] for s in second.manifest["shards"]
    ]
    different = publish_sms(tmp_path / "three", sms_spam, stop=699)
    assert different.dataset_hash != first.dataset_hash


def test_reader_opens_splits_and_refuses_a_tampered_shard(tmp_path, sms_spam):
    staged = publish_sms(tmp_path, sms_spam)
    version = read_version(staged.path)
    assert (
        version.split("train").select(pl.len()).collect().item()
        == staged.manifest["split_counts"]["train"]
    )
    assert set(version.splits) == {"train", "validation", "test"}
    target = staged.manifest["shards"][0]["path"]
    table = pq.read_table(staged.path / target)
    pq.write_table(table.slice(1), staged.path / target, compression="zstd")  # one record removed
    problems = verify_shards(staged.path, staged.manifest)
    assert [(p.path, p.problem) for p in problems] == [(target, "sha256 mismatch")]
    with pytest.raises(DataError, match=f"failed verification \\({target}: sha256 mismatch\\)"):
        read_version(staged.path)
    (staged.path / target).unlink()
    assert verify_shards(staged.path, staged.manifest)[0].problem == "missing"
