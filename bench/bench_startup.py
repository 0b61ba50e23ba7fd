"""Benchmark of start-up and fixed cost, as a user runs the commands: `thresher init`'s
40-message sample run on a cold Prefect server (none running) and on a warm one, the rerun
with nothing changed, `thresher --help` and `thresher config validate`, against the floor: a
bare Prefect flow of as many no-op tasks as the sample run's flow run has task runs, started
the same way (a fresh Python process against the same warm server).

Every command runs in a fresh process with a Prefect home of its own (bench/out/startup/),
interleaved, `--repeats` rounds (5), median. For each: wall time from the spawn to the exit,
the time to the first line on stdout or stderr, and the peak of the summed RSS of every
process of the command's tree (sampled every 20 ms), plus the background Prefect server's for
the runs and the bare flow (a temporary server is a child of the run: always in its tree).
The first run on a fresh Prefect home (the server's database created) is measured once.

`--code-root DIR` measures another checkout's code (e.g. a `git worktree` of an earlier
commit) with this environment: the before of a change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out" / "startup"
PYTHON = sys.executable
LAUNCH = "import sys; sys.argv[0] = 'thresher'; from flows.cli import main; main()"
BARE_FLOW = """
import sys
from prefect import flow, task

@task
def noop(i: int) -> int:
    return i

@flow(name="bare")
def bare(n: int) -> int:
    return sum(noop(i) for i in range(n))

print(bare(int(sys.argv[1])))
"""


def measure(command: list[str], env: dict[str, str], cwd: Path, served: bool = False) -> dict:
    """Wall seconds, seconds to the first output line, peak summed RSS of the process tree
    and, for a command the background Prefect server `served`, of that server too."""
    home = Path(env["PREFECT_HOME"])
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first_line: list[float] = []
    captured = {"stdout": [], "stderr": []}

    def read(stream, name):
        for line in stream:
            if not first_line:
                first_line.append(time.perf_counter() - started)
            captured[name].append(line)

    readers = [
        threading.Thread(target=read, args=(process.stdout, "stdout")),
        threading.Thread(target=read, args=(process.stderr, "stderr")),
    ]
    for reader in readers:
        reader.start()
    peak, root = 0, psutil.Process(process.pid)
    while process.poll() is None:
        try:
            tree = {root, *root.children(recursive=True)}
            if served and (home / "thresher-server" / "server.json").exists():
                state = json.loads((home / "thresher-server" / "server.json").read_text())
                tree.add(psutil.Process(state["pid"]))
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except (psutil.Error, ValueError, OSError):
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - started
    for reader in readers:
        reader.join()
    if process.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed ({process.returncode}):\n"
            + b"".join(captured["stderr"]).decode()[-3000:]
        )
    return {
        "wall_s": round(wall, 3),
        "first_line_s": round(first_line[0], 3) if first_line else None,
        "peak_rss_mb": round(peak / 2**20),
        "stderr": b"".join(captured["stderr"]).decode(),
    }


def thresher(*args: str) -> list[str]:
    return [PYTHON, "-c", LAUNCH, *args]


def server_url(home: Path) -> str:
    return json.loads((home / "thresher-server" / "server.json").read_text())["api_url"]


def task_runs_of_last_flow_run(env: dict[str, str]) -> int:
    """How many task runs the last curate flow run had (the bare flow gets as many)."""
    code = (
        "from prefect.client.orchestration import get_client\n"
        "from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId\n"
        "from prefect.client.schemas.sorting import FlowRunSort\n"
        "with get_client(sync_client=True) as c:\n"
        "    run = c.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)[0]\n"
        "    print(len(c.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))))\n"
    )
    found = subprocess.run(
        [PYTHON, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return int(found.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--code-root", type=Path, default=ROOT, help="checkout whose code runs")
    parser.add_argument("--tag", default="current", help="name of this side in the output")
    args = parser.parse_args()
    code = args.code_root.resolve()
    base = OUT / args.tag
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    home = base / "prefect-home"
    kept = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env = kept | {
        "PREFECT_HOME": str(home),
        "PYTHONPATH": str(code),
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    subprocess.run(
        thresher("init", str(base / "project")), env=env, check=True, capture_output=True
    )
    project = base / "project"
    config = "thresher.yaml"
    background = (code / "flows" / "server.py").exists()  # the code starts a shared server

    def stop_server() -> None:
        if background:
            subprocess.run(thresher("server", "stop", "--force"), env=env, capture_output=True)

    results: dict[str, list[dict]] = {}
    first = measure(thresher("run", "-c", config), env, project, served=True)
    results["first run, fresh Prefect home"] = [first]
    force = ["--force"] if background else []
    tasks = None
    if background:
        tasks = task_runs_of_last_flow_run(env | {"PREFECT_API_URL": server_url(home)})
        (base / "bare.py").write_text(BARE_FLOW)
    for round_ in range(args.repeats):
        print(f"round {round_ + 1} of {args.repeats}", file=sys.stderr)
        stop_server()
        sides = {
            "sample run, cold server": thresher("run", "-c", config, *force),
            "sample run, warm server": thresher("run", "-c", config, *force),
            "rerun, nothing changed": thresher("run", "-c", config),
            "thresher --help": thresher("--help"),
            "thresher config validate": thresher("config", "validate", config),
        }
        for name, command in sides.items():
            served = name.startswith("sample run")
            results.setdefault(name, []).append(measure(command, env, project, served))
        if tasks:
            bare_env = env | {"PREFECT_API_URL": server_url(home)}
            bare = measure([PYTHON, str(base / "bare.py"), str(tasks)], bare_env, project, True)
            results.setdefault(f"bare Prefect flow, {tasks} no-op tasks, warm server", []).append(
                bare
            )
    stop_server()
    table = {
        name: {
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "first_line_s": statistics.median(r["first_line_s"] or 0 for r in runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "runs": len(runs),
        }
        for name, runs in results.items()
    }
    (base / "figures.json").write_text(json.dumps(table, indent=2) + "\n")
    print(f"\n{args.tag} ({code}), median of {args.repeats}\n")
    print("| command | wall s | first line s | peak RSS MB (all processes) |")
    print("|---|---:|---:|---:|")
    for name, row in table.items():
        print(
            f"| {name} | {row['wall_s']:.2f} | {row['first_line_s']:.2f} | {row['peak_rss_mb']:,} |"
        )
    warm = table.get("sample run, warm server")
    floor = next((row for name, row in table.items() if name.startswith("bare")), None)
    if warm and floor:
        print(f"\nwarm sample run / bare flow: {warm['wall_s'] / floor['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
