"""Language identification offline: py3langid's bundled model (ISO 639 codes: mostly two
letters, three where ISO 639-1 has none, e.g. pcm for Nigerian Pidgin), run in batches.

py3langid walks each text's UTF-8 bytes through a byte n-gram automaton in a Python loop, then
scores the n-grams it met with naive Bayes: one Python call per text, about 5,000 records/s
on one core. Here the same automaton walks a batch of texts at once, one numpy step per byte
position (texts of similar length share a batch, so few steps are wasted on padding). Each
text is then scored by py3langid's own product, its features in the order they first occur,
so the float32 sums are added in py3langid's order and every answer, language and score, is
py3langid's to the last bit (tests/pipeline/text/test_langid.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import polars as pl

LANGUAGE_SCHEMA = {"language": pl.String, "language_score": pl.Float64}
BATCH_BYTES = 1 << 20  # bytes walked at once: the walk holds about 40 bytes per byte
TEXT_BYTES = 600  # what a text costs a batch besides its bytes: its 142 class scores and more
CHUNK_TEXTS = 100_000  # texts encoded at once (a bytes copy of each)
MIN_LOCKSTEP = 8  # fewer texts still walking than this: walk them one by one
# the share of a text's probability that languages outside the candidates must hold for it to
# keep its unrestricted answer (on short real texts: 98% of texts in other languages keep
# theirs, and 99.2% of texts in a candidate language are right; bench/README.md)
OUTSIDE = 0.95


@cache
def _identifier():
    from py3langid.langid import _load_identifier

    return _load_identifier(norm_probs=True)  # scores are probabilities over its languages


@cache
def _model() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """py3langid's automaton and naive Bayes tables as numpy arrays: next state (by row base
    plus byte), row base per state, feature per state (-1: none), P(feature|class) as float32
    (converting its float16 is exact) and P(class)."""
    found = _identifier()
    next_state = np.frombuffer(found.tk_nextmove, dtype=np.uint32)
    row_base = np.asarray(found._rowbase, dtype=np.int64)
    feature = np.asarray(found.tk_output, dtype=np.int64)
    return next_state, row_base, feature, found.nb_ptc.astype(np.float32), found.nb_pc


def languages() -> list[str]:
    """The codes py3langid can answer."""
    return sorted(set(_identifier().nb_classes))


def identify(
    texts: pl.Series, candidates: Sequence[str] | None = None, outside: float = OUTSIDE
) -> pl.DataFrame:
    """Language code and probability per text (null for a null text). With `candidates`, a
    text is given the candidate py3langid's `set_languages` would give it, with its
    probability over the candidates, unless the languages outside the candidates hold at
    least `outside` of its probability over all of them: then it keeps py3langid's
    unrestricted answer, so text in a language the list leaves out is not forced into one."""
    identifier = _identifier()
    chosen = _chosen_classes(candidates)
    present = texts.is_not_null().to_numpy()
    known = texts.drop_nulls()
    best = np.zeros(known.len(), dtype=np.int64)
    best_score = np.zeros(known.len(), dtype=np.float32)
    for start in range(0, known.len(), CHUNK_TEXTS):
        chunk = known.slice(start, CHUNK_TEXTS)
        found = _best([identifier._encode(text) for text in chunk], chosen, outside)
        best[start : start + chunk.len()], best_score[start : start + chunk.len()] = found
    classes = np.asarray(identifier.nb_classes, dtype=object)
    language = np.full(len(texts), None, dtype=object)
    score = np.full(len(texts), np.nan)
    language[present] = classes[best]
    score[present] = best_score
    return pl.DataFrame(
        {"language": language.tolist(), "language_score": score},
        schema=LANGUAGE_SCHEMA,
    ).with_columns(pl.col("language_score").fill_nan(None))


def _chosen_classes(candidates: Sequence[str] | None) -> np.ndarray:
    """The positions of the candidates among py3langid's classes (all of them for None)."""
    classes = _identifier().nb_classes
    if candidates is None:
        return np.arange(len(classes))
    unknown = sorted(set(candidates) - set(classes))
    if unknown or not candidates:
        raise ValueError(
            f"unknown language code(s) {', '.join(unknown) or '(none given)'}: py3langid "
            f"knows {', '.join(languages())}"
        )
    return np.asarray([i for i, code in enumerate(classes) if code in set(candidates)])


