"""Language identification (pipeline/text/langid.py) on real translated text: the messages of the
gettext catalogs installed here (German, French, Spanish, Italian) and their English msgids;
the batched walk against py3langid's own per-text classify; and which records `measure`
judges by language."""

from __future__ import annotations

import gettext
from functools import cache

import polars as pl
import pytest
from helpers import LOCALE

from pipeline.config import QualityConfig
from pipeline.quality.stage import measure
from pipeline.text import langid
from pipeline.text.langid import identify

# per language the first of these catalogs that is installed (machines differ)
CATALOGS = ("bash", "coreutils", "apt")
LANGUAGES = ("de", "fr", "es", "it")


def catalog(language: str, domain: str) -> dict[str, str] | None:
    """msgid -> translation of one installed gettext catalog (None: not installed)."""
    path = LOCALE / language / "LC_MESSAGES" / f"{domain}.mo"
    if not path.exists():
        return None
    with path.open("rb") as handle:
        messages = gettext.GNUTranslations(handle)._catalog
    return {  # plural forms are keyed (msgid, n); the header's msgid is ""
        msgid: text
        for msgid, text in messages.items()
        if isinstance(msgid, str) and isinstance(text, str) and msgid and text != msgid
    }


def first_domain(*languages: str) -> str:
    """The first catalog of CATALOGS installed for every one of `languages`."""
    for domain in CATALOGS:
        if all(catalog(language, domain) for language in languages):
            return domain
    pytest.fail(
        f"no gettext catalog of {', '.join(CATALOGS)} for {', '.join(languages)} under "
        f"{LOCALE}: install the translations of bash or coreutils",
        pytrace=False,
    )


