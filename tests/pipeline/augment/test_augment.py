"""Augmentation on 150 real SMS messages: origins, variants, the embedding check, review.

Splits are assigned by position (7 of 10 train, 2 validation, 1 test). The stage runs share one
work folder, so its embedding cache holds each text once: a variant of one origin, seed and
index is the same text in every run, whatever else is chosen.
"""

from __future__ import annotations

import json
import re
import string
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from helpers import SMS_SOURCE, as_records, run_in_parts

from pipeline.augment.augment import augment, judge, label_centroids, vocabularies
from pipeline.augment.transforms import (
    TRANSFORMS,
    case,
    char_noise,
    punctuation,
    touched,
    word_dropout,
    word_insert,
    word_swap,
)
from pipeline.config import AUGMENT_TRANSFORMS, AugmentConfig, RunConfig, SourceDeclaration
from pipeline.config import config_hash as hash_of_config
from pipeline.core import ledger, reasons
from pipeline.core.identity import KEY_SEPARATOR, xxh3_128_hex
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.stage import RunContext

CFG = AugmentConfig(seed=13, fraction=1.0, variants=1)
SPLITS = ["train"] * 7 + ["validation"] * 2 + ["test"]
SENTENCE = "the quick brown fox jumps over the lazy dog, then naps near the old river bank"


def records(rows: list[dict]) -> pl.DataFrame:
    frame = as_records(rows, source="sms", license="CC-BY-4.0", consent="public-release")
    frame = frame.collect()
    digest = xxh3_128_hex(frame["text"])
    return frame.with_columns(
        source_content_hash=digest, content_hash=digest, cluster_id=pl.col("record_id")
    ).with_columns(pl.Series("split", [row["split"] for row in rows]))


@pytest.fixture(scope="module")
def sms_records(sms_spam) -> pl.DataFrame:
    rows = []
    for position, row in enumerate(sms_spam.slice(0, 150).iter_rows(named=True)):
        index = int(row["index"])
        rows.append(
            {
                "record_id": f"sms-{index}",
                "location": f"data/sms-1.jsonl:{index + 1}",
                "text": row["text"],
                "label": "spam" if row["spam"] == "1" else "ham",
                "group": f"sender-{index // 7}",
                "timestamp": datetime(2012, 1 + index % 12, 1 + index % 28, tzinfo=UTC),
                "metadata": json.dumps({"sender": f"sender-{index // 7}"}),
                "synthetic": False,
                "split": SPLITS[position % 10],
            }
        )
    return records(rows)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("augment-work")


def context(workdir, decisions: pl.DataFrame | None = None) -> RunContext:
    source = SourceDeclaration(**SMS_SOURCE, base_dir=str(workdir))
    cfg = RunConfig(name="t", workdir=str(workdir), sources=[source])
    return RunContext(
        run_id="r",
        run_dir=workdir,
        config=cfg,
        config_hash=hash_of_config(cfg),
        review_decisions=decisions,
    )


@pytest.fixture(scope="module")
def first(sms_records, workdir):
    return augment(sms_records.lazy(), CFG, context(workdir))


def variants_of(result) -> pl.DataFrame:
    return result.frame.filter(pl.col("augmented_from").is_not_null()).collect()


def evidence(events: pl.DataFrame, action: str) -> dict[str, dict]:
    chosen = events.filter(pl.col("action") == action)
    return {r: json.loads(e) for r, e in chosen.select("record_id", "evidence").iter_rows()}


# the stage on real records ------------------------------------------------------------------


def test_same_seed_same_variants_and_row_order_does_not_matter(sms_records, workdir, first):
    again = augment(sms_records.reverse().lazy(), CFG, context(workdir))
    assert again.stats == first.stats
    key = ["record_id", "text"]
    assert variants_of(again).select(key).sort(key).equals(variants_of(first).select(key).sort(key))
    assert again.events.sort("record_id", "action").equals(first.events.sort("record_id", "action"))
    assert again.review_items.sort("record_id").equals(first.review_items.sort("record_id"))


def test_another_seed_gives_other_variants(sms_records, workdir, first):
    other = augment(sms_records.lazy(), CFG.model_copy(update={"seed": 14}), context(workdir))
    ids = evidence(first.events, reasons.GENERATED)
    other_ids = evidence(other.events, reasons.GENERATED)
    assert other.stats["generated"] == first.stats["generated"] == 105  # every train record
    assert not set(ids) & set(other_ids)
    assert {e["seed"] for e in other_ids.values()} == {14}
    texts = dict(variants_of(first).select("augmented_from", "text").iter_rows())
    other_texts = dict(variants_of(other).select("augmented_from", "text").iter_rows())
    both = set(texts) & set(other_texts)
    assert len(both) > 40
    assert sum(texts[o] == other_texts[o] for o in both) <= len(both) // 5


