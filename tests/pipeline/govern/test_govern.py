"""The governance stage: terms, secrets, personal data, approvals, rejections, deletions."""

from __future__ import annotations

import json
import random
import string

import polars as pl
import pytest
from helpers import write_jsonl

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.core import ledger
from pipeline.govern.stage import govern
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext
from pipeline.text.secret_tokens import base62_crc32

ALNUM = string.ascii_letters + string.digits


def github_token(seed: int = 7) -> str:
    """A classic personal access token in GitHub's documented shape (30 random characters and
    their checksum), made up at test time."""
    rng = random.Random(seed)
    body = "".join(rng.choice(ALNUM) for _ in range(30))
    return "ghp_" + body + base62_crc32(body)


def card_number() -> str:
    return "4111 1111 1111 1111"  # Visa's documented test number: passes the Luhn check


def source(name: str, **terms) -> dict:
    return {
        "name": name,
        "location": f"data/{name}.jsonl",
        "format": "jsonl",
        "fields": {"id": "id", "group": "user", "license": "license", "consent": "consent", "metadata": ["note"]},
        "license": "CC-BY-4.0",
        "consent": "explicit",
        "owner": "tests",
        **terms,
    }  # fmt: skip


def run_govern(tmp_path, rows: dict[str, list[dict]], policy=None, sources=None, **state):
    for name, records in rows.items():
        write_jsonl(tmp_path / "data" / f"{name}.jsonl", records)
    declared = [
        SourceDeclaration(**(sources or {}).get(name, source(name)), base_dir=str(tmp_path))
        for name in rows
    ]
    cfg = RunConfig(
        name="gov", workdir=str(tmp_path / "work"), sources=declared, policy=policy or {}
    )
    ctx = RunContext(
        run_id="run-1", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg), **state
    )
    ingested = ingest(declared, ctx, tmp_path / "in")
    result = govern(ingested.frame, cfg.policy, ctx)
    kept = result.frame.collect()
    events = result.events
    assert events.filter(pl.col("terminal"))["record_id"].is_unique().all()
    assert kept.join(events.filter(pl.col("terminal")), on="record_id", how="semi").height == 0
    assert kept.height + events["terminal"].sum() == ingested.frame.collect().height
    return kept, events, result


def ids_by_text(kept: pl.DataFrame, events: pl.DataFrame, tmp_path) -> dict[str, tuple[str, str]]:
    """Decision per input file and line: ('kept', '') or the terminal (action, reason)."""
    ingested = pl.read_parquet(tmp_path / "in" / "*.parquet")
    decided = {
        row["record_id"]: (row["action"], row["reason"])
        for row in events.filter(pl.col("terminal")).iter_rows(named=True)
    }
    return {
        location.removeprefix("data/"): decided.get(record_id, ("kept", ""))
        for record_id, location in ingested.select("record_id", "location").iter_rows()
    }


def row(i: int, text: str, **extra) -> dict:
    return {"id": f"r{i}", "text": text, "user": f"u{i}", **extra}


def test_terms_the_stricter_of_source_and_record_wins(tmp_path):
    rows = {
        "open": [
            row(1, "a message under the source's license"),
            row(2, "this record says non-commercial", license="CC-BY-NC-4.0"),
            row(3, "this record says MIT, looser than the source", license="MIT"),
            row(4, "this record has no consent", consent="none"),
            row(5, "an unknown record license", license="LicenseRef-mystery"),
        ],
        "nc": [row(6, "non-commercial source, MIT record", license="MIT")],
        "research": [row(7, "a source that only allows research")],
    }
    sources = {
        "nc": source("nc", license="CC-BY-NC-4.0"),
        "research": source("research", allowed_uses=["research"]),
    }
    kept, events, _ = run_govern(tmp_path, rows, sources=sources)
    decided = ids_by_text(kept, events, tmp_path)
    assert decided == {
        "open.jsonl:1": ("kept", ""),
        "open.jsonl:2": ("dropped", "license_not_allowed"),
        "open.jsonl:3": ("kept", ""),
        "open.jsonl:4": ("quarantined", "consent_missing"),
        "open.jsonl:5": ("quarantined", "license_unknown"),
        "nc.jsonl:1": ("dropped", "license_not_allowed"),
        "research.jsonl:1": ("dropped", "use_not_allowed"),
    }
    # the published license is the stricter one: the source's CC-BY-4.0 over the record's MIT
    assert set(kept["license"]) == {"CC-BY-4.0"}
    evidence = json.loads(events.filter(pl.col("reason") == "license_not_allowed")["evidence"][0])
    assert evidence["detail"]["licenses"] in (
        {"CC-BY-NC-4.0": "non-commercial"},  # the record's license, in the open source
        {"CC-BY-NC-4.0": "non-commercial", "MIT": "permissive"} | {"MIT": "permissive"},
    )


