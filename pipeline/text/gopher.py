"""Gopher's quality and repetition rules (Rae et al. 2021, as datatrove 0.10.1 implements
them), vectorized in polars.

Words are the tokens of a regex tokenizer that splits like spaCy's blank English one
(punctuation marks are tokens of their own, clitics split off). Every quantity and the order
of the checks follow datatrove's GopherQualityFilter then GopherRepetitionFilter, so the
reasons carry datatrove's names; duplicated 5-10-grams count the characters of every word
covered by a repeated n-gram (datatrove scans greedily; bench/README.md measures the
agreement). N-grams are compared by a hash of their words, within one document only.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.config.quality import GopherThresholds

_CLITICS = (
    (r"(\p{L})(n't)\b", "${1} ${2}"),
    (r"(\p{L})(['’](?:s|m|d|ll|re|ve))\b", "${1} ${2}"),
    (r"\b([Cc]an)(not)\b", "${1} ${2}"),
    (r"\b([Gg]on|[Ww]an)(na)\b", "${1} ${2}"),
)
TOKEN = (
    r"https?://[^\s<>\"]+[^\s<>\".,;:!?)\]}']"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|@\w+"  # spaCy keeps @handles whole
    r"|\b(?:Mr|Mrs|Ms|Dr|Inc|Jr|Sr|St|Co|Corp|Ltd|vs|Mt|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept"
    r"|Oct|Nov|Dec)\."
    r"|(?:\p{L}\.){2,}"
    r"|and/or|:-?[()DPp*]|\):|<3|''|``"
    r"|\+\p{N}+"
    r"|\p{N}+(?:[.,:]\p{N}+)+"
    r"|[\p{L}\p{N}]*\p{L}(?:-\p{N}[\p{L}\p{N}]*)+"
    r"|[\p{L}\p{N}]+(?:[._'’][\p{L}\p{N}]+)*"
    r"|\.{2,}|-{2,}|n't|['’](?:s|m|d|ll|re|ve)"
    r"|[^\s\p{L}\p{N}]"
)
# datatrove's PUNCTUATION_SET without its rare terminal marks of other scripts: a token made
# only of these is a symbol, not a word
_PUNCTUATION = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
)
_SYMBOL_TOKEN = (
    "^[" + re.escape(_PUNCTUATION).replace("-", r"\-") + r"\x00-\x08\x0b-\x1f\x7f-\x9f]+$"
)
STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]
_SPLITLINES = r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"
_BATCH = 50_000  # documents per pass: their tokens, exploded, stay in memory


def tokens(text: pl.Expr) -> pl.Expr:
    for pattern, replacement in _CLITICS:
        text = text.str.replace_all(pattern, replacement)
    return text.str.extract_all(TOKEN)


def _duplicates(parts: pl.Expr, prefix: str) -> list[pl.Expr]:
    """Parts equal to an earlier part of the same document: their share, and their chars."""
    later = pl.element().is_first_distinct().not_()
    return [
        parts.list.eval(later.sum()).list.first().alias(f"{prefix}_dups"),
        parts.list.eval(pl.element().filter(later).str.len_chars().sum())
        .list.first()
        .alias(f"{prefix}_dup_chars"),
        parts.list.len().alias(f"{prefix}_count"),
    ]


def document_signals(texts: pl.DataFrame) -> pl.DataFrame:
    """Per document (columns record_id, text): every quantity the Gopher rules test."""
    words = pl.col("_tokens")
    is_word = pl.element().str.contains(_SYMBOL_TOKEN).not_()
    lines = pl.col("text").str.replace_all(_SPLITLINES, "\n").str.strip_suffix("\n").str.split("\n")
    stripped_lines = pl.element().str.strip_chars()
    return texts.with_columns(_tokens=tokens(pl.col("text"))).select(
        "record_id",
        pl.col("text").str.len_chars().alias("chars"),
        words.list.len().alias("tokens"),
        words.list.eval(is_word.sum()).list.first().alias("words"),
        words.list.eval(pl.element().filter(is_word).str.len_chars().mean())
        .list.first()
        .alias("mean_word_length"),
        pl.col("text").str.count_matches("#", literal=True).alias("hashes"),
        (
            pl.col("text").str.count_matches(r"\.\.\.")
            + pl.col("text").str.count_matches("…", literal=True)
        ).alias("ellipses"),
        lines.list.eval(stripped_lines.str.starts_with("•") | stripped_lines.str.starts_with("-"))
        .list.mean()
        .alias("bullet_lines"),
        lines.list.eval(stripped_lines.str.ends_with("...") | stripped_lines.str.ends_with("…"))
        .list.mean()
        .alias("ellipsis_lines"),
        words.list.eval(pl.element().str.contains(r"\p{L}").sum()).list.first().alias("alpha"),
        words.list.eval(pl.element().filter(pl.element().is_in(STOP_WORDS)).n_unique())
        .list.first()
        .alias("stop_words"),
        *_duplicates(
            pl.col("text").str.strip_chars().str.replace_all(r"\n{2,}", "\x00").str.split("\x00"),
            "para",
        ),
        *_duplicates(pl.col("text").str.replace_all(r"\n+", "\n").str.split("\n"), "line"),
    )


def ngram_signals(texts: pl.DataFrame, top: list[int], repeated: list[int]) -> pl.DataFrame:
    """Per document: chars of its most frequent n-gram times its count (n in `top`), and chars
    of the words covered by an n-gram seen earlier in it (n in `repeated`)."""
    listed = texts.select(tokens(pl.col("text")).alias("token")).with_row_index("_doc")
    lengths = listed.select(pl.col("token").list.len().alias("_len"))["_len"]
    starts = (lengths.cum_sum() - lengths).alias("_start")
    exploded = (
        listed.with_columns(lengths, starts)
        .explode("token")
        .drop_nulls("token")
        .with_row_index("_row")
        .select(
            "_doc",
            (pl.col("_row") - pl.col("_start")).alias("_pos"),
            "_len",
            pl.col("token").str.len_chars().alias("_chars"),
            # the document is part of every key: n-grams repeat within a document only
            pl.struct("_doc", pl.col("token").hash()).hash().alias("_key"),
        )
    )
    out = texts.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_doc"))
    grams = exploded.with_columns(
        pl.col("_key").alias("_gram_key"), pl.col("_chars").alias("_gram")
    )
    for n in range(2, max([*top, *repeated], default=1) + 1):
        grams = grams.with_columns(  # the n-gram at each position, from the (n-1)-gram
            pl.struct(pl.col("_gram_key"), pl.col("_key").shift(-(n - 1)).alias("_next"))
            .hash()
            .alias("_gram_key"),
            pl.col("_gram") + pl.col("_chars").shift(-(n - 1)),
            (pl.col("_pos") + n <= pl.col("_len")).alias("_valid"),
        )
        if n not in top and n not in repeated:
            continue
        if n in top:
            counted = (
                grams.filter("_valid")
                .group_by("_doc", "_gram_key")
                .agg(pl.len().alias("count"), pl.col("_pos").min(), pl.col("_gram").first())
                .sort(["_doc", "count", "_pos"], descending=[False, True, False])
                .group_by("_doc", maintain_order=True)
                .first()
                .select("_doc", ((pl.col("_gram") + n - 1) * pl.col("count")).alias(f"top_{n}"))
            )
            out = out.join(counted, on="_doc", how="left", maintain_order="left")
        if n in repeated:
            later = pl.col("_valid") & pl.col("_gram_key").is_first_distinct().not_()
            covered = (
                grams.with_columns(later.cast(pl.Int8).rolling_max(n, min_samples=1).alias("_cov"))
                .group_by("_doc")
                .agg((pl.col("_chars") * pl.col("_cov")).sum().alias(f"dup_{n}"))
            )
            out = out.join(covered, on="_doc", how="left", maintain_order="left")
    return out.drop("_doc")


def rules(t: GopherThresholds, ngrams: bool = True) -> dict[str, tuple[pl.Expr, float, bool]]:
    """{reason: (measured quantity, bound, broken when below it)} in datatrove's order, for
    the rules `t` switches on; without `ngrams`, the rules before the n-gram ones."""
    chars = pl.col("chars")
    ratio = {  # name: (quantity, threshold, broken when the quantity is below it)
        "gopher_short_doc": (pl.col("words"), t.min_doc_words, True),
        "gopher_long_doc": (pl.col("words"), t.max_doc_words, False),
        "gopher_below_avg_threshold": (pl.col("mean_word_length"), t.min_avg_word_length, True),
        "gopher_above_avg_threshold": (pl.col("mean_word_length"), t.max_avg_word_length, False),
        "gopher_too_many_hashes": (pl.col("hashes") / pl.col("tokens"), t.max_symbol_word_ratio, False),
        "gopher_too_many_ellipsis": (pl.col("ellipses") / pl.col("tokens"), t.max_symbol_word_ratio, False),
        "gopher_too_many_bullets": (pl.col("bullet_lines"), t.max_bullet_lines_ratio, False),
        "gopher_too_many_end_ellipsis": (pl.col("ellipsis_lines"), t.max_ellipsis_lines_ratio, False),
        "gopher_below_alpha_threshold": (pl.col("alpha") / pl.col("tokens"), t.min_alpha_words_ratio, True),
        "gopher_enough_stop_words": (pl.col("stop_words"), t.min_stop_words, True),
        "dup_para_frac": (pl.col("para_dups") / pl.col("para_count"), t.dup_para_frac, False),
        "dup_para_char_frac": (pl.col("para_dup_chars") / chars, t.dup_para_char_frac, False),
        "dup_line_frac": (pl.col("line_dups") / pl.col("line_count"), t.dup_line_frac, False),
        "dup_line_char_frac": (pl.col("line_dup_chars") / chars, t.dup_line_char_frac, False),
    }  # fmt: skip
    if ngrams:
        for n, bound in sorted(t.top_n_grams.items()):
            ratio[f"top_{n}_gram"] = (pl.col(f"top_{n}") / chars, bound, False)
        for n, bound in sorted(t.dup_n_grams.items()):
            ratio[f"duplicated_{n}_n_grams"] = (pl.col(f"dup_{n}") / chars, bound, False)
    return {name: rule for name, rule in ratio.items() if rule[1] is not None}


def reason(t: GopherThresholds, ngrams: bool = True) -> pl.Expr:
    """The first Gopher rule a document breaks, in datatrove's order (null: it passes)."""
    decided = pl.when(pl.lit(False)).then(pl.lit(None, pl.String))
    for name, (quantity, bound, below) in rules(t, ngrams).items():
        broken = quantity < bound if below else quantity > bound
        decided = decided.when(broken.fill_null(False)).then(pl.lit(name))
    return decided.otherwise(pl.lit(None, pl.String))


