"""Helpers shared by the tests: real-data rows, source declarations, project builders."""

from __future__ import annotations

import gettext
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import polars as pl
import yaml

from pipeline.config import RunConfig, SourceDeclaration, config_hash
from pipeline.core import clusters
from pipeline.core.schema import RECORD_SCHEMA
from pipeline.ingest.readers import read_file
from pipeline.ingest.stage import ingest
from pipeline.publish.stage import publish
from pipeline.publish.version import StagedVersion
from pipeline.split.stage import split
from pipeline.stage import (
    ByKey,
    RunContext,
    StageResult,
    key_partition,
    sent_to,
)

FIXTURES = Path(__file__).parent / "fixtures"
CHANGELOGS = FIXTURES / "debian"


def thresher(*args):
    """Run the `thresher` CLI in this process (exceptions propagate)."""
    from typer.testing import CliRunner

    from flows.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def run_json(config: Path, *options: str) -> dict:
    """`thresher run --config CONFIG --json [OPTIONS]`, which must succeed: its one summary
    line."""
    result = thresher("run", "--config", config, "--json", *options)
    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.strip().splitlines()
    return json.loads(line)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def sms_rows(sms_spam: pl.DataFrame, start: int, stop: int) -> list[dict]:
    """SMS messages as jsonl rows with a stable id, a label and a group (the message's row
    block of 7, standing in for a sender) and a timestamp."""
    rows = []
    for row in sms_spam.slice(start, stop - start).iter_rows(named=True):
        index = int(row["index"])
        rows.append(
            {
                "id": f"sms-{index}",
                "text": row["text"],
                "label": "spam" if row["spam"] == "1" else "ham",
                "sender": f"sender-{index // 7}",
                "sent": f"2012-{1 + index % 12:02d}-{1 + index % 28:02d}T10:00:00Z",
            }
        )
    return rows


SMS_SOURCE = {
    "name": "sms",
    "location": "data/sms*.jsonl",
    "format": "jsonl",
    "fields": {
        "text": "text",
        "id": "id",
        "label": "label",
        "group": "sender",
        "timestamp": "sent",
    },
    "license": "CC-BY-4.0",
    "consent": "public-release",
    "owner": "UCI Machine Learning Repository",
}

CHANGELOG_SOURCE = {
    "name": "changelogs",
    "location": str(CHANGELOGS / "*" / "changelog.Debian.gz"),
    "format": "debian_changelog",
    "license": "LicenseRef-Debian-package-terms",
    "consent": "public-release",
    "owner": "Debian maintainers",
}


def changelog_changes(packages: tuple[str, ...]) -> list[str]:
    """The distinct `changes` texts of the fixture changelogs of `packages`, in file order."""
    source = SourceDeclaration(
        name="deb", location="x", format="debian_changelog", license="GPL-2.0-or-later",
        consent="public-release", owner="Debian", base_dir=".",
    )  # fmt: skip
    entries = []
    for package in packages:
        raw = read_file(CHANGELOGS / package / "changelog.Debian.gz", package, source)
        entries += raw["changes"].drop_nulls().to_list()
    return list(dict.fromkeys(entries))


# Changelog text ships under each package's own, mostly copyleft, license.
DEBIAN_POLICY = {"licenses": {"classes": {"LicenseRef-Debian-package-terms": "share-alike"}}}


def write_project(root: Path, sources: list[dict], name: str = "test-set", **sections) -> Path:
    """A run config with inline sources under `root`; returns the config path."""
    root.mkdir(parents=True, exist_ok=True)
    config = {"name": name, "workdir": "./work", "sources": sources, **sections}
    path = root / "thresher.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_context(run_dir: Path, parent: pl.DataFrame | None = None, **state) -> RunContext:
    """The context of a run of an empty config, for calling a stage function directly; with
    `parent`, the published splits of a parent version."""
    cfg = RunConfig(name="t", sources=[])
    return RunContext(
        run_id="r",
        run_dir=run_dir,
        config=cfg,
        config_hash=config_hash(cfg),
        parent_version="p" if parent is not None else None,
        parent_splits=parent.lazy() if parent is not None else None,
        **state,
    )


