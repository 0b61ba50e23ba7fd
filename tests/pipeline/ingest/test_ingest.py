"""Ingest: every format into one schema, stable identities, and every bad-row class."""

from __future__ import annotations

import codecs
import gzip
import json
import shutil
from datetime import datetime
from pathlib import Path

import orjson
import polars as pl
import pytest
import xxhash
from helpers import CHANGELOG_SOURCE, CHANGELOGS, SMS_SOURCE, sms_rows, write_jsonl

import pipeline.ingest.stage as ingest_module
from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.core.normalize import normalize_text
from pipeline.core.schema import RECORD_SCHEMA
from pipeline.ingest.stage import ingest
from pipeline.ingest.stage import ingest as ingest_stage
from pipeline.ingest.timestamps import parse_timestamps
from pipeline.stage import RunContext

SEP = "\x1f"


def xxh(value: str) -> str:
    return xxhash.xxh3_128_hexdigest(value.encode())


def run_ingest(root: Path, *declarations: dict):
    sources = [SourceDeclaration(**{**d, "base_dir": str(root)}) for d in declarations]
    cfg = RunConfig(name="t", workdir=str(root / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=root / "work", config=cfg, config_hash=config_hash(cfg))
    result = ingest(sources, ctx, root / "work" / "ingested")
    return result.frame.collect(), result.events, result.stats


def csv_source(**overrides) -> dict:
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    return {
        "name": "c",
        "location": "in.csv",
        "format": "csv",
        "fields": {"text": "text", "id": "id"},
        **common,
        **overrides,
    }


def jsonl_source(**overrides) -> dict:
    return {**SMS_SOURCE, "location": "in.jsonl", **overrides}


def test_jsonl_records_have_the_canonical_schema_and_stable_ids(tmp_path, sms_spam):
    rows = sms_rows(sms_spam, 0, 50)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    records, events, stats = run_ingest(tmp_path, SMS_SOURCE)
    assert records.schema == RECORD_SCHEMA
    # the only events: the real messages whose cp1252 apostrophes arrived as C1 controls
    damaged = sum("\x92" in row["text"] for row in rows)
    assert damaged == 1 and stats["records_in"] == 50 and stats["bad_rows"] == 0
    assert events["reason"].to_list() == [reasons.ENCODING_REPAIRED] * damaged
    first = records.filter(pl.col("location") == "data/sms-1.jsonl:1").row(0, named=True)
    assert first["record_id"] == xxh(f"sms{SEP}sms-0")
    assert first["text"] == rows[0]["text"]
    assert first["content_hash"] == first["source_content_hash"] == xxh(rows[0]["text"])
    assert first["group"] == "sender-0" and first["label"] == "ham"
    assert first["license"] == "CC-BY-4.0" and first["consent"] == "public-release"
    assert str(first["timestamp"]) == "2012-01-01 10:00:00+00:00"
    again, _, _ = run_ingest(tmp_path / "again" if False else tmp_path, SMS_SOURCE)
    assert again["record_id"].sort().to_list() == records["record_id"].sort().to_list()


def test_exact_duplicates_keep_distinct_record_ids(tmp_path, sms_spam):
    rows = sms_rows(sms_spam, 0, 10)
    rows.append({**rows[3], "id": "copy-of-3"})
    write_jsonl(tmp_path / "in.jsonl", rows)
    records, _, _ = run_ingest(tmp_path, jsonl_source())
    copies = records.filter(pl.col("content_hash") == xxh(rows[3]["text"]))
    assert copies.height == 2 and copies["record_id"].n_unique() == 2


def test_without_an_id_field_identity_is_source_file_and_line(tmp_path, sms_spam):
    write_jsonl(tmp_path / "in.jsonl", sms_rows(sms_spam, 0, 3))
    fields = {"text": "text"}
    records, _, _ = run_ingest(tmp_path, jsonl_source(fields=fields))
    assert sorted(records["record_id"]) == sorted(
        xxh(f"sms{SEP}in.jsonl{SEP}{n}") for n in (1, 2, 3)
    )


def test_text_is_nfc_and_whitespace_normalized(tmp_path):
    write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"id": "a", "text": "  Cafe\u0301\u00a0 menu\r\n\r\n\r\n\r\nline  two\t\tend  "},
            {"id": "b", "text": "already clean\nsecond line"},
        ],
    )
    records, _, _ = run_ingest(tmp_path, jsonl_source(fields={"text": "text", "id": "id"}))
    texts = dict(zip(records["location"], records["text"], strict=True))
    assert texts["in.jsonl:1"] == "Caf\u00e9 menu\n\nline two end"
    assert texts["in.jsonl:2"] == "already clean\nsecond line"