def test_origins_are_labelled_train_records_and_variants_copy_them(sms_records, workdir, first):
    train = sms_records.filter(pl.col("split") == "train")
    generated = evidence(first.events, reasons.GENERATED)
    assert sorted(e["augmented_from"] for e in generated.values()) == sorted(train["record_id"])
    for variant_id, e in generated.items():
        key = KEY_SEPARATOR.join(["augment", e["augmented_from"], "13", str(e["index"])])
        assert variant_id == xxh3_128_hex(pl.Series([key]))[0]
        assert e["index"] == 0 and e["transform"] in AUGMENT_TRANSFORMS
    variants = variants_of(first)
    assert variants.height == first.stats["kept"] > 50
    assert set(variants["split"]) == {"train"}
    joined = variants.join(sms_records, left_on="augmented_from", right_on="record_id")
    assert joined.height == variants.height
    for column in ["source", "group", "timestamp", "label", "license", "consent", "metadata"]:
        assert joined[column].equals(joined[f"{column}_right"], check_names=False)
    assert joined["cluster_id"].equals(joined["cluster_id_right"], check_names=False)
    assert joined["synthetic"].equals(joined["synthetic_right"], check_names=False)
    assert (joined["location"] == joined["location_right"] + "#augment-0").all()
    assert (joined["content_hash"] == xxh3_128_hex(joined["text"])).all()
    assert (joined["source_content_hash"] == joined["content_hash"]).all()
    assert (joined["text"] != joined["text_right"]).all()
    # a smaller fraction chooses a subset of the same origins, with the same variants
    half = augment(sms_records.lazy(), CFG.model_copy(update={"fraction": 0.4}), context(workdir))
    assert 20 < half.stats["origins"] < 65
    half_ids = evidence(half.events, reasons.GENERATED)
    assert set(half_ids) < set(generated)
    assert all(half_ids[i] == generated[i] for i in half_ids)


def test_every_variant_is_accounted_for(sms_records, first):
    events, stats = first.events, first.stats
    generated = events.filter(pl.col("action") == reasons.GENERATED)
    assert generated["record_id"].n_unique() == generated.height == stats["generated"]
    assert set(generated["reason"]) == {reasons.AUGMENTED}
    assert not generated["terminal"].any()
    terminal = events.filter(pl.col("terminal"))
    assert terminal["record_id"].n_unique() == terminal.height
    assert set(terminal["record_id"]) <= set(generated["record_id"])
    kept = variants_of(first)
    assert not set(kept["record_id"]) & set(terminal["record_id"])
    assert kept.height + terminal.height == stats["generated"]
    by_reason = dict(terminal.group_by("reason").len().iter_rows())
    assert by_reason.get(reasons.AUGMENTATION_DRIFTED, 0) == stats["drifted"] > 0
    assert by_reason.get(reasons.AUGMENTATION_UNCERTAIN, 0) == stats["uncertain"] >= 3
    assert by_reason.get(reasons.AUGMENTATION_DUPLICATE, 0) == stats["duplicates"]
    assert sum(stats["by_transform"].values()) == stats["kept"] == kept.height
    out = first.frame.collect()
    assert out.height == sms_records.height + stats["kept"]
    assert out.schema == sms_records.schema
    # the run's ledger balances once publish has given every record its terminal event
    published = ledger.events(out, stage="publish", action=reasons.PUBLISHED, reason=None)
    totals = ledger.check_accounting(
        pl.concat([events, published]).lazy(), sms_records.height, stats["generated"]
    )
    assert totals["dropped"] == stats["drifted"] + stats["duplicates"]
    assert totals["quarantined"] == stats["uncertain"]
    drifted = evidence(terminal, reasons.DROPPED)
    assert all(e["cosine_origin"] < CFG.min_cosine for e in drifted.values() if "min_cosine" in e)


