"""Training data: a published version opened through its manifest, streamed in a seeded order.

The version is opened by dataset hash (or `latest`) through the catalog; every shard is
re-hashed against the manifest before anything is read, and a withdrawn version is
refused. Batches stream from the shards' row groups: each epoch shuffles the order of the
row groups, then the rows within windows of `shuffle_window` rows, with a generator seeded
by (seed, epoch). The order is a pure function of the seed, the epoch and the row counts,
so a resumed run finds its place by position alone. Under data parallelism rank r takes
every world-th row of that order: the shares are disjoint and equal in size.

The test split is read once, by `final_test`, after the model is chosen.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from data_catalog import open_version
from pipeline.config.train import TrainConfig
from pipeline.core import storage
from pipeline.core.errors import DataError
from pipeline.publish.reader import PublishedVersion


@dataclass(frozen=True)
class RowGroup:
    path: storage.Location
    index: int
    rows: np.ndarray  # offsets of the eligible rows within the row group


@dataclass(frozen=True)
class Example:
    text: str
    label: str | None


def skipped_text(skipped_by: dict[str, int]) -> str:
    """` (104 skipped: no label 104)`, or "" when nothing was skipped."""
    reasons = {reason: n for reason, n in skipped_by.items() if n}
    why = ", ".join(f"{reason} {n}" for reason, n in reasons.items())
    return f" ({sum(reasons.values())} skipped: {why})" if reasons else ""


class SplitStream:
    """One split of a version: its eligible rows, readable by global position."""

    def __init__(
        self,
        version: PublishedVersion,
        split: str,
        conditions: list[tuple[str, pl.Expr]],
        features: tuple[str, ...] = (),
    ):
        self.split = split
        self.features = features
        files = [
            version.path / s["path"] for s in version.manifest["shards"] if s["split"] == split
        ]
        self.row_groups: list[RowGroup] = []
        # rows of the split that are not eligible, by the first condition (reason) they fail
        self.skipped_by: dict[str, int] = {reason: 0 for reason, _ in conditions}
        labels: set[str] = set()
        for path in files:
            parquet = storage.parquet_file(path)
            metadata = parquet.metadata
            keep = pl.from_arrow(parquet.read(columns=["source", "label"])).with_row_index("row")
            for reason, condition in conditions:
                before = keep.height
                keep = keep.filter(condition)
                self.skipped_by[reason] += before - keep.height
            kept = keep["row"].to_numpy().astype(np.int64)
            labels.update(label for label in keep["label"].unique().to_list() if label is not None)
            start = 0
            for index in range(metadata.num_row_groups):
                end = start + metadata.row_group(index).num_rows
                rows = kept[(kept >= start) & (kept < end)] - start
                if len(rows):
                    self.row_groups.append(RowGroup(path, index, rows))
                start = end
        sizes = np.array([len(group.rows) for group in self.row_groups], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(sizes)])
        self.labels = sorted(labels)
        self._cache: OrderedDict[int, tuple[list[str], list[str | None]]] = OrderedDict()
        self._cache_size = 4  # row groups; `order` raises it to what one window can span

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def skipped(self) -> int:
        return sum(self.skipped_by.values())

    def described(self) -> str:
        """`32 records (104 skipped: no label 104)`."""
        return f"{len(self)} records{skipped_text(self.skipped_by)}"

    def order(self, seed: int, epoch: int, window: int) -> np.ndarray:
        """Global positions in this epoch's order: row groups shuffled, then rows per window."""
        # a window of shuffled rows draws from every row group it spans: keep them all cached
        # (their eligible rows only: about one window of texts)
        smallest_first = np.cumsum(np.sort(np.diff(self._starts)))
        spans = int(np.searchsorted(smallest_first, window)) + 2
        self._cache_size = max(4, min(len(self.row_groups), spans))
        rng = np.random.default_rng([seed, epoch])
        sequence = np.concatenate(
            [
                np.arange(self._starts[g], self._starts[g + 1])
                for g in rng.permutation(len(self.row_groups))
            ]
            or [np.empty(0, dtype=np.int64)]
        )
        for start in range(0, len(sequence), window):
            part = sequence[start : start + window]
            sequence[start : start + window] = part[rng.permutation(len(part))]
        return sequence

    def examples(self, positions: np.ndarray) -> list[Example]:
        groups = np.searchsorted(self._starts, positions, side="right") - 1
        found = []
        for position, group in zip(positions.tolist(), groups.tolist(), strict=True):
            texts, labels = self._read(group)
            offset = position - int(self._starts[group])
            found.append(Example(texts[offset], labels[offset]))
        return found

    def _read(self, group: int) -> tuple[list[str], list[str | None]]:
        if group not in self._cache:
            self._cache[group] = self._read_row_group(group)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(group)
        return self._cache[group]

    def _read_row_group(self, group: int) -> tuple[list[str], list[str | None]]:
        """The eligible rows' texts and labels of one row group; with features, each text
        follows a `field: value` line per feature."""
        row_group = self.row_groups[group]
        columns = ["text", "label", "metadata"] if self.features else ["text", "label"]
        table = storage.parquet_file(row_group.path).read_row_group(
            row_group.index, columns=columns
        )
        rows = row_group.rows.tolist()
        texts = [table["text"][i].as_py() for i in rows]
        if self.features:
            texts = [
                with_features(text, table["metadata"][i].as_py(), self.features)
                for text, i in zip(texts, rows, strict=True)
            ]
        return texts, [table["label"][i].as_py() for i in rows]


