"""A torch `IterableDataset` over a published version folder or a `thresher export --format
parquet` folder, for training code of your own (plain loops, the Hugging Face Trainer,
Lightning): every shard of the split is re-hashed against the folder's manifest.json before
the first row (once per process), and a withdrawn version is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from torch.utils.data import IterableDataset, get_worker_info

from pipeline.core.errors import DataError
from pipeline.publish.reader import read_version, verify_shards

_VERIFIED: set[tuple[str, str, int, int]] = set()  # (shard, sha256, size, mtime) this process


def verify_shards_once(folder: Path, shards: Sequence[dict[str, Any]]) -> None:
    """Re-hash each shard (`verify_shards`) unless this process already did at its current
    size and modification time."""
    keys = {}
    for shard in shards:
        file = folder / shard["path"]
        if file.exists():
            stat = file.stat()
            keys[shard["path"]] = (
                str(file.resolve()),
                shard["sha256"],
                stat.st_size,
                stat.st_mtime_ns,
            )
    unverified = [s for s in shards if keys.get(s["path"]) not in _VERIFIED]
    problems = verify_shards(folder, {"shards": unverified})
    if problems:
        listed = "; ".join(f"{folder / p.path}: {p.problem}" for p in problems)
        raise DataError(
            f"version at {folder} failed verification ({listed}); do not train on it — restore "
            "the shards or publish again"
        )
    _VERIFIED.update(keys[s["path"]] for s in unverified)


def share(
    rows: Sequence[int], rank: int, world_size: int, worker: int = 0, workers: int = 1
) -> tuple[list[int], int, int, int]:
    """Consumer (rank, worker)'s share of a split whose shards hold `rows` rows: (the shards
    it reads, in order; offset, stride, end): it keeps rows offset, offset + stride, … below
    `end` of their concatenated stream.

    Ranks first: rank r reads shards r, r + world_size, … when that gives every rank the same
    number of rows, else every shard, keeping rows r, r + world_size, … of the first
    `total - total % world_size` (as torch's DistributedSampler with drop_last: at most
    world_size − 1 rows left out). Either way every rank yields as many rows, so data
    parallel ranks step together. Then the rank's DataLoader workers divide its share the
    same way, leaving nothing out. Shares are disjoint; a rank's does not depend on its
    number of workers."""
    shards = list(range(len(rows)))
    whole = [shards[r::world_size] for r in range(world_size)]
    if len({sum(rows[i] for i in part) for part in whole}) == 1:
        shards, offset, stride = whole[rank], 0, 1
        end = sum(rows[i] for i in shards)
    else:
        total = sum(rows)
        offset, stride, end = rank, world_size, total - total % world_size
    if stride == 1 and len(shards) % workers == 0:
        shards = shards[worker::workers]
        end = sum(rows[i] for i in shards)
    else:
        offset, stride = offset + worker * stride, stride * workers
    return shards, offset, stride, end


class VerifiedParquetDataset(IterableDataset):
    """Rows of one split of a published version folder (or a parquet export), one dict
    of `columns` per row, after every shard of the split is re-hashed against the
    folder's manifest.json (once per process; a withdrawn version is refused).

    Under data parallelism give `rank` and `world_size`; DataLoader workers are found with
    `get_worker_info()`. Shards are divided among ranks, then among a rank's workers, or
    rows when the shards do not divide evenly (`share`): the shares are disjoint and cover
    the split. `len()` is this rank's row count. With `dataset_hash`, the manifest must be
    that version's (its hash recomputed from its content).
    """

    def __init__(
        self,
        path: str | Path,
        split: str,
        columns: Sequence[str] | None = ("text", "label"),
        rank: int = 0,
        world_size: int = 1,
        dataset_hash: str | None = None,
        batch_rows: int = 1024,
    ):
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.path, self.split = Path(path), split
        self.rank, self.world_size, self.batch_rows = rank, world_size, batch_rows
        # refuses a withdrawn version, and a manifest that is not `dataset_hash`'s
        manifest = read_version(self.path, verify=False, expected_hash=dataset_hash).manifest
        if split not in manifest["split_counts"]:
            raise DataError(
                f"version at {self.path} has no {split!r} split "
                f"(it has: {', '.join(manifest['split_counts'])})"
            )
        published = [field["name"] for field in manifest["schema"]]
        self.columns = list(columns) if columns else published
        unknown = [c for c in self.columns if c not in published]
        if unknown:
            raise DataError(
                f"version at {self.path} has no column {', '.join(map(repr, unknown))} "
                f"(it has: {', '.join(published)})"
            )
        self.dataset_hash: str = manifest["dataset_hash"]
        self.shards = [s for s in manifest["shards"] if s["split"] == split]

    def verify(self) -> None:
        """Re-hash the split's shards now (done before the first row anyway): called in
        the main process before a DataLoader forks its workers, they need not again."""
        verify_shards_once(self.path, self.shards)

    def __len__(self) -> int:
        """Rows this rank yields, all its DataLoader workers together: the same on every rank."""
        _, offset, stride, end = share(self._rows, self.rank, self.world_size)
        return len(range(offset, end, stride))

    @property
    def _rows(self) -> list[int]:
        return [shard["rows"] for shard in self.shards]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.verify()
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        mine, offset, stride, end = share(self._rows, self.rank, self.world_size, worker, workers)
        position = 0  # of the first row of the next batch, in the stream of `mine`
        for index in mine:
            parquet = pq.ParquetFile(self.path / self.shards[index]["path"])
            for batch in parquet.iter_batches(self.batch_rows, columns=self.columns):
                rows = batch.to_pylist()[: max(0, end - position)]
                first = max(offset - position, (offset - position) % stride)
                position += batch.num_rows
                yield from rows[first::stride]
                if position >= end:
                    return
