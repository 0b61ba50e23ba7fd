"""Governance end to end through the CLI: secrets never in clear anywhere, the review queue
round trip, deletion requests, withdrawn and purged versions."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest
import yaml
from credential_factory import secret_sample
from helpers import (
    SMS_SOURCE,
    replace_stage,
    run_json,
    sms_rows,
    thresher,
    write_jsonl,
    write_project,
)

from data_catalog.catalog import Catalog, open_version
from pipeline.core.errors import DataError
from pipeline.stage import ByKey
from pipeline.text.secrets import SECRET_TYPES

pytestmark = pytest.mark.usefixtures("prefect_server")


def planted_project(root: Path, sms_spam: pl.DataFrame) -> tuple[Path, dict[str, str]]:
    """200 real SMS messages, and one more message per credential type with a secret in its
    text, in a metadata field (after a newline, escaped in the record's JSON) or its label."""
    rng = random.Random(11)
    secrets, planted = {}, []
    for number, kind in enumerate(SECRET_TYPES):
        sample = secret_sample(kind, rng)
        secrets[kind] = sample.value
        base = sms_rows(sms_spam, 1000 + number, 1001 + number)[0]
        where = ("text", "note", "label")[number % 3]
        value = f"{base.get(where, 'see below')}\n{sample.text}"
        planted.append({**base, "id": f"planted-{kind}", where: value})
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 200))
    write_jsonl(root / "data" / "sms-planted.jsonl", planted)
    source = {**SMS_SOURCE, "fields": {**SMS_SOURCE["fields"], "metadata": ["note"]}}
    return write_project(root, [source]), secrets


def fragments(secret: str) -> list[str]:
    """12-character pieces of a secret's random part: a partial leak shows one of them."""
    start = len(secret) // 3
    return [secret[i : i + 12] for i in range(start, max(start + 1, len(secret) - 11))]


def leaked(secrets: dict[str, str], everywhere: str) -> set[str]:
    """The kinds of secret a piece of which is in `everywhere`: one Aho-Corasick pass over
    everything for every piece of every secret."""
    pieces = {piece: kind for kind, value in secrets.items() for piece in fragments(value)}
    found = pl.Series([everywhere]).str.extract_many(list(pieces), overlapping=True)[0]
    return {pieces[piece] for piece in found}


def searchable_text(workdir: Path) -> str:
    """Everything the folder holds, as text: Parquet read back, SQLite dumped, compressed
    files decompressed (gzip, bz2, xz, zstd: their raw bytes would hide the text)."""
    chunks = []
    for path in sorted(workdir.rglob("*")):
        if path.is_dir() or path.suffix in (".lock", ".db-shm"):
            continue
        if path.suffix == ".parquet":
            chunks.append(parquet_text(path))
        elif path.name == "catalog.db":
            with sqlite3.connect(path) as db:
                chunks.extend(db.iterdump())
        elif path.name != "catalog.db-wal":  # read through the dump above
            chunks.append(decompressed(path.read_bytes()).decode("utf-8", errors="replace"))
    return "\n".join(chunks)


def parquet_text(path: Path) -> str:
    """A Parquet file's strings as they are (no quoting to hide a secret's quote or
    backslash), its other columns, nested ones too, as JSON lines."""
    frame = pl.read_parquet(path)
    strings = [name for name, kind in frame.schema.items() if kind == pl.String]
    chunks = ["\n".join(value for value in frame[name].to_list() if value) for name in strings]
    rest = frame.drop(strings)
    return "\n".join([*chunks, rest.write_ndjson() if rest.width else ""])


