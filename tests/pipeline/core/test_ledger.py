"""The accounting identity: in + generated = published + dropped + quarantined, once each."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core import ledger, reasons
from pipeline.core.errors import AccountingError


def events(*rows):
    frame = pl.DataFrame([{"record_id": r, "source": "s"} for r, _ in rows])
    parts = [
        ledger.events(frame.slice(i, 1), stage="x", action=action, reason=None)
        for i, (_, action) in enumerate(rows)
    ]
    return pl.concat(parts).lazy()


def test_balanced_ledger_returns_counts():
    log = events(
        ("a", reasons.PUBLISHED),
        ("b", reasons.DROPPED),
        ("c", reasons.QUARANTINED),
        ("a", reasons.EDITED),
    )
    assert ledger.check_accounting(log, records_in=3) == {
        "published": 1,
        "dropped": 1,
        "quarantined": 1,
    }


def test_lost_record_fails_loudly():
    with pytest.raises(
        AccountingError, match=r"4 records in \+ 0 generated = 4, but 1 published \+ 1 dropped"
    ):
        ledger.check_accounting(
            events(("a", reasons.PUBLISHED), ("b", reasons.DROPPED)), records_in=4
        )


def test_record_with_two_terminal_events_fails_loudly():
    with pytest.raises(
        AccountingError, match="1 record\\(s\\) have more than one terminal event \\(e.g. a\\)"
    ):
        ledger.check_accounting(
            events(("a", reasons.PUBLISHED), ("a", reasons.DROPPED)), records_in=1
        )


def test_generated_records_count_on_the_input_side():
    log = events(("a", reasons.PUBLISHED), ("a2", reasons.PUBLISHED))
    assert ledger.check_accounting(log, records_in=1, generated=1)["published"] == 2


def test_a_record_lost_and_another_invented_fail_though_the_counts_agree():
    log = events(
        ("a", reasons.PUBLISHED),
        ("x", reasons.DROPPED),  # x was never read in; b, which was, has no fate
        ("g", reasons.GENERATED),
        ("g", reasons.PUBLISHED),
    )
    read_in = ledger.ids_digest(pl.LazyFrame({"record_id": ["a", "b"]}))
    assert ledger.check_accounting(log, records_in=2, generated=1)["published"] == 2  # counts
    with pytest.raises(AccountingError, match="not the records read in and generated"):
        ledger.check_accounting(log, records_in=2, generated=1, ids_in=read_in)
    fair = ledger.ids_digest(pl.LazyFrame({"record_id": ["x", "a"]}))  # any order
    assert ledger.check_accounting(log, records_in=2, generated=1, ids_in=fair)["dropped"] == 1


def test_parts_are_consolidated_in_stage_order(tmp_path):
    parts = tmp_path / "parts"
    ledger.write_part(events(("b", reasons.PUBLISHED)).collect(), parts, "2-later")
    ledger.write_part(events(("a", reasons.DROPPED)).collect(), parts, "1-first")
    target = ledger.consolidate(parts, tmp_path / "ledger.parquet")
    assert pl.read_parquet(target)["record_id"].to_list() == ["a", "b"] and not parts.exists()


def test_a_stage_run_in_parts_gives_the_ledger_of_one_part(tmp_path):
    """A stage's events end in record-id order however many parts it ran in (a record's own
    events keep their order), so the ledger does not depend on the part size."""
    rows = [(r, reasons.EDITED) for r in "fbdace"] + [(r, reasons.PUBLISHED) for r in "fbdace"]
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    ledger.write_part(events(("z", reasons.DROPPED)).collect(), whole, "01-ingest-00000")
    ledger.write_part(events(*rows).collect(), whole, "02-govern-00000")
    ledger.write_part(events(("z", reasons.DROPPED)).collect(), parted, "01-ingest-00000")
    for number, ids in enumerate(("fb", "da", "ce")):
        part = [row for row in rows if row[0] in ids]
        ledger.write_part(events(*part).collect(), parted, f"02-govern-{number:05d}")
    one = pl.read_parquet(ledger.consolidate(whole, tmp_path / "one.parquet"))
    three = pl.read_parquet(ledger.consolidate(parted, tmp_path / "three.parquet"))
    assert one.equals(three)
    assert three["record_id"].to_list() == ["z", *[r for r in "abcdef" for _ in range(2)]]
    assert three["action"].to_list()[1:3] == [reasons.EDITED, reasons.PUBLISHED]


def test_a_stage_s_parts_merge_in_record_order_a_slice_at_a_time(tmp_path, monkeypatch):
    """Three parts of one stage, read 4,096 events of each at a time, and a record with two
    events across a slice's edge: one ledger in record-id order, each record's own events
    in the order its stage wrote them."""
    monkeypatch.setattr(ledger, "MERGE_ROWS", 1)  # the smallest slice: 4,096 a part
    ids = [f"{number:06d}" for number in range(15_000)]
    parts = tmp_path / "parts"
    for part in range(3):
        mine = ids[part::3]
        edited = pl.DataFrame({"record_id": mine, "source": "s"})
        written = ledger.events(edited, stage="x", action=reasons.EDITED, reason=None)
        written = pl.concat([written, events((mine[4_095], reasons.DROPPED)).collect()])
        ledger.write_part(written, parts, f"1-x-{part}")
    ledger.write_part(events(("000000", reasons.PUBLISHED)).collect(), parts, "2-y")
    merged = pl.read_parquet(ledger.consolidate(parts, tmp_path / "ledger.parquet"))
    assert merged.height == 15_000 + 3 + 1
    first_stage = merged.head(15_003)
    assert first_stage["record_id"].to_list() == sorted(first_stage["record_id"])
    for part in range(3):
        edge = ids[part::3][4_095]  # the last of the first slice, its second event after it
        assert merged.filter(pl.col("record_id") == edge)["action"].to_list()[:2] == [
            reasons.EDITED, reasons.DROPPED
        ]  # fmt: skip
    assert merged.row(-1, named=True)["action"] == reasons.PUBLISHED  # the later stage last


def test_a_repeated_fate_that_hides_a_lost_record_is_named_with_the_ids_read_in():
    log = events(("a", reasons.PUBLISHED), ("a", reasons.DROPPED))  # b, read in, has no fate
    read_in = ledger.ids_digest(pl.LazyFrame({"record_id": ["a", "b"]}))
    with pytest.raises(AccountingError, match=r"1 record\(s\) have more than one terminal"):
        ledger.check_accounting(log, records_in=2, ids_in=read_in)