def test_csv_parquet_and_text_files(tmp_path, sms_spam):
    sms_spam.head(30).write_csv(tmp_path / "sms.csv")
    parquet = sms_spam.slice(30, 20).with_columns(
        pl.datetime(2020, 1, 2, time_zone="UTC").alias("sent"), pl.col("spam").cast(pl.Int64)
    )
    parquet.write_parquet(tmp_path / "sms.parquet")
    for number, text in enumerate(sms_spam["text"].slice(50, 3)):
        (tmp_path / "notes" / f"{number}.txt").parent.mkdir(exist_ok=True)
        (tmp_path / "notes" / f"{number}.txt").write_text(text + "\n")
    common = {"license": "CC-BY-4.0", "consent": "public-release", "owner": "UCI"}
    records, events, stats = run_ingest(
        tmp_path,
        {
            "name": "csv",
            "location": "sms.csv",
            "format": "csv",
            "fields": {"text": "text", "id": "index", "label": "spam"},
            **common,
        },
        {
            "name": "pq",
            "location": "sms.parquet",
            "format": "parquet",
            "fields": {"text": "text", "label": "spam", "timestamp": "sent"},
            **common,
        },
        {"name": "notes", "location": "notes/*.txt", "format": "text", **common},
    )
    assert events["action"].to_list() == [reasons.EDITED]  # one cp1252 apostrophe repaired
    assert stats["sources"] == {
        "csv": {"records_in": 30, "encoding_repaired": 1},
        "pq": {"records_in": 20},
        "notes": {"records_in": 3},
    }
    by_source = records.group_by("source").len().sort("source")
    assert by_source.rows() == [("csv", 30), ("notes", 3), ("pq", 20)]
    csv_first = records.filter(pl.col("location") == "sms.csv:1").row(0, named=True)
    assert csv_first["record_id"] == xxh(f"csv{SEP}0") and csv_first["label"] == "0"
    pq = records.filter(pl.col("source") == "pq")
    assert (
        pq["timestamp"].unique().to_list() == [pq["timestamp"][0]]
        and str(pq["timestamp"][0]) == "2020-01-02 00:00:00+00:00"
    )
    note = records.filter(pl.col("location") == "notes/0.txt:1").row(0, named=True)
    assert (
        note["record_id"] == xxh(f"notes{SEP}notes/0.txt")
        and note["text"] == sms_spam["text"][50].strip()
    )


def test_debian_changelogs_become_dated_entries_grouped_by_maintainer(tmp_path):
    records, events, stats = run_ingest(tmp_path, CHANGELOG_SOURCE)
    trailers = sum(
        gzip.decompress(path.read_bytes()).decode().count("\n -- ")
        for path in CHANGELOGS.glob("*/changelog.Debian.gz")
    )
    assert stats["records_in"] == trailers and events.height == 0
    sed_latest = records.filter(pl.col("record_id") == xxh(f"changelogs{SEP}sed/4.9-1")).row(
        0, named=True
    )
    assert sed_latest["group"] == "clint@debian.org"
    assert str(sed_latest["timestamp"]) == "2023-01-05 19:55:25+00:00"  # -0500 converted to UTC
    assert (
        sed_latest["text"]
        == "* New upstream version.\n* Switch to bundled help2man for man page generation."
    )
    assert json.loads(sed_latest["metadata"]) == {
        "distribution": "unstable",
        "maintainer": "Clint Adams",
        "package": "sed",
        "urgency": "medium",
        "version": "4.9-1",
    }


