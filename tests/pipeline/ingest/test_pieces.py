"""Large files: cut into pieces that separate parts read (JSON Lines, Parquet), or streamed
in blocks (CSV); the records, bad rows and stats are those of reading each file whole."""

from __future__ import annotations

import codecs
import gzip
import io
import json
from pathlib import Path

import orjson
import polars as pl
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl

from flows.runner.parts import ingest_part_bytes
from pipeline.config import IngestConfig, SourceDeclaration
from pipeline.core import reasons
from pipeline.core.errors import DataError
from pipeline.core.normalize import normalize_text
from pipeline.ingest import files, readers
from pipeline.ingest.pieces import Piece, file_pieces
from pipeline.ingest.stage import finish, ingest_stats, plan_parts, read_part

COMMON = {"license": "CC-BY-4.0", "consent": "public-release", "owner": "UCI"}
LIMITS = IngestConfig(max_record_bytes=2_000)
HUGE = 1 << 40


def ingest_in_parts(root: Path, declarations: list[dict], part_bytes: int, limits=LIMITS):
    """What the curate flow does: plan the parts, read each, drop the repeated ids."""
    sources = {d["name"]: SourceDeclaration(**d, base_dir=str(root)) for d in declarations}
    out = root / f"ingested-{part_bytes}"
    parts = plan_parts(list(sources.values()), part_bytes)
    per_source = {name: {"records_in": 0} for name in sources}
    bad_rows = []
    for part in parts:
        rows_in, bad = read_part(part, sources[part.source], out, limits)
        per_source[part.source]["records_in"] += rows_in
        bad_rows.append(bad)
    events = pl.concat([*bad_rows, finish(out)])
    records = pl.concat(pl.read_parquet(path) for path in sorted(out.glob("part-*.parquet")))
    return parts, records, events, ingest_stats(per_source, events, parts)


def write_inputs(root: Path, sms_spam: pl.DataFrame) -> list[dict]:
    """A source of each format, with bad rows, repairs and repeats spread through its files."""
    rows = sms_rows(sms_spam, 0, 60)  # row 18 holds a cp1252 apostrophe read as a C1 control
    lines = [orjson.dumps(row) for row in rows]
    lines[7] = b'{"id": "cut", "text": "no end'
    lines[12] = b""
    lines[20] = orjson.dumps({**rows[20], "text": "x" * 3_000})  # over max_record_bytes
    lines[31] = orjson.dumps({**rows[31], "text": 31})
    lines[50] = orjson.dumps({**rows[50], "id": rows[2]["id"]})  # a repeat, pieces later
    (root / "data").mkdir()
    (root / "data" / "sms-1.jsonl").write_bytes(codecs.BOM_UTF8 + b"\n".join(lines))

    sms_spam.slice(60, 40).with_columns(
        pl.datetime(2020, 1, 2, time_zone="UTC").alias("sent")
    ).write_parquet(root / "sms.parquet", row_group_size=5)

    texts = sms_spam["text"].slice(100, 30).to_list()
    texts = [
        f'{text}\n"quoted", on a line of its own' if n % 3 else text for n, text in enumerate(texts)
    ]
    csv = io.StringIO()
    pl.DataFrame({"index": [str(n) for n in range(30)], "text": texts}).write_csv(csv)
    data = csv.getvalue().encode() + b"30,one,too many\n\n31,not \xff text\n32,last\n"
    (root / "csv").mkdir()
    (root / "csv" / "a.csv").write_bytes(data)
    (root / "csv" / "b.csv.gz").write_bytes(gzip.compress(data))

    (root / "notes").mkdir()
    for number, text in enumerate(sms_spam["text"].slice(130, 3)):
        (root / "notes" / f"{number}.txt").write_text(text * (40 if number == 1 else 1))
    return [
        {**SMS_SOURCE},
        {"name": "pq", "location": "sms.parquet", "format": "parquet", **COMMON,
         "fields": {"text": "text", "id": "index", "timestamp": "sent"}},
        *({"name": name, "location": f"csv/{name}", "format": "csv", **COMMON,
           "fields": {"text": "text", "id": "index"}} for name in ("a.csv", "b.csv.gz")),
        {"name": "notes", "location": "notes/*.txt", "format": "text", **COMMON},
    ]  # fmt: skip


