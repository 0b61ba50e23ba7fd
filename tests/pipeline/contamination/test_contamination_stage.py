"""The contamination stage on real SMS messages split as a run splits them, with training
records that copy test messages: checked batch by batch (`runner.part_rows` records at a
time), it gives the answer of one batch."""

from __future__ import annotations

import polars as pl
from helpers import SMS_SOURCE, sms_rows, write_jsonl
from polars.testing import assert_frame_equal

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.contamination.stage import build_index, check, contamination
from pipeline.ingest.stage import ingest
from pipeline.registry import STAGES
from pipeline.split.stage import split
from pipeline.stage import RunContext


def split_records(tmp_path, sms_spam) -> pl.DataFrame:
    """400 SMS split by the default rule; the first 12 training records copy a test
    message, every third with a few words added."""
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 400))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))]
    cfg = RunConfig(name="c", workdir=str(tmp_path / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    frame = split(ingest(sources, ctx, tmp_path / "in").frame, cfg.split, ctx).frame.collect()
    test = frame.filter(pl.col("split") == "test").sort("record_id").head(12)
    train = frame.filter(pl.col("split") == "train").sort("record_id").head(12)
    copies = train.with_columns(
        pl.Series("text", test["text"])
        + pl.when(pl.int_range(12) % 3 == 0)
        .then(pl.lit(" see you at the station tonight"))
        .otherwise(pl.lit("")),
        pl.Series("content_hash", test["content_hash"]),
    )
    others = frame.join(copies.select("record_id"), on="record_id", how="anti")
    return pl.concat([others, copies.select(frame.columns)])


def checked(tmp_path, records: pl.DataFrame, part_rows: int):
    cfg = RunConfig(name="c", sources=[], runner={"part_rows": part_rows})
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    return contamination(records.lazy(), cfg.contamination, ctx)


def test_batches_give_the_answer_of_one(tmp_path, sms_spam):
    records = split_records(tmp_path, sms_spam)
    whole = checked(tmp_path / "whole", records, part_rows=1_000_000)
    batched = checked(tmp_path / "batched", records, part_rows=23)
    assert whole.stats["checked"] == records.filter(pl.col("split") != "test").height
    figures = whole.stats["eval_sets"]["test"]
    assert figures["records"] >= 12 and whole.stats["dropped"] >= 12
    assert figures["examples"] == sorted(figures["examples"])
    assert_frame_equal(batched.events, whole.events)
    assert_frame_equal(batched.frame.collect(), whole.frame.collect())
    drop = ("seconds",)
    assert {k: v for k, v in batched.stats.items() if k not in drop} == {
        k: v for k, v in whole.stats.items() if k not in drop
    }
    assert not list((tmp_path / "batched").iterdir())  # the index and work files are gone


def test_parts_checked_against_one_index_give_the_answer_of_one_call(tmp_path, sms_spam):
    """Contamination runs part by part (an Indexed stage): the test split's and protected
    sets' indexes built once from the whole input, each part checked against them; the parts'
    records, events and review items together, and their merged stats, are one call's."""
    records = split_records(tmp_path, sms_spam).sample(fraction=1.0, shuffle=True, seed=5)
    # copies drop (MinHash 1.0); copies with words added wait for a reviewer (exact, n-grams)
    methods = {
        "exact": "quarantine",
        "ngram": {"action": "quarantine"},
        "minhash": {"threshold": 0.99, "action": "drop"},
    }
    cfg = RunConfig(name="c", sources=[], contamination={"methods": methods})
    ctx = RunContext(run_id="r", run_dir=tmp_path / "run", config=cfg, config_hash=config_hash(cfg))
    whole = contamination(records.lazy(), cfg.contamination, ctx)

    index = tmp_path / "index"
    index.mkdir()
    build_index(records.lazy(), cfg.contamination, ctx, index)
    parts = [
        check(records.lazy().slice(start, 61), cfg.contamination, ctx, index)
        for start in range(0, records.height, 61)
    ]
    assert_frame_equal(pl.concat(p.frame.collect() for p in parts), whole.frame.collect())
    events = pl.concat(p.events for p in parts)
    assert_frame_equal(events.sort("record_id"), whole.events.sort("record_id"))
    items = [p.review_items for p in parts if p.review_items is not None]
    assert_frame_equal(pl.concat(items).sort("record_id"), whole.review_items.sort("record_id"))
    merged = STAGES["contamination"].merge_stats([p.stats for p in parts])
    drop = ("seconds",)
    assert {k: v for k, v in merged.items() if k not in drop} == {
        k: v for k, v in whole.stats.items() if k not in drop
    }
    figures = whole.stats["eval_sets"]["test"]
    assert whole.stats["dropped"] >= 8 and whole.stats["quarantined"] >= 4
    assert figures["records"] >= 12 and 0 < figures["contaminated_items"] <= 12
    assert set(figures["by_method"]) >= {"exact", "ngram"}
    flagged = {p: set(part.events["record_id"]) for p, part in enumerate(parts)}
    assert sum(1 for found in flagged.values() if found) > 1  # the matches span parts


def test_part_threads_share_one_unpickled_index_and_free_it(tmp_path, sms_spam, monkeypatch):
    """The local runner checks parts on threads of one process: they read one copy of the
    indexes (each unpickled its own before), which goes when no part holds it."""
    import gc
    import pickle
    import threading

    from pipeline.contamination import stage

    records = split_records(tmp_path, sms_spam)
    cfg = RunConfig(name="c", sources=[])
    ctx = RunContext(run_id="r", run_dir=tmp_path / "run", config=cfg, config_hash=config_hash(cfg))
    index = tmp_path / "index"
    index.mkdir()
    build_index(records.lazy(), cfg.contamination, ctx, index)
    loads, real_loads = [], pickle.loads
    monkeypatch.setattr(stage.pickle, "loads", lambda data: loads.append(1) or real_loads(data))
    both_loaded, seen = threading.Barrier(2), []

    def part() -> None:
        seen.append(stage._load_targets(index))
        both_loaded.wait(timeout=30)  # the two parts hold the indexes at once

    threads = [threading.Thread(target=part) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and seen[0] is seen[1]
    assert [name for name, _ in seen[0]] == ["test"]
    seen.clear()
    gc.collect()
    assert not stage._LOADED  # freed with its last user
    stage._load_targets(index)
    assert len(loads) == 2
