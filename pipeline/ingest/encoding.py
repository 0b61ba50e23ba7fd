"""Encoding repair at ingest: text damaged on its way to us (UTF-8 read as Windows-1252 or
Latin-1, Windows-1252 punctuation read as C1 control characters) is repaired with ftfy rather
than dropped by the quality stage's encoding rules.

Only lines holding damage go through ftfy: a mojibake sequence (a UTF-8 lead byte read as
Windows-1252 or Latin-1 followed by a misread continuation byte, which covers accented
Latin, Cyrillic, Greek and CJK text alike) or a C1 control character. Only ftfy's encoding
fixes run: quotes, HTML entities, ligatures, widths, line breaks and other control
characters stay as the source wrote them. The repair reads the text as the source gave it,
before whitespace normalization (which would turn a misread no-break space or U+0085 into a
plain space), and its result is normalized as ingest normalizes. A text ftfy cannot repair is
left as it is, for the quality stage to judge.
"""

from __future__ import annotations

from functools import cache

import polars as pl

from pipeline.core.normalize import normalize_text
from pipeline.text.line_rules import MISREAD, MOJIBAKE

DAMAGE = f"{MOJIBAKE}|[\\x{{C2}}-\\x{{F4}}]{MISREAD}|[\\x{{80}}-\\x{{9F}}]"


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


def repair_encoding(given: pl.Series, normalized: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(`normalized` with the texts whose encoding `given` shows damaged replaced by their
    repair, normalized; and per text the steps ftfy took, e.g. ["encode:latin-1",
    "decode:windows-1252"], null where nothing changed). `normalized` is `given` as ingest
    normalizes it. Only the damaged lines go through ftfy (which fixes text line by line too):
    a long chat log with one damaged message costs one line's repair."""
    import ftfy

    positions = given.str.contains(DAMAGE).fill_null(False).arg_true()
    steps: list[list[str] | None] = [None] * given.len()
    if positions.len() == 0:
        return normalized, pl.Series(given.name, steps, dtype=pl.List(pl.String))
    lines = (
        pl.DataFrame({"text": given.gather(positions)})
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
    fixed_texts = normalize_text(joined["line"].rename(normalized.name))
    changed = (fixed_texts != normalized.gather(positions)).fill_null(False).to_list()
    for position, took, differs in zip(positions.to_list(), taken, changed, strict=True):
        if differs:
            steps[position] = took
    positions, fixed_texts = positions.filter(changed), fixed_texts.filter(changed)
    repaired = normalized.clone().scatter(positions, fixed_texts)
    return repaired, pl.Series(given.name, steps, dtype=pl.List(pl.String))
