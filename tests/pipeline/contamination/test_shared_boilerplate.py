"""Contamination on real text that shares boilerplate: the Debian copyright files of 30
packages, three of them the test split. Every file opens with the same machine-readable
header, and many carry the same license texts, so under GPT-3's single-13-gram rule most
training files "contain" a test file. By default n-grams common among the training records
are not evidence and an item matches only when the shared n-grams cover a fifth of its words:
only the training records that copy a test file are dropped."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from helpers import FIXTURES

from pipeline.config import RunConfig, config_hash
from pipeline.contamination.stage import contamination
from pipeline.core import reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.stage import RunContext

COPYRIGHTS = sorted((FIXTURES / "debian-copyright").glob("*.copyright"))


def copyright_records() -> tuple[pl.DataFrame, dict[str, str]]:
    """Every 10th file is a test record, the others training records, and three more training
    records copy a test file: inside other text, re-wrapped onto one line, and with every
    25th word changed. Returns the records and, per copy's record id, the test file's id."""
    texts = [path.read_text(encoding="utf-8") for path in COPYRIGHTS]
    test = [k for k in range(len(texts)) if k % 10 == 0]
    rows = [
        (path.stem, text, "test" if k in test else "train")
        for k, (path, text) in enumerate(zip(COPYRIGHTS, texts, strict=True))
    ]
    copies = {}
    for kind, k in enumerate(test):
        tokens = texts[k].split()
        copy = [
            f"Notes on a package I use.\n{texts[k]}\nEnd of notes.",
            " ".join(tokens),
            " ".join("changed" if j % 25 == 0 else token for j, token in enumerate(tokens)),
        ][kind]
        rows.append((f"copy-{kind}", copy, "train"))
        copies[f"copy-{kind}"] = COPYRIGHTS[k].stem
    text = normalize_text(pl.Series([row[1] for row in rows]))
    records = pl.DataFrame(
        {
            "record_id": [row[0] for row in rows],
            "source": "copyright",
            "text": text,
            "split": [row[2] for row in rows],
        }
    ).with_columns(
        pl.Series("content_hash", xxh3_128_hex(text)),
        pl.Series("source_content_hash", xxh3_128_hex(text)),
        *(pl.lit(None, pl.String).alias(c) for c in ("metadata", "group", "label")),
        pl.lit("GPL-2.0").alias("license"),
        pl.lit("public-release").alias("consent"),
    )
    return records, copies


def checked(tmp_path: Path, records: pl.DataFrame, ngram: dict):
    methods = {"exact": None, "minhash": None, "ngram": ngram}
    cfg = RunConfig(name="c", sources=[], contamination={"methods": methods})
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    result = contamination(records.lazy(), cfg.contamination, ctx)
    dropped = result.events.filter(pl.col("action") == reasons.DROPPED)
    return result, {
        row["record_id"]: json.loads(row["evidence"]) for row in dropped.iter_rows(named=True)
    }


def test_shared_copyright_boilerplate_is_not_contamination_but_copies_are(tmp_path):
    records, copies = copyright_records()
    training = records.filter(pl.col("split") == "train").height
    gpt3 = {"min_coverage": 0, "ignore_common_in_training": None, "ignore_common_in_items": None}
    _, before = checked(tmp_path / "gpt3", records, gpt3)
    assert len(before) == training  # every training file "contains" a test file

    # defaults: the header (in every file) is ignored; what is left is the GPL text that
    # bash, coreutils and e2fsprogs share with gzip's file (in 4 of 30 files: under 10)
    _, defaults = checked(tmp_path / "defaults", records, {})
    assert copies.keys() <= defaults.keys()
    assert set(defaults) - set(copies) == {"bash", "coreutils", "e2fsprogs"}
    assert all(defaults[name]["item"] == "gzip" for name in ("bash", "coreutils", "e2fsprogs"))

    # tuned for a corpus of 30 files: an n-gram in more than 3 of them is common, and a
    # match covers 30% of the item
    small = {"ignore_common_in_training": 3, "min_coverage": 0.3}
    result, after = checked(tmp_path / "small", records, small)
    assert after.keys() == copies.keys()  # no false positive, every copy found
    for record_id, found in after.items():
        assert found["item"] == copies[record_id] and found["method"] == "ngram"
        assert 0.3 <= found["score"] <= 1.0 and len(found["span"].split()) == 13
        item = (FIXTURES / "debian-copyright" / f"{copies[record_id]}.copyright").read_text()
        assert found["span"] in " ".join(
            "".join(c if c.isalnum() else " " for c in item.lower()).split()
        )
    assert result.stats["dropped"] == len(copies)
    ignored = result.stats["eval_sets"]["test"]["ignored_ngrams"]
    assert ignored["common_in_training"] > 100 and ignored["common_in_items"] == 0


def test_a_test_file_copied_into_many_records_is_caught_in_every_one(tmp_path):
    """An item copied into more training records than `ignore_common_in_training` makes its
    n-grams common, but a record that holds the whole item still matches it; records that
    hold only a passage of it, as often, do not (a passage many records share is what
    boilerplate looks like)."""
    records, _ = copyright_records()
    records = records.filter(~pl.col("record_id").str.starts_with("copy-"))
    item = records.filter(pl.col("record_id") == "gzip")["text"][0]
    passage = " ".join(item.split()[:60])
    extra = pl.DataFrame(
        {
            "record_id": [f"whole-{k:02d}" for k in range(12)]
            + [f"part-{k:02d}" for k in range(12)],
            "text": [f"Copy number {k} of a file I keep.\n{item}" for k in range(12)]
            + [f"Excerpt number {k}.\n{passage}" for k in range(12)],
        }
    )
    template = records.filter(pl.col("split") == "train").head(1)
    copies = template.select(pl.exclude("record_id", "text")).join(extra, how="cross")
    copies = copies.with_columns(pl.Series("content_hash", xxh3_128_hex(copies["text"])))
    everything = pl.concat([records, copies.select(records.columns)])
    _, found = checked(tmp_path, everything, {"ignore_common_in_training": 3, "min_coverage": 0.3})
    assert {r for r in found if r.startswith("whole-")} == {f"whole-{k:02d}" for k in range(12)}
    assert all(found[f"whole-{k:02d}"]["item"] == "gzip" for k in range(12))
    assert all(found[f"whole-{k:02d}"]["score"] >= 0.8 for k in range(12))
    assert not any(r.startswith("part-") for r in found)