def test_both_the_source_and_the_record_license_must_pass(tmp_path):
    rows = {
        "gpl": [row(1, "a non-commercial record in a copyleft source", license="CC-BY-NC-4.0")],
        "mit": [row(2, "an Apache record in an MIT source", license="Apache-2.0")],
    }
    sources = {"gpl": source("gpl", license="GPL-3.0-only"), "mit": source("mit", license="MIT")}
    policy = {"licenses": {"allow": ["permissive", "non-commercial"], "quarantine": []}}
    kept, events, _ = run_govern(tmp_path, rows, policy=policy, sources=sources)
    assert ids_by_text(kept, events, tmp_path) == {
        "gpl.jsonl:1": ("dropped", "license_not_allowed"),  # GPL is not allowed, NC is
        "mit.jsonl:1": ("kept", ""),
    }
    assert kept["license"].to_list() == ["Apache-2.0"]  # a tie: the record's is more specific
    evidence = json.loads(events["evidence"][0])["detail"]
    assert evidence["licenses"] == {"GPL-3.0-only": "share-alike"}


def test_policy_lists_and_per_source_overrides(tmp_path):
    rows = {
        "nc": [row(1, "non-commercial text one")],
        "other": [row(2, "non-commercial text two")],
    }
    sources = {k: source(k, license="CC-BY-NC-4.0") for k in rows}
    policy = {
        "licenses": {"allow": ["permissive"], "quarantine": ["non-commercial"]},
        "sources": {"nc": {"licenses": {"allow": ["non-commercial"], "quarantine": []}}},
    }
    kept, events, result = run_govern(tmp_path, rows, policy=policy, sources=sources)
    assert ids_by_text(kept, events, tmp_path) == {
        "nc.jsonl:1": ("kept", ""),
        "other.jsonl:1": ("quarantined", "license_not_allowed"),
    }
    (item,) = result.review_items.iter_rows(named=True)
    assert item["reason"] == "license_not_allowed" and item["text"] == "non-commercial text two"


def test_a_secret_is_quarantined_with_redacted_evidence_and_a_masked_review_text(tmp_path):
    token = github_token()
    text = f"deploy with token {token} please"
    rows = {"open": [row(1, text), row(2, "nothing to see", note=f"key={token}"), row(3, "clean")]}
    kept, events, result = run_govern(tmp_path, rows)
    assert ids_by_text(kept, events, tmp_path) == {
        "open.jsonl:1": ("quarantined", "secret_detected"),
        "open.jsonl:2": ("quarantined", "secret_detected"),  # found in the metadata
        "open.jsonl:3": ("kept", ""),
    }
    secrets = events.filter(pl.col("reason") == "secret_detected")
    evidence = [json.loads(e)["detail"] for e in secrets["evidence"]]
    (finding,) = next(e for e in evidence if e["findings"][0]["field"] == "text")["findings"]
    assert finding == {
        "type": "github_token",
        "field": "text",
        "offset": 18,
        "length": 40,
        "lead": "ghp_",
    }
    items = result.review_items.sort("record_id")
    assert all(
        token not in (value or "")
        for value in items["text"].to_list() + items["metadata"].to_list()
    )
    assert "deploy with token <SECRET:github_token> please" in items["text"].to_list()
    assert token not in events.write_csv()
    assert result.stats["secrets_by_type"] == {"github_token": 2}


def test_the_policy_can_drop_secrets_instead(tmp_path):
    rows = {"open": [row(1, f"token {github_token()}")]}
    kept, events, result = run_govern(tmp_path, rows, policy={"secrets": {"action": "drop"}})
    assert ids_by_text(kept, events, tmp_path) == {"open.jsonl:1": ("dropped", "secret_detected")}
    assert result.review_items.height == 0


