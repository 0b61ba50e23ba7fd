"""Text normalization: NFC and whitespace rules, rewriting only rows that need it."""

from __future__ import annotations

import polars as pl

from pipeline.core.normalize import normalize_text


def test_whitespace_rules():
    cases = {
        " a \t b\r\n\r\n\r\n c\u00a0\u00a0d\u2003e  ": "a b\n\nc d e",
        "x\ty": "x y",
        "p \n q": "p\nq",
        "line one\rline two": "line one\nline two",
        "\u3000": "",
        "keep  one  blank\n\nline": "keep one blank\n\nline",
        "already clean text": "already clean text",
    }
    assert normalize_text(pl.Series(list(cases))).to_list() == list(cases.values())


def test_nfc_and_nulls():
    decomposed = "Cafe\u0301 \u212b"  # e + combining acute; the Angstrom sign
    assert normalize_text(pl.Series([decomposed, None])).to_list() == ["Caf\u00e9 \u00c5", None]
