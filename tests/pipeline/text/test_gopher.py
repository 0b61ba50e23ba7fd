"""Gopher's quality and repetition rules by value, on crafted boundary cases."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.config.quality import GopherThresholds
from pipeline.text.gopher import gopher_decisions, gopher_signals, tokens

# 59 words, 64 tokens, several stop words, hardly a repeated pair of words
PARAGRAPH = (
    "The committee met on a cold Tuesday morning to discuss the budget of the new library. "
    "Members argued that the building should have wider windows, better heating and a quiet "
    "reading room with comfortable chairs. After two hours of debate, they agreed to ask the "
    "city for more money and to publish a report before the end of spring."
)
SENTENCE = "the quick brown fox jumps over the lazy dog of"


def decide(*texts: str, **thresholds) -> list[str | None]:
    frame = pl.LazyFrame({"record_id": [str(i) for i in range(len(texts))], "text": texts})
    return gopher_decisions(frame, GopherThresholds(**thresholds))["reason"].to_list()


def test_tokens_split_punctuation_and_clitics_like_spacy():
    found = pl.select(tokens(pl.lit("Hello, world... it's a test—really? don't (x)"))).item()
    assert found.to_list() == [
        "Hello", ",", "world", "...", "it", "'s", "a", "test", "—", "really", "?",
        "do", "n't", "(", "x", ")",
    ]  # fmt: skip


def test_word_count_bounds_count_words_not_punctuation():
    words = PARAGRAPH.replace(".", "").replace(",", "").split()
    fifty, forty_nine = " ".join(words[:50]), " ".join(words[:49]) + " . , ;"
    assert decide(fifty, forty_nine) == [None, "gopher_short_doc"]


def test_hashes_ellipses_bullets_and_alpha_ratio():
    signals = gopher_signals(pl.LazyFrame({"record_id": ["a"], "text": [PARAGRAPH]}))
    assert (signals["words"].item(), signals["tokens"].item()) == (59, 64)
    assert decide(PARAGRAPH + " #" * 7) == [None]  # 7 / 71 tokens = 0.099
    assert decide(PARAGRAPH + " #" * 8) == ["gopher_too_many_hashes"]  # 8 / 72 = 0.111
    lines = PARAGRAPH.split(". ")
    bullets = "\n".join(f"- {line}" for line in lines)
    assert decide(bullets) == ["gopher_too_many_bullets"]  # 3 of 3 lines
    others = "A note was added later.\nNobody objected to it.\nThe meeting ended at noon."
    assert decide(bullets + "\n" + others) == [None]  # 3 of 6
    numbers = PARAGRAPH + " " + " ".join(str(i) for i in range(18))  # 23 non-alpha of 82
    assert decide(numbers) == ["gopher_below_alpha_threshold"]


def test_stop_words_are_distinct_and_case_sensitive():
    no_stops = PARAGRAPH.replace(" the ", " one ").replace(" of ", " in ").replace(" to ", " ")
    no_stops = no_stops.replace(" and ", " or ").replace(" with ", " plus ").replace(" have ", " ")
    no_stops = no_stops.replace(" that ", " how ")
    assert decide(no_stops) == ["gopher_enough_stop_words"]  # only "The", capitalized
    assert decide(no_stops + " Ask the city and go.") == [None]


def test_repeated_lines_paragraphs_and_ngrams():
    assert decide(PARAGRAPH + "\n\n" + PARAGRAPH) == ["dup_para_frac"]  # 1 of 2 repeats
    lines = "\n".join([PARAGRAPH, "same line here", "same line here", "same line here"])
    assert decide(lines) == ["dup_line_frac"]  # 2 of 4 lines repeat
    chant = PARAGRAPH + " " + " ".join(["go", "team"] * 20)  # 20 × "go team": 140 of 380 chars
    assert decide(chant) == ["top_2_gram"]
    echo = PARAGRAPH + " " + PARAGRAPH[:120]  # a 20-word passage said twice
    assert decide(echo) == ["duplicated_5_n_grams"]


@pytest.mark.parametrize("bound", [None, 0.4])
def test_a_threshold_set_to_none_switches_its_rule_off(bound):
    lines = "\n".join([PARAGRAPH] + ["same line here"] * 3)
    expected = None if bound is None else "dup_line_frac"
    assert decide(lines, dup_line_frac=bound, dup_line_char_frac=None) == [expected]
