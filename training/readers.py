"""Readers for your own training code: Thresher's exports (`thresher export`) and published
version folders, each checked against its manifest before the first row or token is read.

Importing this module costs numpy and the standard library only: pyarrow is imported where
record ids are read, `datasets` in `load_hf_export`. Every refusal is a
`pipeline.core.errors.DataError` naming the file. `training.parquet_dataset` holds the torch
`IterableDataset` over a version folder or a parquet export.

An export is a folder holding `export_manifest.json` (strict JSON) and the files it lists
under `files` (path relative to the folder, sha256, bytes); the manifest also records the
format, the dataset (name, hash, sha256 of its manifest.json), the tokenizer, the verified
source shards (path, split, rows, sha256), per-split counts, the time and the code version.

`--format tokens`, packed token shards, one per published shard (nanoGPT's train.bin layout):

- `tokens/<split>/part-NNNNN.bin`: the token ids as raw little-endian integers, no header;
  `uint16` when the tokenizer's vocabulary has at most 65,536 ids, else `uint32` (the
  manifest's `tokenizer.dtype`). `np.memmap(path, dtype=dtype, mode="r")` reads one.
- Each document is its text encoded with `add_special_tokens=False`, untruncated, followed
  by one separator token (`tokenizer.separator` / `separator_id`: `[SEP]` for MiniLM's
  WordPiece, `</s>` for Thresher's byte-level BPE); an empty text is the separator alone.
  Documents follow the published shard's row order.
- `tokens/<split>/part-NNNNN.idx`: the document boundaries in Megatron-LM's `MMIDIDX` index
  layout, so `megatron.core.datasets.indexed_dataset.IndexedDataset("…/part-NNNNN")` reads
  the pair as it is (one sequence per document): the 9 bytes `MMIDIDX\x00\x00`, version 1
  (`<Q`), the dtype code (`<B`: 8 uint16, 4 int32, which uint32 ids below 2**31 are bit for
  bit), the sequence count and the document count (`<Q` each, the latter n_docs + 1), each
  document's length in tokens (int32), its byte offset in the .bin (int64), and the document
  indices 0..n_docs (int64). `TokenShards.offsets` gives document i as
  `tokens[offsets[i]:offsets[i + 1]]`, separator included.
- `tokens/<split>/part-NNNNN.records.parquet`: column `record_id`, one row per document in
  the same order: which published record each document came from.
- `tokenizer/`: the tokenizer's files (`tokenizer.json` loads with
  `tokenizers.Tokenizer.from_file`; turn its padding and truncation off to encode as the
  export did).
- `token_shards` in the manifest lists the shards of each split in order, with their
  document and token counts.

`--format hf`: a `datasets.DatasetDict` saved with `save_to_disk` (one Dataset per split, the
published columns); `load_hf_export` verifies, then loads it.

`--format parquet`: the version's manifest.json and shards as published: itself a version
folder, which `training.parquet_dataset.VerifiedParquetDataset` (or
`pipeline.publish.reader.read_version`) reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.errors import DataError

EXPORT_MANIFEST = "export_manifest.json"
EXPORT_FORMAT = "thresher-export/1"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_export_manifest(export_dir: str | Path, expected_format: str | None = None) -> dict:
    """The export's manifest; with `expected_format`, refuse an export of another format."""
    manifest, _ = _read_export_manifest(Path(export_dir))
    if expected_format and manifest.get("format") != expected_format:
        raise DataError(
            f"{export_dir} is a {manifest.get('format')!r} export, not {expected_format!r}; "
            f"export the version with `thresher export REF --format {expected_format}`"
        )
    return manifest


def _read_export_manifest(folder: Path) -> tuple[dict, str]:
    """The manifest and the sha256 of the bytes it was parsed from."""
    path = folder / EXPORT_MANIFEST
    try:
        data = path.read_bytes()
        return json.loads(data), hashlib.sha256(data).hexdigest()
    except FileNotFoundError:
        raise DataError(
            f"{folder}: no {EXPORT_MANIFEST}; this is not a folder `thresher export` wrote"
        ) from None
    except ValueError as error:
        raise DataError(f"{path}: unreadable ({error}); export the version again") from None


