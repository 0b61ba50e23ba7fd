"""Shared machinery of the span detectors (secrets, personal data): vectorized candidates,
exact offsets only where needed, one finding per span, and span replacement.

A detector is a list of `Rule`s. Each rule is one regular expression in Python `re` syntax
restricted to what both engines understand once translated: ASCII classes, `\\b`, scoped
flags such as `(?i:...)`, one optional named group `v` marking the reported value, and
lookarounds of plain characters and classes. From the rules two forms are derived:

- for polars (Rust `regex`): lookarounds removed and the group unnamed, so each rule matches a
  superset of what its Python form matches. One alternation of all rules selects the rows
  that may hold a finding, in one vectorized pass; then per-rule passes over those rows alone
  say which rules to run on which row.
- for Python `re` (compiled with `re.ASCII`): the exact offsets, the value group, and the
  rule's own checks (entropy, checksums, placeholders) on the few candidate rows.

Offsets are character offsets into the text (Python `str` indexing), end exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import polars as pl

# A lookaround of plain characters and classes: (?=…), (?!…), (?<=…), (?<!…).
_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\[\]\\]|\\.|\[(?:[^\]\\]|\\.)*\])*\)")
_VALUE_GROUP = "(?P<v>"
_WORD_BOUNDARY = re.compile(r"(?<!\\)\\b")
_REPEAT = re.compile(r"\{(\d+)(,\d*)?\}")
# Counted repeats in the Rust form become "at least min(n, 4)": a superset that keeps the lazy
# DFA small (long counted runs of overlapping classes multiply its states and made the
# alternation 3-6x slower on real text) while the literal parts still select the rows.
_REPEAT_CAP = 4


@dataclass(frozen=True)
class Rule:
    """One pattern of one finding type. `accept` vets an exact match (checksum, entropy,
    placeholder); rules earlier in a detector's list win over later ones on the same span.
    `anchors`, for a pattern that starts with a case-insensitive alternation (slow to search
    in Python `re`), are lowercase literals at which every match starts: the match is then
    tried only where one of them occurs."""

    type: str
    pattern: str
    accept: Callable[[re.Match[str]], bool] | None = None
    anchors: tuple[str, ...] = ()
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", re.compile(self.pattern, re.ASCII))

    @property
    def candidate_pattern(self) -> str:
        """The Rust form: a superset of the Python form's matches."""
        pattern = _LOOKAROUND.sub("", self.pattern).replace(_VALUE_GROUP, "(?:")
        pattern = _REPEAT.sub(_loosen_repeat, pattern)
        return _WORD_BOUNDARY.sub(r"(?-u:\\b)", pattern)

    def findings(self, text: str) -> Iterable[tuple[int, int]]:
        """(start, end) of each accepted match's value (group `v`, else the whole match)."""
        has_value = "v" in self.compiled.groupindex
        for match in self._matches(text):
            if self.accept is None or self.accept(match):
                yield match.span("v") if has_value else match.span()

    def _matches(self, text: str) -> Iterator[re.Match[str]]:
        lowered = text.lower()
        if not self.anchors or len(lowered) != len(text):  # lower() may change the length
            yield from self.compiled.finditer(text)
            return
        starts = sorted(
            {m.start() for a in self.anchors for m in re.finditer(re.escape(a), lowered)}
        )
        end = 0
        for start in starts:
            match = self.compiled.match(text, start) if start >= end else None
            if match:
                end = match.end()
                yield match


def _loosen_repeat(repeat: re.Match[str]) -> str:
    least = int(repeat.group(1))
    if repeat.group(2) is None and least <= _REPEAT_CAP:
        return repeat.group()
    return f"{{{min(least, _REPEAT_CAP)},}}"


class SpanScanner:
    """Finds the spans of a list of rules in a polars Series of texts."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self.candidate_pattern = "|".join(f"(?:{r.candidate_pattern})" for r in self.rules)

    def scan(self, texts: pl.Series, lead_chars: int = 0) -> pl.DataFrame:
        """Columns index (UInt32), type, start, end, and with `lead_chars` a column lead
        holding the first characters of each span; sorted by index, start."""
        candidates = self._candidates(texts)
        rows: list[tuple[int, str, int, int, str]] = []
        rule_flags = [f"r{i}" for i in range(len(self.rules))]
        for row in candidates.iter_rows(named=True):
            hits = [
                (start, end, rank)
                for rank, rule in enumerate(self.rules)
                if row[rule_flags[rank]]
                for start, end in rule.findings(row["text"])
            ]
            for start, end, rank in drop_overlaps(hits):
                lead = row["text"][start : min(end, start + lead_chars)]
                rows.append((row["index"], self.rules[rank].type, start, end, lead))
        schema = {"index": pl.UInt32, "type": pl.String, "start": pl.Int64, "end": pl.Int64}
        found = pl.DataFrame(rows, schema=schema | {"lead": pl.String}, orient="row")
        return found.select(*schema, *(["lead"] if lead_chars else [])).sort("index", "start")

    def _candidates(self, texts: pl.Series) -> pl.DataFrame:
        """The rows the alternation matches, with one flag per rule that matches them."""
        frame = pl.DataFrame({"text": texts.cast(pl.String)}).with_row_index("index")
        candidates = frame.filter(pl.col("text").str.contains(self.candidate_pattern))
        return candidates.with_columns(
            pl.col("text").str.contains(rule.candidate_pattern).alias(f"r{i}")
            for i, rule in enumerate(self.rules)
        )


def drop_overlaps(hits: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Keep one finding per stretch of text: (start, end, rank) with the lowest rank (the most
    specific rule) wins, then the longest span; returned in text order."""
    kept: list[tuple[int, int, int]] = []
    for start, end, rank in sorted(hits, key=lambda h: (h[2], h[0] - h[1], h[0])):
        if start < end and all(end <= k_start or start >= k_end for k_start, k_end, _ in kept):
            kept.append((start, end, rank))
    return sorted(kept)


def replace_spans(text: str, findings: Iterable[dict], label: Callable[[str], str]) -> str:
    """Replace each finding's [start, end) by `label(type)`, right to left so earlier offsets
    stay valid; a span overlapping one already replaced is skipped."""
    result = text
    boundary = len(text) + 1
    for finding in sorted(findings, key=lambda f: (f["start"], f["end"]), reverse=True):
        start, end = finding["start"], finding["end"]
        if end > boundary or not 0 <= start < end <= len(text):
            continue
        result = result[:start] + label(finding["type"]) + result[end:]
        boundary = start
    return result