def gopher_signals(
    frame: pl.LazyFrame, t: GopherThresholds | None = None, all_records: bool = True
) -> pl.DataFrame:
    """Every Gopher quantity per record (columns record_id, text in), batch by batch. Without
    `all_records`, the n-gram quantities (the costly ones) are left null for records that an
    earlier rule drops already."""
    t = t or GopherThresholds()
    texts = frame.select("record_id", "text").collect()
    parts = []
    for batch in texts.iter_slices(_BATCH):
        signals = document_signals(batch).with_row_index("_row")
        todo = signals if all_records else signals.filter(reason(t, ngrams=False).is_null())
        grams = ngram_signals(
            batch[todo["_row"]], list(t.top_n_grams), list(t.dup_n_grams)
        ).with_columns(todo["_row"])
        parts.append(signals.join(grams, on="_row", how="left", maintain_order="left").drop("_row"))
    return pl.concat(parts, how="diagonal_relaxed") if parts else document_signals(texts)


def gopher_decisions(frame: pl.LazyFrame, t: GopherThresholds | None = None) -> pl.DataFrame:
    """record_id and the Gopher reason that drops it (null: kept), in datatrove's names."""
    t = t or GopherThresholds()
    return gopher_signals(frame, t, all_records=False).select(
        "record_id", reason(t).alias("reason")
    )