def verify_export(
    export_dir: str | Path,
    manifest: dict | None = None,
    *,
    export_digest: str | None = None,
    workdir: str | Path | None = None,
) -> dict:
    """Check the export against what vouches for it, then re-hash every file its manifest
    lists; refuse it if one is missing or differs. Returns the manifest.

    A manifest that lists its own files certifies nothing by itself (rewrite a file and its
    line together and it still agrees), so one anchor is required: `export_digest`, the
    sha256 of export_manifest.json that `thresher export` printed and recorded, or `workdir`,
    the work folder whose catalog recorded the export (its version must still be published
    with the source shards the export names)."""
    folder = Path(export_dir)
    listed, digest = _read_export_manifest(folder)
    if manifest is not None and listed != manifest:
        raise DataError(f"{folder / EXPORT_MANIFEST} changed while it was read; read it again")
    manifest = listed
    if export_digest is None and workdir is None:
        raise DataError(
            f"export {folder}: give export_digest= (the sha256 `thresher export` printed) or "
            "workdir= (the work folder whose catalog recorded it): the export's own manifest "
            "cannot vouch for itself"
        )
    if export_digest is not None and digest != export_digest.lower():
        raise DataError(
            f"export {folder}: its manifest hashes to {digest[:16]}, not {export_digest[:16]} "
            "as expected; it was changed after the export — do not train on it, export again"
        )
    if workdir is not None:
        from data_catalog import exports
        from data_catalog.catalog import Catalog

        exports.check(Catalog.open(workdir), folder, digest, manifest)
    problems = []
    for entry in manifest["files"]:
        file = folder / entry["path"]
        if not file.is_file():
            problems.append(f"{file}: missing")
        elif file.stat().st_size != entry["bytes"] or sha256_of(file) != entry["sha256"]:
            problems.append(f"{file}: sha256 mismatch")
    if problems:
        raise DataError(
            f"export {folder} failed verification ({'; '.join(problems)}); do not train on it — "
            "export the version again"
        )
    return manifest


MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPES = {np.dtype("<u2"): 8, np.dtype("<u4"): 4}  # uint32 ids are read as int32


def write_megatron_index(path: Path, lengths: np.ndarray, dtype: np.dtype) -> None:
    """Megatron-LM's .idx for documents of `lengths` tokens packed in a .bin of `dtype`."""
    import struct

    lengths = np.asarray(lengths, dtype=np.int64)
    count = len(lengths)
    pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]) * dtype.itemsize if count else lengths
    with open(path, "wb") as out:
        out.write(MEGATRON_HEADER)
        out.write(struct.pack("<QBQQ", 1, MEGATRON_DTYPES[dtype], count, count + 1))
        out.write(lengths.astype("<i4").tobytes())
        out.write(np.asarray(pointers, dtype="<i8").tobytes())
        out.write(np.arange(count + 1, dtype="<i8").tobytes())


def read_megatron_index(path: Path) -> np.ndarray:
    """The int64 document offsets (n_docs + 1, from 0) of a Megatron .idx written as above."""
    import struct

    data = path.read_bytes()
    if data[:9] != MEGATRON_HEADER:
        raise DataError(f"{path}: not a Megatron index (no MMIDIDX header); export again")
    version, _, count, documents = struct.unpack_from("<QBQQ", data, 9)
    if version != 1 or documents != count + 1:
        raise DataError(f"{path}: a Megatron index this reader does not know; export again")
    lengths = np.frombuffer(data, dtype="<i4", count=count, offset=34)
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


@dataclass(frozen=True)
class TokenShard:
    split: str
    tokens: Path  # tokens/<split>/part-NNNNN.bin
    index: Path  # …idx (Megatron's layout)
    records: Path  # …records.parquet
    documents: int
    token_count: int