def test_a_variant_equal_to_an_existing_text_is_a_duplicate(sms_records, workdir, first):
    planted_text = variants_of(first).sort("record_id")["text"][0]
    planted = records(
        [{"record_id": "planted", "text": planted_text, "label": "ham", "split": "validation"}]
    )
    result = augment(pl.concat([sms_records, planted]).lazy(), CFG, context(workdir))
    dropped = evidence(result.events, reasons.DROPPED)
    assert [e for e in dropped.values() if e.get("duplicate_of") == "planted"] != []
    assert result.stats["duplicates"] == first.stats["duplicates"] + 1
    assert result.stats["kept"] + result.stats["uncertain"] == (
        first.stats["kept"] + first.stats["uncertain"] - 1
    )
    # a one-word text cannot lose a word: the variant is its origin's text
    rows = [
        {"record_id": "one", "text": "ok", "label": "ham", "split": "train"},
        {"record_id": "two", "text": "see you", "label": "ham", "split": "train"},
    ]
    cfg = AugmentConfig(fraction=1.0, variants=4, transforms=["word_dropout"], strength=0.5)
    result = augment(records(rows).lazy(), cfg, context(workdir))
    dropped = evidence(result.events, reasons.DROPPED)
    of_one = [e for e in dropped.values() if e["augmented_from"] == "one"]
    assert [e["duplicate_of"] for e in of_one] == ["one"] * 4
    # "see you" has two one-word variants at most: of four, two or more repeat earlier ones
    of_two = {
        i: e for i, e in dropped.items() if e["augmented_from"] == "two" and "duplicate_of" in e
    }
    generated = evidence(result.events, reasons.GENERATED)
    assert len(of_two) >= 2
    for e in of_two.values():
        assert generated[e["duplicate_of"]]["augmented_from"] == "two"
        assert e["duplicate_of"] not in of_two
    assert result.stats["generated"] == 8 and result.stats["duplicates"] >= 6


def test_cut_in_parts_it_makes_and_judges_the_variants_of_one_call(sms_records, workdir, first):
    """Run by key: the vocabularies and label centroids come from every part's sample, and a
    variant repeating a text of another part (a planted copy) is still a duplicate."""
    planted_text = variants_of(first).sort("record_id")["text"][1]
    planted = records(
        [{"record_id": "planted", "text": planted_text, "label": "ham", "split": "test"}]
    )
    frame = pl.concat([sms_records, planted])
    whole = augment(frame.lazy(), CFG, context(workdir))
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=11).lazy()
    parted = run_in_parts(augment, shuffled, CFG, context(workdir), 4)
    assert parted.frame.collect().equals(whole.frame.collect().sort("record_id"))
    assert parted.events.equals(whole.events.sort("record_id", maintain_order=True))
    assert parted.stats == whole.stats and whole.stats["duplicates"] >= 1
    assert whole.stats["kept"] > 0 and whole.stats["uncertain"] > 0


def test_review_items_and_decisions(sms_records, workdir, first):
    items = first.review_items
    assert items.schema == REVIEW_ITEM_SCHEMA
    assert items.height == first.stats["uncertain"] >= 3
    assert set(items["reason"]) == {reasons.AUGMENTATION_UNCERTAIN}
    assert (items["group_hash"] == xxh3_128_hex(items["group"])).all()
    quarantined = evidence(first.events, reasons.QUARANTINED)
    for record_id, shown, label in items.select("record_id", "evidence", "label").iter_rows():
        e = json.loads(shown)
        assert quarantined[record_id] == e
        assert set(e) == {
            "augmented_from", "transform", "cosine_origin", "own_label", "nearest_label", "margin"
        }  # fmt: skip
        assert e["own_label"] == label and e["nearest_label"] == {"ham": "spam"}.get(label, "ham")
        assert e["margin"] <= 0 and e["cosine_origin"] >= CFG.min_cosine
    approve, reject, other = items.sort("record_id").head(3).iter_rows(named=True)
    decisions = pl.DataFrame(
        [
            {**_decision(approve), "item_id": 7, "status": "approved", "reviewer": "ana"},
            {**_decision(reject), "item_id": 8, "status": "rejected", "reviewer": "bo"},
            # a decision on other content does not count
            {**_decision(reject), "item_id": 9, "status": "approved", "review_hash": "0" * 32},
            # nor one on another reason
            {**_decision(other), "item_id": 10, "reason": reasons.CONTAMINATED_EVAL},
        ]
    )  # no `label` column, as decisions on items that take no label are built
    result = augment(sms_records.lazy(), CFG, context(workdir, decisions))
    assert result.stats["approved"] == 1 and result.stats["rejected"] == 1
    assert result.stats["uncertain"] == first.stats["uncertain"] - 2
    assert result.stats["kept"] == first.stats["kept"] + 1
    assert approve["record_id"] in set(variants_of(result)["record_id"])
    assert evidence(result.events, reasons.APPROVED) == {
        approve["record_id"]: {"item": 7, "reviewer": "ana", "flag": "augmentation_uncertain"}
    }
    rejected = result.events.filter(pl.col("reason") == reasons.REVIEW_REJECTED)
    assert rejected.select("record_id", "action", "evidence").rows() == [
        (reject["record_id"], reasons.DROPPED, '{"item":8,"reviewer":"bo"}')
    ]
    terminal = result.events.filter(pl.col("terminal"))
    assert approve["record_id"] not in set(terminal["record_id"])
    assert set(result.review_items["record_id"]) == set(items["record_id"]) - {
        approve["record_id"],
        reject["record_id"],
    }


