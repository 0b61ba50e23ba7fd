"""`thresher export`: each format round-trips the published version it was verified from.

One version of 200 SMS messages (train 172, validation 21, test 7), published once for the
module (tests/conftest.py keeps the module's tests on one xdist worker); each export is
checked against the published shards and the tokenizer run directly.
"""

from __future__ import annotations

import json
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import trainkit
from tokenizers import Tokenizer
from torch.utils.data import DataLoader
from typer.testing import CliRunner

from flows.cli import app
from pipeline.core.errors import DataError
from pipeline.core.storage import file_sha256
from pipeline.publish.reader import read_version, recomputed_hash
from training import export as exporting
from training import token_export
from training.parquet_dataset import VerifiedParquetDataset, share
from training.readers import EXPORT_MANIFEST, TokenShards, load_hf_export
from training.tokenization import files_digest, minilm_word_pieces

SPLITS = ("train", "validation", "test")
COLUMNS = ["record_id", "text", "label"]


@pytest.fixture(scope="module")
def project(tmp_path_factory, sms_spam) -> trainkit.Project:
    """200 SMS messages published; the config's tokenizer is a byte-level BPE of 300."""
    return trainkit.sms_project(tmp_path_factory.mktemp("export"), sms_spam, 200, trainkit.tiny())


@pytest.fixture(scope="module")
def minilm_tokens(project) -> Path:
    out = project.root / "exports" / "minilm-tokens"
    exporting.export_version(project.workdir, project.dataset_hash[:10], "tokens", out=out)
    return out


@pytest.fixture(scope="module")
def parquet_export(project) -> Path:
    out = project.root / "exports" / "parquet"
    exporting.export_version(project.workdir, project.dataset_hash, "parquet", out=out)
    return out


def published(project: trainkit.Project, split: str) -> list[dict]:
    """The split's rows (record_id, text, label) in shard and row order."""
    version = project.version_path
    shards = json.loads((version / "manifest.json").read_text())["shards"]
    return [
        row
        for shard in shards
        if shard["split"] == split
        for row in pq.read_table(version / shard["path"], columns=COLUMNS).to_pylist()
    ]


def restamped(manifest: dict) -> dict:
    """A hand-made version: its split counts and dataset hash made to match its shards."""
    counts = {split: 0 for split in manifest["split_counts"]}
    for shard in manifest["shards"]:
        counts[shard["split"]] += shard["rows"]
    manifest = {**manifest, "split_counts": counts}
    return {**manifest, "dataset_hash": recomputed_hash(manifest)}


