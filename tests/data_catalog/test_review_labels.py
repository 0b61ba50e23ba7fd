"""Labels in the review queue: migration 0006, approving a label conflict with a label,
labelling without deciding, Cohen's kappa between reviewers by value, and the CLI."""

from __future__ import annotations

import json

import polars as pl
import pytest
from alembic import command
from alembic.config import Config
from helpers import SMS_SOURCE, sms_rows, thresher, write_jsonl
from sqlalchemy import inspect, text

from data_catalog import review_queue
from data_catalog.catalog import MIGRATIONS, Catalog
from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.dedup.exact import exact_dedup
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext


def conflict_item(n: int, labels=("spam", "spam", "ham")) -> dict:
    members = [
        {"record_id": f"r{n}-{k}", "source": "sms", "label": label}
        for k, label in enumerate(labels)
    ]
    evidence = {"members": members, "representative": f"r{n}-0", "method": "exact"}
    return {
        "record_id": f"r{n}-0", "source": "sms", "source_content_hash": f"h{n}",
        "review_hash": f"v{n}", "group_hash": None, "reason": reasons.LABEL_CONFLICT,
        "evidence": json.dumps(evidence), "text": f"message {n}", "metadata": None,
        "group": None, "label": labels[0],
    }  # fmt: skip


def queued(catalog: Catalog, n: int, other: bool = False) -> list[int]:
    """`n` label-conflict items (and one secret_detected item, with `other`); their ids."""
    rows = [conflict_item(i) for i in range(n)]
    if other:
        rows.append({**conflict_item(n), "reason": reasons.SECRET_DETECTED, "evidence": "{}"})
    review_queue.enqueue(catalog, pl.DataFrame(rows, schema=REVIEW_ITEM_SCHEMA), "ds", "run-1")
    return [entry["id"] for entry in review_queue.items(catalog)]


