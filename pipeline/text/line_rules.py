"""C4's line rules, FineWeb's document rules and ftfy-style encoding checks, vectorized in
polars.

C4 (Raffel et al. 2020, §2.2; the reference is TFDS `c4_utils.clean_page`, which datatrove
0.10.1's C4QualityFilter follows). Each line, stripped, is removed by the first rule it breaks,
in the reference's order: a word over 1000 characters; no terminal punctuation (or a trailing
"...", checked after Wikipedia citations like "[1]" are set aside); under 3 words; "javascript";
a cookie or terms-of-use notice. A removed line is an edit, not a drop. As in the reference, a
document is dropped for "lorem ipsum" in a line that passed the first three rules, or for "{"
in a line that also passed the javascript rule: text that never reaches the output drops
nothing. C4's "at least 5 sentences" page rule is left to Gopher's word count.

Lines are split on "\\n" only, and kept lines keep their text. Whitespace-only lines are not
judged and stay (C4 drops them, which would collapse the paragraphs of nearly every document
and record an edit for each).

FineWeb (Penedo et al. 2024; datatrove 0.10.1's FineWebQualityFilter, defaults and comparisons
as there) measures the text after line removals, on its non-blank lines as they are (not
stripped): the share ending in datatrove's TERMINAL_PUNCTUATION (dropped when < 0.12), the
share of at most 30 characters (> 0.67), the characters of lines repeating an earlier line over
all characters but newlines (> 0.01), and newlines over words (> 0.3; words as spaCy's blank
English tokenizer splits them, see pipeline/text/gopher.py). A text with no non-blank line or no
word gets null (datatrove calls it "empty" or divides by zero): other rules judge it.

Encoding (measured on the original text; Thresher's bounds, ftfy-style evidence rather than a
published threshold): the share of characters in mojibake sequences (UTF-8 read as Latin-1 or
Windows-1252: "Ã" or "â€" then a misread continuation byte, "Â" then NBSP or a Latin-1 symbol,
and U+FFFD), and of C0/C1 control characters other than tab, newline and carriage return.
"""

from __future__ import annotations

import polars as pl

from pipeline.config.quality import LineRules
from pipeline.text.gopher import tokens


def _char_class(chars: set[str]) -> str:
    return "[" + "".join(f"\\x{{{ord(c):X}}}" for c in sorted(chars)) + "]"


# what a UTF-8 continuation byte (0x80-0xBF) becomes when read as Latin-1 or Windows-1252
_MISREAD = {chr(b) for b in range(0x80, 0xC0)} | {
    bytes([b]).decode("cp1252", "ignore") or chr(b) for b in range(0x80, 0xA0)
}
MISREAD = _char_class(_MISREAD)
MOJIBAKE = f"Ã{MISREAD}|â€{MISREAD}?|Â[\\x{{A0}}-\\x{{BF}}]|\\x{{FFFD}}"
CONTROL = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]"
# C4: ends in . ! ? or " (the reference's marks), optionally followed by closing quotes
_C4_END = '[.!?"]["\'\u201d\u2019]*$'
_CITATION = r"\[[0-9]*\]|\[edit\]|\[citation needed\]"
POLICY = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
]
# datatrove.utils.text.TERMINAL_PUNCTUATION (159 sentence terminals of many scripts; close to
# Unicode's Sentence_Terminal, but not equal to it), as code-point ranges
_FINEWEB_END = r"[\x{21}\x{2E}\x{3F}\x{589}\x{61D}-\x{61F}\x{6D4}\x{700}-\x{702}\x{7F9}\x{837}\x{839}\x{83D}-\x{83E}\x{964}-\x{965}\x{104A}-\x{104B}\x{1362}\x{1367}-\x{1368}\x{166E}\x{1735}-\x{1736}\x{17D4}-\x{17D6}\x{17D9}-\x{17DA}\x{1803}\x{1809}\x{1944}-\x{1945}\x{1AA8}-\x{1AAB}\x{1B5A}-\x{1B5B}\x{1B5E}-\x{1B5F}\x{1B7D}-\x{1B7E}\x{1C3B}-\x{1C3C}\x{1C7E}-\x{1C7F}\x{203C}-\x{203D}\x{2047}-\x{2049}\x{2E2E}\x{2E3C}\x{2E53}-\x{2E54}\x{3002}\x{A4FF}\x{A60E}-\x{A60F}\x{A6F3}\x{A6F7}\x{A876}-\x{A877}\x{A8CE}-\x{A8CF}\x{A92F}\x{A9C8}-\x{A9C9}\x{AA5D}-\x{AA5F}\x{AAF0}-\x{AAF1}\x{ABEB}\x{FE52}\x{FE56}-\x{FE57}\x{FF01}\x{FF0E}\x{FF1F}\x{FF61}\x{10A56}-\x{10A57}\x{10F55}-\x{10F59}\x{10F86}-\x{10F89}\x{11047}-\x{11048}\x{110BE}-\x{110C1}\x{11141}-\x{11143}\x{111C5}-\x{111C6}\x{111CD}\x{111DE}-\x{111DF}\x{11238}-\x{11239}\x{1123B}-\x{1123C}\x{112A9}\x{1144B}-\x{1144C}\x{115C2}-\x{115C3}\x{115C9}-\x{115D7}\x{11641}-\x{11642}\x{1173C}-\x{1173E}\x{11944}\x{11946}\x{11A42}-\x{11A43}\x{11A9B}-\x{11A9C}\x{11C41}-\x{11C42}\x{11EF7}-\x{11EF8}\x{11F43}-\x{11F44}\x{16A6E}-\x{16A6F}\x{16AF5}\x{16B37}-\x{16B38}\x{16B44}\x{16E98}\x{1BC9F}\x{1DA88}]$"
REASONS = (
    "mojibake",
    "invalid_characters",
    "c4_lorem_ipsum",
    "c4_curly_braces",
    "only_removed_lines",
    "fineweb_line_punct",
    "fineweb_short_lines",
    "fineweb_char_duplicates",
    "fineweb_list_like",
)