@cache
def catalog_messages(language: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(catalog, its 40 longest translations of at least 8 words, each with its English
    msgid of at least 8 words), from the first catalog of CATALOGS installed for `language`."""
    domain = first_domain(language)
    pairs = [
        (msgid, text)
        for msgid, text in catalog(language, domain).items()
        if len(text.split()) >= 8 and len(msgid.split()) >= 8
    ]
    pairs.sort(key=lambda pair: (-len(pair[1]), pair[1]))
    return domain, tuple(pairs[:40])


def shares(found: pl.DataFrame, language: str) -> tuple[float, float]:
    """(share identified as `language`, share identified as it with a score >= 0.8)."""
    right = found["language"] == language
    return right.mean(), (right & (found["language_score"] >= 0.8)).mean()


@pytest.mark.parametrize("language", LANGUAGES)
def test_translations_are_identified_as_their_catalogs_language(language):
    domain, pairs = catalog_messages(language)
    assert len(pairs) == 40, f"{domain} ({language}) has too few long messages"
    found = identify(pl.Series([text for _, text in pairs]))
    assert found.columns == ["language", "language_score"]
    assert found.schema == {"language": pl.String, "language_score": pl.Float64}
    identified, sure = shares(found, language)
    wrong = found.filter(pl.col("language") != language)["language"].to_list()
    assert identified >= 0.95, f"{domain} ({language}): also identified as {wrong}"
    assert sure >= 0.8, f"{domain} ({language}): {sure:.0%} with a score of 0.8 or more"
    assert found["language_score"].is_between(0, 1).all()


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_english_originals_are_identified_as_english(language):
    domain, pairs = catalog_messages(language)
    found = identify(pl.Series([msgid for msgid, _ in pairs]))
    identified, sure = shares(found, "en")
    assert identified >= 0.95, f"{domain} msgids: {found['language'].to_list()}"
    assert sure >= 0.8


def test_languages_are_told_apart_message_by_message():
    """The same message in English and four translations: five different answers."""
    domain = first_domain(*LANGUAGES)
    translated = {language: catalog(language, domain) for language in LANGUAGES}
    shared = sorted(
        (m for m in translated["de"] if all(m in t for t in translated.values())),
        key=lambda msgid: (-len(msgid), msgid),
    )
    shared = [msgid for msgid in shared if len(msgid.split()) >= 8][:20]
    assert len(shared) == 20, f"{domain}: too few messages translated into {LANGUAGES}"
    for msgid in shared:
        texts = [msgid, *(translated[language][msgid] for language in LANGUAGES)]
        found = identify(pl.Series(texts))["language"].to_list()
        assert found == ["en", *LANGUAGES], (msgid, found)


def py3langid_answers(texts: list[str | None]) -> list[tuple[str | None, float | None]]:
    from py3langid.langid import _load_identifier

    classify = _load_identifier(norm_probs=True).classify
    return [(None, None) if text is None else classify(text) for text in texts]


def test_batches_give_py3langids_answers_exactly(sms_spam, monkeypatch):
    """Real text of every length, in many batches, with the longest texts walked one by one:
    the same language and the same float score, to the last bit, as py3langid's classify."""
    from helpers import changelog_changes

    texts = [
        *sms_spam["text"].head(1500).to_list(),
        *changelog_changes(("coreutils", "grep", "tar")),
        *(text for language in LANGUAGES for _, text in catalog_messages(language)[1]),
        "", "   ", "12345", "ÄÖÜ SHOUTED IN CAPITALS", "\u00e9\u0301 combining", None,
    ]  # fmt: skip
    lengths = sorted(len(t.encode()) for t in texts if t)
    assert lengths[-1] > 4000 and lengths[0] < 10, "short and long texts"
    monkeypatch.setattr(langid, "BATCH_BYTES", 20_000)  # a few dozen batches
    found = identify(pl.Series(texts, dtype=pl.String))
    assert found.rows() == py3langid_answers(texts)
    monkeypatch.setattr(langid, "MIN_LOCKSTEP", len(texts))  # every text walked alone
    assert identify(pl.Series(texts, dtype=pl.String)).rows() == found.rows()


def test_candidates_give_py3langids_restricted_answers_and_keep_english_sms_english(sms_spam):
    """Among candidates, every answer is py3langid's after `set_languages` (language and score
    to the last bit), except where the languages outside the candidates hold 95% of a text's
    probability: then it is py3langid's unrestricted answer. On the real SMS, the informal
    English py3langid calls Nigerian Pidgin (pcm) or Luganda (lg) is English among the
    languages a corpus may hold."""
    from py3langid.langid import _load_identifier

    candidates = ["en", "de", "fr", "es", "it", "nl", "pt", "sr"]  # sr: a label given twice
    texts = [
        *sms_spam["text"].to_list(),
        *(t for lang in LANGUAGES for _, t in catalog_messages(lang)[1]),
    ]
    restricted = _load_identifier(norm_probs=True)
    restricted.set_languages(candidates)
    among = identify(pl.Series(texts), candidates)
    anywhere = identify(pl.Series(texts))
    for text, got, free in zip(texts, among.rows(), anywhere.rows(), strict=True):
        if got[0] in candidates:
            assert got == restricted.classify(text)
        else:  # its probability lies outside the candidates: py3langid's own answer stands
            assert got == free
        if free[0] not in candidates and free[1] >= 0.95:
            assert got == free
    kept_outside = [row for row in among.rows() if row[0] not in candidates]
    assert len(kept_outside) < 20  # SMS py3langid is sure are not any candidate language

    sms = pl.Series(sms_spam["text"])
    rare = identify(sms)["language"].is_in(["pcm", "lg"])
    assert rare.sum() > 100
    assert (identify(sms, candidates)["language"].filter(rare) == "en").mean() > 0.8  # 86%
    with pytest.raises(ValueError, match="unknown language code.*xx: py3langid knows"):
        identify(sms.head(1), ["en", "xx"])
    with pytest.raises(ValueError, match="none given"):
        identify(sms.head(1), [])


@pytest.mark.parametrize("language", ["ru", "pl", "sv"])
def test_text_in_a_language_the_candidates_leave_out_keeps_its_language(language):
    """Translations into a language outside the candidates are not forced into one of them
    (a Swedish text is not Dutch): py3langid's own answer stands where it is sure."""
    _, pairs = catalog_messages(language)
    texts = pl.Series([text for _, text in pairs])
    found = identify(texts, ["en", "de", "fr", "es", "it", "nl", "pt"])
    assert (found["language"] == language).mean() >= 0.9
    alone = identify(texts)
    sure = (alone["language"] == language) & (alone["language_score"] >= 0.95)
    assert (found["language"] == language).filter(sure).all()


def test_null_text_has_no_language_and_empty_input_keeps_the_schema():
    _, pairs = catalog_messages("fr")
    found = identify(pl.Series([None, pairs[0][1], None], dtype=pl.String))
    assert found.row(0) == (None, None) and found.row(2) == (None, None)
    assert found["language"][1] == "fr"
    empty = identify(pl.Series([], dtype=pl.String))
    assert empty.height == 0
    assert empty.schema == {"language": pl.String, "language_score": pl.Float64}


def test_identify_is_deterministic():
    texts = pl.Series([text for language in LANGUAGES for _, text in catalog_messages(language)[1]])
    first = identify(texts)
    assert first.equals(identify(texts))
    assert first.equals(pl.concat([identify(texts[i : i + 1]) for i in range(len(texts))]))


def test_measure_judges_only_texts_of_min_words_or_more():
    german = catalog_messages("de")[1][0][1]
    texts = {
        "long": german,
        "four": "Das ist nicht gut",  # 4 words: under min_words (5)
        "five": "Das ist leider nicht gut",  # 5 words: judged
        "blank": "   ",
    }
    records = pl.DataFrame({"record_id": list(texts), "source": "s", "text": list(texts.values())})
    measured = measure(records, QualityConfig(language={"allow": ["en"]}))
    by_id = {row["record_id"]: row for row in measured.iter_rows(named=True)}
    assert by_id["long"]["language"] == "de" and by_id["long"]["language_score"] >= 0.9
    assert by_id["long"]["reason"] == "language_not_allowed"
    assert by_id["four"]["reason"] is None  # not judged, but its language is recorded
    assert by_id["four"]["language"] == "de"
    assert (by_id["blank"]["language"], by_id["blank"]["language_score"]) == (None, None)
    assert by_id["five"]["reason"] == "language_not_allowed"

    raised = measure(records, QualityConfig(language={"allow": ["en"], "min_words": 6}))
    assert raised.filter(pl.col("record_id") == "five")["reason"].item() is None

    # the code and none profiles record the language and never drop for it
    for profile in ("code", "none"):
        recorded = measure(
            records, QualityConfig(default_profile=profile, language={"allow": ["en"]})
        )
        assert recorded["reason"].is_null().all()
        assert recorded.filter(pl.col("record_id") == "long")["language"].item() == "de"