def test_personal_data_is_redacted_in_place_or_quarantined_by_type(tmp_path):
    rows = {
        "open": [
            row(1, "write to jane.doe@example.org today"),
            row(2, f"my card is {card_number()} thanks"),
            row(3, "call +44 20 7946 0958 now"),
        ],
        "keep": [row(4, "write to jane.doe@example.org today")],
    }
    policy = {"sources": {"keep": {"personal_data": {"email": "keep"}}}}
    kept, events, result = run_govern(tmp_path, rows, policy=policy)
    assert ids_by_text(kept, events, tmp_path) == {
        "open.jsonl:1": ("kept", ""),
        "open.jsonl:2": ("quarantined", "personal_data"),
        "open.jsonl:3": ("kept", ""),
        "keep.jsonl:1": ("kept", ""),
    }
    texts = dict(zip(kept["source"] + ":" + kept["text"], kept["content_hash"], strict=True))
    assert "open:write to <EMAIL> today" in texts and "open:call <PHONE> now" in texts
    assert "keep:write to jane.doe@example.org today" in texts
    redacted = kept.filter(pl.col("text") == "write to <EMAIL> today").row(0, named=True)
    assert redacted["content_hash"] != redacted["source_content_hash"]  # published text hash
    edits = events.filter(pl.col("reason") == "personal_data_redacted")
    assert edits.height == 2 and not edits["terminal"].any()
    assert json.loads(edits.filter(pl.col("evidence").str.contains("email"))["evidence"][0])[
        "findings"
    ] == [{"type": "email", "field": "text", "offset": 9, "length": 20}]
    assert result.stats["redacted_records"] == 2
    # the reviewer sees the card's last 4 digits, as on a receipt, never the number
    (item,) = result.review_items.iter_rows(named=True)
    assert item["text"] == "my card is <CREDIT_CARD …1111> thanks"


def test_every_published_field_is_scanned(tmp_path):
    rows = {
        "open": [
            row(1, "plain text", note="reach me at ana@example.org"),
            row(2, "plain text two", note=f"card {card_number()}"),
            row(3, "plain text three", user=f"svc:{github_token()}"),
            {"id": "r4", "text": "first of a group", "user": "Jo <jo@example.org>"},
            {"id": "r5", "text": "second of a group", "user": "Jo <jo@example.org>"},
        ]
    }
    kept, events, result = run_govern(tmp_path, rows)
    assert ids_by_text(kept, events, tmp_path) == {
        "open.jsonl:1": ("kept", ""),
        "open.jsonl:2": ("quarantined", "personal_data"),
        "open.jsonl:3": ("quarantined", "secret_detected"),
        "open.jsonl:4": ("kept", ""),
        "open.jsonl:5": ("kept", ""),
    }
    by_id = {r["text"]: r for r in kept.iter_rows(named=True)}
    assert json.loads(by_id["plain text"]["metadata"]) == {"note": "reach me at <EMAIL>"}
    # the group key keeps one pseudonym per address: the group stays one group
    first, second = by_id["first of a group"]["group"], by_id["second of a group"]["group"]
    assert first == second and first.startswith("Jo <<EMAIL:") and "jo@example.org" not in first
    assert (
        by_id["first of a group"]["content_hash"]
        == by_id["first of a group"]["source_content_hash"]
    )
    fields = {
        json.loads(e)["findings"][0]["field"]
        for e in events.filter(pl.col("action") == "edited")["evidence"]
    }
    assert fields == {"metadata.note", "group"}
    secret = json.loads(events.filter(pl.col("reason") == "secret_detected")["evidence"][0])
    assert secret["detail"]["findings"][0]["field"] == "group"