BAD_LINES = {
    reasons.INVALID_JSON: b'{"id": "broken", "text": "no closing brace"',
    reasons.INVALID_UTF8: b'{"id": "latin", "text": "caf\xe9"}',
    reasons.MISSING_TEXT: orjson.dumps({"id": "none"}),
    reasons.EMPTY_TEXT: orjson.dumps({"id": "blank", "text": " \t\n "}),
    reasons.UNPARSEABLE_TIMESTAMP: orjson.dumps(
        {"id": "when", "text": "t", "sent": "the day after tomorrow"}
    ),
    "wrong_type: number as text": orjson.dumps({"id": "number", "text": 5}),
    "wrong_type: object as text": orjson.dumps({"id": "object", "text": {"body": "x"}}),
    "wrong_type: list as id": orjson.dumps({"id": ["a"], "text": "list id"}),
    "wrong_type: not an object": orjson.dumps(["not", "an", "object"]),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_each_bad_row_class_gets_its_reason_and_location(tmp_path, case):
    good = orjson.dumps({"id": "ok", "text": "a good message", "sent": "2020-01-01"})
    numeric = orjson.dumps(
        {"id": 7, "text": "numeric ids and epoch times are fine", "sent": 1700000000}
    )
    (tmp_path / "in.jsonl").write_bytes(b"\n".join([good, b"", BAD_LINES[case], numeric]) + b"\n")
    fields = {"text": "text", "id": "id", "timestamp": "sent"}
    records, events, stats = run_ingest(tmp_path, jsonl_source(fields=fields))
    assert stats["records_in"] == 3 and records.height == 2  # the blank line is not a record
    (event,) = events.iter_rows(named=True)
    assert event["reason"] == case.split(":")[0]
    assert json.loads(event["evidence"]) == {"file": "in.jsonl", "line": 3}
    assert event["action"] == reasons.DROPPED and event["terminal"]
    assert event["record_id"] == xxh(f"sms{SEP}in.jsonl{SEP}3")  # bad rows: identity by position
    numeric_row = records.filter(pl.col("record_id") == xxh(f"sms{SEP}7")).row(0, named=True)
    assert str(numeric_row["timestamp"]) == "2023-11-14 22:13:20+00:00"


def test_bad_rows_in_csv_and_text_files(tmp_path):
    (tmp_path / "in.csv").write_bytes(b"id,text\n1,fine\n2,caf\xe9 au lait\n3,\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "bad.txt").write_bytes(b"\xff\xfe broken")
    (tmp_path / "t" / "good.txt").write_text("a real note")
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    _, events, _ = run_ingest(
        tmp_path,
        csv_source(),
        {"name": "t", "location": "t/*.txt", "format": "text", **common},
    )
    found = {
        (json.loads(e)["file"], json.loads(e).get("row", json.loads(e).get("line"))): r
        for e, r in zip(events["evidence"], events["reason"], strict=True)
    }
    assert found == {
        ("in.csv", 2): reasons.INVALID_UTF8,
        ("in.csv", 3): reasons.MISSING_TEXT,
        ("t/bad.txt", 1): reasons.INVALID_UTF8,
    }


def test_repeated_source_id_keeps_the_first_and_names_it(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "first"}, {"id": "y", "text": "other"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "x", "text": "second with the same id"}])
    records, events, _ = run_ingest(
        tmp_path, jsonl_source(location="*.jsonl", fields={"text": "text", "id": "id"})
    )
    assert sorted(records["text"]) == ["first", "other"]
    on_disk = pl.read_parquet(tmp_path / "work" / "ingested" / "*.parquet")  # what the flow reads
    assert sorted(on_disk["text"]) == ["first", "other"]
    (event,) = events.iter_rows(named=True)
    assert event["reason"] == reasons.DUPLICATE_SOURCE_ID
    assert event["record_id"] == xxh(f"sms{SEP}b.jsonl{SEP}1")  # its own identity, by position
    evidence = json.loads(event["evidence"])
    assert evidence == {
        "location": "b.jsonl:1",
        "first_seen_at": "a.jsonl:1",
        "first_record_id": xxh(f"sms{SEP}x"),
    }


def test_repeated_ids_found_one_hash_partition_at_a_time_are_the_same(tmp_path, monkeypatch):
    """With one id to a partition, each repeat still names where its id was first seen."""
    source = jsonl_source(location="*.jsonl", fields={"text": "text", "id": "id"})
    found = []
    for rows_per_partition in (1_000_000, 1):
        root = tmp_path / str(rows_per_partition)
        write_jsonl(root / "a.jsonl", [{"id": i, "text": f"a{i}"} for i in "xyzx"])
        write_jsonl(root / "b.jsonl", [{"id": i, "text": f"b{i}"} for i in "wzxy"])
        monkeypatch.setattr(ingest_module, "ID_PARTITION_ROWS", rows_per_partition)
        records, events, _ = run_ingest(root, source)
        evidence = [json.loads(e) for e in events.sort("record_id")["evidence"]]
        found.append((sorted(records["text"]), evidence))
    assert found[0] == found[1]
    assert found[0][0] == ["ax", "ay", "az", "bw"]
    assert sorted((e["location"], e["first_seen_at"]) for e in found[0][1]) == [
        ("a.jsonl:4", "a.jsonl:1"), ("b.jsonl:2", "a.jsonl:3"), ("b.jsonl:3", "a.jsonl:1"),
        ("b.jsonl:4", "a.jsonl:2"),
    ]  # fmt: skip


def test_unusable_files_raise_errors_that_name_them(tmp_path):
    pl.DataFrame({"text": [1, 2]}).write_parquet(tmp_path / "numbers.parquet")
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    with pytest.raises(DataError, match=r"numbers.parquet: column 'text' holds Int64"):
        run_ingest(
            tmp_path, {"name": "p", "location": "numbers.parquet", "format": "parquet", **common}
        )
    (tmp_path / "x.csv").write_text("body\nhello\n")
    with pytest.raises(DataError, match=r"x.csv: source 'c' maps column\(s\) text .*it has: body"):
        run_ingest(tmp_path, {"name": "c", "location": "x.csv", "format": "csv", **common})
    with pytest.raises(
        DataError, match=r"source 'gone': location 'missing/\*.jsonl' matches no file"
    ):
        run_ingest(
            tmp_path, {"name": "gone", "location": "missing/*.jsonl", "format": "jsonl", **common}
        )


