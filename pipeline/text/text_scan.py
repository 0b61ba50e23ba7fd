"""Shared machinery of the span detectors (secrets, personal data): vectorized candidates,
exact offsets only where needed, one finding per span, and span replacement.

A detector is a list of `Rule`s. Each rule is one regular expression in Python `re` syntax
restricted to what both engines understand once translated: ASCII classes, `\\b`, scoped
flags such as `(?i:...)`, one optional named group `v` marking the reported value, and
lookarounds of plain characters and classes. From the rules two forms are derived:

- for polars (Rust `regex`): lookarounds removed and the group unnamed, so each rule matches a
  superset of what its Python form matches. One alternation of all rules (but those picked
  by a literal or keywords, see `Rule`) and one alternation of those literals and keywords
  select the rows that may hold a finding, in two vectorized passes run in parallel; the
  distinct texts of those rows are kept (with the rows holding each), and per-rule passes
  over them alone (one Aho-Corasick pass for all literals and keywords) say which rules to
  run on which text. A rule picked by keywords may use any Python `re` syntax.
- for Python `re` (compiled with `re.ASCII`): the exact offsets, the value group, and the
  rule's own checks (entropy, checksums, placeholders), once per distinct candidate text;
  the findings are then repeated for every row holding that text.

Offsets are character offsets into the text (Python `str` indexing), end exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

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

    Two optional hints let Python `re` skip most of a text (the search itself is the cost):
    - `anchors`, for a pattern that starts with a case-insensitive alternation, are lowercase
      literals at which every match starts: the match is then tried only where one occurs.
    - `pivot` is a literal that every match contains, preceded within the match only by a run
      of at most `pivot_reach` characters of `pivot_run` (a string of characters that does
      not hold the pivot), the match starting where that run starts (the pattern's own
      lookbehind refuses a start inside a longer run): e-mail addresses around `@`. The
      match is then tried once per occurrence of the pivot, at the start of the run before
      it. Both give exactly the matches of `finditer`.

    A third, `literal`, keeps the rule out of the alternation: the rows holding any rule's
    literal are picked by a pass of their own, an alternation of literals only (provider
    tokens: a hundred literal prefixes cost the rules' alternation's lazy DFA 4x its time).
    `keywords` do the same ignoring ASCII case, for a pattern that starts with one of them
    (lowercase): they are then its anchors too (provider keys found after a name holding the
    provider's name: `DATADOG_API_KEY=…`)."""

    type: str
    pattern: str
    accept: Callable[[re.Match[str]], bool] | None = None
    anchors: tuple[str, ...] = ()
    pivot: str = ""
    pivot_run: str = ""
    pivot_reach: int = 0
    literal: str = ""  # a string every match holds (case as written): rows are picked by it
    keywords: tuple[str, ...] = ()
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", re.compile(self.pattern, re.ASCII))
        if self.keywords and not self.anchors:  # the pattern starts with one: its anchors
            object.__setattr__(self, "anchors", self.keywords)
        if self.pivot and (self.pivot[0] in self.pivot_run or self.pivot_reach < 1):
            raise ValueError(f"{self.type}: a pivot needs a reach and a run without it")

    @property
    def candidate_pattern(self) -> str:
        """The Rust form: a superset of the Python form's matches, with loosened counted
        repeats (for the alternation of all rules, see _REPEAT_CAP)."""
        return _REPEAT.sub(_loosen_repeat, self.flag_pattern)

    @property
    def flag_pattern(self) -> str:
        """The Rust form with its counted repeats intact: alone (not in the alternation) it
        is as fast as the loosened form and picks fewer rows (card numbers: 1.3k of the 39k
        rows the loosened form picks on the spine bench input)."""
        pattern = _LOOKAROUND.sub("", self.pattern).replace(_VALUE_GROUP, "(?:")
        return _WORD_BOUNDARY.sub(r"(?-u:\\b)", pattern)

    def findings(self, text: str, lowered: str | None = None) -> list[tuple[int, int]]:
        """(start, end) of each accepted match's value (group `v`, else the whole match).
        `lowered` is `text.lower()` when the caller has it (rules with anchors use it)."""
        accept, group = self.accept, "v" if "v" in self.compiled.groupindex else 0
        return [
            match.span(group)
            for match in self._matches(text, lowered)
            if accept is None or accept(match)
        ]

    def _matches(self, text: str, lowered: str | None) -> Iterator[re.Match[str]]:
        if self.pivot:
            return self._pivot_matches(text)
        if not self.anchors:
            return self.compiled.finditer(text)
        if lowered is None:
            lowered = text.lower()
        if len(lowered) != len(text):  # lower() may change the length
            return self.compiled.finditer(text)
        return self._anchored_matches(text, lowered)

    def _anchored_matches(self, text: str, lowered: str) -> Iterator[re.Match[str]]:
        starts = sorted(
            {m.start() for a in self.anchors for m in re.finditer(re.escape(a), lowered)}
        )
        end = 0
        for start in starts:
            match = self.compiled.match(text, start) if start >= end else None
            if match:
                end = match.end()
                yield match

    def _pivot_matches(self, text: str) -> Iterator[re.Match[str]]:
        """What `finditer` yields: a match starting at or after `end` holds the first pivot
        after its start, and starts where the run before that pivot starts."""
        match_at, pivot, run = self.compiled.match, self.pivot, self.pivot_run
        end = 0
        at = text.find(pivot)
        while at >= 0:
            before = text[max(end, at - self.pivot_reach) : at]
            match = match_at(text, at - len(before) + len(before.rstrip(run)))
            if match:
                end = match.end()
                yield match
                at = text.find(pivot, end)
            else:
                at = text.find(pivot, at + 1)