def test_approvals_lift_quarantine_only_for_the_same_content(tmp_path):
    token = github_token()
    rows = {"open": [row(1, f"test fixture token {token}"), row(2, f"other {github_token(8)}")]}
    _, _, first = run_govern(tmp_path / "a", rows)
    items = first.review_items.sort("record_id")
    decisions = approve(items, "approved", "ana")
    # record 2's text changed since the approval: it is reviewed again
    rows["open"][1]["text"] = f"changed {github_token(8)}"
    kept, events, again = run_govern(tmp_path / "b", rows, review_decisions=decisions)
    assert kept["text"].to_list() == [f"test fixture token {token}"]
    approved = events.filter(pl.col("action") == "approved")
    assert approved["reason"].to_list() == ["secret_false_positive"]
    assert json.loads(approved["evidence"][0])["reviewer"] == "ana"
    assert again.review_items.height == 1


def approve(items: pl.DataFrame, status: str, reviewer: str) -> pl.DataFrame:
    """Reviewer decisions on review items, as the catalog hands them to the stage."""
    return items.with_row_index("item_id", offset=1).select(
        pl.col("item_id").cast(pl.Int64), "record_id", "source_content_hash", "review_hash",
        "reason", pl.lit(status).alias("status"), pl.lit(reviewer).alias("reviewer"),
    )  # fmt: skip


def test_an_approval_does_not_cover_a_secret_added_to_another_field_later(tmp_path):
    rows = {"open": [row(1, f"test fixture token {github_token()}")]}
    _, _, first = run_govern(tmp_path / "a", rows)
    rows["open"][0]["note"] = f"deploy key:\n{github_token(9)}"  # a real one, added later
    kept, events, again = run_govern(
        tmp_path / "b", rows, review_decisions=approve(first.review_items, "approved", "ana")
    )
    assert kept.height == 0 and again.review_items.height == 1
    assert events.filter(pl.col("action") == "approved").height == 0


def test_secrets_in_metadata_are_found_behind_json_escapes_and_masked_as_json(tmp_path):
    token = github_token()
    note = f'deploy key:\n{token}\tand a "quoted" word'
    rows = {
        "open": [row(1, "see the note", note=note), row(2, "mail", note="to:\nbob@example.com")]
    }
    kept, events, result = run_govern(tmp_path, rows)
    assert ids_by_text(kept, events, tmp_path)["open.jsonl:1"] == ("quarantined", "secret_detected")
    (item,) = result.review_items.iter_rows(named=True)
    assert json.loads(item["metadata"]) == {"note": note.replace(token, "<SECRET:github_token>")}
    finding = json.loads(events.filter(pl.col("terminal"))["evidence"][0])["detail"]["findings"][0]
    assert (finding["field"], finding["offset"], finding["length"]) == ("metadata.note", 12, 40)
    (redacted,) = kept["metadata"].to_list()
    assert json.loads(redacted) == {"note": "to:\n<EMAIL>"}  # still valid JSON


def test_rejected_content_is_dropped_and_not_queued_again(tmp_path):
    rows = {"open": [row(1, f"token {github_token()}"), row(2, "fine")]}
    _, _, first = run_govern(tmp_path / "a", rows)
    decisions = approve(first.review_items, "rejected", "bo")
    # the same content under another id is rejected too; the same text with other metadata is
    # a different record to review
    rows["open"].append({**row(3, f"token {github_token()}"), "user": "u1"})
    rows["open"].append(row(4, f"token {github_token()}", note="from the wiki"))
    kept, events, again = run_govern(tmp_path / "b", rows, review_decisions=decisions)
    assert ids_by_text(kept, events, tmp_path / "b") == {
        "open.jsonl:1": ("dropped", "review_rejected"),
        "open.jsonl:2": ("kept", ""),
        "open.jsonl:3": ("dropped", "review_rejected"),
        "open.jsonl:4": ("quarantined", "secret_detected"),
    }
    assert again.review_items["record_id"].to_list() == [
        r for r, loc in pl.read_parquet(tmp_path / "b" / "in" / "*.parquet").select("record_id", "location").iter_rows()
        if loc.endswith(":4")
    ]  # fmt: skip


