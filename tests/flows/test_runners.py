"""The stages mapped over parts (per part, or by key): on the local runner's pool of
processes and on an existing Dask cluster, the same version, the same ledger and the same
merged stats as one part; how parts are sized from the data and the workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import cloudpickle
import pytest
import yaml
from dask.utils import key_split
from distributed import Client, WorkerPlugin
from helpers import sms_rows, write_jsonl
from prefect_services import free_port, survivors, user_env
from typer.testing import CliRunner

from flows.cli import app
from flows.runner import workers
from flows.runner.parts import MIN_PART_ROWS, PARTS_PER_WORKER, rows_per_part
from pipeline.config import RunnerConfig
from pipeline.core.errors import ThresherError

pytestmark = pytest.mark.usefixtures("prefect_server")
BIN = Path(sys.executable).parent
SIGNATURE = "Sent from my Thresher test phone: please do not reply to this automated message."
KEYED = (
    "exact_dedup", "near_dedup", "boilerplate", "semantic_dedup", "split", "synthetic", "augment"
)  # fmt: skip
OFF = ("semantic_dedup", "augment")  # off in this config: they run no task at all
ON = tuple(name for name in KEYED if name not in OFF)
# the keyed stages: their apply steps; contamination: its parts, checked against one index
BY_COMPONENT = ("exact_dedup", "near_dedup", "split")
PER_PART = ("govern", "quality", *ON, "contamination")
PART_ROWS = 280  # about 800 records: three parts, each step's tasks on both workers


def with_runner(config: Path, runner: dict, workdir: str) -> Path:
    settings = yaml.safe_load(config.read_text())
    settings.update(runner=runner, workdir=workdir)
    variant = config.with_name(f"{workdir.strip('./')}.yaml")
    variant.write_text(yaml.safe_dump(settings))
    return variant


def run_with(config: Path, runner: dict, workdir: str) -> dict:
    result = CliRunner().invoke(
        app, ["run", "--config", str(with_runner(config, runner, workdir)), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def untimed(stats: dict) -> dict:
    return {key: value for key, value in stats.items() if key != "seconds"}


def embedded_default_env(home: Path) -> dict[str, str]:
    """A user's shell whose background server keeps no task-run history and no events (~25
    ms of its CPU per task): nothing here reads them."""
    return user_env(
        home,
        PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED="false",
        PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED="false",
    )


class CrashOnFirstTask(WorkerPlugin):
    """Ends its worker's process, as the kernel's OOM killer would, when the first task of
    `prefix` starts there (the marker file makes it the first on any worker, once)."""

    def __init__(self, prefix: str, marker: str):
        self.prefix, self.marker = prefix, marker

    def setup(self, worker):
        self.address = worker.address

    def transition(self, key, start, finish, **kwargs):
        first = not os.path.exists(self.marker)
        if finish == "executing" and key_split(key) == self.prefix and first:
            Path(self.marker).write_text(self.address)
            os._exit(137)


def test_parts_on_processes_and_on_dask_publish_the_same_version(sms_project, sms_spam, tmp_path):
    with_key = {**sms_rows(sms_spam, 700, 701)[0], "id": "sms-with-key"}
    with_key["text"] = "the deploy key is AKIA" + "Z7XQ4MBN2VRC6TLE" + " keep it safe"
    write_jsonl(sms_project.parent / "data" / "sms-9.jsonl", [with_key])  # queued for review
    # one message in 20 signed alike, across every part: the signature is boilerplate
    signed = sms_rows(sms_spam, 0, 600)
    for row in signed[::20]:
        row["text"] += "\n\n" + SIGNATURE
    for row in signed[7::40]:  # a control character ingest cannot repair: quality drops it
        row["text"] += " \x07"
    # a copy in the last part of a message in the first, labelled otherwise: a label conflict
    # that only the whole of the exact dedup's keys can see
    conflict = {**signed[3], "id": "sms-copy-of-3", "sender": "sender-copy"}
    conflict["label"] = "spam" if signed[3]["label"] == "ham" else "ham"
    # an edited copy in the last part of the longest message in the first: only the whole of
    # the MinHash keys sees the pair, and the measuring crosses parts
    longest = max(signed[:90], key=lambda row: len(row["text"].split()))
    edited = {**longest, "id": "sms-edited-longest", "sender": "sender-edit"}
    edited["text"] = longest["text"] + " ok"
    signed += [conflict, edited]
    write_jsonl(sms_project.parent / "data" / "sms-1.jsonl", signed)
    # a protected set quoting long messages from every part: contamination is found in each
    quoted = [row for row in signed[::50] if len(row["text"].split()) >= 20]
    protected = write_jsonl(tmp_path / "quoted.jsonl", [{"text": r["text"]} for r in quoted])
    for workdir in ("work-whole", "work-parts", "work-dask"):
        registered = CliRunner().invoke(
            app,
            ["eval", "register", "quoted", str(protected), "-w", str(sms_project.parent / workdir)],
        )
        assert registered.exit_code == 0, registered.stderr
    whole = run_with(sms_project, {"kind": "local"}, "./work-whole")
    parts = run_with(
        sms_project, {"kind": "local", "part_rows": PART_ROWS, "workers": 2}, "./work-parts"
    )
    assert parts["dataset_hash"] == whole["dataset_hash"]
    assert parts["reasons"] == whole["reasons"] and parts["changes"] == whole["changes"]
    assert parts["review"] == whole["review"] and whole["review"]["queued_new"] > 0
    assert parts["quality"] == whole["quality"]  # counts, languages and nearest drops merged
    assert parts["dedup"]["boilerplate"] == whole["dedup"]["boilerplate"]
    assert parts["dedup"]["exact"] == whole["dedup"]["exact"]
    assert parts["dedup"]["minhash"] == whole["dedup"]["minhash"]
    assert untimed(parts["contamination"]) == untimed(whole["contamination"])
    assert whole["contamination"]["eval_sets"]["quoted"]["contaminated_items"] >= 3
    assert whole["dedup"]["exact"]["dropped"] > 5
    assert whole["dedup"]["minhash"]["dropped"] >= 1
    assert whole["dedup"]["exact"]["label_conflicts"]["queued"] >= 1
    assert whole["dedup"]["boilerplate"]["edited"] >= 25
    assert whole["dedup"]["boilerplate"]["top"][0]["documents"] >= 25
    assert whole["quality"]["nearest_to_bound"] and whole["quality"]["languages"]["en"] > 0
    for name in OFF:
        assert parts["steps"][name]["parts"] == 0
        assert parts["steps"][name]["records_in"] == parts["steps"][name]["records_out"]
    for name in PER_PART:
        records = parts["steps"][name]["records_in"]
        assert whole["steps"][name]["parts"] == 1
        count = parts["steps"][name]["parts"]
        assert count == -(-records // PART_ROWS) > 1  # equal parts of at most PART_ROWS
        assert parts["steps"][name]["largest_part_records"] == -(-records // count)
        assert parts["steps"][name]["part_peak_rss_mb"] > 50

    # an existing cluster whose workers have no Prefect API of their own (steps are plain
    # functions: they never call it) and start no server; one worker dies at the start of the
    # keyed stage's reduce, its nanny starts it again, and the step runs elsewhere
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import it
    killed = tmp_path / "killed-worker"
    home = tmp_path / "prefect-home"
    env = embedded_default_env(home)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen(
        [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers = subprocess.Popen(
        [BIN / "dask", "worker", address, "--nworkers", "2", "--nthreads", "1", "--no-dashboard"],
        env=env, cwd=sms_project.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            client.register_plugin(CrashOnFirstTask("reduce_task", str(killed)))
            variant = with_runner(
                sms_project,
                {"kind": "dask", "address": address, "part_rows": PART_ROWS},
                "./work-dask",
            )
            run = subprocess.run(
                [BIN / "thresher", "run", "--config", str(variant), "--json"],
                env=env, cwd=sms_project.parent, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert run.returncode == 0, run.stderr[-3000:]
            servers = [p for p in survivors(home) if "server" in " ".join(p.cmdline())]
            # the run's background server (flows/server.py), and no worker started one
            assert [" ".join(p.cmdline()[1:3]) for p in servers] == ["-m flows.server"]
            ran = client.run_on_scheduler(
                lambda dask_scheduler: {
                    name: prefix.state_counts["memory"]  # tasks that finished with a result
                    for name, prefix in dask_scheduler.task_prefixes.items()
                }
            )
    finally:
        for process in (workers, scheduler):
            process.terminate()
            process.wait(timeout=30)
        subprocess.run([BIN / "thresher", "server", "stop", "--force"], env=env, timeout=60)
    on_dask = json.loads(run.stdout)
    assert on_dask["dataset_hash"] == whole["dataset_hash"]
    assert on_dask["reasons"] == whole["reasons"] and on_dask["quality"] == whole["quality"]
    for method in ("exact", "minhash", "boilerplate"):
        assert on_dask["dedup"][method] == whole["dedup"][method]
    assert untimed(on_dask["contamination"]) == untimed(whole["contamination"])
    keyed = sum(parts["steps"][name]["key_partitions"] for name in ON)
    assert keyed == sum(parts["steps"][name]["parts"] for name in ON)
    assert killed.exists(), "no worker was killed"
    by_component = {name: parts["steps"][name] for name in BY_COMPONENT}
    assert all(s["component_rounds"] >= 1 for s in by_component.values())
    assert ran == {
        "part_task": sum(parts["steps"][name]["parts"] for name in PER_PART),
        "keys_task": keyed,
        "reduce_task": keyed,
        # the global steps run on the workers too: the run's process holds no dataset state
        "decide_task": len(ON) - len(BY_COMPONENT),
        # exact and near dedup and split decide by component: the edges of what their last
        # step found and their parts' members sent to node partitions, star rounds over them,
        # each node partition's members labelled, each component partition resolved; then near
        # dedup's parts send the kept records' sketches to the parts that asked for them
        **{
            f"{step}_task": sum(by_component[name]["parts"] for name in BY_COMPONENT)
            for step in ("edges", "members", "label", "resolve")
        },
        "star_task": sum(2 * s["component_rounds"] * s["parts"] for s in by_component.values()),
        "evidence_task": by_component["near_dedup"]["parts"],
        "build_task": 1,  # contamination's index
        # (no sample or fit: only semantic dedup and augment fit a model first)
        # ingest: a task per part of the files, one that drops repeated ids
        "read_task": parts["steps"]["ingest"]["parts"],
        "finish_task": 1,
        "check_task": 2,  # no value in two splits after split, and after synthetic (augment: off)
        "exchange_task": 2 * parts["steps"]["near_dedup"]["parts"],  # gather, measure
        # publish: each part's records routed to their shards, each shard written
        "route_task": parts["steps"]["publish"]["parts"],
        "shard_task": parts["steps"]["publish"]["shards"],
    }
    assert parts["steps"]["publish"]["parts"] > 1
    assert all(parts["steps"][name]["decide_peak_rss_mb"] > 0 for name in ON)
    assert parts["steps"]["contamination"]["build_peak_rss_mb"] > 0


def test_a_dask_runner_without_address_runs_on_one_cluster_of_its_own_that_ends_with_the_run():
    runner = RunnerConfig(kind="dask", workers=2, part_rows=97, memory_limit="1.5GiB")
    with workers.opened(runner) as on_dask:
        assert workers.current() is on_dask and on_dask.count == 2
        assert on_dask.address.startswith("tcp://127.0.0.1:")
        with Client(on_dask.address, timeout=10) as client:
            threads = client.nthreads()
            found = client.scheduler_info()["workers"].values()
        # steps run there, not here: a step records that it ran on a worker
        assert dict(on_dask.map(workers.in_worker, [{}, {}])) == {0: True, 1: True}
    assert sorted(threads.values()) == [1, 1]  # two workers, one task at a time each
    assert [worker["memory_limit"] for worker in found] == [1.5 * 2**30] * 2
    with pytest.raises(OSError):  # the scheduler stopped with the run
        Client(on_dask.address, timeout=2)
    # outside a run, steps run in the caller's process
    assert dict(workers.current().map(os.getpid, [{}])) == {0: os.getpid()}


def test_the_local_runner_runs_steps_on_a_pool_of_processes_or_here_with_one_worker():
    with workers.opened(RunnerConfig(kind="local", workers=2)) as pool:
        assert pool.count == 2
        ran = dict(pool.map(os.getpid, [{}] * 6))
        assert sorted(ran) == list(range(6)) and os.getpid() not in ran.values()
        assert dict(pool.map(workers.in_worker, [{}])) == {0: True}
        # each process computes on its share of the cores (unless the environment says how
        # many): torch's default, every core in every process, oversubscribes them
        share = os.environ.get("OMP_NUM_THREADS", str(workers.thread_share(2)))
        expected = (share, int(share), frozenset({int(share)}))
        assert set(dict(pool.map(_compute_threads, [{}] * 4)).values()) == {expected}
        with pytest.raises(ThresherError, match="a worker process of this run ended while"):
            list(pool.map(partial(os._exit, 137), [{}]))  # as the OOM killer ends one
    with workers.opened(RunnerConfig(kind="local", workers=1)) as alone:
        assert alone.count == 1 and dict(alone.map(os.getpid, [{}])) == {0: os.getpid()}


def _compute_threads() -> tuple[str, int, frozenset[int]]:
    """A pool process's OMP_NUM_THREADS, torch's threads and those of its BLAS and OpenMP
    libraries loaded before torch (numpy's)."""
    import torch
    from threadpoolctl import threadpool_info

    loaded = frozenset(pool["num_threads"] for pool in threadpool_info())
    return os.environ["OMP_NUM_THREADS"], torch.get_num_threads(), loaded


def test_a_process_share_of_the_cores_is_at_least_one_thread():
    cores = len(os.sched_getaffinity(0))
    assert workers.thread_share(1) == cores
    assert workers.thread_share(cores * 4) == 1


def test_parts_are_sized_from_the_records_and_the_workers_within_their_bounds():
    # several parts per worker once a stage has enough records for parts worth their cost
    assert rows_per_part(250_000, 2, 500_000) == 250_000 // (2 * PARTS_PER_WORKER)
    assert rows_per_part(1_000_000, 4, 500_000) == 1_000_000 // (4 * PARTS_PER_WORKER)
    # a small stage is one part; more workers never make parts smaller than the floor
    assert rows_per_part(3_000, 2, 500_000) == 3_000
    assert rows_per_part(100_000, 64, 500_000) == MIN_PART_ROWS
    assert rows_per_part(0, 2, 500_000) == 1  # one empty part
    # a stage's parts are equal: not 5,000 and 182 (the stage waits on its largest part)
    assert rows_per_part(5_182, 2, 500_000) == 2_591
    # runner.part_rows bounds a part's memory: it wins over the sizing, also below the floor
    assert rows_per_part(10_000_000, 2, 500_000) == 500_000
    assert rows_per_part(800, 2, 280) == 267  # three equal parts


@pytest.mark.parametrize(
    "runner",
    [
        {"kind": "local", "memory_limit": "4GiB"},
        {"kind": "dask", "address": "tcp://10.0.0.5:8786", "memory_limit": "4GiB"},
        {"kind": "dask", "memory_limit": "lots"},
    ],
)
def test_a_worker_memory_limit_is_only_for_a_temporary_cluster_and_in_bytes(runner):
    with pytest.raises(ValueError, match="memory_limit"):
        RunnerConfig(**runner)