def test_identities_do_not_depend_on_where_a_machine_keeps_the_files(tmp_path, sms_spam):
    ids = []
    for machine in ("machine-a/opt/data", "machine-b/srv"):
        folder = tmp_path / machine
        write_jsonl(folder / "2012" / "sms.jsonl", sms_rows(sms_spam, 0, 5))
        write_jsonl(folder / "2013" / "sms.jsonl", sms_rows(sms_spam, 5, 9))
        records, _, _ = run_ingest(
            tmp_path,
            jsonl_source(location=str(folder / "*" / "sms.jsonl"), fields={"text": "text"}),
        )
        ids.append(sorted(zip(records["location"], records["record_id"], strict=True)))
        single, _, _ = run_ingest(
            tmp_path,
            jsonl_source(location=str(folder / "2012" / "sms.jsonl"), fields={"text": "text"}),
        )
        assert single["location"][0] == "sms.jsonl:1"
    assert ids[0] == ids[1]
    assert ids[0][0] == ("2012/sms.jsonl:1", xxh(f"sms{SEP}2012/sms.jsonl{SEP}1"))


def test_names_stay_put_when_files_are_added_elsewhere(tmp_path, sms_spam):
    data = tmp_path / "data"
    write_jsonl(data / "a" / "x.jsonl", sms_rows(sms_spam, 0, 2))
    source = jsonl_source(location=str(data / "**" / "*.jsonl"), fields={"text": "text"})
    before, _, _ = run_ingest(tmp_path, source)
    write_jsonl(data / "b" / "y.jsonl", sms_rows(sms_spam, 2, 3))
    after, _, _ = run_ingest(tmp_path, source)
    assert set(before["location"]) == {"a/x.jsonl:1", "a/x.jsonl:2"}
    assert set(before["record_id"]) < set(after["record_id"])


def test_root_names_files_and_clashing_names_are_refused(tmp_path, sms_spam):
    for folder in ("one", "two"):
        write_jsonl(tmp_path / "srv" / folder / "sms.jsonl", sms_rows(sms_spam, 0, 1))
    files = [str(tmp_path / "srv" / f / "sms.jsonl") for f in ("one", "two")]
    with pytest.raises(
        DataError, match=r"would both be named 'sms.jsonl'.*set the source's `root`"
    ):
        run_ingest(tmp_path, jsonl_source(location=files, fields={"text": "text"}))
    rooted = jsonl_source(
        root=str(tmp_path / "srv"),
        location=["one/sms.jsonl", "two/sms.jsonl"],
        fields={"text": "text"},
    )
    records, _, _ = run_ingest(tmp_path, rooted)
    assert sorted(records["location"]) == ["one/sms.jsonl:1", "two/sms.jsonl:1"]


def test_parquet_timestamps_of_every_kind_become_utc(tmp_path):
    moment = datetime(2021, 3, 4, 5, 6, 7)
    pl.DataFrame(
        {
            "text": ["naive", "nanoseconds", "zoned", "date"],
            "naive": [moment] * 4,
        }
    ).with_columns(
        pl.col("naive").cast(pl.Datetime("ns")).alias("ns"),
        pl.col("naive").dt.replace_time_zone("Europe/Berlin").alias("zoned"),
        pl.col("naive").dt.date().alias("day"),
    ).write_parquet(tmp_path / "t.parquet")
    common = {
        "location": "t.parquet",
        "format": "parquet",
        "license": "MIT",
        "consent": "contract",
        "owner": "us",
    }
    expected = {
        "naive": "2021-03-04 05:06:07+00:00",
        "ns": "2021-03-04 05:06:07+00:00",
        "zoned": "2021-03-04 04:06:07+00:00",
        "day": "2021-03-04 00:00:00+00:00",
    }
    for column, when in expected.items():
        records, events, _ = run_ingest(
            tmp_path, {"name": "p", **common, "fields": {"text": "text", "timestamp": column}}
        )
        assert events.height == 0 and {str(t) for t in records["timestamp"]} == {when}, column