class TokenShards:
    """A `--format tokens` export, verified before the first read: against its anchor
    (`export_digest` or `workdir`, see `verify_export`), then file by file."""

    def __init__(
        self,
        export_dir: str | Path,
        verify: bool = True,
        *,
        export_digest: str | None = None,
        workdir: str | Path | None = None,
    ):
        self.path = Path(export_dir)
        self.manifest = read_export_manifest(self.path, "tokens")
        self._verified = not verify
        self._anchor = {"export_digest": export_digest, "workdir": workdir}
        tokenizer = self.manifest["tokenizer"]
        self.dtype = np.dtype(tokenizer["dtype"]).newbyteorder("<")
        self.separator_id: int = tokenizer["separator_id"]
        self.vocab_size: int = tokenizer["vocab_size"]
        self._shards: dict[str, list[TokenShard]] = {}
        for entry in self.manifest["token_shards"]:
            self._shards.setdefault(entry["split"], []).append(
                TokenShard(
                    entry["split"],
                    self.path / entry["tokens"],
                    self.path / entry["index"],
                    self.path / entry["records"],
                    entry["documents"],
                    entry["tokens_count"],
                )
            )

    @property
    def splits(self) -> list[str]:
        return list(self.manifest["splits"])

    def shards(self, split: str) -> list[TokenShard]:
        if split not in self.manifest["splits"]:
            raise DataError(
                f"export {self.path} has no {split!r} split (it has: {', '.join(self.splits)})"
            )
        return self._shards.get(split, [])

    def _check(self) -> None:
        if not self._verified:
            verify_export(self.path, self.manifest, **self._anchor)
            self._verified = True

    def token_shards(self, split: str) -> list[np.ndarray]:
        """One read-only np.memmap per shard of the split (a shard of 0 tokens: an empty array)."""
        self._check()
        return [
            np.memmap(s.tokens, dtype=self.dtype, mode="r")
            if s.token_count
            else np.empty(0, self.dtype)
            for s in self.shards(split)
        ]

    def tokens(self, split: str) -> np.ndarray:
        """The split's tokens: the memmap of its one shard, else the shards concatenated (in
        memory; use `token_shards` for splits larger than memory)."""
        parts = self.token_shards(split)
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0, self.dtype)

    def offsets(self, split: str) -> np.ndarray:
        """int64 document offsets into `tokens(split)`: n_docs + 1 values from 0."""
        self._check()
        parts, base = [np.zeros(1, np.int64)], 0
        for shard in self.shards(split):
            offsets = read_megatron_index(shard.index)
            parts.append(offsets[1:] + base)
            base += int(offsets[-1])
        return np.concatenate(parts)

    def record_ids(self, split: str) -> list[str]:
        import pyarrow.parquet as pq

        self._check()
        ids: list[str] = []
        for shard in self.shards(split):
            ids += pq.read_table(shard.records, columns=["record_id"])["record_id"].to_pylist()
        return ids

    def documents(self, split: str) -> Iterator[tuple[str, np.ndarray]]:
        """(record_id, tokens with the separator last) per document, in published order."""
        import pyarrow.parquet as pq

        self._check()
        for shard, tokens in zip(self.shards(split), self.token_shards(split), strict=True):
            offsets = read_megatron_index(shard.index)
            ids = pq.read_table(shard.records, columns=["record_id"])["record_id"].to_pylist()
            for i, record_id in enumerate(ids):
                yield record_id, tokens[offsets[i] : offsets[i + 1]]

    def windows(self, split: str, block_size: int) -> Iterator[np.ndarray]:
        """Contiguous int64 blocks of block_size + 1 tokens over the split's token stream
        (across shards), as nanoGPT's get_batch takes them (x = block[:-1], y = block[1:]),
        in order: window k starts at token k × block_size. A tail too short is left out."""
        if block_size < 1:
            raise ValueError("block_size must be at least 1")
        carry = np.empty(0, np.int64)
        for part in self.token_shards(split):
            stream = np.concatenate([carry, np.asarray(part, dtype=np.int64)])
            count = (len(stream) - 1) // block_size if len(stream) > block_size else 0
            for k in range(count):
                yield stream[k * block_size : k * block_size + block_size + 1].copy()
            carry = stream[count * block_size :]


def load_hf_export(
    export_dir: str | Path,
    *,
    export_digest: str | None = None,
    workdir: str | Path | None = None,
):
    """A `--format hf` export as a `datasets.DatasetDict`, after it is checked against its
    anchor and every file is re-hashed (`verify_export`)."""
    manifest = read_export_manifest(export_dir, "hf")
    verify_export(export_dir, manifest, export_digest=export_digest, workdir=workdir)
    try:
        import datasets
    except ImportError:
        raise DataError(
            "reading a Hugging Face export needs the `datasets` library: pip install datasets"
        ) from None
    return datasets.load_from_disk(str(export_dir))
