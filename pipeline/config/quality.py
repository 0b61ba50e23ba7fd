"""The `quality:` section: filter profiles per source, languages, and the bounds of the
Gopher, C4, FineWeb and encoding rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.config.base import Strict


class LineRules(BaseModel):
    """Bounds of the C4, FineWeb and encoding rules; None (or False) turns a rule off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # C4 line removals (Raffel et al. 2020 §2.2 and the TFDS c4 cleaning)
    c4_terminal_punctuation: bool = True
    c4_min_words_per_line: int | None = 3
    c4_max_word_length: int | None = 1000
    c4_javascript: bool = True
    c4_policy: bool = True
    # C4 whole-document drops
    c4_lorem_ipsum: bool = True
    c4_curly_braces: bool = True
    # FineWeb drops (datatrove FineWebQualityFilter defaults)
    fineweb_line_punct_ratio: float | None = 0.12  # dropped when the share is below
    fineweb_short_line_ratio: float | None = 0.67  # dropped when the share is above
    fineweb_short_line_length: int = 30
    fineweb_char_duplicates_ratio: float | None = 0.01  # dropped when above
    fineweb_new_line_ratio: float | None = 0.3  # dropped when above
    # Encoding (Thresher's bounds): dropped when above
    max_mojibake_ratio: float | None = 0.0005
    max_control_char_ratio: float | None = 0.0


class GopherThresholds(BaseModel):
    """datatrove's defaults; a None disables a check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = 0.8
    min_stop_words: int | None = 2
    dup_para_frac: float | None = 0.3
    dup_para_char_frac: float | None = 0.2
    dup_line_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    top_n_grams: dict[int, float] = {2: 0.2, 3: 0.18, 4: 0.16}
    dup_n_grams: dict[int, float] = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}


QUALITY_PROFILES = ("prose", "short_messages", "code", "none")


LanguageCode = Annotated[str, Field(pattern=r"^[a-z]{2,3}$")]


class LanguageConfig(Strict):
    """Every record's language is identified (published as `language` and `language_score`);
    `allow` also filters by it."""

    allow: list[LanguageCode] | None = Field(
        None, description="ISO 639-1 codes to keep, e.g. [en]; null: any (recorded, not filtered)"
    )
    candidates: Annotated[list[LanguageCode], Field(min_length=1)] | None = Field(
        None,
        description="the languages the corpus may hold, e.g. [en, de, fr]: a text is given one "
        "of them, so a rare language is never chosen for common-language text; null: any "
        "py3langid knows",
    )
    outside: Annotated[float, Field(gt=0, le=1)] = Field(
        0.95,
        description="a text with this share of its probability in languages outside the "
        "candidates keeps py3langid's own answer (text in a language the list leaves out is "
        "not forced into one of them)",
    )
    min_confidence: Annotated[float, Field(ge=0, le=1)] = 0.5
    min_words: Annotated[int, Field(ge=0)] = Field(
        5, description="shorter texts are not judged by their language (it is still recorded)"
    )

    @model_validator(mode="after")
    def _allowed_are_candidates(self) -> LanguageConfig:
        if self.allow is not None and self.candidates is not None:
            missing = sorted(set(self.allow) - set(self.candidates))
            if missing:
                raise ValueError(
                    f"allow names {', '.join(missing)}, which candidates leaves out: such "
                    "records could never be identified as allowed; add them to candidates"
                )
        return self


class QualityConfig(Strict):
    """Per source a filter profile: prose (Gopher, C4, FineWeb, encoding, language),
    short_messages (encoding, lorem ipsum, language: never a drop for being short), code
    (encoding), none. Sources not named get `default_profile`."""

    default_profile: Literal[QUALITY_PROFILES] = "short_messages"
    profiles: dict[str, Literal[QUALITY_PROFILES]] = {}
    language: LanguageConfig = LanguageConfig()
    gopher: GopherThresholds = GopherThresholds()
    lines: LineRules = LineRules()
