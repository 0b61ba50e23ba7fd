"""Training data: the seeded order, the rank shares, resuming by position, eligibility, and
the test split kept out of sight until the final evaluation."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import training.data
from pipeline.config.train import TrainConfig
from pipeline.core import storage
from pipeline.core.errors import DataError
from pipeline.publish.reader import PublishedVersion
from training.data import SplitStream, TrainingData, batches, rank_share
from training.run import train

# rows per split: (source, label) of each row, written in row groups of ROW_GROUP rows
ROW_GROUP = 7


def shard(folder, split, number, rows):
    """A parquet shard of `rows` ((source, label) pairs) whose texts name their place."""
    path = folder / "data" / f"{split}-{number:05d}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = pl.DataFrame(
        {
            "text": [f"{split}/{number}/{row}" for row in range(len(rows))],
            "source": [source for source, _ in rows],
            "label": [label for _, label in rows],
        },
        schema={"text": pl.String, "source": pl.String, "label": pl.String},
    )
    frame.write_parquet(path, row_group_size=ROW_GROUP)
    assert pq.ParquetFile(path).metadata.num_row_groups == -(-len(rows) // ROW_GROUP)
    return {"path": f"data/{path.name}", "split": split}


def synthetic_version(folder, splits) -> PublishedVersion:
    """A version whose manifest lists the given shards (split -> list of row lists)."""
    shards = [
        shard(folder, split, number, rows)
        for split, files in splits.items()
        for number, rows in enumerate(files)
    ]
    counts = {split: sum(len(rows) for rows in files) for split, files in splits.items()}
    manifest = {"dataset_hash": "f" * 64, "shards": shards, "split_counts": counts}
    return PublishedVersion(path=folder, manifest=manifest)


def labelled(count, source="a", labels=("0", "1")):
    return [(source, labels[row % len(labels)]) for row in range(count)]


@pytest.fixture
def stream(tmp_path) -> SplitStream:
    """73 train rows in two shards: 40 rows (6 row groups) and 33 rows (5 row groups)."""
    version = synthetic_version(tmp_path, {"train": [labelled(40), labelled(33)]})
    found = SplitStream(version, "train", [])
    assert len(found) == 73 and len(found.row_groups) == 11
    return found


def test_order_is_a_seeded_permutation_that_changes_by_epoch(stream):
    first = stream.order(seed=13, epoch=0, window=10)
    assert sorted(first.tolist()) == list(range(73))
    assert np.array_equal(first, stream.order(seed=13, epoch=0, window=10))
    assert not np.array_equal(first, stream.order(seed=13, epoch=1, window=10))
    assert not np.array_equal(first, stream.order(seed=14, epoch=0, window=10))
    assert not np.array_equal(first, np.arange(73))
    # a window of one row keeps rows in row-group order: only the row groups are shuffled
    grouped = stream.order(seed=13, epoch=0, window=1)
    assert sorted(grouped.tolist()) == list(range(73))
    assert any(np.diff(grouped) < 0) and sum(np.diff(grouped) != 1) <= 10


def test_examples_follow_positions_to_their_rows(stream):
    order = stream.order(seed=13, epoch=0, window=10)
    texts = [example.text for example in stream.examples(order)]
    everything = [f"train/0/{r}" for r in range(40)] + [f"train/1/{r}" for r in range(33)]
    assert sorted(texts) == sorted(everything)
    assert texts == [everything[position] for position in order.tolist()]
    assert [example.label for example in stream.examples(np.array([0, 1, 40, 41]))] == [
        "0",
        "1",
        "0",
        "1",
    ]


@pytest.mark.parametrize("world", [2, 3])
def test_rank_shares_are_disjoint_equal_and_cover_all_but_the_remainder(stream, world):
    order = stream.order(seed=13, epoch=0, window=10)
    shares = [rank_share(order, rank, world) for rank in range(world)]
    remainder = len(order) % world
    assert remainder  # 73 rows: 1 left over for 2 ranks and for 3
    assert {len(share) for share in shares} == {len(order) // world}
    for rank, share in enumerate(shares):
        for other in shares[rank + 1 :]:
            assert not set(share.tolist()) & set(other.tolist())
    union = set(np.concatenate(shares).tolist())
    assert union == set(order[: len(order) - remainder].tolist())
    assert set(order.tolist()) - union == set(order[len(order) - remainder :].tolist())


@pytest.mark.parametrize("start", [0, 1, 5, 9, 10])
def test_batches_from_start_skip_exactly_that_many_batches(start):
    share = np.arange(37) * 3
    everything = list(batches(share, 4))
    assert len(everything) == 10 and len(everything[-1]) == 1
    resumed = list(batches(share, 4, start=start))
    assert len(resumed) == 10 - start
    assert all(np.array_equal(a, b) for a, b in zip(resumed, everything[start:], strict=True))


def test_sources_filter_and_unlabelled_records_are_skipped_and_counted(tmp_path):
    train_rows = labelled(20, "a") + labelled(10, "b") + [("a", None)] * 4
    validation_rows = labelled(6, "a") + [("a", "2")] * 3 + labelled(5, "b") + [("a", None)] * 2
    version = synthetic_version(
        tmp_path,
        {"train": [train_rows], "validation": [validation_rows], "test": [labelled(9, "a")]},
    )
    data = TrainingData(version, TrainConfig(objective="classification", sources=["a"]))
    assert (len(data.train), data.train.skipped) == (20, 14)
    assert data.labels == ["0", "1"]
    # a label train never had ("2") cannot be scored: skipped like the other source and nulls
    assert (len(data.validation), data.validation.skipped) == (6, 10)
    # why, by the first condition a row fails (the train sources, then the label)
    assert data.train.skipped_by == {"not in train.sources": 10, "no label": 4}
    assert data.validation.skipped_by == {
        "not in train.sources": 5,
        "no label": 2,
        "a label train does not have": 3,
    }
    assert data.train.described() == "20 records (14 skipped: not in train.sources 10, no label 4)"
    texts = [example.text for example in data.train.examples(np.arange(len(data.train)))]
    assert texts == [f"train/0/{row}" for row in range(20)]

    everything = TrainingData(version, TrainConfig(objective="classification"))
    assert (len(everything.train), everything.train.skipped) == (30, 4)

    language_model = TrainingData(version, TrainConfig(objective="causal_lm", sources=["b"]))
    assert (len(language_model.train), language_model.train.skipped) == (10, 24)
    unlabelled_too = TrainingData(version, TrainConfig(objective="causal_lm"))
    assert (len(unlabelled_too.train), unlabelled_too.train.skipped) == (34, 0)

    with pytest.raises(DataError, match="no train records of sources c with a label"):
        TrainingData(version, TrainConfig(objective="classification", sources=["c"]))


def test_the_test_split_is_read_once(tmp_path):
    version = synthetic_version(
        tmp_path, {"train": [labelled(10)], "validation": [labelled(4)], "test": [labelled(5)]}
    )
    data = TrainingData(version, TrainConfig(objective="classification"))
    assert not data.test_was_read
    test = data.final_test()
    assert data.test_was_read and len(test) == 5 and test.split == "test"
    with pytest.raises(DataError, match="read once"):
        data.final_test()


def test_training_does_not_open_the_test_split_before_the_final_evaluation(project, monkeypatch):
    """Every parquet read of training.data, in order, during a real run."""
    reads: list[str] = []
    parquet_file = storage.parquet_file

    def spy_parquet_file(path, *args, **kwargs):
        reads.append(f"open {path}")
        return parquet_file(path, *args, **kwargs)

    final_test = TrainingData.final_test

    def spy_final_test(self):
        reads.append("final_test")
        return final_test(self)

    monkeypatch.setattr(training.data.storage, "parquet_file", spy_parquet_file)
    monkeypatch.setattr(TrainingData, "final_test", spy_final_test)
    result = train(project.config)

    shards = json.loads((project.version_path / "manifest.json").read_text())["shards"]
    test_shards = [str(project.version_path / s["path"]) for s in shards if s["split"] == "test"]
    assert test_shards
    touched = [i for i, read in enumerate(reads) if any(p in read for p in test_shards)]
    assert reads.count("final_test") == 1
    assert touched and min(touched) > reads.index("final_test")
    train_shards = [str(project.version_path / s["path"]) for s in shards if s["split"] == "train"]
    assert any(train_shards[0] in read for read in reads[: reads.index("final_test")])
    assert result.manifest["dataset"]["records"]["test"] > 0
    assert result.manifest["metrics"]["test_evaluations"] == 1


def test_a_window_of_sparse_eligible_rows_is_read_once_per_row_group():
    """Rows eligible in few places (a minority source, few labels) spread a shuffle window
    over many row groups: each is decoded once per epoch, not once per example."""
    from training.data import SplitStream

    stream = SplitStream.__new__(SplitStream)
    sizes = [3] * 40  # 40 row groups of 3 eligible rows each
    stream.row_groups = [None] * len(sizes)
    stream._starts = np.concatenate([[0], np.cumsum(sizes)])
    stream._cache = OrderedDict()
    stream._cache_size = 4
    reads = []

    def read_row_group(group):
        reads.append(group)
        return [f"t{group}-{i}" for i in range(3)], [None] * 3

    stream._read_row_group = read_row_group
    order = stream.order(seed=1, epoch=0, window=120)
    texts = [example.text for example in stream.examples(order)]
    assert sorted(texts) == sorted(f"t{g}-{i}" for g in range(40) for i in range(3))
    assert sorted(reads) == list(range(40))