def _lines(rules: LineRules, line_removals: bool) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """Per line, in two steps (each check is computed once): the checks, then `_rule` (the
    C4 rule that removes the line, null: kept), `_lorem` and `_curly`."""
    s = pl.col("_line").str.strip_chars()
    checks: dict[str, pl.Expr] = {}  # rule: broken, in C4's order
    if line_removals and rules.c4_max_word_length is not None:
        bound = rules.c4_max_word_length
        longest = (  # only lines longer than the bound can hold such a word
            pl.when(s.str.len_chars() > bound).then(s).otherwise(pl.lit(""))
            .str.extract_all(r"\S+").list.eval(pl.element().str.len_chars()).list.max()
        )  # fmt: skip
        checks["c4_max_word_length"] = longest > bound
    if line_removals and rules.c4_terminal_punctuation:
        cited = s.str.replace_all(_CITATION, "")
        checks["c4_terminal_punctuation"] = ~cited.str.contains(_C4_END) | cited.str.ends_with(
            "..."
        )
    if line_removals and rules.c4_min_words_per_line is not None:
        checks["c4_min_words_per_line"] = s.str.count_matches(r"\S+") < rules.c4_min_words_per_line
    early = [f"_{name}" for name in checks]  # lorem ipsum counts in lines that pass these
    if line_removals and rules.c4_javascript:
        checks["c4_javascript"] = s.str.contains_any(["javascript"], ascii_case_insensitive=True)
    if line_removals and rules.c4_policy:
        checks["c4_policy"] = s.str.contains_any(POLICY, ascii_case_insensitive=True)
    first = [
        (s == "").alias("_blank"),
        *(broken.fill_null(False).alias(f"_{name}") for name, broken in checks.items()),
        s.str.contains_any(["lorem ipsum"], ascii_case_insensitive=True).alias("_has_lorem"),
        s.str.contains("{", literal=True).alias("_has_brace"),
    ]
    passed = ~pl.col("_blank")
    for column in early:
        passed = passed & ~pl.col(column)
    javascript = pl.col("_c4_javascript") if "c4_javascript" in checks else pl.lit(False)
    rule = pl.when(pl.col("_blank")).then(pl.lit(None, pl.String))
    for name in checks:
        rule = rule.when(pl.col(f"_{name}")).then(pl.lit(name))
    second = [
        rule.otherwise(pl.lit(None, pl.String)).alias("_rule"),
        (passed & pl.col("_has_lorem") if rules.c4_lorem_ipsum else pl.lit(False)).alias("_lorem"),
        (
            passed & ~javascript & pl.col("_has_brace") if rules.c4_curly_braces else pl.lit(False)
        ).alias("_curly"),
    ]
    return first, second


def _ratio(part: pl.Expr, whole: pl.Expr, enabled: float | None) -> pl.Expr:
    """part / whole, null where whole is 0 or the rule is off."""
    if enabled is None:
        return pl.lit(None, pl.Float64)
    return pl.when(whole > 0).then(part / whole).otherwise(pl.lit(None, pl.Float64))


