"""Publish and read: bounded zstd shards, a complete manifest, a reproducible dataset hash."""

from __future__ import annotations

import hashlib
import json
import random

import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl

from pipeline.config import PublishConfig, RunConfig, SourceDeclaration, config_hash
from pipeline.core.errors import DataError
from pipeline.core.schema import PUBLISHED_SCHEMA
from pipeline.ingest.stage import ingest
from pipeline.publish import stage as publish_stage
from pipeline.publish.reader import read_version, verify_shards
from pipeline.publish.stage import plan_shards, publish
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


def test_the_shard_plan_from_sorted_ranges_of_ids_is_the_plan_of_every_id_at_once(
    tmp_path, sms_spam, monkeypatch
):
    draw = random.Random(7)
    hexed = [f"{draw.getrandbits(128):032x}" for _ in range(500)]
    other = ["a", "a0", "b", "zz", "é", "0", "00", *(f"r{n}" for n in range(40))]  # not digests
    repeated = ["m"] * 60  # equal bounds: empty ranges between them
    ids = pl.DataFrame(
        {
            "record_id": hexed + other + repeated,
            "split": draw.choices(["train", "test"], k=547) + ["train"] * 60,
        }
    )
    config = PublishConfig(shard_rows=30)
    whole = plan_shards(ids, config, tmp_path / "whole")
    monkeypatch.setattr(publish_stage, "PLAN_PART_ROWS", 17)  # 30 ranges of train's ids
    ranged = plan_shards(ids.sample(fraction=1.0, shuffle=True, seed=3), config, tmp_path / "r")
    assert ranged == whole
    for name in ("train", "test"):
        mine = ids.filter(pl.col("split") == name)["record_id"].sort()
        joined = "\n".join(mine.to_list()).encode()
        assert whole.membership[name] == hashlib.sha256(joined).hexdigest()
        assert whole.starts[name] == mine.gather_every(30).to_list()
    assert whole.counts == {
        "train": ids.filter(pl.col("split") == "train").height,
        "validation": 0,
        "test": ids.filter(pl.col("split") == "test").height,
    }
    assert not (tmp_path / "r").exists()  # the ranges are removed
    # and a whole version: the same hash
    default = publish_sms(tmp_path / "one", sms_spam)
    monkeypatch.setattr(publish_stage, "PLAN_PART_ROWS", 40)
    assert publish_sms(tmp_path / "two", sms_spam).dataset_hash == default.dataset_hash


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