def test_files_read_in_pieces_give_the_records_and_bad_rows_of_whole_files(
    tmp_path, sms_spam, monkeypatch
):
    declarations = write_inputs(tmp_path, sms_spam)
    whole_parts, *whole = ingest_in_parts(tmp_path, declarations, HUGE)
    monkeypatch.setattr(readers, "BLOCK_BYTES", 300)  # CSV streamed a row or two at a time
    parts, *pieces = ingest_in_parts(tmp_path, declarations, 1_000)

    assert len(whole_parts) == 5  # a part per source
    read = [file for part in parts for batch in part.batches for file in batch]
    cut = {file.name: [] for file in read}
    for file in read:
        cut[file.name].append(file.piece)
    assert len(cut["data/sms-1.jsonl"]) >= 10 and len(cut["sms.parquet"]) >= 3
    whole_files = [cut[name] for name in ("csv/a.csv", "csv/b.csv.gz", "notes/1.txt")]
    assert whole_files == [[None]] * 3  # CSV is streamed instead; a text file is one record
    assert len({part.number for part in parts if part.source == "sms"}) >= 10

    records, events, stats = pieces
    assert records.equals(whole[0])  # same records, in the same order
    assert events.equals(whole[1])
    assert stats == whole[2]
    assert sum(part.bytes for part in parts if part.source == "sms") == (
        (tmp_path / "data" / "sms-1.jsonl").stat().st_size
    )
    assert stats["sources"] == {
        "sms": {"records_in": 59, "bad_rows": 4, "encoding_repaired": 1},
        "pq": {"records_in": 40},
        "a.csv": {"records_in": 34, "bad_rows": 3},
        "b.csv.gz": {"records_in": 34, "bad_rows": 3},
        "notes": {"records_in": 3},
    }
    bad = events.filter(pl.col("reason") != reasons.DUPLICATE_SOURCE_ID)
    bad = bad.filter(pl.col("action") == reasons.DROPPED)
    where = {
        (json.loads(e)["file"], json.loads(e).get("line") or json.loads(e)["row"]): r
        for e, r in zip(bad["evidence"], bad["reason"], strict=True)
    }
    assert where == {
        ("data/sms-1.jsonl", 8): reasons.INVALID_JSON,
        ("data/sms-1.jsonl", 21): reasons.RECORD_TOO_LARGE,
        ("data/sms-1.jsonl", 32): reasons.WRONG_TYPE,
        **{(name, 31): reasons.MALFORMED_ROW for name in ("csv/a.csv", "csv/b.csv.gz")},
        **{(name, 32): reasons.MISSING_TEXT for name in ("csv/a.csv", "csv/b.csv.gz")},
        **{(name, 33): reasons.INVALID_UTF8 for name in ("csv/a.csv", "csv/b.csv.gz")},
    }
    edited = events.filter(pl.col("action") == reasons.EDITED)["record_id"]
    assert records.filter(pl.col("record_id").is_in(edited.to_list()))["location"].to_list() == [
        "data/sms-1.jsonl:19"
    ]
    repeat = events.filter(pl.col("reason") == reasons.DUPLICATE_SOURCE_ID)
    assert json.loads(repeat["evidence"][0])["location"] == "data/sms-1.jsonl:51"
    sms = records.filter(pl.col("source") == "sms")
    assert sms["location"][:3].to_list() == [f"data/sms-1.jsonl:{n}" for n in (1, 2, 3)]
    assert sms["location"][-1] == "data/sms-1.jsonl:60"
    pq = records.filter(pl.col("source") == "pq")
    assert pq["location"].to_list() == [f"sms.parquet:{n}" for n in range(1, 41)]
    assert pq["text"].to_list() == normalize_text(sms_spam["text"].slice(60, 40)).to_list()
    multiline = records.filter(pl.col("location") == "csv/b.csv.gz:2")["text"]
    expected = pl.Series([f'{sms_spam["text"][101]}\n"quoted", on a line of its own'])
    assert multiline.to_list() == normalize_text(expected).to_list()


def test_a_piece_read_again_gives_the_same_part(tmp_path, sms_spam):
    declarations = write_inputs(tmp_path, sms_spam)
    source = SourceDeclaration(**declarations[0], base_dir=str(tmp_path))
    part = plan_parts([source], 1_000)[3]
    first = read_part(part, source, tmp_path / "out", LIMITS)
    written = pl.read_parquet(tmp_path / "out" / "part-*.parquet")
    again = read_part(part, source, tmp_path / "out", LIMITS)  # a retry rewrites its files
    assert first[0] == again[0] and first[1].equals(again[1])
    assert pl.read_parquet(tmp_path / "out" / "part-*.parquet").equals(written)
    assert written["location"][0] == f"data/sms-1.jsonl:{part.batches[0][0].piece.first}"