def with_features(text: str, metadata: str | None, features: tuple[str, ...]) -> str:
    fields = json.loads(metadata) if metadata else {}
    lines = [f"{name}: {'' if fields.get(name) is None else fields[name]}" for name in features]
    return "\n".join([*lines, text])


def check_features(version: PublishedVersion, cfg: TrainConfig) -> None:
    """Refuse, before training starts, a feature the version does not publish for the
    trained sources: one excluded as known only after the outcome, or an unknown one."""
    fields = version.manifest.get("fields", {})
    published, excluded = fields.get("published", {}), fields.get("excluded", {})
    sources = cfg.sources or sorted(published)
    offered = sorted({name for source in sources for name in published.get(source, [])})
    for feature in cfg.features:
        if feature in offered:
            continue
        excluding = [source for source in sources if feature in excluded.get(source, [])]
        if excluding:
            raise DataError(
                f"train.features asks for {feature!r}, which version "
                f"{version.dataset_hash[:12]} excludes: source {', '.join(excluding)} declares it "
                "known_after_outcome (known only after the label was decided), so it would leak "
                "the label; remove it from train.features"
            )
        raise DataError(
            f"train.features asks for {feature!r}, which is not a field version "
            f"{version.dataset_hash[:12]} publishes for the trained sources (published: "
            f"{', '.join(offered) or 'none'}); fix the name or remove it from train.features"
        )


def rank_share(order: np.ndarray, rank: int, world: int) -> np.ndarray:
    """Rank r's positions: every world-th, after trimming so that all shares are equal."""
    usable = len(order) - len(order) % world
    return order[:usable][rank::world]


def batches(share: np.ndarray, batch_size: int, start: int = 0) -> Iterator[np.ndarray]:
    for begin in range(start * batch_size, len(share), batch_size):
        yield share[begin : begin + batch_size]


class TrainingData:
    """The version's train and validation streams; the test stream only through `final_test`."""

    def __init__(self, version: PublishedVersion, cfg: TrainConfig):
        self.version = version
        self.cfg = cfg
        conditions: list[tuple[str, pl.Expr]] = []
        if cfg.sources:
            conditions.append(("not in train.sources", pl.col("source").is_in(cfg.sources)))
        if cfg.objective == "classification":
            conditions.append(("no label", pl.col("label").is_not_null()))
        self._conditions = conditions
        self._features = tuple(cfg.features)
        self.train = SplitStream(version, "train", conditions, self._features)
        if not len(self.train):
            wanted = f" of sources {', '.join(cfg.sources)}" if cfg.sources else ""
            labels = " with a label" if cfg.objective == "classification" else ""
            raise DataError(
                f"version {version.dataset_hash[:12]} has no train records{wanted}{labels}; "
                "check train.sources and the split fractions"
            )
        self.labels = self.train.labels
        if cfg.objective == "classification":  # a label the model never saw cannot be scored
            unseen = ("a label train does not have", pl.col("label").is_in(self.labels))
            self._conditions = [*conditions, unseen]
        self.validation = SplitStream(version, "validation", self._conditions, self._features)
        self._test_read = False

    def final_test(self) -> SplitStream:
        if self._test_read:
            raise DataError("the test split is read once, for the final evaluation only")
        self._test_read = True
        return SplitStream(self.version, "test", self._conditions, self._features)

    @property
    def test_was_read(self) -> bool:
        return self._test_read


def open_training_version(workdir: str | Path, name: str, ref: str) -> PublishedVersion:
    """Open `ref` (hash, prefix or `latest`) of dataset `name`, every shard re-hashed first."""
    version = open_version(workdir, name, ref, verify=True)
    if "train" not in version.split_names:
        raise DataError(
            f"version {version.dataset_hash[:12]} has no train split to train on; give the train "
            "split a fraction in the config's split section and publish again"
        )
    return version