def decompressed(data: bytes) -> bytes:
    """The bytes of a gzip, bz2, xz or zstd file decompressed (by magic number), else as they
    are."""
    import pyarrow as pa

    codecs = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ": None, b"(\xb5/\xfd": "zstd"}
    for magic, codec in codecs.items():
        if data.startswith(magic):
            if codec is None:
                import lzma

                return lzma.decompress(data)
            return pa.input_stream(pa.BufferReader(data), compression=codec).read()
    return data


async def prefect_logs() -> str:
    """Every log line the Prefect server holds, page by page."""
    from prefect.client.orchestration import get_client

    lines, offset = [], 0
    async with get_client() as client:
        while page := await client.read_logs(limit=200, offset=offset):
            lines += [log.message for log in page]
            offset += len(page)
    return "\n".join(lines)


def test_secrets_never_appear_in_clear_outside_the_source(tmp_path, sms_spam, monkeypatch, capfd):
    """On a temporary Dask cluster, whose workers' temporary folders and logs are searched
    too."""
    scratch = tmp_path / "tmp"  # the workers' temporary folder (Dask's spill and scratch)
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    config, secrets = planted_project(tmp_path, sms_spam)
    # a credential in a file's name, and one in the one config section that is never stored
    rng = random.Random(51)
    secrets["file name"] = secret_sample("aws_access_key_id", rng).value
    secrets["alert webhook"] = secret_sample("slack_token", rng).value
    write_jsonl(tmp_path / "data" / f"sms-creds-{secrets['file name']}.jsonl", sms_rows(sms_spam, 900, 903))  # fmt: skip
    settings = yaml.safe_load(config.read_text())
    settings["alerts"] = {"webhook": f"https://hooks.example.com/t/{secrets['alert webhook']}"}
    settings["runner"] = {"kind": "dask", "workers": 2}
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    result = thresher("run", "--config", config, "--json")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["reasons"]["quarantined"]["secret_detected"] == len(SECRET_TYPES)
    assert f"review queue: {len(SECRET_TYPES)} new item(s)" in result.stderr
    assert summary["review"] == {
        "queued_new": len(SECRET_TYPES),
        "quarantined_items": len(SECRET_TYPES),
    }
    workdir = tmp_path / "work"
    listed = thresher("review", "list", "--workdir", workdir, "--json")
    items = [json.loads(line) for line in listed.stdout.splitlines()]
    # the queue's stored text is searched whole below; its pages, for a type in each field
    shown = [thresher("review", "show", item["id"], "--workdir", workdir) for item in items[::9]]
    assert all("<SECRET:" in page.stdout for page in shown)
    outputs = [result.stdout, result.stderr, listed.stdout, *(page.stdout for page in shown)]
    workers = capfd.readouterr()  # what the worker processes wrote to their stdout and stderr
    assert "dask-scratch-space" in {p.name for p in scratch.iterdir()}  # they used this folder
    searched = [searchable_text(workdir), searchable_text(scratch), workers.out, workers.err]
    everywhere = "\n".join([*searched, *outputs, asyncio.run(prefect_logs())])
    assert "<SECRET:github_token>" in everywhere  # the search does see the queue's text
    assert leaked(secrets, everywhere) == set()
    assert not list(workdir.glob("runs/*/stages")) and not list(
        workdir.glob("datasets/*/.staging-*")
    )
    # the audit report (searched above with the rest) counts the blocked types, no values
    [report_json] = workdir.glob("reports/*/*/report.json")
    events = pl.read_parquet(summary["paths"]["ledger"]).filter(reason="secret_detected")
    types = [kind for e in events["evidence"] for kind in json.loads(e)["detail"]["types"]]
    blocked = json.loads(report_json.read_text())["blocked"]["secrets"]
    assert blocked == {kind: types.count(kind) for kind in set(types)}
    assert set(blocked) == set(SECRET_TYPES)


def test_review_round_trip_and_a_second_nightly_run(tmp_path, sms_spam):
    config, secrets = planted_project(tmp_path, sms_spam)
    workdir = tmp_path / "work"
    run_json(config)
    items = {
        item["record_id"]: item
        for item in map(json.loads, thresher("review", "list", "-w", workdir, "--status", "pending", "--json").stdout.splitlines())
    }  # fmt: skip
    by_kind = {json.loads(i["evidence"])["types"][0]: i["id"] for i in items.values()}
    in_text = SECRET_TYPES[0::3]  # planted in the text, not in metadata or label
    approved, rejected = by_kind[in_text[0]], by_kind[in_text[1]]
    ok = thresher(
        "review",
        "approve",
        approved,
        "--reviewer",
        "ana",
        "--note",
        "a test fixture",
        "-w",
        workdir,
        "--json",
    )
    assert ok.exit_code == 0 and f"item {approved}: approved by ana" in ok.stderr
    assert json.loads(ok.stdout) == {"item_id": approved, "decided": True, "decision": "approved"}
    assert (
        thresher(
            "review", "reject", rejected, "--reviewer", "bo", "--note", "live key", "-w", workdir
        ).exit_code
        == 0
    )
    again = thresher(
        "review", "reject", approved, "--reviewer", "bo", "--note", "no", "-w", workdir
    )
    assert again.exit_code == 1 and f"item {approved} was already approved by ana" in again.stderr
    missing = thresher("review", "approve", approved, "--note", "x", "-w", workdir)
    assert missing.exit_code == 2 and "--reviewer" in missing.stderr
    some_unknown = thresher(
        "review",
        "approve",
        by_kind["npm_token"],
        999,
        "--reviewer",
        "ana",
        "--note",
        "x",
        "-w",
        workdir,
    )
    assert some_unknown.exit_code == 2 and "no review item 999" in some_unknown.stderr
    assert (
        json.loads(
            thresher("review", "show", by_kind["npm_token"], "-w", workdir, "--json").stdout
        )["status"]
        == "pending"
    )

    second = run_json(config)  # nothing changed in the sources
    assert second["review"]["queued_new"] == 0
    assert second["reasons"]["quarantined"]["secret_detected"] == len(SECRET_TYPES) - 2
    assert second["reasons"]["dropped"]["review_rejected"] == 1
    assert second["changes"]["approved"] == {"secret_false_positive": 1}
    published = pl.concat([f.collect() for f in open_version(workdir, "test-set").splits.values()])
    assert (
        published.filter(pl.col("text").str.contains(secrets[in_text[0]], literal=True)).height == 1
    )
    log = pl.read_parquet(second["paths"]["ledger"])
    approval = log.filter(pl.col("action") == "approved").row(0, named=True)
    assert json.loads(approval["evidence"]) == {
        "item": approved,
        "reviewer": "ana",
        "flag": "secret_detected",
    }
    statuses = [
        json.loads(line)["status"]
        for line in thresher("review", "list", "-w", workdir, "--json").stdout.splitlines()
    ]
    assert sorted(statuses).count("pending") == len(SECRET_TYPES) - 2


def test_two_reviewers_in_two_processes_one_wins(tmp_path, sms_spam):
    config, _ = planted_project(tmp_path, sms_spam)
    workdir = tmp_path / "work"
    run_json(config)
    item = json.loads(thresher("review", "list", "-w", workdir, "--json").stdout.splitlines()[0])[
        "id"
    ]
    cli = [sys.executable, "-c", "from flows.cli import main; main()"]
    env = {**os.environ, "THRESHER_WORKDIR": str(workdir)}
    racing = [
        subprocess.Popen([*cli, "review", verb, str(item), "--reviewer", who, "--note", "race"], env=env, stderr=subprocess.PIPE, text=True)
        for verb, who in (("approve", "ana"), ("reject", "bo"))
    ]  # fmt: skip
    outcomes = sorted((p.wait(timeout=120), p.stderr.read()) for p in racing)
    assert [code for code, _ in outcomes] == [0, 1]
    assert "was already" in outcomes[1][1] and "nothing changed" in outcomes[1][1]
    shown = json.loads(thresher("review", "show", item, "-w", workdir, "--json").stdout)
    (decision,) = shown["history"]
    assert (shown["status"], shown["reviewer"]) == (decision["decision"], decision["reviewer"])


def test_forget_rerun_affected_withdraw_and_purge(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 200))
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    first = run_json(config)
    asked = thresher(
        "forget", "--group", "sender-3", "--reason", "the sender asked", "-w", workdir, "--json"
    )
    assert asked.exit_code == 0
    request = json.loads(asked.stdout)
    assert request["affected"] == [first["dataset_hash"]] and request["withdrawn"] == []
    affected = thresher("catalog", "affected", request["request_id"], "-w", workdir, "--json")
    assert affected.exit_code == 1  # findings: versions hold the records
    (hit,) = map(json.loads, affected.stdout.splitlines())
    assert hit["dataset_hash"] == first["dataset_hash"] and hit["records"] == 7

    second = run_json(config)
    assert second["reasons"]["dropped"]["deletion_request"] == 7
    published = pl.concat([f.collect() for f in open_version(workdir, "test-set").splits.values()])
    assert "sender-3" not in published["group"].to_list()

    record = published.filter(pl.col("group") == "sender-9")["record_id"][0]
    withdrawn = thresher(
        "forget",
        "--record-id",
        record,
        "--reason",
        "erasure",
        "--withdraw",
        "-w",
        workdir,
        "--json",
    )
    assert set(json.loads(withdrawn.stdout)["withdrawn"]) == {
        first["dataset_hash"],
        second["dataset_hash"],
    }
    with pytest.raises(DataError, match="was withdrawn"):
        open_version(workdir, "test-set", second["dataset_hash"])
    with pytest.raises(DataError, match="has no published version"):
        open_version(workdir, "test-set")
    listed = [
        json.loads(line)
        for line in thresher("catalog", "list", "-w", workdir, "--json").stdout.splitlines()
    ]
    assert {row["status"] for row in listed} == {"withdrawn"}
    assert all("deletion request" in row["status_reason"] for row in listed)

    purged = thresher("catalog", "purge", first["dataset_hash"][:12], "-w", workdir)
    assert purged.exit_code == 0
    again = thresher("catalog", "purge", first["dataset_hash"][:12], "-w", workdir)
    assert again.exit_code == 0 and "already purged" in again.stderr
    rewithdraw = thresher(
        "catalog", "withdraw", first["dataset_hash"], "--reason", "new", "-w", workdir
    )
    assert "already withdrawn" in rewithdraw.stderr and "nothing changed" in rewithdraw.stderr
    path = Path(first["paths"]["version"])
    assert not (path / "data").exists() and (path / "manifest.json").exists()
    verify = thresher("catalog", "verify", first["dataset_hash"], "-w", workdir)
    assert verify.exit_code == 1 and "purged" in verify.stderr
    # the purged version is still found through its ledger
    still = thresher("catalog", "affected", "2", "-w", workdir, "--json")
    assert {json.loads(line)["dataset_hash"] for line in still.stdout.splitlines()} == {
        first["dataset_hash"], second["dataset_hash"]
    }  # fmt: skip
    not_an_id = thresher("forget", "--record-id", "sms-5", "--reason", "x", "-w", workdir)
    assert not_an_id.exit_code == 2 and "use --source S --id ID" in not_an_id.stderr
    by_source_id = thresher(
        "forget", "--source", "sms", "--id", "sms-5", "--reason", "x", "-w", workdir, "--json"
    )
    assert json.loads(by_source_id.stdout)["kind"] == "record_id"
    third = run_json(config)  # parent: none published, so splits come from the hash again
    assert third["parent_version"] is None and third["reasons"]["dropped"]["deletion_request"] == 9
    assert Catalog.open(workdir).latest("test-set").dataset_hash == third["dataset_hash"]


