"""Near-duplicate dedup (MinHash LSH) on edited copies of real text: found at the documented
threshold, kept by the keep rule, traced by value, deterministic and incremental."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import as_records, changelog_changes, jaccard, reference_shingles, run_in_parts

from pipeline.config import DedupConfig, RunConfig, config_hash
from pipeline.core import reasons
from pipeline.dedup import near
from pipeline.dedup.near import near_dedup
from pipeline.stage import RunContext

DEFAULT = DedupConfig()


def context(
    tmp_path: Path, parent: pl.DataFrame | None = None, part_rows: int = 500_000, **dedup
) -> RunContext:
    cfg = RunConfig(
        name="t",
        workdir=str(tmp_path),
        sources=[],
        dedup=DedupConfig(**dedup),
        runner={"part_rows": part_rows},
    )
    return RunContext(
        run_id="r",
        run_dir=tmp_path / "run",
        config=cfg,
        config_hash=config_hash(cfg),
        parent_version="parent-hash" if parent is not None else None,
        parent_splits=parent.lazy() if parent is not None else None,
    )


@pytest.fixture(scope="module")
def changelog_entries() -> list[str]:
    """Long, distinct entries of real Debian changelogs (several change lines each)."""
    entries = changelog_changes(("coreutils", "sed", "grep", "diffutils", "mawk"))
    entries = [e for e in entries if len(e.split()) >= 60 and e.count("\n") >= 4]
    return entries[:60]


def edits(text: str, rng: random.Random) -> dict[str, str]:
    """Edited copies of a real text: the kinds of near duplicates the issue names."""
    words = text.split(" ")
    inserted = [*words[:10], "also", *words[10:]]
    deleted = words[:5] + words[6:]
    lines = text.split("\n")
    position = rng.randrange(1, len(lines) - 1)
    reordered = [
        *lines[: position - 1],
        lines[position],
        lines[position - 1],
        *lines[position + 1 :],
    ]
    return {
        "insertion": " ".join(inserted),
        "deletion": " ".join(deleted),
        "reordered_lines": "\n".join(reordered),
        "whitespace_and_case": "  ".join(text.upper().split()),
    }


def run(rows: list[dict], ctx: RunContext, cfg: DedupConfig = DEFAULT):
    return near_dedup(as_records(rows, source="src"), cfg, ctx)


def spy(function, results: list):
    """`function`, keeping what each call returns in `results`."""

    def called(*args, **kwargs):
        results.append(function(*args, **kwargs))
        return results[-1]

    return called


def evidence_by_record(result) -> dict[str, dict]:
    return {
        row["record_id"]: json.loads(row["evidence"]) for row in result.events.iter_rows(named=True)
    }


def test_edited_copies_of_real_text_are_found_and_different_texts_are_not(
    tmp_path, changelog_entries
):
    rng = random.Random(11)
    rows, variants = [], []
    for number, text in enumerate(changelog_entries):
        rows.append({"record_id": f"a{number:03d}", "text": text})
        for kind, edited in edits(text, rng).items():
            record_id = f"b{number:03d}-{kind}"
            rows.append({"record_id": record_id, "text": edited})
            variants.append((record_id, f"a{number:03d}", jaccard(
                reference_shingles(text), reference_shingles(edited)
            )))  # fmt: skip
    result = run(rows, context(tmp_path))
    found = evidence_by_record(result)
    assert set(result.events["reason"]) == {reasons.NEAR_DUPLICATE}
    # every edit that keeps the Jaccard similarity at or above the threshold is found ...
    above = [(record, origin) for record, origin, similarity in variants if similarity >= 0.8]
    assert len(above) > 120
    assert {record.split("-", 1)[1] for record, _ in above} == {
        "insertion", "deletion", "reordered_lines", "whitespace_and_case"
    }  # fmt: skip

    # one copy of each origin survives: its variants are dropped, or it is and one of them is
    # kept. LSH finds a pair with a probability that rises with its similarity (a pair at 0.87
    # is missed about once in ten), so this holds exactly where every variant is at 0.9 or
    # more, and for nearly all groups down to the threshold
    def extra_survivors(floor: float) -> int:
        groups: dict[str, set[str]] = {}
        for record, origin, similarity in variants:
            if similarity >= floor:
                groups.setdefault(origin, {origin}).add(record)
        return sum(len(group - set(found)) - 1 for group in groups.values())

    assert extra_survivors(0.9) == 0
    assert extra_survivors(0.8) <= 0.05 * len(above)
    # ... and the originals are never dropped for each other: they are different texts
    originals = {row["record_id"] for row in rows if row["record_id"].startswith("a")}
    dropped_originals = originals & set(found)
    assert all(found[record]["duplicate_of"].startswith("b") for record in dropped_originals)
    # nothing below the threshold is dropped: verification computed the exact similarity
    texts = {row["record_id"]: row["text"] for row in rows}
    for record, evidence in found.items():
        exact = jaccard(
            reference_shingles(texts[record]), reference_shingles(texts[evidence["duplicate_of"]])
        )
        assert evidence["similarity"] == pytest.approx(exact, abs=1e-4)
        assert exact >= 0.8 - 1e-9  # the threshold
    assert (
        result.stats["dropped"]
        == len(found)
        == result.stats["records"] - result.frame.collect().height
    )


def test_evidence_and_keep_rule_by_value(tmp_path, changelog_entries):
    text = changelog_entries[0]
    edited = edits(text, random.Random(1))["insertion"]  # the longer one
    early, late = datetime(2020, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)
    rows = [
        {"record_id": "r1", "text": text, "timestamp": late, "license": "MIT"},
        {"record_id": "r2", "text": edited, "timestamp": early, "license": "GPL-2.0-only"},
        {"record_id": "r3", "text": changelog_entries[1], "timestamp": late},
    ]
    expected_similarity = round(jaccard(reference_shingles(text), reference_shingles(edited)), 4)
    by_time = run(rows, context(tmp_path))
    assert by_time.frame.collect()["record_id"].to_list() == ["r2", "r3"]
    assert evidence_by_record(by_time) == {
        "r1": {
            "duplicate_of": "r2",
            "method": "minhash",
            "similarity": expected_similarity,
            "cluster_id": "r1",
            "published_in": None,
        }
    }
    assert by_time.frame.collect()["cluster_id"].to_list() == ["r1", "r3"]
    license_first = DedupConfig(keep=["most_permissive_license", "earliest_timestamp"])
    assert run(rows, context(tmp_path), license_first).events["record_id"].to_list() == ["r2"]
    longest_first = DedupConfig(keep=["longest_text"])
    assert run(rows, context(tmp_path), longest_first).events["record_id"].to_list() == ["r1"]
    same = [{**row, "timestamp": None, "license": None} for row in rows]
    lowest_id = DedupConfig(keep=["earliest_timestamp"])  # a tie: lowest record_id is kept
    assert run(same, context(tmp_path), lowest_id).events["record_id"].to_list() == ["r2"]


def test_published_records_stay_and_new_copies_point_at_them(tmp_path, changelog_entries):
    text = changelog_entries[2]
    variants = edits(text, random.Random(3))
    rows = [
        {"record_id": "old", "text": text, "timestamp": datetime(2024, 1, 1, tzinfo=UTC)},
        {"record_id": "old2", "text": variants["deletion"], "timestamp": None},
        {"record_id": "new", "text": variants["insertion"], "timestamp": datetime(2001, 1, 1, tzinfo=UTC)},
    ]  # fmt: skip
    parent = pl.DataFrame({"record_id": ["old", "old2"], "split": ["train", "test"]})
    result = run(rows, context(tmp_path, parent=parent))
    # published records are never dropped, even when they are near duplicates of each other;
    # the newcomer goes although its timestamp is earliest, pointing at the best published one
    assert sorted(result.frame.collect()["record_id"]) == ["old", "old2"]
    evidence = evidence_by_record(result)["new"]
    assert evidence["duplicate_of"] == "old"
    assert evidence["published_in"] == "parent-hash"


def test_same_input_same_clusters_whatever_the_batch_size(
    tmp_path, changelog_entries, sms_spam, monkeypatch
):
    rng = random.Random(5)
    rows = [{"record_id": f"e{i:03d}", "text": t} for i, t in enumerate(changelog_entries)]
    rows += [
        {"record_id": f"v{i:03d}", "text": edits(t, rng)["deletion"]}
        for i, t in enumerate(changelog_entries)
    ]
    rows += [
        {"record_id": f"s{i:04d}", "text": t}
        for i, t in enumerate(sms_spam["text"].unique(maintain_order=True).head(2500))
    ]
    first = run(rows, context(tmp_path))
    monkeypatch.setattr(near, "PAIR_CHUNK", 50)  # many chunks of measured pairs
    second = run(rows, context(tmp_path), DedupConfig(minhash={"batch_records": 1000}))
    monkeypatch.undo()
    assert first.events.equals(second.events)
    assert first.frame.collect().sort("record_id").equals(second.frame.collect().sort("record_id"))
    assert first.stats["dropped"] >= len(changelog_entries)
    # cut in parts (and the keys in as many partitions), shuffled: the same decisions
    shuffled = as_records(random.Random(3).sample(rows, len(rows)), source="src")
    parted = run_in_parts(near_dedup, shuffled, DEFAULT, context(tmp_path, part_rows=300), 7)
    assert parted.stats["candidate_pairs"] == first.stats["candidate_pairs"]
    assert parted.events.equals(first.events.sort("record_id"))
    assert parted.frame.collect().equals(first.frame.collect().sort("record_id"))
    # and the same as one decision over every pair and member (chains measured over parts
    # of 300 records there), the way near dedup decided before it decided by component
    chains = []
    monkeypatch.setattr(near, "_measure_in_parts", spy(near._measure_in_parts, chains))
    once = replace(near_dedup, components=None)
    decided_once = run_in_parts(once, shuffled, DEFAULT, context(tmp_path, part_rows=300), 7)
    assert chains and chains[0].height > 0
    assert parted.events.equals(decided_once.events)
    assert parted.frame.collect().equals(decided_once.frame.collect())
    assert parted.stats == decided_once.stats


def test_related_records_of_different_groups_share_a_cluster_and_stay(tmp_path, changelog_entries):
    rows, pairs = [], []
    for number, text in enumerate(changelog_entries[:30]):
        words = text.split(" ")
        changed = " ".join(w + "s" if k % 20 == 4 else w for k, w in enumerate(words))
        similarity = jaccard(reference_shingles(text), reference_shingles(changed))
        if 0.5 <= similarity < 0.8:
            pairs.append((f"x{number:02d}", f"y{number:02d}"))
            rows += [
                {"record_id": f"x{number:02d}", "text": text, "group": "alice"},
                {"record_id": f"y{number:02d}", "text": changed, "group": "bob"},
            ]
    assert len(pairs) >= 10
    config = DedupConfig(minhash={"related_threshold": 0.5})
    result = run(rows, context(tmp_path), config)
    assert result.events.height == 0  # related, not duplicates: both stay
    cluster = dict(result.frame.collect().select("record_id", "cluster_id").iter_rows())
    linked = [(x, y) for x, y in pairs if cluster[y] == x]
    assert len(linked) == result.stats["related_pairs"] >= 3  # the pairs LSH proposed
    assert all(cluster[x] == x for x, _ in pairs)
    same_group = [{**row, "group": "alice"} for row in rows]
    cluster = dict(
        run(same_group, context(tmp_path), config)
        .frame.collect()
        .select("record_id", "cluster_id")
        .iter_rows()
    )
    assert all(cluster[record] == record for record in cluster)  # one group stays together anyway


def test_without_verify_every_candidate_is_a_duplicate(tmp_path, changelog_entries):
    text = changelog_entries[5]
    rows = [
        {"record_id": "p1", "text": text},
        {"record_id": "p2", "text": edits(text, random.Random(2))["whitespace_and_case"]},
    ]
    result = run(rows, context(tmp_path), DedupConfig(minhash={"verify": False}))
    # the longer copy (doubled spaces) is kept; their signatures are identical
    assert evidence_by_record(result)["p1"] == {
        "duplicate_of": "p2",
        "method": "minhash",
        "similarity": 1.0,
        "cluster_id": "p1",
        "published_in": None,
    }


def test_text_without_spaces_uses_character_shingles(tmp_path, changelog_entries):
    joined = "".join(changelog_entries[6].split())[:400]
    typo = joined[:200] + "x" + joined[201:]
    rows = [{"record_id": "c1", "text": joined}, {"record_id": "c2", "text": typo}]
    result = run(rows, context(tmp_path))
    assert evidence_by_record(result)["c2"]["duplicate_of"] == "c1"


def test_off_passes_records_through(tmp_path, changelog_entries):
    rows = [{"record_id": "a", "text": changelog_entries[0]}] * 1
    result = run(rows, context(tmp_path), DedupConfig(minhash=None))
    assert result.events.height == 0
    assert result.frame.collect()["cluster_id"].to_list() == ["a"]


def test_no_records_no_pairs(tmp_path):
    empty = as_records([{"record_id": "a", "text": "x"}]).clear()
    result = near_dedup(empty, DEFAULT, context(tmp_path))
    assert result.events.height == 0
    assert result.frame.collect().height == 0
    assert result.stats["candidate_pairs"] == 0
