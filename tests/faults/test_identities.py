"""Fault suite, crafted ids: a declared id can never equal a position identity. The id
`data/s.jsonl\\x1f5` once hashed like line 5 of data/s.jsonl, so when that line was invalid
the run had two terminal events for one record and published nothing."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import xxhash
from helpers import SMS_SOURCE

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.core import reasons
from pipeline.core.identity import KEY_SEPARATOR, record_id_of
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext


def ingested(root: Path, lines: list[str]):
    (root / "data").mkdir()
    (root / "data" / "s.jsonl").write_text("\n".join(lines) + "\n")
    source = SourceDeclaration(**{**SMS_SOURCE, "location": "data/s.jsonl", "base_dir": str(root)})
    cfg = RunConfig(name="t", workdir=str(root / "work"), sources=[source])
    ctx = RunContext(run_id="r", run_dir=root / "work", config=cfg, config_hash=config_hash(cfg))
    result = ingest([source], ctx, root / "work" / "ingested")
    return result.frame.collect(), result.events


def test_an_id_spelling_a_position_is_not_that_position(tmp_path):
    crafted = f"data/s.jsonl{KEY_SEPARATOR}5"
    lines = [json.dumps({"id": f"m{n}", "text": f"message number {n} here"}) for n in range(4)]
    lines += ["{not json", json.dumps({"id": crafted, "text": "a row with a crafted id"})]
    records, events = ingested(tmp_path, lines)
    bad = events.filter(pl.col("reason") == reasons.INVALID_JSON)
    assert bad.height == 1 and records.height == 5
    # line 5 is identified by position, the crafted row by its id: two identities
    position = xxhash.xxh3_128_hexdigest(f"sms{KEY_SEPARATOR}{crafted}".encode())
    assert bad["record_id"].to_list() == [position]
    crafted_row = records.filter(pl.col("text") == "a row with a crafted id")
    assert crafted_row["record_id"].to_list() == [record_id_of("sms", crafted)] != [position]
    # one identity, one fate: no kept record shares an id with a dropped line
    dropped = events.filter("terminal")["record_id"]
    assert not records["record_id"].is_in(dropped.implode()).any()


def test_ids_without_the_separator_keep_the_identity_they_always_had(tmp_path):
    """The dataset hash of data without such ids is unchanged: their record_ids are the same
    xxh3-128 of source, separator, id as before; escaped ids cannot meet unescaped ones."""
    assert record_id_of("sms", "sms-0") == xxhash.xxh3_128_hexdigest(b"sms\x1fsms-0")
    assert record_id_of("sms", "\x00x") != record_id_of("sms", "x")
    assert record_id_of("sms", "\x00x") == xxhash.xxh3_128_hexdigest(b"sms\x1f\x00\x00x")
    records, _ = ingested(tmp_path, [json.dumps({"id": "plain", "text": "a plain message here"})])
    assert records["record_id"].to_list() == [xxhash.xxh3_128_hexdigest(b"sms\x1fplain")]
