"""Determinism of a full `thresher run`: the same records, run three times, must publish the same
dataset.

The records are the spine bench's input (bench_spine.input_dir: real text repeated with
variation, deterministic, cached under bench/out/input/). A project folder is written with a
sources.yaml (jsonl, fields id/text/label/group/timestamp, CC-BY-4.0, public-release, allowed
for training) and a thresher.yaml that leaves every other section at its default, and
`thresher run --config thresher.yaml --json` runs as a user would run it, in a subprocess with
a fresh workdir and a fresh PREFECT_HOME, three times:

  a. the records over --files files;
  b. the same files again;
  c. the same records over --other-files files, the files in reverse order (the last records
     in the first file by name) and the rows within each file shuffled with a fixed seed.

For each run: wall seconds, peak RSS (the highest single process, from os.wait4, and the
highest sum over the process tree, psutil polled), dataset hash, published records and records
per split. The checks: (a) and (b) have the same dataset hash; all three publish the same
membership (record_id -> split) and make the same terminal decisions (record_id, stage, action,
reason) for every record that is not published, and publish the same rows, column by column,
but for `location` (which names file and line). Where two runs differ, the first stage, in
pipeline order, whose terminal decisions differ is printed with how many records differ there.
The last stdout line is a JSON result; the exit code is 1 when a check fails.

`--code-root DIR` runs the pipeline code of another checkout (a git worktree of an older
commit, say) with this venv: DIR goes first on PYTHONPATH, and on sys.path of the launcher.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out"
sys.path.insert(0, str(BENCH_DIR))  # bench/ is not a package

import bench_spine  # noqa: E402

SHUFFLE_SEED = 20240611
# The order in which the curate flow runs its stages (flows/curate.py); a stage the ledger
# names that is not listed here sorts after these, in order of first appearance.
STAGE_ORDER = (
    "ingest",
    "govern",
    "quality",
    "exact_dedup",
    "near_dedup",
    "boilerplate",
    "semantic_dedup",
    "split",
    "synthetic",
    "augment",
    "contamination",
    "publish",
)
# Launches the CLI with a code root first on sys.path (argv[1]; empty: the installed code).
LAUNCHER = (
    "import sys; root = sys.argv.pop(1); root and sys.path.insert(0, root); "
    "sys.argv[0] = 'thresher'; from flows.cli import main; main()"
)
POLL_SECONDS = 0.25


# ---------------------------------------------------------------------------------------------
# Inputs and projects


def other_layout(n_records: int, n_files: int) -> Path:
    """The same records over `n_files` files, the files in reverse order and each file's rows
    shuffled (seed SHUFFLE_SEED), built on first use from the spine bench's cached Parquet."""
    version = bench_spine.GENERATOR_VERSION
    target = OUT / "input" / f"v{version}-n{n_records}-f{n_files}-reversed-shuffled-{SHUFFLE_SEED}"
    done = target / "DONE.json"
    if done.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    records = bench_spine.cached_records(n_records)
    rng = np.random.default_rng(SHUFFLE_SEED)
    (target / "data").mkdir(parents=True)
    bounds = np.linspace(0, n_records, n_files + 1).astype(np.int64)
    for number in range(n_files):
        part = records.slice(int(bounds[number]), int(bounds[number + 1] - bounds[number]))
        part = part[rng.permutation(part.height)]
        # names sort in reverse: the first records are in the last file read
        part.write_ndjson(target / "data" / f"part-{n_files - 1 - number:05d}.jsonl")
    size = sum(path.stat().st_size for path in (target / "data").iterdir())
    layout = {"records": n_records, "files": n_files, "bytes": size, "seed": SHUFFLE_SEED}
    done.write_text(json.dumps(layout | {"order": "reversed", "rows": "shuffled"}) + "\n")
    return target


def write_project(project: Path, data: Path) -> Path:
    """sources.yaml and a default thresher.yaml under `project`; returns the config path."""
    project.mkdir(parents=True)
    source = {
        "name": "bench",
        "location": str(data / "data" / "*.jsonl"),
        "format": "jsonl",
        "fields": {
            "text": "text",
            "id": "id",
            "label": "label",
            "group": "group",
            "timestamp": "ts",
        },
        "license": "CC-BY-4.0",
        "consent": "public-release",
        "rights_basis": "Built by bench/bench_spine.py from CC BY 4.0 SMS and Debian changelogs.",
        "owner": "bench",
        "allowed_uses": ["training", "evaluation", "research", "commercial"],
    }
    # JSON is YAML: no YAML writer needed
    (project / "sources.yaml").write_text(json.dumps({"sources": [source]}, indent=2) + "\n")
    config = {"name": "determinism", "workdir": "./work", "sources": "sources.yaml"}
    (project / "thresher.yaml").write_text(json.dumps(config, indent=2) + "\n")
    return project / "thresher.yaml"