def alembic(catalog: Catalog, verb, target: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with catalog.engine.begin() as connection:
        config.attributes["connection"] = connection
        verb(config, target)


def columns(catalog: Catalog, table: str) -> set[str]:
    return {column["name"] for column in inspect(catalog.engine).get_columns(table)}


def test_migrations_0006_and_0007_add_labels_and_reveals_and_go_back(tmp_path):
    catalog = Catalog.open(tmp_path)
    assert "adjudicated_label" in columns(catalog, "review_items")
    assert "label" in columns(catalog, "review_decisions")
    assert columns(catalog, "review_labels") == {
        "id", "item_id", "reviewer", "label", "labelled_at",
    }  # fmt: skip
    with catalog.engine.connect() as connection:
        head = connection.execute(text("select version_num from alembic_version")).scalar()
    assert head == "0008_exports"
    assert columns(catalog, "review_reveals") == {"id", "item_id", "reviewer", "revealed_at"}
    alembic(catalog, command.downgrade, "0006_labels")  # 0007 goes back: no reveals table
    assert "review_reveals" not in inspect(catalog.engine).get_table_names()
    assert "review_labels" in inspect(catalog.engine).get_table_names()
    alembic(catalog, command.downgrade, "0005_failures")
    assert "review_labels" not in inspect(catalog.engine).get_table_names()
    assert "adjudicated_label" not in columns(catalog, "review_items")
    alembic(catalog, command.upgrade, "head")
    assert "adjudicated_label" in columns(catalog, "review_items")
    assert "review_reveals" in inspect(catalog.engine).get_table_names()


def test_approving_a_label_conflict_takes_a_label_and_nothing_else_does(tmp_path):
    catalog = Catalog.open(tmp_path)
    first, second, secret = queued(catalog, 2, other=True)
    with pytest.raises(DataError) as missing:
        review_queue.decide(catalog, first, "approved", "ana", None)
    assert str(missing.value) == (
        f"item {first} is a label conflict: approving it publishes its kept record with the "
        "label you choose; pass --label LABEL (its members are labelled spam ×2 (sms), "
        f"ham ×1 (sms); see `thresher review show {first}`)"
    )
    with pytest.raises(DataError, match="a rejection takes no label"):
        review_queue.decide(catalog, first, "rejected", "ana", None, "ham")
    with pytest.raises(DataError, match="a secret_detected item takes no label"):
        review_queue.decide(catalog, secret, "approved", "ana", None, "ham")
    with pytest.raises(DataError, match="a label cannot be empty"):
        review_queue.decide(catalog, first, "approved", "ana", None, "  ")
    assert {entry["status"] for entry in review_queue.items(catalog)} == {"pending"}

    assert review_queue.decide(catalog, first, "approved", "ana", "read it", " ham ") == (
        review_queue.Decided(first, "approved")
    )
    assert review_queue.item(catalog, first)["adjudicated_label"] == "ham"
    assert [(d["decision"], d["label"]) for d in review_queue.history(catalog, first)] == [
        ("approved", "ham")
    ]
    assert [(r["reviewer"], r["label"]) for r in review_queue.labels(catalog, first)] == [
        ("ana", "ham")
    ]
    late = review_queue.decide(catalog, first, "approved", "bo", None, "spam")
    assert isinstance(late, review_queue.Conflict)
    assert review_queue.item(catalog, first)["adjudicated_label"] == "ham"
    review_queue.decide(catalog, second, "rejected", "bo", "both wrong")
    review_queue.decide(catalog, secret, "approved", "bo", "a test key")
    frame = review_queue.decisions_frame(catalog).sort("item_id")
    assert frame.select("item_id", "status", "label").rows() == [
        (first, "approved", "ham"),
        (second, "rejected", None),
        (secret, "approved", None),
    ]


def test_record_label_labels_without_deciding_and_replaces_its_own(tmp_path):
    catalog = Catalog.open(tmp_path)
    first, secret = queued(catalog, 1, other=True)
    review_queue.record_label(catalog, first, "bo", "spam")
    review_queue.record_label(catalog, first, "cy", "ham")
    review_queue.record_label(catalog, first, "bo", "ham")  # bo changed their mind
    assert [(r["reviewer"], r["label"]) for r in review_queue.labels(catalog, first)] == [
        ("bo", "ham"),
        ("cy", "ham"),
    ]
    assert review_queue.item(catalog, first)["status"] == "pending"
    review_queue.decide(catalog, first, "rejected", "dan", None)
    review_queue.record_label(catalog, first, "eve", "spam")  # also on a decided item
    assert len(review_queue.labels(catalog, first)) == 3
    with pytest.raises(DataError, match=f"item {secret} is a secret_detected item"):
        review_queue.record_label(catalog, secret, "bo", "ham")
    with pytest.raises(DataError, match="reviewer's name"):
        review_queue.record_label(catalog, first, " ", "ham")
    with pytest.raises(DataError, match="no review item 999"):
        review_queue.record_label(catalog, 999, "bo", "ham")


def test_cohens_kappa_for_every_pair_of_reviewers(tmp_path):
    catalog = Catalog.open(tmp_path)
    ids = queued(catalog, 10)
    ana = ["S", "S", "S", "S", "S", "S", "H", "H", "H", "H"]
    bo = ["S", "S", "S", "S", "H", "H", "S", "H", "H", "H"]
    cy = {4: "H", 5: "S", 6: "S", 7: "H"}  # items 5-8 only
    review_queue.decide(catalog, ids[0], "approved", "ana", None, "S")  # a decision labels too
    for k, item_id in enumerate(ids):
        if k:
            review_queue.record_label(catalog, item_id, "ana", ana[k])
        review_queue.record_label(catalog, item_id, "bo", bo[k])
        if k in cy:
            review_queue.record_label(catalog, item_id, "cy", cy[k])
    pairs = {tuple(p["reviewers"]): p for p in review_queue.agreement(catalog)}
    assert list(pairs) == [("ana", "bo"), ("ana", "cy"), ("bo", "cy")]
    # ana-bo, 10 items: alike on items 1-4 and 8-10: p_o = 7/10 = 0.7. ana: S 6, H 4; bo: S 5,
    # H 5: p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5. kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    # ana-cy, items 5-8: ana S S H H, cy H S S H: p_o = 2/4 = 0.5; p_e = 0.5 * 0.5 + 0.5 * 0.5
    # = 0.5; kappa = 0. bo-cy: bo H H S H, cy H S S H: p_o = 3/4; bo S 1, H 3; cy S 2, H 2:
    # p_e = 0.25 * 0.5 + 0.75 * 0.5 = 0.5; kappa = (0.75 - 0.5) / 0.5 = 0.5
    figures = {
        pair: (p["items"], p["agreed"], p["observed"], p["expected"], round(p["kappa"], 12))
        for pair, p in pairs.items()
    }
    assert figures == {
        ("ana", "bo"): (10, 7, 0.7, 0.5, 0.4),
        ("ana", "cy"): (4, 2, 0.5, 0.5, 0.0),
        ("bo", "cy"): (4, 3, 0.75, 0.5, 0.5),
    }
    assert review_queue.agreement(catalog, reason=reasons.SECRET_DETECTED) == []
    assert len(review_queue.agreement(catalog, reason=reasons.LABEL_CONFLICT)) == 3


def test_kappa_is_undefined_when_chance_agreement_is_certain(tmp_path):
    catalog = Catalog.open(tmp_path)
    for item_id in queued(catalog, 2):
        for reviewer in ("ana", "bo"):
            review_queue.record_label(catalog, item_id, reviewer, "spam")
    assert review_queue.agreement(catalog) == [
        {"reviewers": ["ana", "bo"], "items": 2, "agreed": 2, "observed": 1.0,
         "expected": 1.0, "kappa": None}
    ]  # fmt: skip


def test_cli_approves_a_real_conflict_with_a_label_and_reports_agreement(tmp_path, sms_spam):
    """A real SMS message and a copy with the other label: exact dedup queues the conflict,
    `review approve --label` settles it, and the next run publishes the chosen label."""
    (row,) = sms_rows(sms_spam, 0, 1)
    flipped = {"spam": "ham", "ham": "spam"}[row["label"]]
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", [row, {**row, "id": "copy", "label": flipped}])
    cfg = RunConfig(name="t", sources=[SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))])
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    frame = ingest(cfg.source_list, ctx, tmp_path / "in").frame.collect().lazy()
    first = exact_dedup(frame, cfg.dedup, ctx)
    workdir = tmp_path / "work"
    catalog = Catalog.open(workdir)
    review_queue.enqueue(catalog, first.review_items, "t", "r")
    (item_id,) = [entry["id"] for entry in review_queue.items(catalog)]

    refused = thresher(
        "review", "approve", item_id, "--reviewer", "ana", "--note", "n", "-w", workdir
    )
    assert refused.exit_code == 2 and "pass --label LABEL" in refused.stderr
    shown = thresher("review", "show", item_id, "-w", workdir).stdout
    assert "cluster members" in shown and shown.count(" sms ") == 2
    assert "ham ×1 (sms), spam ×1 (sms)" in shown  # by count, then label
    approved = thresher(
        "review", "approve", item_id, "--label", "spam", "--reviewer", "ana", "--note", "n",
        "-w", workdir, "--json",
    )  # fmt: skip
    assert approved.exit_code == 0, approved.stderr
    assert json.loads(approved.stdout) == {
        "item_id": item_id, "decided": True, "decision": "approved", "label": "spam",
    }  # fmt: skip
    none_yet = thresher("review", "agreement", "-w", workdir, "--json")
    assert (none_yet.exit_code, none_yet.stdout) == (0, "")
    assert "no two reviewers labelled a common item" in none_yet.stderr
    labelled = thresher(
        "review", "label", item_id, "--label", "ham", "--reviewer", "bo", "-w", workdir
    )
    assert labelled.exit_code == 0, labelled.stderr
    agreement = thresher("review", "agreement", "-w", workdir, "--json")
    assert agreement.exit_code == 0
    assert [json.loads(line) for line in agreement.stdout.splitlines()] == [
        {"reviewers": ["ana", "bo"], "items": 1, "agreed": 0, "observed": 0.0,
         "expected": 0.0, "kappa": 0.0}
    ]  # fmt: skip

    ctx = RunContext(
        run_id="r2", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg),
        review_decisions=review_queue.decisions_frame(catalog),
    )  # fmt: skip
    second = exact_dedup(frame, cfg.dedup, ctx)
    assert second.frame.collect()["label"].to_list() == ["spam"]
    assert second.stats["label_conflicts"]["adjudicated"] == 1
