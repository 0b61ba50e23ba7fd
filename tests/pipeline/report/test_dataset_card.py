"""The dataset cards rendered from facts: what each statement derives from them. A real
version's cards are checked end to end in tests/flows/test_dataset_cards.py."""

from __future__ import annotations

import copy

import mlcroissant

from pipeline.config import PolicyConfig
from pipeline.report.dataset_card import CROISSANT_CONTEXT, croissant, datasheet

HASH = "4f" * 32


def step(stage: str, action: str, reason: str | None, records: int) -> dict:
    return {"stage": stage, "action": action, "reason": reason, "records": records}


def finding(reason: str, action: str, kind: str, records: int) -> dict:
    return {"reason": reason, "action": action, "type": kind, "records": records}


FACTS = {
    "name": "support-intents",
    "dataset_hash": HASH,
    "parent_version": None,
    "created_at": "2025-03-01T10:00:00+00:00",
    "run_id": "run-1",
    "code_version": "0.1.0",
    "config_hash": "c0" * 32,
    "status": "published",
    "status_reason": None,
    "url": None,
    "columns": [
        {"name": "record_id", "type": "String"},
        {"name": "timestamp", "type": "Datetime(time_unit='us', time_zone='UTC')"},
        {"name": "votes", "type": "UInt32"},
        {"name": "score", "type": "Float64"},
        {"name": "resolved", "type": "Boolean"},
        {"name": "split", "type": "String"},
    ],
    "split_counts": {"train": 1500, "validation": 400, "test": 0},
    "shards": [
        {
            "split": "train",
            "path": "data/train/part-00000.parquet",
            "rows": 1500,
            "bytes": 90_000,
            "sha256": "a1" * 32,
        },
        {
            "split": "validation",
            "path": "data/validation/part-00000.parquet",
            "rows": 400,
            "bytes": 20_000,
            "sha256": "b2" * 32,
        },
    ],
    "sources": [
        {
            "name": "tickets",
            "license": "MIT",
            "license_class": "permissive",
            "consent": "contract",
            "owner": "Support team",
            "records": 1200,
            "removal_contact": "privacy@example.com",
            "format": "jsonl",
            "description": "Support tickets, 2023.",
            "collected": "2024-01-05",
            "rights_basis": None,
            "allowed_uses": [],
        },
        {
            "name": "forum",
            "license": "MIT OR Apache-2.0",
            "license_class": "permissive",
            "consent": "public-release",
            "owner": "Community forum",
            "records": 700,
            "removal_contact": None,
            "format": "csv",
            "description": None,
            "collected": None,
            "rights_basis": None,
            "allowed_uses": ["training", "research"],
        },
        {
            "name": "papers",
            "license": "LicenseRef-research-only",
            "license_class": "research-only",
            "consent": "public-release",
            "owner": "A lab",
            "records": 0,
            "removal_contact": None,
            "format": "text",
            "description": None,
            "collected": None,
            "rights_basis": None,
            "allowed_uses": [],
        },
    ],
    "split": {"strategy": "group_time", "cutoffs": None, "locked_test": "9e" * 32},
    "protected_eval_sets": [{"name": "humaneval", "items": 164}],
    "policy": PolicyConfig().model_dump(mode="json"),
    "language": {"allow": None, "min_confidence": 0.5, "min_words": 5},
    "dedup": {"exact": True, "minhash": 0.8, "semantic": 0.92},
    "ledger": {
        "records_in": 2000,
        "outcomes": {"published": 1900, "dropped": 90, "quarantined": 10},
        "steps": [
            step("govern", "edited", "personal_data_redacted", 42),
            step("govern", "dropped", "license_not_allowed", 60),
            step("govern", "quarantined", "personal_data", 10),
            step("exact_dedup", "dropped", "exact_duplicate", 30),
            step("publish", "published", None, 1900),
        ],
        "by_source": {
            "forum": {"dropped": {"exact_duplicate": 30}, "published": {"published": 700}},
            "papers": {"dropped": {"license_not_allowed": 60}},
            "tickets": {"published": {"published": 1200}, "quarantined": {"personal_data": 10}},
        },
        "findings": [  # a record may hold several types: 42 records, 45 findings
            finding("personal_data", "quarantined", "credit_card", 10),
            finding("personal_data_redacted", "edited", "email", 40),
            finding("personal_data_redacted", "edited", "phone", 5),
        ],
        "languages_dropped": {},
    },
    "published": {
        "labels": {"train": {"billing": 1200, "login": 300}},
        "first_timestamp": "2023-01-02T00:00:00+00:00",
        "last_timestamp": "2023-12-30T00:00:00+00:00",
        "groups": 321,
    },
}


