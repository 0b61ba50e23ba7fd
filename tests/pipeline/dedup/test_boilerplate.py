"""Boilerplate removal on real Debian copyright files, against a plain-Python reference count.

The files share GPL, LGPL and BSD paragraphs ("This program is distributed in the hope ...",
"On Debian systems, the complete text of the GNU General Public License version 2 ..."). The
machine-readable ones (copyright-format 1.0) write a blank line inside a field as " ."; the
tests render that as the blank line it stands for, then normalize and hash the text as ingest
does.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache

import polars as pl
import pytest
import xxhash
from helpers import FIXTURES, as_records

from pipeline.config import BoilerplateConfig, DedupConfig
from pipeline.core import reasons
from pipeline.core.identity import record_id_of, xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.dedup.boilerplate import STAGE, boilerplate

COPYRIGHTS = FIXTURES / "debian-copyright"
SOURCE = "debian-copyright"
GPL2 = (
    "On Debian systems, the complete text of the GNU General Public License version 2 can be "
    'found in "/usr/share/common-licenses/GPL-2".'
)
WARRANTY = "This program is distributed in the hope that it will be useful, but WITHOUT ANY"
MAX_DOCUMENTS = 9  # the GPL-2 paragraph is in 11 of the fixture's texts
EVIDENCE_KEYS = {"segments", "chars_removed", "hashes", "documents"}


@cache
def copyright_texts() -> dict[str, str]:
    """package -> its copyright file as rendered text, normalized as ingest normalizes."""
    texts = {}
    for path in sorted(COPYRIGHTS.glob("*.copyright")):
        rendered = re.sub(r"(?m)^ \.$", "", path.read_text(encoding="utf-8"))
        texts[path.name.removesuffix(".copyright")] = rendered
    normalized = normalize_text(pl.Series(list(texts.values())))
    return dict(zip(texts, normalized.to_list(), strict=True))


def records(texts: dict[str, str]) -> pl.LazyFrame:
    """One record per entry (record id -> text), hashed as ingest hashes, with cluster_id."""
    hashes = xxh3_128_hex(pl.Series(list(texts.values()), dtype=pl.String)).to_list()
    rows = [
        {"record_id": record_id_of(SOURCE, key), "text": text, "content_hash": digest}
        for (key, text), digest in zip(texts.items(), hashes, strict=True)
    ]
    frame = as_records(rows, source=SOURCE).with_columns(
        pl.col("content_hash").alias("source_content_hash"),
        pl.col("record_id").alias("cluster_id"),
    )
    return frame


def run(frame: pl.LazyFrame, **settings):
    cfg = DedupConfig(boilerplate=BoilerplateConfig(**settings) if settings else None)
    return boilerplate(frame, cfg, ctx=None)


# --- the reference, written plainly -------------------------------------------------------


def paragraphs(text: str) -> list[str]:
    """Blocks of lines between lines that hold only whitespace."""
    blocks, current = [], []
    for line in text.split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def norm(segment: str) -> str:
    return " ".join(segment.split())


def digest(segment: str) -> str:
    return xxhash.xxh3_128_hexdigest(norm(segment).encode())


def document_counts(texts, split, min_chars: int) -> dict[str, int]:
    """normalized segment -> distinct texts holding it (copies of one text count once)."""
    holders = defaultdict(set)
    for text in sorted(set(texts)):  # a set's order changes with PYTHONHASHSEED
        for segment in split(text):
            if len(norm(segment)) >= min_chars:
                holders[norm(segment)].add(text)
    return {segment: len(found) for segment, found in holders.items()}


def flagged(texts, split=paragraphs, min_chars=20, max_documents=MAX_DOCUMENTS):
    counts = document_counts(texts, split, min_chars)
    return {segment: n for segment, n in counts.items() if n > max_documents}


def by_id(texts: dict[str, str]) -> dict[str, str]:
    return {record_id_of(SOURCE, key): text for key, text in texts.items()}


def evidence_of(result) -> dict[str, dict]:
    return {row["record_id"]: json.loads(row["evidence"]) for row in result.events.to_dicts()}


# --- the tests ----------------------------------------------------------------------------


def test_paragraphs_in_more_documents_than_the_bound_are_removed_and_nothing_else():
    texts = copyright_texts()
    boiler = flagged(texts.values())
    assert GPL2 in boiler and boiler[GPL2] == 11
    assert len(boiler) == 3 and any(segment.startswith(WARRANTY) for segment in boiler)

    result = run(records(texts), max_documents=MAX_DOCUMENTS)
    out = {row["record_id"]: row["text"] for row in result.frame.collect().to_dicts()}
    assert list(out) == list(by_id(texts))  # every record kept, in order
    for record_id, text in by_id(texts).items():
        kept = [p for p in paragraphs(text) if norm(p) not in boiler]
        if len(kept) == len(paragraphs(text)):
            assert out[record_id] == text  # untouched, byte for byte
        else:
            assert out[record_id] == "\n\n".join(kept)
            assert paragraphs(out[record_id]) == kept
    holding_gpl2 = [key for key, text in texts.items() if GPL2 in map(norm, paragraphs(text))]
    assert len(holding_gpl2) == 11
    assert all(
        GPL2 not in map(norm, paragraphs(out[record_id_of(SOURCE, k)])) for k in holding_gpl2
    )

    ranked = sorted(boiler.items(), key=lambda item: (-item[1], -len(item[0]), digest(item[0])))
    assert result.stats["top"] == [
        {"hash": digest(segment)[:16], "documents": n, "chars": len(segment)}
        for segment, n in ranked
    ]
    assert result.stats["boilerplate_segments"] == 3


def test_each_edited_record_has_one_edit_event_with_its_counts_and_a_new_hash():
    texts = copyright_texts()
    boiler = flagged(texts.values())
    frame = records(texts)
    result = run(frame, max_documents=MAX_DOCUMENTS)
    before = {row["record_id"]: row for row in frame.collect().to_dicts()}
    after = {row["record_id"]: row for row in result.frame.collect().to_dicts()}

    expected = {}
    for record_id, text in by_id(texts).items():
        removed = [p for p in paragraphs(text) if norm(p) in boiler]
        if removed:
            distinct = list(dict.fromkeys(norm(p) for p in removed))
            expected[record_id] = {
                "segments": len(removed),
                "chars_removed": sum(len(p) for p in removed),
                "hashes": [digest(p)[:16] for p in distinct],
                "documents": [boiler[p] for p in distinct],
            }
    assert len(expected) == 26  # 16 + 11 + 10 files, 26 distinct
    assert result.events.height == len(expected)  # one event per edited record
    assert set(result.events["action"]) == {reasons.EDITED}
    assert set(result.events["reason"]) == {reasons.BOILERPLATE_REMOVED}
    assert set(result.events["stage"]) == {STAGE}
    assert not result.events["terminal"].any()
    assert evidence_of(result) == expected
    assert result.stats["edited"] == 26 and result.stats["dropped"] == 0
    assert result.stats["chars_removed"] == sum(e["chars_removed"] for e in expected.values())

    for record_id, row in after.items():
        assert row["source_content_hash"] == before[record_id]["source_content_hash"]
        assert row["cluster_id"] == before[record_id]["cluster_id"]
        assert row["content_hash"] == xxhash.xxh3_128_hexdigest(row["text"].encode())
        changed = row["content_hash"] != before[record_id]["content_hash"]
        assert changed == (record_id in expected)


def test_a_text_of_only_boilerplate_is_dropped_and_accounting_holds():
    texts = copyright_texts()
    boiler = flagged(texts.values())
    # each flagged paragraph as it stands in the first file holding it
    first = {}
    for text in texts.values():
        for p in paragraphs(text):
            first.setdefault(norm(p), p)
    only = "\n\n".join(first[segment] for segment in sorted(boiler))
    assert {norm(p) for p in paragraphs(only)} == set(boiler)
    frame = records({**texts, "only-boilerplate": only})
    result = run(frame, max_documents=MAX_DOCUMENTS)

    only_id = record_id_of(SOURCE, "only-boilerplate")
    dropped = result.events.filter(pl.col("terminal"))
    assert dropped.select("record_id", "action", "reason").rows() == [
        (only_id, reasons.DROPPED, reasons.ONLY_BOILERPLATE)
    ]
    assert result.events.filter(pl.col("record_id") == only_id).height == 1  # no edit event
    evidence = evidence_of(result)[only_id]
    assert evidence["segments"] == 3 and evidence["chars_removed"] == len(only) - 4
    assert sorted(evidence["hashes"]) == sorted(digest(p)[:16] for p in boiler)

    out = result.frame.collect()
    assert only_id not in out["record_id"].to_list()
    records_in = frame.collect().height
    assert records_in == out.height + dropped.height == len(texts) + 1
    assert result.events["record_id"].is_unique().all()
    assert result.stats["dropped"] == 1 and result.stats["edited"] == 26


def test_exact_copies_of_one_text_count_as_one_document():
    texts = copyright_texts()
    # login and passwd ship the same file (both built from shadow): one document
    assert texts["login"] == texts["passwd"]
    copies = {f"bash-copy-{n}": texts["bash"] for n in range(30)}
    # 30 copies of bash alone: its paragraphs are each in one document
    alone = run(records(copies), max_documents=MAX_DOCUMENTS)
    assert alone.events.height == 0 and alone.stats["boilerplate_segments"] == 0
    assert alone.frame.collect().equals(records(copies).collect())

    # among the other files, the copies change no count: the same paragraphs go
    mixed = run(records({**texts, **copies}), max_documents=MAX_DOCUMENTS)
    baseline = run(records(texts), max_documents=MAX_DOCUMENTS)
    assert mixed.stats["top"] == baseline.stats["top"]
    evidence = evidence_of(mixed)
    bash_evidence = evidence[record_id_of(SOURCE, "bash")]
    assert all(evidence[record_id_of(SOURCE, key)] == bash_evidence for key in copies)
    # the BSD paragraph of dash, login (= passwd), sed and util-linux: four documents
    counts = document_counts(texts.values(), paragraphs, 20)
    # the most widely held of the paragraphs that name the Regents (others are in one file)
    bsd = max((p for p in counts if "REGENTS" in p), key=lambda p: (counts[p], p))
    assert counts[bsd] == 4
    at_four = run(records(texts), max_documents=4)
    assert digest(bsd)[:16] not in {entry["hash"] for entry in at_four.stats["top"]}
    assert all(digest(bsd)[:16] not in e["hashes"] for e in evidence_of(at_four).values())


def test_segments_shorter_than_min_chars_are_kept():
    texts = copyright_texts()
    longer = flagged(texts.values(), min_chars=len(GPL2) + 1)
    assert GPL2 not in longer and len(longer) == 2
    result = run(records(texts), max_documents=MAX_DOCUMENTS, min_chars=len(GPL2) + 1)
    out = dict(result.frame.collect().select("record_id", "text").iter_rows())
    holding = [k for k, text in texts.items() if GPL2 in map(norm, paragraphs(text))]
    assert all(GPL2 in map(norm, paragraphs(out[record_id_of(SOURCE, k)])) for k in holding)
    for record_id, text in by_id(texts).items():
        kept = [p for p in paragraphs(text) if norm(p) not in longer]
        assert paragraphs(out[record_id]) == kept
    # at exactly its length it counts again
    at_length = run(records(texts), max_documents=MAX_DOCUMENTS, min_chars=len(GPL2))
    assert digest(GPL2)[:16] in {entry["hash"] for entry in at_length.stats["top"]}


def test_line_segments_on_a_small_example():
    header = "Copyright: 2024, Free Software Foundation, Inc."
    texts = {
        "a": f"grep 3.11\n{header}\n\nSearches   files.\n  {header}  \nEnd of a.",
        "b": f"{header}\n\nsed 4.9\nStreams.",
        "c": f"tar 1.35\n\n{header}\n\nArchives.",
        "d": "Copyright: 2024\nnothing shared here",
    }
    result = run(records(texts), segment="line", max_documents=2, min_chars=10)
    out = dict(result.frame.collect().select("record_id", "text").iter_rows())
    ids = by_id(texts)
    assert out == {
        record_id_of(SOURCE, "a"): "grep 3.11\n\nSearches   files.\nEnd of a.",
        record_id_of(SOURCE, "b"): "sed 4.9\nStreams.",
        record_id_of(SOURCE, "c"): "tar 1.35\n\nArchives.",
        record_id_of(SOURCE, "d"): ids[record_id_of(SOURCE, "d")],
    }
    evidence = evidence_of(result)
    assert evidence[record_id_of(SOURCE, "a")] == {
        "segments": 2,
        "chars_removed": 2 * len(header) + 4,
        "hashes": [digest(header)[:16]],
        "documents": [3],
    }
    assert record_id_of(SOURCE, "d") not in evidence


def lines_out(text: str, boiler: dict[str, int]) -> str:
    kept = "\n".join(line for line in text.split("\n") if norm(line) not in boiler)
    return re.sub(r"\n{3,}", "\n\n", kept).strip("\n")


def test_line_segments_on_the_copyright_files():
    texts = copyright_texts()
    boiler = flagged(texts.values(), split=lambda t: t.split("\n"), max_documents=12)
    assert "MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE. See the" in boiler
    result = run(records(texts), segment="line", max_documents=12)
    out = dict(result.frame.collect().select("record_id", "text").iter_rows())
    assert out == {record_id: lines_out(text, boiler) for record_id, text in by_id(texts).items()}
    evidence = evidence_of(result)
    for record_id, text in by_id(texts).items():
        removed = [line for line in text.split("\n") if norm(line) in boiler]
        assert evidence.get(record_id, {}).get("segments", 0) == len(removed)
        if removed:
            assert evidence[record_id]["chars_removed"] == sum(map(len, removed))
            assert len(evidence[record_id]["hashes"]) == min(10, len(set(map(norm, removed))))
    assert result.stats["boilerplate_segments"] == len(boiler)


def test_without_a_boilerplate_config_the_frame_passes_through():
    frame = records(copyright_texts())
    result = run(frame)
    assert result.frame.collect().equals(frame.collect())
    assert result.events.height == 0 and result.events.schema == LEDGER_SCHEMA
    assert result.stats == {
        "boilerplate_segments": 0, "edited": 0, "dropped": 0, "chars_removed": 0, "top": [],
    }  # fmt: skip


def test_an_empty_frame_gives_nothing():
    result = run(records(copyright_texts()).head(0), max_documents=1)
    assert result.frame.collect().height == 0 and result.events.height == 0


@pytest.mark.parametrize("segment", ["paragraph", "line"])
def test_evidence_never_holds_segment_text(segment):
    texts = copyright_texts()
    split = paragraphs if segment == "paragraph" else (lambda t: t.split("\n"))
    boiler = flagged(texts.values(), split=split, max_documents=4)
    result = run(records(texts), segment=segment, max_documents=4)
    assert result.events.height > 0
    for raw in result.events["evidence"]:
        evidence = json.loads(raw)
        assert set(evidence) == EVIDENCE_KEYS
        assert all(re.fullmatch(r"[0-9a-f]{16}", h) for h in evidence["hashes"])
        assert len(evidence["hashes"]) == len(evidence["documents"]) <= 10
        assert not any(segment[:20] in raw for segment in boiler)
