"""MinHash signatures, LSH parameters and union-find, checked against plain references."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest
from datasketch.lsh import _optimal_param
from helpers import jaccard, reference_shingles

from pipeline.core.clusters import components
from pipeline.text import minhash


@pytest.fixture(scope="module")
def long_sms(sms_spam) -> list[str]:
    texts = sms_spam["text"].unique(maintain_order=True).to_list()
    return [text for text in texts if len(text.split()) >= 20][:300]


@pytest.mark.parametrize(("threshold", "num_perm"), [(0.5, 128), (0.8, 128), (0.9, 256), (0.7, 64)])
def test_bands_and_rows_match_datasketch(threshold, num_perm):
    assert minhash.optimal_bands(threshold, num_perm, 0.5) == _optimal_param(
        threshold, num_perm, 0.5, 0.5
    )


def test_shingles_match_the_documented_rule(long_sms):
    texts = [*long_sms[:20], "Ok lar", "!!! ...", "Hello, World"]
    shingles = minhash.shingle_hashes(pl.Series(texts), 5, 5)
    counts = shingles.unique().group_by("doc").len().sort("doc")
    expected = {i: len(reference_shingles(t)) for i, t in enumerate(texts) if reference_shingles(t)}
    assert dict(counts.iter_rows()) == expected
    assert 21 not in expected  # no letters or digits: no shingles, never a near duplicate
    present = minhash.has_shingles(shingles, len(texts))
    assert present.tolist() == [True] * 21 + [False, True]


def test_text_without_spaces_is_shingled_by_characters():
    shingles = minhash.shingle_hashes(pl.Series(["thresholdsplit", "ab"]), 5, 4)
    assert shingles.filter(pl.col("doc") == 0).height == len("thresholdsplit") - 4 + 1
    assert shingles.filter(pl.col("doc") == 1).height == 1


def test_estimates_follow_exact_jaccard_on_edited_real_text(long_sms):
    rng = random.Random(7)
    edited = []
    for text in long_sms:
        words = text.split()
        for _ in range(rng.randint(0, len(words) // 4)):
            words[rng.randrange(len(words))] = f"w{rng.randint(0, 999)}"
        edited.append(" ".join(words))
    left = minhash.signatures(
        minhash.shingle_hashes(pl.Series(long_sms), 5, 5), len(long_sms), 128, 1
    )
    right = minhash.signatures(minhash.shingle_hashes(pl.Series(edited), 5, 5), len(edited), 128, 1)
    estimates = minhash.estimated_jaccard(left, right)
    exact = np.array(
        [
            jaccard(reference_shingles(a), reference_shingles(b))
            for a, b in zip(long_sms, edited, strict=True)
        ]
    )
    errors = estimates - exact
    assert abs(errors.mean()) < 0.01  # unbiased
    # MinHash's standard error is sqrt(J(1-J)/num_perm); allow 20% over it
    assert np.sqrt((errors**2).mean()) < 1.2 * np.sqrt((exact * (1 - exact) / 128).mean())


def test_a_signature_does_not_depend_on_the_other_documents_of_its_batch(long_sms):
    alone = minhash.signatures(minhash.shingle_hashes(pl.Series(long_sms[:1]), 5, 5), 1, 128, 3)
    batch = minhash.signatures(
        minhash.shingle_hashes(pl.Series(long_sms), 5, 5), len(long_sms), 128, 3
    )
    assert np.array_equal(alone[0], batch[0])
    other_seed = minhash.signatures(
        minhash.shingle_hashes(pl.Series(long_sms[:1]), 5, 5), 1, 128, 4
    )
    assert not np.array_equal(alone[0], other_seed[0])


def test_band_keys_are_equal_exactly_when_the_band_rows_are():
    signature = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], dtype=np.uint32)
    keys = minhash.band_keys(signature, bands=2, rows=2)
    assert keys[0, 0] == keys[1, 0] == keys[2, 0]
    assert keys[0, 1] == keys[2, 1] != keys[1, 1]


def test_union_find_components_match_a_plain_search():
    rng = np.random.default_rng(5)
    left, right = rng.integers(0, 400, 300), rng.integers(0, 400, 300)
    nodes, roots = components(left, right)
    adjacency: dict[int, set[int]] = {}
    for a, b in zip(left.tolist(), right.tolist(), strict=True):
        adjacency.setdefault(a, set()).add(b)
        adjacency.setdefault(b, set()).add(a)
    expected = {}
    for start in adjacency:
        if start in expected:
            continue
        seen, stack = {start}, [start]
        while stack:
            for neighbour in adjacency[stack.pop()] - seen:
                seen.add(neighbour)
                stack.append(neighbour)
        for node in seen:
            expected[node] = min(seen)
    assert dict(zip(nodes.tolist(), roots.tolist(), strict=True)) == expected


def test_text_in_a_script_without_spaces_is_shingled_by_characters_even_across_lines():
    one_line = "今天天气很好我们去公园散步吧晚上再一起吃饭"
    two_lines = "今天天气很好我们去公园散步吧\n晚上再一起吃饭"
    mixed = "release notes mention 你 once"
    assert minhash.by_character(pl.Series([one_line, two_lines, mixed])).to_list() == [
        True,
        True,
        False,  # mostly Latin letters: words
    ]
    shingles = minhash.shingle_hashes(pl.Series([one_line, two_lines]), 5, 5)
    sets = [set(shingles.filter(pl.col("doc") == doc)["hash"]) for doc in (0, 1)]
    assert sets[0] == sets[1]  # a line break does not change character shingles


def test_combining_marks_stay_inside_words():
    hindi = "मैं आज बाज़ार गया और फल खरीदे"  # seven words
    shingles = minhash.shingle_hashes(pl.Series([hindi]), 5, 5)
    assert shingles.height == 7 - 5 + 1