@pytest.mark.parametrize(
    "kind", ["source", "group", "record_id", "content_hash", "published_hash", "published_group"]
)
def test_deletion_requests_drop_matching_records_before_anything_else(tmp_path, kind):
    rows = {
        "open": [row(1, f"mail jane.doe@example.org or use {github_token()}"), {**row(2, "mail me@example.org"), "user": "Me <me@example.org>"}],
        "other": [row(3, "kept")],
    }  # fmt: skip
    kept, _, _ = run_govern(tmp_path / "a", rows)
    target = (
        pl.read_parquet(tmp_path / "a" / "in" / "*.parquet")
        .filter(pl.col("location") == "data/open.jsonl:2")
        .row(0, named=True)
    )
    published = kept.filter(pl.col("record_id") == target["record_id"])["content_hash"][0]
    published_group = kept.filter(pl.col("record_id") == target["record_id"])["group"][0]
    assert published_group.startswith("Me <<EMAIL:") or kind != "published_group"
    value = {"source": "open", "group": target["group"], "record_id": target["record_id"],
             "content_hash": target["source_content_hash"], "published_hash": published,
             "published_group": published_group}[kind]  # fmt: skip
    if kind == "source":  # the record holding a secret is deleted, not queued
        expected = {"open.jsonl:1": ("dropped", "deletion_request")}
    else:
        expected = {"open.jsonl:1": ("quarantined", "secret_detected")}
    expected |= {"open.jsonl:2": ("dropped", "deletion_request"), "other.jsonl:1": ("kept", "")}
    requests = pl.DataFrame(
        {
            "request_id": [41],
            "kind": [
                {"published_hash": "content_hash", "published_group": "group"}.get(kind, kind)
            ],
            "value": [value],
        }
    )
    kept, events, result = run_govern(tmp_path / "b", rows, deletions=requests)
    assert ids_by_text(kept, events, tmp_path / "b") == expected
    deleted = events.filter(pl.col("reason") == "deletion_request")
    assert json.loads(deleted["evidence"][0])["detail"] == {"request": 41}
    assert result.review_items.height == (0 if kind == "source" else 1)


def test_of_several_failed_terms_the_license_decides(tmp_path):
    rows = {"nc": [row(i, f"message {i}") for i in range(20)]}
    sources = {"nc": source("nc", license="CC-BY-NC-4.0", allowed_uses=["research"])}
    kept, events, _ = run_govern(tmp_path, rows, sources=sources)
    terminal = events.filter(pl.col("terminal"))
    assert set(terminal["reason"]) == {"license_not_allowed"} and terminal.height == 20
    assert json.loads(terminal["evidence"][0])["flags"] == [
        "license_not_allowed",
        "use_not_allowed",
    ]


def test_a_drop_outranks_a_quarantine_and_the_evidence_lists_every_flag(tmp_path):
    rows = {"nc": [row(1, f"token {github_token()}")]}
    sources = {"nc": source("nc", license="CC-BY-NC-4.0")}
    kept, events, result = run_govern(tmp_path, rows, sources=sources)
    (event,) = events.filter(pl.col("terminal")).iter_rows(named=True)
    assert (event["action"], event["reason"]) == ("dropped", "license_not_allowed")
    evidence = json.loads(event["evidence"])
    assert evidence["flags"] == ["license_not_allowed", "secret_detected"]
    assert evidence["secrets"] == ["github_token"]  # found, whatever decided: the report counts it
    assert result.review_items.height == 0 and kept.height == 0
    assert ledger.counts_by_reason(events.lazy(), terminal=True) == {
        "dropped": {"license_not_allowed": 1}
    }


def test_types_every_source_keeps_are_not_looked_for(tmp_path):
    rows = {"open": [row(1, "mail jane.doe@example.org or call +44 20 7946 0958")]}
    _, _, default = run_govern(tmp_path / "a", rows)
    assert default.stats["personal_data_by_type"] == {"email": 1, "phone": 1}
    policy = {"personal_data": {"email": "keep"}}
    kept, _, only_phone = run_govern(tmp_path / "b", rows, policy=policy)
    assert only_phone.stats["personal_data_by_type"] == {"phone": 1}
    assert kept["text"].to_list() == ["mail jane.doe@example.org or call <PHONE>"]


def test_record_id_of_names_a_record_by_its_source_id(tmp_path):
    from pipeline.core.identity import record_id_of

    run_govern(tmp_path, {"open": [row(1, "one"), row(2, "two")]})
    ingested = pl.read_parquet(tmp_path / "in" / "*.parquet").sort("location")
    assert ingested["record_id"].to_list() == [
        record_id_of("open", "r1"),
        record_id_of("open", "r2"),
    ]
