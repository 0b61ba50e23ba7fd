"""Thousands of edited near-copies of real text, for the determinism tests.

Bases are real SMS messages (SMS Spam Collection) and real Debian changelog entries (the
fixtures). Each base gets `COPIES` copies with 0 to 6 random word edits, so that MinHash
buckets hold dozens of members, similarities spread on both sides of the default threshold
(which makes the order in which bucket members are linked matter) and exact copies abound.
Timestamps take three values per base and lengths often tie, so the keep rule falls through
to its last key. Every row has an id, so its record_id does not depend on file or line.
"""

from __future__ import annotations

import random

import polars as pl
from helpers import changelog_changes

COPIES = 25
BASES = 60  # of each kind


def changelog_bases() -> list[str]:
    entries = changelog_changes(("coreutils", "sed", "grep", "diffutils", "mawk", "tar"))
    long = [e for e in entries if 25 <= len(e.split()) <= 200]
    return long[:BASES]


def sms_bases(sms_spam: pl.DataFrame) -> list[tuple[str, str]]:
    """(text, label) of distinct messages of at least 20 words."""
    rows = sms_spam.unique("text", keep="first", maintain_order=True).filter(
        pl.col("text").str.split(" ").list.len() >= 20
    )
    labels = ["spam" if spam == "1" else "ham" for spam in rows["spam"]]
    return list(zip(rows["text"], labels, strict=True))[:BASES]


def edited(text: str, edits: int, rng: random.Random) -> str:
    """`text` with `edits` word edits: a word replaced by another of the text, deleted, or
    "also" inserted."""
    words = text.split(" ")
    for _ in range(edits):
        at = rng.randrange(len(words))
        kind = rng.randrange(3)
        if kind == 0:
            words[at] = rng.choice(words)
        elif kind == 1 and len(words) > 5:
            del words[at]
        else:
            words.insert(at, "also")
    return " ".join(words)


def near_copy_rows(sms_spam: pl.DataFrame) -> dict[str, list[dict]]:
    """Rows per source ("sms", "changes"): id, text, label, user, sent."""
    bases = {
        "sms": sms_bases(sms_spam),
        "changes": [(text, "changelog") for text in changelog_bases()],
    }
    rows: dict[str, list[dict]] = {}
    for kind, texts in bases.items():
        rows[kind] = []
        for b, (text, label) in enumerate(texts):
            for copy in range(COPIES):
                rng = random.Random(f"{kind}-{b}-{copy}")
                rows[kind].append(
                    {
                        "id": f"{kind}-{b:03d}-{copy:02d}",
                        "text": edited(text, copy % 7, rng),
                        "label": label,
                        "user": f"user-{kind}-{b}-{copy % 4}",
                        "sent": f"2020-01-{1 + copy % 3:02d}T00:00:00Z",
                    }
                )
    return rows
