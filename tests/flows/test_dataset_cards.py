"""Dataset cards of a real published version: one `thresher run` over SMS messages with
planted secrets, an e-mail address and a research-only source, then the Croissant card (read
back by mlcroissant with the network blocked) and the datasheet checked against the manifest
and the ledger."""

from __future__ import annotations

import json
import random
import socket
from collections import Counter

import polars as pl
import pytest
import typer
from credential_factory import secret_sample
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project
from typer.testing import CliRunner

from data_catalog.catalog import Catalog
from flows.card_cli import card
from flows.cli import app
from flows.report import report_folder
from pipeline.config import SPLITS
from pipeline.core import reasons
from pipeline.text.secrets import SECRET_TYPES

runner = CliRunner()
PLANTED_EMAIL = "jane.doe.cards@example.org"
RESEARCH_ROWS = 10
RAI_FIELDS = (
    "rai:dataCollection",
    "rai:dataCollectionType",
    "rai:personalSensitiveInformation",
    "rai:dataLimitations",
    "rai:dataBiases",
    "rai:dataUseCases",
    "rai:dataPreprocessingProtocol",
    "rai:dataReleaseMaintenancePlan",
)


@pytest.fixture(scope="module")
def published(tmp_path_factory, sms_spam, prefect_server):
    """(catalog, version, planted secrets by type) after one real run."""
    root = tmp_path_factory.mktemp("cards")
    rng = random.Random(5)
    secrets, planted = {}, []
    for number, kind in enumerate(SECRET_TYPES[:6]):
        sample = secret_sample(kind, rng)
        secrets[kind] = sample.value
        base = sms_rows(sms_spam, 1000 + number, 1001 + number)[0]
        planted.append({**base, "id": f"planted-{kind}", "text": f"{base['text']}\n{sample.text}"})
    mail = sms_rows(sms_spam, 1100, 1101)[0]
    planted.append({**mail, "id": "mail", "text": f"Write to {PLANTED_EMAIL} about the tickets"})
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 300))
    write_jsonl(root / "data" / "sms-planted.jsonl", planted)
    write_jsonl(root / "research" / "sms.jsonl", sms_rows(sms_spam, 2000, 2000 + RESEARCH_ROWS))
    research = {
        **SMS_SOURCE,
        "name": "sms-research",
        "location": "research/*.jsonl",
        "license": "LicenseRef-research-only",
        "owner": "A research group",
    }
    config = write_project(
        root,
        [SMS_SOURCE, research],
        name="cards-set",
        quality={"language": {"allow": ["en"]}},
        publish={"shard_rows": 100},
    )
    result = runner.invoke(app, ["run", "--config", str(config), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    catalog = Catalog.open(root / "work")
    return catalog, catalog.version(json.loads(result.stdout)["dataset_hash"]), secrets


@pytest.fixture(scope="module")
def cards(published):
    """(Croissant card, datasheet, their paths) as the run wrote them into the report folder,
    away from the shards."""
    catalog, version, _ = published
    folder = report_folder(catalog.workdir, version.name, version.dataset_hash)
    paths = {"croissant": folder / "croissant.json", "datasheet": folder / "datasheet.md"}
    return json.loads(paths["croissant"].read_text()), paths["datasheet"].read_text(), paths


@pytest.fixture(scope="module")
def ledger(published) -> pl.DataFrame:
    catalog, version, _ = published
    return pl.read_parquet(catalog.version_path(version) / "ledger.parquet")


def published_ids(ledger: pl.DataFrame) -> dict[str, set[str]]:
    """{split: record ids} from the ledger's published events."""
    found: dict[str, set[str]] = {}
    for row in ledger.filter(pl.col("action") == reasons.PUBLISHED).iter_rows(named=True):
        found.setdefault(json.loads(row["evidence"])["split"], set()).add(row["record_id"])
    return found


def finding_types(ledger: pl.DataFrame, reason: str) -> Counter:
    """Records per finding type of one reason, read from the evidence row by row."""
    counted = Counter()
    for evidence in ledger.filter(pl.col("reason") == reason)["evidence"]:
        decoded = json.loads(evidence)
        counted.update(decoded.get("detail", decoded)["types"])
    return counted


def test_the_croissant_card_validates_offline_and_reads_every_published_record(
    cards, ledger, published, monkeypatch
):
    import mlcroissant

    def no_network(*_args, **_kwargs):
        raise AssertionError("mlcroissant tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    dataset = mlcroissant.Dataset(jsonld=cards[2]["croissant"])
    # the version is the dataset hash, not MAJOR.MINOR.PATCH: the one warning
    (warning,) = dataset.metadata.ctx.issues.warnings
    assert "Version doesn't follow MAJOR.MINOR.PATCH" in warning
    expected = published_ids(ledger)
    read = {
        split: {record[f"{split}/record_id"].decode() for record in dataset.records(split)}
        for split in expected
    }
    assert read == expected
    assert {split: len(ids) for split, ids in read.items()} == published[1].split_counts


def test_every_shard_in_the_card_has_the_manifest_sha256(cards, published):
    catalog, version, _ = published
    manifest = json.loads((catalog.version_path(version) / "manifest.json").read_text())
    card = cards[0]
    file_objects = [node for node in card["distribution"] if node["@type"] == "cr:FileObject"]
    assert {node["contentUrl"]: node["sha256"] for node in file_objects} == {
        shard["path"]: shard["sha256"] for shard in manifest["shards"]
    }
    assert len(file_objects) == len(manifest["shards"]) > 3
    file_sets = {
        node["@id"]: node["includes"]
        for node in card["distribution"]
        if node["@type"] == "cr:FileSet"
    }
    assert file_sets == {f"{split}-shards": f"data/{split}/*.parquet" for split in SPLITS}
    assert card["version"] == version.dataset_hash
    assert all(shard["sha256"] in cards[1] for shard in manifest["shards"])


def test_licenses_and_creators_are_those_of_the_sources_with_published_records(cards):
    card, sheet, _ = cards
    assert card["license"] == ["https://spdx.org/licenses/CC-BY-4.0.html"]
    assert card["creator"] == [
        {"@type": "sc:Organization", "name": "UCI Machine Learning Repository"}
    ]
    excluded = (
        "Source sms-research (license LicenseRef-research-only, class research-only) "
        f"contributed no records: license_not_allowed: {RESEARCH_ROWS}."
    )
    assert excluded in card["rai:dataLimitations"]
    assert (
        "| sms-research | A research group | LicenseRef-research-only | research-only "
        "| public-release | 0 |" in sheet
    )


def test_the_rai_fields_state_what_the_run_did(cards, ledger, published):
    card = cards[0]
    assert all(card[field] for field in RAI_FIELDS)
    assert all(
        statement
        for field in RAI_FIELDS
        if isinstance(card[field], list)
        for statement in card[field]
    )
    secrets = published[2]
    by_type = ", ".join(f"{kind}: 1" for kind in sorted(secrets))
    sensitive = card["rai:personalSensitiveInformation"]
    assert f"are quarantined: {len(secrets)} record(s) quarantined ({by_type})." in sensitive[0]
    redacted = finding_types(ledger, reasons.PERSONAL_DATA_REDACTED)
    assert redacted["email"] >= 1
    assert sensitive[1] == (
        "Personal data replaced in place (email by `<EMAIL>`, phone by `<PHONE>`): "
        f"{ledger.filter(pl.col('reason') == reasons.PERSONAL_DATA_REDACTED).height} record(s) ("
        + ", ".join(
            f"{kind}: {n}" for kind, n in sorted(redacted.items(), key=lambda i: (-i[1], i[0]))
        )
        + ")."
    )
    languages = ledger.filter(pl.col("reason").is_in(reasons.LANGUAGE_REASONS)).height
    assert languages > 0
    assert card["rai:dataLimitations"][0].startswith(
        "Only text identified as en was kept (texts under 5 words are not judged); "
        f"{languages} record(s) in other or uncertain"
    )
    terminal = Counter(ledger.filter(pl.col("terminal"))["action"])
    assert card["rai:dataPreprocessingProtocol"][0].startswith(
        f"Every record ends with exactly one terminal ledger event: {sum(terminal.values())} in "
        f"= {terminal['published']} published + {terminal['dropped']} dropped + "
        f"{terminal['quarantined']} quarantined."
    )
    excluded = f"govern: {RESEARCH_ROWS} record(s) dropped (license_not_allowed)"
    assert excluded in card["rai:dataPreprocessingProtocol"]


def test_no_planted_secret_or_address_reaches_either_card(cards, published):
    text = cards[2]["croissant"].read_text() + cards[2]["datasheet"].read_text()
    secrets = published[2]
    leaked = [
        kind
        for kind, value in secrets.items()
        for start in range(len(value) // 3, max(len(value) // 3 + 1, len(value) - 11))
        if value[start : start + 12] in text
    ]
    assert leaked == []
    assert PLANTED_EMAIL not in text


def test_the_datasheet_states_the_figures_of_the_croissant_card(cards, published):
    card, sheet, _ = cards
    for field in RAI_FIELDS:
        statements = card[field] if isinstance(card[field], list) else [card[field]]
        assert all(statement in sheet for statement in statements), field
    _, version, _ = published
    for split, rows in version.split_counts.items():
        assert f"| {split} | {rows} |" in sheet
    assert card["description"] in sheet
    assert f"dataset hash: `{version.dataset_hash}`" in sheet
    for heading in ("Motivation", "Composition", "Collection process", "Uses", "Distribution"):
        assert f"\n## {heading}" in sheet
    assert "\n## Preprocessing, cleaning and labeling" in sheet and "\n## Maintenance" in sheet


def test_card_command_writes_both_cards_to_the_reports_folder(published, cards):
    catalog, version, _ = published
    command = typer.Typer()
    command.command()(card)
    shown = runner.invoke(
        command, [version.dataset_hash[:12], "-w", str(catalog.workdir), "--json"]
    )
    assert shown.exit_code == 0, shown.stderr
    folder = catalog.workdir / "reports" / "cards-set" / version.dataset_hash
    assert json.loads(shown.stdout) == {
        "dataset_hash": version.dataset_hash,
        "croissant": str(folder / "croissant.json"),
        "datasheet": str(folder / "datasheet.md"),
    }
    # the same cards as written beside the shards: nothing in them depends on where or when
    assert [(folder / path.name).read_text() for path in cards[2].values()] == [
        path.read_text() for path in cards[2].values()
    ]
    plain = runner.invoke(command, [version.dataset_hash, "-w", str(catalog.workdir)])
    assert plain.stdout.splitlines() == [
        str(folder / "croissant.json"),
        str(folder / "datasheet.md"),
    ]
    missing = runner.invoke(command, ["0000", "-w", str(catalog.workdir)])
    assert missing.exit_code == 2 and "no version '0000'" in missing.stderr