def test_malformed_csv_rows_are_dropped_and_named(tmp_path):
    (tmp_path / "in.csv").write_text(
        'id,text\n1,fine\n2,one,too many\n3,"also fine"\n4,"never closed\n5,lost\n'
    )
    records, events, stats = run_ingest(
        tmp_path,
        csv_source(),
    )
    assert sorted(records["text"]) == ["also fine", "fine"]
    found = {
        json.loads(e)["row"]: r for e, r in zip(events["evidence"], events["reason"], strict=True)
    }
    assert found == {
        2: reasons.MALFORMED_ROW,
        4: reasons.MALFORMED_ROW,
    }  # the open quote swallows the rest
    assert stats["records_in"] == 4


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("2023-01-05T10:00:00+01:00", "2023-01-05 09:00:00+00:00"),
        ("Thu, 05 Jan 2023 14:55:25 -0500", "2023-01-05 19:55:25+00:00"),
        ("20230105", "2023-01-05 00:00:00+00:00"),
        ("1700000000", "2023-11-14 22:13:20+00:00"),
        ("2023", None),  # a year alone is not an epoch time
        ("yesterday", None),
    ],
)
def test_timestamp_formats(raw, parsed):
    result = parse_timestamps(pl.Series([raw]), None)[0]
    assert (str(result) if result is not None else None) == parsed


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(
        codecs.BOM_UTF8 + orjson.dumps({"id": "a", "text": "first"}) + b"\n"
    )
    (tmp_path / "in.csv").write_bytes(codecs.BOM_UTF8 + b"id,text\nb,second\n")
    common = {
        "license": "MIT",
        "consent": "contract",
        "owner": "us",
        "fields": {"text": "text", "id": "id"},
    }
    records, events, _ = run_ingest(
        tmp_path,
        {"name": "j", "location": "in.jsonl", "format": "jsonl", **common},
        {"name": "c", "location": "in.csv", "format": "csv", **common},
    )
    assert events.height == 0 and sorted(records["record_id"]) == sorted(
        [xxh(f"j{SEP}a"), xxh(f"c{SEP}b")]
    )


def test_parquet_columns_nobody_mapped_may_hold_any_type(tmp_path):
    pl.DataFrame(
        {
            "text": ["a message"],
            "when": [[datetime(2020, 1, 1)]],
            "image": [b"\x89PNG\x00"],
            "blob": [b"\x00\x01"],
        }
    ).write_parquet(tmp_path / "t.parquet")
    fields = {"text": "text", "metadata": ["blob"]}
    records, events, _ = run_ingest(
        tmp_path,
        {
            "name": "p",
            "location": "t.parquet",
            "format": "parquet",
            "fields": fields,
            "license": "MIT",
            "consent": "contract",
            "owner": "us",
        },
    )
    assert events.height == 0 and json.loads(records["metadata"][0]) == {"blob": "0001"}


def test_csv_ids_do_not_depend_on_which_reader_ran(tmp_path):
    clean = "text,label\nfirst,a\n\nthird,b\nshort\n"
    (tmp_path / "in.csv").write_text(clean)
    source = csv_source(fields={"text": "text", "label": "label"})
    before, before_events, _ = run_ingest(tmp_path, source)
    (tmp_path / "in.csv").write_text(clean + "late,c,extra field\n")  # polars refuses this file
    after, after_events, _ = run_ingest(tmp_path, source)
    assert sorted(zip(before["location"], before["record_id"], strict=True)) == sorted(
        zip(after["location"], after["record_id"], strict=True)
    )
    assert before_events["reason"].to_list() == [reasons.MISSING_TEXT]  # the blank line, row 2
    assert after_events["reason"].to_list() == [reasons.MISSING_TEXT, reasons.MALFORMED_ROW]
    assert [json.loads(e)["row"] for e in after_events["evidence"]] == [2, 5]


def test_jsonl_values_read_the_same_on_both_paths(tmp_path):
    lines = [
        b'{"id": 3.0, "text": "a", "m": {"k": [1, 2.5]}}',
        b'{"id": 100000000000000000000, "text": "b", "m": 1e5}',
        b'{"id": 100000000000000000001, "text": "c", "m": true}',
    ]
    fields = {"text": "text", "id": "id", "metadata": ["m"]}
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines))
    fast, _, _ = run_ingest(tmp_path, jsonl_source(fields=fields))
    (tmp_path / "in.jsonl").write_bytes(
        b"\n".join([lines[0], b"", lines[1], lines[2]])
    )  # a blank line
    careful, _, _ = run_ingest(tmp_path, jsonl_source(fields=fields))
    assert fast.height == careful.height == 3
    assert sorted(zip(fast["text"], fast["record_id"], fast["metadata"], strict=True)) == sorted(
        zip(careful["text"], careful["record_id"], careful["metadata"], strict=True)
    )


@pytest.mark.parametrize("blank_line", [False, True])
def test_a_lone_surrogate_escape_is_invalid_json_on_both_paths(tmp_path, blank_line):
    lines = [b'{"id": "a", "text": "fine"}', b'{"id": "b", "text": "x \\ud800 y"}']
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines[:1] + [b""] * blank_line + lines[1:]))
    records, events, _ = run_ingest(tmp_path, jsonl_source(fields={"text": "text", "id": "id"}))
    assert records["text"].to_list() == ["fine"] and events["reason"].to_list() == [
        reasons.INVALID_JSON
    ]


def test_a_declared_encoding_is_used_to_find_lines(tmp_path):
    text = '{"id": "a", "text": "caf\u00e9"}\n{"id": "b", "text": "na\u00efve"}\n'
    (tmp_path / "in.jsonl").write_bytes(text.encode("utf-16"))
    records, events, stats = run_ingest(
        tmp_path, jsonl_source(encoding="utf-16", fields={"text": "text", "id": "id"})
    )
    assert stats["records_in"] == 2 and events.height == 0
    assert sorted(records["text"]) == ["caf\u00e9", "na\u00efve"]


