"""Published shards are plain Parquet: polars, DuckDB and Hugging Face `datasets` read them
with no Thresher code, exactly as the README shows."""

from __future__ import annotations

import duckdb
import polars as pl
from helpers import SMS_SOURCE, sms_rows, write_jsonl

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.ingest.stage import ingest
from pipeline.publish.stage import publish
from pipeline.split.stage import split
from pipeline.stage import RunContext


def published_version(root, sms_spam):
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 400))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(root))]
    cfg = RunConfig(name="sms", sources=sources)
    ctx = RunContext(run_id="r", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    (root / "v").mkdir()
    return publish(
        split(ingest(sources, ctx, root / "in").frame, cfg.split, ctx).frame,
        cfg.publish,
        ctx,
        root / "v",
        extra={},
    )


def test_polars_duckdb_and_datasets_read_the_same_rows(tmp_path, sms_spam, monkeypatch):
    staged = published_version(tmp_path, sms_spam)
    train_rows = staged.manifest["split_counts"]["train"]
    pattern = str(tmp_path / "v" / "data" / "train" / "*.parquet")

    from_polars = pl.read_parquet(pattern)
    from_duckdb = duckdb.sql(
        f"select record_id, text, label from read_parquet('{pattern}') order by record_id"
    ).pl()
    assert from_polars.height == from_duckdb.height == train_rows
    assert (
        from_duckdb["record_id"].to_list() == from_polars.sort("record_id")["record_id"].to_list()
    )

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    dataset = load_dataset("parquet", data_files={"train": pattern}, cache_dir=str(tmp_path / "hf"))
    assert dataset["train"].num_rows == train_rows
    assert set(dataset["train"].column_names) >= {"record_id", "text", "label", "split", "license"}