def test_a_run_that_fails_midway_keeps_no_unscreened_records(tmp_path, sms_spam, monkeypatch):
    """It keeps the last finished stage's output for the next run to resume from
    (tests/flows/test_resume.py), never the ingested records, which may hold secrets: none of
    the planted secrets is in clear in what the failed run left, its report or the logs."""

    def broken(*_args):
        raise RuntimeError("split broke")

    broken_split = ByKey(keys=broken, reduce=broken, decide=broken, apply=broken)

    replace_stage(monkeypatch, "split", broken_split)
    config, secrets = planted_project(tmp_path, sms_spam)
    with pytest.raises(RuntimeError, match="split broke"):
        thresher("run", "--config", config)
    (run_dir,) = (tmp_path / "work" / "runs").iterdir()
    assert (run_dir / "ledger.parquet").exists()  # kept for diagnosis: ids and reasons only
    assert not (run_dir / "stages" / "ingest").exists()
    assert (run_dir / "stages" / "boilerplate").is_dir()  # the last stage's output before split
    everywhere = "\n".join([searchable_text(tmp_path / "work"), asyncio.run(prefect_logs())])
    assert "split broke" in everywhere  # the search sees the failed run's report and logs
    assert leaked(secrets, everywhere) == set()


def test_a_withdrawn_version_is_not_published_again(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 100))
    config = write_project(tmp_path, [SMS_SOURCE])
    first = run_json(config)
    withdrawn = thresher(
        "catalog",
        "withdraw",
        first["dataset_hash"][:12],
        "--reason",
        "bad labels",
        "--config",
        config,
    )
    assert withdrawn.exit_code == 0
    again = thresher("run", "--config", config)
    assert again.exit_code == 2
    assert (
        f"rebuilt version {first['dataset_hash'][:16]}, which was withdrawn (bad labels)"
        in again.stderr
    )
    assert [v.status for v in Catalog.open(tmp_path / "work").versions()] == ["withdrawn"]


def test_a_killed_run_leaves_no_record_files_behind(tmp_path, sms_spam):
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 50))
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    catalog = Catalog.open(workdir)
    catalog.start_run("20260101T000000Z-dead00", "test-set", "0" * 64)
    killed = workdir / "runs" / "20260101T000000Z-dead00"
    (killed / "stages" / "ingest").mkdir(parents=True)
    (killed / "stages" / "ingest" / "part-00000.parquet").write_text("record text")
    staging = workdir / "datasets" / "test-set" / ".staging-20260101T000000Z-dead00"
    staging.mkdir(parents=True)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (killed / "owner.json").write_text(
        json.dumps({"host": socket.gethostname(), "pid": int(gone.stdout)})
    )
    run_json(config)
    assert not (killed / "stages").exists() and not staging.exists()
    (interrupted,) = [r for r in catalog.runs() if r["run_id"] == killed.name]
    assert interrupted["status"] == "failed" and "interrupted" in interrupted["error"]