def _decision(item: dict) -> dict:
    return {
        "record_id": item["record_id"],
        "source_content_hash": item["source_content_hash"],
        "review_hash": item["review_hash"],
        "reason": reasons.AUGMENTATION_UNCERTAIN,
        "status": "approved",
        "reviewer": "x",
    }


def test_without_config_the_frame_passes_through(sms_records, workdir):
    result = augment(sms_records.lazy(), None, context(workdir))
    assert result.frame.collect().equals(sms_records)
    assert result.events.height == 0 and result.stats == {"generated": 0}


# the decision, by value ---------------------------------------------------------------------


def test_judge_keeps_drops_and_queues_by_the_centroid_rule():
    centroids = {"ham": np.array([1.0, 0.0]), "spam": np.array([0.0, 1.0])}
    half = np.sqrt(0.5)
    variants = np.array([[0.8, 0.6], [0.6, 0.8], [0.6, 0.8], [half, half], [0.6, 0.8]])
    origins = np.array([[0.8, 0.6], [1.0, 0.0], [0.6, 0.8], [half, half], [1.0, 0.0]])
    labels = ["ham", "spam", "ham", "ham", "ham"]
    verdict = judge(variants, origins, labels, centroids, min_cosine=0.6)
    # a cosine to the origin equal to the bound passes; a tie of centroids is uncertain
    assert verdict["outcome"].to_list() == ["kept", "kept", "uncertain", "uncertain", "uncertain"]
    assert verdict["cosine_origin"].to_list() == pytest.approx([1.0, 0.6, 1.0, 1.0, 0.6])
    assert verdict["margin"].to_list() == pytest.approx([0.2, 0.2, -0.2, 0.0, -0.2])
    assert verdict["own_label"].to_list() == labels
    assert verdict["nearest_label"].to_list() == ["spam", "ham", "spam", "spam", "spam"]
    # cosine to the origin below the bound: drifted, whatever the centroids say
    strict = judge(variants, origins, labels, centroids, min_cosine=0.61)
    assert strict["outcome"].to_list() == ["kept", "drifted", "uncertain", "uncertain", "drifted"]


def test_judge_with_three_labels_and_with_one():
    centroids = {"a": np.array([1.0, 0, 0]), "b": np.array([0, 1.0, 0]), "c": np.array([0, 0, 1.0])}
    variants = np.array([[0.6, 0.0, 0.8], [0.0, 0.6, 0.8], [0.48, 0.6, 0.64]])
    labels = ["c", "b", "a"]
    verdict = judge(variants, variants, labels, centroids, min_cosine=0.9)
    assert verdict["outcome"].to_list() == ["kept", "uncertain", "uncertain"]
    assert verdict["nearest_label"].to_list() == ["a", "c", "c"]
    assert verdict["margin"].to_list() == pytest.approx([0.2, -0.2, -0.16])
    alone = judge(variants[:1], variants[:1], ["c"], {"c": centroids["c"]}, min_cosine=0.9)
    assert alone.row(0) == ("kept", pytest.approx(1.0), "c", None, None)


def test_label_centroids_are_normalized_means():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    centroids = label_centroids(vectors, ["x", "x", "y"])
    assert centroids["x"] == pytest.approx([np.sqrt(0.5), np.sqrt(0.5)])
    assert centroids["y"] == pytest.approx([0.6, 0.8])


# the transforms, by value -------------------------------------------------------------------


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_every_configured_transform_exists():
    assert tuple(TRANSFORMS) == AUGMENT_TRANSFORMS
    assert [touched(n, 0.1) for n in (1, 4, 5, 15, 16, 100)] == [1, 1, 1, 2, 2, 10]