# ---------------------------------------------------------------------------------------------
# Running


def run_env(prefect_home: Path, code_root: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)  # the ephemeral server, as a fresh user gets it
    env |= {
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_LOGGING_COLORS": "false",
    }
    if code_root:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(code_root), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    return env


def resolved_code(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Where the project's packages import from under `env`, run in `cwd` (not the repository
    root: `python -c` puts the current folder first on sys.path, before PYTHONPATH)."""
    probe = "import json, data_catalog, expectations, flows, pipeline; print(json.dumps({m.__name__: m.__file__ for m in (pipeline, flows, data_catalog, expectations)}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def thresher_command(code_root: Path | None, env: dict[str, str], cwd: Path) -> list[str]:
    """The installed `thresher` script, or the launcher when PYTHONPATH does not win."""
    script = Path(sys.executable).parent / "thresher"
    if code_root is None:
        return [str(script)]
    found = resolved_code(env, cwd)
    if all(Path(path).resolve().is_relative_to(code_root) for path in found.values()):
        return [str(script)]
    print(f"PYTHONPATH does not win ({found}); using the launcher", file=sys.stderr)
    return [sys.executable, "-c", LAUNCHER, str(code_root)]


def _tree(root: psutil.Process, prefect_home: str, known: dict[int, psutil.Process]) -> None:
    """Add to `known` the live descendants of `root` and any process with our PREFECT_HOME
    (the ephemeral server may leave the tree)."""
    try:
        for child in root.children(recursive=True):
            known.setdefault(child.pid, child)
    except psutil.Error:
        pass
    for process in psutil.process_iter():
        if process.pid in known:
            continue
        try:
            if process.environ().get("PREFECT_HOME") == prefect_home:
                known[process.pid] = process
        except psutil.Error:
            continue


def watched(process: subprocess.Popen, prefect_home: str | None = None) -> tuple:
    """Wait for `process`, polling its whole tree (and, with `prefect_home`, any process with
    that PREFECT_HOME: the ephemeral server may leave the tree) every POLL_SECONDS. Returns
    its wait status and rusage, each process's last seen CPU seconds (user + system) by pid,
    the tree's peak RSS in bytes and the processes seen."""
    root = psutil.Process(process.pid)
    known: dict[int, psutil.Process] = {process.pid: root}
    tree_peak = 0
    cpu: dict[int, float] = {}
    polls = 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            return status, usage, cpu, tree_peak, known
        if prefect_home is not None and polls % 8 == 0:  # the full process scan, every 2 s
            _tree(root, prefect_home, known)
        else:
            try:
                for child in root.children(recursive=True):
                    known.setdefault(child.pid, child)
            except psutil.Error:
                pass
        total = 0
        for member in list(known.values()):
            try:
                total += member.memory_info().rss
                times = member.cpu_times()
                cpu[member.pid] = times.user + times.system
            except psutil.Error:
                known.pop(member.pid, None)
        tree_peak = max(tree_peak, total)
        polls += 1
        time.sleep(POLL_SECONDS)


