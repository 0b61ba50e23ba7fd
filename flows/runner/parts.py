"""How many records each part of a stage holds: sized from the stage's input and the run's
workers, so that every worker has several parts to take (a slow part does not leave the
others idle), never more than `runner.part_rows` (which bounds a worker's memory)."""

from __future__ import annotations

PARTS_PER_WORKER = 4
# below this, a part's fixed cost (opening its input, writing its files) outweighs its work
MIN_PART_ROWS = 5_000


def rows_per_part(records: int, workers: int, most: int) -> int:
    wanted = -(-records // (workers * PARTS_PER_WORKER))
    return max(1, min(most, max(wanted, MIN_PART_ROWS)))


def offsets(records: int, rows: int) -> list[int]:
    """Where each part of `rows` records starts (one part when there are none)."""
    return list(range(0, max(records, 1), rows))
