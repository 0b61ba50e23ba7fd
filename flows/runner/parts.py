"""How many records each part of a stage holds: sized from the stage's input and the run's
workers, so that every worker has several parts to take (a slow part does not leave the
others idle), never more than `runner.part_rows` (which bounds a worker's memory), and the
parts of a stage equal (5,182 records in parts of at most 5,000 are two of 2,591, not 5,000
and 182: the stage's last step waits on its largest part)."""

from __future__ import annotations

PARTS_PER_WORKER = 4
# below this, a part's fixed cost (opening its input, writing its files) outweighs its work
MIN_PART_ROWS = 5_000


def rows_per_part(records: int, workers: int, most: int, least: int = MIN_PART_ROWS) -> int:
    """`least`: the floor of a stage whose records cost more than usual (the registry's
    `min_part_rows`)."""
    wanted = -(-records // (workers * PARTS_PER_WORKER))
    largest = max(1, min(most, max(wanted, least)))
    parts = max(1, -(-records // largest))
    return max(1, -(-records // parts))


def offsets(records: int, rows: int) -> list[int]:
    """Where each part of `rows` records starts (one part when there are none)."""
    return list(range(0, max(records, 1), rows))