def measure(label: str, data: Path, code_root: Path | None, out: Path) -> dict:
    """One `thresher run` in a fresh project; its summary, peak RSS and what it published."""
    folder = out / label
    shutil.rmtree(folder, ignore_errors=True)
    config = write_project(folder / "project", data)
    prefect_home = folder / "prefect-home"
    prefect_home.mkdir()
    env = run_env(prefect_home, code_root)
    command = [
        *thresher_command(code_root, env, config.parent),
        "run",
        "--config",
        str(config),
        "--json",
    ]
    stdout_path, stderr_path = folder / "stdout.jsonl", folder / "stderr.log"
    print(f"[{label}] {data.name}: thresher run …", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with stdout_path.open("w") as stdout, stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=config.parent, env=env, stdout=stdout, stderr=stderr
        )
        status, usage, cpu, tree_peak, known = watched(process, str(prefect_home))
    wall = time.perf_counter() - started
    returncode = os.waitstatus_to_exitcode(status)
    process.returncode = returncode
    for leftover in list(known.values()):  # what this run started and left behind
        try:
            if leftover.is_running() and leftover.pid != process.pid:
                leftover.terminate()
        except psutil.Error:
            pass
    result = {
        "label": label,
        "input": str(data),
        "returncode": returncode,
        "wall_s": round(wall, 1),
        # ru_maxrss (KiB): the highest of the process and every descendant it reaped
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "peak_tree_rss_mb": round(tree_peak / 2**20),
        # user + system CPU of every process of the run (its own, worker pools, a temporary
        # Dask cluster, the Prefect server it started), as last polled (every 0.25 s)
        "cpu_s": round(sum(cpu.values()), 1),
        "command": command,
        "stderr": str(stderr_path),
    }
    if returncode != 0:
        tail = stderr_path.read_text().splitlines()[-15:]
        print(f"[{label}] failed with exit code {returncode}:\n" + "\n".join(tail), file=sys.stderr)
        return result
    lines = [line for line in stdout_path.read_text().splitlines() if line.startswith("{")]
    summary = json.loads(lines[-1])
    version = Path(summary["paths"]["version"])
    # the run resets its process's peak-RSS window per step, and that lowers the peak
    # os.wait4 reports too (both read the kernel's hiwater_rss): the steps' peaks count
    peaks = [step["peak_rss_mb"] for step in summary.get("steps", {}).values()]
    result["peak_rss_mb"] = round(max([result["peak_rss_mb"], *peaks]))
    result |= {
        "run_id": summary["run_id"],
        "dataset_hash": summary["dataset_hash"],
        "records_in": summary["records_in"],
        "published": summary["published"],
        "dropped": summary["dropped"],
        "quarantined": summary["quarantined"],
        "splits": {name: counts["records"] for name, counts in summary["splits"].items()},
        "reasons": summary["reasons"],
        "version": str(version),
        "ledger": summary["paths"]["ledger"],
    }
    brief = {key: result[key] for key in ("dataset_hash", "published", "splits", "wall_s")}
    print(f"[{label}] {json.dumps(brief)} peak RSS {result['peak_rss_mb']} MB", file=sys.stderr)
    return result


# ---------------------------------------------------------------------------------------------
# Comparing


def membership(version: Path) -> pl.DataFrame:
    """record_id and split of every published record, from the manifest's shards (read
    directly, so that the comparison does not import the code under test)."""
    manifest = json.loads((version / "manifest.json").read_text())
    files = [str(version / shard["path"]) for shard in manifest["shards"]]
    if not files:
        return pl.DataFrame(schema={"record_id": pl.String, "split": pl.String})
    return pl.scan_parquet(files).select("record_id", "split").collect().sort("record_id")


def published_rows(version: Path) -> pl.DataFrame:
    """Every published row but its `location` (file and line, which the layout names), in
    record_id order."""
    manifest = json.loads((version / "manifest.json").read_text())
    files = [str(version / shard["path"]) for shard in manifest["shards"]]
    return pl.scan_parquet(files).drop("location").collect().sort("record_id")


def terminal(ledger: Path) -> pl.DataFrame:
    """Every record's terminal event: record_id, stage, action, reason."""
    return (
        pl.scan_parquet(ledger)
        .filter(pl.col("terminal"))
        .select("record_id", "stage", "action", "reason")
        .collect()
    )


def _stage_rank(stages: list[str]) -> dict[str, int]:
    ranked = {name: number for number, name in enumerate(STAGE_ORDER)}
    for name in stages:
        ranked.setdefault(name, len(ranked))
    return ranked


def compare(first: dict, second: dict) -> dict:
    """Membership and terminal decisions of two runs, with the first stage that differs."""
    a, b = membership(Path(first["version"])), membership(Path(second["version"]))
    joined = a.join(b, on="record_id", how="full", coalesce=True, suffix="_other")
    moved = joined.filter(pl.col("split").ne_missing(pl.col("split_other")))
    ta, tb = terminal(Path(first["ledger"])), terminal(Path(second["ledger"]))
    not_published_a = ta.filter(pl.col("action") != "published").drop("stage")
    not_published_b = tb.filter(pl.col("action") != "published").drop("stage")
    dropped_equal = not_published_a.sort("record_id").equals(not_published_b.sort("record_id"))
    # per stage: records whose terminal decision (action, reason) at that stage differs
    ranks = _stage_rank(list(dict.fromkeys([*ta["stage"], *tb["stage"]])))
    decisions = ta.join(tb, on="record_id", how="full", coalesce=True, suffix="_other")
    differing = decisions.filter(
        pl.col("stage").ne_missing(pl.col("stage_other"))
        | pl.col("action").ne_missing(pl.col("action_other"))
        | pl.col("reason").ne_missing(pl.col("reason_other"))
    )
    by_stage: dict[str, int] = {}
    for name in sorted(ranks, key=ranks.get):
        at_stage = (pl.col("stage") == name).fill_null(False) | (
            pl.col("stage_other") == name
        ).fill_null(False)
        count = differing.filter(at_stage).height
        if count:
            by_stage[name] = count
    transitions = (
        differing.group_by(
            "stage", "action", "reason", "stage_other", "action_other", "reason_other"
        )
        .len()
        .sort("len", descending=True)
        .head(8)
        .to_dicts()
    )
    return {
        "runs": [first["label"], second["label"]],
        "same_hash": first["dataset_hash"] == second["dataset_hash"],
        "same_membership": moved.is_empty(),
        # the same kept copy, cluster id, text and every other column of each published record
        "same_rows_but_location": published_rows(Path(first["version"])).equals(
            published_rows(Path(second["version"]))
        ),
        "membership_differences": moved.height,
        "same_not_published": dropped_equal,
        "records_with_different_terminal_decision": differing.height,
        "first_differing_stage": next(iter(by_stage), None),
        "differing_by_stage": by_stage,
        "top_differences": transitions,
    }