def _best(
    encoded: list[bytes], chosen: np.ndarray, outside: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per text, the class position of the answer `identify` gives and its score, batch by
    batch of about BATCH_BYTES, counting TEXT_BYTES more per text (one batch's class scores
    are held at a time)."""
    _, _, _, ptc, pc = _model()
    tables = [(ptc, pc)]
    restricted = len(chosen) < len(pc)
    if restricted:  # as py3langid restricts its model: the same float32 sums
        tables.append((np.ascontiguousarray(ptc[:, chosen]), pc[chosen]))
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    best = np.zeros(len(encoded), dtype=np.int64)
    best_score = np.zeros(len(encoded), dtype=np.float32)
    order = np.argsort(lengths, kind="stable")  # similar lengths walk together
    walked = np.cumsum(lengths[order] + TEXT_BYTES)
    start = 0
    while start < len(order):
        done = walked[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(walked, done + BATCH_BYTES, side="right")))
        batch = order[start:stop]
        raw = _raw_scores([encoded[i] for i in batch], tables)
        scores = _normalized(raw[0], lengths[batch], _identifier()._alias_pairs)
        best[batch] = scores.argmax(axis=1)
        best_score[batch] = scores[np.arange(len(batch)), best[batch]]
        if restricted:
            among = _normalized(raw[1], lengths[batch], _alias_pairs(chosen))
            elsewhere = scores.sum(axis=1) - scores[:, chosen].sum(axis=1)
            inside = np.flatnonzero(elsewhere < outside)
            best[batch[inside]] = chosen[among[inside].argmax(axis=1)]
            best_score[batch[inside]] = among[inside].max(axis=1)
        start = stop
    return best, best_score


def _alias_pairs(chosen: np.ndarray) -> list[tuple[int, int]]:
    """(first, repeat) positions among the chosen classes of a label that occurs twice."""
    classes = _identifier().nb_classes
    first: dict[str, int] = {}
    pairs = []
    for position, index in enumerate(chosen.tolist()):
        if classes[index] in first:
            pairs.append((first[classes[index]], position))
        else:
            first[classes[index]] = position
    return pairs


def _normalized(raw: np.ndarray, lengths: np.ndarray, alias_pairs) -> np.ndarray:
    """py3langid's `_decide` with norm_probs: scores over sqrt(bytes), softmax, aliases
    folded into their first label."""
    scores = raw * (1.0 / np.sqrt(np.maximum(lengths, 1)))[:, None].astype(np.float32)
    scores = np.exp(scores - scores.max(axis=1, keepdims=True))
    scores /= scores.sum(axis=1, keepdims=True)
    for first, alias in alias_pairs:  # srl -> sr: one score per label
        scores[:, first] += scores[:, alias]
        scores[:, alias] = 0.0
    return scores


def _raw_scores(
    encoded: list[bytes], tables: list[tuple[np.ndarray, np.ndarray]]
) -> list[np.ndarray]:
    """py3langid's `_raw_score` per text, for each (P(feature|class), P(class)) table: log1p
    of each distinct feature's count, in the order the features first occur, times
    P(feature|class), plus P(class); a text without features scores 0 for every class (its
    uniform abstention under norm_probs)."""
    texts, features = _features(encoded)
    found = [np.zeros((len(encoded), len(pc)), dtype=np.float32) for _, pc in tables]
    if not len(features):
        return found
    width = len(tables[0][0])
    key, position, counts = np.unique(
        texts * width + features, return_index=True, return_counts=True
    )
    owner, feature = np.divmod(key, width)
    met = np.lexsort((position, owner))  # by text, then by first occurrence
    owner, feature, weight = owner[met], feature[met], np.log1p(counts[met].astype(np.float32))
    bounds = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1], True])
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        for scores, (ptc, pc) in zip(found, tables, strict=True):
            scores[owner[start]] = weight[start:stop] @ ptc[feature[start:stop]] + pc
    return found


def _features(encoded: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(text, feature) for every byte at which the automaton emits a feature. All texts step
    together, one byte position at a time; the last few long ones finish alone."""
    next_state, row_base, feature_of, _, _ = _model()
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    buffer = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
    states = np.empty(len(buffer), dtype=np.int64)
    by_length = np.argsort(-lengths, kind="stable")  # the longest first: active = a prefix
    walking = lengths[by_length]
    state = np.zeros(len(encoded), dtype=np.int64)
    position = 0
    while True:
        active = int(np.searchsorted(-walking, -position, side="left"))  # length > position
        if active < MIN_LOCKSTEP:
            break
        at = offsets[by_length[:active]] + position
        state[:active] = next_state[row_base[state[:active]] + buffer[at]]
        states[at] = state[:active]
        position += 1
    identifier = _identifier()  # the few longest: a plain loop is cheaper than numpy steps
    moves, bases = identifier.tk_nextmove, identifier._rowbase
    for rank in range(active):
        text, current = by_length[rank], int(state[rank])
        start, stop = offsets[text] + position, offsets[text] + lengths[text]
        walked = []
        for byte in buffer[start:stop].tolist():
            current = moves[bases[current] + byte]
            walked.append(current)
        states[start:stop] = walked
    features = feature_of[states]
    emitted = np.flatnonzero(features >= 0)
    owners = np.repeat(np.arange(len(encoded), dtype=np.int64), lengths)
    return owners[emitted], features[emitted]