def _lead_length(length: int, lead_chars: int) -> int:
    """At most `lead_chars` and a quarter of the span; nothing of a span no longer than
    `lead_chars` (a lead never gives a short secret away: 4 → 0, 8 → 2, 16 and up → 4)."""
    return min(lead_chars, length // 4) if length > lead_chars else 0


def _loosen_repeat(repeat: re.Match[str]) -> str:
    least = int(repeat.group(1))
    if repeat.group(2) is None and least <= _REPEAT_CAP:
        return repeat.group()
    return f"{{{min(least, _REPEAT_CAP)},}}"


# Up to this many distinct candidate texts, the alternation rules' flags are not computed:
# a polars pass per rule (about 45) has a fixed cost of ~15 ms, more than Python `re` takes to
# search a few texts with every rule.
FEW_CANDIDATES = 16


class SpanScanner:
    """Finds the spans of a list of rules in a polars Series of texts."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self.candidate_pattern = "|".join(
            f"(?:{r.candidate_pattern})" for r in self.rules if not (r.literal or r.keywords)
        )
        # Rows holding a literal or a keyword, in one pass of Rust `regex` (a literal
        # alternation: 3x faster than `str.contains_any`'s Aho-Corasick here), ignoring case
        # (a superset for the literals; the rule flags below are exact).
        self.words = sorted(
            {r.literal.lower() for r in self.rules if r.literal}
            | {k for r in self.rules for k in r.keywords}
        )
        self.words_pattern = f"(?i:{'|'.join(map(re.escape, self.words))})" if self.words else ""
        # The rules a word found in a text (as written there) calls for.
        self._literal_ranks: dict[str, list[int]] = {}
        self._keyword_ranks: dict[str, list[int]] = {}
        for rank, rule in enumerate(self.rules):
            if rule.literal:
                self._literal_ranks.setdefault(rule.literal, []).append(rank)
            for keyword in rule.keywords:
                self._keyword_ranks.setdefault(keyword, []).append(rank)

    def scan(self, texts: pl.Series, lead_chars: int = 0) -> pl.DataFrame:
        """Columns index (UInt32), type, start, end, and with `lead_chars` a column lead
        holding the first characters of each span (see `_lead_length`); sorted by index, start.

        Each distinct candidate text is verified once (corpora hold many exact duplicates
        before dedup) and its findings are repeated for every row that holds it."""
        groups = self._candidates(texts)
        group_texts: list[str] = groups["text"].to_list()
        hits: list[list[tuple[int, int, int]]] = [[] for _ in group_texts]
        lowered: dict[int, str] = {}  # text.lower() of a group, computed once for anchors
        by_words = self._rule_groups_by_words(groups["words"])
        for rank, rule in enumerate(self.rules):
            flag = f"r{rank}"
            if rule.literal or rule.keywords:
                in_groups = by_words.get(rank, [])
            elif flag in groups.columns:
                in_groups = groups[flag].arg_true().to_list()
            else:  # few candidates: no flags, every alternation rule searched
                in_groups = range(groups.height)
            for group in in_groups:
                text = group_texts[group]
                if rule.anchors and group not in lowered:
                    lowered[group] = text.lower()
                found = hits[group]
                for start, end in rule.findings(text, lowered.get(group)):
                    found.append((start, end, rank))
        rows: list[tuple[int, str, int, int, str]] = []
        for group, found in enumerate(hits):
            if found:
                text = group_texts[group]
                for start, end, rank in drop_overlaps(found):
                    lead = text[start : start + _lead_length(end - start, lead_chars)]
                    rows.append((group, self.rules[rank].type, start, end, lead))
        columns = {"type": pl.String, "start": pl.Int64, "end": pl.Int64}
        found_rows = pl.DataFrame(
            rows, schema={"group": pl.UInt32} | columns | {"lead": pl.String}, orient="row"
        )
        members = groups.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("group"), "index")
        return (
            found_rows.join(members, on="group")
            .explode("index")
            .select("index", *columns, *(["lead"] if lead_chars else []))
            .sort("index", "start")
        )

    def _candidates(self, texts: pl.Series) -> pl.DataFrame:
        """One row per distinct text the alternation or a word matches: text, index (the list
        of the rows holding it), one flag per alternation rule whose Rust form matches it,
        and `words`, the literals and keywords it holds as written (one Aho-Corasick pass)."""
        frame = pl.DataFrame({"text": texts.cast(pl.String)}).with_row_index("index")
        # The two passes as two columns of one `with_columns`: polars runs them in parallel.
        passes = frame.with_columns(
            (
                pl.col("text").str.contains(self.candidate_pattern)
                if self.candidate_pattern
                else pl.lit(False)
            ).alias("alternation"),
            (
                pl.col("text").str.contains(self.words_pattern)
                if self.words_pattern
                else pl.lit(False)
            ).alias("word"),
        )
        words = (
            pl.col("text").str.extract_many(
                self.words, ascii_case_insensitive=True, overlapping=True
            )
            if self.words
            else pl.lit([], dtype=pl.List(pl.String))
        )
        groups = passes.filter(pl.col("alternation") | pl.col("word")).group_by("text").agg("index")
        flags = (  # few candidates: each rule's Python search costs less than its flag
            []
            if groups.height <= FEW_CANDIDATES
            else [
                pl.col("text").str.contains(rule.flag_pattern).alias(f"r{rank}")
                for rank, rule in enumerate(self.rules)
                if not (rule.literal or rule.keywords)
            ]
        )
        return groups.with_columns(words.alias("words"), *flags)  # evaluated in parallel

    def _rule_groups_by_words(self, found: pl.Series) -> dict[int, list[int]]:
        """rank -> the groups holding one of its rule's words (literals in their case)."""
        by_rank: dict[int, list[int]] = {}
        for group, words in enumerate(found.to_list()):
            ranks: set[int] = set()
            for word in set(words or ()):
                ranks.update(self._literal_ranks.get(word, ()))
                ranks.update(self._keyword_ranks.get(word.lower(), ()))
            for rank in ranks:
                by_rank.setdefault(rank, []).append(group)
        return by_rank


def drop_overlaps(hits: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Keep one finding per stretch of text: (start, end, rank) with the lowest rank (the most
    specific rule) wins, then the longest span; returned in text order."""
    if len(hits) == 1:
        return [hit for hit in hits if hit[0] < hit[1]]
    in_order = sorted(hits)
    if all(a[1] <= b[0] for a, b in pairwise(in_order)) and all(
        start < end for start, end, _ in in_order
    ):
        return in_order  # nothing overlaps: the usual case, without the quadratic check
    kept: list[tuple[int, int, int]] = []
    for start, end, rank in sorted(in_order, key=lambda h: (h[2], h[0] - h[1], h[0])):
        if start < end and all(end <= k_start or start >= k_end for k_start, k_end, _ in kept):
            kept.append((start, end, rank))
    return sorted(kept)


def replace_spans(text: str, findings: Iterable[dict], label: Callable[[dict, str], str]) -> str:
    """Replace each finding's [start, end) by `label(finding, the text it covers)`, right to
    left so earlier offsets stay valid; a span overlapping one already replaced is skipped."""
    result = text
    boundary = len(text) + 1
    for finding in sorted(findings, key=lambda f: (f["start"], f["end"]), reverse=True):
        start, end = finding["start"], finding["end"]
        if end > boundary or not 0 <= start < end <= len(text):
            continue
        result = result[:start] + label(finding, text[start:end]) + result[end:]
        boundary = start
    return result