def is_subsequence(short: list[str], long: list[str]) -> bool:
    remaining = iter(long)
    return all(word in remaining for word in short)


def test_word_dropout_removes_exactly_the_touched_share():
    words = SENTENCE.split()
    assert len(words) == 16
    for seed in range(5):
        out = word_dropout(SENTENCE, rng(seed), 0.2, ())
        assert len(out.split()) == 16 - 3  # round(0.2 * 16) = 3
        assert is_subsequence(out.split(), words)
        assert out == " ".join(out.split())  # single spaces stay single
    assert word_dropout(SENTENCE, rng(1), 0.2, ()) == word_dropout(SENTENCE, rng(1), 0.2, ())
    assert word_dropout("hello", rng(), 0.5, ()) == "hello"  # never drops every word
    assert word_dropout("see you", rng(), 0.5, ()) in {"see", "you"}
    assert word_dropout("a\nb c", rng(3), 0.1, ()).count("\n") <= 1


def test_word_swap_swaps_adjacent_words():
    out = word_swap(SENTENCE, rng(), 0.1, ())
    before, after = SENTENCE.split(), out.split()
    assert sorted(after) == sorted(before)
    moved = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert 0 < len(moved) <= 4  # two swaps (round(1.6)), each moves two neighbours
    assert all(before[i] in after[max(0, i - 2) : i + 3] for i in moved)
    assert word_swap("alone", rng(), 0.5, ()) == "alone"
    assert word_swap("two words", rng(), 0.1, ()) == "words two"


def test_word_insert_inserts_only_vocabulary_words():
    vocabulary = ("call", "free", "prize")
    for seed in range(5):
        out = word_insert(SENTENCE, rng(seed), 0.2, vocabulary).split()
        assert len(out) == 16 + 3
        assert is_subsequence(SENTENCE.split(), out)
        extra = list(out)
        for word in SENTENCE.split():
            extra.remove(word)
        assert set(extra) <= set(vocabulary)
    assert word_insert(SENTENCE, rng(), 0.2, ()) == SENTENCE  # nothing to insert


def test_char_noise_changes_letters_only():
    text = "Call 0800-123 now!! Win £100, txt WIN to 87121 (T&Cs apply)"
    letters = sum(c.isalpha() for c in text)
    for seed in range(10):
        out = char_noise(text, rng(seed), 0.2, ())
        assert out != text
        assert [c for c in out if not c.isalpha()] == [c for c in text if not c.isalpha()]
        assert len(out.split()) == len(text.split())
        assert re.findall(r"\s+", out) == re.findall(r"\s+", text)
        assert len(text) - len(out) <= touched(letters, 0.2)  # deletions among the touched
    assert char_noise("a b c", rng(), 0.5, ()).count(" ") == 2  # one-letter words stay words
    assert char_noise("42 + 7", rng(), 0.5, ()) == "42 + 7"


def test_case_changes_only_the_case_of_some_words():
    text = "Free entry in 2 a wkly comp to win FA Cup final tkts"
    for seed in range(5):
        out = case(text, rng(seed), 0.2, ())
        assert out.lower() == text.lower()
        changed = [a for a, b in zip(out.split(), text.split(), strict=True) if a != b]
        assert len(changed) <= 3  # round(0.2 * 13)
        assert all(w in (w.lower(), w.upper(), w.title()) for w in changed)


def test_punctuation_adds_or_removes_marks():
    def bare(value: str) -> str:
        return value.translate(str.maketrans("", "", string.punctuation))

    text = "Ok lar... Joking wif u oni, see you at 5pm!"
    for seed in range(10):
        out = punctuation(text, rng(seed), 0.3, ())
        assert out != text and bare(out) == bare(text)
        assert len(out.split()) == len(text.split())
        assert abs(len(out) - len(text)) <= 3  # round(0.3 * 10) marks, one per touched word
    assert punctuation("hello", rng(), 0.1, ()) in {"hello" + m for m in ".,!?;:"}


def test_vocabularies_hold_the_words_seen_twice_per_label():
    train = pl.DataFrame(
        {
            "label": ["ham", "ham", "spam", "spam"],
            "text": ["Call me, I'll call", "see you, don't call", "WIN a prize", "win: prize 100"],
        }
    )
    assert vocabularies(train) == {"ham": ("call",), "spam": ("prize", "win")}
