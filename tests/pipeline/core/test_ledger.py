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