def run_ingest_with(root: Path, ingest: dict, *declarations: dict):
    sources = [SourceDeclaration(**{**d, "base_dir": str(root)}) for d in declarations]
    cfg = RunConfig(name="t", workdir=str(root / "work"), sources=sources, ingest=ingest)
    ctx = RunContext(run_id="r", run_dir=root / "work", config=cfg, config_hash=config_hash(cfg))
    result = ingest_stage(sources, ctx, root / "work" / "ingested", cfg.ingest)
    return result.frame.collect(), result.events, result.stats


def _by_location(events: pl.DataFrame) -> dict[tuple[str, int], tuple[str, dict]]:
    found = {}
    for evidence, reason in zip(events["evidence"], events["reason"], strict=True):
        where = json.loads(evidence)
        found[where.pop("file"), where.pop("line", None) or where.pop("row")] = (reason, where)
    return found


def test_an_oversized_text_or_line_is_dropped_where_it_is_read_and_the_rest_read(tmp_path):
    rows = [json.dumps({"id": n, "text": f"message {n}"}) for n in range(6)]
    rows[1] = json.dumps({"id": "long", "text": "x" * 1_500})  # over the text bound
    rows[3] = json.dumps({"id": "huge", "text": "y" * 9_000})  # over the line bound: unread
    (tmp_path / "in.jsonl").write_text("\n".join(rows) + "\n")
    bounds = {"max_text_chars": 1_000, "max_record_bytes": 8_000}
    records, events, stats = run_ingest_with(
        tmp_path, bounds, jsonl_source(fields={"text": "text", "id": "id"})
    )
    assert stats["records_in"] == 6
    assert sorted(records["text"]) == [f"message {n}" for n in (0, 2, 4, 5)]
    assert _by_location(events) == {
        ("in.jsonl", 2): (reasons.TEXT_TOO_LONG, {"chars": 1_500}),
        ("in.jsonl", 4): (reasons.RECORD_TOO_LARGE, {}),
    }


def test_a_source_sets_its_own_text_bound_for_csv_and_text_files(tmp_path):
    (tmp_path / "in.csv").write_text(f'id,text\n1,short\n2,"{"z" * 5_000}"\n3,after\n')
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "big.txt").write_text("w" * 100_000)
    (tmp_path / "t" / "small.txt").write_text("a note")
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    records, events, _ = run_ingest_with(
        tmp_path,
        {"max_text_chars": 100_000},
        csv_source(max_text_chars=1_000),
        {"name": "t", "location": "t/*.txt", "format": "text", "max_text_chars": 1_000, **common},
    )
    assert sorted(records["text"]) == ["a note", "after", "short"]
    assert _by_location(events) == {
        ("in.csv", 2): (reasons.TEXT_TOO_LONG, {"chars": 5_000}),
        ("t/big.txt", 1): (reasons.TEXT_TOO_LONG, {"chars": 100_000}),
    }


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_sources_give_the_records_of_the_plain_file(tmp_path, sms_spam, suffix):
    import bz2
    import lzma

    import pyarrow as pa

    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 30))
    plain, _, _ = run_ingest(tmp_path, SMS_SOURCE)
    data = (tmp_path / "data" / "sms-1.jsonl").read_bytes()
    compress = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".zst": lambda raw: pa.compress(raw, codec="zstd", asbytes=True),
    }[suffix]
    packed = tmp_path / "packed"
    (packed / "data").mkdir(parents=True)
    (packed / "data" / "sms-1.jsonl").write_bytes(compress(data))  # the plain name, for ids
    (packed / "data" / "sms-1.jsonl").rename(packed / "data" / f"sms-1.jsonl{suffix}")
    records, events, _ = run_ingest(packed, {**SMS_SOURCE, "location": "data/sms*.jsonl*"})
    assert events["reason"].to_list() == [reasons.ENCODING_REPAIRED]  # one real damaged SMS
    assert records.height == plain.height == 30
    assert records["text"].to_list() == plain["text"].to_list()


def test_a_file_none_of_whose_rows_can_be_read_stops_the_run_naming_the_likely_cause(tmp_path):
    rows = "".join(json.dumps({"id": n, "text": f"m {n}"}) + "\n" for n in range(10))
    (tmp_path / "in.jsonl").write_bytes(gzip.compress(rows.encode()))  # compressed, plain name
    with pytest.raises(DataError) as error:
        run_ingest(tmp_path, jsonl_source(fields={"text": "text", "id": "id"}))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'in.jsonl'}: none of its ")
    assert "likely it is .gz-compressed: name it with the .gz suffix" in message
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "in.jsonl").write_text("id,text\n1,not json\n")
    with pytest.raises(
        DataError,
        match=r"in.jsonl: none of its 2 rows could be read \(2 invalid_json\); likely it is not jsonl",
    ):
        run_ingest(tmp_path / "other", jsonl_source(fields={"text": "text", "id": "id"}))


