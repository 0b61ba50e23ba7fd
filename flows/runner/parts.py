"""How many records each part of a stage holds: sized from the stage's input and the run's
workers, so that every worker has several parts to take (a slow part does not leave the
others idle), never more than `runner.part_rows` (which bounds a worker's memory), and the
parts of a stage about equal (5,182 records in parts of at most 5,000 are two of 2,591, not
5,000 and 182: the stage's next step waits on its largest part)."""

from __future__ import annotations

PARTS_PER_WORKER = 4
# below this, a part's fixed cost (opening its input, writing its files) outweighs its work
MIN_PART_ROWS = 5_000


def rows_per_part(records: int, workers: int, most: int) -> int:
    wanted = -(-records // (workers * PARTS_PER_WORKER))
    largest = max(1, min(most, max(wanted, MIN_PART_ROWS)))
    parts = max(1, -(-records // largest))
    return max(1, -(-records // parts))


def ingest_part_bytes(source_bytes: int, workers: int, most: int) -> int:
    """The bytes of an ingest part: sized as other stages' parts are, a record taken as 1 KiB
    (rounded up: a source smaller than a part is one part, not a part and a short tail)."""
    return rows_per_part(-(-source_bytes // 1024), workers, most) * 1024


def offsets(records: int, rows: int) -> list[int]:
    """Where each part of `rows` records starts (one part when there are none)."""
    return list(range(0, max(records, 1), rows))
