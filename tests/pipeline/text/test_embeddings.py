"""Embeddings of real SMS text: unit vectors, the content-hash cache, and the model digest."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.errors import DataError
from pipeline.core.identity import xxh3_128_hex
from pipeline.text import embeddings
from pipeline.text.embeddings import DIMENSIONS, embed, model_digest, vectors_key


def sms_texts(sms_spam, start, stop) -> pl.Series:
    """Distinct real messages (the collection holds exact copies)."""
    return sms_spam["text"].slice(start, stop - start).unique(maintain_order=True)


def parts(folder):
    return sorted(path.name for path in folder.iterdir())


def test_vectors_are_unit_rows_and_a_paraphrase_is_close(sms_spam):
    texts = pl.Series(
        [
            "Sir, i am waiting for your call.",  # SMS 1502
            "I am waiting for your call sir.",  # SMS 3010
            sms_spam["text"][0],  # "Go until jurong point, crazy.. Available only in bugis…"
            sms_spam["text"][2],  # "Free entry in 2 a wkly comp to win FA Cup final tkts…"
        ]
    )
    embedded = embed(texts, xxh3_128_hex(texts), None, batch_size=2)
    vectors = embedded.vectors
    assert vectors.shape == (4, DIMENSIONS) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = vectors @ vectors.T
    assert cosines[0, 1] == pytest.approx(0.939, abs=0.005)
    assert cosines[0, 2] < 0.3 and cosines[1, 3] < 0.3 and cosines[2, 3] < 0.3
    assert (embedded.new, embedded.from_cache) == (4, 0)


def test_texts_with_one_content_hash_are_embedded_once(sms_spam):
    texts = pl.Series([sms_spam["text"][1], sms_spam["text"][3], sms_spam["text"][1]])
    embedded = embed(texts, xxh3_128_hex(texts), None, batch_size=8)
    assert embedded.new == 2
    assert np.array_equal(embedded.vectors[0], embedded.vectors[2])
    assert not np.array_equal(embedded.vectors[0], embedded.vectors[1])


def test_a_second_call_embeds_only_the_new_texts(tmp_path, sms_spam):
    first_texts = sms_texts(sms_spam, 0, 20)
    first = embed(first_texts, xxh3_128_hex(first_texts), tmp_path, batch_size=8)
    assert (first.new, first.from_cache) == (first_texts.len(), 0)
    folder = tmp_path / vectors_key()
    assert len(parts(folder)) == 1 and parts(folder)[0].startswith("part-")
    # the old texts in another order, with five new ones among them
    more = sms_texts(sms_spam, 20, 40).head(5)
    texts = pl.concat([more, first_texts.reverse()])
    second = embed(texts, xxh3_128_hex(texts), tmp_path, batch_size=8)
    assert (second.new, second.from_cache) == (5, first_texts.len())
    assert np.array_equal(second.vectors[5:], first.vectors[::-1])
    assert len(parts(folder)) == 2  # one part per call that embedded something, no temp files
    # a third call embeds nothing and writes nothing; vectors match an uncached run
    third = embed(texts, xxh3_128_hex(texts), tmp_path, batch_size=8)
    assert (third.new, third.from_cache) == (0, texts.len())
    assert np.array_equal(third.vectors, second.vectors) and len(parts(folder)) == 2
    uncached = embed(texts, xxh3_128_hex(texts), None, batch_size=8).vectors
    np.testing.assert_allclose(uncached, third.vectors, atol=1e-5)


def test_an_interrupted_write_leaves_no_readable_part(tmp_path, sms_spam, monkeypatch):
    texts = sms_texts(sms_spam, 40, 46)
    hashes = xxh3_128_hex(texts)

    def killed_midway(frame, path, **options):
        Path(path).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(pl.DataFrame, "write_parquet", killed_midway)
        with pytest.raises(KeyboardInterrupt):
            embed(texts, hashes, tmp_path, batch_size=8)
    folder = tmp_path / vectors_key()
    assert parts(folder) == []
    # a temp file a killed process could not remove is never read as a part
    (folder / ".part-00000000000000000001-deadbeef.parquet.tmp").write_bytes(b"PAR1 broken")
    again = embed(texts, hashes, tmp_path, batch_size=8)
    assert (again.new, again.from_cache) == (texts.len(), 0)
    cached = embed(texts, hashes, tmp_path, batch_size=8)
    assert (cached.new, cached.from_cache) == (0, texts.len())


def test_records_without_a_content_hash_are_refused():
    with pytest.raises(DataError, match="1 records have no content_hash"):
        embed(pl.Series(["a", "b"]), pl.Series(["h", None]), None, batch_size=8)


def test_the_model_digest_names_the_files_and_their_bytes(tmp_path, monkeypatch):
    real = model_digest()
    assert re.fullmatch(r"[0-9a-f]{16}", real)

    def digest_of(files: dict[str, bytes]) -> str:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, content in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        monkeypatch.setattr(embeddings, "model_path", lambda: folder)
        model_digest.cache_clear()
        try:
            return model_digest()
        finally:
            model_digest.cache_clear()

    base = digest_of({"config.json": b"{}", "1_Pooling/config.json": b"{}"})
    assert digest_of({"1_Pooling/config.json": b"{}", "config.json": b"{}"}) == base
    assert digest_of({"config.json": b"{ }", "1_Pooling/config.json": b"{}"}) != base
    assert digest_of({"config.json": b"{}", "2_Pooling/config.json": b"{}"}) != base
    monkeypatch.undo()
    assert model_digest() == real


def test_a_short_text_gets_the_same_bits_alone_and_among_others_of_its_length():
    # 7 tokens each: alone, or two of them, is a matrix product under 16 rows, another kernel
    texts = ["WHO ARE YOU SEEING?", "Yup next stop.", "I'm home.", "First answer my question."]
    together = embeddings.encode(pl.Series(texts), 64)
    for index, text in enumerate(texts):
        assert np.array_equal(embeddings.encode(pl.Series([text]), 64)[0], together[index])
    assert np.array_equal(embeddings.encode(pl.Series(texts[:2]), 64), together[:2])
