"""Encoding repair at ingest: text damaged on its way to us (UTF-8 read as Windows-1252 or
Latin-1, Windows-1252 punctuation read as C1 control characters) is repaired with ftfy rather
than dropped by the quality stage's encoding rules.

Only texts holding what those rules count as damage (a mojibake sequence or a C1 control
character, pipeline/text/line_rules.py) go through ftfy, and only its encoding fixes run:
quotes, HTML entities, ligatures, widths, line breaks and other control characters stay as
the source wrote them. A text ftfy cannot repair is left as it is, for the quality stage to
judge.
"""

from __future__ import annotations

from functools import cache

import polars as pl

from pipeline.core.normalize import normalize_text
from pipeline.text.line_rules import MOJIBAKE

DAMAGE = f"{MOJIBAKE}|[\\x{{80}}-\\x{{9F}}]"


@cache
def _fixer_config():
    import ftfy

    return ftfy.TextFixerConfig(
        unescape_html=False,
        remove_terminal_escapes=False,
        fix_latin_ligatures=False,
        fix_character_width=False,
        uncurl_quotes=False,
        fix_line_breaks=False,
        remove_control_chars=False,
        normalization=None,  # normalize_text runs after
    )


def repair_encoding(texts: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(texts with encoding damage repaired and normalized as ingest normalizes, and per text
    the steps ftfy took, e.g. ["encode:latin-1", "decode:windows-1252"]; null where nothing
    changed). Only the damaged lines go through ftfy (which fixes text line by line too): a
    long chat log with one damaged message costs one line's repair."""
    import ftfy

    positions = texts.str.contains(DAMAGE).fill_null(False).arg_true()
    steps: list[list[str] | None] = [None] * texts.len()
    if positions.len() == 0:
        return texts, pl.Series(texts.name, steps, dtype=pl.List(pl.String))
    lines = (
        pl.DataFrame({"text": texts.gather(positions)})
        .with_row_index("candidate")
        .select("candidate", pl.col("text").str.split("\n").alias("line"))
        .explode("line")
        .with_row_index("at")
    )
    damaged = lines.filter(pl.col("line").str.contains(DAMAGE))
    config = _fixer_config()
    fixed, taken = [], [[] for _ in range(positions.len())]
    for candidate, line in damaged.select("candidate", "line").iter_rows():
        repaired, explanation = ftfy.fix_and_explain(line, config)
        fixed.append(repaired)
        for step, argument in explanation or ():
            if f"{step}:{argument}" not in taken[candidate]:
                taken[candidate].append(f"{step}:{argument}")
    lines = lines.with_columns(
        lines["line"].scatter(damaged["at"], pl.Series(fixed, dtype=pl.String))
    )
    joined = lines.group_by("candidate", maintain_order=True).agg(pl.col("line").str.join("\n"))
    fixed_texts = normalize_text(joined["line"].rename(texts.name))
    changed = (fixed_texts != texts.gather(positions)).to_list()
    for position, took, differs in zip(positions.to_list(), taken, changed, strict=True):
        if differs:
            steps[position] = took
    positions, fixed_texts = positions.filter(changed), fixed_texts.filter(changed)
    repaired = texts.clone().scatter(positions, fixed_texts)
    return repaired, pl.Series(texts.name, steps, dtype=pl.List(pl.String))