def flip_byte(path: Path, at: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_version_has_every_split(project):
    assert [len(published(project, split)) for split in SPLITS] == [172, 21, 7]


def test_minilm_token_shards_are_the_texts_tokenized_directly(project, minilm_tokens):
    tokenizer, digest = minilm_word_pieces()
    tokenizer.encode_special_tokens = True
    separator = tokenizer.token_to_id("[SEP]")
    shards = TokenShards(minilm_tokens, workdir=project.workdir)
    manifest = shards.manifest
    assert manifest["tokenizer"] | {"path": None} == {
        "kind": "minilm",
        "name": "all-MiniLM-L6-v2 WordPiece",
        "path": None,
        "digest": digest,
        "vocab_size": 30522,
        "separator": "[SEP]",
        "separator_id": separator,
        "files": "tokenizer/",
        "add_special_tokens": False,
        "special_tokens_in_text": "encoded as text (tokenizers' encode_special_tokens)",
        "dtype": "uint16",
    }
    assert shards.dtype == np.dtype("<u2") and separator == 102
    for split in SPLITS:
        rows = published(project, split)
        expected = [tokenizer.encode(r["text"], add_special_tokens=False).ids for r in rows]
        tokens, offsets = shards.tokens(split), shards.offsets(split)
        assert shards.record_ids(split) == [r["record_id"] for r in rows]
        assert len(offsets) == len(rows) + 1 and offsets[0] == 0 and offsets[-1] == len(tokens)
        for i, ids in enumerate(expected):
            document = tokens[offsets[i] : offsets[i + 1]]
            assert document.tolist() == ids + [separator], (split, i)
        assert [(rid, doc.tolist()) for rid, doc in shards.documents(split)] == [
            (r["record_id"], ids + [separator]) for r, ids in zip(rows, expected, strict=True)
        ]
        raw = (minilm_tokens / "tokens" / split / "part-00000.bin").read_bytes()
        assert len(raw) == 2 * len(tokens) and np.frombuffer(raw, "<u2").tolist() == tokens.tolist()
        # the index, byte by byte as Megatron-LM's _IndexReader reads it
        index = (minilm_tokens / "tokens" / split / "part-00000.idx").read_bytes()
        assert index[:9] == b"MMIDIDX\x00\x00"
        assert struct.unpack_from("<QBQQ", index, 9) == (1, 8, len(rows), len(rows) + 1)
        lengths = np.frombuffer(index, "<i4", len(rows), 34)
        pointers = np.frombuffer(index, "<i8", len(rows), 34 + 4 * len(rows))
        documents = np.frombuffer(index, "<i8", len(rows) + 1, 34 + 12 * len(rows))
        assert lengths.tolist() == [len(ids) + 1 for ids in expected]
        assert pointers.tolist() == (2 * offsets[:-1]).tolist()  # bytes into the .bin
        assert documents.tolist() == list(range(len(rows) + 1))
        assert len(index) == 34 + 12 * len(rows) + 8 * (len(rows) + 1)
        assert manifest["splits"][split] == {
            "records": len(rows),
            "shards": 1,
            "tokens": sum(len(ids) + 1 for ids in expected),
        }
    # provenance: the verified source shards, every file written with its hash
    version = json.loads((project.version_path / "manifest.json").read_text())
    assert manifest["dataset"]["hash"] == project.dataset_hash
    assert manifest["dataset"]["manifest_sha256"] == file_sha256(
        project.version_path / "manifest.json"
    )
    assert manifest["source_shards"] == [
        {k: s[k] for k in ("path", "split", "rows", "sha256")} for s in version["shards"]
    ]
    written = sorted(
        p.relative_to(minilm_tokens).as_posix() for p in minilm_tokens.rglob("*") if p.is_file()
    )
    assert [f["path"] for f in manifest["files"]] == [p for p in written if p != EXPORT_MANIFEST]
    assert all(f["sha256"] == file_sha256(minilm_tokens / f["path"]) for f in manifest["files"])
    assert files_digest(minilm_tokens / "tokenizer") == digest  # the tokenizer travels along
    assert manifest["code"]["id"] and manifest["created_at"].endswith("+00:00")


def test_windows_are_contiguous_blocks_across_shards(project, minilm_tokens):
    shards = TokenShards(minilm_tokens, workdir=project.workdir)
    train = np.asarray(shards.tokens("train"), dtype=np.int64)
    windows = list(shards.windows("train", 64))
    assert len(windows) == (len(train) - 1) // 64
    for k, window in enumerate(windows):
        assert window.dtype == np.int64 and window.tolist() == train[k * 64 : k * 64 + 65].tolist()
    # two shards of 10 and 7 tokens: the stream runs on across the boundary
    shards.token_shards = lambda split: [np.arange(10, dtype="<u2"), np.arange(10, 17)]
    assert [w.tolist() for w in shards.windows("train", 4)] == [
        [0, 1, 2, 3, 4],
        [4, 5, 6, 7, 8],
        [8, 9, 10, 11, 12],
        [12, 13, 14, 15, 16],
    ]


def test_a_vocabulary_over_65536_ids_is_written_as_uint32(project, minilm_tokens, monkeypatch):
    monkeypatch.setattr(token_export, "UINT16_VOCAB_LIMIT", 30_000)  # MiniLM has 30,522
    out = project.root / "exports" / "minilm-uint32"
    exporting.export_version(
        project.workdir, project.dataset_hash, "tokens", out=out, splits=["train"]
    )
    wide, narrow = (
        TokenShards(out, workdir=project.workdir),
        TokenShards(minilm_tokens, workdir=project.workdir),
    )
    assert wide.manifest["tokenizer"]["dtype"] == "uint32" and wide.dtype == np.dtype("<u4")
    assert list(wide.manifest["splits"]) == ["train"]
    assert (out / "tokens/train/part-00000.bin").stat().st_size == 4 * len(narrow.tokens("train"))
    assert wide.tokens("train").tolist() == narrow.tokens("train").tolist()
    assert wide.offsets("train").tolist() == narrow.offsets("train").tolist()


def test_cli_exports_the_configs_bpe_deterministically(project):
    out = project.root / "exports" / "bpe-cli"
    result = CliRunner().invoke(
        app, ["export", "latest", "--format", "tokens", "--config", str(project.config), "--out", str(out)]
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"as tokens to {out}" in result.stdout.replace("\n", "")
    again = exporting.export_version(
        project.workdir, "latest", "tokens", name="sms", out=project.root / "exports" / "bpe-2",
        tokenizer="bpe", tokenizer_config=exporting.TokenizerConfig(kind="bpe", vocab_size=300),
    )  # fmt: skip
    shards = TokenShards(out, workdir=project.workdir)
    described = shards.manifest["tokenizer"]
    assert described["kind"] == "bpe" and described["separator"] == "</s>"
    assert described["digest"] == files_digest(out / "tokenizer", ["tokenizer.json"])
    assert described["digest"] == again.manifest["tokenizer"]["digest"]  # trained twice, same
    tokenizer = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    tokenizer.encode_special_tokens = True
    assert described["vocab_size"] == tokenizer.get_vocab_size() <= 300
    assert described["dtype"] == "uint16"
    separator = tokenizer.token_to_id("</s>")
    assert described["separator_id"] == separator
    for split in SPLITS:
        rows = published(project, split)
        documents = list(shards.documents(split))
        assert [rid for rid, _ in documents] == [r["record_id"] for r in rows]
        for (_, document), row in zip(documents, rows, strict=True):
            ids = tokenizer.encode(row["text"], add_special_tokens=False).ids
            assert document.tolist() == ids + [separator]
        assert (out / f"tokens/{split}/part-00000.bin").read_bytes() == (
            again.out / f"tokens/{split}/part-00000.bin"
        ).read_bytes()
    # the folder is not written twice
    result = CliRunner().invoke(
        app, ["export", project.dataset_hash[:12], "--format", "tokens", "--workdir", str(project.workdir), "--out", str(out)]
    )  # fmt: skip
    assert result.exit_code == 2 and "exists" in result.stderr


def test_hf_export_loads_the_published_rows(project):
    out = project.root / "exports" / "hf"
    written = exporting.export_version(project.workdir, project.dataset_hash, "hf", out=out)
    # a text export names the tokenizer its trainer should use, and carries it
    tokenizer, digest = minilm_word_pieces()
    assert written.manifest["tokenizer"]["digest"] == digest
    assert written.manifest["tokenizer"]["kind"] == "minilm"
    assert (out / "tokenizer" / "tokenizer.json").is_file()
    loaded = load_hf_export(out, export_digest=written.digest)
    schema = [f["name"] for f in read_version(project.version_path).manifest["schema"]]
    assert sorted(loaded) == sorted(SPLITS)
    for split in SPLITS:
        assert loaded[split].column_names == schema
        assert loaded[split].select_columns(COLUMNS).to_list() == published(project, split)
    flip_byte(next((out / "train").glob("*.arrow")), 2000)
    with pytest.raises(DataError, match=r"train/data-00000-of-00001\.arrow: sha256 mismatch"):
        load_hf_export(out, export_digest=written.digest)


def test_parquet_export_streams_through_a_dataloader(project, parquet_export):
    assert read_version(parquet_export, verify=True).dataset_hash == project.dataset_hash
    assert (parquet_export / "manifest.json").read_bytes() == (
        project.version_path / "manifest.json"
    ).read_bytes()
    rows = published(project, "train")
    dataset = VerifiedParquetDataset(
        parquet_export, "train", COLUMNS, dataset_hash=project.dataset_hash[:16]
    )
    batches = list(DataLoader(dataset, batch_size=16, num_workers=0))
    assert len(batches) == 11 and batches[0]["record_id"][:2] == [r["record_id"] for r in rows[:2]]
    streamed = [
        dict(zip(COLUMNS, values, strict=True))
        for batch in batches
        for values in zip(*(batch[c] for c in COLUMNS), strict=True)
    ]
    assert streamed == rows and len(dataset) == 172
    # two ranks over one shard: every other row each, disjoint, covering the split
    shares = [
        [row["record_id"] for row in VerifiedParquetDataset(parquet_export, "train", rank=r, world_size=2, columns=["record_id"])]
        for r in (0, 1)
    ]  # fmt: skip
    assert shares == [[r["record_id"] for r in rows[k::2]] for k in (0, 1)]
    assert [len(VerifiedParquetDataset(parquet_export, "train", rank=r, world_size=2)) for r in (0, 1)] == [86, 86]  # fmt: skip


def test_shards_are_divided_among_ranks_and_workers(project, tmp_path):
    """A version folder whose train split has two shards: rank r (or worker w) reads shard r."""
    folder = tmp_path / "two-shards"
    manifest = json.loads((project.version_path / "manifest.json").read_text())
    train = [s for s in manifest["shards"] if s["split"] == "train"][0]
    table = pq.read_table(project.version_path / train["path"])
    shards = []
    for number, part in enumerate((table.slice(0, 100), table.slice(100))):
        path = f"data/train/part-{number:05d}.parquet"
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, folder / path)
        shards.append({**train, "path": path, "rows": part.num_rows, "sha256": file_sha256(folder / path)})  # fmt: skip
    manifest["shards"] = shards
    (folder / "manifest.json").write_text(json.dumps(restamped(manifest)))
    ids = [r["record_id"] for r in published(project, "train")]
    assert share([5, 5], 1, 2) == ([1], 0, 1, 5) and share([5, 5], 0, 1, 1, 2) == ([1], 0, 1, 5)
    assert share([5, 4, 3], 1, 2, 1, 2) == ([0, 1, 2], 3, 4, 12)
    assert share([5, 4, 3], 1, 3) == ([0, 1, 2], 1, 3, 12)  # 5, 4, 3 rows: rows are strided
    # shards of 100 and 72 rows: whole shards would give ranks 100 and 72 rows, so ranks take
    # every other row, equally many
    ranks = [VerifiedParquetDataset(folder, "train", ["record_id"], rank=r, world_size=2) for r in (0, 1)]  # fmt: skip
    assert [[row["record_id"] for row in d] for d in ranks] == [ids[0::2], ids[1::2]]
    assert [len(d) for d in ranks] == [86, 86]
    three = [VerifiedParquetDataset(folder, "train", ["record_id"], rank=r, world_size=3) for r in range(3)]  # fmt: skip
    assert [len(d) for d in three] == [57, 57, 57]  # 172 = 3 × 57 + 1: one row left out
    assert [[row["record_id"] for row in d] for d in three] == [ids[:171][r::3] for r in range(3)]
    equal = tmp_path / "equal"
    shutil.copytree(folder, equal)
    table = pq.read_table(equal / "data/train/part-00001.parquet").slice(0, 72)
    for number in (0, 1):  # two shards of 72 rows: each rank reads one whole shard
        path = equal / f"data/train/part-{number:05d}.parquet"
        pq.write_table(table, path)
        manifest["shards"][number] |= {"rows": 72, "sha256": file_sha256(path)}
    (equal / "manifest.json").write_text(json.dumps(restamped(manifest)))
    whole = [VerifiedParquetDataset(equal, "train", ["record_id"], rank=r, world_size=2) for r in (0, 1)]  # fmt: skip
    assert [[row["record_id"] for row in d] for d in whole] == [ids[100:172]] * 2
    dataset = pickle.loads(pickle.dumps(VerifiedParquetDataset(folder, "train", ["record_id"])))
    assert type(dataset) is VerifiedParquetDataset  # workers started by spawn unpickle it
    loader = DataLoader(dataset, batch_size=None, num_workers=2)
    assert sorted(row["record_id"] for row in loader) == sorted(ids)


def test_a_changed_byte_is_refused_before_the_first_row(project, parquet_export, minilm_tokens, tmp_path):  # fmt: skip
    copy = shutil.copytree(parquet_export, tmp_path / "parquet")
    flip_byte(copy / "data/train/part-00000.parquet")
    loader = DataLoader(VerifiedParquetDataset(copy, "train"), batch_size=4)
    with pytest.raises(DataError, match=r"data/train/part-00000\.parquet: sha256 mismatch"):
        next(iter(loader))
    assert list(VerifiedParquetDataset(copy, "validation", ["record_id"]))  # its shards match
    tokens = shutil.copytree(minilm_tokens, tmp_path / "tokens")
    flip_byte(tokens / "tokens/validation/part-00000.bin", 10)
    shards = TokenShards(tokens, workdir=project.workdir)  # nothing read yet
    with pytest.raises(DataError, match=r"tokens/validation/part-00000\.bin: sha256 mismatch"):
        shards.tokens("train")
    # a published shard changed: the export is refused and leaves nothing behind
    shard = project.version_path / "data/test/part-00000.parquet"
    original = shard.read_bytes()
    out = project.root / "exports" / "refused"
    try:
        flip_byte(shard)
        with pytest.raises(DataError, match=r"data/test/part-00000\.parquet: sha256 mismatch"):
            exporting.export_version(project.workdir, project.dataset_hash, "tokens", out=out)
    finally:
        shard.write_bytes(original)
    assert not out.exists() and not list(out.parent.glob(".refused*"))


def test_a_withdrawn_version_is_refused(tmp_path, sms_spam):
    catalog, dataset_hash = trainkit.publish_sms(tmp_path, sms_spam, 30)
    folder = catalog.version_path(catalog.version(dataset_hash))
    catalog.withdraw(dataset_hash, "consent revoked")
    with pytest.raises(DataError, match=r"was withdrawn on .* \(consent revoked\)"):
        exporting.export_version(tmp_path / "work", dataset_hash, "parquet")
    with pytest.raises(DataError, match=r"withdrawn \(consent revoked\)"):
        VerifiedParquetDataset(folder, "train")
    assert not (tmp_path / "work" / "exports").exists()


def test_mds_and_misused_options_are_refused(project):
    runner, workdir = CliRunner(), str(project.workdir)
    result = runner.invoke(app, ["export", "latest", "--format", "mds", "--workdir", workdir])
    message = result.stderr.replace("\n", " ")
    assert result.exit_code == 2
    assert "MosaicML" in message and "numpy<2.2 and xxhash<4" in message
    assert "0.13.0" in message and "--format tokens" in message and "--format parquet" in message
    for args, expected in [
        (["--format", "parquet", "--splits", "train"], "--splits does not apply"),
        (["--format", "tokens", "--splits", "dev"], "no split dev"),
        (["--format", "tokens", "--tokenizer", str(project.root)], "holding tokenizer.json"),
    ]:
        result = runner.invoke(app, ["export", "latest", "--workdir", workdir, *args])
        assert result.exit_code == 2 and expected in result.stderr.replace("\n", " "), args
    assert not (project.workdir / "exports").exists()


def test_a_tokenizer_folder_is_used_as_given(project, minilm_tokens):
    out = project.root / "exports" / "folder"
    exporting.export_version(
        project.workdir, "latest", "tokens", name="sms", out=out, splits=["test"],
        tokenizer=str(minilm_tokens / "tokenizer"),
    )  # fmt: skip
    given, minilm = (
        TokenShards(out, workdir=project.workdir),
        TokenShards(minilm_tokens, workdir=project.workdir),
    )
    described = given.manifest["tokenizer"]
    assert described["kind"] == "path" and described["path"] == str(minilm_tokens / "tokenizer")
    assert (described["separator"], described["separator_id"]) == ("[SEP]", 102)  # no </s>
    assert described["digest"] == files_digest(minilm_tokens / "tokenizer", ["tokenizer.json"])
    assert given.tokens("test").tolist() == minilm.tokens("test").tolist()
    assert given.record_ids("test") == minilm.record_ids("test")


def test_a_separator_written_in_a_text_is_text_not_a_boundary(tmp_path):
    tokenizer, described = token_export.choose_tokenizer(
        "minilm", token_export.TokenizerConfig(), None, tmp_path / "tokenizer"
    )
    ids = tokenizer.encode("call me [SEP] now", add_special_tokens=False).ids
    assert described["separator_id"] == 102 and 102 not in ids
    packed, sizes = token_export.pack(
        [tokenizer.encode("a [SEP] b", add_special_tokens=False)], 102, np.dtype("<u2")
    )
    assert packed.tolist().count(102) == 1 and packed[-1] == 102 and sizes.tolist() == [len(packed)]


def test_without_a_config_the_versions_own_train_tokenizer_is_the_default():
    from types import SimpleNamespace

    published_with = {"config": {"train": {"tokenizer": {"kind": "bpe", "vocab_size": 300}}}}
    chosen = exporting._config_tokenizer(SimpleNamespace(manifest=published_with))
    assert (chosen.kind, chosen.vocab_size) == ("bpe", 300)
    without_train = SimpleNamespace(manifest={"config": {"train": None}})
    assert exporting._config_tokenizer(without_train).kind == "minilm"