def test_records_and_bad_rows_do_not_depend_on_where_blocks_of_lines_begin(
    tmp_path, sms_spam, monkeypatch
):
    from pipeline.ingest import readers

    lines = [orjson.dumps(row) for row in sms_rows(sms_spam, 0, 40)]
    lines[5], lines[17] = b'{"id": "cut", "text": "no end"', b""
    lines[23] = b"\xef\xbb\xbf" + lines[23]  # a byte order mark inside the file is no BOM
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sms-1.jsonl").write_bytes(codecs.BOM_UTF8 + b"\n".join(lines))
    whole = run_ingest(tmp_path, SMS_SOURCE)
    monkeypatch.setattr(readers, "BLOCK_BYTES", 97)  # blocks of a line or two
    shutil.rmtree(tmp_path / "work")
    blocks = run_ingest(tmp_path, SMS_SOURCE)
    assert blocks[0].sort("record_id").equals(whole[0].sort("record_id"))
    assert blocks[1].sort("record_id").equals(whole[1].sort("record_id"))
    dropped = whole[1].filter(pl.col("action") == reasons.DROPPED)
    reasons_at = dict(zip(dropped["evidence"], dropped["reason"], strict=True))
    assert reasons_at == {
        '{"file":"data/sms-1.jsonl","line":6}': reasons.INVALID_JSON,
        '{"file":"data/sms-1.jsonl","line":24}': reasons.INVALID_JSON,
    }


def test_a_source_whose_files_hold_bytes_but_give_no_record_is_a_warning(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "scan.txt").write_bytes(b"\xff\xfe\x00\x81" * 100)  # not UTF-8 text
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    records, events, stats = run_ingest(
        tmp_path, {"name": "notes", "location": "t/*.txt", "format": "text", **common}
    )
    assert records.height == 0 and events["reason"].to_list() == [reasons.INVALID_UTF8]
    assert stats["warnings"] == [
        "source 'notes': its files hold 400 bytes but gave no record (1 rows read, 1 dropped at "
        "ingest; see the report's drop reasons)"
    ]


def test_bounds_hold_for_utf16_lines_and_over_long_changelog_lines(tmp_path):
    rows = [
        {"id": "a", "text": "short"},
        {"id": "b", "text": "é" * 300},
        {"id": "c", "text": "après"},
    ]
    lines = "\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n"
    (tmp_path / "in.jsonl").write_bytes(lines.encode("utf-16"))
    packed = tmp_path / "debian" / "p" / "changelog.Debian.gz"
    packed.parent.mkdir(parents=True)
    entry = "p ({v}) unstable; urgency=low\n\n  * {change}\n\n -- Ann <ann@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n\n"
    header_too_long = entry.format(v="3", change="fine").replace("unstable", "x" * 300)
    body_too_long = entry.format(v="2", change="y" * 300)
    packed.write_bytes(
        gzip.compress((header_too_long + body_too_long + entry.format(v="1", change="ok")).encode())
    )
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    records, events, stats = run_ingest_with(
        tmp_path,
        {"max_record_bytes": 200},
        jsonl_source(encoding="utf-16", fields={"text": "text", "id": "id"}),
        {
            "name": "changelogs",
            "location": "debian/*/changelog.Debian.gz",
            "format": "debian_changelog",
            **common,
        },
    )
    assert sorted(records["text"]) == ["* ok", "après", "short"]
    assert _by_location(events) == {
        ("in.jsonl", 2): (reasons.RECORD_TOO_LARGE, {}),
        ("debian/p/changelog.Debian.gz", 1): (
            reasons.RECORD_TOO_LARGE,
            {},
        ),  # its header: still counted
        ("debian/p/changelog.Debian.gz", 7): (reasons.RECORD_TOO_LARGE, {}),
    }
    assert stats["records_in"] == 6