def test_a_source_smaller_than_a_part_is_one_part(tmp_path, sms_spam):
    """Ingest sizes its parts from the sources' bytes, a record taken as 1 KiB: rounded down,
    a one-file source of 1,025 bytes or more would be a part and a tail of a few bytes."""
    path, rows = tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 200)
    # the first file of 100 or more messages whose last KiB holds several lines
    next(n for n in range(100, 200) if write_jsonl(path, rows[:n]).stat().st_size % 1024 > 600)
    source = SourceDeclaration(**SMS_SOURCE, base_dir=str(tmp_path))
    size = path.stat().st_size
    assert len(plan_parts([source], size // 1024 * 1024)) == 2  # a part and a tail
    (part,) = plan_parts([source], ingest_part_bytes(size, workers=2, most=500_000))
    assert part.bytes == size


def test_line_pieces_start_after_a_newline_and_know_their_first_line(tmp_path):
    lines = [f'{{"n": {n}, "pad": "{"x" * (n % 7) * 10}"}}'.encode() for n in range(200)]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines))  # no newline at the end
    data = path.read_bytes()
    source = SourceDeclaration(
        name="s", location="in.jsonl", format="jsonl", fields={"text": "pad"}, **COMMON
    )
    pieces = file_pieces(path, source, len(data), 1_000)
    assert len(pieces) > 5
    assert pieces[0][0].start == 0 and pieces[-1][0].stop == len(data)
    for (piece, share), (following, _) in zip(pieces, pieces[1:], strict=False):
        assert piece.stop == following.start and data[piece.stop - 1] == ord("\n")
        assert share == piece.stop - piece.start >= 1_000
    for piece, _ in pieces:
        assert piece.first == data[: piece.start].count(b"\n") + 1
        assert data[piece.start :].startswith(f'{{"n": {piece.first - 1},'.encode())
    assert file_pieces(path, source, len(data), len(data)) == []  # small enough: whole
    gzipped = tmp_path / "in.jsonl.gz"
    gzipped.write_bytes(gzip.compress(data) * 50)
    assert file_pieces(gzipped, source, gzipped.stat().st_size, 1_000) == []  # streamed whole


def test_parquet_pieces_are_whole_row_groups(tmp_path):
    path = tmp_path / "in.parquet"
    pl.DataFrame({"text": [f"row {n} " * 20 for n in range(100)]}).write_parquet(
        path, row_group_size=10
    )
    source = SourceDeclaration(name="p", location="in.parquet", format="parquet", **COMMON)
    size = path.stat().st_size
    pieces = file_pieces(path, source, size, 1)
    assert [piece for piece, _ in pieces] == [Piece(n, n + 10, n + 1) for n in range(0, 100, 10)]
    assert sum(share for _, share in pieces) == size
    (path.parent / "broken.parquet").write_bytes(b"PAR1 not really")
    assert file_pieces(path.parent / "broken.parquet", source, 15, 1) == []  # its reader says


def test_a_file_read_in_pieces_is_unreadable_only_when_every_row_is(tmp_path):
    declaration = {
        "name": "j", "location": "in.jsonl", "format": "jsonl", "fields": {"text": "text"},
        **COMMON,
    }  # fmt: skip
    garbage = b"id,text\n" + b"1,not json at all\n" * 200
    (tmp_path / "in.jsonl").write_bytes(garbage)
    for part_bytes in (HUGE, 500):
        with pytest.raises(
            DataError, match=r"none of its 201 rows could be read \(201 invalid_json\)"
        ):
            ingest_in_parts(tmp_path, [declaration], part_bytes)
    # the first pieces unreadable, the file not: bad rows, as when read whole
    (tmp_path / "in.jsonl").write_bytes(garbage + b'{"text": "at last"}\n')
    parts, records, events, _ = ingest_in_parts(tmp_path, [declaration], 500)
    assert len(parts) > 5 and records["location"].to_list() == ["in.jsonl:202"]
    assert events["reason"].to_list() == [reasons.INVALID_JSON] * 201


def test_csv_blocks_end_at_row_ends_outside_quotes():
    data = b'a,b\n1,"two\nlines"\n2,"say ""hi""\n"\n3,plain\n'
    blocks = list(files.csv_blocks(io.BytesIO(data), 6))
    assert b"".join(blocks) == data
    assert blocks == [b"a,b\n", b'1,"two\nlines"\n', b'2,"say ""hi""\n"\n', b"3,plain\n"]
    left_open = b'a,b\n1,"never closed\n2,x\n3,y\n'
    assert list(files.csv_blocks(io.BytesIO(left_open), 4)) == [b"a,b\n", left_open[4:]]
