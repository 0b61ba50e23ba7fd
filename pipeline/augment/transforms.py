"""The text transforms of the augmentation stage (pipeline/augment/augment.py).

Each is a small pure function `(text, rng, strength, vocabulary) -> str`: given the same
text, the same numpy Generator state, strength and vocabulary it returns the same variant.
`strength` is the share of words (of letters, for char_noise) it touches, and it touches at
least one: `touched(n, strength) = max(1, round(strength * n))` (Python's round). The text's
layout is kept: words are runs of non-whitespace, and the whitespace between them stays as it
was (a dropped word takes the whitespace after it along; an inserted word brings one space).

A transform that cannot touch anything (one word to drop, no vocabulary to insert from, no
letters to disturb) returns the text unchanged; the stage then drops the variant as a
duplicate of its origin.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence

import numpy as np

Transform = Callable[[str, np.random.Generator, float, Sequence[str]], str]
PUNCTUATION = ".,!?;:"  # the marks `punctuation` adds
_WORD = re.compile(r"\S+")
# the in-vocabulary words of a text: lower-cased runs of letters (apostrophes inside kept)
VOCABULARY_WORD = r"[^\W\d_]+(?:'[^\W\d_]+)*"


def touched(n: int, strength: float) -> int:
    """How many of `n` words (or letters) a transform touches: at least one."""
    return max(1, round(strength * n))


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """Words and the whitespace around them: len(spaces) == len(words) + 1."""
    words, spaces, end = [], [], 0
    for match in _WORD.finditer(text):
        spaces.append(text[end : match.start()])
        words.append(match.group())
        end = match.end()
    spaces.append(text[end:])
    return words, spaces


def _join(words: list[str], spaces: list[str]) -> str:
    return spaces[0] + "".join(word + space for word, space in zip(words, spaces[1:], strict=True))


def word_dropout(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """Drop `touched` words, never all of them (a one-word text is returned unchanged)."""
    words, spaces = _tokens(text)
    drop = min(touched(len(words), strength), len(words) - 1)
    if drop <= 0:
        return text
    gone = set(rng.choice(len(words), size=drop, replace=False).tolist())
    kept = [i for i in range(len(words)) if i not in gone]
    # each kept word keeps the whitespace that followed it; the last one the text's ending
    between = [spaces[i + 1] for i in kept[:-1]] + [spaces[-1]]
    return _join([words[i] for i in kept], [spaces[0], *between])


def word_swap(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """Swap `touched` pairs of adjacent words (positions drawn without replacement, applied
    left to right)."""
    words, spaces = _tokens(text)
    if len(words) < 2:
        return text
    swaps = min(touched(len(words), strength), len(words) - 1)
    for i in sorted(rng.choice(len(words) - 1, size=swaps, replace=False).tolist()):
        words[i], words[i + 1] = words[i + 1], words[i]
    return _join(words, spaces)


def word_insert(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """Insert `touched` words drawn from `vocabulary` (with replacement) at drawn places."""
    words, spaces = _tokens(text)
    if not vocabulary or not words:
        return text
    for _ in range(touched(len(words), strength)):
        at = int(rng.integers(len(words) + 1))
        word = vocabulary[int(rng.integers(len(vocabulary)))]
        if at == len(words):  # after the last word, before the text's ending
            words.append(word)
            spaces.insert(len(spaces) - 1, " ")
        else:
            words.insert(at, word)
            spaces.insert(at + 1, " ")
    return _join(words, spaces)


def char_noise(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """Substitute, delete or transpose `touched` letters (of all the text's letters). Only
    letters change: a transposition swaps two adjacent letters, a deletion never empties a
    word (it substitutes instead), so the word count stays the same."""
    chars = list(text)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    if not letters:
        return text
    word_of, left = _word_sizes(text)
    count = min(touched(len(letters), strength), len(letters))
    for i in sorted(rng.choice(letters, size=count, replace=False).tolist()):
        operation = int(rng.integers(3))
        if operation == 1 and left[word_of[i]] > 1:
            chars[i] = ""
            left[word_of[i]] -= 1
        elif operation == 2 and i + 1 < len(chars) and chars[i + 1].isalpha():
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            chars[i] = _other_letter(chars[i], rng)
    return "".join(chars)


def _word_sizes(text: str) -> tuple[dict[int, int], list[int]]:
    """The word (index) of every non-whitespace character, and each word's length."""
    word_of, sizes = {}, []
    for number, match in enumerate(_WORD.finditer(text)):
        word_of.update(dict.fromkeys(range(match.start(), match.end()), number))
        sizes.append(match.end() - match.start())
    return word_of, sizes


def _other_letter(char: str, rng: np.random.Generator) -> str:
    choices = [c for c in string.ascii_lowercase if c != char.lower()]
    other = choices[int(rng.integers(len(choices)))]
    return other.upper() if char.isupper() else other


_CASES = (str.lower, str.upper, str.title)


def case(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """Lower-case, upper-case or title-case (drawn per word) `touched` words."""
    words, spaces = _tokens(text)
    if not words:
        return text
    count = min(touched(len(words), strength), len(words))
    for i in sorted(rng.choice(len(words), size=count, replace=False).tolist()):
        words[i] = _CASES[int(rng.integers(len(_CASES)))](words[i])
    return _join(words, spaces)


def punctuation(text: str, rng: np.random.Generator, strength: float, vocabulary=()) -> str:
    """For `touched` words: remove one punctuation mark from it (when it has one and more than
    that mark, on a coin toss) or add a mark of PUNCTUATION after it."""
    words, spaces = _tokens(text)
    if not words:
        return text
    count = min(touched(len(words), strength), len(words))
    for i in sorted(rng.choice(len(words), size=count, replace=False).tolist()):
        word = words[i]
        marks = [k for k, c in enumerate(word) if c in string.punctuation]
        if marks and len(word) > 1 and rng.random() < 0.5:
            k = marks[int(rng.integers(len(marks)))]
            words[i] = word[:k] + word[k + 1 :]
        else:
            words[i] = word + PUNCTUATION[int(rng.integers(len(PUNCTUATION)))]
    return _join(words, spaces)


TRANSFORMS: dict[str, Transform] = {
    "word_dropout": word_dropout,
    "word_swap": word_swap,
    "word_insert": word_insert,
    "char_noise": char_noise,
    "case": case,
    "punctuation": punctuation,
}