def apply_line_rules(
    texts: pl.DataFrame, rules: LineRules, *, line_removals: bool = True
) -> pl.DataFrame:
    """C4 line removals, then the drop rules, per record (columns record_id, text in).

    Returns, in input order: record_id; text (after the C4 line removals when
    `line_removals`, else unchanged); removed_lines (UInt32); removed (list[str], the C4 rule
    of each removed line in line order); reason (the first drop rule broken, in the order of
    REASONS; null: kept); and the measured quantities mojibake_ratio and control_ratio (on the
    original text), line_punct_ratio, short_line_ratio, char_duplicates_ratio and
    new_line_ratio (on the text after line removals), each null when its rule is off.
    Without `line_removals` no line is removed (profiles like short_messages) and lorem ipsum
    and curly braces are looked for in every line; the drops still apply.
    """
    checks, decided = _lines(rules, line_removals)
    kept = pl.col("_rule").is_null()
    judged = kept & (pl.col("_line").str.strip_chars() != "")  # FineWeb's non-blank lines
    later_copy = ~pl.struct("_doc", "_line").is_first_distinct()
    words = tokens(pl.col("_line")).list.len() if rules.fineweb_new_line_ratio else pl.lit(0)
    short = pl.col("_line").str.len_chars() <= rules.fineweb_short_line_length
    per_doc = (
        texts.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_doc"),
            pl.col("text").str.split("\n").alias("_line"),
        )
        .explode("_line")
        .with_columns(checks)
        .with_columns(decided)
        .with_columns(later_copy.alias("_copy"), words.alias("_words"))
        .group_by("_doc", maintain_order=True)
        .agg(
            pl.col("_line").filter(kept).str.join("\n").alias("text"),
            pl.col("_rule").is_not_null().sum().cast(pl.UInt32).alias("removed_lines"),
            pl.col("_rule").drop_nulls().alias("removed"),
            pl.col("_lorem").any().alias("_lorem"),
            pl.col("_curly").any().alias("_curly"),
            judged.sum().alias("_judged"),
            (judged & pl.col("_line").str.contains(_FINEWEB_END)).sum().alias("_punct"),
            (judged & short).sum().alias("_short"),
            pl.col("_line").filter(judged & pl.col("_copy")).str.len_chars().sum().alias("_dup"),
            pl.col("_line").filter(kept).str.len_chars().sum().alias("_chars"),
            (kept.sum() - 1).clip(lower_bound=0).alias("_newlines"),
            pl.col("_words").filter(kept).sum().alias("_words"),
        )
    )
    original = pl.col("_original")
    chars = original.str.len_chars()
    measured = per_doc.with_columns(texts["record_id"], texts["text"].alias("_original")).select(
        "record_id",
        "text",
        "removed_lines",
        "removed",
        _ratio(
            chars - original.str.replace_all(MOJIBAKE, "").str.len_chars(),
            chars,
            rules.max_mojibake_ratio,
        ).alias("mojibake_ratio"),
        _ratio(original.str.count_matches(CONTROL), chars, rules.max_control_char_ratio).alias(
            "control_ratio"
        ),
        _ratio(pl.col("_punct"), pl.col("_judged"), rules.fineweb_line_punct_ratio).alias(
            "line_punct_ratio"
        ),
        _ratio(pl.col("_short"), pl.col("_judged"), rules.fineweb_short_line_ratio).alias(
            "short_line_ratio"
        ),
        _ratio(pl.col("_dup"), pl.col("_chars"), rules.fineweb_char_duplicates_ratio).alias(
            "char_duplicates_ratio"
        ),
        _ratio(pl.col("_newlines"), pl.col("_words"), rules.fineweb_new_line_ratio).alias(
            "new_line_ratio"
        ),
        "_lorem",
        "_curly",
        ((pl.col("removed_lines") > 0) & (pl.col("_judged") == 0)).alias("_emptied"),
    )
    return measured.select(
        "record_id", "text", "removed_lines", "removed", _reason(rules).alias("reason"),
        "mojibake_ratio", "control_ratio", "line_punct_ratio", "short_line_ratio",
        "char_duplicates_ratio", "new_line_ratio",
    )  # fmt: skip


def _reason(rules: LineRules) -> pl.Expr:
    def above(column: str, bound: float | None) -> pl.Expr:
        return pl.col(column) > bound if bound is not None else pl.lit(False)

    broken = {
        "mojibake": above("mojibake_ratio", rules.max_mojibake_ratio),
        "invalid_characters": above("control_ratio", rules.max_control_char_ratio),
        "c4_lorem_ipsum": pl.col("_lorem"),
        "c4_curly_braces": pl.col("_curly"),
        "only_removed_lines": pl.col("_emptied"),
        "fineweb_line_punct": (
            pl.col("line_punct_ratio") < rules.fineweb_line_punct_ratio
            if rules.fineweb_line_punct_ratio is not None
            else pl.lit(False)
        ),
        "fineweb_short_lines": above("short_line_ratio", rules.fineweb_short_line_ratio),
        "fineweb_char_duplicates": above(
            "char_duplicates_ratio", rules.fineweb_char_duplicates_ratio
        ),
        "fineweb_list_like": above("new_line_ratio", rules.fineweb_new_line_ratio),
    }
    decided = pl.when(pl.lit(False)).then(pl.lit(None, pl.String))
    for name in REASONS:
        decided = decided.when(broken[name].fill_null(False)).then(pl.lit(name))
    return decided.otherwise(pl.lit(None, pl.String))