def _git_commit(root: Path) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "pipeline", "flows"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    commit = done.stdout.strip()
    return f"{commit}{' (pipeline/ or flows/ modified)' if dirty else ''}" if commit else "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--files", type=int, default=100, help="files of runs (a) and (b)")
    parser.add_argument(
        "--other-files", type=int, default=37, help="files of run (c), reversed and shuffled"
    )
    parser.add_argument(
        "--code-root",
        type=Path,
        help="checkout whose pipeline code runs (first on PYTHONPATH); default: the installed one",
    )
    parser.add_argument(
        "--out", type=Path, default=OUT / "determinism", help="folder for the runs and result"
    )
    args = parser.parse_args()
    code_root = args.code_root.resolve() if args.code_root else None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    env = run_env(out / "probe-prefect-home", code_root)
    code = resolved_code(env, out)
    print(f"code: {_git_commit(code_root or ROOT)}, imports {code}", file=sys.stderr)
    if code_root and not all(Path(p).resolve().is_relative_to(code_root) for p in code.values()):
        print(
            "note: PYTHONPATH does not win over the install; the launcher is used", file=sys.stderr
        )

    main_dir = bench_spine.input_dir(args.records, args.files)
    other_dir = other_layout(args.records, args.other_files)
    os.sync()
    runs = [
        measure(f"a-f{args.files}", main_dir, code_root, out),
        measure(f"b-f{args.files}", main_dir, code_root, out),
        measure(f"c-f{args.other_files}-reversed-shuffled", other_dir, code_root, out),
    ]
    failures = [
        f"{run['label']}: exit code {run['returncode']}" for run in runs if run["returncode"]
    ]
    comparisons = []
    if not failures:
        a, b, c = runs
        comparisons = [compare(a, b), compare(a, c)]
        if not comparisons[0]["same_hash"]:
            failures.append("a vs b: dataset hash differs")
        for compared in comparisons:
            pair = " vs ".join(compared["runs"])
            if not compared["same_membership"]:
                failures.append(
                    f"{pair}: membership differs ({compared['membership_differences']} records)"
                )
            if not compared["same_rows_but_location"]:
                failures.append(f"{pair}: published rows differ (location aside)")
            if not compared["same_not_published"]:
                failures.append(f"{pair}: dropped/quarantined records or reasons differ")
            if compared["first_differing_stage"]:
                stage = compared["first_differing_stage"]
                count = compared["differing_by_stage"][stage]
                print(
                    f"{pair}: first stage whose terminal decisions differ: {stage} "
                    f"({count} records there; {compared['records_with_different_terminal_decision']}"
                    f" in all; by stage {compared['differing_by_stage']})",
                    file=sys.stderr,
                )
        print(f"(informational) a vs c same hash: {comparisons[1]['same_hash']}", file=sys.stderr)

    for run in runs:
        print(
            f"{run['label']}: hash {run.get('dataset_hash', '-')}, published "
            f"{run.get('published', '-')}, splits {run.get('splits', '-')}, {run['wall_s']} s, "
            f"peak RSS {run['peak_rss_mb']} MB (tree {run['peak_tree_rss_mb']} MB)",
            file=sys.stderr,
        )
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    result = {
        "code": _git_commit(code_root or ROOT),
        "code_root": str(code_root or ROOT),
        "imports": code,
        "records": args.records,
        "runs": runs,
        "comparisons": comparisons,
        "failures": failures,
        "passed": not failures,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
