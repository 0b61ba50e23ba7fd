"""`thresher export --format tokens`: packed token shards, one per published shard, and the
tokenizer every export names. The layout is documented in training/readers.py (and the
README), whose `TokenShards` reads it.

Each document is its text encoded without special tokens and untruncated, followed by one
separator token; documents are packed in shard row order into one little-endian array
(uint16 for a vocabulary of at most 65,536 ids, else uint32), with Megatron's index of
document boundaries (`training.readers.write_megatron_index`) and the record id of each
document beside it. Tokenization runs in batches, shard by
shard, so memory is bounded by one shard.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.config.train import TokenizerConfig
from pipeline.core import progress as shown
from pipeline.core.errors import DataError
from training.readers import write_megatron_index

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from tokenizers import Encoding, Tokenizer

UINT16_VOCAB_LIMIT = 65_536  # ids of a larger vocabulary are written as uint32
ENCODE_BATCH = 1_000  # texts per Tokenizer.encode_batch call
# the separator after each document, by tokenizer kind; for a tokenizer folder, the first of
# these its vocabulary holds
SEPARATORS = {"minilm": "[SEP]", "bpe": "</s>"}
SEPARATOR_CANDIDATES = ("</s>", "[SEP]", "<|endoftext|>", "<eos>", "<|end_of_text|>")


def choose_tokenizer(
    spec: str, cfg: TokenizerConfig, train_texts: Iterable[str] | None, folder: Path
) -> tuple[Tokenizer, dict[str, Any]]:
    """The tokenizer `spec` names (`minilm`, `bpe` trained on `train_texts`, or a folder
    holding tokenizer.json), padding and truncation off; its files copied to `folder`; and
    its description for the export manifest."""
    from tokenizers import Tokenizer

    from training.tokenization import (
        MINILM_TOKENIZER_FILES,
        files_digest,
        minilm_word_pieces,
        train_bpe,
    )

    folder.mkdir(parents=True)
    if spec == "minilm":
        from pipeline.text.embeddings import model_path

        tokenizer, digest = minilm_word_pieces()
        for name in MINILM_TOKENIZER_FILES:
            shutil.copyfile(model_path() / name, folder / name)
        described = {"kind": "minilm", "name": "all-MiniLM-L6-v2 WordPiece"}
        described |= {"path": str(model_path()), "digest": digest}
        separator = SEPARATORS["minilm"]
    elif spec == "bpe":
        if train_texts is None:
            raise DataError(
                "the version has no train split to train a BPE on; pass --tokenizer minilm or "
                "a tokenizer folder"
            )
        train_bpe(train_texts, cfg, folder)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        described = {
            "kind": "bpe",
            "name": f"byte-level BPE of {cfg.vocab_size} trained on the train split",
            "path": "tokenizer",
            "digest": files_digest(folder, ["tokenizer.json"]),
        }
        separator = SEPARATORS["bpe"]
    else:
        source = Path(spec)
        for path in sorted(p for p in source.iterdir() if p.is_file()):
            shutil.copyfile(path, folder / path.name)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        described = {"kind": "path", "name": source.name, "path": str(source.resolve())}
        described["digest"] = files_digest(source, ["tokenizer.json"])
        vocabulary = tokenizer.get_vocab(with_added_tokens=True)
        separator = next((t for t in SEPARATOR_CANDIDATES if t in vocabulary), None)
        if separator is None:
            raise DataError(
                f"{source / 'tokenizer.json'} has none of the separator tokens "
                f"{', '.join(SEPARATOR_CANDIDATES)}; add one to the tokenizer"
            )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # a special token written in a text ("[SEP]", "</s>") is encoded as the text it is: only
    # the export puts separators, so document boundaries cannot be forged by the data
    tokenizer.encode_special_tokens = True
    described |= {
        # ids run to the largest one (a vocabulary may have gaps): what an embedding needs
        "vocab_size": max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1,
        "separator": separator,
        "separator_id": tokenizer.token_to_id(separator),
        "files": "tokenizer/",
        "add_special_tokens": False,
        "special_tokens_in_text": "encoded as text (tokenizers' encode_special_tokens)",
    }
    return tokenizer, described


def write_token_shards(
    tables: Iterator[tuple[dict[str, Any], pa.Table]],
    splits: list[str],
    folder: Path,
    tokenizer: Tokenizer,
    described: dict[str, Any],
) -> dict[str, Any]:
    """Pack each (published shard, its verified record_id and text columns) into
    `folder/tokens/<split>/`; returns the per-split counts and the shards written."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    dtype = np.dtype("<u2") if described["vocab_size"] <= UINT16_VOCAB_LIMIT else np.dtype("<u4")
    described["dtype"] = dtype.name
    separator = described["separator_id"]
    counts = {split: {"records": 0, "shards": 0, "tokens": 0} for split in splits}
    listed = []
    for shard, table in tables:
        texts = pc.fill_null(table["text"], "").to_pylist()
        base = Path("tokens") / shard["split"] / Path(shard["path"]).name.removesuffix(".parquet")
        target = folder / base
        target.parent.mkdir(parents=True, exist_ok=True)
        lengths = []
        with open(target.with_name(target.name + ".bin"), "wb") as handle:
            for start in range(0, len(texts), ENCODE_BATCH):
                batch = texts[start : start + ENCODE_BATCH]
                encodings = tokenizer.encode_batch(batch, add_special_tokens=False)
                packed, sizes = pack(encodings, separator, dtype)
                handle.write(packed.tobytes())
                lengths.append(sizes)
        sizes = np.concatenate(lengths) if lengths else np.empty(0, np.int64)
        offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes, dtype=np.int64)])
        write_megatron_index(target.with_name(target.name + ".idx"), sizes, dtype)
        pq.write_table(
            pa.table({"record_id": table["record_id"].cast(pa.string())}),
            target.with_name(target.name + ".records.parquet"),
            compression="zstd",
        )
        split = counts[shard["split"]]
        split["records"] += table.num_rows
        split["shards"] += 1
        split["tokens"] += int(offsets[-1])
        listed.append(
            {
                "split": shard["split"],
                "source": shard["path"],
                "tokens": f"{base.as_posix()}.bin",
                "index": f"{base.as_posix()}.idx",
                "records": f"{base.as_posix()}.records.parquet",
                "documents": table.num_rows,
                "tokens_count": int(offsets[-1]),
            }
        )
        shown.advance("export", 1)
    return {"splits": counts, "token_shards": listed}


def pack(
    encodings: list[Encoding], separator: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """The documents' ids, each followed by `separator`, as one array; and each document's
    length (separator included)."""
    import numpy as np

    lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
    sizes = lengths + 1
    packed = np.empty(int(sizes.sum()), dtype)
    ends = np.cumsum(sizes) - 1
    text = np.ones(len(packed), bool)
    text[ends] = False
    packed[ends] = separator
    packed[text] = np.fromiter(
        itertools.chain.from_iterable(e.ids for e in encodings), dtype, int(lengths.sum())
    )
    return packed, sizes