def test_one_unreadable_row_is_a_bad_record_not_a_wrong_declaration(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "cut sho')  # a file being written
    entry = "p (1) unstable; urgency=low\n\n  * caf\xe9\n\n -- Ann <a@b.c>  Mon, 01 Jan 2024 00:00:00 +0000\n"
    packed = tmp_path / "debian" / "p" / "changelog.Debian.gz"
    packed.parent.mkdir(parents=True)
    packed.write_bytes(gzip.compress(entry.encode("latin-1")))  # an old Latin-1 changelog
    common = {"license": "MIT", "consent": "contract", "owner": "us"}
    records, events, _ = run_ingest(
        tmp_path,
        jsonl_source(fields={"text": "text", "id": "id"}),
        {
            "name": "changelogs",
            "location": "debian/*/changelog.Debian.gz",
            "format": "debian_changelog",
            **common,
        },
    )
    assert records.height == 0
    assert sorted(events["reason"]) == [reasons.INVALID_JSON, reasons.INVALID_UTF8]


def test_encoding_damage_in_real_sms_is_repaired_as_an_edit(tmp_path, sms_spam):
    """Real messages whose Windows-1252 apostrophes arrived as C1 control characters (U+0092)
    are repaired with ftfy: the published text has the apostrophe, `source_content_hash` is
    the text as the source gave it, and an `edited` event names ftfy's steps. A repeated id's
    repair is not attributed to the record it repeats; with the repair off the text stays."""
    damaged = sms_spam.filter(pl.col("text").str.contains("\x92"))
    assert damaged.height >= 20
    rows = sms_rows(damaged, 0, 20)
    rows.append({**rows[0], "text": "A later copy of sms-x with that\x92s damage"})
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    records, events, stats = run_ingest(tmp_path, SMS_SOURCE)
    assert records.height == 20 and stats["bad_rows"] == 1 and stats["encoding_repaired"] == 20
    by_location = {row["location"]: row for row in records.iter_rows(named=True)}
    for line, row in enumerate(rows[:20], start=1):
        record = by_location[f"data/sms-1.jsonl:{line}"]
        as_given = normalize_text(pl.Series([row["text"]]))[0]
        assert record["text"] == "".join(  # each C1 control back to its Windows-1252 mark
            bytes([ord(c)]).decode("cp1252") if "\x80" <= c <= "\x9f" else c for c in as_given
        )
        assert record["source_content_hash"] == xxh(as_given)
        assert record["content_hash"] == xxh(record["text"])
    edits = events.filter(pl.col("action") == reasons.EDITED)
    assert sorted(edits["record_id"]) == sorted(records["record_id"])
    assert {json.loads(e)["steps"][-1] for e in edits["evidence"]} == {"decode:windows-1252"}
    repeat = events.filter(pl.col("action") == reasons.DROPPED)
    assert repeat["reason"].to_list() == [reasons.DUPLICATE_SOURCE_ID]
    assert repeat["record_id"][0] not in set(edits["record_id"])

    off = tmp_path / "off"
    write_jsonl(off / "data" / "sms-1.jsonl", rows[:20])
    sources = [SourceDeclaration(**{**SMS_SOURCE, "base_dir": str(off)})]
    cfg = RunConfig(name="t", workdir=str(off / "work"), sources=sources)
    ctx = RunContext(run_id="r", run_dir=off / "work", config=cfg, config_hash=config_hash(cfg))
    kept = ingest(
        sources, ctx, off / "work" / "in", cfg.ingest.model_copy(update={"repair_encoding": False})
    )
    assert kept.events.height == 0
    assert kept.frame.collect()["text"].str.contains("\x92").all()


def test_repair_reads_the_text_as_given_and_covers_every_script(tmp_path):
    """The repair reads the text before whitespace normalization (a misread no-break space or
    U+0085 would be a plain space after it), repairs mojibake of any script, and a text it
    leaves empty is a bad row; a retried `finish` gives the same edits."""
    texts = {
        "nel": "See you later\x85",
        "nbsp": "voil\u00c3\u00a0 tout",
        "cyrillic": "\u00d0\u00bf\u00d1\u20ac\u00d0\u00b8\u00d0\u00b2\u00d0\u00b5\u00d1\u201a",
        "lines": "caf\u00c3\u00a9 ok\n\u00e4\u00b8\u00ad\u00e6\u2013\u2021 text",
        "empty": "\u00e2\u20ac\u0192",
        "clean": "Caf\u00e9 \u00e0 Z\u00fcrich, d\u00e9j\u00e0 vu \u00bb fine",
    }
    write_jsonl(tmp_path / "in.jsonl", [{"id": k, "text": v} for k, v in texts.items()])
    records, events, _ = run_ingest(tmp_path, jsonl_source(fields={"text": "text", "id": "id"}))
    by_line = {f"in.jsonl:{n}": key for n, key in enumerate(texts, start=1)}
    published = {
        by_line[where]: text for where, text in records.select("location", "text").iter_rows()
    }
    assert published == {
        "nel": "See you later\u2026",
        "nbsp": "voil\u00e0 tout",
        "cyrillic": "\u043f\u0440\u0438\u0432\u0435\u0442",
        "lines": "caf\u00e9 ok\n\u4e2d\u6587 text",
        "clean": texts["clean"],
    }
    dropped = events.filter(pl.col("action") == reasons.DROPPED)
    assert dropped["reason"].to_list() == [reasons.EMPTY_TEXT]
    edits = events.filter(pl.col("action") == reasons.EDITED)
    assert edits.height == 4

    from pipeline.ingest.stage import finish

    again = finish(tmp_path / "work" / "ingested")  # a retried finish: the same edits
    assert sorted(again["record_id"]) == sorted(edits["record_id"])
