"""Fault suite, hostile rows: a real run over fuzzed rows of every hostile kind, among real
SMS messages, publishes a version, and every row is accounted for: each hostile kind ends with
exactly the ingest reason it should, once per row, and every record with one terminal event."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import orjson
import polars as pl
from helpers import SMS_SOURCE, run_json, sms_rows, write_project

from pipeline.core import ledger, reasons

MAX_TEXT_CHARS, MAX_RECORD_BYTES = 20_000, 200_000
CSV_SOURCE = {
    "name": "tickets", "location": "data/tickets.csv", "format": "csv",
    "fields": {"text": "body", "id": "ticket"},
    "license": "CC0-1.0", "consent": "contract", "owner": "support",
}  # fmt: skip


def _json(value) -> bytes:
    return orjson.dumps(value)


def hostile_jsonl(rng: random.Random, good: list[dict], per_kind: int):
    """(lines, the ingest reason of each line: None for a line that becomes a record, "blank"
    for one that is not a row). Each hostile kind gets `per_kind` rows, in random order."""

    def deep(depth: int) -> str:
        return "[" * depth + "]" * depth

    kinds = {
        reasons.INVALID_JSON: [
            lambda n: _json({"id": f"cut-{n}", "text": "no closing brace"})[:-1],
            lambda n: b'{"id": "raw-nul-%d", "text": "a\x00b"}' % n,
            lambda n: f'{{"id": "deep-{n}", "text": "nested", "meta": {deep(2000)}}}'.encode(),
            lambda n: b'{"id": "surrogate-%d", "text": "\\ud800"}' % n,
            lambda n: b"{'id': 'single-quotes-%d'}" % n,
        ],
        reasons.INVALID_UTF8: [lambda n: b'{"id": "latin-%d", "text": "caf\xe9 %d"}' % (n, n)],
        reasons.WRONG_TYPE: [
            lambda n: _json({"id": f"number-{n}", "text": n}),
            lambda n: _json({"id": f"object-{n}", "text": {"body": "x"}}),
            lambda n: _json({"id": f"bool-{n}", "text": True}),
            lambda n: _json({"id": [n], "text": "a list as id"}),
            lambda n: _json(["not", "an", "object", n]),
            lambda n: _json(f"a bare string {n}"),
        ],
        reasons.MISSING_TEXT: [lambda n: _json({"id": f"none-{n}", "sender": "x"})],
        reasons.EMPTY_TEXT: [lambda n: _json({"id": f"blank-{n}", "text": " \t\r\n "})],
        reasons.UNPARSEABLE_TIMESTAMP: [
            lambda n: _json(
                {"id": f"feb30-{n}", "text": f"impossible date {n}", "sent": "2023-02-30"}
            ),
            lambda n: _json(
                {"id": f"words-{n}", "text": f"wordy date {n}", "sent": "next tuesday"}
            ),
        ],
        reasons.TEXT_TOO_LONG: [
            lambda n: _json({"id": f"long-{n}", "text": "long " * (MAX_TEXT_CHARS // 4)})
        ],
        reasons.RECORD_TOO_LARGE: [
            lambda n: _json({"id": f"huge-{n}", "text": "x" * (MAX_RECORD_BYTES + 10)})
        ],
        reasons.DUPLICATE_SOURCE_ID: [
            lambda n: _json({**good[n % len(good)], "text": f"the same id again {n}"})
        ],
        None: [  # odd but readable: they become records
            lambda n: _json({"id": f"escaped-nul-{n}", "text": f"a\u0000b {n}"}),
            lambda n: _json({"id": f"crlf-{n}", "text": f"a line ending in CR {n}"}) + b"\r",
            lambda n: _json({"id": 10_000 + n, "text": f"a numeric id {n}", "sent": 1700000000}),
        ],
        "blank": [lambda n: b"", lambda n: b"   "],
    }
    rows = [(_json(row), None) for row in good]
    for reason, makers in kinds.items():
        rows += [(rng.choice(makers)(n), reason) for n in range(per_kind)]
    rng.shuffle(rows)
    first = [(b"\xef\xbb\xbf" + _json(good[0] | {"id": "after-a-bom"}), None)]  # a BOM
    return first + rows


def hostile_csv(rng: random.Random, per_kind: int) -> tuple[bytes, list[str | None]]:
    """A CSV file of ticket bodies: good, malformed, not UTF-8, empty, too long."""
    kinds = {
        None: lambda n: f'{n},"a ticket, with a comma and ""quotes"" {n}"',
        reasons.MALFORMED_ROW: lambda n: f"{n},too,many,fields",
        reasons.INVALID_UTF8: lambda n: f"{n},caf\udce9 {n}",
        reasons.MISSING_TEXT: lambda n: f"{n},",
        reasons.TEXT_TOO_LONG: lambda n: f'{n},"{"y" * (MAX_TEXT_CHARS + 1)}"',
    }
    rows = [(reason, make) for reason, make in kinds.items() for _ in range(per_kind)]
    rng.shuffle(rows)
    lines = [make(number) for number, (_, make) in enumerate(rows)]
    data = "\r\n".join(["ticket,body", *lines]) + "\r\n"
    return data.encode("utf-8", errors="surrogateescape"), [reason for reason, _ in rows]


def test_a_run_over_every_hostile_kind_publishes_and_accounts_for_every_row(
    tmp_path: Path, sms_spam: pl.DataFrame, prefect_server
):
    rng = random.Random(24)
    good = sms_rows(sms_spam, 0, 400)
    lines = hostile_jsonl(rng, good, per_kind=25)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sms-1.jsonl").write_bytes(b"\n".join(line for line, _ in lines) + b"\n")
    csv_bytes, csv_reasons = hostile_csv(rng, per_kind=20)
    (tmp_path / "data" / "tickets.csv").write_bytes(csv_bytes)
    config = write_project(
        tmp_path, [SMS_SOURCE, CSV_SOURCE],
        ingest={"max_text_chars": MAX_TEXT_CHARS, "max_record_bytes": MAX_RECORD_BYTES},
    )  # fmt: skip

    summary = run_json(config)  # one bad row never stops a run: every gate passes

    assert summary["created"] and summary["published"] > 0
    rows = [reason for _, reason in lines if reason != "blank"] + csv_reasons
    assert summary["records_in"] == len(rows) == 400 + 1 + 25 * 10 + 20 * 5
    events = pl.scan_parquet(Path(summary["paths"]["version"]) / "ledger.parquet")
    counts = ledger.check_accounting(events, summary["records_in"])  # one terminal event each
    assert sum(counts.values()) == summary["records_in"]
    dropped_at_ingest = (
        events.filter((pl.col("stage") == "ingest") & (pl.col("action") == reasons.DROPPED))
        .select("source", "reason", "evidence")
        .collect()
    )
    by_kind = Counter(zip(dropped_at_ingest["source"], dropped_at_ingest["reason"], strict=True))
    expected = Counter(("sms", reason) for reason in rows[: len(rows) - len(csv_reasons)] if reason)
    expected += Counter(("tickets", reason) for reason in csv_reasons if reason)
    assert by_kind == expected
    # each drop names its row: the line (jsonl) or row (csv) that held it
    not_repeats = (None, "blank", reasons.DUPLICATE_SOURCE_ID)
    jsonl_lines = {n for n, (_, reason) in enumerate(lines, 1) if reason not in not_repeats}
    named = [json.loads(e) for e in dropped_at_ingest.filter(pl.col("source") == "sms")["evidence"]]
    assert {e["line"] for e in named if "line" in e} == jsonl_lines
    ids = {
        n: orjson.loads(line.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r")).get("id")
        for n, (line, reason) in enumerate(lines, 1)
        if reason in (None, reasons.DUPLICATE_SOURCE_ID)
    }
    repeats = [e for e in named if "first_seen_at" in e]  # the later of two rows of one id
    for repeat in repeats:
        line, first = (
            int(e.rsplit(":", 1)[1]) for e in (repeat["location"], repeat["first_seen_at"])
        )
        assert first < line and ids[first] == ids[line]
    long_text = ("long " * (MAX_TEXT_CHARS // 4)).strip()  # as normalized
    assert {e["chars"] for e in named if "chars" in e} == {len(long_text)}
    shards = pl.concat(
        [pl.read_parquet(p) for p in Path(summary["paths"]["version"]).rglob("*.parquet")
         if p.name != "ledger.parquet"], how="diagonal_relaxed",
    )  # fmt: skip
    assert not shards.filter(pl.col("text").str.len_chars() > MAX_TEXT_CHARS).height