def facts(**changes) -> dict:
    return {**copy.deepcopy(FACTS), **changes}


def test_the_context_is_the_standard_croissant_context():
    standard = mlcroissant.Metadata(name="any", conforms_to="http://mlcommons.org/croissant/1.0")
    assert standard.to_json()["@context"] == CROISSANT_CONTEXT


def test_a_hand_made_card_validates_with_mlcroissant():
    card = croissant(facts())
    metadata = mlcroissant.Dataset(jsonld=card).metadata
    assert metadata.name == "support-intents"
    assert [record_set.name for record_set in metadata.record_sets] == ["train", "validation"]


def test_licenses_and_creators_come_from_the_sources_with_records():
    card = croissant(facts())
    assert card["license"] == ["https://spdx.org/licenses/MIT.html", "MIT OR Apache-2.0"]
    assert [creator["name"] for creator in card["creator"]] == ["Support team", "Community forum"]
    assert "author = {{Support team} and {Community forum}}" in card["citeAs"]


def test_fields_map_polars_types_and_an_empty_split_has_no_files_or_record_set():
    card = croissant(facts())
    assert [node["@id"] for node in card["distribution"]] == [
        "data/train/part-00000.parquet",
        "data/validation/part-00000.parquet",
        "train-shards",
        "validation-shards",
    ]
    types = {field["name"]: field["dataType"] for field in card["recordSet"][0]["field"]}
    assert types == {
        "record_id": "sc:Text",
        "timestamp": "sc:DateTime",
        "votes": "sc:Integer",
        "score": "sc:Float",
        "resolved": "sc:Boolean",
        "split": "sc:Text",
    }
    assert card["rai:dataCollectionTimeframe"] == [
        "2023-01-02T00:00:00+00:00",
        "2023-12-30T00:00:00+00:00",
    ]


def test_limitations_follow_from_the_facts():
    limitations = croissant(facts())["rai:dataLimitations"]
    assert limitations == [
        "Languages were not filtered: text in any language may appear.",
        "Source papers (license LicenseRef-research-only, class research-only) contributed "
        "no records: license_not_allowed: 60.",
        "10 record(s) wait in the review queue (personal_data: 10) and are not in this version.",
        "The validation split holds only 400 records: figures measured on it are noisy.",
        "The test split is empty.",
        "Deduplication removed exact duplicates and near duplicates (MinHash Jaccard >= 0.8) "
        "and paraphrases (embedding cosine >= 0.92); less similar duplicates may remain.",
    ]
    withdrawn = croissant(facts(status="withdrawn", status_reason="consent revoked"))
    assert withdrawn["rai:dataLimitations"][-1] == (
        "This version was withdrawn (consent revoked): do not use it."
    )
    assert withdrawn["rai:dataReleaseMaintenancePlan"].endswith(
        "Removal requests: tickets: privacy@example.com. This version was withdrawn: "
        "consent revoked."
    )


