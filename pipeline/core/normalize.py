"""Text normalization applied at ingest: Unicode NFC and whitespace.

Whitespace rules: line endings become `\n`; runs of horizontal whitespace (including
no-break and other Unicode spaces) become one space; spaces around line breaks go; more
than one blank line becomes one; the text is stripped. Paragraphs and lines survive, so
later stages can still reason about them.

Only rows that need a change are rewritten: almost all real text is ASCII (hence NFC) and
already clean, and a regex rewrite of every row costs several times a check.
"""

from __future__ import annotations

import unicodedata

import polars as pl

_HSPACE = r"\t\x0b\x0c \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_NEEDS_WHITESPACE_FIX = rf"\r|[{_HSPACE}]{{2,}}|[\t\x0b\x0c\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]|\n\n\n| \n|\n |^[\s]|[\s]$"
_NON_ASCII = r"[^\x00-\x7F]"


def _fix_whitespace(text: pl.Series) -> pl.Series:
    # Each pattern matches only what changes (single plain spaces are left alone): a regex
    # replace costs per match, and ordinary text has a space every few characters.
    return (
        text.str.replace_all(rf"[{_HSPACE}]*(?:\r\n?|\n)[{_HSPACE}]*", "\n")
        .str.replace_all(rf"[{_HSPACE}]{{2,}}|[{_HSPACE.replace(' ', '')}]", " ")
        .str.replace_all(r"\n{3,}", "\n\n")
        .str.strip_chars()
    )


def _nfc(text: pl.Series) -> pl.Series:
    # CPython's unicodedata is several times faster than polars' str.normalize, and this
    # runs only on the rows that hold a non-ASCII character (most are already NFC).
    values = [
        value
        if value is None or unicodedata.is_normalized("NFC", value)
        else unicodedata.normalize("NFC", value)
        for value in text.to_list()
    ]
    return pl.Series(text.name, values, dtype=pl.String)


def _rewrite_where(text: pl.Series, mask: pl.Series, rewrite) -> pl.Series:
    positions = mask.fill_null(False).arg_true()
    if positions.len() == 0:
        return text
    # scatter writes in place: on a copy, so the caller's Series keeps its text
    return text.clone().scatter(positions, rewrite(text.gather(positions)))


def normalize_text(text: pl.Series) -> pl.Series:
    """NFC and whitespace-normalized copy of a string Series (nulls stay null)."""
    text = _rewrite_where(text, text.str.contains(_NON_ASCII), _nfc)
    return _rewrite_where(text, text.str.contains(_NEEDS_WHITESPACE_FIX), _fix_whitespace)
