"""The stage contract holds for every records stage of the registry, run in order on
thousands of edited near-copies of real text: it returns StageResult, its events name it,
and it changes no column but those it says it adds."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import write_jsonl
from near_copies import near_copy_rows

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.ingest.stage import ingest
from pipeline.registry import CURATE_STAGES, STAGES
from pipeline.stage import RunContext, StageResult, read_by_parts

FIELDS = {"text": "text", "id": "id", "label": "label", "group": "user", "timestamp": "sent"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, sms_spam) -> tuple[RunConfig, RunContext, pl.DataFrame]:
    root = tmp_path_factory.mktemp("stages")
    sources = []
    for name, rows in near_copy_rows(sms_spam).items():
        write_jsonl(root / "data" / f"{name}.jsonl", rows)
        sources.append(
            SourceDeclaration(
                name=name, location=f"data/{name}.jsonl", format="jsonl", fields=FIELDS,
                license="CC-BY-4.0", consent="public-release", owner="tests", base_dir=str(root),
            )
        )  # fmt: skip
    cfg = RunConfig(
        name="stages", workdir=str(root / "work"), sources=sources, augment={"fraction": 0.02}
    )
    ctx = RunContext(run_id="r", run_dir=root / "run", config=cfg, config_hash=config_hash(cfg))
    return cfg, ctx, ingest(sources, ctx, root / "ingested").frame.collect()


def test_the_registry_lists_every_stage_once_in_flow_order():
    names = [stage.name for stage in CURATE_STAGES]
    assert names[0] == "ingest" and names[-1] == "publish" and len(set(names)) == len(names)
    assert [s.kind for s in CURATE_STAGES] == ["source", *["records"] * (len(names) - 2), "sink"]
    assert sorted(s.ledger_part for s in CURATE_STAGES) == [s.ledger_part for s in CURATE_STAGES]
    for stage in CURATE_STAGES:
        assert callable(stage.function)
    with pytest.raises(TypeError, match="the ingest stage is the source"):
        STAGES["ingest"](pl.LazyFrame(), RunConfig(name="x", sources=[]), None)


def test_every_records_stage_keeps_the_contract(run):
    cfg, ctx, frame = run
    changed_somewhere: set[str] = set()
    new_columns, new_records = {}, {}
    for stage in (s for s in CURATE_STAGES if s.kind == "records"):
        result = stage(frame.lazy(), cfg, ctx)
        assert isinstance(result, StageResult), stage.name
        out = result.frame.collect()
        assert set(result.events["stage"].unique()) <= {stage.name}, stage.name
        assert set(out.columns) - set(frame.columns) <= set(stage.adds), stage.name
        new_columns[stage.name] = set(out.columns) - set(frame.columns)
        new_records[stage.name] = out.join(frame, on="record_id", how="anti")
        both = out.join(frame, on="record_id", suffix="_before")
        assert both.height > 0, stage.name
        for column in frame.columns:
            if column == "record_id":
                continue
            same = both[column].eq_missing(both[f"{column}_before"]).all()
            assert same or column in stage.adds, f"{stage.name} changed {column}"
            if not same:
                changed_somewhere.add(f"{stage.name}.{column}")
        frame = out
    # the fixture makes the stages that rewrite rewrite: phone numbers redacted, clusters
    # merged, the new columns added, variants generated (with augmented_from set)
    assert {"govern.text", "govern.content_hash", "near_dedup.cluster_id"} <= changed_somewhere
    assert new_columns["exact_dedup"] == {"cluster_id"} and new_columns["split"] == {"split"}
    generated = {name: records.height for name, records in new_records.items() if records.height}
    assert list(generated) == ["augment"]
    assert new_records["augment"]["augmented_from"].is_not_null().all()


def test_read_by_parts_gives_what_one_query_over_every_row_gives(tmp_path):
    rows = pl.DataFrame({"record_id": [f"r{i:03d}" for i in range(250)], "n": range(250)})
    for k, piece in enumerate(rows.iter_slices(90)):  # parts cross file boundaries
        piece.write_parquet(tmp_path / f"part-{k}.parquet")
    records = pl.scan_parquet(tmp_path / "*.parquet")

    def query(frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.filter(pl.col("n") % 7 == 0).select("record_id")

    read = read_by_parts(records, 40, query)
    assert read.equals(query(records).collect()) and read.height == 36
    assert read_by_parts(records.clear(), 40, query).height == 0