def test_sensitive_information_states_each_policy_action_with_its_counts():
    sensitive = croissant(facts())["rai:personalSensitiveInformation"]
    assert sensitive == [
        "Secrets (credentials, keys, tokens) were searched for in the fields text, metadata, "
        "group, label; records with one are quarantined: none found. No secret is published, "
        "and no secret value or part of one is in this card.",
        "Personal data replaced in place (email by `<EMAIL>`, phone by `<PHONE>`): 42 "
        "record(s) (email: 40, phone: 5).",
        "Records with personal data quarantined (credit_card, iban): 10 record(s) "
        "(credit_card: 10).",
        "Personal data kept as published (policy keep): ip_address; such values may appear "
        "in the text.",
    ]
    license_first = facts()
    license_first["ledger"]["secrets_elsewhere"] = {"github_token": 3, "jwt": 1}
    assert croissant(license_first)["rai:personalSensitiveInformation"][0] == (
        "Secrets (credentials, keys, tokens) were searched for in the fields text, metadata, "
        "group, label; records with one are quarantined: none otherwise; found too in records "
        "dropped or quarantined for another reason first (github_token: 3, jwt: 1). No secret "
        "is published, and no secret value or part of one is in this card."
    )


def test_uses_and_biases_name_locks_eval_sets_license_terms_and_shares():
    card = croissant(facts())
    assert card["rai:dataUseCases"][1:] == [
        "Splits: train: model fitting; validation: model selection, tuning and early "
        "stopping. The splits are made by group_time, so no group or time period spans two "
        "of them.",
        f"The test split keeps the locked test set of version {'9e' * 32}.",
        "Protected evaluation sets (records overlapping them were removed): humaneval (164 items).",
        "tickets (MIT, permissive): keep the license notice.",
        "forum (MIT OR Apache-2.0, permissive): keep the license notice; allowed uses: "
        "training, research.",
    ]
    assert card["rai:dataBiases"] == [
        "Source mix: tickets 1200 (63.2%), forum 700 (36.8%): the records reflect these "
        "sources and their authors, not a general population.",
        "Records held back by the policy and filters, by source: tickets 10 of 1210, forum 30 "
        "of 730, papers 60 of 60; filters that hit sources unevenly shift the mix.",
        "Labels in train: billing 1200 (80.0%), login 300 (20.0%).",
        "Records are dated from 2023-01-02T00:00:00+00:00 to 2023-12-30T00:00:00+00:00; 321 "
        "distinct groups.",
    ]


def test_the_datasheet_holds_every_statement_and_table_of_the_card():
    card, sheet = croissant(facts()), datasheet(facts())
    rai = [
        value for key, value in card.items() if key.startswith("rai:") and "Timeframe" not in key
    ]
    for statement in [
        item for value in rai for item in (value if isinstance(value, list) else [value])
    ]:
        assert statement in sheet
    assert "| train | 1500 | 1 |\n| validation | 400 | 1 |\n| test | 0 | 0 |" in sheet
    assert f"| `data/train/part-00000.parquet` | train | 1500 | 90000 | `{'a1' * 32}` |" in sheet
    assert (
        "| papers | A lab | LicenseRef-research-only | research-only | public-release | 0 |"
        in sheet
    )
    assert "Licenses: tickets: MIT; forum: MIT OR Apache-2.0." in sheet
    assert "| tickets | quarantined | personal_data | 10 |" in sheet


def test_an_empty_version_gets_a_valid_card_that_says_so():
    empty = facts(
        split_counts={"train": 0, "validation": 0, "test": 0},
        shards=[],
        sources=[{**source, "records": 0} for source in FACTS["sources"]],
        published=None,
    )
    card = croissant(empty)
    mlcroissant.Dataset(jsonld=card)
    assert (card["license"], card["creator"], card["distribution"], card["recordSet"]) == (
        [],
        [],
        [],
        [],
    )
    assert card["description"].startswith("0 text records from 0 source(s), split into train (0)")
    assert [s for s in card["rai:dataLimitations"] if s.startswith("The ")] == [
        "The train split is empty.",
        "The validation split is empty.",
        "The test split is empty.",
    ]
    assert "Source mix" not in datasheet(empty)