def stage_version(
    root, sms_spam, name="sms", stop=300, run_id="run-1", parent=None
) -> tuple[StagedVersion, RunConfig]:
    """Ingest, split and publish `stop` SMS rows into a staging folder of `root/work`."""
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, stop))
    sources = [SourceDeclaration(**SMS_SOURCE, base_dir=str(root))]
    cfg = RunConfig(name=name, workdir=str(root / "work"), sources=sources)
    ctx = RunContext(
        run_id=run_id, run_dir=root, config=cfg, config_hash=config_hash(cfg), parent_version=parent
    )
    frame = split(ingest(sources, ctx, root / f"in-{run_id}").frame, cfg.split, ctx).frame
    staging = root / "work" / "datasets" / name / f".staging-{run_id}"
    staging.mkdir(parents=True)
    return publish(frame, cfg.publish, ctx, staging, extra={"code_version": "test"}), cfg


def queue_for_review(root: Path, rows: dict[str, list[dict]]):
    """Ingest and govern `rows` (per source name: id, text, user, and optionally note and
    license) as dataset `chatlogs` and queue what governance quarantines in the catalog of
    `root/work`, as a nightly run would; returns the catalog and how many items were queued."""
    from data_catalog import review_queue
    from data_catalog.catalog import Catalog
    from pipeline.govern.stage import govern

    fields = {"id": "id", "group": "user", "license": "license", "metadata": ["note"]}
    declared = []
    for name, records in rows.items():
        write_jsonl(root / "data" / f"{name}.jsonl", records)
        declared.append(
            SourceDeclaration(
                name=name, location=f"data/{name}.jsonl", format="jsonl", fields=fields,
                license="CC-BY-4.0", consent="explicit", owner="tests", base_dir=str(root),
            )
        )  # fmt: skip
    cfg = RunConfig(name="chatlogs", workdir=str(root / "work"), sources=declared)
    ctx = RunContext(run_id="run-1", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    result = govern(ingest(declared, ctx, root / "in").frame, cfg.policy, ctx)
    catalog = Catalog.open(root / "work")
    return catalog, review_queue.enqueue(catalog, result.review_items, "chatlogs", "run-1")


def as_records(rows: list[dict], **defaults) -> pl.LazyFrame:
    """Records in the canonical schema from partial rows; missing fields are `defaults` or
    null."""
    full = [{**defaults, **row} for row in rows]
    frame = pl.DataFrame(full, schema_overrides={"timestamp": pl.Datetime("us", "UTC")})
    missing = [pl.lit(None, dtype).alias(n) for n, dtype in RECORD_SCHEMA.items() if n not in frame]
    return frame.with_columns(missing).select(RECORD_SCHEMA.names()).cast(RECORD_SCHEMA).lazy()


def reference_shingles(text: str, n: int = 5) -> set[str]:
    """The documented shingling, written plainly: lower-case, non-alphanumerics to spaces."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    if not words:
        return set()
    if len(words) < n:
        return {" ".join(words)}
    return {" ".join(words[k : k + n]) for k in range(len(words) - n + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b)


@dataclass
class WebhookReceiver:
    url: str
    received: list[dict]  # the JSON bodies POSTed to it, in order


@contextmanager
def webhook_receiver() -> Iterator[WebhookReceiver]:
    """A local HTTP server that answers 204 to JSON POSTs (the alerts of flows/alerts.py)."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield WebhookReceiver(f"http://127.0.0.1:{server.server_port}/hook", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


LOCALE = Path("/usr/share/locale")


@cache
def german_message() -> tuple[str, str]:
    """(German, English): the longest one-line translation of 8 words or more that ends a
    sentence, as its msgid does, from the first of these gettext catalogs installed."""
    for domain in ("coreutils", "apt", "bash"):
        path = LOCALE / "de" / "LC_MESSAGES" / f"{domain}.mo"
        if path.exists():
            break
    else:
        raise AssertionError(f"no German gettext catalog (coreutils, apt, bash) under {LOCALE}")
    with path.open("rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog
    pairs = [
        (text, msgid)
        for msgid, text in catalog.items()
        if isinstance(msgid, str)
        and isinstance(text, str)
        and "\n" not in text
        and len(text.split()) >= 8
        and text.endswith(".")
        and msgid.endswith(".")
    ]
    return min(pairs, key=lambda pair: (-len(pair[0]), pair[0]))


def run_in_parts(
    by_key: ByKey, frame: pl.LazyFrame, cfg, ctx: RunContext, parts: int
) -> StageResult:
    """A ByKey run as the runner runs it, in this process: `frame` cut into `parts` parts (a
    sample of each, one fit), the keys sent to as many key partitions, each exchange's rows sent part to part, one decide,
    apply per part. Its records (sorted by record_id), events (sorted) and stats."""
    if by_key.off(cfg) is not None:  # the runner runs none of its steps
        result = by_key(frame, cfg, ctx)
        return replace(result, frame=result.frame.sort("record_id"))
    rows = frame.collect()
    size = -(-rows.height // parts) or 1
    pieces = [rows.slice(start, size).lazy() for start in range(0, max(rows.height, 1), size)]
    model = ()
    if by_key.fit is not None:
        samples = pl.concat(by_key.sample(piece, cfg, ctx) for piece in pieces)
        model = (by_key.fit(samples.lazy(), frame, cfg),)
    keys = []
    for number, piece in enumerate(pieces):
        part_keys = by_key.keys(piece, cfg, ctx, *model)
        if by_key.exchanges:
            part_keys = part_keys.with_columns(pl.lit(number, pl.UInt32).alias("_part"))
        keys.append(part_keys)
    keys = pl.concat(keys)
    partition = key_partition(pl.col("_key"), len(pieces), keys.schema["_key"])
    found = pl.concat(
        by_key.reduce(keys.filter(partition == k).lazy(), cfg) for k in range(len(pieces))
    )
    found_by_part = [found]
    for exchange in by_key.exchanges:
        found_by_part = [
            exchange(piece, sent_to(found.lazy(), number), cfg, ctx)
            for number, piece in enumerate(pieces)
        ]
        found = pl.concat(found_by_part)
    if by_key.by_components(cfg):
        decided, evidence = by_key.components.in_process(pieces, found_by_part, cfg, ctx)
        results = [
            by_key.apply(
                piece, sent_to(decided.decisions.lazy(), number), cfg, ctx, *evidence[number]
            )
            for number, piece in enumerate(pieces)
        ]
    else:
        decided = by_key.decide(found.lazy(), frame, cfg, ctx, *model)
        results = [by_key.apply(piece, decided.decisions.lazy(), cfg, ctx) for piece in pieces]
    return StageResult(
        frame=pl.concat(result.frame for result in results).sort("record_id"),
        events=pl.concat(result.events for result in results).sort(
            "record_id", maintain_order=True
        ),
        stats=by_key.merge_stats(decided.stats, [result.stats for result in results]),
    )


def star_rounds(edges: pl.DataFrame, partitions: int) -> tuple[pl.DataFrame, int]:
    """Components as the runner finds them (node partitions as its steps send them)."""
    partition = lambda node: key_partition(node, partitions, pl.UInt64)  # noqa: E731
    return clusters.star_rounds(edges, partition, partitions)


def replace_stage(monkeypatch, name: str, function) -> None:
    """Run `function` as stage `name` in the runs this test makes: the flow looks a stage up
    in the registry when it runs it, and every step of those runs runs in this process (a
    pool's processes would find the stage the registry had when they started)."""
    from flows.runner import workers
    from pipeline.registry import STAGES

    monkeypatch.setitem(STAGES, name, replace(STAGES[name], function=function))
    monkeypatch.setattr(workers, "Processes", _InThisProcess)


class _InThisProcess:
    """A local pool of `count` workers, as far as the runner can tell, that runs every step
    in this process."""

    def __init__(self, count: int):
        from flows.runner import workers

        self.count = count
        self.pool = self  # shut down with the run: nothing to stop
        self._steps = workers.Workers()

    def map(self, function, calls):
        return self._steps.map(function, calls)

    def shutdown(self, **_options) -> None:
        pass
